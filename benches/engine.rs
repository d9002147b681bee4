//! Engine micro-benchmarks: empty ops, one pushing thread, the workloads of
//! the design notes (`indep`, `chain`, `readers`), per executor; then the
//! graph-shaped workloads of the comparison with the peers (`wavefront`,
//! `fan`, `random`, `randsum`) at small sizes on the per-device executor,
//! pushed op by op and, in group `replay`, captured as a `Replay` (private
//! vars) and pushed whole; in group `serial`, the same on the naive
//! executor in a serial scope (`Engine::serial`), one thread in all.
//! Throughput is in ops, so criterion reports ops/s; ns per op = 1e9 / that.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use depengine::bench::{
    run_trace, run_trace_serial, run_workload, ReplayVars, Spec, Trace, TraceReplay, Workload,
    DEFAULT_VARS,
};
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

/// The graph-shaped workloads: each trace is made ready once by `prepare`
/// (not timed), then run by `run` (returns the timed part).
fn graph_group<P>(
    c: &mut Criterion,
    name: &str,
    workloads: &[(Workload, usize)],
    prepare: impl Fn(&Engine, Trace) -> P,
    run: impl Fn(&Engine, &P) -> Duration,
) {
    let mut group = c.benchmark_group(name);
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(3));
    let engine = Engine::builder().build().unwrap();
    for &(workload, ops) in workloads {
        let trace = small_trace(workload, ops);
        group.throughput(Throughput::Elements(trace.ops.len() as u64));
        let prepared = prepare(&engine, trace);
        group.bench_function(BenchmarkId::from_parameter(workload), |b| {
            b.iter_custom(|iters| (0..iters).map(|_| run(&engine, &prepared)).sum())
        });
    }
    group.finish();
}

/// A workload's trace at the small sizes of these groups (wavefronts of
/// 150 × 150).
fn small_trace(workload: Workload, ops: usize) -> Trace {
    Spec {
        n: 150,
        ..Spec::new(workload, ops)
    }
    .trace()
}

const GRAPHS: [(Workload, usize); 4] = [
    (Workload::Wavefront, 0),
    (Workload::Fan, 200),
    (Workload::Random, 20_000),
    (Workload::Randsum, 20_000),
];

fn graph_workloads(c: &mut Criterion) {
    graph_group(
        c,
        "graph_workloads/per-device",
        &GRAPHS,
        |_, trace| trace,
        |engine, trace| run_trace(engine, trace, None).unwrap().elapsed,
    );
}

fn replay(c: &mut Criterion) {
    let mut workloads = vec![(Workload::Chain, 20_000)];
    workloads.extend(GRAPHS);
    // Captured once per workload and pushed at every iteration, as a
    // replay is meant to be used.
    graph_group(
        c,
        "replay/per-device",
        &workloads,
        |engine, trace| TraceReplay::capture(engine, &trace, ReplayVars::Private).unwrap(),
        |engine, captured| captured.run(engine).unwrap().elapsed,
    );
}

fn serial(c: &mut Criterion) {
    let mut group = c.benchmark_group("serial/naive");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(3));
    // A scope needs the only handle: this group's engine is its own.
    let mut engine = Engine::builder().kind(EngineKind::Naive).build().unwrap();
    for &(workload, ops) in [(Workload::Chain, 20_000)].iter().chain(&GRAPHS) {
        let trace = small_trace(workload, ops);
        group.throughput(Throughput::Elements(trace.ops.len() as u64));
        group.bench_function(BenchmarkId::from_parameter(workload), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| run_trace_serial(&mut engine, &trace, None).unwrap().elapsed)
                    .sum()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, empty_ops, graph_workloads, replay, serial);
criterion_main!(benches);
