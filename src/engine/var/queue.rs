//! A var's queue of ops not granted yet, in push order.
//!
//! Why not a plain `VecDeque`: its entries live in a heap buffer apart from
//! the var's lock. A completion that locks the var and looks at the queue's
//! head then takes two cache misses in a row (the lock's line, then the
//! buffer's, both last written by the pushing thread on another core), and
//! the pusher takes the buffer's line back for its next append. Most queues
//! are short (a wavefront's var has at most two reads queued behind its
//! write), so the first [`HEAD`] entries live inline, on the lock's line;
//! only ops queued behind a full head go to a boxed deque, whose length is
//! kept inline too, so that a queue that never spills never touches it.
//!
//! An entry is the op's block address with the access in its low bit: op
//! blocks are 64-byte aligned, so the bit is free, and an entry takes one
//! word instead of two.

use std::collections::VecDeque;
use std::num::NonZeroUsize;
use std::ptr::NonNull;

use super::super::op::{OpBlock, OpPtr};
use super::Access;

/// Entries kept on the var's own cache line (`push_back` and `pop_front`
/// spell out the two).
const HEAD: usize = 2;

/// Low bit of an entry: the op writes the var.
const WRITE: usize = 1;

/// One queued op and how it uses the var.
#[derive(Clone, Copy)]
struct Entry(NonZeroUsize);

impl Entry {
    fn new(op: OpPtr, access: Access) -> Self {
        let addr = op.0.as_ptr() as usize;
        debug_assert_eq!(addr & WRITE, 0, "op blocks are 64-byte aligned");
        let tagged = match access {
            Access::Read => addr,
            Access::Write => addr | WRITE,
        };
        Entry(NonZeroUsize::new(tagged).expect("an op block's address is not null"))
    }

    fn get(self) -> (OpPtr, Access) {
        let raw = self.0.get();
        let access = if raw & WRITE != 0 {
            Access::Write
        } else {
            Access::Read
        };
        let ptr = (raw & !WRITE) as *mut OpBlock;
        // The untagged address is the block's, which is not null.
        let op = OpPtr(NonNull::new(ptr).expect("an op block's address is not null"));
        (op, access)
    }
}

/// The ops queued on a var, in push order (see the module docs).
///
/// Invariant: the boxed rest holds entries only while the head is full, so
/// the queue's order is the head, then the rest.
pub(crate) struct OpQueue {
    head: [Option<Entry>; HEAD],
    rest_len: usize,
    // Boxed on purpose: a `VecDeque` inline would take half of the var's
    // line, pushing the head off it; the box is one word.
    #[allow(clippy::box_collection)]
    rest: Option<Box<VecDeque<Entry>>>,
}

impl OpQueue {
    pub(crate) const fn new() -> Self {
        OpQueue {
            head: [None; HEAD],
            rest_len: 0,
            rest: None,
        }
    }

    /// No op is queued.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.head[0].is_none()
    }

    /// Queues `op` behind every op queued so far.
    #[inline]
    pub(crate) fn push_back(&mut self, op: OpPtr, access: Access) {
        let e = Entry::new(op, access);
        if self.rest_len == 0 {
            if self.head[0].is_none() {
                self.head[0] = Some(e);
                return;
            }
            if self.head[1].is_none() {
                self.head[1] = Some(e);
                return;
            }
        }
        self.push_rest(e);
    }

    /// Behind a full head: kept out of line, so that the short-queue path
    /// above inlines into the appends.
    #[cold]
    #[inline(never)]
    fn push_rest(&mut self, e: Entry) {
        self.rest.get_or_insert_with(Default::default).push_back(e);
        self.rest_len += 1;
    }

    /// The op at the front, the next to be granted.
    #[inline]
    pub(crate) fn front(&self) -> Option<(OpPtr, Access)> {
        self.head[0].map(Entry::get)
    }

    /// Takes the op at the front.
    #[inline]
    pub(crate) fn pop_front(&mut self) -> Option<(OpPtr, Access)> {
        let first = self.head[0]?;
        self.head[0] = self.head[1];
        self.head[1] = if self.rest_len > 0 {
            self.pop_rest()
        } else {
            None
        };
        Some(first.get())
    }

    #[inline(never)]
    fn pop_rest(&mut self) -> Option<Entry> {
        let rest = self.rest.as_mut().expect("rest_len counts the boxed rest");
        self.rest_len -= 1;
        rest.pop_front()
    }

    /// The queued ops, front first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (OpPtr, Access)> + '_ {
        let rest = self.rest.iter().flat_map(|r| r.iter()).take(self.rest_len);
        self.head.iter().flatten().chain(rest).map(|e| e.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::op::OpBlock;

    /// Distinct, 64-byte aligned block addresses (never dereferenced).
    fn ops(n: usize) -> (Vec<OpBlock>, Vec<OpPtr>) {
        let blocks: Vec<OpBlock> = (0..n).map(|_| OpBlock::empty()).collect();
        let ptrs = blocks.iter().map(|b| OpPtr(NonNull::from(b))).collect();
        (blocks, ptrs)
    }

    fn access(i: usize) -> Access {
        if i % 3 == 0 {
            Access::Write
        } else {
            Access::Read
        }
    }

    /// Against a plain `VecDeque` under a fixed sequence of pushes and
    /// pops that crosses the head's size both ways many times.
    #[test]
    fn keeps_push_order_across_the_inline_head_and_the_rest() {
        let (_blocks, ptrs) = ops(64);
        let mut q = OpQueue::new();
        let mut model: VecDeque<(OpPtr, Access)> = VecDeque::new();
        let mut next = 0;
        let mut seed = 7u64;
        for _ in 0..2000 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let push = (seed >> 33) % 5 < 3 || model.is_empty();
            if push && model.len() < ptrs.len() - 1 {
                let op = ptrs[next % ptrs.len()];
                let a = access(next);
                next += 1;
                q.push_back(op, a);
                model.push_back((op, a));
            } else {
                assert_eq!(q.pop_front(), model.pop_front());
            }
            assert_eq!(q.is_empty(), model.is_empty());
            assert_eq!(q.front(), model.front().copied());
            assert!(q.iter().eq(model.iter().copied()));
        }
        while let Some(x) = model.pop_front() {
            assert_eq!(q.pop_front(), Some(x));
        }
        assert!(q.is_empty());
        assert_eq!(q.pop_front(), None);
    }

    #[test]
    fn a_short_queue_never_allocates_its_rest() {
        let (_blocks, ptrs) = ops(HEAD);
        let mut q = OpQueue::new();
        for round in 0..10 {
            for (i, &op) in ptrs.iter().enumerate() {
                q.push_back(op, access(i + round));
            }
            while q.pop_front().is_some() {}
        }
        assert!(q.rest.is_none());
    }

    #[cfg(not(loom))]
    #[test]
    fn the_var_lock_and_the_queue_head_share_one_cache_line() {
        assert!(std::mem::size_of::<super::super::VarHot>() <= 64);
    }
}
