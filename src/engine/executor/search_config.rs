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
/// most this many workers give pushing threads queues of their own.
pub(crate) const DEFAULT_PUSHER_QUEUES_UP_TO: usize = 2;

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
    /// Whether the pools' sleep protocol splits its fence: a compiler
    /// fence where ops are queued, a process-wide barrier where a worker
    /// goes to sleep (`sync/asymmetric_fence.rs`). The builder turns it on
    /// only once the barrier is registered.
    pub(crate) asymmetric_fence: bool,
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            max_searching: None,
            linger: DEFAULT_LINGER,
            linger_through_pushes: false,
            keep_one_searching: false,
            pusher_queues_up_to: DEFAULT_PUSHER_QUEUES_UP_TO,
            asymmetric_fence: false,
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
}
