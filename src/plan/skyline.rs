//! The skyline placement without conflict pairs, where a tensor's lowest
//! possible offset is the highest top over the ops of its lifetime: one
//! range-maximum tree over the ops instead of a walk over every placed
//! neighbour.
//!
//! Why: `improve` spends much of its time on skylines under perturbed
//! rankings (see the `perturb` module), and the neighbour walk costs the
//! number of overlapping pairs per placement: about 7 ms for the 3,146
//! coalesced records of the hard piece of the 10,000-tensor perfect packing
//! seed 5. Here each tensor costs a few tree queries instead.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::records::UsageRecord;
use super::OffsetsAssignment;

/// Range "raise to at least v" and range maximum over `len` positions, a
/// bottom-up tree (leaves at `size..2 * size`). A node's `raised` applies
/// to its whole range and is never pushed down, so a query also reads the
/// `raised` of every ancestor of its two ends.
struct MaxTree {
    size: usize,
    max: Vec<u64>,
    raised: Vec<u64>,
}

impl MaxTree {
    fn new(len: usize) -> Self {
        let size = len.next_power_of_two().max(1);
        Self {
            size,
            max: vec![0; 2 * size],
            raised: vec![0; 2 * size],
        }
    }

    /// Raises every position in `lo..=hi` to at least `v`.
    fn raise(&mut self, lo: usize, hi: usize, v: u64) {
        let (mut l, mut r) = (lo + self.size, hi + self.size + 1);
        while l < r {
            if l & 1 == 1 {
                self.max[l] = self.max[l].max(v);
                self.raised[l] = self.raised[l].max(v);
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                self.max[r] = self.max[r].max(v);
                self.raised[r] = self.raised[r].max(v);
            }
            l >>= 1;
            r >>= 1;
        }
        // Every node whose range holds part of lo..=hi lies above one of
        // the two ends.
        for leaf in [lo + self.size, hi + self.size] {
            let mut p = leaf >> 1;
            while p > 0 {
                self.max[p] = self.raised[p].max(self.max[2 * p]).max(self.max[2 * p + 1]);
                p >>= 1;
            }
        }
    }

    /// The largest value in `lo..=hi`.
    fn max(&self, lo: usize, hi: usize) -> u64 {
        let mut best = 0;
        let (mut l, mut r) = (lo + self.size, hi + self.size + 1);
        while l < r {
            if l & 1 == 1 {
                best = best.max(self.max[l]);
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                best = best.max(self.max[r]);
            }
            l >>= 1;
            r >>= 1;
        }
        for leaf in [lo + self.size, hi + self.size] {
            let mut p = leaf >> 1;
            while p > 0 {
                best = best.max(self.raised[p]);
                p >>= 1;
            }
        }
        best
    }
}

/// Each record's lifetime as positions among the distinct first ops: two
/// lifetimes overlap exactly when they share such a position (the later
/// first op lies in both), so the tree needs no more positions than that.
/// The exact search's sections are the same positions.
pub(crate) struct Spans {
    /// First and last position of each record, inclusive.
    pub(crate) spans: Vec<(usize, usize)>,
    /// How many distinct first ops there are.
    pub(crate) positions: usize,
}

impl Spans {
    pub(crate) fn new(records: &[UsageRecord]) -> Self {
        let mut firsts: Vec<usize> = records.iter().map(|r| r.first).collect();
        firsts.sort_unstable();
        firsts.dedup();
        let spans = records
            .iter()
            .map(|r| {
                let lo = firsts.partition_point(|&f| f < r.first);
                let hi = firsts.partition_point(|&f| f <= r.last) - 1;
                (lo, hi)
            })
            .collect();
        Self {
            spans,
            positions: firsts.len(),
        }
    }
}

/// Skyline placement (see `Placer::skyline`, which gives the same plan and
/// sequence): repeatedly the unplaced tensor with the lowest minimum offset,
/// ties to the lowest `rank`, at that offset. The heap holds keys that may
/// be stale (too low, since minimum offsets only rise); a popped tensor
/// whose offset has risen goes back in with its new key.
pub(crate) fn skyline(
    records: &[UsageRecord],
    spans: &Spans,
    alignment: u64,
    rank: &[usize],
) -> (OffsetsAssignment, Vec<usize>) {
    let n = records.len();
    let mut offsets = vec![0u64; n];
    let mut sequence = Vec::with_capacity(n);
    if n == 0 {
        return (OffsetsAssignment::default(), sequence);
    }
    let mut tree = MaxTree::new(spans.positions);
    // A rank names its tensor (ranks are a permutation), so an entry is
    // the key in the high half and the rank in the low half of one u128:
    // one comparison orders both.
    let mut by_rank = vec![usize::MAX; n];
    for (i, &r) in rank.iter().enumerate() {
        by_rank[r] = i;
    }
    debug_assert!(by_rank.iter().all(|&i| i < n), "rank is not a permutation");
    let entry = |key: u64, r: usize| Reverse(((key as u128) << 64) | r as u128);
    let mut heap: BinaryHeap<Reverse<u128>> = (0..n).map(|i| entry(0, rank[i])).collect();
    let mut total = 0u64;
    while let Some(Reverse(e)) = heap.pop() {
        let (key, r) = ((e >> 64) as u64, e as u64 as usize);
        let i = by_rank[r];
        let (lo, hi) = spans.spans[i];
        let off = tree.max(lo, hi);
        if off > key {
            heap.push(entry(off, r));
            continue;
        }
        sequence.push(i);
        let size = records[i].size;
        if size == 0 {
            // Empty tensors occupy nothing; offset 0 never clashes.
            continue;
        }
        offsets[i] = off;
        total = total.max(off + size);
        tree.raise(lo, hi, (off + size).div_ceil(alignment) * alignment);
    }
    (
        OffsetsAssignment {
            offsets,
            total_size: total,
        },
        sequence,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::offsets::Placer;
    use crate::plan::synthetic::perfect_packing;
    use crate::plan::validate_offsets;
    use crate::util::rng::SplitMix64;

    /// The tree gives the neighbour walk's plan and sequence exactly, with
    /// and without alignment, on random records (empty ones included) and
    /// on a cut rectangle, under random rankings.
    #[test]
    fn matches_the_neighbour_walk() {
        let mut rng = SplitMix64::new(11);
        for case in 0..60 {
            let records: Vec<UsageRecord> = if case % 3 == 0 {
                perfect_packing(300, case, 1 << 20)
            } else {
                (0..150)
                    .map(|i| {
                        let first = rng.below(80) as usize;
                        let last = first + rng.below(20) as usize;
                        UsageRecord::new(i, rng.below(5000), first, last)
                    })
                    .collect()
            };
            let n = records.len();
            let mut rank: Vec<usize> = (0..n).collect();
            for i in (1..n).rev() {
                rank.swap(i, rng.below(i as u64 + 1) as usize);
            }
            for alignment in [1, 64] {
                let spans = Spans::new(&records);
                let (fast, fast_seq) = skyline(&records, &spans, alignment, &rank);
                let (walk, walk_seq) = Placer::new(&records, None, alignment).skyline_walk(&rank);
                assert_eq!(fast.offsets, walk.offsets, "case {case}");
                assert_eq!(fast.total_size, walk.total_size, "case {case}");
                assert_eq!(fast_seq, walk_seq, "case {case}");
                validate_offsets(&records, None, &fast, alignment).unwrap();
            }
        }
    }
}
