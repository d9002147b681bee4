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
//! about a sixth of the workers' time (`BENCHMARKS.md`, "A searching
//! worker that lingers").
//!
//! # Rules
//!
//! A searcher whose back-off is spent keeps looking, yielding its CPU
//! between looks, for at most [`LINGER`], and only
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
//!   a third thread).
//!
//! The search stays bounded, and what follows it is unchanged: the worker
//! then sleeps through the protocol of `sleep.rs`, so the linger changes
//! when a worker sleeps, never whether a wake-up can be lost.

use std::time::{Duration, Instant};

/// The longest a searcher keeps looking past its back-off.
pub(crate) const LINGER: Duration = Duration::from_micros(50);

/// One search's linger: when it started and the push count then.
#[derive(Debug, Default)]
pub(crate) struct Linger {
    since: Option<(Instant, u64)>,
}

impl Linger {
    /// A search that has not lingered yet.
    pub(crate) fn new() -> Self {
        Linger::default()
    }

    /// Called each time the back-off is found spent: true to look once
    /// more. `some_running` tells whether another worker of the pool runs
    /// an op, `pushed` is the engine's count of ops pushed so far.
    pub(crate) fn keep_looking(&mut self, some_running: bool, pushed: u64, now: Instant) -> bool {
        if !some_running {
            return false;
        }
        match self.since {
            None => {
                self.since = Some((now, pushed));
                true
            }
            Some((start, pushed_then)) => {
                pushed == pushed_then && now.saturating_duration_since(start) < LINGER
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_linger_when_no_other_worker_runs_an_op() {
        let mut l = Linger::new();
        assert!(!l.keep_looking(false, 7, Instant::now()));
        // Nor later in the same search, once the others went idle.
        let t = Instant::now();
        let mut l = Linger::new();
        assert!(l.keep_looking(true, 7, t));
        assert!(!l.keep_looking(false, 7, t + Duration::from_micros(1)));
    }

    #[test]
    fn lingers_up_to_the_bound_while_nothing_is_pushed() {
        let t = Instant::now();
        let mut l = Linger::new();
        assert!(l.keep_looking(true, 7, t));
        assert!(l.keep_looking(true, 7, t + LINGER / 2));
        assert!(l.keep_looking(true, 7, t + LINGER - Duration::from_nanos(1)));
        assert!(!l.keep_looking(true, 7, t + LINGER));
        assert!(!l.keep_looking(true, 7, t + LINGER * 10));
    }

    #[test]
    fn a_push_ends_the_linger() {
        let t = Instant::now();
        let mut l = Linger::new();
        assert!(l.keep_looking(true, 7, t));
        assert!(!l.keep_looking(true, 8, t + Duration::from_micros(1)));
    }
}
