//! An exact offset planner in the spirit of MiniMalloc (Moffitt, ASPLOS 2023).
//!
//! # The search
//!
//! Any feasible placement can be *pushed down* until every tensor sits at
//! offset 0 or on top of a tensor it may not share memory with. Among the
//! feasible placements take one with the smallest sum of offsets and list its
//! tensors by (offset, index). Placing tensors in that order, each one lands
//! exactly on its *candidate* offset: the highest top among placed neighbours,
//! and no lower than the previous tensor's offset. So a depth-first search
//! that repeatedly picks an unplaced tensor and puts it at its candidate,
//! keeping (offset, index) increasing, reaches that placement: it is complete.
//!
//! Pruning, each justified by that same minimal placement:
//! - *cross-section bound*: at every op (section), the tensors still to place
//!   there stack above the lowest candidate offset among them (itself at
//!   least `max(current offset, height of the section)`), so that plus their
//!   total size must stay within the capacity;
//! - *dominance*: if some unplaced tensor `c` would fit entirely below the
//!   candidate `o` of the tensor about to be placed (`cand_c + size_c <= o`),
//!   moving `c` down there would lower the sum of offsets, so the minimal
//!   placement never places anything at `o` first; only tensors whose
//!   candidate is below `min(cand + size)` over all unplaced are branched on;
//! - *twins*: identical tensors (same size and interval) go in index order;
//! - *decomposition*: where no tensor is alive across two consecutive ops the
//!   problem splits into independent parts, solved one by one.
//!
//! With a capacity the answer is *fits* (with a validated plan), *does not
//! fit* (the search space is exhausted) or *unknown* (time or node limit).
//! Without one, it first asks for the lower bound, then bisects towards the
//! best heuristic total, and reports the smallest total it proved feasible.

use std::time::{Duration, Instant};

use super::conflicts::{neighbors, Conflicts};
use super::improve::{improve, ImproveOptions};
use super::lower_bound::lower_bound;
use super::records::UsageRecord;
use super::OffsetsAssignment;

/// The largest number of non-empty tensors in one independent part that the
/// search takes on (it recurses once per tensor); larger parts are answered
/// `Unknown` and keep the heuristic plan.
pub const MAX_DEPTH: usize = 10_000;

/// Settings of [`exact`].
#[derive(Debug, Clone)]
pub struct ExactOptions {
    /// Offsets are multiples of this (0 or 1: any).
    pub alignment: u64,
    /// The arena size to fit into; None: find the smallest total it can.
    pub capacity: Option<u64>,
    /// Give up after this long (None: no clock, only the node limit).
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

struct Budget {
    deadline: Option<Instant>,
    nodes: u64,
    node_limit: u64,
    exhausted: bool,
}

impl Budget {
    fn tick(&mut self) -> bool {
        self.nodes += 1;
        if self.nodes >= self.node_limit {
            self.exhausted = true;
        } else if self.nodes % 1024 == 0 {
            if let Some(d) = self.deadline {
                if Instant::now() >= d {
                    self.exhausted = true;
                }
            }
        }
        !self.exhausted
    }
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
    let mut budget = Budget {
        deadline: options.time_limit.map(|t| start + t),
        nodes: 0,
        node_limit: options.node_limit.max(1),
        exhausted: false,
    };
    let bound = lower_bound(records);
    // The fixed orders alone first: cheap, and often already at the target.
    let quick = improve(
        records,
        conflicts,
        &ImproveOptions {
            alignment: align,
            iterations: 0,
            ..ImproveOptions::default()
        },
    );
    // The full local search runs only when neither the fixed orders nor the
    // pinned core settle it; it gets a third of the time, and without a
    // clock the same effort as `improve` itself, so that exact is never
    // worse than improve with default options.
    let full = || {
        improve(
            records,
            conflicts,
            &ImproveOptions {
                alignment: align,
                time_limit: options.time_limit.map(|t| t / 3),
                // With a clock, search until it runs out.
                iterations: if options.time_limit.is_some() {
                    usize::MAX
                } else {
                    ImproveOptions::default().iterations
                },
                ..ImproveOptions::default()
            },
        )
    };
    let mut solver = Solver::new(records, conflicts, align);
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
            if let Some(plan) = core_first(records, conflicts, cap, align, &mut budget) {
                return yes(plan, budget.nodes);
            }
            let heuristic = full();
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
            if best.total_size > bound {
                if let Some(plan) = core_first(records, conflicts, bound, align, &mut budget) {
                    best = plan;
                }
            }
            if best.total_size > bound {
                let h = full();
                if h.total_size < best.total_size {
                    best = h;
                }
            }
            // Every total below `low` is infeasible. Bisect on [low, best),
            // trying the lower bound itself first: on real models it is
            // usually reachable.
            let mut low = bound;
            let mut probe = low;
            while low < best.total_size && !budget.exhausted {
                if probe > bound {
                    if let Some(plan) = core_first(records, conflicts, probe, align, &mut budget) {
                        best = plan;
                        probe = low + (best.total_size.saturating_sub(1).saturating_sub(low)) / 2;
                        continue;
                    }
                }
                match solver.solve(probe, &mut budget) {
                    Fits::Yes => best = solver.plan(),
                    Fits::No => low = probe + 1,
                    Fits::Unknown => break,
                }
                probe = low + (best.total_size.saturating_sub(1).saturating_sub(low)) / 2;
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
    let mut solver = Solver::new(&sub, None, align);
    // The core gets at most a tenth of the remaining node budget, so the
    // full search keeps most of it.
    let mut core_budget = Budget {
        deadline: budget.deadline,
        nodes: 0,
        node_limit: (budget.node_limit.saturating_sub(budget.nodes) / 10).max(1),
        exhausted: false,
    };
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

/// The depth-first search over one set of records.
struct Solver<'a> {
    records: &'a [UsageRecord],
    adj: Vec<Vec<usize>>,
    align: u64,
    /// Independent parts (record indices), or one part when conflicts exist.
    parts: Vec<Vec<usize>>,
    /// Previous identical record, which must be placed first.
    twin_before: Vec<Option<usize>>,
    /// Compressed section range [lo, hi] of each record.
    span: Vec<(usize, usize)>,
    sections: usize,
    offsets: Vec<u64>,
    /// Whether the current pass skipped a branch for lack of discrepancies.
    cut: bool,
}

impl<'a> Solver<'a> {
    fn new(records: &'a [UsageRecord], conflicts: Option<&Conflicts>, align: u64) -> Self {
        let n = records.len();
        let adj = neighbors(records, conflicts);
        // Sections: the distinct first ops; a record covers every section
        // whose op lies in its interval.
        let mut starts: Vec<usize> = records.iter().map(|r| r.first).collect();
        starts.sort_unstable();
        starts.dedup();
        let span: Vec<(usize, usize)> = records
            .iter()
            .map(|r| {
                let lo = starts.partition_point(|&s| s < r.first);
                let hi = starts.partition_point(|&s| s <= r.last) - 1;
                (lo, hi)
            })
            .collect();
        let sections = starts.len();
        // Cut between sections s and s+1 unless some record covers both.
        let mut crosses = vec![false; sections];
        for &(lo, hi) in &span {
            for c in &mut crosses[lo..hi] {
                *c = true;
            }
        }
        let mut part_of_section = vec![0usize; sections];
        let mut parts_count = 0;
        for s in 0..sections {
            part_of_section[s] = parts_count;
            if !crosses[s] {
                parts_count += 1;
            }
        }
        let mut parts: Vec<Vec<usize>> = vec![Vec::new(); parts_count.max(1)];
        if conflicts.is_some_and(|c| !c.is_empty()) {
            parts = vec![(0..n).collect()];
        } else {
            for (i, &(lo, _)) in span.iter().enumerate() {
                parts[part_of_section[lo]].push(i);
            }
        }
        let mut twin_before = vec![None; n];
        let mut by_shape: std::collections::HashMap<(u64, usize, usize), usize> =
            Default::default();
        for (i, r) in records.iter().enumerate() {
            if conflicts.is_some_and(|c| !c.of(i).is_empty()) {
                continue;
            }
            if let Some(prev) = by_shape.insert((r.size, r.first, r.last), i) {
                twin_before[i] = Some(prev);
            }
        }
        Self {
            records,
            adj,
            align,
            parts,
            twin_before,
            span,
            sections,
            offsets: vec![0; n],
            cut: false,
        }
    }

    fn plan(&self) -> OffsetsAssignment {
        OffsetsAssignment::from_offsets(self.records, self.offsets.clone())
    }

    fn solve(&mut self, capacity: u64, budget: &mut Budget) -> Fits {
        let mut answer = Fits::Yes;
        for p in 0..self.parts.len() {
            let part = std::mem::take(&mut self.parts[p]);
            let r = self.solve_part(&part, capacity, budget);
            self.parts[p] = part;
            match r {
                Fits::Yes => {}
                Fits::No => return Fits::No,
                Fits::Unknown => answer = Fits::Unknown,
            }
        }
        answer
    }

    fn solve_part(&mut self, part: &[usize], capacity: u64, budget: &mut Budget) -> Fits {
        let mut state = State {
            placed: vec![false; self.records.len()],
            floor: vec![0; self.records.len()],
            height: vec![0; self.sections],
            remaining: vec![0; self.sections],
            active: Vec::new(),
            lowest: vec![0; self.sections],
        };
        for &i in part {
            let r = &self.records[i];
            if r.size == 0 {
                // Empty tensors occupy nothing; offset 0 never clashes.
                self.offsets[i] = 0;
                state.placed[i] = true;
                continue;
            }
            if r.size > capacity {
                return Fits::No;
            }
            state.active.push(i);
            let (lo, hi) = self.span[i];
            for s in lo..=hi {
                state.remaining[s] += r.size;
            }
        }
        if state.remaining.iter().any(|&x| x > capacity) {
            return Fits::No;
        }
        let left = state.active.len();
        if left > MAX_DEPTH {
            // The search recurses once per tensor; beyond this many it could
            // exhaust the stack, so such parts stay unanswered.
            return Fits::Unknown;
        }
        // Limited discrepancy search: first allow no deviation from the
        // heuristic's first choice, then 1, 2, 4, ... deviations. The
        // heuristic is nearly right on real models, and a wrong early choice
        // is found far sooner than by plain chronological backtracking. A
        // pass that never had to skip a branch was exhaustive.
        let mut limit = 0usize;
        loop {
            self.cut = false;
            match self.dfs(&mut state, capacity, 0, None, left, limit, budget) {
                Some(true) => return Fits::Yes,
                None => return Fits::Unknown,
                Some(false) if !self.cut => return Fits::No,
                Some(false) => limit = if limit == 0 { 1 } else { limit * 2 },
            }
        }
    }

    fn up(&self, v: u64) -> u64 {
        v.div_ceil(self.align) * self.align
    }

    /// Returns Some(true) when a placement was found (offsets hold it),
    /// Some(false) when this subtree has none, None when the budget ran out.
    #[allow(clippy::too_many_arguments)]
    fn dfs(
        &mut self,
        st: &mut State,
        capacity: u64,
        last_offset: u64,
        last_index: Option<usize>,
        left: usize,
        discrepancies: usize,
        budget: &mut Budget,
    ) -> Option<bool> {
        if left == 0 {
            return Some(true);
        }
        if !budget.tick() {
            return None;
        }
        // Cross-section bound.
        for s in 0..self.sections {
            if st.remaining[s] > 0 && st.height[s].max(last_offset) + st.remaining[s] > capacity {
                return Some(false);
            }
        }
        // Candidates and the dominance threshold.
        let mut lowest_end = u64::MAX;
        let mut cands: Vec<(u64, usize)> = Vec::new();
        for &i in &st.active {
            if st.placed[i] {
                continue;
            }
            let cand = self.up(st.floor[i].max(last_offset));
            let end = cand + self.records[i].size;
            if end > capacity {
                return Some(false);
            }
            lowest_end = lowest_end.min(end);
            cands.push((cand, i));
        }
        // Section floors: nothing still to place at a section can start
        // below the lowest candidate among its tensors, so the space under
        // that is lost there; a stronger form of the cross-section bound.
        st.lowest.iter_mut().for_each(|x| *x = u64::MAX);
        for &(cand, i) in &cands {
            let (lo, hi) = self.span[i];
            for x in &mut st.lowest[lo..=hi] {
                *x = (*x).min(cand);
            }
        }
        for s in 0..self.sections {
            if st.remaining[s] > 0 && st.lowest[s] + st.remaining[s] > capacity {
                return Some(false);
            }
        }
        cands.retain(|&(cand, i)| {
            cand < lowest_end
                && !(cand == last_offset && last_index.is_some_and(|l| i < l))
                && self.twin_before[i].is_none_or(|t| st.placed[t])
        });
        let recs = self.records;
        // Longest-lived first at the lowest offset: the tensors that span
        // many sections are the hardest to fit later (on the training graphs
        // this finds lower-bound plans without backtracking, where size-first
        // backtracks for long).
        cands.sort_by_key(|&(cand, i)| {
            let r = &recs[i];
            (
                cand,
                std::cmp::Reverse(r.last - r.first),
                std::cmp::Reverse(r.size),
                i,
            )
        });
        for (k, (cand, i)) in cands.into_iter().enumerate() {
            let spent = usize::from(k > 0);
            if spent > discrepancies {
                self.cut = true;
                break;
            }
            // Place i at cand.
            let size = self.records[i].size;
            let top = self.up(cand + size);
            st.placed[i] = true;
            self.offsets[i] = cand;
            let (lo, hi) = self.span[i];
            let old_heights: Vec<u64> = st.height[lo..=hi].to_vec();
            for s in lo..=hi {
                st.height[s] = st.height[s].max(top);
                st.remaining[s] -= size;
            }
            let mut raised: Vec<(usize, u64)> = Vec::new();
            for k in 0..self.adj[i].len() {
                let j = self.adj[i][k];
                if !st.placed[j] && st.floor[j] < top {
                    raised.push((j, st.floor[j]));
                    st.floor[j] = top;
                }
            }
            let r = self.dfs(
                st,
                capacity,
                cand,
                Some(i),
                left - 1,
                discrepancies - spent,
                budget,
            );
            for (j, f) in raised {
                st.floor[j] = f;
            }
            for (k, s) in (lo..=hi).enumerate() {
                st.height[s] = old_heights[k];
                st.remaining[s] += size;
            }
            st.placed[i] = false;
            match r {
                Some(false) => {}
                other => return other,
            }
        }
        Some(false)
    }
}

struct State {
    placed: Vec<bool>,
    /// Highest (aligned) top among placed neighbours.
    floor: Vec<u64>,
    /// Highest (aligned) top among placed tensors, per section.
    height: Vec<u64>,
    /// Bytes still to place, per section.
    remaining: Vec<u64>,
    /// The part's non-empty tensors.
    active: Vec<usize>,
    /// Scratch: lowest candidate offset per section.
    lowest: Vec<u64>,
}
