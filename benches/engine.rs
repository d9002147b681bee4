//! Engine micro-benchmarks: empty ops, one pushing thread, the workloads of
//! the design notes (`indep`, `chain`, `readers`), per executor. Throughput is
//! in ops, so criterion reports ops/s; ns per op = 1e9 / that.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use depengine::bench::{run_workload, Workload, DEFAULT_VARS};
use depengine::{Engine, EngineKind};

const OPS: usize = 100_000;

fn empty_ops(c: &mut Criterion) {
    for workload in [Workload::Indep, Workload::Chain, Workload::Readers] {
        let mut group = c.benchmark_group(format!("empty_ops/{workload}"));
        group.throughput(Throughput::Elements(OPS as u64));
        group.sample_size(10);
        group.measurement_time(Duration::from_secs(3));
        for kind in [EngineKind::Naive, EngineKind::Pooled, EngineKind::PerDevice] {
            let engine = Engine::builder().kind(kind).build().unwrap();
            group.bench_with_input(BenchmarkId::from_parameter(kind), &kind, |b, _| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += run_workload(&engine, workload, OPS, DEFAULT_VARS).unwrap();
                    }
                    total
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, empty_ops);
criterion_main!(benches);
