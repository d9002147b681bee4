//! Sleep and wake-up of a pool's workers.
//!
//! # Protocol
//!
//! A worker that finds no work first *searches* (spins with back-off, counted
//! in `searching`), then *sleeps*: it puts its index on the `idle` stack
//! (counted in `sleepers`) and parks on its own [`Parker`]. A thread that
//! queues work calls [`Sleep::notify`], which wakes one sleeper only when
//! nobody is searching — a searching worker will find the work without a
//! system call, and that is what keeps the per-op cost free of syscalls while
//! work keeps coming.
//!
//! At most half of a pool's workers (at least one; or as many as
//! `EngineBuilder::max_searching` says) search at a time; the others
//! sleep. Idle workers that all spin on the same queue fight over
//! its cache lines with the thread that fills it; a worker that finds
//! work after searching or after a wake-up, while more is queued, wakes
//! another (two while the pool's FIFO holds more than one op, so that a
//! burst spreads as a tree rather than a chain), so a backlog still
//! spreads over the whole pool (`pool.rs`, `sleep_then_look`, says why
//! the wake-up half is needed). (Allowing a
//! single searcher measured faster with 2 workers but made 16 workers pay
//! a wake-up chain on every burst.) With
//! `EngineBuilder::keep_one_searching` a worker that finds work wakes one
//! more even with nothing left queued, while nobody else searches: it
//! pays the wake-up that the next push would otherwise pay.
//!
//! Each worker parks on a parker of its own rather than on one condition
//! variable for the pool. With one shared mutex and condition variable, a
//! woken worker must take the shared mutex again before it can run, while
//! the thread that woke it takes the same mutex for the next wake-up of the
//! same burst (a completion that releases 63 readers notifies 62 times): the
//! wake-ups then queue behind one another on the mutex. With a parker per
//! worker the notifier holds the `idle` lock only to pop an index, and a
//! woken worker needs no lock another worker or the notifier is waiting for.
//!
//! # Correctness (no lost wake-up)
//!
//! Pusher: `queue.push(op); fence(SeqCst); if sleepers > 0 && searching == 0 { pop an idle worker; unpark it }`.
//! Sleeper: `idle.push(me); sleepers += 1 (SeqCst); fence(SeqCst); if !has_work() { park }`.
//!
//! With the fence split (by default in pools of up to 16 workers where the
//! system has the barrier, `search_config.rs`; or as
//! `EngineBuilder::asymmetric_wake_fence` says) the pusher's fence is a
//! compiler fence and the sleeper's is followed by a process-wide memory
//! barrier (`sync/asymmetric_fence.rs` says why one side still sees the
//! other); the argument below then holds as it stands.
//!
//! The two fences are ordered in the single SeqCst order. If the pusher's
//! fence comes first, the sleeper's `has_work()` sees the op and does not
//! park: it takes itself off the idle stack, or, if a pusher popped it
//! already, waits for that pusher's token (which comes at once). If the
//! sleeper's fence comes first, the pusher sees `sleepers > 0`, pops an idle
//! worker (this one or another sleeper, which then finds the op) and unparks
//! it; a parker keeps the token when the unpark comes before the park, so
//! the order of `unpark` and `park` does not matter. A searcher that the
//! pusher relied on re-checks the queues after it stops searching (it
//! becomes a sleeper and runs the same check), and a searcher or a woken
//! worker that finds work while more is queued wakes one more worker, so
//! work is never left queued with every worker asleep, nor with sleepers
//! beside a backlog that the running workers will not search past. The
//! loom models at the end of this file check the argument (a lost wake-up
//! is a deadlock there).

use crate::sync::{
    asymmetric_fence, fence, increment_below, AtomicUsize, CachePadded, Condvar, Mutex, Ordering,
};

std::thread_local! {
    /// Sleeping workers this thread has woken (`Sleep::wake`), of any
    /// engine: a count of its own, so that counting costs no shared line.
    static WOKEN_HERE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many sleeping pool workers the calling thread has woken so far,
/// of every engine (shutdowns' `wake_all` not counted): what its pushes
/// (or completions) paid in wake-ups (`bench::cpu`'s `pusher_wakes`).
pub(crate) fn woken_by_this_thread() -> u64 {
    WOKEN_HERE.try_with(std::cell::Cell::get).unwrap_or(0)
}

/// One worker's wake-up token: `unpark` before `park` is not lost.
struct Parker {
    woken: Mutex<bool>,
    cv: Condvar,
}

impl Parker {
    fn new() -> Self {
        Parker {
            woken: Mutex::new(false),
            cv: Condvar::new(),
        }
    }

    /// Blocks until the token is set, then clears it.
    fn park(&self) {
        let mut woken = self.woken.lock();
        while !*woken {
            self.cv.wait(&mut woken);
        }
        *woken = false;
    }

    fn unpark(&self) {
        *self.woken.lock() = true;
        self.cv.notify_one();
    }
}

pub(crate) struct Sleep {
    /// The fence split (`sync/asymmetric_fence.rs`): a compiler fence in
    /// [`Sleep::notify_many`], a process-wide barrier in [`Sleep::sleep`].
    /// Set before the pool starts and never written again.
    asymmetric: bool,
    /// Read by every notify, that is after every op queued, by pushing
    /// threads and workers alike; written only when a worker goes to
    /// sleep or is woken. On a line of its own, so that while the workers
    /// keep up the notifies read it from their own caches.
    sleepers: CachePadded<AtomicUsize>,
    /// Written when a worker starts or stops searching, up to twice for
    /// each op a searching worker finds. Beside `sleepers` (as it was
    /// until this padding), every notify missed on a line the workers had
    /// just written: one more transfer on the pushing thread's path for
    /// each op, and the more workers search, the likelier.
    searching: CachePadded<AtomicUsize>,
    /// Indices of the workers that sleep or are about to.
    idle: Mutex<Vec<usize>>,
    parkers: Box<[Parker]>,
}

impl Sleep {
    /// The sleep state of a pool of `workers` workers, indexed `0..workers`.
    pub(crate) fn new(workers: usize) -> Self {
        Sleep {
            asymmetric: false,
            sleepers: CachePadded::new(AtomicUsize::new(0)),
            searching: CachePadded::new(AtomicUsize::new(0)),
            idle: Mutex::new(Vec::with_capacity(workers)),
            parkers: (0..workers).map(|_| Parker::new()).collect(),
        }
    }

    /// The same, with the fence split when `on` (`EngineBuilder::
    /// asymmetric_wake_fence`, which registered the barrier first).
    pub(crate) fn with_asymmetric_fence(mut self, on: bool) -> Self {
        self.asymmetric = on;
        self
    }

    /// Called after queueing work.
    #[inline]
    pub(crate) fn notify(&self) {
        self.notify_many(1);
    }

    /// Called after queueing `n` ops at once: wakes up to `n` sleepers,
    /// unless somebody searches. The argument of the module docs holds for
    /// the first wake-up; the others only spread the ops sooner.
    #[inline]
    pub(crate) fn notify_many(&self, n: usize) {
        if self.asymmetric {
            asymmetric_fence::light();
        } else {
            fence(Ordering::SeqCst);
        }
        if self.sleepers.load(Ordering::SeqCst) > 0 && self.searching.load(Ordering::SeqCst) == 0 {
            self.wake(n);
        }
    }

    /// Pops up to `n` idle workers off the stack, one at a time, and
    /// unparks each (the `idle` lock is not held across an unpark).
    #[cold]
    fn wake(&self, n: usize) {
        for _ in 0..n {
            let popped = {
                let mut idle = self.idle.lock();
                let w = idle.pop();
                if w.is_some() {
                    self.sleepers.fetch_sub(1, Ordering::SeqCst);
                }
                w
            };
            match popped {
                Some(w) => {
                    self.parkers[w].unpark();
                    let _ = WOKEN_HERE.try_with(|n| n.set(n.get() + 1));
                }
                None => break,
            }
        }
    }

    /// Wakes one sleeper, if any, whether or not somebody searches: for
    /// work that a searcher was counted on to find and has not
    /// (`PoolShared::wake_for_backlog`). Like every wake-up here it only
    /// adds one, so the argument above is untouched.
    #[cfg(any(not(loom), test))]
    pub(crate) fn wake_one_anyway(&self) {
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            self.wake(1);
        }
    }

    /// Becomes a searcher unless `max` workers already search; a worker
    /// that may not search goes to sleep at once (see the module docs).
    pub(crate) fn try_start_searching(&self, max: usize) -> bool {
        increment_below(&self.searching, max)
    }

    /// True when fewer than `workers` workers search or sleep: some worker
    /// runs an op, or is about to (`linger.rs`). A hint, read without
    /// ordering: a wrong answer only makes a searcher sleep sooner or
    /// later than it should.
    #[cfg(not(loom))]
    pub(crate) fn some_running(&self, workers: usize) -> bool {
        self.sleepers.load(Ordering::Relaxed) + self.searching.load(Ordering::Relaxed) < workers
    }

    /// How many of the `workers` do not sleep: they run ops or search for
    /// them, each on a CPU (`wait_spin.rs`). A hint, read without
    /// ordering, as [`Sleep::some_running`].
    #[cfg(not(loom))]
    pub(crate) fn awake(&self, workers: usize) -> usize {
        workers.saturating_sub(self.sleepers.load(Ordering::Relaxed))
    }

    pub(crate) fn stop_searching(&self) {
        self.searching.fetch_sub(1, Ordering::SeqCst);
    }

    /// Parks worker `index` unless `has_work` says otherwise. Callers loop
    /// and look for work again when it returns.
    pub(crate) fn sleep(&self, index: usize, has_work: impl Fn() -> bool) {
        {
            let mut idle = self.idle.lock();
            idle.push(index);
            self.sleepers.fetch_add(1, Ordering::SeqCst);
        }
        if self.asymmetric {
            asymmetric_fence::heavy();
        } else {
            fence(Ordering::SeqCst);
        }
        if has_work() {
            let mut idle = self.idle.lock();
            if let Some(at) = idle.iter().position(|&w| w == index) {
                idle.swap_remove(at);
                self.sleepers.fetch_sub(1, Ordering::SeqCst);
                return;
            }
            // A notifier popped this worker and is unparking it: take its
            // token below, so that it cannot cut a later sleep short.
        }
        self.parkers[index].park();
    }

    /// Counts worker `index` as asleep without parking it, for tests of
    /// who gets woken (an unpark then only leaves it a token).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn pretend_asleep(&self, index: usize) {
        self.idle.lock().push(index);
        self.sleepers.fetch_add(1, Ordering::SeqCst);
    }

    /// Workers counted asleep.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn sleepers(&self) -> usize {
        self.sleepers.load(Ordering::SeqCst)
    }

    /// Wakes every sleeper (shutdown, after the flag the sleepers check in
    /// `has_work` is set).
    pub(crate) fn wake_all(&self) {
        let popped = {
            let mut idle = self.idle.lock();
            self.sleepers.fetch_sub(idle.len(), Ordering::SeqCst);
            std::mem::take(&mut *idle)
        };
        for w in popped {
            self.parkers[w].unpark();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    #[test]
    fn a_worker_with_work_in_sight_does_not_sleep_or_stay_idle() {
        let s = Sleep::new(1);
        s.sleep(0, || true);
        assert_eq!(s.sleepers.load(Ordering::SeqCst), 0);
        assert!(s.idle.lock().is_empty());
    }

    #[test]
    fn what_every_notify_reads_shares_no_line_with_the_searchers_count() {
        use crate::util::cache_lines::share_a_line;
        let s = Sleep::new(4);
        // The searchers' count changes with each op a searcher finds; the
        // rest is read by every notify, or written only around a sleep.
        let searching: &AtomicUsize = &s.searching;
        let sleepers: &AtomicUsize = &s.sleepers;
        assert!(!share_a_line(searching, sleepers));
        assert!(!share_a_line(searching, &s.asymmetric));
        assert!(!share_a_line(searching, &s.idle));
        assert!(!share_a_line(searching, &s.parkers));
    }

    #[test]
    fn an_unpark_before_the_park_is_kept() {
        let p = Parker::new();
        p.unpark();
        p.park(); // returns at once: the token was kept
        assert!(!*p.woken.lock(), "the park took the token");
    }

    #[test]
    fn notify_wakes_the_sleepers_one_at_a_time_and_wake_all_the_rest() {
        let s = Arc::new(Sleep::new(3));
        let work = Arc::new(AtomicBool::new(false));
        let woke = Arc::new(AtomicUsize::new(0));
        // Workers past their look for work: each will park (counting
        // sleepers is not enough, since a worker counts itself before it
        // looks and would see the work stored below).
        let looked = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..3)
            .map(|i| {
                let (s, work, woke, looked) =
                    (s.clone(), work.clone(), woke.clone(), looked.clone());
                std::thread::spawn(move || {
                    s.sleep(i, || {
                        let w = work.load(Ordering::SeqCst);
                        looked.fetch_add(1, Ordering::SeqCst);
                        w
                    });
                    woke.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        while looked.load(Ordering::SeqCst) < 3 {
            std::thread::yield_now();
        }
        // Nobody searches, so a notify pops exactly one sleeper, and
        // this thread counts the wake-up as its own.
        let woken_before = woken_by_this_thread();
        work.store(true, Ordering::SeqCst);
        s.notify();
        assert_eq!(woken_by_this_thread(), woken_before + 1);
        while woke.load(Ordering::SeqCst) < 1 {
            std::thread::yield_now();
        }
        assert_eq!(s.sleepers.load(Ordering::SeqCst), 2);
        assert_eq!(s.idle.lock().len(), 2);
        // While a worker searches, a notify leaves the sleepers alone.
        assert!(s.try_start_searching(1));
        s.notify();
        assert_eq!(s.idle.lock().len(), 2);
        assert_eq!(woken_by_this_thread(), woken_before + 1, "nobody woken");
        s.stop_searching();
        s.wake_all();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(woke.load(Ordering::SeqCst), 3);
        assert_eq!(s.sleepers.load(Ordering::SeqCst), 0);
    }
}

/// loom models of the protocol above: every interleaving of sleepers and
/// notifiers that loom explores ends with every worker awake and done. A lost
/// wake-up shows as a deadlock, which loom reports. Run by `scripts/loom.sh`
/// (`cargo test --lib loom_models` under `--cfg loom`).
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use crate::sync::AtomicBool;
    use std::sync::Arc;

    use crate::sync::loom_model as model;
    use loom::thread;

    /// Takes one queued item if there is one (the worker's `find`).
    fn take(items: &AtomicUsize) -> bool {
        let mut n = items.load(Ordering::SeqCst);
        while n > 0 {
            match items.compare_exchange(n, n - 1, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return true,
                Err(now) => n = now,
            }
        }
        false
    }

    /// A worker as `pool.rs` runs one: look, search if allowed, sleep,
    /// look once more after the sleep; returns once it has taken one item.
    /// Finding an item while searching or after the sleep, with more
    /// queued, it wakes another worker, or two with more than one queued
    /// (`PoolShared::wake_another_if_more`); with `keep`
    /// (`EngineBuilder::keep_one_searching`) it wakes one with nothing
    /// queued too, unless somebody searches.
    fn worker(s: &Sleep, items: &AtomicUsize, index: usize, searchers: usize, keep: bool) {
        if take(items) {
            return;
        }
        loop {
            if s.try_start_searching(searchers) {
                let found = take(items);
                s.stop_searching();
                if found {
                    hand_on(s, items, keep);
                    return;
                }
            }
            s.sleep(index, || items.load(Ordering::SeqCst) > 0);
            if take(items) {
                hand_on(s, items, keep);
                return;
            }
        }
    }

    /// `PoolShared::wake_another_if_more` on the model's queue.
    fn hand_on(s: &Sleep, items: &AtomicUsize, keep: bool) {
        match items.load(Ordering::SeqCst) {
            0 if !keep => {}
            0 | 1 => s.notify(),
            _ => s.notify_many(2),
        }
    }

    /// Starts `workers` workers (at most `searchers` searching at once),
    /// runs `push` on this thread, and checks that every worker took an
    /// item and returned.
    fn run(workers: usize, searchers: usize, push: impl Fn(&Sleep, &AtomicUsize)) {
        let s = Arc::new(Sleep::new(workers));
        let items = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..workers)
            .map(|i| {
                let (s, items) = (s.clone(), items.clone());
                thread::spawn(move || worker(&s, &items, i, searchers, false))
            })
            .collect();
        push(&s, &items);
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(items.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_push_racing_a_worker_going_to_sleep_wakes_it() {
        model(|| {
            run(1, 1, |s, items| {
                items.fetch_add(1, Ordering::SeqCst);
                s.notify();
            })
        });
    }

    #[test]
    fn two_pushes_wake_two_sleeping_workers() {
        // No searching: both workers go straight to sleep, so every wake-up
        // comes from a notify.
        model(|| {
            run(2, 0, |s, items| {
                for _ in 0..2 {
                    items.fetch_add(1, Ordering::SeqCst);
                    s.notify();
                }
            })
        });
    }

    #[test]
    fn a_batch_notify_wakes_as_many_workers_as_it_queued() {
        model(|| {
            run(2, 0, |s, items| {
                items.fetch_add(2, Ordering::SeqCst);
                s.notify_many(2);
            })
        });
    }

    /// Starts three workers (at most `searchers` searching at once) that
    /// each hold the item they took (a long body) until all three are
    /// taken, then runs `push` on this thread. A worker left asleep leaves
    /// the other two blocked: a deadlock, which loom reports.
    fn run_holding(searchers: usize, push: impl Fn(&Sleep, &AtomicUsize)) {
        run_holding_keeping(searchers, false, push)
    }

    /// [`run_holding`], the workers handing on as `keep` says (see
    /// [`worker`]).
    fn run_holding_keeping(searchers: usize, keep: bool, push: impl Fn(&Sleep, &AtomicUsize)) {
        let s = Arc::new(Sleep::new(3));
        let items = Arc::new(AtomicUsize::new(0));
        let taken = Arc::new((Mutex::new(0usize), Condvar::new()));
        let handles: Vec<_> = (0..3)
            .map(|i| {
                let (s, items, taken) = (s.clone(), items.clone(), taken.clone());
                thread::spawn(move || {
                    worker(&s, &items, i, searchers, keep);
                    let (n, cv) = &*taken;
                    let mut n = n.lock();
                    *n += 1;
                    cv.notify_all();
                    while *n < 3 {
                        cv.wait(&mut n);
                    }
                })
            })
            .collect();
        push(&s, &items);
        for h in handles {
            h.join().unwrap();
        }
    }

    /// Queues three items one at a time, each with its push's notify.
    fn push_three_one_by_one(s: &Sleep, items: &AtomicUsize) {
        for _ in 0..3 {
            items.fetch_add(1, Ordering::SeqCst);
            s.notify();
        }
    }

    #[test]
    fn a_backlog_queued_while_one_searches_reaches_every_worker() {
        // One worker searching at a time; the pusher queues three items
        // (skipping the wake-ups while the searcher searches) and every
        // worker must get one. Without the woken worker's hand-on, the
        // searcher wakes one sleeper and the third item waits beside the
        // last sleeper.
        model(|| run_holding(1, push_three_one_by_one));
    }

    #[test]
    fn pushes_reach_every_worker_when_all_may_search() {
        // `EngineBuilder::max_searching` set to the whole pool: a push
        // that sees anybody searching wakes nobody, so each item must be
        // found by a searcher or by the check a searcher makes on its way
        // to sleep.
        model(|| run_holding(3, push_three_one_by_one));
    }

    #[test]
    fn pushes_reach_every_worker_when_the_last_searcher_wakes_a_successor() {
        // `EngineBuilder::keep_one_searching`: the extra wake-ups of the
        // workers that take the last item race the pushes' own, which
        // they make rarer; no item may be left beside a sleeper.
        model(|| run_holding_keeping(1, true, push_three_one_by_one));
    }

    #[test]
    fn a_backlog_reaches_a_sleeper_while_the_searcher_has_no_cpu() {
        // `PoolShared::wake_for_backlog`: worker 0 counts as searching but
        // does not run (it has no CPU) until worker 1 has taken the item,
        // so the push's own notify wakes nobody; the pushing thread's look
        // at the backlog must reach worker 1 whether it sleeps already or
        // is on its way to. Without that look, a worker 1 asleep before
        // the push is never woken: a deadlock, which loom reports.
        model(|| {
            let s = Arc::new(Sleep::new(2));
            let items = Arc::new(AtomicUsize::new(0));
            assert!(s.try_start_searching(1));
            let w1 = {
                let (s, items) = (s.clone(), items.clone());
                thread::spawn(move || worker(&s, &items, 1, 1, false))
            };
            items.fetch_add(1, Ordering::SeqCst);
            s.notify();
            if items.load(Ordering::SeqCst) >= 1 {
                s.wake_one_anyway();
            }
            w1.join().unwrap();
            s.stop_searching();
            assert_eq!(items.load(Ordering::SeqCst), 0);
        });
    }

    #[test]
    fn a_burst_woken_once_reaches_every_worker() {
        // No worker may search, so all go to sleep; three items queued at
        // once and one wake-up: the woken worker must hand on (two
        // wake-ups while two are still queued), racing the others' way to
        // sleep.
        model(|| {
            run_holding(0, |s, items| {
                items.fetch_add(3, Ordering::SeqCst);
                s.notify();
            })
        });
    }

    #[test]
    fn wake_all_reaches_a_worker_that_is_going_to_sleep() {
        model(|| {
            let s = Arc::new(Sleep::new(1));
            let stop = Arc::new(AtomicBool::new(false));
            let w = {
                let (s, stop) = (s.clone(), stop.clone());
                thread::spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        s.sleep(0, || stop.load(Ordering::SeqCst));
                    }
                })
            };
            stop.store(true, Ordering::SeqCst);
            s.wake_all();
            w.join().unwrap();
        });
    }
}
