//! How long a blocked caller watches for its answer before it parks.
//!
//! # Why
//!
//! A caller blocked in `wait_for_var`, `push_sync` or `wait_for_all` first
//! spins on a flag, then parks. Parking is cheap; being woken is not: the
//! waker's futex call, then the parked thread being scheduled again, and on
//! a virtual machine whose CPU went idle meanwhile, that whole virtual CPU.
//! On the 2-core KVM sandbox a one-worker `roundtrip` whose async op takes
//! 60 µs took 108 µs per round trip with a fixed 50 µs spin, the caller
//! having parked before its answer came, and 70 µs with a 200 µs spin;
//! with 100 µs ops, 149 against 112 µs (`depengine bench --workload
//! roundtrip --workers 1 --body-us B`; BENCHMARKS-HISTORY.md, "A wait's spin that
//! follows the thread's last wait").
//!
//! A fixed spin long enough for such waits would spend that long on every
//! wait for a long op. So the spin follows the calling thread's own last
//! wait: a thread whose waits are answered within [`SPIN_MAX`] spins long
//! enough to see the next answer come, and one whose waits are long spins
//! only [`SPIN_BASE`] before it parks, about what a wake-up costs, so that
//! a wait it did not need to park for costs at most twice its length.
//!
//! A spinning waiter holds a CPU. Where the engine's workers that are
//! awake (running ops, or looking for them) already hold every CPU, as 2
//! workers on 2 cores do while they drain what a pusher now waiting for
//! all has queued, that CPU is one a worker needs: there the spin past
//! [`SPIN_BASE`] stops. A round trip on an async op, whose workers sleep
//! while the op is out, keeps its spin.
//!
//! # Rule
//!
//! The spin limit is twice the thread's last wait, within [`SPIN_BASE`] and
//! [`SPIN_MAX`]; after a wait longer than [`SPIN_MAX`], or before the
//! thread's first wait, it is [`SPIN_BASE`]. A waiter spins [`SPIN_BASE`]
//! in any case, and past it, up to its limit, only while fewer of the
//! engine's workers are awake than the machine has CPUs ([`cpus`]). Only
//! the length of the spin changes: the waits still park the same way
//! after it, so no wake-up can be lost to this rule.

use std::cell::Cell;
use std::time::{Duration, Instant};

use once_cell::sync::Lazy;

/// The spin of a thread whose last wait was long, or that has not waited
/// yet.
pub(crate) const SPIN_BASE: Duration = Duration::from_micros(50);

/// The longest spin, and the longest last wait that lengthens the next
/// spin.
pub(crate) const SPIN_MAX: Duration = Duration::from_micros(500);

/// The CPUs this process may run on (`sync::cpu_count`, which the default
/// worker counts use too), read once: the spin asks for it every few
/// hundred nanoseconds past [`SPIN_BASE`].
static CPUS: Lazy<usize> = Lazy::new(crate::sync::cpu_count);

/// The CPUs this process may run on.
pub(crate) fn cpus() -> usize {
    *CPUS
}

std::thread_local! {
    /// How long this thread's last blocking wait lasted.
    static LAST_WAIT: Cell<Option<Duration>> = const { Cell::new(None) };
}

/// The spin limit after a last wait of `last` (see the module's rule).
pub(crate) fn limit_after(last: Option<Duration>) -> Duration {
    match last {
        Some(t) if t <= SPIN_MAX => (t * 2).clamp(SPIN_BASE, SPIN_MAX),
        _ => SPIN_BASE,
    }
}

/// One blocking wait of the calling thread: its start and its spin limit.
/// Dropped when the wait ends, it records the wait's length as the
/// thread's last wait.
pub(crate) struct WaitTimer {
    start: Instant,
    limit: Duration,
}

impl WaitTimer {
    /// A wait that starts now, with the limit the thread's last wait gives.
    pub(crate) fn start() -> Self {
        WaitTimer {
            start: Instant::now(),
            limit: limit_after(LAST_WAIT.with(Cell::get)),
        }
    }

    /// How long this wait may spin before it parks.
    #[cfg(test)]
    pub(crate) fn spin_limit(&self) -> Duration {
        self.limit
    }

    /// Whether a wait that has spun for `spun` goes on spinning: always
    /// within [`SPIN_BASE`], and then up to its limit while
    /// `cpu_to_spare` says the engine's awake workers leave a CPU free
    /// (asked only then).
    pub(crate) fn keep_spinning(
        &self,
        spun: Duration,
        cpu_to_spare: impl FnOnce() -> bool,
    ) -> bool {
        spun < SPIN_BASE || (spun < self.limit && cpu_to_spare())
    }

    /// When this wait started.
    pub(crate) fn started(&self) -> Instant {
        self.start
    }
}

impl Drop for WaitTimer {
    fn drop(&mut self) {
        record(self.start.elapsed());
    }
}

/// Records `waited` as the calling thread's last wait.
fn record(waited: Duration) {
    LAST_WAIT.with(|last| last.set(Some(waited)));
}

/// The calling thread's last wait, for the tests of the waits that keep
/// it.
#[cfg(test)]
pub(crate) fn last_wait() -> Option<Duration> {
    LAST_WAIT.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn a_thread_without_a_wait_spins_the_base() {
        assert_eq!(limit_after(None), SPIN_BASE);
    }

    #[test]
    fn a_short_last_wait_keeps_the_base() {
        assert_eq!(limit_after(Some(us(0))), SPIN_BASE);
        assert_eq!(limit_after(Some(us(10))), SPIN_BASE);
        assert_eq!(limit_after(Some(SPIN_BASE / 2)), SPIN_BASE);
    }

    #[test]
    fn a_last_wait_within_the_cap_is_spun_for_twice_over() {
        assert_eq!(limit_after(Some(us(100))), us(200));
        assert_eq!(limit_after(Some(us(200))), us(400));
    }

    #[test]
    fn the_spin_never_passes_the_cap() {
        assert_eq!(limit_after(Some(us(300))), SPIN_MAX);
        assert_eq!(limit_after(Some(SPIN_MAX)), SPIN_MAX);
    }

    #[test]
    fn a_long_last_wait_falls_back_to_the_base() {
        assert_eq!(limit_after(Some(SPIN_MAX + us(1))), SPIN_BASE);
        assert_eq!(limit_after(Some(Duration::from_secs(1))), SPIN_BASE);
    }

    #[test]
    fn the_base_spin_does_not_ask_for_a_spare_cpu() {
        let timer = WaitTimer {
            start: Instant::now(),
            limit: us(400),
        };
        let never = || -> bool { panic!("asked within the base spin") };
        assert!(timer.keep_spinning(Duration::ZERO, never));
        assert!(timer.keep_spinning(SPIN_BASE - us(1), never));
    }

    #[test]
    fn past_the_base_a_wait_spins_to_its_limit_only_beside_a_spare_cpu() {
        let timer = WaitTimer {
            start: Instant::now(),
            limit: us(400),
        };
        assert!(timer.keep_spinning(SPIN_BASE, || true));
        assert!(timer.keep_spinning(us(399), || true));
        assert!(!timer.keep_spinning(SPIN_BASE, || false));
        assert!(!timer.keep_spinning(us(399), || false));
        assert!(!timer.keep_spinning(us(400), || true));
        // A wait at the base limit stops at the base, spare CPU or not.
        let base = WaitTimer {
            start: Instant::now(),
            limit: SPIN_BASE,
        };
        assert!(!base.keep_spinning(SPIN_BASE, || true));
    }

    #[test]
    fn a_wait_sets_the_next_waits_limit_on_its_own_thread_only() {
        std::thread::spawn(|| {
            assert_eq!(WaitTimer::start().spin_limit(), SPIN_BASE);
            // What a timer's drop records, with a length of our choosing
            // (no test waits on the clock).
            record(us(150));
            assert_eq!(WaitTimer::start().spin_limit(), us(300));
            std::thread::spawn(|| {
                assert_eq!(WaitTimer::start().spin_limit(), SPIN_BASE);
            })
            .join()
            .unwrap();
            record(Duration::from_secs(1));
            assert_eq!(WaitTimer::start().spin_limit(), SPIN_BASE);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_timer_records_its_wait_when_dropped() {
        std::thread::spawn(|| {
            assert_eq!(LAST_WAIT.with(Cell::get), None);
            let before_start = Instant::now();
            let timer = WaitTimer::start();
            drop(timer);
            let recorded = LAST_WAIT
                .with(Cell::get)
                .expect("the drop records the wait");
            // The timer started after `before_start` and was dropped
            // before this line: its wait fits inside what elapsed since.
            assert!(recorded <= before_start.elapsed());
        })
        .join()
        .unwrap();
    }
}
