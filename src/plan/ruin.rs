//! Ruin and recreate: a large-neighbourhood search that improves a finished
//! plan. Each step lifts out a *band* of the plan (the tensors alive in a
//! window of ops around a tensor that reaches the top, with tops above some
//! level) and places them again around the rest, in one of a few orders
//! with best or first fit. A step is kept when the arena is no taller and
//! has no more tensors reaching the top, and, on a tie, when the band sits
//! no higher on the whole (its offsets weighted by area): so the search
//! also drifts across plateaus, pushing the top tensors down one at a time
//! until the peak itself drops.
//!
//! Why: the order-based local search in `improve` places everything after
//! a change again (tens of milliseconds at 10,000 tensors), so it takes a
//! few dozen steps in a second; a band of a few dozen tensors is placed
//! again in tens of microseconds, and the band is where the peak is.
//!
//! A band tensor's gap is found among the tensors alive with it: from its
//! neighbour list (sorted by offset) when that is short, else by a scan of
//! the band's surroundings, sorted once per step (a long-lived tensor has
//! thousands of neighbours). Without conflict pairs only: a conflict pair
//! alive at different times would be missed by that scan.

use std::cmp::Reverse;
use std::time::Instant;

use super::adjacency::Adjacency;
use super::offsets::{gap_offset, Fit};
use super::records::UsageRecord;
use super::OffsetsAssignment;
use crate::util::rng::SplitMix64;

/// At most this many tensors are lifted out in one step; a wider band keeps
/// the tensors nearest the top, so that a step stays cheap.
const MAX_BAND: usize = 400;

/// A placed tensor as the gap search sees it: offset, end (offset plus
/// size), first and last op.
type Slot = (u64, u64, usize, usize);

/// The search's state: a plan of `records` that it improves in place.
pub(crate) struct Ruin<'a> {
    records: &'a [UsageRecord],
    align: u64,
    offsets: Vec<u64>,
    /// Record indices by first op (for the window query).
    by_first: Vec<usize>,
    /// One past the last op of any record.
    ops: usize,
    rng: SplitMix64,
    // Scratch, reused by every step.
    band: Vec<usize>,
    in_band: Vec<bool>,
    saved: Vec<u64>,
    fixed: Vec<Slot>,
    moved: Vec<Slot>,
    busy: Vec<(u64, u64)>,
    /// For every tensor, the tensors alive at a common op.
    adj: Adjacency,
    /// Whether a band tensor has been placed again in this step.
    done: Vec<bool>,
    /// Tensors that never move (see [`freeze`](Self::freeze)).
    frozen: Vec<bool>,
}

/// The arena's height and how many tensors reach it.
fn peak(records: &[UsageRecord], offsets: &[u64]) -> (u64, usize) {
    let mut top = 0;
    let mut count = 0;
    for (r, &o) in records.iter().zip(offsets) {
        let t = o + r.size;
        if r.size == 0 || t < top {
            continue;
        }
        if t > top {
            top = t;
            count = 0;
        }
        count += 1;
    }
    (top, count)
}

impl<'a> Ruin<'a> {
    /// Starts from `plan`, a valid plan of `records` (without conflict
    /// pairs) whose offsets are multiples of `align`.
    pub(crate) fn new(
        records: &'a [UsageRecord],
        align: u64,
        plan: &OffsetsAssignment,
        seed: u64,
    ) -> Self {
        let n = records.len();
        let mut by_first: Vec<usize> = (0..n).collect();
        by_first.sort_by_key(|&i| (records[i].first, i));
        Self {
            records,
            align: align.max(1),
            offsets: plan.offsets.clone(),
            by_first,
            ops: records.iter().map(|r| r.last + 1).max().unwrap_or(0),
            rng: SplitMix64::new(seed),
            band: Vec::new(),
            in_band: vec![false; n],
            saved: Vec::new(),
            fixed: Vec::new(),
            moved: Vec::new(),
            busy: Vec::new(),
            adj: Adjacency::new(records, None),
            done: vec![false; n],
            frozen: vec![false; n],
        }
    }

    /// Keeps tensor `i` where it is: no band takes it.
    pub(crate) fn freeze(&mut self, i: usize) {
        self.frozen[i] = true;
    }

    /// The current plan.
    pub(crate) fn plan(&self) -> OffsetsAssignment {
        OffsetsAssignment::from_offsets(self.records, self.offsets.clone())
    }

    /// Runs up to `steps` steps, stopping at `deadline` or once the arena
    /// is down to `bound`.
    pub(crate) fn run(&mut self, steps: usize, deadline: Option<Instant>, bound: u64) {
        for step in 0..steps {
            if step % 16 == 0 && deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            if !self.step(bound) {
                break;
            }
        }
    }

    /// One ruin-and-recreate step, kept when it is no worse; false when
    /// there is nothing left to do (the arena is at `bound`, or empty).
    pub(crate) fn step(&mut self, bound: u64) -> bool {
        let (height, count) = peak(self.records, &self.offsets);
        if height <= bound {
            return false;
        }
        self.choose_band(height);
        let weight = |s: &Self| -> u128 {
            s.band
                .iter()
                .map(|&i| {
                    let r = &s.records[i];
                    s.offsets[i] as u128 * r.size as u128 * (r.last - r.first + 1) as u128
                })
                .sum()
        };
        let before = weight(self);
        self.order_band();
        self.saved.clear();
        self.saved
            .extend(self.band.iter().map(|&i| self.offsets[i]));
        self.collect_fixed();
        self.moved.clear();
        let fit = if self.rng.below(2) == 0 {
            Fit::Best
        } else {
            Fit::First
        };
        for k in 0..self.band.len() {
            let i = self.band[k];
            let r = &self.records[i];
            let o = if self.adj.degree(i) * 8 < self.fixed.len() {
                self.gap_by_neighbours(i, fit)
            } else {
                self.gap(r, fit)
            };
            self.offsets[i] = o;
            self.done[i] = true;
            let slot = (o, o + r.size, r.first, r.last);
            let at = self.moved.partition_point(|s| *s < slot);
            self.moved.insert(at, slot);
        }
        let after = peak(self.records, &self.offsets);
        let keep = after < (height, count) || (after == (height, count) && weight(self) <= before);
        if !keep {
            for (k, &i) in self.band.iter().enumerate() {
                self.offsets[i] = self.saved[k];
            }
        }
        for &i in &self.band {
            self.in_band[i] = false;
            self.done[i] = false;
        }
        true
    }

    /// Picks the band: tensors alive in a window of ops around a random
    /// tensor at the top, with tops above a random level.
    fn choose_band(&mut self, height: u64) {
        let records = self.records;
        let tops: Vec<usize> = (0..records.len())
            .filter(|&i| records[i].size > 0 && self.offsets[i] + records[i].size == height)
            .collect();
        let p = tops[self.rng.below(tops.len() as u64) as usize];
        let life = (records[p].last - records[p].first + 1) as u64;
        // Half the windows are a few lifetimes of the top tensor wide, half
        // anything from one op to the whole trace (log-uniform): a peak
        // may come down only once a wide stretch is rearranged.
        let width = if self.rng.below(2) == 0 {
            1 + self.rng.below(1 + 3 * life)
        } else {
            let bits = 64 - (self.ops as u64).leading_zeros() as u64;
            let scale = self.rng.below(bits + 1);
            1 + self.rng.below(1 << scale)
        } as usize;
        let centre = records[p].first + self.rng.below(life) as usize;
        let lo = centre.saturating_sub(self.rng.below(width as u64) as usize);
        let hi = lo + width - 1;
        // A level from the bottom to the top, more often near the top.
        let f = self.rng.next_f64();
        let level = (height as f64 * (1.0 - f * f)) as u64;
        self.band.clear();
        let end = self.by_first.partition_point(|&i| records[i].first <= hi);
        for &i in &self.by_first[..end] {
            let q = &records[i];
            if q.size > 0 && q.last >= lo && self.offsets[i] + q.size > level && !self.frozen[i] {
                self.band.push(i);
            }
        }
        if self.band.len() > MAX_BAND {
            let offsets = &self.offsets;
            self.band
                .sort_by_key(|&i| (Reverse(offsets[i] + records[i].size), i));
            self.band.truncate(MAX_BAND);
        }
        for &i in &self.band {
            self.in_band[i] = true;
        }
    }

    /// The tensors that stay, alive during some band tensor's lifetime,
    /// sorted by offset.
    fn collect_fixed(&mut self) {
        let records = self.records;
        let lo = self
            .band
            .iter()
            .map(|&i| records[i].first)
            .min()
            .unwrap_or(0);
        let hi = self
            .band
            .iter()
            .map(|&i| records[i].last)
            .max()
            .unwrap_or(0);
        self.fixed.clear();
        let end = self.by_first.partition_point(|&i| records[i].first <= hi);
        for &i in &self.by_first[..end] {
            let q = &records[i];
            if q.size > 0 && q.last >= lo && !self.in_band[i] {
                let o = self.offsets[i];
                self.fixed.push((o, o + q.size, q.first, q.last));
            }
        }
        self.fixed.sort_unstable();
    }

    /// Orders the band for placing again: by size, by area, by lifetime,
    /// or by the offsets they had (which first fit keeps or lowers); half
    /// the time with a few neighbours swapped.
    fn order_band(&mut self) {
        let records = self.records;
        let offsets = &self.offsets;
        let span = |i: usize| (records[i].last - records[i].first + 1) as u64;
        let area = |i: usize| records[i].size as u128 * span(i) as u128;
        match self.rng.below(4) {
            0 => self
                .band
                .sort_by_key(|&i| (Reverse(records[i].size), Reverse(span(i)), i)),
            1 => self.band.sort_by_key(|&i| (Reverse(area(i)), i)),
            2 => self
                .band
                .sort_by_key(|&i| (Reverse(span(i)), Reverse(records[i].size), i)),
            _ => self.band.sort_by_key(|&i| (offsets[i], i)),
        }
        if self.rng.below(2) == 0 && self.band.len() > 1 {
            for _ in 0..1 + self.band.len() / 8 {
                let k = self.rng.below(self.band.len() as u64 - 1) as usize;
                self.band.swap(k, k + 1);
            }
        }
    }

    /// [`gap`](Self::gap) for a tensor with few neighbours next to the
    /// fixed list: its neighbours that stay or have moved, sorted.
    fn gap_by_neighbours(&mut self, i: usize, fit: Fit) -> u64 {
        self.busy.clear();
        for &j in self.adj.of(i) {
            let j = j as usize;
            if !self.in_band[j] || self.done[j] {
                self.busy
                    .push((self.offsets[j], self.offsets[j] + self.records[j].size));
            }
        }
        self.busy.sort_unstable();
        gap_offset(
            self.busy.iter().copied(),
            self.records[i].size,
            self.align,
            fit,
        )
    }

    /// The offset for `r` among the fixed and the already moved tensors
    /// alive with it: the smallest (best fit) or lowest (first fit) gap
    /// that holds it, else on top of them all.
    fn gap(&self, r: &UsageRecord, fit: Fit) -> u64 {
        let live = |s: &&Slot| s.2 <= r.last && s.3 >= r.first;
        let mut a = self.fixed.iter().filter(live).peekable();
        let mut b = self.moved.iter().filter(live).peekable();
        // The two lists merged by offset.
        let merged = std::iter::from_fn(|| {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) if x.0 <= y.0 => a.next(),
                (Some(_), Some(_)) | (None, Some(_)) => b.next(),
                (Some(_), None) => a.next(),
                (None, None) => None,
            };
            next.map(|s| (s.0, s.1))
        });
        gap_offset(merged, r.size, self.align, fit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::synthetic::perfect_packing;
    use crate::plan::{lower_bound, offsets_greedy_by_size, validate_offsets};

    /// Two tensors alive together, one on the other, and after them one
    /// twice as tall put on top instead of on the floor (height 12, optimum
    /// 8).
    fn tensor_over_a_gap() -> (Vec<UsageRecord>, OffsetsAssignment) {
        let records = vec![
            UsageRecord::new(0, 4, 0, 1),
            UsageRecord::new(1, 4, 0, 1),
            UsageRecord::new(2, 8, 2, 3),
        ];
        let bad = OffsetsAssignment::from_offsets(&records, vec![0, 8, 0]);
        (records, bad)
    }

    /// Two tensors alive together sit one on another where the one after
    /// them, twice as tall, would fit on the floor: a plan with a needless
    /// gap under the top tensor (height 12, optimum 8). Its band (the top
    /// tensor, or more) goes back into the gap.
    #[test]
    fn a_tensor_over_a_gap_comes_down() {
        let (records, bad) = tensor_over_a_gap();
        validate_offsets(&records, None, &bad, 1).unwrap();
        assert_eq!(bad.total_size, 12);
        let mut ruin = Ruin::new(&records, 1, &bad, 7);
        ruin.run(50, None, lower_bound(&records));
        let plan = ruin.plan();
        validate_offsets(&records, None, &plan, 1).unwrap();
        assert_eq!(plan.total_size, 8);
    }

    /// A frozen tensor stays put: with the top tensor frozen, nothing can
    /// lower the arena, and the steps move only the others.
    #[test]
    fn frozen_tensors_stay_put() {
        let (records, bad) = tensor_over_a_gap();
        let mut ruin = Ruin::new(&records, 1, &bad, 7);
        ruin.freeze(1);
        ruin.run(50, None, lower_bound(&records));
        let plan = ruin.plan();
        validate_offsets(&records, None, &plan, 1).unwrap();
        assert_eq!(plan.offsets[1], 8);
        assert_eq!(plan.total_size, 12);
    }

    /// From greedy by size's plan of cut rectangles (which misses the
    /// bound), the steps lower the arena, every plan on the way valid,
    /// with and without alignment.
    #[test]
    fn steps_keep_plans_valid_and_lower_greedy_plans() {
        for (seed, align) in [(1, 1), (2, 1), (3, 4096), (4, 4096)] {
            let records = perfect_packing(300, seed, 1 << 20);
            let greedy = offsets_greedy_by_size(&records, None, align);
            let bound = lower_bound(&records);
            assert!(
                greedy.total_size > bound,
                "seed {seed}: greedy at the bound"
            );
            let mut ruin = Ruin::new(&records, align, &greedy, seed);
            let mut last = greedy.total_size;
            for _ in 0..20 {
                ruin.run(25, None, bound);
                let plan = ruin.plan();
                validate_offsets(&records, None, &plan, align).unwrap();
                assert!(plan.total_size <= last, "seed {seed}: got worse");
                last = plan.total_size;
            }
            assert!(
                last < greedy.total_size,
                "seed {seed}: no better than greedy"
            );
        }
    }
}
