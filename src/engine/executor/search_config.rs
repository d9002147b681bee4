//! How a pool's idle workers look for work: how many search at once, and
//! how long one keeps looking past its back-off (`sleep.rs`, `linger.rs`).
//!
//! The defaults are what the measurements on 2 and 16 cores chose
//! (`BENCHMARKS.md`); the settings exist because the best values depend on
//! the machine and on whether the pushing threads have cores of their own,
//! as `GOMP_SPINCOUNT` and `OMP_WAIT_POLICY` do for an OpenMP runtime.

use std::time::Duration;

/// Default of [`crate::EngineBuilder::linger`]: the longest a searcher
/// keeps looking past its back-off.
pub const DEFAULT_LINGER: Duration = Duration::from_micros(50);

/// Default of [`crate::EngineBuilder::pusher_queues_up_to`]: pools of at
/// most this many workers give pushing threads queues of their own. On 16
/// cores the ring won from 4 to 16 workers (`BENCHMARKS.md`, "The ring and
/// the split fence on 16 cores"); larger pools were not measured.
pub(crate) const DEFAULT_PUSHER_QUEUES_UP_TO: usize = 16;

/// Longest linger [`crate::EngineBuilder::linger`] accepts: a searcher
/// holds its CPU meanwhile, yielding between looks.
pub(crate) const MAX_LINGER: Duration = Duration::from_secs(1);

/// A pool's search settings, as the builder resolved them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SearchConfig {
    /// Workers of a pool that may search at once; `None`: half the pool,
    /// at least one.
    pub(crate) max_searching: Option<usize>,
    /// How long a searcher keeps looking past its back-off while another
    /// thread runs one of the pool's ops; zero: it sleeps at once.
    pub(crate) linger: Duration,
    /// Whether a searcher keeps lingering after an op is pushed (by
    /// default a push ends the linger: `linger.rs` says why).
    pub(crate) linger_through_pushes: bool,
    /// Whether the last searcher to find work wakes a sleeper to search
    /// in its place (`pool.rs`, `PoolShared::wake_another_if_more`).
    pub(crate) keep_one_searching: bool,
    /// Pools of at most this many workers give each pushing thread a
    /// queue of its own, which the workers look in before the injector
    /// (`pusher_queues.rs`).
    pub(crate) pusher_queues_up_to: usize,
    /// Whether a pushing thread's queue is a ring per worker, dealt to in
    /// turn, instead of one ring every worker takes from
    /// (`pusher_queues.rs`, "Dealing").
    pub(crate) deal_pushes: bool,
    /// How the pools' sleep protocol fences: whole on both sides, or
    /// split into a compiler fence where ops are queued and a process-wide
    /// barrier where a worker goes to sleep (`sync/asymmetric_fence.rs`).
    pub(crate) wake_fence: WakeFence,
}

/// The sleep fence a pool uses (`EngineBuilder::asymmetric_wake_fence`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WakeFence {
    /// A full fence on both sides, in every pool (asked for).
    Full,
    /// Split in every pool (asked for; the builder registered the barrier
    /// first, and fails where it cannot).
    Split,
    /// The default: split in every pool that gives pushing threads queues
    /// of their own, where the barrier registers; full elsewhere. Without
    /// those queues each push makes a locked instruction that waits for
    /// its stores anyway, and the fence split alone was slower at 8
    /// workers. Measured on 16 cores at 8 and 16 workers, where the two
    /// together won and the ring alone was level on `random`; on 2 cores
    /// at 1 and 2 workers once the push count took no locked add
    /// (`push_count.rs`), where the empty one-worker `indep` took
    /// 0.60-0.62 of the time and the rows whose workers sleep most
    /// (`fan`, `rwmix`, `randsum` with 1 µs at 2 workers, the one-worker
    /// `roundtrip`) were level (`BENCHMARKS-HISTORY.md`, "The push count without
    /// a locked add"); not measured between 2 and 8.
    Auto,
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            max_searching: None,
            linger: DEFAULT_LINGER,
            linger_through_pushes: false,
            keep_one_searching: false,
            pusher_queues_up_to: DEFAULT_PUSHER_QUEUES_UP_TO,
            deal_pushes: false,
            wake_fence: WakeFence::Auto,
        }
    }
}

impl SearchConfig {
    /// Workers of a pool of `workers` that may search at once: the setting,
    /// at most the pool, or half the pool (at least one).
    pub(crate) fn max_searching_in(&self, workers: usize) -> usize {
        match self.max_searching {
            Some(n) => n.min(workers).max(1),
            None => (workers / 2).max(1),
        }
    }

    /// Whether a pool of `workers` workers splits its sleep fence. For
    /// [`WakeFence::Auto`] the first pool that would split registers the
    /// barrier (once a process); where that fails, pools keep the full
    /// fence.
    pub(crate) fn split_fence_in(&self, workers: usize) -> bool {
        match self.wake_fence {
            WakeFence::Full => false,
            WakeFence::Split => true,
            WakeFence::Auto => {
                self.auto_splits(workers) && crate::sync::asymmetric_fence::register().is_ok()
            }
        }
    }

    /// Whether [`WakeFence::Auto`] splits in a pool of `workers` workers,
    /// the barrier aside.
    fn auto_splits(&self, workers: usize) -> bool {
        workers <= self.pusher_queues_up_to
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_the_pool_searches_by_default_and_a_setting_is_capped_by_the_pool() {
        let d = SearchConfig::default();
        assert_eq!(d.max_searching_in(1), 1);
        assert_eq!(d.max_searching_in(2), 1);
        assert_eq!(d.max_searching_in(16), 8);
        let four = SearchConfig {
            max_searching: Some(4),
            ..d
        };
        assert_eq!(four.max_searching_in(16), 4);
        assert_eq!(four.max_searching_in(3), 3, "never more than the pool");
    }

    #[test]
    fn the_fence_splits_by_default_only_in_pools_with_pushers_queues() {
        let d = SearchConfig::default();
        assert_eq!(d.wake_fence, WakeFence::Auto);
        assert!(d.auto_splits(1));
        assert!(d.auto_splits(2));
        assert!(d.auto_splits(DEFAULT_PUSHER_QUEUES_UP_TO));
        assert!(
            !d.auto_splits(DEFAULT_PUSHER_QUEUES_UP_TO + 1),
            "past the pushers' queues every push is locked: no split"
        );
        let no_queues = SearchConfig {
            pusher_queues_up_to: 0,
            ..d
        };
        assert!(!no_queues.auto_splits(2));
        assert!(!no_queues.split_fence_in(8));
        // Asked for, the settings win over the pool's size.
        let full = SearchConfig {
            wake_fence: WakeFence::Full,
            ..d
        };
        assert!(!full.split_fence_in(8));
        let split = SearchConfig {
            wake_fence: WakeFence::Split,
            ..d
        };
        assert!(split.split_fence_in(1));
        // Where the barrier registers, a default pool of 2 or 8 splits.
        for workers in [2, 8] {
            assert_eq!(
                d.split_fence_in(workers),
                crate::sync::asymmetric_fence::register().is_ok()
            );
        }
    }
}
