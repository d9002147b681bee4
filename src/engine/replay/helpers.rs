//! How many of the CPU pool's workers a run of a replay may use.
//!
//! # Why a choice
//!
//! A run allowed several helpers pays for them whether or not they help:
//! each one is started through the engine (often a sleeping worker's
//! wake-up), and its countdowns and queued nodes go through locked
//! instructions and a deque's fences, where a run of one helper uses
//! plain loads and stores (`run.rs`, `ALONE`). On a graph that runs in
//! tens of µs that is most of the run: on the 2-core sandbox, graphs of
//! 100 to 2,500 empty nodes ran 1.3–3.4× faster with one helper than with
//! two (BENCHMARKS-HISTORY.md, "A replay's helpers chosen by timing"); in longer
//! A/Bs, `wavefront`-100 (10,000 nodes) and `randsum` of 20,000 still ran
//! 20–25% faster with one, `random` of 20,000 and `wavefront`-250 (62,500)
//! level or faster with two ("A replay's trials of one helper up to
//! 1 ms").
//!
//! A node's body is opaque, so neither the graph's size nor its shape
//! says on which side of that line it is; its runs do, and a replay is
//! run many times. [`ReplayHelpers::Adaptive`] times the runs each way
//! and keeps the faster.
//!
//! # The adaptive rule
//!
//! - The first run is not timed (it allocates the run's countdowns).
//! - The next runs use the pool's workers until one has been timed; then
//!   one run tries a single helper, but only where that trial cannot cost
//!   much: a single helper can take up to `workers` times as long as the
//!   workers, and that worst case must be under [`TRIAL_BUDGET`] (at 2
//!   workers, runs under 1 ms; at 16, under 125 µs), or, up to
//!   [`MAX_TRIAL`], under a [`TRIAL_SHARE`]th of what the runs with the
//!   workers have taken so far: a graph run often enough is tried alone
//!   once its trial is a small part of its time, however many workers
//!   the pool has (on 16 cores a `fan` of 2,020 empty nodes took 640 µs
//!   with the workers and 20 µs alone, a trial the budget alone never
//!   allowed: BENCHMARKS.md, "The ring and the split fence on 16 cores").
//! - From then on each run takes the way whose smoothed time is lower and
//!   tries the other now and then: the workers every [`RETRY_SHARED`]
//!   runs; a single helper, while it is the slower, after a gap that at
//!   least doubles each time (from [`RETRY_SHARED`] runs, up to
//!   [`MAX_ALONE_GAP`]) and is at least [`RETRY_SHARED`] times how many
//!   times slower it was, so that its trials cost a graph the workers do
//!   run faster a small share of its time.
//! - A run that failed is not timed: its skipped nodes make it short.
//!
//! The choice only decides how many threads run the nodes; which nodes
//! run, and their order along the graph's edges, is the same either way.
//! A replay whose nodes wait for one another to run at the same time
//! (outside the engine's contract, which orders ops and promises no
//! concurrency) needs [`ReplayHelpers::All`].

#[cfg(not(loom))]
use std::time::{Duration, Instant};

#[cfg(not(loom))]
use crate::sync::unmodelled::Mutex;

/// How many of the CPU pool's workers a run of a [`Replay`](crate::Replay)
/// may use; set with [`ReplayBuilder::helpers`](crate::ReplayBuilder::helpers).
///
/// A pool of one worker runs every replay on that worker whatever this
/// says.
///
/// # Examples
///
/// ```
/// use depengine::{Engine, OpDesc, ReplayHelpers};
///
/// let engine = Engine::builder().cpu_workers(2).build()?;
/// let x = engine.new_var();
/// let mut b = engine.replay_builder("tiny");
/// b.helpers(ReplayHelpers::One);
/// b.push(OpDesc::new("a").writes(&x), || Ok(()))?;
/// let replay = b.build();
/// assert_eq!(replay.helpers(), ReplayHelpers::One);
/// engine.push_replay(&replay)?;
/// engine.wait_for_all()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReplayHelpers {
    /// Times the runs with one helper and with the pool's workers, and
    /// keeps the faster, trying the other now and then (the module
    /// `replay/helpers.rs` has the rule). The default.
    #[default]
    Adaptive,
    /// Every run may use every worker of the CPU pool: nodes that become
    /// ready together start helpers on other workers.
    All,
    /// Every run stays on the worker that starts it. The pool's other
    /// workers stay free for the engine's other ops.
    One,
}

/// The most a trial of a single helper may take, at worst (`workers` ×
/// a run with the workers), for it to be made: at 2 workers, runs with
/// the workers under 1 ms. There one helper was measured ahead on graphs
/// of 10,000 and 20,000 nodes whose runs took 150 µs to 1 ms
/// (`wavefront`-100 15% and `randsum` 20% less time than with a budget of
/// 200 µs, which left them untried), and level where the workers win
/// (`wavefront`-250, 62,500 nodes), whose losing trials grow ever rarer
/// (BENCHMARKS-HISTORY.md, "A replay's trials of one helper up to 1 ms").
#[cfg(not(loom))]
pub(crate) const TRIAL_BUDGET: Duration = Duration::from_millis(2);

/// Past [`TRIAL_BUDGET`], a trial of a single helper is made only once
/// its worst case is at most this share of the time the runs with the
/// workers have taken: a sixteenth, so that the first trial of a graph
/// the workers do run faster costs it at most about 6% of its time so
/// far (and the later ones, spaced by the gaps below, less).
#[cfg(not(loom))]
pub(crate) const TRIAL_SHARE: u32 = 16;

/// The longest a trial of a single helper may take at worst, however
/// long the graph has run: a run is the caller's wait, and a trial that
/// loses is that much longer than a run with the workers.
#[cfg(not(loom))]
pub(crate) const MAX_TRIAL: Duration = Duration::from_millis(50);

/// While a single helper is the faster, the workers are tried again
/// every this many runs; it is also the first gap between trials of a
/// single helper while it is the slower.
#[cfg(not(loom))]
pub(crate) const RETRY_SHARED: u64 = 16;

/// The longest gap between trials of a single helper that keeps losing.
#[cfg(not(loom))]
pub(crate) const MAX_ALONE_GAP: u64 = 1024;

/// Whether a trial of a single helper may be made on a pool of `workers`
/// whose runs take `shared` and have taken `spent` in all: at worst it
/// takes `workers` times as long as a run, which must be under
/// [`TRIAL_BUDGET`], or under [`MAX_TRIAL`] and a [`TRIAL_SHARE`]th of
/// `spent`.
#[cfg(not(loom))]
fn trial_fits(shared: Duration, workers: usize, spent: Duration) -> bool {
    let Some(worst) = u32::try_from(workers)
        .ok()
        .and_then(|w| shared.checked_mul(w))
    else {
        return false;
    };
    worst <= TRIAL_BUDGET || (worst <= MAX_TRIAL && worst <= spent / TRIAL_SHARE)
}

/// How a run was made.
#[cfg(not(loom))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Way {
    /// One helper: the thread that runs the replay's op.
    Alone,
    /// As many helpers as the pool has workers.
    Shared,
}

/// What [`HelperPolicy::choose`] decided for one run.
pub(crate) struct Choice {
    /// Most helpers the run may have.
    pub(crate) helpers: usize,
    /// How the run is made and when it started, when it is timed.
    #[cfg(not(loom))]
    timed: Option<(Way, Instant)>,
}

impl Choice {
    /// A run with `helpers` helpers, not timed.
    fn untimed(helpers: usize) -> Choice {
        Choice {
            helpers,
            #[cfg(not(loom))]
            timed: None,
        }
    }
}

/// A graph's [`ReplayHelpers`] and, when adaptive, what its runs took.
pub(crate) struct HelperPolicy {
    setting: ReplayHelpers,
    #[cfg(not(loom))]
    tuning: Mutex<Tuning>,
}

impl HelperPolicy {
    pub(crate) fn new(setting: ReplayHelpers) -> HelperPolicy {
        HelperPolicy {
            setting,
            #[cfg(not(loom))]
            tuning: Mutex::new(Tuning::new()),
        }
    }

    pub(crate) fn setting(&self) -> ReplayHelpers {
        self.setting
    }

    /// How many helpers the next run may have, out of a pool of
    /// `workers`. Under loom a run gets the pool (the models explore the
    /// protocol with several helpers; the timing is no part of it).
    pub(crate) fn choose(&self, workers: usize) -> Choice {
        if workers <= 1 {
            return Choice::untimed(1);
        }
        match self.setting {
            ReplayHelpers::One => Choice::untimed(1),
            ReplayHelpers::All => Choice::untimed(workers),
            #[cfg(loom)]
            ReplayHelpers::Adaptive => Choice::untimed(workers),
            #[cfg(not(loom))]
            ReplayHelpers::Adaptive => match self.tuning.lock().next_way(workers) {
                None => Choice::untimed(workers),
                Some(way) => Choice {
                    helpers: if way == Way::Alone { 1 } else { workers },
                    timed: Some((way, Instant::now())),
                },
            },
        }
    }

    /// Runs chosen so far, and the smoothed times of the runs with one
    /// helper and with the pool's workers.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn timed(&self) -> (u64, Option<Duration>, Option<Duration>) {
        let t = self.tuning.lock();
        (t.runs, t.alone, t.shared)
    }

    /// Records the run `choice` was for, which has just finished; `ok`:
    /// no node failed.
    pub(crate) fn finished(&self, choice: &Choice, ok: bool) {
        #[cfg(not(loom))]
        if let (Some((way, start)), true) = (choice.timed, ok) {
            self.tuning.lock().record(way, start.elapsed());
        }
        #[cfg(loom)]
        let _ = (choice, ok);
    }
}

/// The adaptive rule's state (the module's docs give the rule).
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct Tuning {
    /// Runs chosen so far.
    runs: u64,
    /// Smoothed times of the runs made each way; `None` until one was.
    shared: Option<Duration>,
    alone: Option<Duration>,
    /// The run from which the way not in favour is tried again.
    next_trial: u64,
    /// Runs between two trials of a single helper while it is slower.
    alone_gap: u64,
    /// What the timed runs with the workers took, in all.
    spent_shared: Duration,
}

#[cfg(not(loom))]
impl Tuning {
    pub(crate) fn new() -> Tuning {
        Tuning {
            runs: 0,
            shared: None,
            alone: None,
            next_trial: 0,
            alone_gap: RETRY_SHARED,
            spent_shared: Duration::ZERO,
        }
    }

    /// The way the next run on a pool of `workers` is made; `None`: the
    /// first run, not timed.
    pub(crate) fn next_way(&mut self, workers: usize) -> Option<Way> {
        let run = self.runs;
        self.runs += 1;
        if run == 0 {
            return None;
        }
        let Some(shared) = self.shared else {
            return Some(Way::Shared);
        };
        let favoured = match self.alone {
            Some(alone) if alone < shared => Way::Alone,
            _ => Way::Shared,
        };
        if run < self.next_trial {
            return Some(favoured);
        }
        match favoured {
            Way::Alone => {
                self.next_trial = run + RETRY_SHARED;
                Some(Way::Shared)
            }
            Way::Shared if trial_fits(shared, workers, self.spent_shared) => {
                self.next_trial = run + self.alone_gap;
                Some(Way::Alone)
            }
            Way::Shared => Some(Way::Shared),
        }
    }

    /// Records a run made `way` that took `took`.
    pub(crate) fn record(&mut self, way: Way, took: Duration) {
        if way == Way::Shared {
            self.spent_shared = self.spent_shared.saturating_add(took);
        }
        let slot = match way {
            Way::Alone => &mut self.alone,
            Way::Shared => &mut self.shared,
        };
        // A quarter of the new time: one slow run (a preempted helper)
        // does not flip the choice on its own.
        *slot = Some(match *slot {
            None => took,
            Some(old) => old.saturating_mul(3).saturating_add(took) / 4,
        });
        if way == Way::Alone {
            // How many times as long as a run with the workers (at least
            // once); a single helper that is faster is tried again soon.
            let slower = match (self.alone, self.shared) {
                (Some(a), Some(s)) if a < s => None,
                (Some(a), Some(s)) => Some(a.as_nanos().div_ceil(s.as_nanos().max(1))),
                _ => Some(1),
            };
            self.alone_gap = match slower {
                None => RETRY_SHARED,
                Some(times) => {
                    let times = u64::try_from(times).unwrap_or(u64::MAX);
                    (self.alone_gap * 2)
                        .max(RETRY_SHARED.saturating_mul(times))
                        .min(MAX_ALONE_GAP)
                }
            };
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    /// Chooses `runs` runs on 2 workers, each taking `alone` or `shared`
    /// by its way; returns the ways (`None` for the untimed first run).
    fn drive(t: &mut Tuning, runs: usize, alone: Duration, shared: Duration) -> Vec<Option<Way>> {
        drive_on(t, 2, runs, alone, shared)
    }

    /// [`drive`] on a pool of `workers`.
    fn drive_on(
        t: &mut Tuning,
        workers: usize,
        runs: usize,
        alone: Duration,
        shared: Duration,
    ) -> Vec<Option<Way>> {
        (0..runs)
            .map(|_| {
                let way = t.next_way(workers);
                if let Some(w) = way {
                    t.record(w, if w == Way::Alone { alone } else { shared });
                }
                way
            })
            .collect()
    }

    #[test]
    fn a_graph_that_runs_faster_alone_runs_alone_but_for_a_retry_every_sixteen_runs() {
        let mut t = Tuning::new();
        let ways = drive(&mut t, 100, us(10), us(40));
        assert_eq!(ways[0], None, "the first run is not timed");
        assert_eq!(ways[1], Some(Way::Shared), "the workers are timed first");
        assert_eq!(ways[2], Some(Way::Alone), "then one helper is tried");
        let shared_after: Vec<usize> = (3..100).filter(|&i| ways[i] == Some(Way::Shared)).collect();
        assert_eq!(
            shared_after,
            (2 + RETRY_SHARED as usize..100)
                .step_by(RETRY_SHARED as usize)
                .collect::<Vec<_>>(),
            "{ways:?}"
        );
    }

    #[test]
    fn a_graph_the_workers_run_faster_tries_one_helper_ever_more_rarely() {
        let mut t = Tuning::new();
        // Twice as slow alone: the gap's doubling is what spaces the
        // trials.
        let ways = drive(&mut t, 4000, us(60), us(30));
        let trials: Vec<usize> = (0..ways.len())
            .filter(|&i| ways[i] == Some(Way::Alone))
            .collect();
        // The first trial at run 2, then gaps of 16, 32, ... up to 1024:
        // the gap doubles after each trial that lost.
        let gaps: Vec<usize> = trials.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(trials[0], 2);
        assert_eq!(&gaps[..6], &[16, 32, 64, 128, 256, 512], "{trials:?}");
        assert!(
            gaps[6..].iter().all(|&g| g == MAX_ALONE_GAP as usize),
            "{gaps:?}"
        );
        assert!(trials.len() < 12, "{} trials in 4000 runs", trials.len());
    }

    #[test]
    fn a_trial_alone_far_slower_than_the_workers_puts_the_next_far_off() {
        let mut t = Tuning::new();
        // 16 workers, a run of 12 µs with them, 16 times as long alone.
        let ways = drive_on(&mut t, 16, 2000, us(192), us(12));
        let trials: Vec<usize> = (0..ways.len())
            .filter(|&i| ways[i] == Some(Way::Alone))
            .collect();
        // The first gap is set before the first trial's time is known;
        // after it, 16 runs for each time as slow: 256, then doubling.
        let gaps: Vec<usize> = trials.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(&gaps[..4], &[16, 256, 512, 1024], "{trials:?}");
        // What the trials cost, over what the runs with the workers took.
        let cost = (trials.len() as f64 * 180.0) / (2000.0 * 12.0);
        assert!(
            cost < 0.05,
            "{} trials: {cost:.3} of the time",
            trials.len()
        );
    }

    /// The run at which a graph of `shared` per run with the workers is
    /// first tried alone on a pool of `workers`, within `runs` runs.
    fn first_trial(workers: usize, shared: Duration, runs: usize) -> Option<usize> {
        let mut t = Tuning::new();
        let ways = drive_on(&mut t, workers, runs, us(1), shared);
        ways.iter().position(|w| *w == Some(Way::Alone))
    }

    #[test]
    fn a_graph_whose_runs_take_long_for_its_pool_is_tried_alone_once_it_has_run_long() {
        // At 2 workers a run with the workers of up to 1 ms is tried alone
        // at once; at 16, of up to 125 µs.
        assert_eq!(first_trial(2, us(1000), 500), Some(2));
        assert_eq!(first_trial(16, us(125), 500), Some(2));
        // Past that, once the runs with the workers have taken sixteen
        // times the trial's worst case: the first trial point (every run
        // while untried) after `16 × workers` timed runs.
        for (workers, shared) in [(2, us(1001)), (16, us(126)), (16, us(640)), (8, us(6000))] {
            let timed = 16 * workers;
            assert_eq!(
                first_trial(workers, shared, 2000),
                Some(1 + timed),
                "{workers} workers, {shared:?}"
            );
        }
        // And never where the worst case passes MAX_TRIAL (50 ms): up to
        // 16 × 3,125 µs, not 16 × 3,126 µs or 2 × 25,001 µs.
        assert_eq!(first_trial(16, us(3125), 2000), Some(1 + 16 * 16));
        assert_eq!(first_trial(16, us(3126), 4000), None);
        assert_eq!(first_trial(2, us(25_001), 2000), None);
    }

    #[test]
    fn a_long_graph_the_workers_run_faster_spends_a_small_share_on_trials() {
        // 16 workers, 640 µs a run with them, 16 times as long alone: the
        // worst a trial can be, every time.
        let (runs, shared, alone) = (20_000, us(640), us(640 * 16));
        let mut t = Tuning::new();
        let ways = drive_on(&mut t, 16, runs, alone, shared);
        let trials = ways.iter().filter(|w| **w == Some(Way::Alone)).count();
        assert!(trials >= 2, "{trials} trials");
        let extra = trials as f64 * (alone - shared).as_secs_f64();
        let spent = runs as f64 * shared.as_secs_f64();
        assert!(
            extra / spent < 0.02,
            "{trials} trials: {:.3} of the time",
            extra / spent
        );
    }

    #[test]
    fn the_choice_follows_a_graph_whose_time_changes() {
        let mut t = Tuning::new();
        // Small at first: it settles on one helper.
        drive(&mut t, 52, us(10), us(40));
        assert_eq!(t.next_way(2), Some(Way::Alone));
        // Then its nodes get slow, and the workers halve the time: the
        // retries of the workers see it, and the smoothed times cross.
        let ways = drive(&mut t, 400, us(400), us(200));
        let last: Vec<_> = ways[ways.len() - 50..].to_vec();
        assert!(last.iter().all(|w| *w == Some(Way::Shared)), "{last:?}");
    }

    #[test]
    fn absurd_times_neither_overflow_nor_start_a_trial() {
        let mut t = Tuning::new();
        let ways = drive_on(&mut t, usize::MAX, 40, Duration::MAX, us(1));
        assert!(!ways.contains(&Some(Way::Alone)), "{ways:?}");
        let mut t = Tuning::new();
        let ways = drive_on(&mut t, 2, 40, Duration::MAX, Duration::from_nanos(1));
        assert!(ways.contains(&Some(Way::Alone)));
        assert_eq!(t.alone_gap, MAX_ALONE_GAP, "{t:?}");
        t.record(Way::Shared, Duration::MAX);
        t.record(Way::Shared, Duration::MAX);
        assert!(t.shared.is_some());
    }

    #[test]
    fn one_slow_run_does_not_flip_the_choice() {
        let mut t = Tuning::new();
        drive(&mut t, 10, us(10), us(40));
        let before = t.alone.unwrap();
        // One preempted run alone, twice as long as a run with the
        // workers.
        t.record(Way::Alone, us(80));
        assert!(t.alone.unwrap() < t.shared.unwrap(), "{t:?}");
        assert!(t.alone.unwrap() > before);
        assert_eq!(t.next_way(2), Some(Way::Alone));
    }

    #[test]
    fn settings_other_than_adaptive_and_pools_of_one_are_not_timed() {
        for (setting, workers, want) in [
            (ReplayHelpers::One, 4, 1),
            (ReplayHelpers::All, 4, 4),
            (ReplayHelpers::Adaptive, 1, 1),
            (ReplayHelpers::All, 1, 1),
        ] {
            let p = HelperPolicy::new(setting);
            for _ in 0..40 {
                let c = p.choose(workers);
                assert_eq!(c.helpers, want, "{setting:?} with {workers} workers");
                assert!(c.timed.is_none());
                p.finished(&c, true);
            }
            assert_eq!(p.tuning.lock().runs, 0, "{setting:?}");
        }
    }

    #[test]
    fn an_adaptive_policy_times_its_runs_and_skips_failed_ones() {
        let p = HelperPolicy::new(ReplayHelpers::Adaptive);
        let first = p.choose(2);
        assert_eq!(first.helpers, 2);
        assert!(first.timed.is_none(), "the first run is not timed");
        p.finished(&first, true);
        let second = p.choose(2);
        assert_eq!(second.timed.map(|(w, _)| w), Some(Way::Shared));
        p.finished(&second, false);
        assert!(p.tuning.lock().shared.is_none(), "a failed run was timed");
        let third = p.choose(2);
        assert_eq!(third.timed.map(|(w, _)| w), Some(Way::Shared));
        p.finished(&third, true);
        assert!(p.tuning.lock().shared.is_some());
    }
}
