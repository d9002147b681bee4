//! Planning time of every strategy at 1k, 10k and 100k synthetic records,
//! so the growth of each strategy's cost is visible. The 100k case runs only
//! the strategies whose cost grows about linearly.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use depengine::plan::{
    exact, improve, plan, ExactOptions, ImproveOptions, PlanOptions, Strategy, UsageRecord,
};
use depengine::util::rng::SplitMix64;

/// Records shaped like an inference trace: one new tensor per op, most read
/// by the next few ops, one in eight kept much longer (skip connections),
/// sizes from a handful of feature-map sizes.
fn synthetic(n: usize, seed: u64) -> Vec<UsageRecord> {
    let mut rng = SplitMix64::new(seed);
    let sizes: Vec<u64> = (0..8).map(|k| 4096u64 << (k % 5)).collect();
    (0..n)
        .map(|i| {
            let life = if rng.below(8) == 0 {
                rng.range_inclusive(4, 64)
            } else {
                rng.range_inclusive(1, 3)
            };
            let last = (i + life as usize).min(n - 1);
            let size = sizes[rng.below(sizes.len() as u64) as usize] * rng.range_inclusive(1, 3);
            UsageRecord::new(i as u64, size, i, last)
        })
        .collect()
}

const LINEAR: [Strategy; 6] = [
    Strategy::Naive,
    Strategy::Equality,
    Strategy::GreedyInOrder,
    Strategy::OffsetsGreedyBySize,
    Strategy::OffsetsGreedyInOrder,
    Strategy::OffsetsGreedyByBreadth,
];

const SUPERLINEAR: [Strategy; 4] = [
    Strategy::GreedyByBreadth,
    Strategy::GreedyBySize,
    Strategy::GreedyBySizeDist,
    Strategy::OffsetsBest,
];

const SIZES: [usize; 3] = [1_000, 10_000, 100_000];

/// One group per strategy, one point per record count.
fn strategies(c: &mut Criterion) {
    let inputs: Vec<(usize, Vec<UsageRecord>)> =
        SIZES.iter().map(|&n| (n, synthetic(n, 42))).collect();
    let options = PlanOptions::default();
    for s in LINEAR.iter().chain(SUPERLINEAR.iter()).copied() {
        let mut group = c.benchmark_group(format!("plan/{}", s.name()));
        group.sample_size(10);
        for (n, records) in &inputs {
            if *n > 10_000 && !LINEAR.contains(&s) {
                continue;
            }
            group.throughput(Throughput::Elements(*n as u64));
            group.bench_with_input(BenchmarkId::from_parameter(n), records, |b, r| {
                b.iter(|| black_box(plan(r, s, &options).plan.total()))
            });
        }
        group.finish();
    }
    // Min-cost flow grows fastest (about 17 s at 10k on a 2-core sandbox),
    // so it is measured at 1k only.
    let mut group = c.benchmark_group("plan/min_cost_flow");
    group.sample_size(10);
    for (n, records) in inputs.iter().filter(|(n, _)| *n <= 1_000) {
        group.throughput(Throughput::Elements(*n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), records, |b, r| {
            b.iter(|| black_box(plan(r, Strategy::MinCostFlow, &options).plan.total()))
        });
    }
    group.finish();
    // The searching planners with fixed effort (no clock), so runs compare.
    let mut group = c.benchmark_group("plan/improve_50_iterations");
    group.sample_size(10);
    let improve_options = ImproveOptions {
        iterations: 50,
        ..ImproveOptions::default()
    };
    for (n, records) in inputs.iter().filter(|(n, _)| *n <= 10_000) {
        group.throughput(Throughput::Elements(*n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), records, |b, r| {
            b.iter(|| black_box(improve(r, None, &improve_options).total_size))
        });
    }
    group.finish();
    let mut group = c.benchmark_group("plan/exact_100k_nodes");
    group.sample_size(10);
    let exact_options = ExactOptions {
        node_limit: 100_000,
        ..ExactOptions::default()
    };
    for (n, records) in inputs.iter().filter(|(n, _)| *n <= 1_000) {
        group.throughput(Throughput::Elements(*n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), records, |b, r| {
            b.iter(|| black_box(exact(r, None, &exact_options).plan.total_size))
        });
    }
    group.finish();
}

criterion_group!(benches, strategies);
criterion_main!(benches);
