//! Perturbed skylines: skyline placements (see `Placer::skyline`) whose
//! tie-breaking ranks are the tensors' areas, each multiplied by a random
//! factor, for `improve` to fall back on when its local search stalls.
//!
//! Why: on some large perfect packings the order-based local search finds
//! nothing in its whole share of the time (the 7,133 tensors before op 992
//! of `examples/perfect_packing.rs` 10,000 tensors seed 5: coalesced, its
//! best plan is the skyline ranked by area, and no local-search step
//! improves it), while a few dozen skylines under slightly different
//! rankings come out a few hundredths of the bound lower (that piece
//! alone in 0.9 s, with most of each search's time on them: 1.231 to
//! 1.200-1.215).

use std::time::{Duration, Instant};

use super::offsets::Placer;
use super::records::UsageRecord;
use super::OffsetsAssignment;
use crate::util::rng::SplitMix64;

/// How far a tensor's area may be scaled either way, as a natural log:
/// e^0.3 is about 1.35. Smaller and the skylines mostly repeat the area
/// ranking's; larger and they lose its structure (1.0: worse on seed 5).
const SPREAD: f64 = 0.3;

/// Runs up to `tries` perturbed skylines, stopping before one would end
/// past `deadline`, and returns the lowest plan found when it is below
/// `total`; None otherwise.
pub(crate) fn perturbed_skylines(
    records: &[UsageRecord],
    placer: &mut Placer,
    rng: &mut SplitMix64,
    tries: usize,
    deadline: Option<Instant>,
    total: u64,
) -> Option<OffsetsAssignment> {
    let n = records.len();
    let area = |i: usize| records[i].size as f64 * (records[i].last - records[i].first + 1) as f64;
    let mut best: Option<OffsetsAssignment> = None;
    let mut total = total;
    let mut longest = Duration::ZERO;
    let mut order: Vec<usize> = (0..n).collect();
    let mut rank = vec![0usize; n];
    for _ in 0..tries {
        let began = Instant::now();
        if deadline.is_some_and(|d| began + longest >= d) {
            break;
        }
        let key: Vec<f64> = (0..n)
            .map(|i| area(i) * (SPREAD * (2.0 * rng.next_f64() - 1.0)).exp())
            .collect();
        // Largest perturbed area first, as in the area ranking.
        order.sort_by(|&a, &b| key[b].total_cmp(&key[a]).then(a.cmp(&b)));
        for (r, &i) in order.iter().enumerate() {
            rank[i] = r;
        }
        let (plan, _) = placer.skyline(&rank);
        longest = longest.max(began.elapsed());
        if plan.total_size < total {
            total = plan.total_size;
            best = Some(plan);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::lower_bound;
    use crate::plan::synthetic::perfect_packing;
    use crate::plan::validate_offsets;

    /// On a cut rectangle, some of 40 perturbed skylines beat the plain
    /// area-ranked skyline, and what is returned validates and is below
    /// it; asked to beat the lower bound, none does.
    #[test]
    fn perturbed_skylines_beat_the_area_ranking_on_a_cut_rectangle() {
        let records = perfect_packing(400, 3, 1 << 20);
        let n = records.len();
        let mut placer = Placer::new(&records, None, 1);
        let mut by_area: Vec<usize> = (0..n).collect();
        let area = |i: usize| records[i].size * (records[i].last - records[i].first + 1) as u64;
        by_area.sort_by_key(|&i| (std::cmp::Reverse(area(i)), i));
        let mut rank = vec![0; n];
        for (r, &i) in by_area.iter().enumerate() {
            rank[i] = r;
        }
        let (plain, _) = placer.skyline(&rank);
        let bound = lower_bound(&records);
        assert!(plain.total_size > bound, "the instance is too easy");
        let mut rng = SplitMix64::new(7);
        let plan = perturbed_skylines(&records, &mut placer, &mut rng, 40, None, plain.total_size)
            .expect("no perturbed skyline beat the area ranking");
        validate_offsets(&records, None, &plan, 1).unwrap();
        assert!(plan.total_size < plain.total_size);
        let mut rng = SplitMix64::new(7);
        assert!(perturbed_skylines(&records, &mut placer, &mut rng, 5, None, bound).is_none());
    }
}
