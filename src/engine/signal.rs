//! One-shot signal from an op's completion to a thread blocked on it.

use crate::sync::{Arc, AtomicBool, Condvar, Mutex, Ordering};

use super::error::Failure;

/// One-shot signal from an op's completion to a blocked caller
/// (`push_sync`, `wait_for_var`, `wait_to_write`).
pub(crate) struct Signal {
    state: Mutex<Option<Result<(), Arc<Failure>>>>,
    cv: Condvar,
    /// Set after `state` is filled: lets the waiter spin a little before it
    /// parks (see [`Signal::wait`]).
    ready: AtomicBool,
}

/// How long of that spin goes without yielding the CPU.
#[cfg(not(loom))]
const SIGNAL_SPIN_UNYIELDING: std::time::Duration = std::time::Duration::from_micros(5);

impl Signal {
    pub(crate) fn new() -> Self {
        Signal {
            state: Mutex::new(None),
            cv: Condvar::new(),
            ready: AtomicBool::new(false),
        }
    }

    pub(crate) fn set(&self, result: Result<(), Arc<Failure>>) {
        let mut s = self.state.lock();
        *s = Some(result);
        self.ready.store(true, Ordering::Release);
        self.cv.notify_all();
    }

    /// Blocks until the signal is set and returns its result.
    ///
    /// Spins first, for as long as `wait_spin.rs` allows (50 µs, or up to
    /// 500 µs where this thread's last wait was answered within that and
    /// the engine's awake workers leave a CPU free): a
    /// wait is often answered within microseconds — an async op completed
    /// by another thread, a short op on a worker — and waking a parked
    /// thread costs tens of microseconds. The spin only watches a flag; the
    /// result is always taken under the lock.
    ///
    /// The first `SIGNAL_SPIN_UNYIELDING` of it do not yield: a thread
    /// that hands work to another and then waits for the answer (an async
    /// op run on the pushing thread, whose body wakes the completing
    /// thread) waited 5–20 µs per round trip when it yielded every 64
    /// looks from the start, and 1.2–2.4 µs when it first spun 5 µs
    /// without yielding (naive executor, `depengine bench --workload
    /// roundtrip --engine naive`, 2-core AMD EPYC sandbox;
    /// BENCHMARKS-HISTORY.md, "Where the peers win, and why" as it read
    /// until 2026-12-02, `roundtrip`). After that the yields let a
    /// signaller that shares this core run.
    ///
    /// `cpu_to_spare` tells whether the engine's awake workers leave a CPU
    /// for this spin past its first 50 µs (`wait_spin.rs`).
    pub(crate) fn wait(&self, cpu_to_spare: impl Fn() -> bool) -> Result<(), Arc<Failure>> {
        // Records this wait's length for the thread's next wait when it
        // goes out of scope, after the result is taken.
        #[cfg(not(loom))]
        let _timer = {
            let timer = super::wait_spin::WaitTimer::start();
            let start = timer.started();
            let mut spins = 0u32;
            while !self.ready.load(Ordering::Acquire) {
                spins = spins.wrapping_add(1);
                if spins % 64 == 0 {
                    let waited = start.elapsed();
                    if !timer.keep_spinning(waited, &cpu_to_spare) {
                        break;
                    }
                    if waited > SIGNAL_SPIN_UNYIELDING {
                        std::thread::yield_now();
                    }
                } else {
                    std::hint::spin_loop();
                }
            }
            timer
        };
        #[cfg(loom)]
        let _ = cpu_to_spare;
        let mut s = self.state.lock();
        loop {
            if let Some(r) = s.take() {
                return r;
            }
            self.cv.wait(&mut s);
        }
    }
}
