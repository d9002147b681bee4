//! `depengine bench`: empty-op micro-benchmarks of the engine.

use clap::Args;

use depengine::bench::{run_workload, Workload, DEFAULT_VARS};
use depengine::{Engine, EngineKind};

/// Arguments of `depengine bench`.
#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
    /// Workload: indep, chain or readers.
    #[arg(long, default_value = "indep")]
    workload: Workload,
    /// Ops per run.
    #[arg(long, default_value_t = 1_000_000)]
    ops: usize,
    /// Executor: naive, pooled or per-device.
    #[arg(long, default_value = "per-device", value_parser = parse_kind)]
    engine: EngineKind,
    /// CPU worker threads (0: one per CPU).
    #[arg(long, default_value_t = 0)]
    workers: usize,
    /// Distinct vars written by indep and readers.
    #[arg(long, default_value_t = DEFAULT_VARS)]
    vars: usize,
    /// Timed runs after one warm-up run; the median is reported.
    #[arg(long, default_value_t = 5)]
    runs: usize,
}

fn parse_kind(s: &str) -> Result<EngineKind, String> {
    s.parse()
        .map_err(|()| format!("unknown engine `{s}`: expected naive, pooled or per-device"))
}

pub(crate) fn run(args: BenchArgs) -> Result<(), Box<dyn std::error::Error>> {
    if args.ops == 0 || args.runs == 0 {
        return Err("--ops and --runs must be at least 1".into());
    }
    let engine = Engine::builder()
        .kind(args.engine)
        .cpu_workers(args.workers)
        .build()?;
    let workers: usize = engine.pools().first().map(|p| p.1).unwrap_or(0);
    run_workload(&engine, args.workload, args.ops.min(100_000), args.vars)?;
    let mut ns: Vec<f64> = Vec::with_capacity(args.runs);
    for _ in 0..args.runs {
        let t = run_workload(&engine, args.workload, args.ops, args.vars)?;
        ns.push(t.as_nanos() as f64 / args.ops as f64);
    }
    ns.sort_by(|a, b| a.total_cmp(b));
    let median = ns[ns.len() / 2];
    println!(
        "workload={} engine={} workers={} ops={} runs={} ns_per_op={:.1} min={:.1} max={:.1}",
        args.workload,
        args.engine,
        workers,
        args.ops,
        args.runs,
        median,
        ns[0],
        ns[ns.len() - 1]
    );
    Ok(())
}
