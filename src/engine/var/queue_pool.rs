//! Deque buffers of freed vars' queues, kept for the next vars whose
//! queues outgrow their inline head.
//!
//! Why: a var's queue becomes a `VecDeque` the first time a third op waits
//! on it (`queue.rs`) and grows by doubling while the pushing thread runs
//! ahead of the workers. A program that makes new vars for every step (an
//! NDArray per output, as MXNet's users do; the bench's vars, new in every
//! run) paid that growth again on every step: each var's buffer went
//! through some ten reallocations, with their copies and page faults, all
//! on the pushing thread and mostly under the var's lock. MXNet's engine
//! takes the blocks of its per-var lists from an object pool for the same
//! reason.
//!
//! The pool is the engine's, bounded by the entries its buffers can hold
//! (`EngineBuilder::pooled_queue_entries`), and never waits: a lock held
//! by another thread means the buffer is freed, or allocated, as before.

use std::collections::VecDeque;

use crate::sync::unmodelled::Mutex;

use super::queue::Entry;

/// Buffers of freed queues, most recently freed last.
pub(crate) struct QueuePool {
    free: Mutex<Free>,
    /// Most entries the kept buffers may hold together.
    max_entries: usize,
}

struct Free {
    buffers: Vec<VecDeque<Entry>>,
    /// Entries the buffers in `buffers` can hold together.
    entries: usize,
}

impl QueuePool {
    /// A pool that keeps buffers of at most `max_entries` entries in all
    /// (0: keeps none).
    pub(crate) fn new(max_entries: usize) -> Self {
        QueuePool {
            free: Mutex::new(Free {
                buffers: Vec::new(),
                entries: 0,
            }),
            max_entries,
        }
    }

    /// An empty buffer that once held a freed var's queue, if one is kept
    /// and no other thread is using the pool right now.
    pub(crate) fn take(&self) -> Option<VecDeque<Entry>> {
        let mut free = self.free.try_lock()?;
        let d = free.buffers.pop()?;
        free.entries -= d.capacity();
        Some(d)
    }

    /// Keeps `d` (emptied) for a later [`QueuePool::take`], unless that
    /// would pass the pool's bound or another thread is using the pool:
    /// then `d` is freed.
    pub(crate) fn give(&self, mut d: VecDeque<Entry>) {
        let cap = d.capacity();
        if cap == 0 || cap > self.max_entries {
            return;
        }
        let Some(mut free) = self.free.try_lock() else {
            return;
        };
        if free.entries + cap > self.max_entries {
            return;
        }
        d.clear();
        free.entries += cap;
        free.buffers.push(d);
    }

    /// Buffers kept and the entries they can hold together, for tests.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn kept(&self) -> (usize, usize) {
        let free = self.free.lock();
        (free.buffers.len(), free.entries)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::engine::op::{OpBlock, OpPtr};
    use crate::engine::var::Access;
    use std::ptr::NonNull;

    fn deque(cap: usize) -> VecDeque<Entry> {
        VecDeque::with_capacity(cap)
    }

    #[test]
    fn keeps_buffers_up_to_its_bound_and_hands_back_the_last_kept() {
        let pool = QueuePool::new(100);
        assert!(pool.take().is_none());
        let (a, b) = (deque(40), deque(50));
        let (cap_a, cap_b) = (a.capacity(), b.capacity());
        assert!(cap_a + cap_b <= 100, "the allocator rounded up too far");
        pool.give(a);
        pool.give(b);
        assert_eq!(pool.kept(), (2, cap_a + cap_b));
        // One more would pass the bound: freed instead.
        pool.give(deque(100 - cap_a - cap_b + 1));
        assert_eq!(pool.kept(), (2, cap_a + cap_b));
        let last = pool.take().expect("a buffer is kept");
        assert_eq!(last.capacity(), cap_b);
        assert_eq!(pool.kept(), (1, cap_a));
        assert_eq!(pool.take().map(|d| d.capacity()), Some(cap_a));
        assert!(pool.take().is_none());
        assert_eq!(pool.kept(), (0, 0));
    }

    #[test]
    fn a_kept_buffer_comes_back_empty() {
        let block = OpBlock::empty();
        let op = OpPtr(NonNull::from(&block));
        let pool = QueuePool::new(1 << 10);
        let mut q = super::super::queue::OpQueue::new();
        for _ in 0..10 {
            q.push_back(op, Access::Read, &None);
        }
        let d = q.into_deque().expect("ten ops make a deque");
        assert_eq!(d.len(), 10);
        pool.give(d);
        let d = pool.take().expect("kept");
        assert!(d.is_empty());
        assert!(d.capacity() >= 10);
    }

    /// Holds `v` with a write whose body waits for the returned sender,
    /// then queues `ops` more writes behind it.
    fn queue_behind_a_held_write(
        engine: &crate::Engine,
        v: &crate::Var,
        ops: usize,
    ) -> std::sync::mpsc::Sender<()> {
        use crate::OpDesc;
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let held = OpDesc::new("held").writes(v);
        engine
            .push(held, move |_| {
                wait.recv().expect("the test sends before it waits");
                Ok(())
            })
            .unwrap();
        for _ in 0..ops {
            engine.push(OpDesc::new("w").writes(v), |_| Ok(())).unwrap();
        }
        go
    }

    /// Through the engine: a freed var's grown buffer is kept, the next
    /// var whose queue outgrows its head takes it (the very buffer: same
    /// capacity, not a fresh small one), and it comes back when that var
    /// is freed. With a bound of 0 nothing is kept, and the ops still run.
    #[test]
    fn a_freed_vars_queue_buffer_goes_to_the_next_var_that_needs_one() {
        for bound in [crate::DEFAULT_POOLED_QUEUE_ENTRIES, 0] {
            let engine = crate::Engine::builder()
                .cpu_workers(1)
                .pooled_queue_entries(bound)
                .build()
                .unwrap();
            let pool = engine.core().queue_pool();
            let v = engine.new_var();
            queue_behind_a_held_write(&engine, &v, 100)
                .send(())
                .unwrap();
            engine.wait_for_all().unwrap();
            assert_eq!(v.version(), 101);
            assert_eq!(pool.kept(), (0, 0), "kept while its var lives");
            drop(v);
            let (n, cap) = pool.kept();
            if bound == 0 {
                assert_eq!((n, cap), (0, 0));
            } else {
                assert_eq!(n, 1, "the freed var's buffer is not kept");
                assert!(cap >= 100, "a buffer of {cap} entries held 100 ops");
            }
            let w = engine.new_var();
            let go = queue_behind_a_held_write(&engine, &w, 3);
            assert_eq!(pool.kept(), (0, 0), "the new queue took no buffer");
            go.send(()).unwrap();
            engine.wait_for_all().unwrap();
            assert_eq!(w.version(), 4);
            drop(w);
            assert_eq!(pool.kept(), (n, cap), "not the same buffer back");
        }
    }

    #[test]
    fn a_pool_of_no_entries_keeps_nothing() {
        let pool = QueuePool::new(0);
        pool.give(deque(8));
        assert_eq!(pool.kept(), (0, 0));
        assert!(pool.take().is_none());
    }

    #[test]
    fn a_busy_pool_frees_instead_of_waiting() {
        let pool = QueuePool::new(1 << 10);
        pool.give(deque(8));
        let held = pool.free.lock();
        // Neither waits for the lock another thread holds.
        assert!(pool.take().is_none());
        pool.give(deque(8));
        drop(held);
        assert_eq!(pool.kept().0, 1);
    }
}
