//! A completion counter split across cache lines.
//!
//! Every completed op is counted, on whichever worker completed it. One
//! shared atomic would move its cache line between the workers on every op;
//! instead each thread adds to one of a few padded shards (chosen once per
//! thread), and the rare reader (`wait_for_all`, `pending`) sums them.
//!
//! A sum read shard by shard is not a snapshot, but every shard only grows:
//! the sum lies between the total when the first shard was read and the total
//! when the last one was. `Core::idle` relies on exactly that.

use crate::sync::{CachePadded, Ordering};

#[cfg(not(loom))]
const SHARDS: usize = 16;
// loom replays each execution many times and needs every run to make the
// same choices: one shard, no per-thread assignment.
#[cfg(loom)]
const SHARDS: usize = 1;

pub(crate) struct ShardedCounter {
    shards: [CachePadded<crate::sync::AtomicU64>; SHARDS],
}

#[cfg(not(loom))]
fn shard_index() -> usize {
    use crate::sync::unmodelled::{AtomicUsize, Ordering};
    use std::cell::Cell;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    std::thread_local! {
        static SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    SHARD
        .try_with(|s| {
            if s.get() == usize::MAX {
                s.set(NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS);
            }
            s.get()
        })
        .unwrap_or(0)
}

#[cfg(loom)]
fn shard_index() -> usize {
    0
}

impl ShardedCounter {
    pub(crate) fn new() -> Self {
        ShardedCounter {
            shards: std::array::from_fn(|_| CachePadded::new(crate::sync::AtomicU64::new(0))),
        }
    }

    /// Adds one on the calling thread's shard (SeqCst).
    #[inline]
    pub(crate) fn add_one(&self) {
        self.shards[shard_index()].fetch_add(1, Ordering::SeqCst);
    }

    /// Adds `n` on the calling thread's shard (SeqCst).
    pub(crate) fn add(&self, n: u64) {
        self.shards[shard_index()].fetch_add(n, Ordering::SeqCst);
    }

    /// The sum of the shards, each read with SeqCst.
    pub(crate) fn sum(&self) -> u64 {
        self.shards.iter().map(|s| s.load(Ordering::SeqCst)).sum()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn counts_from_many_threads() {
        let c = std::sync::Arc::new(ShardedCounter::new());
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        c.add_one();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(c.sum(), 8000);
    }
}
