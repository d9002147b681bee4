//! An exact offset planner in the spirit of MiniMalloc (Moffitt, ASPLOS 2023).
//!
//! # The search
//!
//! A depth-first search over canonical placements (each tensor at the
//! lowest offset where it fits against the placed tensors it overlaps,
//! offsets never decreasing), pruned by cross-section lower bounds per time
//! section, dominance (no gap left that an unplaced tensor would fill) and
//! twins, and split dynamically at cut points that no unplaced tensor spans;
//! see the `search` module for the rules and why each is sound. Several
//! static tie-breaking rankings are tried in turn with a doubling node limit.
//!
//! Before searching it tries the fixed heuristic orders, then (on graphs
//! whose widest ops leave no slack) the search over only the tensors alive
//! at the widest ops with the rest placed around them. It then runs a short
//! search at the capacity (without one: at the lower bound), a few rounds
//! of the rankings, and improve's own searches (over coalesced tensors,
//! without its local search) before the long search: on MiniMalloc's
//! benchmark traces those reach the target within milliseconds where the
//! plain search needs millions of nodes.
//!
//! With a capacity the answer is *fits* (with a validated plan), *does not
//! fit* (the search space is exhausted) or *unknown* (time or node limit).
//! Under a capacity above the lower bound the long search starts at the
//! bound itself (the tighter target prunes far harder). Without a capacity, it
//! first asks for the lower bound, then bisects towards the best heuristic
//! total (a probe that runs out of its share of the budget is given up on,
//! not counted as proven), and reports the smallest total it found.
//! Every plan the search returns is checked with
//! [`validate_offsets`](super::validate_offsets) before it is trusted.

use std::time::{Duration, Instant};

use super::conflicts::Conflicts;
use super::improve::{improve, ImproveOptions};
use super::lower_bound::lower_bound;
use super::records::UsageRecord;
pub use super::search::MAX_DEPTH;
use super::search::{Budget, Search};
use super::OffsetsAssignment;

/// Settings of [`exact`].
#[derive(Debug, Clone)]
pub struct ExactOptions {
    /// Offsets are multiples of this (0 or 1: any).
    pub alignment: u64,
    /// The arena size to fit into; None: find the smallest total it can.
    pub capacity: Option<u64>,
    /// Give up after this long (None: no clock, only the node limit). It
    /// covers the heuristics that run first too; past it, the answer is
    /// theirs (so a trace whose greedy placement alone takes longer, such
    /// as 100,000 tensors in under a second, overruns it by that much).
    pub time_limit: Option<Duration>,
    /// Give up after visiting this many search nodes, over the whole call.
    pub node_limit: u64,
}

impl Default for ExactOptions {
    fn default() -> Self {
        Self {
            alignment: 1,
            capacity: None,
            time_limit: None,
            node_limit: 5_000_000,
        }
    }
}

/// Whether the records fit the capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fits {
    /// A plan within the capacity was found (and validated).
    Yes,
    /// No plan within the capacity exists.
    No,
    /// The limits ran out before either was shown.
    Unknown,
}

impl Fits {
    /// `Some(true)`, `Some(false)` or `None` for unknown.
    pub fn as_option(self) -> Option<bool> {
        match self {
            Fits::Yes => Some(true),
            Fits::No => Some(false),
            Fits::Unknown => None,
        }
    }
}

/// Above this many records, exact runs improve's full search, with half
/// the time, before its own (see `exact`).
const HEURISTICS_FIRST: usize = 2000;

/// Whether the clock has run out (a budget without one never does).
fn out_of_time(budget: &Budget) -> bool {
    budget.time_left().is_some_and(|t| t.is_zero())
}

/// The short search at the capacity that comes before improve's searches
/// gets this many nodes per tensor (a few rounds of the rankings).
const SHORT_SEARCH_NODES_PER_TENSOR: u64 = 32;

/// What [`exact`] found.
#[derive(Debug, Clone)]
pub struct ExactOutcome {
    /// The best plan known. With a capacity and `fits == Yes` it is within
    /// the capacity; otherwise it is the best heuristic plan.
    pub plan: OffsetsAssignment,
    /// With a capacity: whether the records fit it. Without: `Yes` when the
    /// plan's total is proven optimal, `Unknown` otherwise.
    pub fits: Fits,
    /// The largest total proven infeasible plus one (at least the lower bound).
    pub proven_bound: u64,
    /// Search nodes visited.
    pub nodes: u64,
}

/// Finds a placement within a capacity, proves there is none, or gives up
/// within the limits; see the module notes for the search.
pub fn exact(
    records: &[UsageRecord],
    conflicts: Option<&Conflicts>,
    options: &ExactOptions,
) -> ExactOutcome {
    let start = Instant::now();
    let align = options.alignment.max(1);
    let mut budget = Budget::new(options.time_limit.map(|t| start + t), options.node_limit);
    let bound = lower_bound(records);
    // The fixed orders alone first: cheap, and often already at the target.
    // Under the time limit too: on 100,000 records they took 7 s of a 1 s
    // limit without it.
    let quick = improve(
        records,
        conflicts,
        &ImproveOptions {
            alignment: align,
            iterations: 0,
            search: false,
            ruin_steps: 0,
            squeeze_moves: 0,
            time_limit: options.time_limit,
            ..ImproveOptions::default()
        },
    );
    if out_of_time(&budget) {
        // No time for any search: the heuristic plan, proven only where it
        // is at the bound.
        let at_bound = quick.total_size <= bound;
        let fits = match options.capacity {
            Some(cap) if quick.total_size <= cap => Fits::Yes,
            None if at_bound => Fits::Yes,
            _ => Fits::Unknown,
        };
        return ExactOutcome {
            proven_bound: bound,
            plan: quick,
            fits,
            nodes: 0,
        };
    }
    // The full local search runs only when neither the fixed orders nor the
    // pinned core nor a first search settle it; with a clock it gets the
    // time `left` to it, without one the same effort as `improve` itself,
    // so that exact is never worse than improve with default options.
    // With a capacity, any plan within it ends the search (`target`).
    let full = |left: Option<Duration>| {
        improve(
            records,
            conflicts,
            &ImproveOptions {
                alignment: align,
                time_limit: left,
                target: options.capacity,
                // With a clock, search until it runs out.
                iterations: if left.is_some() {
                    usize::MAX
                } else {
                    ImproveOptions::default().iterations
                },
                ruin_steps: if left.is_some() {
                    usize::MAX
                } else {
                    ImproveOptions::default().ruin_steps
                },
                squeeze_moves: if left.is_some() {
                    usize::MAX
                } else {
                    ImproveOptions::default().squeeze_moves
                },
                ..ImproveOptions::default()
            },
        )
    };
    let mut solver = Search::new(records, conflicts, align);
    match options.capacity {
        Some(cap) => {
            let yes = |plan, nodes| ExactOutcome {
                proven_bound: bound,
                plan,
                fits: Fits::Yes,
                nodes,
            };
            if quick.total_size <= cap {
                return yes(quick, 0);
            }
            // Large traces: the heuristics first, as without a capacity,
            // with three quarters of the time: they stop as soon as a plan
            // fits.
            if records.len() > HEURISTICS_FIRST {
                let h = full(budget.time_left().map(|t| t * 3 / 4));
                if h.total_size <= cap {
                    return yes(h, 0);
                }
            }
            if let Some(plan) = core_first(records, conflicts, cap, align, &mut budget) {
                return yes(plan, budget.nodes);
            }
            // A short search at the capacity: a few rounds of the rankings
            // settle the traces where one of them dives straight to a plan.
            let short = SHORT_SEARCH_NODES_PER_TENSOR * records.len() as u64;
            match budget.share(1, 4, |b| b.limited(short, |b| solver.solve(cap, b))) {
                Fits::Yes => return yes(solver.plan(), budget.nodes),
                Fits::No => {
                    return ExactOutcome {
                        plan: quick,
                        fits: Fits::No,
                        proven_bound: cap + 1,
                        nodes: budget.nodes,
                    }
                }
                Fits::Unknown => {}
            }
            // Then improve's own searches (over coalesced tensors, and a
            // bounded canonical search), without its local search: where
            // the plain search needs millions of nodes, they often reach
            // the capacity within milliseconds.
            let seeded = improve_searches(records, conflicts, align, &budget, Some(cap));
            if seeded.total_size <= cap {
                return yes(seeded, budget.nodes);
            }
            // A plan at the lower bound fits any capacity, and the tighter
            // target prunes far more: a small share of the budget on it.
            if cap > bound && budget.share(1, 10, |b| solver.solve(bound, b)) == Fits::Yes {
                return yes(solver.plan(), budget.nodes);
            }
            // Then the search at the capacity, with most of what is left: it
            // usually settles the question far sooner than the local search
            // finds a plan.
            let fits = budget.share(2, 3, |b| solver.solve(cap, b));
            match fits {
                Fits::Yes => return yes(solver.plan(), budget.nodes),
                Fits::No => {
                    return ExactOutcome {
                        plan: quick,
                        fits,
                        proven_bound: cap + 1,
                        nodes: budget.nodes,
                    }
                }
                Fits::Unknown => {}
            }
            let heuristic = full(budget.time_left());
            if heuristic.total_size <= cap {
                return yes(heuristic, budget.nodes);
            }
            let fits = solver.solve(cap, &mut budget);
            let (plan, fits) = match fits {
                Fits::Yes => (solver.plan(), Fits::Yes),
                other => (heuristic, other),
            };
            ExactOutcome {
                plan,
                fits,
                proven_bound: if fits == Fits::No { cap + 1 } else { bound },
                nodes: budget.nodes,
            }
        }
        None => {
            let mut best = quick;
            // Past this size a dive of the canonical search rarely ends
            // (improve skips it there): the heuristics get half the time
            // first. On the 10,000-tensor perfect packing seed 5 the short
            // search alone used to take 0.8 s of a 1 s limit and exact
            // returned 1.38 of the bound, where improve reaches 1.20.
            if best.total_size > bound && records.len() > HEURISTICS_FIRST {
                let h = full(budget.time_left().map(|t| t / 2));
                if h.total_size < best.total_size {
                    best = h;
                }
            }
            if best.total_size > bound {
                if let Some(plan) = core_first(records, conflicts, bound, align, &mut budget) {
                    best = plan;
                }
            }
            // Every total below `low` is infeasible; totals below `soft`
            // were given up on (their search ran out of budget).
            let mut low = bound;
            // As with a capacity: a short search at the bound, then
            // improve's own searches, before the long search at the bound.
            if best.total_size > bound {
                let short = SHORT_SEARCH_NODES_PER_TENSOR * records.len() as u64;
                match budget.share(1, 4, |b| b.limited(short, |b| solver.solve(bound, b))) {
                    Fits::Yes => best = solver.plan(),
                    Fits::No => low = bound + 1,
                    Fits::Unknown => {}
                }
            }
            if best.total_size > low && !out_of_time(&budget) {
                let seeded = improve_searches(records, conflicts, align, &budget, None);
                if seeded.total_size < best.total_size {
                    best = seeded;
                }
            }
            if best.total_size > bound && low == bound {
                // The lower bound itself first: on real models it is
                // usually reachable, and the search often shows it at once.
                match budget.share(1, 4, |b| solver.solve(bound, b)) {
                    Fits::Yes => best = solver.plan(),
                    Fits::No => low = bound + 1,
                    Fits::Unknown => {}
                }
            }
            if best.total_size > low && !out_of_time(&budget) {
                let h = full(budget.time_left().map(|t| t / 3));
                if h.total_size < best.total_size {
                    best = h;
                }
            }
            let mut soft = low.max(bound + 1);
            while soft < best.total_size && !budget.exhausted {
                let probe = soft + (best.total_size - 1 - soft) / 2;
                if let Some(plan) = core_first(records, conflicts, probe, align, &mut budget) {
                    best = plan;
                    continue;
                }
                match budget.share(1, 2, |b| solver.solve(probe, b)) {
                    Fits::Yes => best = solver.plan(),
                    Fits::No => {
                        low = probe + 1;
                        soft = soft.max(low);
                    }
                    Fits::Unknown => soft = probe + 1,
                }
            }
            let proven = low >= best.total_size;
            ExactOutcome {
                proven_bound: low.min(best.total_size),
                plan: best,
                fits: if proven { Fits::Yes } else { Fits::Unknown },
                nodes: budget.nodes,
            }
        }
    }
}

/// A shortcut that often settles the real models at once: search exactly
/// only over the tensors alive at the widest ops (where a tight capacity
/// leaves no slack), pin them, and place everything else around them with
/// the heuristic orders. Returns a plan within `capacity` or None (which
/// proves nothing; the full search follows).
fn core_first(
    records: &[UsageRecord],
    conflicts: Option<&Conflicts>,
    capacity: u64,
    align: u64,
    budget: &mut Budget,
) -> Option<OffsetsAssignment> {
    if conflicts.is_some_and(|c| !c.is_empty()) || records.is_empty() {
        return None;
    }
    let breadths = super::lower_bound::task_breadths(records);
    let widest = breadths.iter().copied().max().unwrap_or(0);
    let core: Vec<usize> = (0..records.len())
        .filter(|&i| {
            let r = &records[i];
            breadths[r.first..=r.last].contains(&widest)
        })
        .collect();
    if core.len() == records.len() {
        return None;
    }
    let sub: Vec<UsageRecord> = core.iter().map(|&i| records[i].clone()).collect();
    let mut solver = Search::new(&sub, None, align);
    // The core gets at most a tenth of the remaining node budget, so the
    // full search keeps most of it.
    let mut core_budget = Budget::new(
        budget.deadline,
        budget.node_limit.saturating_sub(budget.nodes) / 10,
    );
    let fits = solver.solve(capacity, &mut core_budget);
    budget.nodes += core_budget.nodes;
    if fits != Fits::Yes {
        return None;
    }
    let fixed: Vec<(usize, u64)> = core
        .iter()
        .zip(&solver.offsets)
        .map(|(&i, &o)| (i, o))
        .collect();
    let mut is_core = vec![false; records.len()];
    for &i in &core {
        is_core[i] = true;
    }
    let mut placer = super::offsets::Placer::new(records, None, align);
    for order in super::improve::seed_orders(records) {
        if out_of_time(budget) {
            break;
        }
        let rest: Vec<usize> = order.into_iter().filter(|&i| !is_core[i]).collect();
        for fit in [super::offsets::Fit::Best, super::offsets::Fit::First] {
            let plan = placer.place_around(&fixed, &rest, fit);
            if plan.total_size <= capacity {
                return Some(plan);
            }
        }
    }
    None
}

/// `improve`'s own searches (over coalesced tensors, and a bounded
/// canonical search) without its local search, in a tenth of the time
/// left: on MiniMalloc's traces they reach the target within milliseconds
/// where the plain search needs millions of nodes.
fn improve_searches(
    records: &[UsageRecord],
    conflicts: Option<&Conflicts>,
    align: u64,
    budget: &Budget,
    target: Option<u64>,
) -> OffsetsAssignment {
    improve(
        records,
        conflicts,
        &ImproveOptions {
            alignment: align,
            iterations: 0,
            time_limit: budget.time_left().map(|t| t / 10),
            target,
            ..ImproveOptions::default()
        },
    )
}
