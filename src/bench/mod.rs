//! The benchmark workloads of the design notes and of the comparison with the
//! peers (MXNet's engine, StarPU, OpenMP tasks, oneTBB's flow graph, rayon),
//! shared by the `depengine bench` command and the criterion benches so that
//! every consumer measures the same thing.
//!
//! Each workload but `roundtrip` is first built as a [`Trace`]: the ops in
//! push order with the vars they read and write, their priority and the busy
//! time of their body. The trace is built outside the timed region and
//! replayed by [`run_trace`]; `depengine bench --dump-trace FILE` writes it for
//! the peer drivers under `peers/`, so every system runs the very same ops.
//!
//! Cost per op = time from the first push to the return of `wait_for_all`,
//! divided by the number of ops; one pushing thread. Busy bodies spin on the
//! clock until their time has passed; efficiency = total body time /
//! (workers × elapsed), and [`ideal_schedule`] says what it would be with an
//! engine that cost nothing.

mod check;
mod cpu;
mod driver;
mod ideal;
mod line_probe;
mod run;
mod trace;
mod workload;

#[cfg(test)]
mod tests;

use std::time::Duration;

use crate::{Engine, EngineError};

pub use check::OrderCheck;
pub use cpu::{account_cpu, account_cpu_threads, cpu_accounting_supported, CpuUse};
pub use driver::{flag_or_exit, flag_value, print_checked, DriverResult};
pub use ideal::{ideal_schedule, IdealSchedule};
pub use line_probe::line_round_trip_ns;
pub use run::{
    busy, roundtrip, run_trace, run_trace_batched, run_trace_pushers, run_trace_replay,
    run_trace_serial, run_trace_stream, ReplayVars, RunResult, TraceReplay,
};
pub use trace::{SplitMix64, Trace, TraceOp, TRACE_MAGIC, TRACE_VERSION};
pub use workload::{
    Spec, SpecError, TraceSize, Workload, ALL_WORKLOADS, FAN_READERS, PRIORITY_HIGH_OPS,
    PRIORITY_LOW_BODY_NS, SEED, TRACE_LIMIT,
};

/// Default number of distinct vars written by `indep` and `readers` in
/// [`run_workload`].
pub const DEFAULT_VARS: usize = 1024;

/// Runs `ops` empty ops of `workload` on `engine`, `indep` and `readers` over
/// `vars` vars (op i writes var i mod `vars`); returns the time from the
/// first push to the return of `wait_for_all`. For `fan` and `priority`,
/// `ops` counts rounds and low-priority ops; `wavefront` runs a 1000 × 1000
/// grid; `roundtrip` runs `ops` round trips.
///
/// # Errors
///
/// Any error of the engine (none is expected for these workloads).
pub fn run_workload(
    engine: &Engine,
    workload: Workload,
    ops: usize,
    vars: usize,
) -> Result<Duration, EngineError> {
    if workload == Workload::Roundtrip {
        return roundtrip(engine, ops, 0, None);
    }
    let spec = Spec {
        vars: vars.max(1),
        ..Spec::new(workload, ops)
    };
    Ok(run_trace(engine, &spec.trace(), None)?.elapsed)
}

/// Summary of repeated timings: the median, the minimum and the maximum.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Median.
    pub median: f64,
    /// Minimum.
    pub min: f64,
    /// Maximum.
    pub max: f64,
}

impl Summary {
    /// The summary of `xs` (empty: all zero).
    pub fn of(xs: &[f64]) -> Summary {
        if xs.is_empty() {
            return Summary {
                median: 0.0,
                min: 0.0,
                max: 0.0,
            };
        }
        let mut v = xs.to_vec();
        v.sort_by(|a, b| a.total_cmp(b));
        Summary {
            median: v[v.len() / 2],
            min: v[0],
            max: v[v.len() - 1],
        }
    }
}

/// The `q`-quantile (0 ≤ q ≤ 1, nearest rank) of `xs`; zero (the
/// type's default) when empty. NaNs, which have no rank, sort as equal to
/// anything.
pub fn quantile<T: Copy + Default + PartialOrd>(xs: &[T], q: f64) -> T {
    if xs.is_empty() {
        return T::default();
    }
    let mut v = xs.to_vec();
    v.sort_unstable_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}
