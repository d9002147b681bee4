//! Sleep and wake-up of a pool's workers.
//!
//! # Protocol
//!
//! A worker that finds no work first *searches* (spins with back-off, counted
//! in `searching`), then *sleeps* (counted in `sleepers`, parked on the
//! condition variable). A thread that queues work calls [`Sleep::notify`],
//! which wakes one sleeper only when nobody is searching — a searching worker
//! will find the work without a system call, and that is what keeps the
//! per-op cost free of syscalls while work keeps coming.
//!
//! At most half of a pool's workers (at least one) search at a time; the
//! others sleep. Idle workers that all spin on the same queue fight over
//! its cache lines with the thread that fills it; a searcher that finds
//! work while more is queued wakes another worker, so a backlog still
//! spreads over the whole pool. (Allowing a single searcher measured faster
//! with 2 workers but made 16 workers pay a wake-up chain on every burst.)
//!
//! # Correctness (no lost wake-up)
//!
//! Pusher: `queue.push(op); fence(SeqCst); if sleepers > 0 && searching == 0 { lock; notify_one }`.
//! Sleeper: `lock; sleepers += 1 (SeqCst); fence(SeqCst); if !has_work() { wait }`.
//!
//! The two fences are ordered in the single SeqCst order. If the pusher's
//! fence comes first, the sleeper's `has_work()` sees the op and does not
//! wait. If the sleeper's fence comes first, the pusher sees `sleepers > 0`;
//! it then takes the lock, which the sleeper holds until it is inside `wait`,
//! so the notification cannot fall between the check and the wait. A
//! searcher that the pusher relied on re-checks the queues after it stops
//! searching (it becomes a sleeper and runs the same check), and a searcher
//! that finds work while more is queued wakes one more worker, so work is
//! never left queued with every worker asleep.

use crate::sync::{fence, AtomicUsize, Condvar, Mutex, Ordering};

pub(crate) struct Sleep {
    sleepers: AtomicUsize,
    searching: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Sleep {
    pub(crate) fn new() -> Self {
        Sleep {
            sleepers: AtomicUsize::new(0),
            searching: AtomicUsize::new(0),
            lock: Mutex::new(()),
            cv: Condvar::new(),
        }
    }

    /// Called after queueing work.
    #[inline]
    pub(crate) fn notify(&self) {
        self.notify_many(1);
    }

    /// Called after queueing `n` ops at once: wakes up to `n` sleepers
    /// under one lock, unless somebody searches. The argument of the module
    /// docs holds for the first wake-up; the others only spread the ops
    /// sooner.
    #[inline]
    pub(crate) fn notify_many(&self, n: usize) {
        fence(Ordering::SeqCst);
        let sleepers = self.sleepers.load(Ordering::SeqCst);
        if sleepers > 0 && self.searching.load(Ordering::SeqCst) == 0 {
            let _g = self.lock.lock();
            if n >= sleepers {
                self.cv.notify_all();
            } else {
                for _ in 0..n {
                    self.cv.notify_one();
                }
            }
        }
    }

    /// Becomes a searcher unless `max` workers already search; a worker
    /// that may not search goes to sleep at once (see the module docs).
    pub(crate) fn try_start_searching(&self, max: usize) -> bool {
        let mut n = self.searching.load(Ordering::SeqCst);
        loop {
            if n >= max {
                return false;
            }
            match self
                .searching
                .compare_exchange_weak(n, n + 1, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return true,
                Err(now) => n = now,
            }
        }
    }

    pub(crate) fn stop_searching(&self) {
        self.searching.fetch_sub(1, Ordering::SeqCst);
    }

    /// Parks the calling worker unless `has_work` says otherwise. May return
    /// spuriously; callers loop.
    pub(crate) fn sleep(&self, has_work: impl Fn() -> bool) {
        let mut g = self.lock.lock();
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if !has_work() {
            self.cv.wait(&mut g);
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }

    /// Wakes every sleeper (shutdown).
    pub(crate) fn wake_all(&self) {
        let _g = self.lock.lock();
        self.cv.notify_all();
    }
}
