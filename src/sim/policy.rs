//! Which feature maps to swap under a memory budget, and the sweep over
//! budgets that gives the memory/time trade-off curve.
//!
//! # The policy
//!
//! Feature maps are ranked by `size × gap`, where `gap` is the compute time
//! between the end of the map's last forward use and the start of its first
//! backward use (large maps that sit idle longest first: they free the most
//! memory for the longest, and their transfers are the easiest to hide).
//! Ties go to the larger map, then the lower tensor index.
//!
//! 1. Simulate with the current swap set (empty at first). If the peak is
//!    within the budget, stop.
//! 2. Otherwise take the peak op `p` of that run and try the best-ranked map
//!    not tried yet that could be out of memory at `p` (last forward use
//!    `< p <` first backward use; when none is left, the same at the op of
//!    the peak of live bytes, which is where a pool's growth comes from;
//!    when none is left either, any map not tried yet with at least one op
//!    between its last forward and first backward use).
//!    It stays in the set only when it lowers the peak (ties broken by the
//!    peak of live bytes, which a pool's rounding can hide); go to 1. When
//!    every map has been tried, the budget cannot be met: the plan is the
//!    lowest peak found and says `fits: false`.
//! 3. Once within the budget, try dropping each chosen map, lowest rank
//!    first; a drop is kept when the run still fits and is no slower.
//!
//! Every decision is checked by a full simulation, so `fits: true` means the
//! simulated peak is within the budget.

use super::profile::{FeatureMap, Profile};
use super::{simulate, Mode, SimConfig, SimResult};

/// A choice of maps to swap and the simulation that checks it.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Tensor indices of the maps to swap, in rank order.
    pub swap: Vec<usize>,
    /// The simulation with that swap set (`budget_bytes` and `fits` filled).
    pub result: SimResult,
}

/// One point of a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepPoint {
    /// The budget, bytes.
    pub budget: u64,
    /// The policy's plan for it.
    pub plan: Plan,
}

/// The feature maps in rank order (see the module docs).
pub fn ranked_maps(profile: &Profile) -> Vec<FeatureMap> {
    let mut prefix = Vec::with_capacity(profile.ops.len() + 1);
    prefix.push(0.0_f64);
    for op in &profile.ops {
        prefix.push(prefix.last().copied().unwrap_or(0.0) + op.time_ms);
    }
    let gap =
        |m: &FeatureMap| (prefix[m.first_backward_use] - prefix[m.last_forward_use + 1]).max(0.0);
    let mut maps = profile.feature_maps();
    maps.sort_by(|a, b| {
        let sa = a.size as f64 * gap(a);
        let sb = b.size as f64 * gap(b);
        sb.total_cmp(&sa)
            .then(b.size.cmp(&a.size))
            .then(a.tensor.cmp(&b.tensor))
    });
    maps
}

fn with_budget(mut r: SimResult, budget: u64) -> SimResult {
    r.budget_bytes = Some(budget);
    r.fits = Some(r.peak_bytes <= budget);
    r
}

/// Chooses the maps to swap so that `mode`'s peak stays within `budget`
/// bytes with the least added time (see the module docs). For a mode that
/// does not swap, the plan is empty and only says whether it fits.
pub fn choose(profile: &Profile, mode: Mode, config: &SimConfig, budget: u64) -> Plan {
    let run = |set: &[usize]| with_budget(simulate(profile, mode, config, set), budget);
    let mut result = run(&[]);
    if !mode.swaps() || result.peak_bytes <= budget {
        return Plan {
            swap: Vec::new(),
            result,
        };
    }
    let maps = ranked_maps(profile);
    let mut chosen = vec![false; maps.len()];
    let mut tried = vec![false; maps.len()];
    let set_of = |chosen: &[bool]| -> Vec<usize> {
        maps.iter()
            .zip(chosen)
            .filter(|(_, &c)| c)
            .map(|(m, _)| m.tensor)
            .collect()
    };
    let key = |r: &SimResult| (r.peak_bytes, r.live_peak_bytes);
    while result.peak_bytes > budget {
        // Maps that could be out of memory at the peak op, then at the op of
        // the peak of live bytes (where a pool's peak comes from), then any.
        let in_window = |op: usize| {
            maps.iter().enumerate().position(|(i, m)| {
                !tried[i] && m.last_forward_use < op && op < m.first_backward_use
            })
        };
        let next = in_window(result.peak_op)
            .or_else(|| in_window(result.live_peak_op))
            .or_else(|| {
                maps.iter()
                    .enumerate()
                    .position(|(i, m)| !tried[i] && m.last_forward_use + 1 < m.first_backward_use)
            });
        let Some(i) = next else {
            return Plan {
                swap: set_of(&chosen),
                result,
            };
        };
        tried[i] = true;
        chosen[i] = true;
        let trial = run(&set_of(&chosen));
        if key(&trial) < key(&result) {
            result = trial;
        } else {
            chosen[i] = false;
        }
    }
    // Drop what is not needed, lowest rank first.
    for i in (0..maps.len()).rev() {
        if !chosen[i] {
            continue;
        }
        chosen[i] = false;
        let trial = run(&set_of(&chosen));
        if trial.peak_bytes <= budget && trial.total_ms <= result.total_ms {
            result = trial;
        } else {
            chosen[i] = true;
        }
    }
    Plan {
        swap: set_of(&chosen),
        result,
    }
}

/// The budgets of a sweep: `points` budgets evenly spaced from the peak
/// without swapping down to the lowest peak the policy reaches (asked for a
/// budget of 0, semi-sync or async, whichever is lower; all under
/// `config.alloc`), highest first.
pub fn sweep_budgets(profile: &Profile, config: &SimConfig, points: usize) -> Vec<u64> {
    let base_mode = match config.alloc {
        super::AllocModel::Oracle => Mode::Oracle,
        super::AllocModel::Pool => Mode::Pool,
    };
    let hi = simulate(profile, base_mode, config, &[]).peak_bytes;
    let lo = Mode::SWAP
        .iter()
        .map(|&m| choose(profile, m, config, 0).result.peak_bytes)
        .fold(hi, u64::min);
    match points {
        0 => Vec::new(),
        1 => vec![hi],
        n => {
            let mut v: Vec<u64> = (0..n)
                .map(|i| hi - ((hi - lo) as u128 * i as u128 / (n - 1) as u128) as u64)
                .collect();
            v.dedup();
            v
        }
    }
}

/// Runs the policy for each mode at each budget of [`sweep_budgets`].
pub fn sweep(
    profile: &Profile,
    modes: &[Mode],
    config: &SimConfig,
    points: usize,
) -> Vec<(Mode, Vec<SweepPoint>)> {
    let budgets = sweep_budgets(profile, config, points);
    modes
        .iter()
        .map(|&mode| {
            let pts = budgets
                .iter()
                .map(|&budget| SweepPoint {
                    budget,
                    plan: choose(profile, mode, config, budget),
                })
                .collect();
            (mode, pts)
        })
        .collect()
}
