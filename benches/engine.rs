//! Engine micro-benchmarks: empty ops, one pushing thread, the workloads of
//! the design notes (`indep`, `chain`, `readers`), per executor; then the
//! graph-shaped workloads of the comparison with the peers (`wavefront`,
//! `fan`, `random`, `randsum`) at small sizes on the per-device executor.
//! Throughput is in ops, so criterion reports ops/s; ns per op = 1e9 / that.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use depengine::bench::{run_trace, run_workload, Spec, Workload, DEFAULT_VARS};
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

fn graph_workloads(c: &mut Criterion) {
    let mut group = c.benchmark_group("graph_workloads/per-device");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(3));
    let engine = Engine::builder().build().unwrap();
    for (workload, ops) in [
        (Workload::Wavefront, 0),
        (Workload::Fan, 200),
        (Workload::Random, 20_000),
        (Workload::Randsum, 20_000),
    ] {
        let trace = Spec {
            n: 150,
            ..Spec::new(workload, ops)
        }
        .trace();
        group.throughput(Throughput::Elements(trace.ops.len() as u64));
        group.bench_function(BenchmarkId::from_parameter(workload), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    total += run_trace(&engine, &trace, None).unwrap().elapsed;
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(benches, empty_ops, graph_workloads);
criterion_main!(benches);
