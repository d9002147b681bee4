//! Splitting records at an op that no tensor lives across: the tensors
//! before it and those after it never meet, so each side is planned on its
//! own and the arena is the taller of the two.
//!
//! Failing such an op, at an op that at most a few tensors live across
//! (a *sparse* cut), the larger side is planned first, with the tensors
//! across the cut cut short there, and the other side is then fitted
//! around those tensors where that plan put them.
//!
//! Why: the searches in `improve` do far better on a few thousand tensors
//! than on ten thousand, and every search spent on a side that is not the
//! taller one is wasted on the whole trace. On a 10,000-tensor cut
//! rectangle (seed 3 of `examples/perfect_packing.rs`, independent before
//! and after op 6130) this takes `improve` from 1.14 to 1.08 of the bound
//! in 0.9 s.

use std::time::Instant;

use super::improve::{improve, improve_with, seed_orders, stop_at, ImproveOptions};
use super::lower_bound::lower_bound;
use super::offsets::{Fit, Placer};
use super::records::UsageRecord;
use super::ruin::Ruin;
use super::squeeze::squeezed;
use super::OffsetsAssignment;

/// Records below this many are planned whole: at that size the searches
/// already come close to the bound, and a split only divides their time.
pub(crate) const MIN_SPLIT: usize = 2000;

/// The most of the time limit the larger side of a sparse cut gets (less
/// when it holds a smaller share of the records); the other side is
/// fitted around it until `AROUND_UNTIL` of the time, and the whole is
/// squeezed in the rest. Seed 5 of the 10,000-tensor perfect packings (cut
/// at op 992 of its part before op 2327): the other side, fitted around two
/// tensors it did not place, needs its ruin steps (1.20 to 1.33 of the
/// bound on that side with a twelfth of the time, 1.19 with a fifth). In
/// 0.9 s, four runs or more each: 0.7 and 0.85 gave 1.17-1.20 on the
/// whole; the larger side at 0.5 or 0.6 (the other side until 0.7 or
/// 0.75) gave 1.19-1.26, its searches short of time; the other side until
/// 0.72 or 0.78 gave 1.19-1.26, until 0.9 1.17-1.19.
const FIRST_SIDE: f64 = 0.7;

/// See `FIRST_SIDE`.
const AROUND_UNTIL: f64 = 0.85;

/// At most this many tensors may live across a sparse cut.
const MAX_CROSSING: usize = 8;

/// What lives across the boundary before op `t` (alive at `t - 1` and at
/// `t`), and how many tensors start before `t`.
struct Boundary {
    t: usize,
    alive: usize,
    bytes: u128,
    before: usize,
}

/// Every boundary of the records' ops, `t` from 1 to the last op, by
/// difference arrays: one sweep that both cut finders read.
fn boundaries(records: &[UsageRecord]) -> Vec<Boundary> {
    let Some(ops) = records.iter().map(|r| r.last + 1).max() else {
        return Vec::new();
    };
    let mut count = vec![0i64; ops + 1];
    let mut bytes = vec![0i128; ops + 1];
    let mut starts = vec![0usize; ops + 1];
    for r in records {
        count[r.first + 1] += 1;
        count[r.last + 1] -= 1;
        bytes[r.first + 1] += r.size as i128;
        bytes[r.last + 1] -= r.size as i128;
        starts[r.first + 1] += 1;
    }
    let (mut c, mut b, mut before) = (0i64, 0i128, 0usize);
    (1..ops)
        .map(|t| {
            c += count[t];
            b += bytes[t];
            before += starts[t];
            Boundary {
                t,
                alive: c as usize,
                bytes: b as u128,
                before,
            }
        })
        .collect()
}

/// The op `t` (the sides: tensors starting before `t`, tensors ending at or
/// after it) with the fewest bytes alive across it, at most
/// `MAX_CROSSING` tensors of at most half the lower bound in all, and at
/// least a twentieth of the records on either side; None if there is none.
pub(crate) fn sparse_cut(records: &[UsageRecord]) -> Option<usize> {
    let n = records.len();
    // Crossing tensors that fill more than half the memory at the cut,
    // placed for one side, leave the other side too little room to fit
    // in: on the 10,000-tensor perfect packings seed 8, a cut crossed by 8
    // tensors of 608 KiB (of 1,024) put that side at 1.21-1.28 of the
    // bound, against 1.09-1.12 for the whole without the cut.
    let cap = lower_bound(records) as u128 / 2;
    let mut best: Option<(u128, usize)> = None;
    for x in boundaries(records) {
        let after = n - x.before + x.alive;
        if x.alive <= MAX_CROSSING
            && x.bytes <= cap
            && 20 * x.before >= n
            && 20 * after >= n
            && best.is_none_or(|(bb, _)| x.bytes < bb)
        {
            best = Some((x.bytes, x.t));
        }
    }
    best.map(|(_, t)| t)
}

/// Plans `records` split at a sparse `cut` (see [`sparse_cut`]): the larger
/// side with [`improve`] (the tensors across the cut cut short there), then
/// the other side around those tensors where that plan put them. The
/// larger side gets its share of the time by size but at most
/// `FIRST_SIDE`, and its squeeze leaves the crossing tensors where its
/// searches put them (a squeeze that moved them left the other side 1.3-1.4
/// of the bound). Last, the joined plan is squeezed as a whole, the
/// crossing tensors free to move.
pub(crate) fn plan_sparse(
    records: &[UsageRecord],
    cut: usize,
    options: &ImproveOptions,
) -> OffsetsAssignment {
    let start = Instant::now();
    let side = |left: bool| -> (Vec<UsageRecord>, Vec<usize>) {
        records
            .iter()
            .enumerate()
            .filter(|(_, r)| if left { r.first < cut } else { r.last >= cut })
            .map(|(i, r)| {
                let (f, l) = if left {
                    (r.first, r.last.min(cut - 1))
                } else {
                    (r.first.max(cut), r.last)
                };
                (UsageRecord::new(r.id, r.size, f, l), i)
            })
            .unzip()
    };
    let (left, left_ix) = side(true);
    let (right, right_ix) = side(false);
    let (first, first_ix, second, second_ix) = if left.len() >= right.len() {
        (left, left_ix, right, right_ix)
    } else {
        (right, right_ix, left, left_ix)
    };
    let mut opts = options.clone();
    opts.time_limit = options.time_limit.map(|t| {
        t.mul_f64((first.len() as f64 / (first.len() + second.len()) as f64).min(FIRST_SIDE))
    });
    // The tensors across the cut stay where the searches put them: the
    // other side is fitted around them next.
    let crossing: Vec<usize> = first_ix
        .iter()
        .enumerate()
        .filter(|&(_, &i)| records[i].first < cut && records[i].last >= cut)
        .map(|(k, _)| k)
        .collect();
    // The caller compares the whole plan with greedy by size.
    let plan1 = improve_with(&first, None, &opts, false, &crossing);
    let mut offsets = vec![0u64; records.len()];
    let mut in_first = vec![false; records.len()];
    for (k, &i) in first_ix.iter().enumerate() {
        offsets[i] = plan1.offsets[k];
        in_first[i] = true;
    }
    let fixed: Vec<(usize, u64)> = second_ix
        .iter()
        .enumerate()
        .filter(|(_, &i)| in_first[i])
        .map(|(k, &i)| (k, offsets[i]))
        .collect();
    let left_time = options.time_limit.map(|t| start + t.mul_f64(AROUND_UNTIL));
    let plan2 = around(&second, &fixed, options, left_time);
    for (k, &i) in second_ix.iter().enumerate() {
        offsets[i] = plan2.offsets[k];
    }
    let joined = OffsetsAssignment::from_offsets(records, offsets);
    // Last, the whole, the tensors across the cut free to move.
    let deadline = options.time_limit.map(|t| start + t);
    squeezed(
        records,
        options,
        joined,
        &[],
        None,
        deadline,
        stop_at(records, options),
    )
}

/// A plan of `records` with the `fixed` ones at their offsets: the fixed
/// orders with best and first fit around them, then ruin-and-recreate
/// steps that leave them be, until `deadline`.
fn around(
    records: &[UsageRecord],
    fixed: &[(usize, u64)],
    options: &ImproveOptions,
    deadline: Option<Instant>,
) -> OffsetsAssignment {
    let mut is_fixed = vec![false; records.len()];
    fixed.iter().for_each(|&(i, _)| is_fixed[i] = true);
    let mut placer = Placer::new(records, None, options.alignment);
    let mut best = OffsetsAssignment::default();
    for (k, order) in seed_orders(records).enumerate() {
        let order: Vec<usize> = order.into_iter().filter(|&i| !is_fixed[i]).collect();
        for fit in [Fit::Best, Fit::First] {
            let cand = placer.place_around(fixed, &order, fit);
            if k == 0 && fit == Fit::Best || cand.total_size < best.total_size {
                best = cand;
            }
        }
    }
    let mut ruin = Ruin::new(records, options.alignment, &best, options.seed);
    fixed.iter().for_each(|&(i, _)| ruin.freeze(i));
    ruin.run(options.ruin_steps, deadline, stop_at(records, options));
    let out = ruin.plan();
    if out.total_size < best.total_size {
        out
    } else {
        best
    }
}

/// The op `t` with no tensor alive both at `t - 1` and at `t` that divides
/// the records most evenly (the side before it: those starting before `t`);
/// None if every op has one.
pub(crate) fn independent_cut(records: &[UsageRecord]) -> Option<usize> {
    let n = records.len();
    let mut best: Option<(usize, usize)> = None;
    for x in boundaries(records) {
        let smaller = x.before.min(n - x.before);
        if x.alive == 0 && smaller > 0 && best.is_none_or(|(s, _)| smaller > s) {
            best = Some((smaller, x.t));
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

    /// `a`, then `b` shifted to start right after `a`'s last op; and that
    /// first op of `b`.
    fn in_a_row(a: &[UsageRecord], b: &[UsageRecord]) -> (Vec<UsageRecord>, usize) {
        let shift = a.iter().map(|r| r.last + 1).max().unwrap();
        let mut records = a.to_vec();
        for r in b {
            let id = records.len() as u64;
            records.push(UsageRecord::new(
                id,
                r.size,
                r.first + shift,
                r.last + shift,
            ));
        }
        (records, shift)
    }

    /// Two cut rectangles one after the other (the second shifted past the
    /// first's last op): the cut is found exactly between them, and the
    /// split plan validates, is no worse than greedy by size, and is as
    /// tall as the taller of the two sides planned alone.
    #[test]
    fn two_rectangles_in_a_row_split_between_them() {
        let a = perfect_packing(1200, 11, 1 << 20);
        let b = perfect_packing(900, 12, 1 << 19);
        let (records, shift) = in_a_row(&a, &b);
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

    /// The same with one tensor living across the boundary: no op is free
    /// any more, the sparse cut is found at the boundary, and the plan of
    /// one side after the other validates (the crossing tensor at one
    /// offset on both sides), as does what improve makes of it, which is
    /// no worse than greedy by size.
    #[test]
    fn a_tensor_across_the_boundary_makes_a_sparse_cut() {
        let a = perfect_packing(1500, 20, 1 << 20);
        let b = perfect_packing(600, 25, 1 << 20);
        let (mut records, shift) = in_a_row(&a, &b);
        let id = records.len() as u64;
        records.push(UsageRecord::new(id, 16 << 10, shift - 3, shift + 3));
        assert_eq!(independent_cut(&records), None);
        assert_eq!(sparse_cut(&records), Some(shift));
        let options = ImproveOptions::default();
        let plan = plan_sparse(&records, shift, &options);
        validate_offsets(&records, None, &plan, 1).unwrap();
        let out = improve(&records, None, &options);
        validate_offsets(&records, None, &out, 1).unwrap();
        assert!(out.total_size <= offsets_greedy_by_size(&records, None, 1).total_size);
        assert!(out.total_size >= lower_bound(&records));
    }

    /// Crossing tensors that fill more than half the bound at the only
    /// sparse op rule the cut out; the same tensors at 64 KiB (a fifth of
    /// the bound) do not.
    #[test]
    fn heavy_crossing_tensors_rule_a_sparse_cut_out() {
        let build = |crossing: u64| {
            let a = perfect_packing(1500, 20, 1 << 20);
            let b = perfect_packing(600, 25, 1 << 20);
            let (mut records, shift) = in_a_row(&a, &b);
            for k in 0..4 {
                let id = records.len() as u64;
                records.push(UsageRecord::new(id, crossing, shift - 1 - k, shift + k));
            }
            (records, shift)
        };
        let (light, shift) = build(64 << 10);
        assert_eq!(sparse_cut(&light), Some(shift));
        // 4 x 300 KiB across the cut, above half of the bound (the 1 MiB
        // rectangle and those 1,200 KiB).
        let (heavy, _) = build(300 << 10);
        assert!(4 * (300u128 << 10) > lower_bound(&heavy) as u128 / 2);
        assert_eq!(sparse_cut(&heavy), None);
    }
}
