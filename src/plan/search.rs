//! The depth-first search behind [`exact`](super::exact): canonical
//! placements, cross-section inference, dominance and dynamic decomposition
//! (MiniMalloc, Moffitt, ASPLOS 2023).
//!
//! # Canonical placements
//!
//! Any feasible placement can be *pushed down* until every tensor sits at
//! offset 0 or right on top of (the aligned top of) a tensor it may not share
//! memory with. Take a pushed-down placement with the smallest sum of offsets
//! and list its tensors by (offset, rank), for any fixed ranking. Placed in
//! that order, each tensor lands exactly on its *minimum offset*: the highest
//! aligned top among its placed neighbours. So the search repeatedly picks
//! an unplaced tensor whose minimum offset is at least the previous one's
//! (with a higher rank on a tie) and puts it there; it is complete.
//!
//! # Pruning
//!
//! Each rule holds for that minimal placement:
//! - *dominance*: if an unplaced tensor `c` fits entirely below the offset
//!   `o` about to be used (`min_offset(c) + size(c) <= o`), it could be moved
//!   down there in any completion, lowering the sum of offsets; so nothing is
//!   placed at or above the smallest such end, and a node where it lies at or
//!   below the previous offset is dead;
//! - *cross-section inference*: in every section (a run of ops with the same
//!   live tensors), the tensors still to place there stack above the section
//!   floor: the highest top placed there, the lowest minimum offset among
//!   its unplaced tensors and the previous offset, whichever is highest; the
//!   floor plus their total size must stay within the capacity;
//! - *twins*: of identical tensors (same size and interval) the one listed
//!   first goes first;
//! - *hatless tensors* (MiniMalloc): when every neighbour of the tensor just
//!   placed is placed already, it constrains nothing left, so if no
//!   completion exists with it at its minimum offset, none exists without
//!   it either, and its siblings are not tried;
//! - *dynamic decomposition*: when no unplaced tensor spans the boundary
//!   between two sections any more, the tensors left on either side no
//!   longer interact and are solved one side after the other.
//!
//! # Orders
//!
//! The rank breaks ties between equal minimum offsets. Several static
//! rankings are tried in turn with a node limit that doubles each round, as
//! MiniMalloc does: one of them usually dives straight to a solution, and an
//! exhausted search under any ranking proves infeasibility.

use std::time::{Duration, Instant};

use super::adjacency::Adjacency;
use super::conflicts::{time_only, Conflicts};
use super::exact::Fits;
use super::records::UsageRecord;
use super::skyline::Spans;
use super::validate::validate_offsets;
use super::OffsetsAssignment;

/// The largest number of non-empty tensors in one independent part that the
/// search takes on (it recurses once per tensor); larger parts are answered
/// `Unknown` and keep the heuristic plan.
pub const MAX_DEPTH: usize = 10_000;

/// Parts up to this many tensors are searched on the caller's stack.
const SHALLOW: usize = 256;

/// Stack reserved per level of recursion for deeper parts (generous: a
/// level takes two frames of a few hundred bytes).
const FRAME_BYTES: usize = 4096;

/// Node and time budget shared by every search of one call.
pub(crate) struct Budget {
    pub(crate) deadline: Option<Instant>,
    pub(crate) nodes: u64,
    pub(crate) node_limit: u64,
    pub(crate) exhausted: bool,
}

impl Budget {
    pub(crate) fn new(deadline: Option<Instant>, node_limit: u64) -> Self {
        Self {
            deadline,
            nodes: 0,
            node_limit: node_limit.max(1),
            exhausted: false,
        }
    }

    /// Time left before the deadline (None without a clock).
    pub(crate) fn time_left(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// Runs `f` with `num / den` of what is left (nodes and time), then
    /// charges what it used.
    pub(crate) fn share<T>(&mut self, num: u32, den: u32, f: impl FnOnce(&mut Budget) -> T) -> T {
        let nodes_left = self.node_limit.saturating_sub(self.nodes);
        let mut sub = Budget::new(
            self.time_left().map(|t| Instant::now() + t * num / den),
            (nodes_left as u128 * num as u128 / den as u128) as u64,
        );
        let out = f(&mut sub);
        self.nodes += sub.nodes;
        if self.nodes >= self.node_limit || self.deadline.is_some_and(|d| Instant::now() >= d) {
            self.exhausted = true;
        }
        out
    }

    /// Runs `f` with at most `nodes` of the nodes left (and all the time
    /// left), then charges what it used.
    pub(crate) fn limited<T>(&mut self, nodes: u64, f: impl FnOnce(&mut Budget) -> T) -> T {
        let nodes_left = self.node_limit.saturating_sub(self.nodes);
        let mut sub = Budget::new(self.deadline, nodes.min(nodes_left));
        let out = f(&mut sub);
        self.nodes += sub.nodes;
        if self.nodes >= self.node_limit || self.deadline.is_some_and(|d| Instant::now() >= d) {
            self.exhausted = true;
        }
        out
    }

    fn tick(&mut self) -> bool {
        self.nodes += 1;
        if self.nodes >= self.node_limit {
            self.exhausted = true;
        } else if self.nodes % 256 == 0 {
            if let Some(d) = self.deadline {
                if Instant::now() >= d {
                    self.exhausted = true;
                }
            }
        }
        !self.exhausted
    }
}

/// Why a search stopped without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// The shared budget (nodes or clock) ran out.
    Budget,
    /// This ranking's node limit for the round ran out.
    Round,
}

/// The static rankings tried in turn: by the largest section total the
/// tensor lives in, its lifetime and its area, in three orders, first with
/// the lifetime counted in sections and the area over densely numbered
/// times, then as MiniMalloc counts them, in ops (its `TWA`, `WAT` and
/// `TAW`). Which ranking dives straight to a plan differs from trace to
/// trace (MiniMalloc's B needs the first kind, its J the second: 3 thousand
/// nodes instead of millions), and a round costs little next to a ranking
/// that misses.
#[derive(Debug, Clone, Copy)]
enum Key {
    Total,
    /// Lifetime in ops (after proportional renumbering, see `records`).
    Width,
    /// Lifetime in sections.
    Sections,
    /// Size times lifetime.
    Area,
    /// Size times the number of distinct start and end points in the
    /// lifetime (the area as if times were numbered densely).
    DenseArea,
}

const RANKINGS: [[Key; 3]; 6] = [
    [Key::Total, Key::Sections, Key::DenseArea],
    [Key::Sections, Key::DenseArea, Key::Total],
    [Key::Total, Key::DenseArea, Key::Sections],
    [Key::Total, Key::Width, Key::Area],
    [Key::Width, Key::Area, Key::Total],
    [Key::Total, Key::Area, Key::Width],
];

/// The depth-first search over one set of records.
pub(crate) struct Search<'a> {
    records: &'a [UsageRecord],
    conflicts: Option<&'a Conflicts>,
    adj: Adjacency,
    align: u64,
    /// Section range [lo, hi] of each record.
    span: Vec<(usize, usize)>,
    sections: usize,
    /// Whether decomposition is sound (no conflict pairs beyond overlaps).
    decompose: bool,
    /// Previous identical record (in index order), which must be placed first.
    twin_before: Vec<Option<usize>>,
    /// Rank of every record under the current ranking.
    rank: Vec<usize>,
    /// The placement found (valid after `solve` answered `Yes`).
    pub(crate) offsets: Vec<u64>,
    // Search state.
    capacity: u64,
    placed: Vec<bool>,
    min_offset: Vec<u64>,
    floor: Vec<u64>,
    total: Vec<u64>,
    /// Unplaced tensors spanning the boundary between section s and s + 1.
    cuts: Vec<u32>,
    /// Nodes left to this ranking in this round.
    round_left: u64,
    /// The capacity and node limit of the round a search ran out of budget
    /// in: a later search at the same capacity starts at that round, since
    /// every smaller one is known to fail.
    resume: Option<(u64, u64)>,
    /// Scratch: lowest minimum offset per section.
    lowest: Vec<u64>,
}

impl<'a> Search<'a> {
    pub(crate) fn new(
        records: &'a [UsageRecord],
        conflicts: Option<&'a Conflicts>,
        align: u64,
    ) -> Self {
        let n = records.len();
        let adj = Adjacency::new(records, conflicts);
        // Sections: the distinct first ops; a record covers every section
        // whose op lies in its interval. Two records overlap exactly when
        // they share a section.
        let Spans {
            spans: span,
            positions: sections,
        } = Spans::new(records);
        let has_conflicts = !time_only(conflicts);
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
            conflicts,
            adj,
            align: align.max(1),
            span,
            sections,
            decompose: !has_conflicts,
            twin_before,
            rank: (0..n).collect(),
            offsets: vec![0; n],
            capacity: 0,
            placed: vec![false; n],
            min_offset: vec![0; n],
            floor: vec![0; sections],
            total: vec![0; sections],
            cuts: vec![0; sections.saturating_sub(1)],
            round_left: 0,
            resume: None,
            lowest: vec![0; sections],
        }
    }

    /// The placement found, with its total.
    pub(crate) fn plan(&self) -> OffsetsAssignment {
        OffsetsAssignment::from_offsets(self.records, self.offsets.clone())
    }

    fn up(&self, v: u64) -> u64 {
        v.div_ceil(self.align) * self.align
    }

    fn reset(&mut self) {
        self.placed.iter_mut().for_each(|p| *p = false);
        self.min_offset.iter_mut().for_each(|m| *m = 0);
        self.floor.iter_mut().for_each(|f| *f = 0);
        self.total.iter_mut().for_each(|t| *t = 0);
        self.cuts.iter_mut().for_each(|c| *c = 0);
        for (i, r) in self.records.iter().enumerate() {
            if r.size == 0 {
                // Empty tensors occupy nothing; offset 0 never clashes.
                self.placed[i] = true;
                self.offsets[i] = 0;
                continue;
            }
            let (lo, hi) = self.span[i];
            for s in lo..=hi {
                self.total[s] += r.size;
            }
            for c in &mut self.cuts[lo..hi] {
                *c += 1;
            }
        }
    }

    fn set_ranking(&mut self, keys: [Key; 3]) {
        let n = self.records.len();
        let section_max: Vec<u64> = (0..n)
            .map(|i| {
                let (lo, hi) = self.span[i];
                self.total[lo..=hi].iter().copied().max().unwrap_or(0)
            })
            .collect();
        let mut points: Vec<usize> = self
            .records
            .iter()
            .flat_map(|r| [r.first, r.last + 1])
            .collect();
        points.sort_unstable();
        points.dedup();
        let dense = |t: usize| points.partition_point(|&p| p < t);
        let key = |i: usize, k: Key| -> u128 {
            let r = &self.records[i];
            let (lo, hi) = self.span[i];
            match k {
                Key::Total => section_max[i] as u128,
                Key::Width => (r.last - r.first + 1) as u128,
                Key::Sections => (hi - lo + 1) as u128,
                Key::DenseArea => r.size as u128 * (dense(r.last + 1) - dense(r.first)) as u128,
                Key::Area => r.size as u128 * (r.last - r.first + 1) as u128,
            }
        };
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| {
            for k in keys {
                let (ka, kb) = (key(a, k), key(b, k));
                if ka != kb {
                    return kb.cmp(&ka);
                }
            }
            a.cmp(&b)
        });
        for (r, &i) in order.iter().enumerate() {
            self.rank[i] = r;
        }
    }

    /// The independent parts at the start: runs of sections between
    /// boundaries no tensor spans (one part when conflicts exist).
    fn initial_parts(&self) -> Vec<(Vec<usize>, usize, usize)> {
        if self.sections == 0 {
            return Vec::new();
        }
        let mut bounds = vec![0usize];
        if self.decompose {
            for (b, &c) in self.cuts.iter().enumerate() {
                if c == 0 {
                    bounds.push(b + 1);
                }
            }
        }
        bounds.push(self.sections);
        self.split(&(0..self.records.len()).collect::<Vec<_>>(), &bounds)
    }

    /// Unplaced tensors of `members` grouped by the section runs that
    /// `bounds` (ascending, first and one-past-last section included) cut.
    fn split(&self, members: &[usize], bounds: &[usize]) -> Vec<(Vec<usize>, usize, usize)> {
        let mut parts: Vec<(Vec<usize>, usize, usize)> = bounds
            .windows(2)
            .map(|w| (Vec::new(), w[0], w[1] - 1))
            .collect();
        for &i in members {
            if self.placed[i] {
                continue;
            }
            let lo = self.span[i].0;
            let p = bounds.partition_point(|&b| b <= lo) - 1;
            parts[p].0.push(i);
        }
        parts.retain(|p| !p.0.is_empty());
        parts
    }

    /// Fits everything within `capacity`, proves it impossible, or runs out
    /// of budget.
    pub(crate) fn solve(&mut self, capacity: u64, budget: &mut Budget) -> Fits {
        self.capacity = capacity;
        self.reset();
        if self.records.iter().any(|r| r.size > capacity)
            || self.total.iter().any(|&t| t > capacity)
        {
            return Fits::No;
        }
        let parts = self.initial_parts();
        if parts.iter().any(|p| p.0.len() > MAX_DEPTH) {
            return Fits::Unknown;
        }
        let deepest = parts.iter().map(|p| p.0.len()).max().unwrap_or(0);
        if deepest <= SHALLOW {
            return self.round_robin(&parts, capacity, budget);
        }
        // The search recurses once per tensor: deep ones run on a thread
        // with a stack sized for them, whatever stack the caller has.
        std::thread::scope(|scope| {
            let worker = std::thread::Builder::new()
                .stack_size((deepest + 64) * FRAME_BYTES)
                .spawn_scoped(scope, || self.round_robin(&parts, capacity, budget));
            match worker {
                Ok(handle) => handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                Err(_) => Fits::Unknown,
            }
        })
    }

    /// The rankings in turn with a doubling node limit, until one answers.
    fn round_robin(
        &mut self,
        parts: &[(Vec<usize>, usize, usize)],
        capacity: u64,
        budget: &mut Budget,
    ) -> Fits {
        let mut limit = match self.resume {
            Some((c, l)) if c == capacity => l,
            _ => (self.records.len() as u64).max(64),
        };
        self.resume = None;
        loop {
            for keys in RANKINGS {
                self.set_ranking(keys);
                self.round_left = limit;
                match self.solve_parts(parts, budget) {
                    Ok(true) => {
                        // Trust but verify: a plan that does not validate
                        // would be a bug; it is never reported as a fit.
                        let ok = validate_offsets(
                            self.records,
                            self.conflicts,
                            &self.plan(),
                            self.align,
                        )
                        .is_ok()
                            && self.plan().total_size <= capacity;
                        debug_assert!(ok, "the search produced an invalid plan");
                        return if ok { Fits::Yes } else { Fits::Unknown };
                    }
                    Ok(false) => return Fits::No,
                    Err(Stop::Budget) => {
                        self.resume = Some((capacity, limit));
                        return Fits::Unknown;
                    }
                    Err(Stop::Round) => {}
                }
            }
            limit = limit.saturating_mul(2);
        }
    }

    fn solve_parts(
        &mut self,
        parts: &[(Vec<usize>, usize, usize)],
        budget: &mut Budget,
    ) -> Result<bool, Stop> {
        for (members, lo, hi) in parts {
            if !self.dfs(members, *lo, *hi, 0, None, budget)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Places every unplaced tensor of `members` (whose sections lie in
    /// `lo..=hi`); Ok(true) leaves their offsets in `offsets`.
    fn dfs(
        &mut self,
        members: &[usize],
        lo: usize,
        hi: usize,
        last_offset: u64,
        last_rank: Option<usize>,
        budget: &mut Budget,
    ) -> Result<bool, Stop> {
        if !budget.tick() {
            return Err(Stop::Budget);
        }
        if self.round_left == 0 {
            return Err(Stop::Round);
        }
        self.round_left -= 1;
        let mut cands: Vec<(u64, usize, usize)> = Vec::new();
        let mut min_height = u64::MAX;
        for &i in members {
            if self.placed[i] {
                continue;
            }
            let m = self.min_offset[i];
            min_height = min_height.min(m + self.records[i].size);
            cands.push((m, self.rank[i], i));
        }
        if cands.is_empty() {
            return Ok(true);
        }
        if min_height <= last_offset {
            return Ok(false);
        }
        // Cross-section inference.
        for x in &mut self.lowest[lo..=hi] {
            *x = u64::MAX;
        }
        for &(m, _, i) in &cands {
            let (a, b) = self.span[i];
            for x in &mut self.lowest[a..=b] {
                *x = (*x).min(m);
            }
        }
        for s in lo..=hi {
            let t = self.total[s];
            if t > 0 && self.floor[s].max(self.lowest[s]).max(last_offset) + t > self.capacity {
                return Ok(false);
            }
        }
        // Only tensors that may go next are branched on: at or above the
        // previous offset (above the previous rank on a tie), below every
        // unplaced tensor's end (dominance), after their twins, within the
        // capacity.
        cands.retain(|&(off, rank, i)| {
            off < min_height
                && off >= last_offset
                && !(off == last_offset && last_rank.is_some_and(|l| rank < l))
                && self.twin_before[i].is_none_or(|t| self.placed[t])
                && off + self.records[i].size <= self.capacity
        });
        cands.sort_unstable();
        for (off, rank, i) in cands {
            // A tensor whose neighbours are all placed already ("hatless")
            // constrains nothing left: if nothing fits with it at its
            // minimum offset, nothing fits without it either, so its
            // siblings need not be tried (MiniMalloc's hatless pruning).
            let hatless = self.adj.of(i).iter().all(|&j| self.placed[j as usize]);
            let r = self.place_and_recurse(members, lo, hi, i, off, rank, budget);
            match r {
                Ok(false) if hatless => return Ok(false),
                Ok(false) => {}
                other => return other,
            }
        }
        Ok(false)
    }

    #[allow(clippy::too_many_arguments)]
    fn place_and_recurse(
        &mut self,
        members: &[usize],
        lo: usize,
        hi: usize,
        i: usize,
        off: u64,
        rank: usize,
        budget: &mut Budget,
    ) -> Result<bool, Stop> {
        let size = self.records[i].size;
        let top = self.up(off + size);
        self.placed[i] = true;
        self.offsets[i] = off;
        let (a, b) = self.span[i];
        let old_floor: Vec<u64> = self.floor[a..=b].to_vec();
        for s in a..=b {
            self.floor[s] = self.floor[s].max(top);
            self.total[s] -= size;
        }
        let mut raised: Vec<(usize, u64)> = Vec::new();
        for k in 0..self.adj.degree(i) {
            let j = self.adj.of(i)[k] as usize;
            if !self.placed[j] && self.min_offset[j] < top {
                raised.push((j, self.min_offset[j]));
                self.min_offset[j] = top;
            }
        }
        let mut new_cuts: Vec<usize> = Vec::new();
        for c in a..b {
            self.cuts[c] -= 1;
            if self.cuts[c] == 0 && self.decompose && c >= lo && c < hi {
                new_cuts.push(c + 1);
            }
        }
        let r = if new_cuts.is_empty() {
            self.dfs(members, lo, hi, off, Some(rank), budget)
        } else {
            let mut bounds = vec![lo];
            bounds.extend(new_cuts);
            bounds.push(hi + 1);
            let parts = self.split(members, &bounds);
            let mut out = Ok(true);
            for (m, plo, phi) in &parts {
                match self.dfs(m, *plo, *phi, 0, None, budget) {
                    Ok(true) => {}
                    other => {
                        out = other;
                        break;
                    }
                }
            }
            out
        };
        for c in a..b {
            self.cuts[c] += 1;
        }
        for (j, m) in raised {
            self.min_offset[j] = m;
        }
        for (k, s) in (a..=b).enumerate() {
            self.floor[s] = old_floor[k];
            self.total[s] += size;
        }
        self.placed[i] = false;
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` tensors all alive at every op, and their total size: a plan
    /// exists only as one full stack.
    fn full_stack(n: usize) -> (Vec<UsageRecord>, u64) {
        let records: Vec<UsageRecord> = (0..n)
            .map(|i| UsageRecord::new(i as u64, 1 + i as u64 % 97, 0, 3))
            .collect();
        let total = records.iter().map(|r| r.size).sum();
        (records, total)
    }

    /// Every tensor alive at every op: one part, no cut, and a plan only as
    /// a full stack, so the search dives once per tensor. A test thread's
    /// small stack must not limit that depth.
    #[test]
    fn deep_dives_do_not_depend_on_the_callers_stack() {
        let n = 3000;
        let (records, total) = full_stack(n);
        let mut search = Search::new(&records, None, 1);
        let mut budget = Budget::new(None, 10 * n as u64);
        assert_eq!(search.solve(total, &mut budget), Fits::Yes);
        assert_eq!(search.plan().total_size, total);
        let mut budget = Budget::new(None, 10 * n as u64);
        assert_eq!(search.solve(total - 1, &mut budget), Fits::No);
    }

    /// A limited share stops the search at its own node count, charges
    /// exactly what it used to the shared budget and leaves the rest.
    #[test]
    fn a_limited_share_caps_and_charges_its_nodes() {
        let n = 300;
        let (records, total) = full_stack(n);
        let mut search = Search::new(&records, None, 1);
        let mut budget = Budget::new(None, 10 * n as u64);
        assert_eq!(
            budget.limited(100, |b| search.solve(total, b)),
            Fits::Unknown
        );
        assert_eq!(budget.nodes, 100);
        assert!(!budget.exhausted);
        assert_eq!(search.solve(total, &mut budget), Fits::Yes);
    }
}
