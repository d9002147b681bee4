//! The one module that names synchronisation primitives.
//!
//! Everything else in the crate imports `crate::sync::*`. Under `cfg(loom)` the
//! primitives the dependency protocol relies on (mutexes, condition variables,
//! atomics, threads, thread-locals, spinning) are swapped for loom's so that the
//! loom models in `tests/loom.rs` (and those of the pools' sleep protocol in
//! `engine/executor/sleep.rs`) explore every interleaving of the real engine
//! code. What loom cannot see inside (crossbeam's lock-free queues) is replaced
//! by a `Mutex<VecDeque>` with the same method names.
//!
//! `Arc`/`Weak` stay `std`'s in both builds: reference counts are not part of
//! the dependency protocol, and loom's `Arc` has no `Weak`.

pub(crate) use std::sync::{Arc, Weak};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    fence, AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};

pub(crate) use crossbeam_utils::CachePadded;

// ---------------------------------------------------------------------------
// State outside the dependency protocol.
// ---------------------------------------------------------------------------

/// Primitives for state that no loom model explores: the storage managers'
/// free lists, statistics and registry, and the borrow flags of buffers.
///
/// They stay `std`/parking_lot/once_cell in both builds. Some live in statics
/// with `const` constructors, which loom's types lack, and all of them must
/// keep working when a loom build runs code outside `loom::model` (the storage
/// tests, doc examples). None of them orders the engine's ops: a buffer's
/// memory is published from one op to the next by the var protocol, which is
/// modelled.
pub(crate) mod unmodelled {
    pub(crate) use once_cell::sync::OnceCell;
    pub(crate) use parking_lot::{Mutex, RwLock};
    pub(crate) use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
}

/// Number of logical CPUs, for default worker counts.
pub(crate) fn cpu_count() -> usize {
    #[cfg(loom)]
    {
        2
    }
    #[cfg(not(loom))]
    {
        num_cpus::get().max(1)
    }
}

// ---------------------------------------------------------------------------
// Mutex and Condvar: parking_lot's API shape (no poisoning, `wait(&mut guard)`).
// ---------------------------------------------------------------------------

#[cfg(not(loom))]
pub(crate) use parking_lot::{Condvar, Mutex};

#[cfg(loom)]
pub(crate) use self::loom_mutex::{Condvar, Mutex};

#[cfg(loom)]
#[allow(dead_code)] // the shim mirrors the whole API; not every method is used
mod loom_mutex {
    use std::ops::{Deref, DerefMut};

    /// parking_lot-shaped wrapper over loom's mutex.
    #[derive(Debug)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    /// Guard of [`Mutex`]; the inner option lets [`Condvar::wait`] move the
    /// loom guard out and back through a `&mut`.
    pub(crate) struct MutexGuard<'a, T>(Option<loom::sync::MutexGuard<'a, T>>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Mutex(loom::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard(Some(self.0.lock().expect("loom mutex poisoned")))
        }

        pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
            self.0.try_lock().ok().map(|g| MutexGuard(Some(g)))
        }
    }

    impl<T: Default> Default for Mutex<T> {
        fn default() -> Self {
            Mutex::new(T::default())
        }
    }

    impl<T> Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            self.0.as_ref().expect("guard present")
        }
    }

    impl<T> DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            self.0.as_mut().expect("guard present")
        }
    }

    /// parking_lot-shaped wrapper over loom's condition variable.
    #[derive(Debug, Default)]
    pub(crate) struct Condvar(loom::sync::Condvar);

    impl Condvar {
        pub(crate) fn new() -> Self {
            Condvar(loom::sync::Condvar::new())
        }

        pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
            let inner = guard.0.take().expect("guard present");
            guard.0 = Some(self.0.wait(inner).expect("loom mutex poisoned"));
        }

        pub(crate) fn notify_one(&self) -> bool {
            self.0.notify_one();
            true
        }

        pub(crate) fn notify_all(&self) -> usize {
            self.0.notify_all();
            0
        }
    }
}

/// The vars' lock, which `append_all` first only tries.
///
/// Outside loom it is `spin_try_mutex::TryMutex`: a var's lock guards a
/// few dozen instructions and is never held across a wait, so a waiter
/// spins, then yields, then naps, instead of parking, and the unlock is a
/// plain release store. parking_lot's unlock is a compare-and-swap (it
/// must see whether a waiter parked), so every lock and unlock cost two
/// locked instructions; with one, one-thread pushes of ops of several
/// vars got 3-9% faster (`BENCHMARKS.md`, "The var lock without a locked
/// unlock").
///
/// Under loom it is `loom_try_mutex::TryMutex`. loom's own mutex (0.7)
/// treats a thread whose next step is a `try_lock` like one waiting in
/// `lock`: once another thread takes the mutex, the trying thread is
/// blocked until it is released, where a real `try_lock` would fail and go
/// on. A model whose tried lock is taken by a thread that then waits for a
/// lock the trying thread holds is reported as a deadlock that no real run
/// has. Under loom the lock is therefore a flag taken by compare-and-swap,
/// which `try_lock` tries once; `lock` waits on a loom condition variable
/// instead of spinning, which would multiply the schedules loom explores.
#[cfg(not(loom))]
pub(crate) use self::spin_try_mutex::{TryMutex, TryMutexGuard};

#[cfg(not(loom))]
mod spin_try_mutex {
    use std::cell::UnsafeCell;
    use std::ops::{Deref, DerefMut};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    /// A test-and-test-and-set lock: see [`super::TryMutex`]. Not fair, as
    /// parking_lot's mutex is not between its fairness slices; a var's
    /// lock holders (one pusher appending, workers completing) each hold it
    /// briefly and then do other work, which leaves a spinning waiter its
    /// turn.
    pub(crate) struct TryMutex<T> {
        locked: AtomicBool,
        data: UnsafeCell<T>,
    }

    // SAFETY: the data is reached only through a guard, and at most one
    // guard exists at a time (the `locked` flag), as in any mutex.
    unsafe impl<T: Send> Sync for TryMutex<T> {}
    // SAFETY: moving the mutex moves the data it owns.
    unsafe impl<T: Send> Send for TryMutex<T> {}

    /// Guard of [`TryMutex`]; unlocks when dropped.
    pub(crate) struct TryMutexGuard<'a, T>(&'a TryMutex<T>);

    /// How long a waiter sleeps between looks at a lock whose holder seems
    /// preempted: short against a scheduler's time slice, long against a
    /// critical section.
    const PREEMPTED_HOLDER_NAP: Duration = Duration::from_micros(20);

    impl<T> TryMutex<T> {
        pub(crate) fn new(value: T) -> Self {
            TryMutex {
                locked: AtomicBool::new(false),
                data: UnsafeCell::new(value),
            }
        }

        #[inline]
        pub(crate) fn lock(&self) -> TryMutexGuard<'_, T> {
            match self.try_lock() {
                Some(g) => g,
                None => self.lock_contended(),
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
        /// (`BENCHMARKS.md`). Past the yields the waiter naps, so as not to
        /// burn its core in `yield` calls while the holder waits for one.
        #[cold]
        fn lock_contended(&self) -> TryMutexGuard<'_, T> {
            let mut looks = 0u32;
            loop {
                while self.locked.load(Ordering::Relaxed) {
                    match looks {
                        0..=2 => (0..2u32 << looks).for_each(|_| std::hint::spin_loop()),
                        3..=9 => std::thread::yield_now(),
                        _ => std::thread::sleep(PREEMPTED_HOLDER_NAP),
                    }
                    looks = looks.saturating_add(1);
                }
                if let Some(g) = self.try_lock() {
                    return g;
                }
            }
        }

        #[inline]
        pub(crate) fn try_lock(&self) -> Option<TryMutexGuard<'_, T>> {
            // Acquire: pairs with the unlock's release store, so the holder
            // sees every change made under the lock before.
            self.locked
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .ok()
                .map(|_| TryMutexGuard(self))
        }

        /// Whether some thread holds the lock now (a snapshot, for tests).
        #[cfg(test)]
        pub(crate) fn is_locked(&self) -> bool {
            self.locked.load(Ordering::Relaxed)
        }
    }

    impl<T> Deref for TryMutexGuard<'_, T> {
        type Target = T;
        #[inline]
        fn deref(&self) -> &T {
            // SAFETY: this guard holds the lock, so no `&mut` to the data
            // exists elsewhere while the borrow lives.
            unsafe { &*self.0.data.get() }
        }
    }

    impl<T> DerefMut for TryMutexGuard<'_, T> {
        #[inline]
        fn deref_mut(&mut self) -> &mut T {
            // SAFETY: this guard holds the lock, and `&mut self` makes the
            // borrow the only one through it.
            unsafe { &mut *self.0.data.get() }
        }
    }

    impl<T> Drop for TryMutexGuard<'_, T> {
        #[inline]
        fn drop(&mut self) {
            // No waiter sleeps, so there is nobody to wake and nothing to
            // read back: a store publishes the changes and frees the lock.
            self.0.locked.store(false, Ordering::Release);
        }
    }

    #[cfg(test)]
    mod tests {
        use super::TryMutex;
        use std::sync::{Arc, Barrier};

        #[test]
        fn try_lock_fails_while_held_and_succeeds_after() {
            let m = TryMutex::new(0u32);
            let g = m.lock();
            assert!(m.is_locked());
            assert!(m.try_lock().is_none(), "a held lock was taken twice");
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
}

#[cfg(loom)]
pub(crate) use self::loom_try_mutex::{TryMutex, TryMutexGuard};

#[cfg(loom)]
mod loom_try_mutex {
    use std::cell::UnsafeCell;
    use std::ops::{Deref, DerefMut};

    use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// The var lock under loom: see [`super::TryMutex`].
    #[derive(Debug)]
    pub(crate) struct TryMutex<T> {
        locked: AtomicBool,
        /// Threads waiting in `lock`, counted under `park`.
        waiting: AtomicUsize,
        park: loom::sync::Mutex<()>,
        unlocked: loom::sync::Condvar,
        data: UnsafeCell<T>,
    }

    // SAFETY: the data is reached only through a guard, and at most one
    // guard exists at a time (the `locked` flag), as in any mutex.
    unsafe impl<T: Send> Sync for TryMutex<T> {}
    // SAFETY: moving the mutex moves the data it owns.
    unsafe impl<T: Send> Send for TryMutex<T> {}

    /// Guard of [`TryMutex`]; unlocks when dropped.
    pub(crate) struct TryMutexGuard<'a, T>(&'a TryMutex<T>);

    /// How long a waiter sleeps between looks at a lock whose holder seems
    /// preempted: short against a scheduler's time slice, long against a
    /// critical section.
    const PREEMPTED_HOLDER_NAP: Duration = Duration::from_micros(20);

    impl<T> TryMutex<T> {
        pub(crate) fn new(value: T) -> Self {
            TryMutex {
                locked: AtomicBool::new(false),
                waiting: AtomicUsize::new(0),
                park: loom::sync::Mutex::new(()),
                unlocked: loom::sync::Condvar::new(),
                data: UnsafeCell::new(value),
            }
        }

        pub(crate) fn lock(&self) -> TryMutexGuard<'_, T> {
            if let Some(g) = self.try_lock() {
                return g;
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
                if let Some(g) = self.try_lock() {
                    self.waiting.fetch_sub(1, Ordering::AcqRel);
                    return g;
                }
                park = self.unlocked.wait(park).expect("loom mutex poisoned");
            }
        }

        pub(crate) fn try_lock(&self) -> Option<TryMutexGuard<'_, T>> {
            // Acquire: pairs with the unlock's store, so the holder sees
            // every change made under the lock before.
            self.locked
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .ok()
                .map(|_| TryMutexGuard(self))
        }
    }

    impl<T> Deref for TryMutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            // SAFETY: this guard holds the lock, so no `&mut` to the data
            // exists elsewhere while the borrow lives.
            unsafe { &*self.0.data.get() }
        }
    }

    impl<T> DerefMut for TryMutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            // SAFETY: this guard holds the lock, and `&mut self` makes the
            // borrow the only one through it.
            unsafe { &mut *self.0.data.get() }
        }
    }

    impl<T> Drop for TryMutexGuard<'_, T> {
        fn drop(&mut self) {
            let m = self.0;
            m.locked.store(false, Ordering::Release);
            // A read-modify-write, not a load: see `lock`.
            if m.waiting.fetch_add(0, Ordering::AcqRel) > 0 {
                // Taking `park` orders the notify after a waiter that
                // counted itself has entered its wait (which releases it).
                let _park = m.park.lock().expect("loom mutex poisoned");
                m.unlocked.notify_all();
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Threads, thread-locals and spinning.
// ---------------------------------------------------------------------------

pub(crate) mod thread {
    #[cfg(loom)]
    pub(crate) use loom::thread::{spawn, JoinHandle};
    #[cfg(not(loom))]
    pub(crate) use std::thread::JoinHandle;

    /// Spawns a named engine thread.
    #[cfg(not(loom))]
    pub(crate) fn spawn_named<F>(name: String, f: F) -> std::io::Result<JoinHandle<()>>
    where
        F: FnOnce() + Send + 'static,
    {
        std::thread::Builder::new().name(name).spawn(f)
    }

    /// Spawns an engine thread (loom threads have no names).
    #[cfg(loom)]
    pub(crate) fn spawn_named<F>(_name: String, f: F) -> std::io::Result<JoinHandle<()>>
    where
        F: FnOnce() + Send + 'static,
    {
        Ok(spawn(f))
    }
}

/// `thread_local!` that loom can model (each loom thread gets its own value).
macro_rules! engine_thread_local {
    // A constant initializer: std's thread-locals then skip the
    // first-use check on every access (loom's take the plain form).
    ($(#[$attr:meta])* static $name:ident: $t:ty = const $init:block;) => {
        #[cfg(not(loom))]
        std::thread_local! { $(#[$attr])* static $name: $t = const $init; }
        #[cfg(loom)]
        loom::thread_local! { $(#[$attr])* static $name: $t = $init; }
    };
    ($(#[$attr:meta])* static $name:ident: $t:ty = $init:expr;) => {
        #[cfg(not(loom))]
        std::thread_local! { $(#[$attr])* static $name: $t = $init; }
        #[cfg(loom)]
        loom::thread_local! { $(#[$attr])* static $name: $t = $init; }
    };
}
pub(crate) use engine_thread_local;

/// Exponential back-off for spin loops; under loom every step yields so that
/// the model checker can schedule the thread being waited for.
pub(crate) struct Backoff {
    #[cfg(not(loom))]
    inner: crossbeam_utils::Backoff,
    #[cfg(loom)]
    steps: u32,
}

impl Backoff {
    pub(crate) fn new() -> Self {
        Backoff {
            #[cfg(not(loom))]
            inner: crossbeam_utils::Backoff::new(),
            #[cfg(loom)]
            steps: 0,
        }
    }

    /// Spins (or yields, later on) once.
    pub(crate) fn snooze(&mut self) {
        #[cfg(not(loom))]
        self.inner.snooze();
        #[cfg(loom)]
        {
            self.steps += 1;
            loom::thread::yield_now();
        }
    }

    /// True once spinning longer is unlikely to pay off: time to park.
    pub(crate) fn is_completed(&self) -> bool {
        #[cfg(not(loom))]
        {
            self.inner.is_completed()
        }
        #[cfg(loom)]
        {
            self.steps >= 1
        }
    }
}

// ---------------------------------------------------------------------------
// Work queues: crossbeam-deque, or a Mutex<VecDeque> with the same method names.
// ---------------------------------------------------------------------------

#[cfg(not(loom))]
pub(crate) mod deque {
    pub(crate) use crossbeam_deque::{Injector, Steal, Stealer, Worker};
}

#[cfg(loom)]
#[allow(dead_code)] // mirrors crossbeam-deque's API; not every method is used
pub(crate) mod deque {
    //! Just enough of crossbeam-deque's API, built on loom's mutex.
    use super::{Arc, Mutex};
    use std::collections::VecDeque;

    pub(crate) enum Steal<T> {
        Empty,
        Success(T),
        Retry,
    }

    impl<T> Steal<T> {
        pub(crate) fn is_retry(&self) -> bool {
            matches!(self, Steal::Retry)
        }
        pub(crate) fn success(self) -> Option<T> {
            match self {
                Steal::Success(v) => Some(v),
                _ => None,
            }
        }
    }

    pub(crate) struct Injector<T>(Mutex<VecDeque<T>>);

    impl<T> Injector<T> {
        pub(crate) fn new() -> Self {
            Injector(Mutex::new(VecDeque::new()))
        }
        pub(crate) fn push(&self, v: T) {
            self.0.lock().push_back(v);
        }
        pub(crate) fn is_empty(&self) -> bool {
            self.0.lock().is_empty()
        }
        pub(crate) fn len(&self) -> usize {
            self.0.lock().len()
        }
        pub(crate) fn steal_batch_and_pop(&self, _dest: &Worker<T>) -> Steal<T> {
            self.steal()
        }
        pub(crate) fn steal(&self) -> Steal<T> {
            match self.0.lock().pop_front() {
                Some(v) => Steal::Success(v),
                None => Steal::Empty,
            }
        }
    }

    pub(crate) struct Worker<T>(Arc<Mutex<VecDeque<T>>>);
    pub(crate) struct Stealer<T>(Arc<Mutex<VecDeque<T>>>);

    impl<T> Worker<T> {
        pub(crate) fn new_fifo() -> Self {
            Worker(Arc::new(Mutex::new(VecDeque::new())))
        }
        pub(crate) fn push(&self, v: T) {
            self.0.lock().push_back(v);
        }
        pub(crate) fn pop(&self) -> Option<T> {
            self.0.lock().pop_front()
        }
        pub(crate) fn is_empty(&self) -> bool {
            self.0.lock().is_empty()
        }
        pub(crate) fn stealer(&self) -> Stealer<T> {
            Stealer(self.0.clone())
        }
    }

    impl<T> Stealer<T> {
        pub(crate) fn steal_batch_and_pop(&self, _dest: &Worker<T>) -> Steal<T> {
            self.steal()
        }
        pub(crate) fn steal(&self) -> Steal<T> {
            match self.0.lock().pop_front() {
                Some(v) => Steal::Success(v),
                None => Steal::Empty,
            }
        }
        pub(crate) fn is_empty(&self) -> bool {
            self.0.lock().is_empty()
        }
    }
}
