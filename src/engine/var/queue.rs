//! A var's queue of ops not granted yet, in push order.
//!
//! Why not a plain `VecDeque`: its entries live in a heap buffer apart from
//! the var's lock. A completion that locks the var and looks at the queue's
//! head then takes two cache misses in a row (the lock's line, then the
//! buffer's, both last written by the pushing thread on another core), and
//! the pusher takes the buffer's line back for its next append. Most queues
//! are short (a wavefront's var has at most two reads queued behind its
//! write), so up to [`HEAD`] entries live inline, on the lock's line; a
//! longer queue moves to a boxed deque, whose length is kept inline too,
//! so that a queue that never grows past the head never touches it.
//!
//! An entry is the op's block address with the access in its low bit: op
//! blocks are 64-byte aligned, so the bit is free, and an entry takes one
//! word instead of two.

use std::collections::VecDeque;
use std::num::NonZeroUsize;
use std::ptr::NonNull;

use super::super::op::{OpBlock, OpPtr};
use super::Access;

/// Entries kept on the var's own cache line.
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
/// Two modes: while at most [`HEAD`] ops are queued they sit in `head`;
/// once more are, all of them move to the boxed `rest`, and stay there
/// until it drains, so a long queue costs what a `VecDeque` does.
/// `rest_len` (0 in the inline mode) tells the modes apart without
/// touching the box.
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
        self.rest_len == 0 && self.head[0].is_none()
    }

    /// Queues `op` behind every op queued so far.
    #[inline]
    pub(crate) fn push_back(&mut self, op: OpPtr, access: Access) {
        let e = Entry::new(op, access);
        if self.rest_len == 0 {
            if let Some(free) = self.head.iter_mut().find(|h| h.is_none()) {
                *free = Some(e);
                return;
            }
        }
        self.push_rest(e);
    }

    /// Past the head: the head's ops move to the rest first (once per
    /// long queue), so the rest holds the whole queue in order.
    #[inline(never)]
    fn push_rest(&mut self, e: Entry) {
        let rest = self.rest.get_or_insert_with(Default::default);
        if self.rest_len == 0 {
            rest.extend(self.head.iter_mut().filter_map(Option::take));
            self.rest_len = HEAD;
        }
        rest.push_back(e);
        self.rest_len += 1;
    }

    /// The op at the front, the next to be granted.
    #[inline]
    pub(crate) fn front(&self) -> Option<(OpPtr, Access)> {
        let e = if self.rest_len > 0 {
            self.rest().front().copied()
        } else {
            self.head[0]
        };
        e.map(Entry::get)
    }

    /// Takes the op at the front.
    #[inline]
    pub(crate) fn pop_front(&mut self) -> Option<(OpPtr, Access)> {
        if self.rest_len > 0 {
            self.rest_len -= 1;
            let rest = self.rest.as_mut().expect("rest_len counts the boxed rest");
            return rest.pop_front().map(Entry::get);
        }
        let first = self.head[0]?;
        self.head.copy_within(1.., 0);
        self.head[HEAD - 1] = None;
        Some(first.get())
    }

    fn rest(&self) -> &VecDeque<Entry> {
        self.rest.as_ref().expect("rest_len counts the boxed rest")
    }

    /// The queued ops, front first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (OpPtr, Access)> + '_ {
        let rest = self.rest.iter().flat_map(|r| r.iter());
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
        let (mut drained, mut longest) = (0, 0);
        for step in 0..4000 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Phases that grow the queue past the head and phases that
            // drain it, so it changes mode both ways many times.
            let bias = if (step / 50) % 2 == 0 { 4 } else { 1 };
            let push = (seed >> 33) % 5 < bias;
            if model.is_empty() {
                drained += 1;
            }
            longest = longest.max(model.len());
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
        assert!(drained > 20, "the queue drained only {drained} times");
        assert!(longest > 4 * HEAD, "the queue grew to {longest} ops only");
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
