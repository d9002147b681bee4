//! How far a pushing thread may run ahead of the completions.
//!
//! # Why
//!
//! A push costs tens of nanoseconds; an op with a body costs its body. A
//! program that pushes a million 1 µs ops from one thread is done pushing
//! long before the workers are done running, and every op it pushed meanwhile
//! holds an op block (about 200 bytes) and a place in the queues of its
//! vars. Ahead by a million ops, those blocks and queues are some 200 MB,
//! far more than the caches: each op's block, and the queue entry that
//! grants it, comes from memory when a worker gets to it, and what the
//! pusher wrote there has long left its core too. On the 2-core sandbox the
//! full-size `random` (a million ops over 10,000 vars) with 1 µs bodies took
//! 1,520–1,600 ns per op at one worker, against 1,300 at 20,000 ops, and
//! 1,205–1,230 with the lead held to 4,096 ops; the empty `random` at two
//! workers 270–290 against 170–190 (BENCHMARKS-HISTORY.md, "The pushing thread's
//! lead").
//!
//! # Rule
//!
//! Every [`CHECK_EVERY`] pushes, a thread that is not one of the engine's
//! own compares the ops pending (pushed and not completed, by any thread)
//! with the engine's limit (`EngineBuilder::max_lead`). Past it, the push
//! waits until the completions bring the pending ops down to half the
//! limit, so that the next check is some way off. The wait never lasts
//! longer than [`MAX_WAIT`], and it ends, and no later push waits, when
//! [`STALL`] passes without a single completion: ops that wait for
//! something only this thread will do (an async op it completes itself,
//! a var it will write) must not keep it from doing it. Until the next
//! completion comes, pushes do not wait at all.
//!
//! A wait naps, first [`FIRST_NAP`], then as long as the workers need, at
//! the rate they completed ops so far, to bring the pending ops down to half
//! the limit (at most [`LONGEST_NAP`]), and looks at the counts when each
//! nap is over. While a CPU is to spare (fewer of the engine's workers awake
//! than the machine has CPUs) a nap is `yield`s, as the pushing thread then
//! holds no CPU a worker needs; where the awake workers hold every CPU it
//! sleeps: each time the pusher wakes it takes a CPU from a worker, and
//! with 20 µs naps `fan` and `rwmix` with 1 µs bodies at 2 workers ran
//! 10–25% slower than with no limit.
//!
//! Short of the limit, past half of it, where the awake workers hold
//! every CPU, the look `yield`s once ([`Lead::keep`]). The pushing thread
//! is then one thread more than the CPUs, and the scheduler gives it a
//! worker's CPU when it wakes and keeps it there for a slice of a
//! millisecond or more. The op that worker was running waits meanwhile,
//! and with it every op that depends on it, while the other workers may
//! run dry. With half the limit queued the workers need no push soon, and
//! the `yield` hands the CPU back after [`CHECK_EVERY`] pushes. On 2
//! cores with 2 workers, `randsum` and `random` with 1 µs bodies ran
//! 2–11% faster in three A/Bs, `fan` 1–4%, and `indep` (every op ready
//! at its push) 0–2% slower (BENCHMARKS-HISTORY.md, "A pusher that gives way
//! past half its lead").
//!
//! A pusher that helps while it waits (`EngineBuilder::help_while_waiting`)
//! runs queued ops instead of a nap, [`HELP_BETWEEN_LOOKS`] at a time, and
//! naps only when it finds none: such a program started one CPU worker
//! fewer, counting on the pusher, and a pusher that napped here left that
//! CPU idle.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::core::Core;

/// Pushes between two looks at the pending ops: the look sums the
/// completion counter's shards, lines the workers write.
pub(crate) const CHECK_EVERY: u64 = 256;

/// Ops a helping pusher (`EngineBuilder::help_while_waiting`) runs in
/// the lead's wait between two looks at the pending ops.
pub(crate) const HELP_BETWEEN_LOOKS: usize = 32;

/// The longest a push waits for the lead to shrink.
///
/// Why this long: with 10 µs bodies at 2 workers, half the default limit
/// is 10 ms of work. A wait cut at 2 ms left the lead past the limit, so
/// the next check waited again, and the pusher woke every nap of the run,
/// each time taking a CPU from a worker: `indep` and the wavefront with
/// 10 µs bodies at 2 workers ran 2–3% slower than with 10 ms
/// (BENCHMARKS-HISTORY.md, "The lead's waits made longer").
pub(crate) const MAX_WAIT: Duration = Duration::from_millis(10);

/// A wait ends when no op completes for this long.
pub(crate) const STALL: Duration = Duration::from_micros(500);

/// A wait's first sleep, which measures the workers' rate.
pub(crate) const FIRST_NAP: Duration = Duration::from_micros(20);

/// A wait's longest sleep: each wake-up of a sleeping pusher takes a CPU
/// from a worker where the awake workers hold them all, so a long wait
/// is a few long naps. The price: a wait sees that completions stopped
/// only when a nap ends, up to this much after [`STALL`].
pub(crate) const LONGEST_NAP: Duration = Duration::from_millis(2);

impl Core {
    /// What a push from outside the engine whose sequence number is a
    /// multiple of [`CHECK_EVERY`] looks at: a backlog left queued beside
    /// sleeping workers (`PoolShared::wake_for_backlog`), and the lead.
    /// Out of line: one push in [`CHECK_EVERY`] calls it, and the others'
    /// code stays as short.
    #[cold]
    #[inline(never)]
    pub(crate) fn look_every_check(&self) {
        self.wake_for_backlog();
        // A pusher that helps run the backlog keeps near the running ops
        // that way instead (`EngineBuilder::help_while_pushing`); a thread
        // with a batch open cannot wait, as its held ops cannot complete
        // before the batch closes, which then looks
        // ([`Core::look_after_batch`]).
        if !self.config.push_helps && !self.in_batch() {
            self.keep_lead();
        }
    }

    /// What the close of a batch looks at when one of its pushes was one
    /// that looks (`batch.rs`): what that push would have looked at
    /// outside the batch. Its held ops are handed over by then, and no
    /// other batch of this engine is open on the thread
    /// (`Core::close_batch` says when to look). The lead is kept even
    /// where the pushing thread helps while pushing
    /// (`EngineBuilder::help_while_pushing`): a batch's pushes never help,
    /// so nothing else keeps its pushes near the running ops.
    #[cold]
    #[inline(never)]
    pub(crate) fn look_after_batch(&self) {
        self.wake_for_backlog();
        self.keep_lead();
    }

    /// Keeps the rule above, where there is a limit. The engine's own
    /// threads never wait: an op that pushes ops would hold the worker
    /// the pending ops need.
    fn keep_lead(&self) {
        if self.lead.limited() && !self.on_own_thread() {
            self.lead.keep(&LeadOf(self));
        }
    }
}

/// What a push that keeps the lead sees of its engine.
struct LeadOf<'a>(&'a Core);

impl LeadProbe for LeadOf<'_> {
    fn counts(&self) -> (u64, u64) {
        self.0.counts()
    }

    fn nap(&self, hint: Duration) {
        if self.0.config.wait_helps {
            self.help_or_nap(hint);
        } else {
            nap(self.0.cpu_to_spare(), hint);
        }
    }

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn cpu_to_spare(&self) -> bool {
        self.0.cpu_to_spare()
    }

    fn give_way(&self) {
        std::thread::yield_now();
    }
}

impl LeadOf<'_> {
    /// The nap of a pusher that helps while it waits
    /// (`help_while_waiting`): it runs queued ops rather than leave its
    /// CPU idle (on 2 cores, one worker and a helping pusher ran 10 µs
    /// bodies at 1.2 threads' worth while the pusher napped here), and
    /// while none is queued it looks for one after each `yield` until
    /// `hint` is up: the op running elsewhere may release many at once
    /// (a write before 63 reads on `rwmix`), which a whole nap would leave
    /// to the workers alone. Where the awake workers hold every CPU it
    /// sleeps, at most [`FIRST_NAP`].
    fn help_or_nap(&self, hint: Duration) {
        let core = self.0;
        let start = Instant::now();
        loop {
            if core.help_up_to(HELP_BETWEEN_LOOKS) > 0 {
                return;
            }
            if !core.cpu_to_spare() {
                std::thread::sleep(hint.min(FIRST_NAP));
                return;
            }
            std::thread::yield_now();
            if start.elapsed() >= hint {
                return;
            }
        }
    }
}

/// What the lead's wait sees of the engine (and of time, for tests).
pub(crate) trait LeadProbe {
    /// Ops pushed and ops completed so far.
    fn counts(&self) -> (u64, u64);
    /// Lets the workers run for a while, about `hint` if it sleeps.
    fn nap(&self, hint: Duration);
    /// The current instant.
    fn now(&self) -> Instant;
    /// True while fewer of the engine's workers are awake than the
    /// machine has CPUs.
    fn cpu_to_spare(&self) -> bool;
    /// Hands the pushing thread's CPU to a thread that waits for one.
    fn give_way(&self);
}

/// What a look at the lead did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kept {
    /// Nothing: the lead is within half the limit, a CPU is to spare, or
    /// the workers stalled.
    Passed,
    /// Yielded once: past half the limit, with no CPU to spare.
    GaveWay,
    /// Waited for the lead to shrink: past the limit.
    Waited,
}

/// An engine's limit on the pending ops, and what its waits learned.
#[derive(Debug)]
pub(crate) struct Lead {
    /// Most ops pending before a push waits; 0: no limit.
    max: u64,
    /// The completed count at the last wait that ended for want of
    /// completions: while it is still the count, no push waits.
    stalled_at: AtomicU64,
}

impl Lead {
    /// A limit of `max` pending ops (0: none).
    pub(crate) fn new(max: usize) -> Self {
        Lead {
            max: max as u64,
            stalled_at: AtomicU64::new(u64::MAX),
        }
    }

    /// The completed count at which the last wait found the workers
    /// stalled, if one did.
    #[cfg(test)]
    pub(crate) fn stalled_at(&self) -> Option<u64> {
        Some(self.stalled_at.load(Ordering::Relaxed)).filter(|&c| c != u64::MAX)
    }

    /// True when there is a limit to keep.
    #[inline]
    pub(crate) fn limited(&self) -> bool {
        self.max > 0
    }

    /// Keeps the rule above: waits while more than the limit is
    /// pending, yields once past half of it where the awake workers hold
    /// every CPU.
    pub(crate) fn keep(&self, probe: &impl LeadProbe) -> Kept {
        let (pushed, done) = probe.counts();
        let pending = pushed.saturating_sub(done);
        if self.max == 0 || done == self.stalled_at.load(Ordering::Relaxed) {
            return Kept::Passed;
        }
        if pending <= self.max {
            if pending > self.max / 2 && !probe.cpu_to_spare() {
                probe.give_way();
                return Kept::GaveWay;
            }
            return Kept::Passed;
        }
        self.hold(probe, done);
        Kept::Waited
    }

    /// Waits, by the rule above, until half the limit is pending, the
    /// workers stall, or [`MAX_WAIT`] passes; `done` is the completed
    /// count at the start.
    fn hold(&self, probe: &impl LeadProbe, done: u64) {
        let target = self.max / 2;
        let start = probe.now();
        let done_at_start = done;
        let (mut last_done, mut last_move) = (done, start);
        let mut nap = FIRST_NAP;
        loop {
            probe.nap(nap);
            let (pushed, done) = probe.counts();
            let pending = pushed.saturating_sub(done);
            if pending <= target {
                return;
            }
            let now = probe.now();
            if done != last_done {
                (last_done, last_move) = (done, now);
            } else if now.duration_since(last_move) >= STALL {
                self.stalled_at.store(done, Ordering::Relaxed);
                return;
            }
            let waited = now.duration_since(start);
            if waited >= MAX_WAIT {
                return;
            }
            nap = next_nap(waited, done - done_at_start, pending - target).min(MAX_WAIT - waited);
        }
    }
}

/// How long the workers need for `left` more completions, at the rate of
/// `ran` in `waited`, within [`FIRST_NAP`] and [`LONGEST_NAP`].
fn next_nap(waited: Duration, ran: u64, left: u64) -> Duration {
    if ran == 0 {
        return FIRST_NAP;
    }
    let ns = waited.as_nanos().saturating_mul(u128::from(left)) / u128::from(ran);
    let ns = u64::try_from(ns).unwrap_or(u64::MAX);
    Duration::from_nanos(ns).clamp(FIRST_NAP, LONGEST_NAP)
}

/// A nap for a waiting pusher: `yield`s for `hint` where a CPU is to
/// spare, a sleep of `hint` where the awake workers hold them all.
///
/// Why `yield`s for all of `hint` rather than one: each look at the counts
/// sums the completion counter's shards, pulling every worker's shard
/// line from its core, and the worker's next completion misses on it.
/// One look per `yield` was a look per op or two with 1 µs bodies at one
/// worker (BENCHMARKS-HISTORY.md, "The lead's yields timed by the clock").
pub(crate) fn nap(cpu_to_spare: bool, hint: Duration) {
    if cpu_to_spare {
        yield_for(hint, Instant::now, std::thread::yield_now);
    } else {
        std::thread::sleep(hint);
    }
}

/// `yield`s until `span` has passed by the clock `now`, at least once;
/// returns how many times.
fn yield_for(span: Duration, now: impl Fn() -> Instant, mut yield_now: impl FnMut()) -> u32 {
    let start = now();
    let mut yields = 0;
    loop {
        yield_now();
        yields += 1;
        if now().duration_since(start) >= span {
            return yields;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    /// An engine whose workers complete `per_10us` ops every 10 µs, and a
    /// clock that moves by each nap's length.
    struct Fake {
        pushed: Cell<u64>,
        done: Cell<u64>,
        per_10us: u64,
        naps: Cell<u32>,
        /// Whether a CPU is to spare (true unless a test says otherwise).
        spare: Cell<bool>,
        yields: Cell<u32>,
        t0: Instant,
        elapsed: Cell<Duration>,
    }

    impl Fake {
        fn new(pushed: u64, done: u64, per_10us: u64) -> Self {
            Fake {
                pushed: Cell::new(pushed),
                done: Cell::new(done),
                per_10us,
                naps: Cell::new(0),
                spare: Cell::new(true),
                yields: Cell::new(0),
                t0: Instant::now(),
                elapsed: Cell::new(Duration::ZERO),
            }
        }
    }

    impl LeadProbe for Fake {
        fn counts(&self) -> (u64, u64) {
            (self.pushed.get(), self.done.get())
        }
        fn nap(&self, hint: Duration) {
            assert!(!hint.is_zero() && hint <= LONGEST_NAP, "nap of {hint:?}");
            self.naps.set(self.naps.get() + 1);
            self.elapsed.set(self.elapsed.get() + hint);
            let ran = self.per_10us * (hint.as_micros() as u64) / 10;
            self.done
                .set((self.done.get() + ran).min(self.pushed.get()));
        }
        fn now(&self) -> Instant {
            self.t0 + self.elapsed.get()
        }
        fn cpu_to_spare(&self) -> bool {
            self.spare.get()
        }
        fn give_way(&self) {
            self.yields.set(self.yields.get() + 1);
        }
    }

    #[test]
    fn no_wait_within_the_limit_or_without_one() {
        let f = Fake::new(1000, 0, 1);
        assert_eq!(Lead::new(1000).keep(&f), Kept::Passed);
        assert_eq!(Lead::new(0).keep(&f), Kept::Passed);
        assert!(!Lead::new(0).limited());
        assert_eq!(f.naps.get(), 0);
    }

    #[test]
    fn past_half_the_limit_without_a_cpu_to_spare_a_look_gives_way_once() {
        let lead = Lead::new(1000);
        let busy = |pending: u64| {
            let f = Fake::new(pending, 0, 10);
            f.spare.set(false);
            f
        };
        // Past half the limit: one yield, no nap.
        let f = busy(501);
        assert_eq!(lead.keep(&f), Kept::GaveWay);
        assert_eq!((f.yields.get(), f.naps.get()), (1, 0));
        let f = busy(1000);
        assert_eq!(lead.keep(&f), Kept::GaveWay);
        // At half the limit or below: nothing.
        let f = busy(500);
        assert_eq!(lead.keep(&f), Kept::Passed);
        assert_eq!(f.yields.get(), 0);
        // With a CPU to spare the pusher takes none from a worker.
        let f = Fake::new(900, 0, 10);
        assert_eq!(lead.keep(&f), Kept::Passed);
        assert_eq!(f.yields.get(), 0);
        // Past the limit it waits rather than yields.
        let f = busy(1001);
        assert_eq!(lead.keep(&f), Kept::Waited);
        assert_eq!(f.yields.get(), 0);
        // No limit, nothing.
        let f = busy(900);
        assert_eq!(Lead::new(0).keep(&f), Kept::Passed);
        assert_eq!(f.yields.get(), 0);
    }

    #[test]
    fn a_stalled_lead_gives_no_way() {
        // The workers stalled (they wait for this thread): yielding to
        // them would only delay it.
        let lead = Lead::new(100);
        let f = Fake::new(1000, 0, 0);
        assert_eq!(lead.keep(&f), Kept::Waited);
        assert_eq!(lead.stalled_at(), Some(0));
        let f = Fake::new(90, 0, 0);
        f.spare.set(false);
        assert_eq!(lead.keep(&f), Kept::Passed);
        assert_eq!(f.yields.get(), 0);
    }

    #[test]
    fn waits_down_to_half_the_limit_in_few_naps() {
        // 1,000 pending, 10 completing every 10 µs: 600 µs to reach 400.
        let f = Fake::new(1000, 0, 10);
        assert_eq!(Lead::new(800).keep(&f), Kept::Waited);
        assert!(f.done.get() >= 600, "left {} pending", 1000 - f.done.get());
        // The first nap measures the rate, the next sleep for what is left.
        assert!(f.naps.get() <= 4, "{} naps", f.naps.get());
    }

    #[test]
    fn a_yielding_nap_yields_until_its_time_is_up_and_looks_once() {
        // A clock that moves 3 µs per yield: a 20 µs nap is 7 yields (21 µs),
        // not one, and the wait's look at the counts comes after them.
        let us = Duration::from_micros;
        let t0 = Instant::now();
        let clock = Cell::new(t0);
        let tick = || clock.set(clock.get() + Duration::from_micros(3));
        assert_eq!(yield_for(us(20), || clock.get(), tick), 7);
        assert_eq!(clock.get() - t0, us(21));
        // A nap of no time still yields once.
        assert_eq!(yield_for(Duration::ZERO, || clock.get(), || {}), 1);
    }

    #[test]
    fn a_wait_ends_at_its_longest() {
        // One completion per 10 µs: half the limit is 40 ms away, past
        // MAX_WAIT, and completions never stop.
        let f = Fake::new(10_000, 0, 1);
        assert_eq!(Lead::new(8_000).keep(&f), Kept::Waited);
        assert_eq!(f.elapsed.get(), MAX_WAIT);
        assert!(f.done.get() < 2_000);
    }

    #[test]
    fn a_pusher_far_ahead_of_busy_workers_wakes_seldom() {
        // The default limit at two workers, their 10 µs bodies completing
        // 2 ops every 10 µs, and a pusher that pushes 20,000 ops, looking
        // every CHECK_EVERY pushes. Each nap's end wakes the pusher, which
        // takes a CPU from a worker where the workers hold them all. A
        // wait that ended before half the limit was left (at 2 ms, in
        // 500 µs naps) had the next look wait again: 205 naps, one every
        // 98 pushes, against 54 with the limits of this module.
        let lead = Lead::new(4_096);
        let f = Fake::new(0, 0, 2);
        while f.pushed.get() < 20_000 {
            f.pushed.set(f.pushed.get() + CHECK_EVERY);
            lead.keep(&f);
        }
        assert!(
            f.naps.get() <= 100,
            "{} naps for 20,000 pushes",
            f.naps.get()
        );
    }

    #[test]
    fn a_stalled_wait_ends_and_later_pushes_pass_until_a_completion() {
        let lead = Lead::new(100);
        let f = Fake::new(1000, 0, 0);
        assert_eq!(lead.keep(&f), Kept::Waited);
        assert!(f.elapsed.get() >= STALL && f.elapsed.get() < MAX_WAIT);
        // Nothing completed since: the next look passes at once.
        let again = Fake::new(1064, 0, 0);
        assert_eq!(lead.keep(&again), Kept::Passed);
        assert_eq!(again.naps.get(), 0);
        // One completion later, pushes wait again.
        let moved = Fake::new(1128, 1, 10);
        assert_eq!(lead.keep(&moved), Kept::Waited);
        assert!(moved.naps.get() > 0);
    }

    #[test]
    fn naps_follow_the_rate_within_their_bounds() {
        let us = Duration::from_micros;
        assert_eq!(next_nap(us(20), 0, 100), FIRST_NAP);
        // 10 ops in 20 µs, 100 left: 200 µs.
        assert_eq!(next_nap(us(20), 10, 100), us(200));
        assert_eq!(next_nap(us(20), 10, 1), FIRST_NAP);
        assert_eq!(next_nap(us(20), 1, 1_000_000), LONGEST_NAP);
        assert_eq!(next_nap(Duration::MAX, 1, u64::MAX), LONGEST_NAP);
    }
}

/// The engine keeps its lead: the limit resolved from the builder, and
/// the push that finds it passed.
#[cfg(test)]
mod wiring {
    use crate::engine::completion::held_op;
    use crate::engine::{
        Batch, Completion, Engine, EngineError, EngineKind, OpDesc, Var, DEFAULT_LEAD_PER_WORKER,
    };

    #[test]
    fn the_limit_follows_the_builder() {
        let lead = |b: crate::EngineBuilder| b.build().unwrap().core().config.max_lead;
        assert_eq!(
            lead(Engine::builder().cpu_workers(3)),
            3 * DEFAULT_LEAD_PER_WORKER
        );
        assert_eq!(lead(Engine::builder().cpu_workers(3).max_lead(100)), 100);
        assert_eq!(lead(Engine::builder().cpu_workers(3).max_lead(0)), 0);
        assert_eq!(lead(Engine::builder().kind(EngineKind::Naive)), 0);
        assert!(!Engine::builder()
            .kind(EngineKind::Naive)
            .build()
            .unwrap()
            .core()
            .lead
            .limited());
    }

    /// One worker, a lead of 64 ops, and var `x` held by an async op
    /// until the returned completion is consumed.
    fn held_behind_a_small_lead() -> (Engine, Var, Completion) {
        let engine = Engine::builder()
            .cpu_workers(1)
            .max_lead(64)
            .build()
            .unwrap();
        let x = engine.new_var();
        let done = held_op(&engine, &x);
        (engine, x, done)
    }

    /// Pushes `n` ops that write `x`, all queued behind the held op.
    fn push_writes(engine: &Engine, x: &Var, n: usize) -> Result<(), EngineError> {
        (0..n).try_for_each(|_| engine.push(OpDesc::new("after").writes(x), |_| Ok(())))
    }

    /// [`push_writes`] through a batch.
    fn batch_writes(b: &mut Batch<'_>, x: &Var, n: usize) -> Result<(), EngineError> {
        (0..n).try_for_each(|_| b.push(OpDesc::new("after").writes(x), |_| Ok(())))
    }

    /// Completes the held op, waits for all, and checks that the held op
    /// and the `pushed` ops after it all ran.
    fn release_and_check(engine: &Engine, x: &Var, done: Completion, pushed: u64) {
        done.done();
        engine.wait_for_all().unwrap();
        assert_eq!(x.version(), pushed + 1);
    }

    /// Runs `pushes` inside an op (on a worker of the engine), with the
    /// engine and the held var, then checks that no push waited and that
    /// the `pushed` ops ran.
    fn pushed_from_an_op(
        pushed: u64,
        pushes: impl FnOnce(&Engine, &Var) -> Result<(), EngineError> + Send + 'static,
    ) {
        let (engine, x, done) = held_behind_a_small_lead();
        let (inner, x2) = (engine.clone(), x.clone());
        let y = engine.new_var();
        engine
            .push(OpDesc::new("pusher").writes(&y), move |_| {
                Ok(pushes(&inner, &x2)?)
            })
            .unwrap();
        engine.wait_for_var(&y).unwrap();
        assert_eq!(engine.core().lead.stalled_at(), None);
        release_and_check(&engine, &x, done, pushed);
    }

    /// Ops queued behind an async op that the pushing thread completes
    /// itself, past the limit: the pushes find no completion, stop
    /// waiting, and the thread goes on to complete the op.
    #[test]
    fn a_push_past_the_limit_waits_only_while_ops_complete() {
        let (engine, x, done) = held_behind_a_small_lead();
        push_writes(&engine, &x, 1000).unwrap();
        // Nothing could complete: the first wait ended for want of
        // completions, and none waited since (or the loop would not end).
        assert_eq!(engine.core().lead.stalled_at(), Some(0));
        release_and_check(&engine, &x, done, 1000);
    }

    /// The same pushes in batches of 100: no push waits inside a batch,
    /// and a batch that passed a look waits when it closes, as the push
    /// would have (before batches looked, none did and the loop ended
    /// with `stalled_at` still `None`).
    #[test]
    fn batches_past_the_limit_keep_the_lead_when_they_close() {
        let (engine, x, done) = held_behind_a_small_lead();
        for _ in 0..10 {
            engine
                .batch(|b| {
                    batch_writes(b, &x, 100)?;
                    // Queued behind the held op: none ready, none held.
                    assert_eq!(b.held(), 0);
                    Ok(())
                })
                .unwrap();
        }
        assert_eq!(engine.core().lead.stalled_at(), Some(0));
        release_and_check(&engine, &x, done, 1000);
    }

    /// Batches nested in one batch of the same engine leave the look to
    /// the outermost: nothing waits until it closes, and then it does.
    #[test]
    fn nested_batches_leave_the_look_to_the_outermost() {
        let (engine, x, done) = held_behind_a_small_lead();
        engine
            .batch(|_outer| {
                for _ in 0..10 {
                    engine.batch(|inner| batch_writes(inner, &x, 100))?;
                }
                assert_eq!(engine.core().lead.stalled_at(), None);
                Ok(())
            })
            .unwrap();
        assert_eq!(engine.core().lead.stalled_at(), Some(0));
        release_and_check(&engine, &x, done, 1000);
    }

    /// A batch of fewer pushes than between two looks, none of them at a
    /// look, does not look when it closes.
    #[test]
    fn a_batch_between_two_looks_does_not_look() {
        let (engine, x, done) = held_behind_a_small_lead();
        // Pushes are numbered from 0, and a push looks when its number is
        // a multiple of 256: the held op was push 0, so pushes 1 to 255,
        // past the limit of 64, pass no look.
        engine.batch(|b| batch_writes(b, &x, 255)).unwrap();
        assert_eq!(engine.core().lead.stalled_at(), None);
        // The next push, number 256, looks, finds no completion and stops
        // waiting.
        push_writes(&engine, &x, 1).unwrap();
        assert_eq!(engine.core().lead.stalled_at(), Some(0));
        release_and_check(&engine, &x, done, 256);
    }

    #[test]
    fn ops_pushed_from_an_op_never_wait() {
        pushed_from_an_op(1000, |engine, x| push_writes(engine, x, 1000));
    }

    /// Batches pushed from inside an op never wait either when they close.
    #[test]
    fn batches_pushed_from_an_op_never_wait() {
        pushed_from_an_op(1000, |engine, x| {
            (0..10).try_for_each(|_| engine.batch(|b| batch_writes(b, x, 100)))
        });
    }
}
