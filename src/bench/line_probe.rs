//! The time a cache line takes to go from one thread's core to another's
//! and back: a reading of the machine's state to print beside a result.
//!
//! # Why
//!
//! Every op the engine runs passes lines between the pushing thread and a
//! worker (the op's block, its vars' states, the queues), so the cost of
//! that passage bounds the empty rows and the chain's hop. On the 2-core
//! AMD EPYC sandbox it is not a constant of the machine: two threads
//! passing one line back and forth took about 80 ns a round trip in most
//! seconds, 430-500 in others and about 32 in a few, and the state changes
//! within seconds, in the middle of a process as well as between processes
//! (BENCHMARKS.md, "The states of the 2-core sandbox"). That is the drift
//! of the empty rows that only alternating A/Bs could see past; with the
//! round trip printed beside each line (`depengine bench --line-probe`),
//! a reader can tell which state a figure was measured in.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::sync::CachePadded;

/// Failed looks at the line after which a waiting side yields its CPU, so
/// that the probe still ends where both threads share one CPU.
const SPINS_BEFORE_YIELD: u32 = 1 << 12;

/// The mean round trip of a cache line between this thread and a thread
/// it spawns, over `trips` round trips, in nanoseconds: each side writes
/// the line and waits until the other has written it back. `None` when
/// `trips` is 0 or the thread cannot be spawned.
///
/// The operating system places the two threads; on a machine with many
/// cores the figure is that of the two cores they got. Where both get one
/// CPU, each side yields after a while, and the figure is that of two
/// context switches.
///
/// # Example
///
/// ```
/// let ns = depengine::bench::line_round_trip_ns(1_000).expect("a thread");
/// assert!(ns > 0.0);
/// ```
pub fn line_round_trip_ns(trips: u64) -> Option<f64> {
    if trips == 0 {
        return None;
    }
    // One line alone: what the two sides pass is this counter and
    // nothing else. Odd values are this thread's writes, even ones the
    // other's.
    let line = Arc::new(CachePadded::new(AtomicU64::new(0)));
    let other = line.clone();
    let echo = std::thread::Builder::new()
        .name("depengine-line-probe".into())
        .spawn(move || {
            for i in 0..trips {
                wait_for(&other, 2 * i + 1);
                other.store(2 * i + 2, Ordering::Release);
            }
        })
        .ok()?;
    // The first trip waits for the thread to start: not timed.
    line.store(1, Ordering::Release);
    wait_for(&line, 2);
    let start = Instant::now();
    for i in 1..trips {
        line.store(2 * i + 1, Ordering::Release);
        wait_for(&line, 2 * i + 2);
    }
    let elapsed = start.elapsed();
    // The echo thread ends after its last write, which `wait_for` saw.
    echo.join().ok()?;
    let timed = trips - 1;
    Some(if timed == 0 {
        elapsed.as_nanos() as f64
    } else {
        elapsed.as_nanos() as f64 / timed as f64
    })
}

/// Waits until `line` holds `value`, yielding now and then.
fn wait_for(line: &AtomicU64, value: u64) {
    let mut spins = 0u32;
    while line.load(Ordering::Acquire) != value {
        spins += 1;
        if spins == SPINS_BEFORE_YIELD {
            spins = 0;
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn no_trips_is_no_figure() {
        assert_eq!(line_round_trip_ns(0), None);
    }

    #[test]
    fn a_round_trip_takes_time_and_ends_with_one_trip_or_many() {
        // One trip is the untimed start alone: its figure is the time
        // of nothing, which may read as 0 but never below.
        let one = line_round_trip_ns(1).expect("a thread");
        assert!(one >= 0.0 && one.is_finite());
        let many = line_round_trip_ns(2_000).expect("a thread");
        // Two writes that cross cores (or two context switches) cannot
        // take less than a nanosecond, nor, on any machine this runs on,
        // a second.
        assert!(many > 1.0 && many < 1e9, "{many} ns");
    }
}
