//! A var's queue of ops not granted yet, in push order.
//!
//! Why not a plain `VecDeque`: its entries live in a heap buffer apart from
//! the var's lock. A completion that locks the var and looks at the queue's
//! head then takes two cache misses in a row (the lock's line, then the
//! buffer's, both last written by the pushing thread on another core), and
//! the pusher takes the buffer's line back for its next append. Most queues
//! stay short (a wavefront's var has at most two reads queued behind its
//! write), so a queue starts *inline*: up to [`HEAD`] entries on the lock's
//! line. The first time a third op is queued it becomes a `VecDeque` and
//! stays one, so a var that has had a long queue (a chain, many readers)
//! costs what it did before, with no switching back and forth. Both forms
//! share the same 32 bytes: the enum keeps its tag in a value the deque's
//! capacity cannot take, which the size test below checks.
//!
//! An entry is the op's block address with the access in its low bit: op
//! blocks are 64-byte aligned, so the bit is free, and an entry takes one
//! word instead of two.

use std::collections::VecDeque;
use std::num::NonZeroUsize;
use std::ptr::NonNull;

use super::super::op::{OpBlock, OpPtr};
use super::queue_pool::QueuePool;
use super::Access;
use crate::sync::Arc;

/// Entries kept on the var's own cache line.
pub(crate) const HEAD: usize = 2;

/// Low bit of an entry: the op writes the var.
const WRITE: usize = 1;

/// One queued op and how it uses the var.
#[derive(Clone, Copy)]
pub(crate) struct Entry(NonZeroUsize);

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
pub(crate) enum OpQueue {
    /// At most [`HEAD`] ops, front first, packed to the left.
    Inline([Option<Entry>; HEAD]),
    /// Since the queue first held more than [`HEAD`] ops.
    Deque(VecDeque<Entry>),
}

impl OpQueue {
    pub(crate) const fn new() -> Self {
        OpQueue::Inline([None; HEAD])
    }

    /// No op is queued.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            OpQueue::Inline(h) => h[0].is_none(),
            OpQueue::Deque(d) => d.is_empty(),
        }
    }

    /// Queues `op` behind every op queued so far. A queue that outgrows
    /// its inline head takes its deque's buffer from `pool` when it has one.
    /// (`pool` is the var's field itself, read only when the queue spills:
    /// it lives on the var's read-only line, which an append does not
    /// otherwise read.)
    #[inline]
    pub(crate) fn push_back(&mut self, op: OpPtr, access: Access, pool: &Option<Arc<QueuePool>>) {
        let e = Entry::new(op, access);
        match self {
            OpQueue::Inline(h) => match h.iter_mut().find(|x| x.is_none()) {
                Some(free) => *free = Some(e),
                None => self.spill(e, pool),
            },
            OpQueue::Deque(d) => d.push_back(e),
        }
    }

    /// A full head and one more op: from now on a deque.
    #[cold]
    #[inline(never)]
    fn spill(&mut self, e: Entry, pool: &Option<Arc<QueuePool>>) {
        let OpQueue::Inline(h) = self else {
            unreachable!("only an inline queue spills");
        };
        let mut d = pool
            .as_deref()
            .and_then(QueuePool::take)
            .unwrap_or_else(|| VecDeque::with_capacity(2 * (HEAD + 1)));
        debug_assert!(d.is_empty(), "a pooled buffer still held entries");
        d.extend(h.iter().flatten().copied());
        d.push_back(e);
        *self = OpQueue::Deque(d);
    }

    /// The op at the front, the next to be granted.
    #[inline]
    pub(crate) fn front(&self) -> Option<(OpPtr, Access)> {
        match self {
            OpQueue::Inline(h) => h[0],
            OpQueue::Deque(d) => d.front().copied(),
        }
        .map(Entry::get)
    }

    /// Takes the op at the front.
    #[inline]
    pub(crate) fn pop_front(&mut self) -> Option<(OpPtr, Access)> {
        match self {
            OpQueue::Inline(h) => {
                let first = h[0]?;
                h.copy_within(1.., 0);
                h[HEAD - 1] = None;
                Some(first)
            }
            OpQueue::Deque(d) => d.pop_front(),
        }
        .map(Entry::get)
    }

    /// The deque's buffer, once the queue has become one, for the pool
    /// (`queue_pool.rs`).
    pub(crate) fn into_deque(self) -> Option<VecDeque<Entry>> {
        match self {
            OpQueue::Inline(_) => None,
            OpQueue::Deque(d) => Some(d),
        }
    }

    /// The queued ops, front first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (OpPtr, Access)> + '_ {
        let (head, deque): (&[Option<Entry>], _) = match self {
            OpQueue::Inline(h) => (h, None),
            OpQueue::Deque(d) => (&[], Some(d)),
        };
        let rest = deque.into_iter().flatten();
        head.iter().flatten().chain(rest).map(|e| e.get())
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

    /// Against a plain `VecDeque` under fixed sequences of pushes and
    /// pops, each on a fresh queue that starts inline, grows past the head
    /// (and so becomes a deque) and drains many times.
    #[test]
    fn keeps_push_order_inline_across_the_spill_and_as_a_deque() {
        let (_blocks, ptrs) = ops(64);
        for mut seed in 1..=8u64 {
            let mut q = OpQueue::new();
            let mut model: VecDeque<(OpPtr, Access)> = VecDeque::new();
            let mut next = 0;
            let (mut drained, mut longest) = (0, 0);
            for step in 0..1000 {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                // Inline at first (short queues only), then phases that
                // grow the queue and phases that drain it.
                let bias = match step {
                    0..=199 => 2,
                    _ if (step / 50) % 2 == 0 => 4,
                    _ => 1,
                };
                let push = (seed >> 33) % 5 < bias && model.len() < ptrs.len() - 1;
                if model.is_empty() {
                    drained += 1;
                }
                longest = longest.max(model.len());
                if push && (step >= 200 || model.len() < HEAD) {
                    let op = ptrs[next % ptrs.len()];
                    let a = access(next);
                    next += 1;
                    q.push_back(op, a, &None);
                    model.push_back((op, a));
                } else {
                    assert_eq!(q.pop_front(), model.pop_front());
                }
                if step == 199 {
                    assert!(
                        matches!(q, OpQueue::Inline(_)),
                        "seed {seed}: spilled early"
                    );
                }
                assert_eq!(q.is_empty(), model.is_empty());
                assert_eq!(q.front(), model.front().copied());
                assert!(q.iter().eq(model.iter().copied()));
            }
            assert!(drained > 10, "the queue drained only {drained} times");
            assert!(longest > 4 * HEAD, "the queue grew to {longest} ops only");
            assert!(matches!(q, OpQueue::Deque(_)));
            while let Some(x) = model.pop_front() {
                assert_eq!(q.pop_front(), Some(x));
            }
            assert!(q.is_empty());
            assert_eq!(q.pop_front(), None);
        }
    }

    #[test]
    fn a_queue_of_at_most_two_ops_stays_inline() {
        let (_blocks, ptrs) = ops(HEAD);
        let mut q = OpQueue::new();
        for round in 0..10 {
            for (i, &op) in ptrs.iter().enumerate() {
                q.push_back(op, access(i + round), &None);
            }
            while q.pop_front().is_some() {}
        }
        assert!(matches!(q, OpQueue::Inline(_)));
    }

    /// A queue that outgrows its head takes the pool's buffer (its
    /// capacity, far above a fresh deque's) and keeps push order in it.
    #[cfg(not(loom))]
    #[test]
    fn a_spilling_queue_takes_the_pools_buffer() {
        let (_blocks, ptrs) = ops(HEAD + 2);
        let pool = Some(Arc::new(QueuePool::new(1 << 12)));
        let kept = pool.as_deref().expect("made above");
        kept.give(VecDeque::with_capacity(1000));
        let mut q = OpQueue::new();
        for (i, &op) in ptrs.iter().enumerate() {
            q.push_back(op, access(i), &pool);
        }
        assert_eq!(kept.kept(), (0, 0), "the pooled buffer was not taken");
        assert!(q
            .iter()
            .eq(ptrs.iter().enumerate().map(|(i, &p)| (p, access(i)))));
        let d = q.into_deque().expect("past the head: a deque");
        assert!(d.capacity() >= 1000);
    }

    #[cfg(not(loom))]
    #[test]
    fn the_var_lock_and_the_whole_queue_share_one_cache_line() {
        // Both forms in 32 bytes (the enum's tag in the deque's capacity),
        // and the lock, the var's state, the queue and the fast-read
        // counter in one line.
        assert_eq!(std::mem::size_of::<OpQueue>(), 32);
        assert!(std::mem::size_of::<super::super::VarHot>() <= 64);
    }
}
