//! The placement step every offset strategy shares: put tensors one by one,
//! in a given order, into a gap among the already placed tensors they may not
//! share memory with.

use super::adjacency::Adjacency;
use super::conflicts::{time_only, Conflicts};
use super::records::UsageRecord;
use super::skyline::{self, Spans};
use super::OffsetsAssignment;

/// Which gap a tensor goes into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fit {
    /// The smallest gap that holds it (TFLite's greedy by size); on top of
    /// everything when none does.
    Best,
    /// The lowest gap that holds it.
    First,
}

/// Places tensors in `order` (every record index exactly once) with the given
/// gap choice; offsets are multiples of `alignment`.
pub fn place_in_order(
    records: &[UsageRecord],
    conflicts: Option<&Conflicts>,
    order: &[usize],
    alignment: u64,
    fit: Fit,
) -> OffsetsAssignment {
    Placer::new(records, conflicts, alignment).place(order, fit)
}

/// The offset for a tensor of `size` among `busy` (the ranges of the placed
/// tensors it may not share memory with, sorted by start): the smallest gap
/// that holds it (best fit) or the lowest (first fit), else on top of them
/// all. Gaps are scanned exactly as TFLite's greedy by size does: `prev` is
/// the aligned top of all busy ranges so far.
pub(crate) fn gap_offset(
    busy: impl Iterator<Item = (u64, u64)>,
    size: u64,
    alignment: u64,
    fit: Fit,
) -> u64 {
    let mut prev = 0u64;
    let mut best: Option<(u64, u64)> = None; // (gap, offset)
    for (start, end) in busy {
        if start >= prev && start - prev >= size {
            if fit == Fit::First {
                return prev;
            }
            if best.is_none_or(|(g, _)| start - prev < g) {
                best = Some((start - prev, prev));
            }
        }
        prev = prev.max(end.div_ceil(alignment) * alignment);
    }
    best.map_or(prev, |(_, o)| o)
}

/// Placement with the neighbour lists computed once, for strategies that try
/// many orders.
pub(crate) struct Placer<'a> {
    records: &'a [UsageRecord],
    adj: Adjacency,
    alignment: u64,
    /// Whether nothing but time overlap keeps tensors apart: the skyline
    /// then reads a tree over the ops instead of the neighbour lists.
    time_only: bool,
    /// The lifetimes as tree positions, made at the first skyline (most
    /// placers never run one).
    spans: Option<Spans>,
    // Scratch reused across placements.
    placed: Vec<bool>,
    offsets: Vec<u64>,
    busy: Vec<(u64, u64)>,
}

impl<'a> Placer<'a> {
    pub(crate) fn new(
        records: &'a [UsageRecord],
        conflicts: Option<&Conflicts>,
        alignment: u64,
    ) -> Self {
        let time_only = time_only(conflicts);
        Self {
            records,
            adj: Adjacency::new(records, conflicts),
            alignment: alignment.max(1),
            time_only,
            spans: None,
            placed: vec![false; records.len()],
            offsets: vec![0; records.len()],
            busy: Vec::new(),
        }
    }

    fn align(&self, v: u64) -> u64 {
        v.div_ceil(self.alignment) * self.alignment
    }

    /// Places every tensor of `order`; returns offsets and total.
    pub(crate) fn place(&mut self, order: &[usize], fit: Fit) -> OffsetsAssignment {
        self.place_around(&[], order, fit)
    }

    /// Puts the `fixed` tensors at their given offsets, then places every
    /// tensor of `order` around them.
    pub(crate) fn place_around(
        &mut self,
        fixed: &[(usize, u64)],
        order: &[usize],
        fit: Fit,
    ) -> OffsetsAssignment {
        self.placed.iter_mut().for_each(|p| *p = false);
        let mut total = 0u64;
        for &(i, o) in fixed {
            self.placed[i] = true;
            self.offsets[i] = o;
            total = total.max(o + self.records[i].size);
        }
        for &i in order {
            let size = self.records[i].size;
            self.busy.clear();
            for &j in self.adj.of(i) {
                let j = j as usize;
                if self.placed[j] {
                    self.busy
                        .push((self.offsets[j], self.offsets[j] + self.records[j].size));
                }
            }
            self.busy.sort_unstable();
            let offset = gap_offset(self.busy.iter().copied(), size, self.alignment, fit);
            self.offsets[i] = offset;
            self.placed[i] = true;
            total = total.max(offset + size);
        }
        OffsetsAssignment {
            offsets: self.offsets.clone(),
            total_size: total,
        }
    }
    /// Skyline placement: repeatedly puts the unplaced tensor with the
    /// lowest *minimum offset* (the highest aligned top among its placed
    /// neighbours), ties to the lowest `rank`, at that offset. Offsets never
    /// decrease along the way, so the arena fills from the bottom up; this is
    /// the exact search's first dive without its pruning. Returns the plan
    /// and the order in which tensors were placed.
    pub(crate) fn skyline(&mut self, rank: &[usize]) -> (OffsetsAssignment, Vec<usize>) {
        if !self.time_only {
            return self.skyline_walk(rank);
        }
        let records = self.records;
        let spans = self.spans.get_or_insert_with(|| Spans::new(records));
        skyline::skyline(records, spans, self.alignment, rank)
    }

    /// [`Placer::skyline`] by walking the neighbour lists: what conflict
    /// pairs need, and what the tree version is tested against.
    pub(crate) fn skyline_walk(&mut self, rank: &[usize]) -> (OffsetsAssignment, Vec<usize>) {
        use std::cmp::Reverse;
        let n = self.records.len();
        self.placed.iter_mut().for_each(|p| *p = false);
        let mut min_offset = vec![0u64; n];
        let mut heap: std::collections::BinaryHeap<Reverse<(u64, usize, usize)>> =
            (0..n).map(|i| Reverse((0, rank[i], i))).collect();
        let mut sequence = Vec::with_capacity(n);
        let mut total = 0u64;
        while let Some(Reverse((off, _, i))) = heap.pop() {
            if self.placed[i] || off != min_offset[i] {
                continue;
            }
            self.placed[i] = true;
            sequence.push(i);
            let size = self.records[i].size;
            if size == 0 {
                // Empty tensors occupy nothing; offset 0 never clashes.
                self.offsets[i] = 0;
                continue;
            }
            self.offsets[i] = off;
            total = total.max(off + size);
            let top = self.align(off + size);
            for &j in self.adj.of(i) {
                let j = j as usize;
                if !self.placed[j] && min_offset[j] < top {
                    min_offset[j] = top;
                    heap.push(Reverse((top, rank[j], j)));
                }
            }
        }
        (
            OffsetsAssignment {
                offsets: self.offsets.clone(),
                total_size: total,
            },
            sequence,
        )
    }
}
