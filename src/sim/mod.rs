//! Training-memory simulator with swapping.
//!
//! Training keeps the forward pass's feature maps alive until the backward
//! pass reads them. This module replays a training step op by op from a
//! [`Profile`] (read from the four-file profiler format, or derived from a
//! training graph) and reports peak memory, total time, stall time and bytes
//! moved under four models: plain system allocation (*oracle*), a memory
//! *pool*, and two ways of swapping feature maps out to a disk and back
//! (*semi-sync*, *async*). A [`policy`] picks which maps to swap to
//! stay under a memory budget, and a sweep over budgets gives the trade-off
//! curve, drawn by [`svg`].
//!
//! # Semantics
//!
//! Time is in milliseconds; op `k` of the profile runs after op `k - 1`.
//! At each op, in this order:
//!
//! 1. *(swap modes)* decide which swap-ins are due (rule of the mode, below);
//! 2. *(swap modes)* release every swapped map whose swap-out has ended by
//!    this op's start and whose last forward use is an earlier op (the
//!    feature-map release rule), unless its swap-in is due now;
//! 3. *(swap modes)* issue the due swap-ins: memory is allocated when the
//!    swap-in is issued; a due map that has not left memory yet is kept
//!    instead (no read, and a swap-out not yet issued is never issued);
//! 4. wait for the swap-ins of this op's inputs (stall);
//! 5. allocate the outputs, then the workspaces (`resize_info` allocs) —
//!    memory peaks here;
//! 6. compute for the op's time (semi-sync: the op also ends no earlier
//!    than the swap-outs issued right after the previous op; the difference
//!    is stall);
//! 7. free the workspaces, then the release list;
//! 8. *(swap modes)* queue the swap-outs of this op's chosen outputs.
//!
//! Allocation models (both are tracked in every run):
//!
//! - **oracle**: every tensor from the system and back; the cost is the peak
//!   of live bytes;
//! - **pool**: a request is rounded with [`SimConfig::rounding`] (the pooled
//!   storage manager's own rule, [`crate::storage::rounding`]); a free block
//!   of exactly that rounded size is reused, otherwise the pool grows by it;
//!   freed blocks go back to the pool, never to the system; the cost is the
//!   pool's final size.
//!
//! The disk moves `bandwidth` bytes per second (default
//! [`DEFAULT_BANDWIDTH`]: 104,094,472 bytes in 4.452 s) and has one FIFO
//! queue shared by reads and writes: a transfer issued at `t` starts at
//! `max(t, end of the previous transfer)`.
//!
//! - **semi-sync**: swap-outs of op `k`'s outputs are issued when op `k`
//!   ends; op `k + 1` ends when both its compute and those swap-outs have
//!   ended. A map first read in the backward pass by op `j` is swapped in
//!   when op `j - 1` starts; op `j` waits for it.
//! - **async**: swap-outs are issued when the producing op ends and nobody
//!   waits for them. Each swap-in is issued at the latest op start that
//!   still hides it given the queue, and no earlier than the start of the
//!   last forward op (see [`async_swap`] for the exact rule); an op whose
//!   input has not arrived waits.
//!
//! Feature maps are tensors produced by an op before `forward_ops` (of
//! non-zero size) and read by an op at or after it. A swapped map is read
//! back once, before its first backward use, and then stays in memory until
//! its release list frees it.
//!
//! Reported figures ([`SimResult`]):
//! - `peak_bytes`: under the oracle model the peak of live bytes, under the
//!   pool model the pool's final size (the swap modes use the pool by
//!   default, [`SimConfig::alloc`]); both measures are always reported too;
//! - `total_ms`: end of the last op; `stall_ms`: total minus the sum of op
//!   times (time ops spent waiting on the disk);
//! - `swapped_bytes`: bytes through the disk, swap-outs plus swap-ins.
//!
//! # Examples
//!
//! ```
//! use depengine::sim::{from_graph, policy, simulate, Mode, SimConfig};
//! let profile = from_graph::load("tests/data/resnet18_train_b8.json", &Default::default(), None)?;
//! let config = SimConfig::default();
//! let oracle = simulate(&profile, Mode::Oracle, &config, &[]);
//! let pool = simulate(&profile, Mode::Pool, &config, &[]);
//! assert!(oracle.peak_bytes <= pool.peak_bytes);
//!
//! // Swap feature maps semi-synchronously to fit in 3/4 of the pool.
//! let budget = pool.peak_bytes / 4 * 3;
//! let plan = policy::choose(&profile, Mode::SemiSync, &config, budget);
//! assert_eq!(plan.result.fits, Some(true));
//! assert!(plan.result.peak_bytes <= budget);
//! assert!(plan.result.total_ms > pool.total_ms); // the disk costs time
//! # Ok::<(), depengine::sim::ProfileError>(())
//! ```

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::storage::rounding::Rounding;

mod alloc_model;
pub mod async_swap;
pub mod from_graph;
pub mod policy;
pub mod profile;
pub mod semi_sync;
pub mod svg;
mod swap;

pub use alloc_model::AllocModel;
pub use profile::{FeatureMap, Op, Profile, ProfileError, Tensor, TensorKey};

/// Default disk bandwidth in bytes per second: the seed's measurement,
/// 104,094,472 bytes in 4.452 s.
pub const DEFAULT_BANDWIDTH: f64 = 104_094_472.0 / 4.452;

/// A simulation model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Every tensor from the system; no swapping.
    Oracle,
    /// A never-shrinking pool; no swapping.
    Pool,
    /// Semi-synchronous swapping.
    SemiSync,
    /// Fully asynchronous swapping.
    Async,
}

impl Mode {
    /// All four, in report order.
    pub const ALL: [Mode; 4] = [Mode::Oracle, Mode::Pool, Mode::SemiSync, Mode::Async];
    /// The two swap modes.
    pub const SWAP: [Mode; 2] = [Mode::SemiSync, Mode::Async];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Oracle => "oracle",
            Mode::Pool => "pool",
            Mode::SemiSync => "semi-sync",
            Mode::Async => "async",
        }
    }

    /// Whether the mode swaps.
    pub fn swaps(self) -> bool {
        matches!(self, Mode::SemiSync | Mode::Async)
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown mode \"{s}\"; use oracle, pool, semi-sync or async"))
    }
}

/// Settings of a simulation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimConfig {
    /// The memory measure of the swap modes (oracle and pool modes always
    /// use their own). Default: pool.
    pub alloc: AllocModel,
    /// The pool's rounding rule. Default: [`Rounding::round_default`].
    pub rounding: Rounding,
    /// Disk bandwidth in bytes per second; must be positive and finite.
    pub bandwidth: f64,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            alloc: AllocModel::Pool,
            rounding: Rounding::round_default(),
            bandwidth: DEFAULT_BANDWIDTH,
        }
    }
}

/// What one simulation reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimResult {
    /// The model.
    pub mode: Mode,
    /// The memory measure `peak_bytes` uses.
    pub alloc: AllocModel,
    /// Peak memory under `alloc`.
    pub peak_bytes: u64,
    /// The op at which `peak_bytes` was reached (first for oracle, last
    /// growth for the pool).
    pub peak_op: usize,
    /// Peak of live bytes (oracle measure).
    pub live_peak_bytes: u64,
    /// The op at which `live_peak_bytes` was first reached.
    pub live_peak_op: usize,
    /// Final pool size (pool measure).
    pub pool_bytes: u64,
    /// End of the last op, ms.
    pub total_ms: f64,
    /// Sum of op times, ms.
    pub compute_ms: f64,
    /// Time ops waited on the disk, ms (`total_ms - compute_ms`).
    pub stall_ms: f64,
    /// Bytes through the disk: swap-outs plus swap-ins.
    pub swapped_bytes: u64,
    /// Bytes written (swap-outs).
    pub swapped_out_bytes: u64,
    /// Bytes read back (swap-ins).
    pub swapped_in_bytes: u64,
    /// Feature maps actually swapped out.
    pub swapped_maps: usize,
    /// The budget the swap set was chosen for, if any.
    pub budget_bytes: Option<u64>,
    /// Whether `peak_bytes <= budget_bytes`, when there is a budget.
    pub fits: Option<bool>,
}

/// Simulates `profile` under `mode`, swapping the feature maps whose tensor
/// indices are in `swap` (ignored by the oracle and pool modes; indices
/// that are not feature maps are ignored).
///
/// # Panics
///
/// Never on a profile made by [`Profile::load_dir`] or [`from_graph`]; a
/// hand-built profile whose ops name tensor indices outside
/// [`Profile::tensors`] panics. `config.bandwidth` should be positive and
/// finite (zero makes every transfer infinitely long).
pub fn simulate(profile: &Profile, mode: Mode, config: &SimConfig, swap: &[usize]) -> SimResult {
    swap::run(profile, mode, config, swap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_print() {
        for m in Mode::ALL {
            assert_eq!(m.name().parse::<Mode>(), Ok(m));
        }
        assert!("sync".parse::<Mode>().is_err());
        assert_eq!(
            serde_json::to_string(&Mode::SemiSync).unwrap(),
            "\"semi-sync\""
        );
    }
}
