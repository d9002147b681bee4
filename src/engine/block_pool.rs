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
//! The per-thread cache holds plain reset blocks, which carry nothing of the
//! engine that used them, so it is shared by every engine a thread touches;
//! the shared batch list belongs to one engine. Under loom blocks are simply
//! allocated and dropped: the model is about the var protocol, not reuse.

use super::op::OpBlock;

/// Blocks moved between a thread's cache and the shared list at once.
#[cfg(not(loom))]
const BATCH: usize = 64;
/// Batches kept in the shared list; beyond that, blocks are freed.
#[cfg(not(loom))]
const MAX_BATCHES: usize = 1024;

#[cfg(not(loom))]
// Blocks are boxed on purpose: var queues hold pointers to them, so a block
// must never move when the list that owns it grows.
#[allow(clippy::vec_box)]
mod imp {
    use std::cell::RefCell;

    use super::{OpBlock, BATCH, MAX_BATCHES};
    use crate::engine::op::{prefetch_block, Intent};

    use crate::sync::Mutex;

    #[derive(Default)]
    struct LocalCache {
        take: Vec<Box<OpBlock>>,
        give: Vec<Box<OpBlock>>,
    }

    std::thread_local! {
        static CACHE: RefCell<LocalCache> = RefCell::new(LocalCache::default());
    }

    /// How many pushes ahead a recycled block is prefetched: enough for
    /// its lines to arrive from another core before the push that fills it.
    const PREFETCH_AHEAD: usize = 4;

    pub(crate) struct BlockPool {
        batches: Mutex<Vec<Vec<Box<OpBlock>>>>,
    }

    impl BlockPool {
        pub(crate) fn new() -> Self {
            BlockPool {
                batches: Mutex::new(Vec::new()),
            }
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
                            prefetch_block(&*c.take[n - PREFETCH_AHEAD], Intent::Write);
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
                    if batches.len() < MAX_BATCHES {
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
        pub(crate) fn new() -> Self {
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
