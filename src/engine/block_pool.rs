//! Recycling of op blocks: no heap allocation per op in the steady state.
//!
//! Blocks are taken by pushing threads and given back by the threads that
//! complete ops — usually different threads. Handing blocks back one at a
//! time through a shared queue would move a cache line between them for
//! every op; instead each thread keeps a small cache, and full batches of
//! blocks travel through the engine's shared list under one short lock per
//! batch. A thread that both pushes and completes (the naive executor) reuses
//! its own blocks without touching the shared list at all.
//!
//! The shared list keeps at most `EngineBuilder::pooled_op_blocks` blocks;
//! a full batch beyond that is freed by the thread that completed its ops.
//! The limit is high by default: a pusher far ahead of its workers (a
//! million ops pending) would otherwise allocate a block per push while the
//! workers free one per completion, both on the hot path.
//!
//! The per-thread cache holds plain reset blocks, which carry nothing of the
//! engine that used them, so it is shared by every engine a thread touches;
//! the shared batch list belongs to one engine. Under loom blocks are simply
//! allocated and dropped: the model is about the var protocol, not reuse.

use super::op::OpBlock;

/// Blocks moved between a thread's cache and the shared list at once.
#[cfg(not(loom))]
const BATCH: usize = 64;

#[cfg(not(loom))]
// Blocks are boxed on purpose: var queues hold pointers to them, so a block
// must never move when the list that owns it grows.
#[allow(clippy::vec_box)]
mod imp {
    use std::cell::RefCell;

    use super::{OpBlock, BATCH};
    use crate::engine::op::{prefetch_block, Intent};

    use crate::sync::{CachePadded, Mutex};

    struct LocalCache {
        take: Vec<Box<OpBlock>>,
        give: Vec<Box<OpBlock>>,
    }

    std::thread_local! {
        static CACHE: RefCell<LocalCache> = const {
            RefCell::new(LocalCache {
                take: Vec::new(),
                give: Vec::new(),
            })
        };
    }

    /// How many pushes ahead a recycled block is prefetched: enough for
    /// its lines to arrive from another core before the push that fills it.
    const PREFETCH_AHEAD: usize = 4;

    /// How many pushes ahead a recycled block's var list, when it lives on
    /// the heap, is asked for: its address and capacity are on the
    /// block's hot lines, which the prefetch above has brought here by
    /// then.
    const SPILL_AHEAD: usize = 2;

    pub(crate) struct BlockPool {
        /// Locked by pushing threads and completing threads alike, once
        /// per batch: padded, so that those exchanges do not write the
        /// line of the engine's fields that every push and every op read.
        batches: CachePadded<Mutex<Vec<Vec<Box<OpBlock>>>>>,
        /// Batches kept in the shared list; beyond that, blocks are freed.
        max_batches: usize,
    }

    impl BlockPool {
        /// A pool that keeps at most `max_blocks` blocks in its shared
        /// list (`EngineBuilder::pooled_op_blocks`), in whole batches.
        pub(crate) fn new(max_blocks: usize) -> Self {
            BlockPool {
                batches: CachePadded::new(Mutex::new(Vec::new())),
                max_batches: max_blocks / BATCH,
            }
        }

        /// The shared list, for the layout test of the engine's core.
        #[cfg(test)]
        pub(crate) fn shared_list(&self) -> &Mutex<Vec<Vec<Box<OpBlock>>>> {
            &self.batches
        }

        /// Blocks in the shared list, for tests.
        #[cfg(test)]
        pub(crate) fn shared_blocks(&self) -> usize {
            self.batches.lock().iter().map(Vec::len).sum()
        }

        /// A reset block, recycled when one is at hand.
        #[inline]
        pub(crate) fn take(&self) -> Box<OpBlock> {
            let cached = CACHE
                .try_with(|c| {
                    let mut c = c.borrow_mut();
                    if let Some(b) = c.take.pop() {
                        // The next block was last written by the thread that
                        // completed its op, on another core: start moving its
                        // lines here now, while this push fills the current one.
                        let n = c.take.len();
                        if n >= PREFETCH_AHEAD {
                            prefetch_block(&*c.take[n - PREFETCH_AHEAD], Intent::Fill);
                        }
                        if n >= SPILL_AHEAD {
                            c.take[n - SPILL_AHEAD].prefetch_spilled_vars(Intent::Fill);
                        }
                        return Some(b);
                    }
                    if let Some(b) = c.give.pop() {
                        return Some(b);
                    }
                    let batch = self.batches.lock().pop()?;
                    c.take = batch;
                    c.take.pop()
                })
                .ok()
                .flatten();
            cached.unwrap_or_else(|| Box::new(OpBlock::empty()))
        }

        /// Gives back a reset block.
        #[inline]
        pub(crate) fn give(&self, block: Box<OpBlock>) {
            // During thread teardown the cache may be gone: then the block
            // is simply freed.
            let _ = CACHE.try_with(|c| {
                let mut c = c.borrow_mut();
                c.give.push(block);
                if c.give.len() >= BATCH {
                    let full = std::mem::replace(&mut c.give, Vec::with_capacity(BATCH));
                    let mut batches = self.batches.lock();
                    if batches.len() < self.max_batches {
                        batches.push(full);
                    }
                }
            });
        }
    }
}

#[cfg(loom)]
mod imp {
    use super::OpBlock;

    pub(crate) struct BlockPool;

    impl BlockPool {
        pub(crate) fn new(_max_blocks: usize) -> Self {
            BlockPool
        }
        pub(crate) fn take(&self) -> Box<OpBlock> {
            Box::new(OpBlock::empty())
        }
        pub(crate) fn give(&self, block: Box<OpBlock>) {
            drop(block);
        }
    }
}

pub(crate) use imp::BlockPool;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Gives `n` fresh blocks back from a thread of its own, whose cache
    /// starts empty and hands full batches to the shared list.
    fn give_from_a_new_thread(pool: &BlockPool, n: usize) {
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..n {
                    pool.give(Box::new(OpBlock::empty()));
                }
            });
        });
    }

    #[test]
    fn the_shared_list_keeps_whole_batches_up_to_the_limit() {
        let pool = BlockPool::new(2 * BATCH + BATCH / 2);
        give_from_a_new_thread(&pool, 5 * BATCH + 3);
        assert_eq!(pool.shared_blocks(), 2 * BATCH);
    }

    #[test]
    fn a_limit_below_one_batch_keeps_none_in_the_shared_list() {
        let pool = BlockPool::new(BATCH - 1);
        give_from_a_new_thread(&pool, 3 * BATCH);
        assert_eq!(pool.shared_blocks(), 0);
    }

    #[test]
    fn a_push_takes_back_a_batch_a_completion_kept() {
        let pool = BlockPool::new(4 * BATCH);
        give_from_a_new_thread(&pool, 2 * BATCH);
        assert_eq!(pool.shared_blocks(), 2 * BATCH);
        std::thread::scope(|s| {
            s.spawn(|| {
                let b = pool.take();
                assert!(b.vars.is_empty());
            });
        });
        assert_eq!(pool.shared_blocks(), BATCH, "one batch went to the taker");
    }
}
