//! How long a searching worker keeps looking for work before it sleeps.
//!
//! # Why
//!
//! A worker that sleeps is woken by the thread that queues the next op for
//! it, and that wake-up (a futex call, then the sleeper's thread, on a
//! virtual machine often its whole virtual CPU, being scheduled again) lies
//! on the path of the op. Where ops become ready as
//! other ops complete, a worker that ran out of work a moment ago is needed
//! again within one body's time, and the crossbeam back-off it searched
//! with (a few microseconds) is over long before. With 10 µs bodies on
//! `randsum` at 2 workers, that left a worker idle beside a ready op for
//! about a sixth of the workers' time (`BENCHMARKS-HISTORY.md`, "A searching
//! worker that lingers").
//!
//! # Rules
//!
//! A searcher whose back-off is spent keeps looking, yielding its CPU
//! between looks, for at most the engine's linger
//! (`EngineBuilder::linger`, 50 µs unless set), and only
//!
//! * while some other worker of its pool runs an op, or a thread that
//!   helps while it waits runs one of the pool's ops
//!   (`EngineBuilder::help_while_waiting`): that op's completion is what
//!   may bring work. With every other worker searching or asleep,
//!   the work can only come from outside the pool (a push, or an async op
//!   completed by another thread), and the searcher would only hold a CPU
//!   that thread may need (a worker that lingered 50 µs regardless took
//!   the one-worker `roundtrip` from 5.45 to 6.33 µs per round trip);
//! * while no op is pushed: a push that brings work wakes a sleeper, and a
//!   pushing thread that shares a core with the searcher needs that core
//!   more than the searcher does (on 2 cores with 2 workers, the pusher is
//!   a third thread). `EngineBuilder::linger_through_pushes` drops this
//!   rule, for machines where the pushing threads have cores of their own.
//!
//! The search stays bounded, and what follows it is unchanged: the worker
//! then sleeps through the protocol of `sleep.rs`, so the linger changes
//! when a worker sleeps, never whether a wake-up can be lost.

use std::time::{Duration, Instant};

use super::search_config::SearchConfig;

/// One search's linger: its bounds, when it started and the push count
/// then.
#[derive(Debug)]
pub(crate) struct Linger {
    limit: Duration,
    through_pushes: bool,
    since: Option<(Instant, u64)>,
}

impl Linger {
    /// A search that has not lingered yet, bounded as `config` says.
    pub(crate) fn new(config: &SearchConfig) -> Self {
        Linger {
            limit: config.linger,
            through_pushes: config.linger_through_pushes,
            since: None,
        }
    }

    /// Called each time the back-off is found spent: true to look once
    /// more. `some_running` tells whether another worker of the pool runs
    /// an op, `pushed` is the engine's count of ops pushed so far.
    pub(crate) fn keep_looking(&mut self, some_running: bool, pushed: u64, now: Instant) -> bool {
        if !some_running || self.limit.is_zero() {
            return false;
        }
        match self.since {
            None => {
                self.since = Some((now, pushed));
                true
            }
            Some((start, pushed_then)) => {
                (self.through_pushes || pushed == pushed_then)
                    && now.saturating_duration_since(start) < self.limit
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::search_config::DEFAULT_LINGER;
    use super::*;

    const LINGER: Duration = DEFAULT_LINGER;

    fn linger() -> Linger {
        Linger::new(&SearchConfig::default())
    }

    #[test]
    fn no_linger_when_no_other_worker_runs_an_op() {
        let mut l = linger();
        assert!(!l.keep_looking(false, 7, Instant::now()));
        // Nor later in the same search, once the others went idle.
        let t = Instant::now();
        let mut l = linger();
        assert!(l.keep_looking(true, 7, t));
        assert!(!l.keep_looking(false, 7, t + Duration::from_micros(1)));
    }

    #[test]
    fn lingers_up_to_the_bound_while_nothing_is_pushed() {
        let t = Instant::now();
        let mut l = linger();
        assert!(l.keep_looking(true, 7, t));
        assert!(l.keep_looking(true, 7, t + LINGER / 2));
        assert!(l.keep_looking(true, 7, t + LINGER - Duration::from_nanos(1)));
        assert!(!l.keep_looking(true, 7, t + LINGER));
        assert!(!l.keep_looking(true, 7, t + LINGER * 10));
    }

    #[test]
    fn a_push_ends_the_linger() {
        let t = Instant::now();
        let mut l = linger();
        assert!(l.keep_looking(true, 7, t));
        assert!(!l.keep_looking(true, 8, t + Duration::from_micros(1)));
    }

    #[test]
    fn a_zero_linger_never_lingers() {
        let config = SearchConfig {
            linger: Duration::ZERO,
            ..SearchConfig::default()
        };
        assert!(!Linger::new(&config).keep_looking(true, 7, Instant::now()));
    }

    #[test]
    fn a_longer_linger_is_kept_to() {
        let config = SearchConfig {
            linger: Duration::from_millis(2),
            ..SearchConfig::default()
        };
        let t = Instant::now();
        let mut l = Linger::new(&config);
        assert!(l.keep_looking(true, 7, t));
        assert!(l.keep_looking(true, 7, t + DEFAULT_LINGER * 4));
        assert!(!l.keep_looking(true, 7, t + Duration::from_millis(2)));
    }

    #[test]
    fn lingering_through_pushes_ignores_the_push_count_but_not_the_bound() {
        let config = SearchConfig {
            linger_through_pushes: true,
            ..SearchConfig::default()
        };
        let t = Instant::now();
        let mut l = Linger::new(&config);
        assert!(l.keep_looking(true, 7, t));
        assert!(l.keep_looking(true, 9, t + Duration::from_micros(1)));
        assert!(!l.keep_looking(true, 9, t + DEFAULT_LINGER));
        let mut l = Linger::new(&config);
        assert!(l.keep_looking(true, 7, t));
        assert!(
            !l.keep_looking(false, 9, t + Duration::from_micros(1)),
            "nobody running still ends it"
        );
    }
}
