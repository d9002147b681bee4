//! Hard synthetic instances with a known optimum: a `capacity` × `ops`
//! rectangle (memory × time) cut at random into tensors, so that the tensors
//! pack exactly into `capacity` and the lower bound equals it. Greedy by
//! size sits 20–40% above the bound on these, as on MiniMalloc's
//! "challenging" traces.

use depengine::plan::*;

const CAPACITY: u64 = 1 << 20;

/// A random guillotine cut of the `CAPACITY` × `ops` rectangle into `n`
/// tensors (sizes multiples of 1 KiB), listed in a random order.
fn perfect_packing(n: usize, seed: u64) -> Vec<UsageRecord> {
    depengine::plan::synthetic::perfect_packing(n, seed, CAPACITY)
}

/// True when improve's own searches (no local search) reach the capacity
/// on `recs`; the exact mode must then have answered within its short
/// search's 32 nodes per tensor.
fn settled_by_improve(recs: &[UsageRecord], out: &ExactOutcome, seed: u64) -> bool {
    let seeded = improve(
        recs,
        None,
        &ImproveOptions {
            iterations: 0,
            ..ImproveOptions::default()
        },
    );
    if seeded.total_size > CAPACITY {
        return false;
    }
    assert!(
        out.nodes <= 32 * recs.len() as u64,
        "seed {seed}: {} search nodes",
        out.nodes
    );
    true
}

#[test]
fn perfect_packings_have_the_capacity_as_lower_bound() {
    for seed in 1..=5 {
        let recs = perfect_packing(150, seed);
        assert_eq!(recs.len(), 150);
        assert_eq!(lower_bound(&recs), CAPACITY, "seed {seed}");
    }
}

/// The improving planner (deterministic options: no clock) lands within
/// 10% of the bound, well inside the 20% it aims for, and below greedy by
/// size, which misses the bound by 5–30% on every one of them.
#[test]
fn improve_stays_close_to_the_bound_on_perfect_packings() {
    for seed in 1..=6 {
        let recs = perfect_packing(170, 0x4A2D_0000 + seed);
        let lb = lower_bound(&recs);
        let greedy = offsets_greedy_by_size(&recs, None, 1).total_size;
        assert!(
            greedy as f64 >= 1.05 * lb as f64,
            "seed {seed}: greedy {greedy} is not hard enough (bound {lb})"
        );
        let out = improve(&recs, None, &ImproveOptions::default());
        validate_offsets(&recs, None, &out, 1).unwrap();
        assert!(out.total_size >= lb, "seed {seed}");
        assert!(out.total_size < greedy, "seed {seed}: not below greedy");
        assert!(
            out.total_size as f64 <= 1.1 * lb as f64,
            "seed {seed}: improve {} vs bound {lb} (greedy {greedy})",
            out.total_size
        );
    }
}

/// The exact mode answers *fits* with a validated plan at the known
/// capacity, under a node budget (no clock). The budget covers two passes
/// of the search's six rankings (seed 5 needs about 1.6 million nodes).
#[test]
fn exact_fits_perfect_packings_at_their_capacity() {
    for seed in 1..=6 {
        let recs = perfect_packing(120, 0x5A1E_0000 + seed);
        let out = exact(
            &recs,
            None,
            &ExactOptions {
                capacity: Some(CAPACITY),
                node_limit: 4_000_000,
                ..ExactOptions::default()
            },
        );
        assert_eq!(out.fits, Fits::Yes, "seed {seed}");
        assert!(out.plan.total_size <= CAPACITY, "seed {seed}");
        validate_offsets(&recs, None, &out.plan, 1).unwrap();
        // One byte less than the bound cannot fit, and the search proves it
        // at once (the cross-section bound).
        let below = exact(
            &recs,
            None,
            &ExactOptions {
                capacity: Some(CAPACITY - 1),
                node_limit: 2_000_000,
                ..ExactOptions::default()
            },
        );
        assert_eq!(below.fits, Fits::No, "seed {seed}");
    }
}

/// Where improve's own searches (over coalesced tensors, no local search)
/// reach the capacity, the exact mode takes their plan before any long
/// search: it answers *fits* within the short search's 32 nodes per
/// tensor. (Seed 2 is such a case; it took 134 thousand nodes before.)
#[test]
fn exact_takes_improves_plan_before_a_long_search() {
    let mut settled = 0;
    for seed in 1..=6 {
        let recs = perfect_packing(120, 0x5A1E_0000 + seed);
        let out = exact(
            &recs,
            None,
            &ExactOptions {
                capacity: Some(CAPACITY),
                node_limit: 4_000_000,
                ..ExactOptions::default()
            },
        );
        assert_eq!(out.fits, Fits::Yes, "seed {seed}");
        validate_offsets(&recs, None, &out.plan, 1).unwrap();
        assert!(out.plan.total_size <= CAPACITY, "seed {seed}");
        if settled_by_improve(&recs, &out, seed) {
            settled += 1;
        }
    }
    assert!(settled >= 3, "only {settled} instances settled by improve");
}

/// Without a capacity the exact mode proves the optimum of these
/// instances: the lower bound, reached. Where improve's own searches reach
/// it, the exact mode takes their plan (proven optimal) within the short
/// search's 32 nodes per tensor, before any long search (seed 5 took 15
/// thousand nodes before).
#[test]
fn exact_without_capacity_proves_the_optimum_taking_improves_plan() {
    let mut settled = 0;
    for seed in 1..=6 {
        let recs = perfect_packing(100, 0x0B7E_0000 + seed);
        // Seed 1 needs about 1.4 million nodes in the search at the bound,
        // which gets a quarter of the budget.
        let out = exact(
            &recs,
            None,
            &ExactOptions {
                node_limit: 8_000_000,
                ..ExactOptions::default()
            },
        );
        validate_offsets(&recs, None, &out.plan, 1).unwrap();
        assert_eq!(out.plan.total_size, CAPACITY, "seed {seed}");
        assert_eq!(out.fits, Fits::Yes, "seed {seed}");
        if settled_by_improve(&recs, &out, seed) {
            settled += 1;
        }
    }
    assert!(settled >= 3, "only {settled} instances settled by improve");
}

/// Alignment and conflict pairs are honoured by the search inside both
/// planners on the hard instances too.
#[test]
fn search_honours_alignment_and_conflicts_on_perfect_packings() {
    let recs = perfect_packing(80, 0xA11E);
    let n = recs.len();
    let pairs: Vec<(usize, usize)> = (0..n / 2).map(|i| (i, n - 1 - i)).collect();
    let conflicts = Conflicts::from_pairs(n, &pairs).unwrap();
    for alignment in [1, 4096] {
        let out = improve(
            &recs,
            Some(&conflicts),
            &ImproveOptions {
                alignment,
                ..ImproveOptions::default()
            },
        );
        validate_offsets(&recs, Some(&conflicts), &out, alignment).unwrap();
        let ex = exact(
            &recs,
            Some(&conflicts),
            &ExactOptions {
                alignment,
                node_limit: 200_000,
                ..ExactOptions::default()
            },
        );
        validate_offsets(&recs, Some(&conflicts), &ex.plan, alignment).unwrap();
        assert!(ex.plan.total_size >= lower_bound(&recs));
    }
}

/// At 2,000 tensors greedy by size misses the bound by 28–34%; the
/// improving planner (no clock: fixed effort) stays within 20% of it (1.07
/// to 1.13), which the search over coalesced records makes possible: before
/// it, improve reached 1.16 to 1.23 on these in 1 s.
#[test]
fn improve_is_within_20_percent_on_2000_tensor_perfect_packings() {
    for seed in 1..=3 {
        let recs = perfect_packing(2000, 0x2000_0000 + seed);
        let lb = lower_bound(&recs);
        let greedy = offsets_greedy_by_size(&recs, None, 1).total_size;
        let out = improve(&recs, None, &ImproveOptions::default());
        validate_offsets(&recs, None, &out, 1).unwrap();
        assert!(out.total_size <= greedy, "seed {seed}");
        assert!(
            out.total_size as f64 <= 1.2 * lb as f64,
            "seed {seed}: improve {} vs bound {lb} (greedy {greedy})",
            out.total_size
        );
    }
}

/// The ruin-and-recreate steps at the end of `improve` find the optimum
/// of a cut rectangle that the searches before them miss by one KiB
/// (deterministic options: no clock).
#[test]
fn ruin_steps_reach_the_bound_the_searches_miss() {
    let recs = perfect_packing(150, 0x7000_0002);
    let lb = lower_bound(&recs);
    let without = improve(
        &recs,
        None,
        &ImproveOptions {
            ruin_steps: 0,
            squeeze_moves: 0,
            ..ImproveOptions::default()
        },
    );
    validate_offsets(&recs, None, &without, 1).unwrap();
    assert!(
        without.total_size > lb,
        "the searches alone reach the bound"
    );
    let with = improve(
        &recs,
        None,
        &ImproveOptions {
            squeeze_moves: 0,
            ..ImproveOptions::default()
        },
    );
    validate_offsets(&recs, None, &with, 1).unwrap();
    assert_eq!(with.total_size, lb);
}

/// The squeeze at the end of `improve` (alone, without the ruin steps)
/// lowers what the searches leave on cut rectangles (deterministic
/// options: no clock), and never goes below the bound.
#[test]
fn squeeze_lowers_what_the_searches_leave() {
    let mut lowered = 0;
    for seed in 1..=SQUEEZE_SEEDS {
        let recs = perfect_packing(1500, 0x8000_0000 + seed);
        let lb = lower_bound(&recs);
        let only = |squeeze_moves| ImproveOptions {
            ruin_steps: 0,
            squeeze_moves,
            ..ImproveOptions::default()
        };
        let searched = improve(&recs, None, &only(0));
        let squeezed = improve(&recs, None, &only(ImproveOptions::default().squeeze_moves));
        validate_offsets(&recs, None, &squeezed, 1).unwrap();
        assert!(squeezed.total_size <= searched.total_size, "seed {seed}");
        assert!(squeezed.total_size >= lb, "seed {seed}");
        lowered += usize::from(squeezed.total_size < searched.total_size);
    }
    assert_eq!(
        lowered, SQUEEZE_SEEDS as usize,
        "the squeeze gained nothing on some seeds"
    );
}

/// Cut rectangles for `squeeze_lowers_what_the_searches_leave`.
const SQUEEZE_SEEDS: u64 = 3;

/// Under a time limit, local searches that gain nothing hand the rest of
/// their time to perturbed skylines; whatever the clock lets run, the plan
/// validates and is no worse than greedy by size (nothing here depends on
/// how much ran).
#[test]
fn improve_under_a_time_limit_validates_and_beats_greedy() {
    for seed in 1..=2 {
        let recs = perfect_packing(3000, 0x5000_0000 + seed);
        let greedy = offsets_greedy_by_size(&recs, None, 1).total_size;
        let out = improve(
            &recs,
            None,
            &ImproveOptions {
                iterations: usize::MAX,
                time_limit: Some(std::time::Duration::from_millis(60)),
                ..ImproveOptions::default()
            },
        );
        validate_offsets(&recs, None, &out, 1).unwrap();
        assert!(out.total_size <= greedy, "seed {seed}");
        assert!(out.total_size >= lower_bound(&recs), "seed {seed}");
    }
}

/// With no time at all, exact runs no search (zero nodes) and answers with
/// the heuristic plan: unknown at a capacity below it, fits at one above,
/// and without a capacity a plan no worse than greedy by size whose proven
/// bound is the lower bound. Large inputs used to run every fixed order
/// first, whatever the clock said.
#[test]
fn exact_without_time_answers_from_the_heuristics() {
    let recs = perfect_packing(3000, 0x6000_0001);
    let lb = lower_bound(&recs);
    let greedy = offsets_greedy_by_size(&recs, None, 1).total_size;
    assert!(greedy > lb, "greedy at the bound: pick another seed");
    let run = |capacity| {
        exact(
            &recs,
            None,
            &ExactOptions {
                capacity,
                time_limit: Some(std::time::Duration::ZERO),
                ..ExactOptions::default()
            },
        )
    };
    let out = run(Some(lb));
    assert_eq!(out.nodes, 0);
    assert_eq!(out.fits, Fits::Unknown);
    validate_offsets(&recs, None, &out.plan, 1).unwrap();
    assert!(out.plan.total_size <= greedy);
    let roomy = run(Some(greedy));
    assert_eq!((roomy.nodes, roomy.fits), (0, Fits::Yes));
    assert!(roomy.plan.total_size <= greedy);
    let free = run(None);
    assert_eq!((free.nodes, free.fits), (0, Fits::Unknown));
    assert_eq!(free.proven_bound, lb);
    validate_offsets(&recs, None, &free.plan, 1).unwrap();
    assert!(free.plan.total_size <= greedy);
}

/// With no time, improve still returns a valid plan no worse than greedy
/// by size, on a trace it splits at free ops and coalesces (the paths that
/// now stop at the clock).
#[test]
fn improve_without_time_keeps_greedy_by_size() {
    let recs = perfect_packing(5000, 0x6000_0002);
    let greedy = offsets_greedy_by_size(&recs, None, 1).total_size;
    let out = improve(
        &recs,
        None,
        &ImproveOptions {
            time_limit: Some(std::time::Duration::ZERO),
            ..ImproveOptions::default()
        },
    );
    validate_offsets(&recs, None, &out, 1).unwrap();
    assert!(out.total_size <= greedy);
    assert!(out.total_size >= lower_bound(&recs));
}

/// With a target above the lower bound, improve stops at the first plan
/// within it instead of searching on to the bound (what the exact mode
/// wants at a capacity); without one it goes on to the bound here.
#[test]
fn improve_stops_at_its_target() {
    let recs = perfect_packing(300, 0x6000_0002);
    let lb = lower_bound(&recs);
    let greedy = offsets_greedy_by_size(&recs, None, 1).total_size;
    let full = improve(&recs, None, &ImproveOptions::default());
    assert_eq!(full.total_size, lb, "pick a seed improve settles");
    let target = lb + (greedy - lb) / 2;
    let out = improve(
        &recs,
        None,
        &ImproveOptions {
            target: Some(target),
            ..ImproveOptions::default()
        },
    );
    validate_offsets(&recs, None, &out, 1).unwrap();
    assert!(out.total_size <= target);
    assert!(out.total_size > lb, "it searched on past its target");
}
