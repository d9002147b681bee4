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
pub(crate) use std::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
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

/// Runs a loom model of engine internals (the lib's `loom_models`) with
/// at most two preemptions unless `LOOM_MAX_PREEMPTIONS` says otherwise,
/// as `tests/loom.rs` runs the protocol's.
#[cfg(all(test, loom))]
pub(crate) fn loom_model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(2);
    }
    builder.check(f);
}

/// Adds one to `n` unless it has reached `max`; true when it did. For
/// counts of threads allowed to do something at once (searching workers,
/// a replay's helpers).
pub(crate) fn increment_below(n: &AtomicUsize, max: usize) -> bool {
    n.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
        (v < max).then_some(v + 1)
    })
    .is_ok()
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

/// The vars' lock, which `append_all` first only tries: a spinning lock
/// whose unlock is a plain store, or under loom one whose `try_lock` loom
/// models faithfully (see the module).
mod try_mutex;
pub(crate) use self::try_mutex::{TryMutex, TryMutexGuard};

/// The sleep protocol's fence split between the pushing side (a compiler
/// fence) and the sleeping side (a process-wide barrier); SeqCst fences on
/// both sides under loom.
pub(crate) mod asymmetric_fence;

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

/// Repeats a steal from a work queue until it settles: what it took, or
/// `None` when the queue was empty. A steal that raced another thief asks
/// to be tried again (`Steal::Retry`).
#[inline]
pub(crate) fn steal_settled<T>(mut steal: impl FnMut() -> deque::Steal<T>) -> Option<T> {
    loop {
        match steal() {
            deque::Steal::Success(v) => return Some(v),
            deque::Steal::Empty => return None,
            deque::Steal::Retry => {}
        }
    }
}

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

    /// The queue, and whether its owner pops the newest item (LIFO).
    pub(crate) struct Worker<T>(Arc<Mutex<VecDeque<T>>>, bool);
    pub(crate) struct Stealer<T>(Arc<Mutex<VecDeque<T>>>);

    impl<T> Worker<T> {
        pub(crate) fn new_fifo() -> Self {
            Worker(Arc::new(Mutex::new(VecDeque::new())), false)
        }
        pub(crate) fn new_lifo() -> Self {
            Worker(Arc::new(Mutex::new(VecDeque::new())), true)
        }
        pub(crate) fn push(&self, v: T) {
            self.0.lock().push_back(v);
        }
        pub(crate) fn pop(&self) -> Option<T> {
            if self.1 {
                self.0.lock().pop_back()
            } else {
                self.0.lock().pop_front()
            }
        }
        pub(crate) fn len(&self) -> usize {
            self.0.lock().len()
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
