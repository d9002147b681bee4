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

/// How long a blocked caller spins for its signal before it parks.
#[cfg(not(loom))]
pub(crate) const SIGNAL_SPIN: std::time::Duration = std::time::Duration::from_micros(50);

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
    /// Spins (yielding now and then) for up to `SIGNAL_SPIN` first: a wait
    /// is often answered within microseconds — an async op completed by
    /// another thread, a short op on a worker — and waking a parked thread
    /// costs tens of microseconds. The spin only watches a flag; the
    /// result is always taken under the lock.
    pub(crate) fn wait(&self) -> Result<(), Arc<Failure>> {
        #[cfg(not(loom))]
        {
            let start = std::time::Instant::now();
            let mut spins = 0u32;
            while !self.ready.load(Ordering::Acquire) {
                spins = spins.wrapping_add(1);
                if spins % 64 == 0 {
                    if start.elapsed() > SIGNAL_SPIN {
                        break;
                    }
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        }
        let mut s = self.state.lock();
        loop {
            if let Some(r) = s.take() {
                return r;
            }
            self.cv.wait(&mut s);
        }
    }
}
