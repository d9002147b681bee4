//! An offset planner that searches over placement orders: several orders
//! (by size, by area, by lifetime, by first use, by breadth) with best-fit
//! and first-fit gaps, then a local search that moves the tensors that set
//! the arena's height earlier in the best order found. It starts from greedy
//! by size, so it is never worse than it.

use std::time::{Duration, Instant};

use super::conflicts::Conflicts;
use super::lower_bound::{lower_bound, task_breadths, task_profiles};
use super::offsets::{Fit, Placer};
use super::records::UsageRecord;
use super::{order_by_size, OffsetsAssignment};
use crate::util::rng::SplitMix64;

/// Settings of [`improve`].
#[derive(Debug, Clone)]
pub struct ImproveOptions {
    /// Offsets are multiples of this (0 or 1: any).
    pub alignment: u64,
    /// Local-search steps after the fixed orders (each one placement).
    pub iterations: usize,
    /// Stop the local search after this long, whatever `iterations` says.
    /// None: run all iterations (deterministic).
    pub time_limit: Option<Duration>,
    /// Seed of the local search's random moves.
    pub seed: u64,
}

impl Default for ImproveOptions {
    fn default() -> Self {
        Self {
            alignment: 1,
            iterations: 300,
            time_limit: None,
            seed: 0x9E37_79B9,
        }
    }
}

fn sorted_by<K: Ord>(n: usize, key: impl Fn(usize) -> K) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    v.sort_by_key(|&i| key(i));
    v
}

/// The fixed orders tried first, greedy by size's own order first.
pub(crate) fn seed_orders(records: &[UsageRecord]) -> Vec<Vec<usize>> {
    use std::cmp::Reverse;
    let n = records.len();
    let span = |i: usize| (records[i].last - records[i].first + 1) as u64;
    let mut orders = vec![
        order_by_size(records),
        sorted_by(n, |i| {
            (Reverse(records[i].size as u128 * span(i) as u128), i)
        }),
        sorted_by(n, |i| (Reverse(span(i)), Reverse(records[i].size), i)),
        sorted_by(n, |i| (Reverse(records[i].size), records[i].first, i)),
        sorted_by(n, |i| (Reverse(records[i].size), Reverse(span(i)), i)),
        sorted_by(n, |i| (records[i].first, Reverse(records[i].size), i)),
    ];
    // Widest op first, its tensors largest first.
    let profiles = task_profiles(records);
    let breadths = task_breadths(records);
    let tasks = sorted_by(profiles.len(), |t| (Reverse(breadths[t]), t));
    let mut seen = vec![false; n];
    let mut order = Vec::with_capacity(n);
    for t in tasks {
        for &i in &profiles[t] {
            if !std::mem::replace(&mut seen[i], true) {
                order.push(i);
            }
        }
    }
    orders.push(order);
    orders
}

/// Searches placement orders for a small arena; the result validates and is
/// never larger than [`offsets_greedy_by_size`](super::offsets_greedy_by_size)
/// with the same alignment.
pub fn improve(
    records: &[UsageRecord],
    conflicts: Option<&Conflicts>,
    options: &ImproveOptions,
) -> OffsetsAssignment {
    let start = Instant::now();
    let n = records.len();
    let bound = lower_bound(records);
    let mut placer = Placer::new(records, conflicts, options.alignment);
    let mut best: Option<(OffsetsAssignment, Vec<usize>, Fit)> = None;
    for order in seed_orders(records) {
        for fit in [Fit::Best, Fit::First] {
            let cand = placer.place(&order, fit);
            if best
                .as_ref()
                .is_none_or(|(b, _, _)| cand.total_size < b.total_size)
            {
                best = Some((cand, order.clone(), fit));
            }
        }
    }
    let Some((mut best_plan, mut best_order, fit)) = best else {
        return OffsetsAssignment::default();
    };
    if n < 2 {
        return best_plan;
    }
    let mut rng = SplitMix64::new(options.seed);
    for step in 0..options.iterations {
        if best_plan.total_size <= bound {
            break;
        }
        if options.time_limit.is_some_and(|t| start.elapsed() >= t) {
            break;
        }
        // Move a tensor that reaches the top of the arena (or, now and then,
        // any tensor) earlier in the order: tensors placed earlier get lower
        // offsets, so the peak may come down.
        let tops: Vec<usize> = (0..n)
            .filter(|&i| best_plan.offsets[i] + records[i].size == best_plan.total_size)
            .collect();
        let mut order = best_order.clone();
        let moves = 1 + rng.below(3) as usize;
        for _ in 0..moves {
            let victim = if step % 4 != 3 && !tops.is_empty() {
                tops[rng.below(tops.len() as u64) as usize]
            } else {
                rng.below(n as u64) as usize
            };
            let Some(from) = order.iter().position(|&x| x == victim) else {
                continue;
            };
            if from == 0 {
                continue;
            }
            let to = rng.below(from as u64) as usize;
            let v = order.remove(from);
            order.insert(to, v);
        }
        let cand = placer.place(&order, fit);
        // Accept ties too, so the search can drift across plateaus.
        if cand.total_size <= best_plan.total_size {
            best_plan = cand;
            best_order = order;
        }
    }
    best_plan
}
