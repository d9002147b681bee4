//! Squeeze: a guided local search over the offsets themselves that lowers a
//! finished plan's arena one step at a time.
//!
//! At each capacity below the plan's total, the tensors that stick out are
//! pushed down inside it, which makes them overlap others. Then, over and
//! over, one overlapping tensor moves to the offset where it overlaps its
//! neighbours least (overlap in bytes times the ops the two share, times a
//! penalty of the pair); when it has no better offset, the pair that
//! overlaps it most, for its penalty, is penalised (guided local search),
//! which makes the search leave that arrangement. A capacity with no
//! overlap left is a plan; the next capacity is one step lower. A capacity
//! that has taken too many moves is tried again from the last plan, with
//! the penalties cleared.
//!
//! Why: the placement heuristics build a plan tensor by tensor and never
//! undo a choice, and on tight traces they stall at the same height
//! whatever the order (the 7,133 tensors before op 992 of the 10,000-tensor
//! perfect packing seed 5: about 1.20 of the bound from hundreds of skyline
//! orders, and the ruin steps no lower in 5 s). Working on a plan whose
//! tensors may overlap lets a tensor pass through the others to a place
//! that a placement could only reach by moving many at once: from the area
//! skyline there (1.23) it reaches 1.20 in a tenth of a second and
//! 1.13–1.16 in three.
//!
//! A tensor's best offset comes from one sweep over a grid of offsets (the
//! alignment, coarsened to at most `MAX_CELLS` cells up to the capacity):
//! its cost is piecewise linear in the offset, with its slope changing
//! where the tensor starts or stops meeting a neighbour, so the sweep adds
//! each neighbour's four slope changes into the grid and reads off every
//! cell's cost in one pass. Without conflict pairs only, as the ruin steps.

use std::time::Instant;

use super::adjacency::Adjacency;
use super::improve::ImproveOptions;
use super::records::UsageRecord;
use super::OffsetsAssignment;
use crate::util::rng::SplitMix64;

/// The squeeze's plan from `plan` (never higher than it): at most
/// `options.squeeze_moves` moves, until `deadline`, down to `stop`; the
/// tensors in `keep` stay where they are, and with `patience` it gives up
/// after that many failed tries in a row at its smallest step.
///
/// `plan` comes back untouched, without even the neighbour lists built,
/// when there is nothing to do: no moves allowed, `plan` already at
/// `stop`, or `deadline` past (greedy by size alone can overrun a time
/// limit on 100,000 records).
pub(crate) fn squeezed(
    records: &[UsageRecord],
    options: &ImproveOptions,
    plan: OffsetsAssignment,
    keep: &[usize],
    patience: Option<usize>,
    deadline: Option<Instant>,
    stop: u64,
) -> OffsetsAssignment {
    if options.squeeze_moves == 0
        || plan.total_size <= stop
        || deadline.is_some_and(|d| Instant::now() >= d)
    {
        return plan;
    }
    let mut sq = Squeeze::new(records, options.alignment, &plan, options.seed);
    keep.iter().for_each(|&i| sq.freeze(i));
    sq.patience = patience;
    sq.run(options.squeeze_moves, deadline, stop);
    // Its plan only ever changes for a lower one.
    let out = sq.plan();
    debug_assert!(
        super::validate_offsets(records, None, &out, options.alignment).is_ok()
            && out.total_size <= plan.total_size,
        "the squeeze made an invalid or higher plan"
    );
    out
}

/// At most this many candidate offsets per move: the grid is the
/// alignment, doubled until the capacity spans no more cells than this.
const MAX_CELLS: u64 = 4096;

/// Moves at one capacity before it is tried again from the last plan with
/// the penalties cleared. On the hard piece above, a capacity that is
/// reached at all is mostly reached within a few thousand moves, and a
/// fresh start often gets through where a long run stays stuck.
const MOVES_PER_TRY: usize = 20_000;

/// The search's state: the last plan without overlap, and the offsets it
/// is working on.
pub(crate) struct Squeeze<'a> {
    records: &'a [UsageRecord],
    align: u64,
    /// `nbrs[start[i]..start[i + 1]]`: tensor `i`'s neighbours (those
    /// alive at a common op) and how many ops each shares with it.
    start: Vec<usize>,
    nbrs: Vec<(u32, u32)>,
    size: Vec<u64>,
    rng: SplitMix64,
    /// The lowest plan without overlap so far, and its total.
    best: Vec<u64>,
    best_total: u64,
    /// The offsets being worked on, and each tensor's overlap with its
    /// neighbours (bytes times shared ops, without penalties); `total` is
    /// their sum (each overlapping pair counted twice).
    y: Vec<u64>,
    over: Vec<u128>,
    total: u128,
    /// For every tensor, its penalised pairs: (neighbour, penalty).
    pens: Vec<Vec<(u32, u32)>>,
    /// Scratch: the penalty of each of the current tensor's pairs, by
    /// neighbour, zero elsewhere.
    pen_at: Vec<u32>,
    /// Scratch for a move's sweep: per grid cell, the change of slope and
    /// the cost added by slope changes that fall inside the cell.
    slope_at: Vec<i128>,
    extra_at: Vec<i128>,
    /// Tensors that overlap something (may hold stale entries), frozen
    /// ones left out.
    bad: Vec<usize>,
    /// Tensors that never move (see [`freeze`](Self::freeze)).
    frozen: Vec<bool>,
    /// The greatest common divisor of the sizes (0 when all are empty).
    grain: u64,
    /// Failed tries in a row at the smallest step after which `run` gives
    /// up (None: it tries until its moves or its time run out).
    patience: Option<usize>,
    /// Moves made so far, by every `run`.
    made: usize,
}

/// Bytes two offsets' extents `[y, y + s)` and `[z, z + t)` share.
fn shared(y: u64, s: u64, z: u64, t: u64) -> u64 {
    (y + s).min(z + t).saturating_sub(y.max(z))
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Ops two records share (at most 2^32 - 1: a weight, not a count).
fn shared_ops(a: &UsageRecord, b: &UsageRecord) -> u64 {
    ((a.last.min(b.last) + 1).saturating_sub(a.first.max(b.first)) as u64).min(u32::MAX as u64)
}

impl<'a> Squeeze<'a> {
    /// Starts from `plan`, a valid plan of `records` (without conflict
    /// pairs) whose offsets are multiples of `align`.
    pub(crate) fn new(
        records: &'a [UsageRecord],
        align: u64,
        plan: &OffsetsAssignment,
        seed: u64,
    ) -> Self {
        let n = records.len();
        let adj = Adjacency::new(records, None);
        let mut start = Vec::with_capacity(n + 1);
        let mut nbrs = Vec::new();
        for (i, r) in records.iter().enumerate() {
            start.push(nbrs.len());
            nbrs.extend(
                adj.of(i)
                    .iter()
                    .map(|&j| (j, shared_ops(r, &records[j as usize]) as u32)),
            );
        }
        start.push(nbrs.len());
        Self {
            records,
            align: align.max(1),
            start,
            nbrs,
            size: records.iter().map(|r| r.size).collect(),
            rng: SplitMix64::new(seed),
            best: plan.offsets.clone(),
            best_total: plan.total_size,
            y: plan.offsets.clone(),
            over: vec![0; n],
            total: 0,
            pens: vec![Vec::new(); n],
            pen_at: vec![0; n],
            slope_at: Vec::new(),
            extra_at: Vec::new(),
            bad: Vec::new(),
            frozen: vec![false; n],
            grain: records.iter().fold(0, |g, r| gcd(g, r.size)),
            patience: None,
            made: 0,
        }
    }

    /// Keeps tensor `i` where it is: the capacity never goes below its top.
    pub(crate) fn freeze(&mut self, i: usize) {
        self.frozen[i] = true;
    }

    /// The lowest plan found.
    pub(crate) fn plan(&self) -> OffsetsAssignment {
        OffsetsAssignment::from_offsets(self.records, self.best.clone())
    }

    /// Lowers the plan until `stop`, for at most `moves` moves in all or
    /// until `deadline`.
    pub(crate) fn run(&mut self, moves: usize, deadline: Option<Instant>, stop: u64) {
        let records = self.records;
        // The sweep keeps offsets and their differences in i64.
        if self.best_total > i64::MAX as u64 / 4 {
            return;
        }
        // Every movable tensor must fit, and no frozen one may stick out.
        let floor = (0..records.len())
            .map(|i| match self.frozen[i] {
                true => self.best[i] + records[i].size,
                false => records[i].size,
            })
            .max()
            .unwrap_or(0);
        let mut left = moves;
        // The step below the plan: doubled after a capacity is reached,
        // halved after one is not, down to one cell of the grid (less
        // moves the top tensors by a cell all the same), so that easy
        // stretches go fast and hard ones are taken a cell at a time.
        let least = self.unit(self.best_total);
        let mut step = ((self.best_total - stop.min(self.best_total)) / 64).max(least);
        let mut last_used = MOVES_PER_TRY;
        let mut stale = 0;
        while left > 0 && self.best_total > stop && self.patience.is_none_or(|p| stale < p) {
            let cap = self.best_total.saturating_sub(step).max(stop).max(floor);
            if cap >= self.best_total {
                break;
            }
            // A long step that is not reached soon is given up for a
            // shorter one rather than worked at for long.
            let per_try = match step > least {
                true => (4 * last_used + 1000).min(MOVES_PER_TRY),
                false => MOVES_PER_TRY,
            };
            let budget = left.min(per_try);
            let (fitted, used) = self.fit(cap, budget, deadline);
            left -= used;
            self.made += used;
            if fitted {
                last_used = used;
                stale = 0;
                self.best.clone_from(&self.y);
                self.best_total = (self.best.iter().zip(&self.size))
                    .map(|(&o, &s)| o + s)
                    .max()
                    .unwrap_or(0);
                step = step.saturating_mul(2);
            } else if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            } else {
                stale += usize::from(step <= least);
                step = (step / 2).max(least);
            }
        }
    }

    /// Searches for offsets within `cap` from the last plan, for at most
    /// `moves` moves or until `deadline`: whether it found them, and the
    /// moves it made.
    fn fit(&mut self, cap: u64, moves: usize, deadline: Option<Instant>) -> (bool, usize) {
        let n = self.records.len();
        let unit = self.unit(cap);
        // The last plan has no overlap; pushing down the tensors that stick
        // out above `cap` makes what overlap there is.
        self.y.clone_from(&self.best);
        self.over.iter_mut().for_each(|o| *o = 0);
        self.total = 0;
        self.bad.clear();
        for p in &mut self.pens {
            p.clear();
        }
        for i in 0..n {
            let room = cap - self.size[i];
            if !self.frozen[i] && self.y[i] > room {
                // On the grid, below the capacity.
                self.move_to(i, room / unit * unit);
                if self.over[i] > 0 {
                    self.bad.push(i);
                }
            }
        }
        for made in 0..moves {
            if self.total == 0 {
                return (true, made);
            }
            if made % 64 == 63 && deadline.is_some_and(|d| Instant::now() >= d) {
                return (false, made);
            }
            let Some(i) = self.pick() else {
                return (false, made);
            };
            self.load_pens(i);
            let (to, cost, now) = self.best_offset(i, cap, unit);
            if cost < now {
                self.move_to(i, to);
            } else {
                self.penalise(i);
            }
            self.unload_pens(i);
        }
        (self.total == 0, moves)
    }

    /// The grid of offsets: the alignment, or the sizes' common divisor
    /// when that is a multiple of it (offsets between its multiples only
    /// leave gaps no tensor fits in), doubled until the capacity spans at
    /// most `MAX_CELLS` cells.
    fn unit(&self, cap: u64) -> u64 {
        let mut unit = match self.grain % self.align {
            0 if self.grain > 0 => self.grain,
            _ => self.align,
        };
        while cap / unit > MAX_CELLS {
            unit *= 2;
        }
        unit
    }

    /// A random movable tensor that overlaps something.
    fn pick(&mut self) -> Option<usize> {
        loop {
            if self.bad.is_empty() || self.bad.len() > 4 * self.records.len() {
                let (over, frozen) = (&self.over, &self.frozen);
                self.bad.clear();
                self.bad
                    .extend((0..over.len()).filter(|&i| over[i] > 0 && !frozen[i]));
                if self.bad.is_empty() {
                    // Only frozen tensors overlap: nothing can move.
                    return None;
                }
            }
            let k = self.rng.below(self.bad.len() as u64) as usize;
            let i = self.bad[k];
            if self.over[i] > 0 {
                return Some(i);
            }
            self.bad.swap_remove(k);
        }
    }

    /// Tensor `i`'s neighbours and the ops each shares with it.
    #[inline]
    fn nb(&self, i: usize) -> &[(u32, u32)] {
        &self.nbrs[self.start[i]..self.start[i + 1]]
    }

    fn load_pens(&mut self, i: usize) {
        for &(j, p) in &self.pens[i] {
            self.pen_at[j as usize] = p;
        }
    }

    fn unload_pens(&mut self, i: usize) {
        for &(j, _) in &self.pens[i] {
            self.pen_at[j as usize] = 0;
        }
    }

    /// Tensor `i`'s penalised cost at offset `at` (its pens loaded).
    #[cfg(test)]
    fn cost(&self, i: usize, at: u64) -> u128 {
        let s = self.size[i];
        self.nb(i)
            .iter()
            .map(|&(j, w)| {
                let j = j as usize;
                let b = shared(at, s, self.y[j], self.size[j]);
                b as u128 * w as u128 * (1 + self.pen_at[j] as u128)
            })
            .sum()
    }

    /// The grid offset within `cap` where tensor `i` (its pens loaded)
    /// costs least, lowest first, that cost, and its cost where it is.
    fn best_offset(&mut self, i: usize, cap: u64, unit: u64) -> (u64, u128, u128) {
        let size = self.size[i];
        // Offsets and sizes fit in i64 (an arena below 2^63 bytes); costs,
        // bytes times ops times penalties, need i128.
        let s = size as i64;
        let cells = ((cap - size) / unit) as usize + 1;
        if self.slope_at.len() < cells {
            self.slope_at.resize(cells, 0);
            self.extra_at.resize(cells, 0);
        }
        let u = unit as i64;
        let hi = (cells as i64 - 1) * u;
        let mut slope: i128 = 0;
        let mut cost: i128 = 0;
        let mut now: u128 = 0;
        let at = self.y[i];
        let (start, end) = (self.start[i], self.start[i + 1]);
        for &(j, w) in &self.nbrs[start..end] {
            let j = j as usize;
            let w = w as i128 * (1 + self.pen_at[j] as i128);
            let a = self.y[j] as i64;
            let b = a + self.size[j] as i64;
            now += w as u128 * shared(at, size, self.y[j], self.size[j]) as u128;
            cost += w * (s.min(b) - a.max(0)).max(0) as i128;
            // The cost rises by w per byte from a - s (the tensor's top
            // reaches the neighbour) until it covers it, then falls back.
            for (p, d) in [(a - s, w), (a, -w), (b - s, -w), (b, w)] {
                if p <= 0 {
                    slope += d;
                } else if p <= hi {
                    // Counted from the first cell at or above p.
                    let k = ((p + u - 1) / u) as usize;
                    self.slope_at[k] += d;
                    let past = k as i64 * u - p;
                    if past != 0 {
                        self.extra_at[k] += d * past as i128;
                    }
                }
            }
        }
        let mut best = (cost, 0usize);
        for k in 1..cells {
            cost += slope * u as i128 + self.extra_at[k];
            slope += self.slope_at[k];
            self.slope_at[k] = 0;
            self.extra_at[k] = 0;
            if cost < best.0 {
                best = (cost, k);
            }
        }
        debug_assert!(best.0 >= 0);
        (best.1 as u64 * unit, best.0 as u128, now)
    }

    /// Moves tensor `i` to offset `to`, updating the overlaps.
    fn move_to(&mut self, i: usize, to: u64) {
        let s = self.size[i];
        let from = self.y[i];
        self.y[i] = to;
        let mut mine = 0u128;
        for k in self.start[i]..self.start[i + 1] {
            let (j, w) = self.nbrs[k];
            let j = j as usize;
            let ops = w as u128;
            let before = shared(from, s, self.y[j], self.size[j]) as u128 * ops;
            let after = shared(to, s, self.y[j], self.size[j]) as u128 * ops;
            if self.over[j] == 0 && after > 0 && !self.frozen[j] {
                self.bad.push(j);
            }
            self.over[j] = self.over[j] + after - before;
            mine += after;
        }
        self.total = self.total + 2 * mine - 2 * self.over[i];
        self.over[i] = mine;
    }

    /// Penalises the pair of tensor `i` (its pens loaded) whose overlap,
    /// for its penalty, is largest.
    fn penalise(&mut self, i: usize) {
        let s = self.size[i];
        let mut worst: Option<(u128, u32, usize)> = None;
        for &(j, w) in self.nb(i) {
            let j = j as usize;
            let o = shared(self.y[i], s, self.y[j], self.size[j]) as u128 * w as u128;
            if o == 0 {
                continue;
            }
            let p = self.pen_at[j];
            // o / (1 + p) compared without division.
            let better =
                worst.is_none_or(|(wo, wp, _)| o * (1 + wp as u128) > wo * (1 + p as u128));
            if better {
                worst = Some((o, p, j));
            }
        }
        let Some((_, _, j)) = worst else { return };
        for (a, b) in [(i, j), (j, i)] {
            match self.pens[a].iter_mut().find(|e| e.0 == b as u32) {
                Some(e) => e.1 += 1,
                None => self.pens[a].push((b as u32, 1)),
            }
        }
        self.pen_at[j] += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::synthetic::perfect_packing;
    use crate::plan::{lower_bound, offsets_greedy_by_size, validate_offsets};

    /// From greedy by size on a cut rectangle, the squeeze comes out lower,
    /// valid and aligned, and never below the bound.
    #[test]
    fn lowers_greedy_on_a_cut_rectangle() {
        let records = perfect_packing(300, 4, 1 << 20);
        let bound = lower_bound(&records);
        for align in [1, 4096] {
            let greedy = offsets_greedy_by_size(&records, None, align);
            assert!(greedy.total_size > bound, "the instance is too easy");
            let mut s = Squeeze::new(&records, align, &greedy, 3);
            s.run(200_000, None, bound);
            let plan = s.plan();
            validate_offsets(&records, None, &plan, align).unwrap();
            assert!(plan.total_size < greedy.total_size, "align {align}");
            assert!(plan.total_size >= bound);
        }
    }

    /// Told to give up, the squeeze stops well before its moves run out
    /// once it is stuck short of an unreachable stop (below the bound), and
    /// its plan is still valid and lower.
    #[test]
    fn gives_up_when_stuck() {
        let records = perfect_packing(200, 8, 1 << 20);
        let greedy = offsets_greedy_by_size(&records, None, 1);
        let budget = 2_000_000;
        let mut s = Squeeze::new(&records, 1, &greedy, 4);
        s.patience = Some(2);
        s.run(budget, None, 0);
        assert!(s.made < budget, "made all {} moves", s.made);
        let plan = s.plan();
        validate_offsets(&records, None, &plan, 1).unwrap();
        assert!(plan.total_size < greedy.total_size);
    }

    /// Frozen tensors keep their offsets, and the rest still comes down
    /// around them.
    #[test]
    fn frozen_tensors_stay() {
        let records = perfect_packing(300, 6, 1 << 20);
        let bound = lower_bound(&records);
        let greedy = offsets_greedy_by_size(&records, None, 1);
        let frozen: Vec<usize> = (0..records.len()).step_by(7).collect();
        let mut s = Squeeze::new(&records, 1, &greedy, 2);
        frozen.iter().for_each(|&i| s.freeze(i));
        s.run(200_000, None, bound);
        let plan = s.plan();
        validate_offsets(&records, None, &plan, 1).unwrap();
        assert!(plan.total_size < greedy.total_size);
        for &i in &frozen {
            assert_eq!(plan.offsets[i], greedy.offsets[i], "tensor {i} moved");
        }
    }

    /// The sweep's cost of every grid offset is the cost summed directly,
    /// with penalties, off-grid neighbours and a coarse grid.
    #[test]
    fn the_sweep_matches_the_direct_cost() {
        let mut rng = SplitMix64::new(5);
        let records: Vec<UsageRecord> = (0..60)
            .map(|i| {
                let first = rng.below(20) as usize;
                UsageRecord::new(i, 1 + rng.below(300), first, first + rng.below(6) as usize)
            })
            .collect();
        let offsets: Vec<u64> = (0..60).map(|_| rng.below(900)).collect();
        let plan = OffsetsAssignment::from_offsets(&records, offsets);
        let mut s = Squeeze::new(&records, 1, &plan, 1);
        for i in 0..records.len() {
            for j in s.nb(i).iter().map(|e| e.0).collect::<Vec<_>>() {
                if rng.below(3) == 0 {
                    s.pens[i].push((j, 1 + rng.below(4) as u32));
                }
            }
        }
        for unit in [1, 7, 64] {
            for (i, r) in records.iter().enumerate() {
                s.load_pens(i);
                let cap = 1200;
                let (at, cost, now) = s.best_offset(i, cap, unit);
                assert_eq!(now, s.cost(i, s.y[i]));
                let direct: Vec<(u64, u128)> = (0..=(cap - r.size) / unit)
                    .map(|k| (k * unit, s.cost(i, k * unit)))
                    .collect();
                let lowest = direct.iter().map(|d| d.1).min().unwrap();
                assert_eq!(cost, lowest, "tensor {i}, unit {unit}");
                assert_eq!(at, direct.iter().find(|d| d.1 == lowest).unwrap().0);
                s.unload_pens(i);
            }
        }
    }
}
