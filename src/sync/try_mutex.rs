//! The vars' lock, which `append_all` first only tries.
//!
//! One mutex type over a raw lock chosen by build:
//!
//! * **Outside loom**, a test-and-test-and-set flag. A var's lock guards a
//!   few dozen instructions and is never held across a wait, so a waiter
//!   spins, then yields, then naps, instead of parking, and the unlock is a
//!   plain release store. parking_lot's unlock is a compare-and-swap (it
//!   must see whether a waiter parked), so every lock and unlock cost two
//!   locked instructions; with one, one-thread pushes of ops of several
//!   vars got 3-9% faster (`BENCHMARKS-HISTORY.md`, "The var lock without
//!   a locked unlock").
//! * **Under loom**, the same flag (its `try_lock` and `unlock`), with a
//!   loom condition variable to wait on. loom's own mutex (0.7) treats a thread
//!   whose next step is a `try_lock` like one waiting in `lock`: once
//!   another thread takes the mutex, the trying thread is blocked until it
//!   is released, where a real `try_lock` would fail and go on. A model
//!   whose tried lock is taken by a thread that then waits for a lock the
//!   trying thread holds is reported as a deadlock that no real run has.
//!   Here `try_lock` tries once; `lock` waits on the condition variable
//!   instead of spinning, which would multiply the schedules loom explores.
//!
//! So the engine's loom models run the flag's own orderings, and its
//! spinning `lock` has models of its own (`loom_models` below, run by
//! `scripts/loom.sh`), where its waits become loom yields: x86 orders every
//! store and load, so a test on this machine cannot catch a weak ordering
//! in its acquire or release; loom can.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};

#[cfg(not(loom))]
use self::spin::RawTryLock;

#[cfg(loom)]
use self::modelled::RawTryLock;

/// A mutex whose `try_lock` fails at once when the lock is held, under
/// loom too. Not fair, as parking_lot's mutex is not between its fairness
/// slices: a var's lock holders (one pusher appending, workers completing)
/// each hold it briefly and then do other work, which leaves a waiter its
/// turn.
pub(crate) struct TryMutex<T> {
    raw: RawTryLock,
    data: UnsafeCell<T>,
}

// SAFETY: the data is reached only through a guard, and at most one guard
// exists at a time (the raw lock), as in any mutex.
unsafe impl<T: Send> Sync for TryMutex<T> {}
// SAFETY: moving the mutex moves the data it owns.
unsafe impl<T: Send> Send for TryMutex<T> {}

/// Guard of [`TryMutex`]; unlocks when dropped.
pub(crate) struct TryMutexGuard<'a, T>(&'a TryMutex<T>);

impl<T> TryMutex<T> {
    pub(crate) fn new(value: T) -> Self {
        TryMutex {
            raw: RawTryLock::new(),
            data: UnsafeCell::new(value),
        }
    }

    #[inline]
    pub(crate) fn lock(&self) -> TryMutexGuard<'_, T> {
        self.raw.lock();
        TryMutexGuard(self)
    }

    #[inline]
    pub(crate) fn try_lock(&self) -> Option<TryMutexGuard<'_, T>> {
        // Not `then_some`: a guard made eagerly would unlock when dropped.
        self.raw.try_lock().then(|| TryMutexGuard(self))
    }

    /// The data, through a unique borrow of the mutex (no lock needed).
    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }

    /// Whether some thread holds the lock now (a snapshot, for tests).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn is_locked(&self) -> bool {
        self.raw.is_locked()
    }
}

impl<'a, T> TryMutexGuard<'a, T> {
    /// Gives the guard up without unlocking: the lock stays held until a
    /// guard from [`TryMutex::reclaim`] is dropped. For a thread that
    /// holds many locks at once and would otherwise keep their guards in
    /// a vector (`append_all`).
    #[inline]
    pub(crate) fn leak(self) {
        std::mem::forget(self);
    }
}

impl<T> TryMutex<T> {
    /// A guard for a lock this thread holds through a guard it leaked
    /// ([`TryMutexGuard::leak`]).
    ///
    /// # Safety
    ///
    /// The calling thread holds the lock, its guard was leaked, and no
    /// other guard made by `reclaim` for it is alive: the new guard is
    /// then the only way to the data, as a guard from `lock` would be.
    #[inline]
    pub(crate) unsafe fn reclaim(&self) -> TryMutexGuard<'_, T> {
        TryMutexGuard(self)
    }
}

impl<T> Deref for TryMutexGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock, so no `&mut` to the data exists
        // elsewhere while the borrow lives.
        unsafe { &*self.0.data.get() }
    }
}

impl<T> DerefMut for TryMutexGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard holds the lock, and `&mut self` makes the borrow
        // the only one through it.
        unsafe { &mut *self.0.data.get() }
    }
}

impl<T> Drop for TryMutexGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.0.raw.unlock();
    }
}

// Under loom `modelled` uses its flag (`try_lock`, `unlock`) and only the
// models below its waiting `lock`.
mod spin {
    use crate::sync::{AtomicBool, Ordering};

    /// How long a waiter sleeps between looks at a lock whose holder seems
    /// preempted: short against a scheduler's time slice, long against a
    /// critical section.
    #[cfg(not(loom))]
    const PREEMPTED_HOLDER_NAP: std::time::Duration = std::time::Duration::from_micros(20);

    /// What a waiter does after its `looks`-th look found the lock held.
    #[cfg(not(loom))]
    #[inline]
    fn wait_after(looks: u32) {
        match looks {
            0..=2 => (0..2u32 << looks).for_each(|_| std::hint::spin_loop()),
            3..=9 => std::thread::yield_now(),
            _ => std::thread::sleep(PREEMPTED_HOLDER_NAP),
        }
    }

    /// Under loom every wait is a yield: loom runs another thread, as it
    /// must for a spin loop to end.
    #[cfg(loom)]
    fn wait_after(_looks: u32) {
        loom::thread::yield_now();
    }

    /// The test-and-test-and-set flag: see the module docs.
    pub(super) struct RawTryLock {
        locked: AtomicBool,
    }

    impl RawTryLock {
        pub(super) fn new() -> Self {
            RawTryLock {
                locked: AtomicBool::new(false),
            }
        }

        #[inline]
        #[cfg_attr(all(loom, not(test)), allow(dead_code))]
        pub(super) fn lock(&self) {
            if !self.try_lock() {
                self.lock_contended();
            }
        }

        /// Waits on plain loads, so that waiters share the line instead of
        /// taking it from the holder: three short spins (2, 4 and 8 pause
        /// instructions, as parking_lot's mutex spins before it parks),
        /// then seven yields, then naps. A holder that runs lets go within
        /// the spins; one still holding after them was likely preempted
        /// (more threads than cores), and the core is better given to it.
        /// Spinning longer first (crossbeam's back-off, 127 pauses) made
        /// `fan` and `randsum` at 2 workers faster and `chain` and
        /// `wavefront` slower, 8-10%, where three threads share two cores;
        /// this schedule was ahead of parking_lot's mutex on all four
        /// (`BENCHMARKS-HISTORY.md`). Past the yields the waiter naps, so
        /// as not to burn its core in `yield` calls while the holder waits
        /// for one.
        #[cold]
        fn lock_contended(&self) {
            let mut looks = 0u32;
            loop {
                while self.locked.load(Ordering::Relaxed) {
                    wait_after(looks);
                    looks = looks.saturating_add(1);
                }
                if self.try_lock() {
                    return;
                }
            }
        }

        #[inline]
        pub(super) fn try_lock(&self) -> bool {
            // Acquire: pairs with the unlock's release store, so the holder
            // sees every change made under the lock before.
            self.locked
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        }

        #[inline]
        pub(super) fn unlock(&self) {
            // No waiter sleeps, so there is nobody to wake and nothing to
            // read back: a store publishes the changes and frees the lock.
            self.locked.store(false, Ordering::Release);
        }

        #[cfg(all(test, not(loom)))]
        pub(super) fn is_locked(&self) -> bool {
            self.locked.load(Ordering::Relaxed)
        }
    }
}

#[cfg(loom)]
mod modelled {
    use loom::sync::atomic::{AtomicUsize, Ordering};

    /// The flag and condition variable: see the module docs.
    pub(super) struct RawTryLock {
        /// The spinning lock's flag, whose `try_lock` and `unlock` are the
        /// real ones: only the wait in `lock` differs.
        flag: super::spin::RawTryLock,
        /// Threads waiting in `lock`, counted under `park`.
        waiting: AtomicUsize,
        park: loom::sync::Mutex<()>,
        unlocked: loom::sync::Condvar,
    }

    impl RawTryLock {
        pub(super) fn new() -> Self {
            RawTryLock {
                flag: super::spin::RawTryLock::new(),
                waiting: AtomicUsize::new(0),
                park: loom::sync::Mutex::new(()),
                unlocked: loom::sync::Condvar::new(),
            }
        }

        pub(super) fn lock(&self) {
            if self.try_lock() {
                return;
            }
            let mut park = self.park.lock().expect("loom mutex poisoned");
            // Either the unlock's read-modify-write of `waiting` comes
            // first, and this one (acquire) then sees the unlock's store,
            // so the retry below finds the lock free; or it comes after
            // this one, and the unlock notifies under `park`. (loom does
            // not model SeqCst stores and loads beyond acquire/release, so
            // the store-then-load of the unlock could not argue this.)
            self.waiting.fetch_add(1, Ordering::AcqRel);
            loop {
                if self.try_lock() {
                    self.waiting.fetch_sub(1, Ordering::AcqRel);
                    return;
                }
                park = self.unlocked.wait(park).expect("loom mutex poisoned");
            }
        }

        pub(super) fn try_lock(&self) -> bool {
            self.flag.try_lock()
        }

        pub(super) fn unlock(&self) {
            self.flag.unlock();
            // A read-modify-write, not a load: see `lock`.
            if self.waiting.fetch_add(0, Ordering::AcqRel) > 0 {
                // Taking `park` orders the notify after a waiter that
                // counted itself has entered its wait (which releases it).
                let _park = self.park.lock().expect("loom mutex poisoned");
                self.unlocked.notify_all();
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::TryMutex;
    use std::sync::{Arc, Barrier};

    #[test]
    fn try_lock_fails_while_held_and_succeeds_after() {
        let m = TryMutex::new(0u32);
        let g = m.lock();
        assert!(m.is_locked());
        assert!(m.try_lock().is_none(), "a held lock was taken twice");
        assert!(
            m.is_locked(),
            "a failed try_lock let go of the holder's lock"
        );
        drop(g);
        assert!(!m.is_locked());
        *m.try_lock().expect("a free lock was refused") += 1;
        assert_eq!(*m.lock(), 1);
    }

    /// A holder that keeps the lock far longer than the back-off spins
    /// (as a preempted one does) sends the waiter to its naps; it must
    /// still get the lock, and only after the holder let go.
    #[test]
    fn a_waiter_behind_a_long_holder_gets_the_lock_after_it() {
        let m = Arc::new(TryMutex::new(Vec::new()));
        let held = Arc::new(Barrier::new(2));
        let mut g = m.lock();
        let waiter = {
            let (m, held) = (m.clone(), held.clone());
            std::thread::spawn(move || {
                held.wait();
                m.lock().push("waiter");
            })
        };
        held.wait();
        std::thread::sleep(std::time::Duration::from_millis(20));
        g.push("holder");
        drop(g);
        waiter.join().unwrap();
        assert_eq!(*m.lock(), ["holder", "waiter"]);
    }

    /// Non-atomic read-modify-writes under the lock from more threads
    /// than this machine has cores (so holders get preempted while
    /// others wait), all started at once: two holders at once show as a
    /// pair seen apart, a lost update as a wrong sum.
    #[test]
    fn threads_exclude_each_other_and_every_waiter_gets_the_lock() {
        const THREADS: usize = 6;
        const ROUNDS: u64 = 50_000;
        let m = Arc::new(TryMutex::new((0u64, 0u64)));
        let start = Arc::new(Barrier::new(THREADS));
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let (m, start) = (m.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    for i in 0..ROUNDS {
                        // Half the threads try first, as `append_all` does.
                        let tried = if t % 2 == 0 { m.try_lock() } else { None };
                        let mut g = tried.unwrap_or_else(|| m.lock());
                        let pair: &mut (u64, u64) = &mut g;
                        let (a, b) = *pair;
                        assert_eq!(a, b, "two holders at once");
                        pair.0 = a + 1;
                        // Opaque to the compiler: the two stores stay
                        // apart, with a few instructions between them.
                        std::hint::black_box((&mut *pair, i));
                        pair.1 = b + 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("a thread saw two holders at once");
        }
        let total = THREADS as u64 * ROUNDS;
        assert_eq!(*m.lock(), (total, total));
    }
}

/// loom models of the spinning lock (the engine's models use `modelled`).
/// Run by `scripts/loom.sh` (`cargo test --lib loom_models` under
/// `--cfg loom`).
#[cfg(all(test, loom))]
mod loom_models {
    use super::spin::RawTryLock;
    use crate::sync::loom_model as model;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    /// Adds one to the count under the lock, taken by `try_lock` first
    /// when `tries` (as `append_all` does), else by `lock`. loom's cell
    /// reports two holders at once, and a holder that does not see the
    /// previous holder's write (an unlock or a lock too weakly ordered).
    fn add_one(lock: &RawTryLock, count: &UnsafeCell<u32>, tries: bool) {
        if !(tries && lock.try_lock()) {
            lock.lock();
        }
        count.with_mut(|c| {
            // SAFETY: the lock is held, so no other thread reaches the
            // cell (which loom checks).
            unsafe { *c += 1 }
        });
        lock.unlock();
    }

    /// Two threads each add one under the lock, one of them trying it
    /// first: every schedule ends with 2, with no access loom finds racing.
    /// (Two threads: with a third, the spinning loads multiply the
    /// schedules past what CI can wait for.)
    #[test]
    fn the_spinning_lock_excludes_and_publishes_what_its_holder_wrote() {
        model(|| {
            let shared = Arc::new((RawTryLock::new(), UnsafeCell::new(0u32)));
            let other = {
                let shared = shared.clone();
                thread::spawn(move || add_one(&shared.0, &shared.1, true))
            };
            add_one(&shared.0, &shared.1, false);
            other.join().unwrap();
            // SAFETY: the other thread has ended (the join orders its
            // accesses before this one).
            let total = shared.1.with(|c| unsafe { *c });
            assert_eq!(total, 2, "an update under the lock was lost");
        });
    }

    /// A `try_lock` that fails leaves the holder's lock held: the holder's
    /// update and the late one's never overlap, whichever comes first.
    #[test]
    fn a_failed_try_leaves_the_lock_to_its_holder() {
        model(|| {
            let shared = Arc::new((RawTryLock::new(), UnsafeCell::new(0u32)));
            let late = {
                let shared = shared.clone();
                thread::spawn(move || {
                    if shared.0.try_lock() {
                        shared.1.with_mut(|c| {
                            // SAFETY: this thread holds the lock.
                            unsafe { *c += 10 }
                        });
                        shared.0.unlock();
                    }
                })
            };
            add_one(&shared.0, &shared.1, false);
            late.join().unwrap();
            shared.0.lock();
            // SAFETY: the lock is held and the other thread has ended.
            let total = shared.1.with(|c| unsafe { *c });
            shared.0.unlock();
            assert!(total == 1 || total == 11, "count {total}");
        });
    }
}
