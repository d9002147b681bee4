//! An offset planner that searches over placement orders: greedy by size's
//! order, skyline placements (the tensor with the lowest possible offset
//! first) under four rankings, and several more orders (by size, by area,
//! by lifetime, by first use, by breadth) with best-fit and first-fit gaps;
//! then, when that is above the
//! lower bound, the exact mode's canonical search under a small node budget
//! (the bound first, then bisection); then a local search that moves the
//! tensors that set the arena's height earlier in the best order found and
//! places again only what follows the first change. It starts from greedy
//! by size, so it is never worse than it. Last, without conflict pairs, the
//! squeeze (the `squeeze` module) lowers the best plan by a guided local
//! search over the offsets themselves, and a ruin-and-recreate search (the
//! `ruin` module) lifts bands of tensors out around the peak of the result
//! and places them again.
//! Large traces are first split at ops that no tensor lives across (the
//! `split` module), and each side is planned so; where there is no such
//! op, at one that a few tensors cross, the far side being placed around
//! them (kept only when better than greedy by size).
//!
//! When coalescing halves the records (see the `coalesce` module), all of
//! that runs over the coalesced records instead, and again over a second
//! coalescing that also matches ambiguous chains when that merges more,
//! each with an equal share of the time, and the records themselves only
//! get greedy by size: on large hard traces the fewer,
//! larger records are what gets within 20% of the bound (10,000
//! cut-rectangle tensors, seed 3: 1.16 with both, 1.23 with the first
//! alone, 1.35 with neither, in 0.9 s).

use std::time::{Duration, Instant};

use super::coalesce::Coalesced;
use super::conflicts::{time_only, Conflicts};
use super::exact::Fits;
use super::greedy_by_breadth::breadth_order;
use super::lower_bound::{lower_bound, task_breadths};
use super::offsets::{Fit, Placer};
use super::perturb::perturbed_skylines;
use super::records::UsageRecord;
use super::ruin::Ruin;
use super::search::{Budget, Search};
use super::split::{independent_cut, plan_sparse, plan_split, sparse_cut, MIN_SPLIT};
use super::squeeze::squeezed;
use super::{order_by_size, OffsetsAssignment};
use crate::util::rng::SplitMix64;

/// Settings of [`improve`].
#[derive(Debug, Clone)]
pub struct ImproveOptions {
    /// Offsets are multiples of this (0 or 1: any).
    pub alignment: u64,
    /// Local-search steps after the fixed orders (each one placement).
    pub iterations: usize,
    /// Stop after this long, whatever `iterations` says: the searches stop
    /// at it, and what has not started by then is skipped. Greedy by size,
    /// which `improve` is never worse than, always runs, so a trace whose
    /// greedy placement alone takes longer overruns it by that much (about
    /// 0.15 s on 100,000 tensors with a 1 s limit). None: run all iterations
    /// (deterministic).
    pub time_limit: Option<Duration>,
    /// Seed of the local search's random moves.
    pub seed: u64,
    /// After the fixed orders, run bounded canonical searches (the exact
    /// mode's search with a small node budget) for a smaller total.
    pub search: bool,
    /// Stop as soon as a plan's total is at most this (None, or anything
    /// below the lower bound: at the lower bound). The exact mode sets it
    /// to its capacity, where any plan within it settles the question.
    pub target: Option<u64>,
    /// Ruin-and-recreate steps on the best plan at the end (each lifts out
    /// and places again a band of tensors around the peak; well under a
    /// millisecond at 10,000 tensors). With a time limit they get what the
    /// squeeze leaves of the last two fifths, and stop there whatever this
    /// says.
    pub ruin_steps: usize,
    /// Moves of the squeeze on the best plan before the ruin steps (each
    /// moves one tensor to where it overlaps the others least, in a plan
    /// at a capacity below the best; about 20 microseconds at 7,000 tensors).
    /// With a time limit it gets four fifths of the last two fifths of it,
    /// and stops there whatever this says.
    pub squeeze_moves: usize,
}

impl Default for ImproveOptions {
    fn default() -> Self {
        Self {
            alignment: 1,
            iterations: 300,
            time_limit: None,
            seed: 0x9E37_79B9,
            search: true,
            target: None,
            ruin_steps: 1000,
            squeeze_moves: 20_000,
        }
    }
}

fn sorted_by<K: Ord>(n: usize, key: impl Fn(usize) -> K) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    v.sort_by_key(|&i| key(i));
    v
}

/// The fixed orders tried first, greedy by size's own order first, each
/// made only when it is reached: under a time limit on a large trace the
/// search stops part way, and the last order alone (by breadth) costs a
/// list of the live tensors at every op.
pub(crate) fn seed_orders(records: &[UsageRecord]) -> impl Iterator<Item = Vec<usize>> + '_ {
    use std::cmp::Reverse;
    let n = records.len();
    let span = move |i: usize| (records[i].last - records[i].first + 1) as u64;
    let size = move |i: usize| records[i].size;
    let first = move |i: usize| records[i].first;
    // Size-led orders first: on large hard traces the time limit may cut
    // the list short, and they are the ones that win there.
    (0..7).map(move |k| match k {
        0 => order_by_size(records),
        1 => sorted_by(n, |i| (Reverse(size(i)), first(i), i)),
        2 => sorted_by(n, |i| (Reverse(size(i)), Reverse(span(i)), i)),
        3 => sorted_by(n, |i| (Reverse(size(i) as u128 * span(i) as u128), i)),
        4 => sorted_by(n, |i| (Reverse(span(i)), Reverse(size(i)), i)),
        5 => sorted_by(n, |i| (first(i), Reverse(size(i)), i)),
        _ => breadth_order(records),
    })
}

/// Tie-breaking ranks for the skyline placement (0 goes first): by the
/// largest breadth over the tensor's lifetime, then lifetime, then area; by
/// lifetime then area; by area; by size.
fn skyline_ranks(records: &[UsageRecord]) -> Vec<Vec<usize>> {
    use std::cmp::Reverse;
    let n = records.len();
    let breadths = task_breadths(records);
    let widest: Vec<u64> = records
        .iter()
        .map(|r| {
            breadths[r.first..=r.last]
                .iter()
                .copied()
                .max()
                .unwrap_or(0)
        })
        .collect();
    let span = |i: usize| (records[i].last - records[i].first + 1) as u64;
    let area = |i: usize| records[i].size as u128 * span(i) as u128;
    let orders = [
        sorted_by(n, |i| {
            (Reverse(widest[i]), Reverse(span(i)), Reverse(area(i)), i)
        }),
        sorted_by(n, |i| (Reverse(span(i)), Reverse(area(i)), i)),
        sorted_by(n, |i| (Reverse(area(i)), i)),
        order_by_size(records),
    ];
    orders
        .iter()
        .map(|order| {
            let mut rank = vec![0; n];
            for (r, &i) in order.iter().enumerate() {
                rank[i] = r;
            }
            rank
        })
        .collect()
}

/// Searches placement orders for a small arena; the result validates and is
/// never larger than [`offsets_greedy_by_size`](super::offsets_greedy_by_size)
/// with the same alignment.
///
/// Without conflicts, when coalescing (tensors with one lifetime stacked,
/// equal tensors with abutting lifetimes chained, see the `coalesce` module)
/// at least halves the records, it searches over the coalesced records,
/// then over the matched coalescing if that has fewer records, each with an
/// equal share of the time left, and keeps the smallest plan, or greedy by
/// size over the records themselves if that is smaller. Below that the
/// coalesced search rarely beats the plain one, which keeps all the time.
///
/// Before all that, without conflict pairs and from 2,000 records on, when
/// some op has no tensor alive across it, the records before and after it
/// are planned apart (see the `split` module), each in this way; failing
/// that, at an op that at most eight tensors of at most half the lower
/// bound live across, one side after the other (the result no worse than
/// greedy by size).
///
/// Under a time limit, a local search that has not lowered the arena in
/// the first fifth of what is left when it starts spends the rest on
/// skyline placements under randomly perturbed rankings (see the `perturb`
/// module).
///
/// Then, without conflict pairs, the squeeze (up to `squeeze_moves` moves)
/// and up to `ruin_steps` ruin-and-recreate steps improve the best plan, in
/// the last two fifths of the time limit.
pub fn improve(
    records: &[UsageRecord],
    conflicts: Option<&Conflicts>,
    options: &ImproveOptions,
) -> OffsetsAssignment {
    improve_with(records, conflicts, options, true, &[])
}

/// [`improve`], kept never worse than greedy by size only when `floor`:
/// a caller that compares with greedy by size over more records anyway
/// (see `split::plan_sparse`) saves computing it again over these. The
/// squeeze leaves the tensors in `keep` where the searches put them.
pub(crate) fn improve_with(
    records: &[UsageRecord],
    conflicts: Option<&Conflicts>,
    options: &ImproveOptions,
    floor: bool,
    keep: &[usize],
) -> OffsetsAssignment {
    let start = Instant::now();
    let plain = time_only(conflicts);
    if plain && records.len() >= MIN_SPLIT {
        if let Some(cut) = independent_cut(records) {
            return plan_split(records, cut, options);
        }
        if let Some(cut) = sparse_cut(records) {
            // Fitting one side around tensors the other placed may come out
            // worse than greedy by size, which improve never is.
            let greedy = super::offsets_greedy_by_size(records, None, options.alignment);
            let mut rest = options.clone();
            rest.time_limit = options
                .time_limit
                .map(|t| t.saturating_sub(start.elapsed()));
            let split = plan_sparse(records, cut, &rest);
            return if split.total_size <= greedy.total_size {
                split
            } else {
                greedy
            };
        }
    }
    // The searches that improve a finished plan: the squeeze, then the ruin
    // steps, each only when it has moves or steps to make.
    let polish =
        plain && (options.ruin_steps > 0 || options.squeeze_moves > 0) && records.len() > 1;
    // The time after the searches (the squeeze, then the ruin steps) is
    // taken from the last search (over the records themselves, see
    // `search_all`); see `AFTER_SEARCHES`.
    let reserve = match options.time_limit {
        Some(t) if polish => t.mul_f64(AFTER_SEARCHES),
        _ => Duration::ZERO,
    };
    let mut plan = search_all(records, conflicts, options, reserve, floor);
    let bound = stop_at(records, options);
    if !polish || plan.total_size <= bound {
        return plan;
    }
    // Past the time limit, `until` is already past and the squeeze does
    // nothing.
    let until = options.time_limit.map(|t| {
        let now = Instant::now();
        now + (start + t)
            .saturating_duration_since(now)
            .mul_f64(SQUEEZE_SHARE)
    });
    plan = squeezed(
        records,
        options,
        plan,
        keep,
        Some(STALE_TRIES),
        until,
        bound,
    );
    if plan.total_size <= bound || options.ruin_steps == 0 {
        return plan;
    }
    let mut search = Ruin::new(records, options.alignment, &plan, options.seed);
    search.run(
        options.ruin_steps,
        options.time_limit.map(|t| start + t),
        bound,
    );
    let ruined = search.plan();
    debug_assert!(
        super::validate_offsets(records, conflicts, &ruined, options.alignment).is_ok(),
        "ruin and recreate made an invalid plan"
    );
    if ruined.total_size < plan.total_size {
        ruined
    } else {
        plan
    }
}

/// The searches of [`improve`] before the ruin-and-recreate steps, leaving
/// `reserve` of the time limit unused. Greedy by size over `records` is
/// among the candidates only when `floor`.
fn search_all(
    records: &[UsageRecord],
    conflicts: Option<&Conflicts>,
    options: &ImproveOptions,
    reserve: Duration,
    floor: bool,
) -> OffsetsAssignment {
    let start = Instant::now();
    let shorter = |o: &ImproveOptions| {
        let mut o = o.clone();
        o.time_limit = o.time_limit.map(|t| t.saturating_sub(reserve));
        o
    };
    let plain = time_only(conflicts);
    // A search over the records themselves too, only when they are few:
    // on MiniMalloc's trace H (316 tensors) it is what reaches the bound,
    // while on the 10,000-tensor perfect packings (parts of 746 to 9,055
    // records) it never came within 0.05 of the coalesced plans, and took
    // a third of the time from them.
    let direct = records.len() <= DIRECT_MAX_RECORDS;
    let budget = options.time_limit.map(|t| t.saturating_sub(reserve));
    // Past the time, what is left is skipped: greedy by size alone (the
    // floor) can take the whole limit on a large trace (100,000 records:
    // 0.7 s), and each search would still pay for its coalescing and its
    // fixed orders.
    let late = || budget.is_some_and(|t| start.elapsed() >= t);
    // Without the direct search, greedy by size over the records keeps
    // `improve` never worse than it (the direct search starts from it).
    // It comes before the coalescing, which the clock may then skip.
    let mut best = (plain && floor && !direct)
        .then(|| super::offsets_greedy_by_size(records, conflicts, options.alignment));
    if best.is_some() && late() {
        return best.unwrap_or_default();
    }
    let halves = |g: &Coalesced| 2 * g.records.len() <= records.len();
    let strict = plain
        .then(|| Coalesced::new(records, options.alignment, false))
        .flatten()
        .filter(halves);
    let Some(strict) = strict else {
        let plan = search_orders(records, conflicts, &shorter(options));
        return match best {
            Some(b) if b.total_size < plan.total_size => b,
            _ => plan,
        };
    };
    let bound = stop_at(records, options);
    // The matched coalescing, when it merges more, is a second guess at the
    // structure: neither one wins on every trace.
    let matched = Coalesced::new(records, options.alignment, true)
        .filter(|g| g.records.len() < strict.records.len());
    let searches = 1 + usize::from(matched.is_some()) + usize::from(direct);
    let share = |k: usize| {
        let mut part = options.clone();
        // An equal share of what is left for each search still to run.
        part.time_limit = budget.map(|t| t.saturating_sub(start.elapsed()) / (searches - k) as u32);
        part
    };
    for (k, groups) in [Some(strict), matched].into_iter().flatten().enumerate() {
        if best.as_ref().is_some_and(|b| b.total_size <= bound) || (best.is_some() && late()) {
            return best.unwrap_or_default();
        }
        let grouped = groups.expand(&search_orders(&groups.records, None, &share(k)));
        debug_assert!(
            super::validate_offsets(records, conflicts, &grouped, options.alignment).is_ok(),
            "a coalesced plan unfolded into an invalid one"
        );
        if best
            .as_ref()
            .is_none_or(|b| grouped.total_size < b.total_size)
        {
            best = Some(grouped);
        }
    }
    if direct
        && best
            .as_ref()
            .is_none_or(|b| b.total_size > bound && !late())
    {
        let plan = search_orders(records, conflicts, &share(searches - 1));
        if best.as_ref().is_none_or(|b| plan.total_size < b.total_size) {
            best = Some(plan);
        }
    }
    best.unwrap_or_default()
}

/// The total at which `improve`'s searches stop: the lower bound, or the
/// target above it.
pub(crate) fn stop_at(records: &[UsageRecord], options: &ImproveOptions) -> u64 {
    lower_bound(records).max(options.target.unwrap_or(0))
}

/// Up to this many records, `improve` searches over them as they are after
/// the coalesced searches (see `search_all`).
const DIRECT_MAX_RECORDS: usize = 1000;

/// [`improve`] over the records as they are.
fn search_orders(
    records: &[UsageRecord],
    conflicts: Option<&Conflicts>,
    options: &ImproveOptions,
) -> OffsetsAssignment {
    let start = Instant::now();
    // Past this, the fixed orders after greedy by size's own are skipped,
    // so that a large input returns within its time limit.
    let deadline = options.time_limit.map(|t| start + t);
    let late = || deadline.is_some_and(|d| Instant::now() >= d);
    let n = records.len();
    let bound = stop_at(records, options);
    let mut placer = Placer::new(records, conflicts, options.alignment);
    type Best = Option<(OffsetsAssignment, Vec<usize>, Fit)>;
    fn consider(best: &mut Best, plan: OffsetsAssignment, order: &[usize], fit: Fit) {
        if best
            .as_ref()
            .is_none_or(|(b, _, _)| plan.total_size < b.total_size)
        {
            *best = Some((plan, order.to_vec(), fit));
        }
    }
    let mut best: Best = None;
    let mut orders = seed_orders(records);
    // Greedy by size's order, with both fits, always runs.
    let first = orders.next().unwrap_or_default();
    for fit in [Fit::Best, Fit::First] {
        consider(&mut best, placer.place(&first, fit), &first, fit);
    }
    // Skyline placements (lowest minimum offset first) under a few
    // rankings next: on the 10,000-tensor perfect packings' coalesced
    // records (seeds 1 to 5) they beat every fixed order in 20 of the 23
    // searches. Their placement sequences are orders for the local search,
    // which places with first fit.
    let at_bound = best.as_ref().is_some_and(|(b, _, _)| b.total_size <= bound);
    for rank in skyline_ranks(records).into_iter().filter(|_| !at_bound) {
        if late() {
            break;
        }
        let (plan, sequence) = placer.skyline(&rank);
        consider(&mut best, plan, &sequence, Fit::First);
    }
    // The other fixed orders, in at most a quarter of the time limit: each
    // costs a placement (7 ms at 3,000 records), which the perturbed
    // skylines put to better use at that size.
    let fixed_until = options.time_limit.map(|t| start + t / 4);
    let fixed_late = || fixed_until.is_some_and(|d| Instant::now() >= d);
    while !fixed_late() {
        let Some(order) = orders.next() else { break };
        for fit in [Fit::Best, Fit::First] {
            if fixed_late() {
                break;
            }
            consider(&mut best, placer.place(&order, fit), &order, fit);
        }
    }
    let Some((mut best_plan, mut best_order, fit)) = best else {
        return OffsetsAssignment::default();
    };
    if n < 2 || best_plan.total_size <= bound {
        return best_plan;
    }
    // Canonical placements next: a depth-first search over which tensor
    // goes at the lowest offset, under a bounded effort, probing the lower
    // bound and then halving the gap to the best plan.
    let probed = (options.search && n <= PROBE_MAX_RECORDS).then(|| {
        probe_totals(
            records,
            conflicts,
            options.alignment,
            bound,
            best_plan.total_size,
            options.time_limit.map(|t| start + t / 2),
        )
    });
    let mut searched = None;
    if let Some(p) = probed.flatten() {
        if p.total_size < best_plan.total_size {
            if p.total_size <= bound {
                return p;
            }
            searched = Some(p);
        }
    }
    let mut rng = SplitMix64::new(options.seed);
    // The longest step so far: the search stops when another one would
    // overrun the time limit, so that it returns within it.
    let mut longest_step = Duration::ZERO;
    // Whether a step has lowered the arena; one that has not by `STALLED`
    // of its own time hands the rest to perturbed skylines.
    let mut improved = false;
    let mut stalled = false;
    // The local search's own share: what is left of the time limit now.
    let local_start = Instant::now();
    let stall_after = options.time_limit.map(|t| {
        let left = (start + t).saturating_duration_since(local_start);
        local_start + left.mul_f64(STALLED)
    });
    for step in 0..options.iterations {
        if best_plan.total_size <= bound {
            break;
        }
        let step_start = Instant::now();
        if !improved && stall_after.is_some_and(|s| step_start >= s) {
            stalled = true;
            break;
        }
        if options
            .time_limit
            .is_some_and(|t| step_start.duration_since(start) + longest_step >= t)
        {
            break;
        }
        // Move a tensor that reaches the top of the arena (or, now and then,
        // any tensor) earlier in the order: tensors placed earlier get lower
        // offsets, so the peak may come down.
        let tops: Vec<usize> = (0..n)
            .filter(|&i| best_plan.offsets[i] + records[i].size == best_plan.total_size)
            .collect();
        let mut order = best_order.clone();
        let mut first_change = n;
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
            first_change = first_change.min(to);
        }
        // The tensors before the first change keep their offsets; only the
        // rest is placed again (around them), which is what a full
        // placement of the order would do when the plan came from it.
        let fixed: Vec<(usize, u64)> = order[..first_change]
            .iter()
            .map(|&i| (i, best_plan.offsets[i]))
            .collect();
        let cand = placer.place_around(&fixed, &order[first_change..], fit);
        longest_step = longest_step.max(step_start.elapsed());
        improved |= cand.total_size < best_plan.total_size;
        // Accept ties too, so the search can drift across plateaus.
        if cand.total_size <= best_plan.total_size {
            best_plan = cand;
            best_order = order;
        }
    }
    if stalled {
        if let Some(plan) = perturbed_skylines(
            records,
            &mut placer,
            &mut rng,
            usize::MAX,
            options.time_limit.map(|t| start + t),
            best_plan.total_size,
        ) {
            best_plan = plan;
        }
    }
    match searched {
        Some(p) if p.total_size < best_plan.total_size => p,
        _ => best_plan,
    }
}

/// The share of the time limit that [`improve`] keeps, without conflict
/// pairs, for the squeeze and the ruin steps after its searches.
///
/// It was a fifth, for the ruin steps alone. With the squeeze, on the
/// 10,000-tensor perfect packings (seeds 1 to 10, 0.9 s, one run each), a
/// fifth gave 1.07-1.19 (seed 5: 1.1934) and two fifths 1.06-1.17 (seed 5:
/// 1.1729); over two more runs of seed 5, a fifth 1.1924-1.1963, three
/// tenths 1.1758-1.1963, two fifths 1.1748-1.1826. Four fifths gave seed 5
/// 1.22 (in an earlier form of the sparse cut): the searches then hand the
/// squeeze a worse plan to start from.
const AFTER_SEARCHES: f64 = 0.4;

/// The share of what is left after the searches that the squeeze gets; the
/// ruin steps have the rest, which still lowers some plans that the squeeze
/// leaves.
const SQUEEZE_SHARE: f64 = 0.8;

/// Failed tries in a row at its smallest step after which the squeeze in
/// `improve` gives up, leaving its time to the ruin steps: on MiniMalloc's
/// trace F (1 s) they reach 1.0332 of the bound after it, but only 1.0400
/// when the squeeze, stuck, keeps four fifths of their time.
const STALE_TRIES: usize = 3;

/// The share of what is left of the time limit when the local search
/// starts after which, if it has not lowered the arena once, it stops for
/// perturbed skylines (see the `perturb` module). Local searches that gain
/// at all mostly gain within their first steps. It was 0.8 of the whole
/// time limit, the bounded search's time included, which left seed 5 of
/// the 10,000-tensor perfect packings almost no perturbed skylines
/// (1.21-1.22 in 0.9 s); with 0.2 of its own time it gets 1.1992, and over
/// seeds 1 to 10 the largest loss is 0.004 (seed 4, 1.1904 -> 1.1934 in
/// one run of three). 0.35 and 0.5 did no better on any seed.
const STALLED: f64 = 0.2;

/// Past this many records `improve` skips the bounded canonical search:
/// its node budget (see `PROBE_WORK`) is then a handful of dives, which on
/// the 10,000-tensor perfect packings' coalesced records (seeds 1 to 10)
/// never found a plan at 279 records or more, and cost 50-65 ms of each
/// search from 2,000 records on. The MiniMalloc traces, where it does find
/// plans, have at most 455. The largest real model of the shared data,
/// efficientnet_b0_train_b8 (1,104 records), reaches its lower bound only
/// through it: at a limit of 1,000 `improve` stopped 0.004% above the
/// bound after its whole second there, at 2,000 it reaches the bound in
/// 0.2 s (the perfect packings unchanged within their spread).
const PROBE_MAX_RECORDS: usize = 2000;

/// The most work (search nodes times tensors) the canonical search may do
/// inside [`improve`], which keeps it to a few tens of milliseconds.
const PROBE_WORK: u64 = 10_000_000;

/// Bounded canonical searches for totals below `upper`: the lower bound
/// first, then bisection towards `upper`; the best plan found, if any.
fn probe_totals(
    records: &[UsageRecord],
    conflicts: Option<&Conflicts>,
    alignment: u64,
    bound: u64,
    upper: u64,
    deadline: Option<Instant>,
) -> Option<OffsetsAssignment> {
    let n = records.len() as u64;
    let nodes = (PROBE_WORK / n.max(1)).min(200_000);
    if nodes < n {
        // Not even one dive to the bottom would fit in the effort.
        return None;
    }
    let mut budget = Budget::new(deadline, nodes);
    let mut search = Search::new(records, conflicts, alignment);
    let mut best: Option<OffsetsAssignment> = None;
    let mut upper = upper;
    let mut low = bound;
    while low < upper && !budget.exhausted {
        // The bound itself first, then the middle of what is left.
        let probe = if best.is_none() && low == bound {
            bound
        } else {
            low + (upper - 1 - low) / 2
        };
        match budget.share(1, 2, |b| search.solve(probe, b)) {
            Fits::Yes => {
                let p = search.plan();
                upper = p.total_size;
                best = Some(p);
            }
            Fits::No | Fits::Unknown => low = probe + 1,
        }
    }
    best
}
