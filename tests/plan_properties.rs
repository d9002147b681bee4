//! Property tests on random records (fixed seeds): every plan validates,
//! none beats the lower bound, best-of is never worse than what it picks
//! from, and the exact solver's claims agree with brute force.

use depengine::plan::*;
use depengine::util::rng::SplitMix64;

/// Random records in the shapes real traces have: a few distinct sizes
/// (often repeated), short and long lifetimes, the odd empty tensor.
fn random_records(rng: &mut SplitMix64, max_n: u64, max_ops: u64) -> Vec<UsageRecord> {
    let n = rng.range_inclusive(1, max_n) as usize;
    let ops = rng.range_inclusive(1, max_ops) as usize;
    let palette: Vec<u64> = (0..rng.range_inclusive(1, 6))
        .map(|_| 8 * rng.range_inclusive(1, 64))
        .collect();
    (0..n)
        .map(|i| {
            let first = rng.below(ops as u64) as usize;
            let long = rng.below(5) == 0;
            let len = if long {
                rng.below(ops as u64)
            } else {
                rng.below(4)
            } as usize;
            let last = (first + len).min(ops - 1);
            let size = match rng.below(10) {
                0 => 0,
                1..=6 => palette[rng.below(palette.len() as u64) as usize],
                _ => rng.range_inclusive(1, 1000),
            };
            UsageRecord::new(i as u64 * 3 + 1, size, first, last)
        })
        .collect()
}

fn random_conflicts(rng: &mut SplitMix64, n: usize) -> Conflicts {
    let pairs: Vec<(usize, usize)> = (0..rng.below(n as u64 + 1))
        .map(|_| (rng.below(n as u64) as usize, rng.below(n as u64) as usize))
        .collect();
    Conflicts::from_pairs(n, &pairs).unwrap()
}

fn quick() -> PlanOptions {
    PlanOptions::default()
}

#[test]
fn every_strategy_validates_and_respects_the_lower_bound() {
    let mut rng = SplitMix64::new(0x5EED_0001);
    for case in 0..150 {
        let recs = random_records(&mut rng, 30, 24);
        let lb = lower_bound(&recs);
        let mut totals = std::collections::HashMap::new();
        for s in Strategy::ALL {
            let out = plan(&recs, s, &quick());
            out.plan
                .validate(&recs, None, 1)
                .unwrap_or_else(|e| panic!("case {case} {}: {e}\n{recs:?}", s.name()));
            let t = out.plan.total();
            assert!(
                t >= lb,
                "case {case} {}: {t} below the lower bound {lb}",
                s.name()
            );
            totals.insert(s, t);
        }
        for s in [
            Strategy::GreedyInOrder,
            Strategy::GreedyByBreadth,
            Strategy::GreedyBySize,
            Strategy::GreedyBySizeDist,
            Strategy::MinCostFlow,
        ] {
            assert!(
                totals[&Strategy::BestObjects] <= totals[&s],
                "case {case}: best_objects above {}",
                s.name()
            );
        }
        for s in [
            Strategy::OffsetsGreedyBySize,
            Strategy::OffsetsGreedyInOrder,
            Strategy::OffsetsGreedyByBreadth,
        ] {
            assert!(
                totals[&Strategy::OffsetsBest] <= totals[&s],
                "case {case}: offsets_best above {}",
                s.name()
            );
        }
        assert!(
            totals[&Strategy::Improve] <= totals[&Strategy::OffsetsGreedyBySize],
            "case {case}"
        );
        assert!(
            totals[&Strategy::Exact] <= totals[&Strategy::Improve],
            "case {case}"
        );
        // Equal sizes only ever share with equal sizes.
        let eq = equality(&recs);
        for (i, r) in recs.iter().enumerate() {
            assert_eq!(eq.object_sizes[eq.object_ids[i]], r.size, "case {case}");
        }
    }
}

#[test]
fn conflicts_and_alignment_are_honoured() {
    let mut rng = SplitMix64::new(0x5EED_0002);
    for case in 0..80 {
        let recs = random_records(&mut rng, 24, 16);
        let conflicts = random_conflicts(&mut rng, recs.len());
        let alignment = [1, 8, 64][rng.below(3) as usize];
        let options = PlanOptions {
            conflicts: Some(conflicts.clone()),
            alignment,
            ..PlanOptions::default()
        };
        for s in Strategy::ALL.into_iter().filter(|&s| s != Strategy::Exact) {
            let out = plan(&recs, s, &options);
            out.plan
                .validate(&recs, Some(&conflicts), alignment)
                .unwrap_or_else(|e| panic!("case {case} {} align {alignment}: {e}", s.name()));
        }
        // The exact search with a small node budget, so proofs that are
        // hard under conflicts end as "unknown" rather than take long.
        let out = exact(
            &recs,
            Some(&conflicts),
            &ExactOptions {
                alignment,
                node_limit: 20_000,
                ..ExactOptions::default()
            },
        );
        validate_offsets(&recs, Some(&conflicts), &out.plan, alignment)
            .unwrap_or_else(|e| panic!("case {case} exact align {alignment}: {e}"));
    }
}

/// The smallest arena over every placement order with first fit: an
/// independent upper bound on the optimum for tiny inputs.
fn brute_force(recs: &[UsageRecord]) -> u64 {
    fn permute(k: usize, order: &mut Vec<usize>, recs: &[UsageRecord], best: &mut u64) {
        if k == order.len() {
            let t = place_in_order(recs, None, order, 1, Fit::First).total_size;
            *best = (*best).min(t);
            return;
        }
        for i in k..order.len() {
            order.swap(k, i);
            permute(k + 1, order, recs, best);
            order.swap(k, i);
        }
    }
    let mut order: Vec<usize> = (0..recs.len()).collect();
    let mut best = u64::MAX;
    permute(0, &mut order, recs, &mut best);
    best
}

#[test]
fn exact_agrees_with_brute_force_on_tiny_inputs() {
    let mut rng = SplitMix64::new(0x5EED_0003);
    let mut proven = 0;
    for case in 0..60 {
        let recs = random_records(&mut rng, 7, 8);
        let options = ExactOptions {
            node_limit: 200_000,
            ..ExactOptions::default()
        };
        let out = exact(&recs, None, &options);
        validate_offsets(&recs, None, &out.plan, 1).unwrap();
        let bf = brute_force(&recs);
        assert!(
            out.plan.total_size <= bf,
            "case {case}: exact {} above brute force {bf}",
            out.plan.total_size
        );
        if out.fits == Fits::Yes {
            proven += 1;
            // Proven optimal: brute force cannot do better, and one byte
            // less does not fit.
            assert!(bf >= out.plan.total_size, "case {case}");
            if out.plan.total_size > 0 {
                let below = exact(
                    &recs,
                    None,
                    &ExactOptions {
                        capacity: Some(out.plan.total_size - 1),
                        ..options.clone()
                    },
                );
                assert_ne!(below.fits, Fits::Yes, "case {case}");
            }
        }
        // With the optimum as capacity the answer is yes, with a valid plan.
        let at = exact(
            &recs,
            None,
            &ExactOptions {
                capacity: Some(bf),
                ..options.clone()
            },
        );
        assert_eq!(at.fits, Fits::Yes, "case {case}");
        assert!(at.plan.total_size <= bf);
        validate_offsets(&recs, None, &at.plan, 1).unwrap();
    }
    assert!(
        proven >= 50,
        "only {proven} of 60 tiny cases proven optimal"
    );
}

/// Instances where the heuristics miss the lower bound, so the search
/// itself must run: it never ends above the heuristic, and what it proves
/// lies between the lower bound and its plan.
#[test]
fn exact_searches_past_the_heuristics() {
    let mut rng = SplitMix64::new(0x5EED_0004);
    let mut searched = 0;
    for case in 0..150 {
        // Small odd sizes over few ops fragment the arena, which the
        // heuristics handle worst.
        let n = rng.range_inclusive(20, 80) as usize;
        let recs: Vec<UsageRecord> = (0..n)
            .map(|i| {
                let first = rng.below(16) as usize;
                let last = (first + rng.below(6) as usize).min(15);
                UsageRecord::new(i as u64, rng.range_inclusive(1, 40), first, last)
            })
            .collect();
        let lb = lower_bound(&recs);
        // The fixed orders alone (what the exact mode tries before its
        // search); the full improving planner searches too.
        let fixed = improve(
            &recs,
            None,
            &ImproveOptions {
                iterations: 0,
                search: false,
                ruin_steps: 0,
                ..ImproveOptions::default()
            },
        )
        .total_size;
        if fixed == lb {
            continue;
        }
        let heuristic = improve(&recs, None, &ImproveOptions::default()).total_size;
        let out = exact(
            &recs,
            None,
            &ExactOptions {
                node_limit: 200_000,
                ..ExactOptions::default()
            },
        );
        validate_offsets(&recs, None, &out.plan, 1).unwrap();
        assert!(out.plan.total_size <= heuristic, "case {case}");
        assert!(
            out.proven_bound >= lb && out.proven_bound <= out.plan.total_size,
            "case {case}"
        );
        assert!(out.nodes > 0, "case {case}: the search did not run");
        searched += 1;
    }
    assert!(searched >= 2, "only {searched} instances needed the search");
}

/// Greedy by size with distance priority cut short at any point (here: by
/// a deadline already past, so every tensor goes through the finish, and
/// after a partial run) still assigns every tensor validly, never more
/// objects than tensors; with a deadline it meets in time it is the plain
/// strategy's plan.
#[test]
fn greedy_by_size_dist_cut_short_still_validates() {
    let mut rng = SplitMix64::new(0x5EED_0D15);
    let past = Some(std::time::Instant::now());
    for case in 0..150 {
        let recs = random_records(&mut rng, 40, 24);
        let full = greedy_by_size_dist(&recs);
        let cut = greedy_by_size_dist_until(&recs, past);
        validate_objects(&recs, None, &cut)
            .unwrap_or_else(|e| panic!("case {case}: {e}\n{recs:?}"));
        assert!(cut.object_sizes.len() <= recs.len(), "case {case}");
        assert!(cut.total() >= lower_bound(&recs), "case {case}");
        let later = std::time::Instant::now() + std::time::Duration::from_secs(3600);
        let timed = greedy_by_size_dist_until(&recs, Some(later));
        assert_eq!(timed.object_ids, full.object_ids, "case {case}");
        assert_eq!(timed.object_sizes, full.object_sizes, "case {case}");
    }
    // Tensors that never overlap share one object, the largest size.
    let chain: Vec<UsageRecord> = (0..200)
        .map(|i| UsageRecord::new(i, 1 + i % 7, i as usize, i as usize))
        .collect();
    let cut = greedy_by_size_dist_until(&chain, past);
    validate_objects(&chain, None, &cut).unwrap();
    assert_eq!(cut.object_sizes, vec![7]);
}
