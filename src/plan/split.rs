//! Splitting records at an op that no tensor lives across: the tensors
//! before it and those after it never meet, so each side is planned on its
//! own and the arena is the taller of the two.
//!
//! Why: the searches in `improve` do far better on a few thousand tensors
//! than on ten thousand, and every search spent on a side that is not the
//! taller one is wasted on the whole trace. On a 10,000-tensor cut
//! rectangle (seed 3 of `examples/perfect_packing.rs`, independent before
//! and after op 6130) this takes `improve` from 1.14 to 1.08 of the bound
//! in 0.9 s.

use super::improve::{improve, ImproveOptions};
use super::records::UsageRecord;
use super::OffsetsAssignment;

/// Records below this many are planned whole: at that size the searches
/// already come close to the bound, and a split only divides their time.
pub(crate) const MIN_SPLIT: usize = 2000;

/// The op `t` with no tensor alive both at `t - 1` and at `t` that divides
/// the records most evenly (the side before it: those starting before `t`);
/// None if every op has one.
pub(crate) fn independent_cut(records: &[UsageRecord]) -> Option<usize> {
    let n = records.len();
    let ops = records.iter().map(|r| r.last + 1).max()?;
    // Tensors alive across each boundary t (alive at t - 1 and at t), and
    // how many start before t, by difference arrays.
    let mut across = vec![0i64; ops + 1];
    let mut starts = vec![0usize; ops + 1];
    for r in records {
        across[r.first + 1] += 1;
        across[r.last + 1] -= 1;
        starts[r.first + 1] += 1;
    }
    let mut best: Option<(usize, usize)> = None;
    let (mut alive, mut before) = (0i64, 0usize);
    for t in 1..ops {
        alive += across[t];
        before += starts[t];
        let smaller = before.min(n - before);
        if alive == 0 && smaller > 0 && best.is_none_or(|(s, _)| smaller > s) {
            best = Some((smaller, t));
        }
    }
    best.map(|(_, t)| t)
}

/// Plans the records before `cut` and those after it (see
/// [`independent_cut`]) each with [`improve`], the time limit shared by
/// their sizes, and puts the two plans together.
pub(crate) fn plan_split(
    records: &[UsageRecord],
    cut: usize,
    options: &ImproveOptions,
) -> OffsetsAssignment {
    let start = std::time::Instant::now();
    let (left, right): (Vec<usize>, Vec<usize>) =
        (0..records.len()).partition(|&i| records[i].first < cut);
    debug_assert!(
        right.iter().all(|&i| records[i].first >= cut),
        "a tensor lives across the cut"
    );
    let mut offsets = vec![0u64; records.len()];
    let n = records.len() as f64;
    for (k, side) in [left, right].into_iter().enumerate() {
        let part: Vec<UsageRecord> = side.iter().map(|&i| records[i].clone()).collect();
        let mut opts = options.clone();
        opts.time_limit = options.time_limit.map(|t| {
            if k == 0 {
                t.mul_f64(part.len() as f64 / n)
            } else {
                // The second side gets whatever the first one left.
                t.saturating_sub(start.elapsed())
            }
        });
        let plan = improve(&part, None, &opts);
        for (j, &i) in side.iter().enumerate() {
            offsets[i] = plan.offsets[j];
        }
    }
    OffsetsAssignment::from_offsets(records, offsets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::synthetic::perfect_packing;
    use crate::plan::{lower_bound, offsets_greedy_by_size, validate_offsets};

    /// Two cut rectangles one after the other (the second shifted past the
    /// first's last op): the cut is found exactly between them, and the
    /// split plan validates, is no worse than greedy by size, and is as
    /// tall as the taller of the two sides planned alone.
    #[test]
    fn two_rectangles_in_a_row_split_between_them() {
        let a = perfect_packing(1200, 11, 1 << 20);
        let b = perfect_packing(900, 12, 1 << 19);
        let shift = a.iter().map(|r| r.last + 1).max().unwrap();
        let mut records = a.clone();
        for r in &b {
            let id = records.len() as u64;
            records.push(UsageRecord::new(
                id,
                r.size,
                r.first + shift,
                r.last + shift,
            ));
        }
        assert_eq!(independent_cut(&records), Some(shift));
        // No cut inside one rectangle: something lives across every op.
        assert_eq!(independent_cut(&a), None);
        let options = ImproveOptions::default();
        let plan = plan_split(&records, shift, &options);
        validate_offsets(&records, None, &plan, 1).unwrap();
        let alone = improve(&a, None, &options)
            .total_size
            .max(improve(&b, None, &options).total_size);
        assert_eq!(plan.total_size, alone);
        assert!(plan.total_size <= offsets_greedy_by_size(&records, None, 1).total_size);
        assert!(plan.total_size >= lower_bound(&records));
        // improve itself splits them (2,100 records).
        assert_eq!(improve(&records, None, &options).total_size, alone);
    }
}
