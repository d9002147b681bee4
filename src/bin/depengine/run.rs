//! `depengine run`: plan a graph and run it on the engine (the main job).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use clap::Args;

use depengine::graph::executor::{
    self, busy_body, checksum_body, Bodies, BusyCost, ChecksumLog, Mode, Progress, RunOptions,
};
use depengine::graph::planner::{plan, MatchRange, PlanOptions};
use depengine::graph::Graph;
use depengine::{Engine, EngineKind};

/// The model run when no graph is given: torchvision's ResNet-18 at batch
/// 1 (from the shared graph data set).
const BUNDLED: &str = include_str!("../../../data/resnet18.json");
const BUNDLED_NAME: &str = "data/resnet18.json (bundled)";

/// Arguments of `depengine run`.
#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    /// A graph JSON file (default: the bundled ResNet-18).
    graph: Option<PathBuf>,
    /// Executor: naive, pooled or per-device.
    #[arg(long, default_value = "per-device", value_parser = parse_kind)]
    engine: EngineKind,
    /// CPU worker threads (the naive executor has none: ops run on the
    /// pushing thread).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// ColorNodeGroup groups: storage is shared only within a group.
    #[arg(long, default_value_t = 1)]
    colors: u32,
    /// static: the plan's storages; dynamic: a buffer per tensor, freed after
    /// its last reader.
    #[arg(long, default_value = "static")]
    mode: Mode,
    /// The planner's match_range: a whole number (0: no reuse) or auto.
    #[arg(long, default_value = "auto")]
    match_range: MatchRange,
    /// Plan without in-place reuse.
    #[arg(long)]
    no_inplace: bool,
    /// Multiplies the busy time of every op (1.0: 1 GB/s of bytes touched
    /// plus 0.01 ms per op).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Run the checksum body instead of the busy one and compare with a
    /// serial run (exit status 1 on a difference).
    #[arg(long)]
    check: bool,
    /// Print one JSON object instead of key=value pairs.
    #[arg(long)]
    json: bool,
}

fn parse_kind(s: &str) -> Result<EngineKind, String> {
    s.parse()
        .map_err(|()| format!("unknown engine `{s}`: expected naive, pooled or per-device"))
}

/// Progress on stderr: a line rewritten at most every 200 ms, once the run
/// has taken a second.
fn progress() -> (Progress, Arc<AtomicBool>) {
    let start = Instant::now();
    let last = Arc::new(AtomicU64::new(0));
    let shown = Arc::new(AtomicBool::new(false));
    let s = shown.clone();
    let p: Progress = Arc::new(move |done, total| {
        let ms = start.elapsed().as_millis() as u64;
        let prev = last.load(Ordering::Relaxed);
        if ms < 1000 || (ms < prev + 200 && done < total) {
            return;
        }
        if last
            .compare_exchange(prev, ms, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            s.store(true, Ordering::Relaxed);
            eprint!("\rrun: {done}/{total} ops, {:.1} s", ms as f64 / 1000.0);
            let _ = std::io::stderr().flush();
        }
    });
    (p, shown)
}

pub(crate) fn run(args: RunArgs) -> Result<(), Box<dyn std::error::Error>> {
    if !(args.scale.is_finite() && args.scale >= 0.0) {
        return Err("--scale must be a finite number >= 0".into());
    }
    if args.workers == 0 {
        return Err("--workers must be at least 1".into());
    }
    let (graph, source) = match &args.graph {
        Some(path) => (Graph::load(path)?, path.display().to_string()),
        None => (
            Graph::from_json_str(BUNDLED, Path::new(BUNDLED_NAME))?,
            BUNDLED_NAME.to_string(),
        ),
    };
    let options = PlanOptions {
        match_range: args.match_range,
        inplace: !args.no_inplace,
        colors: args.colors.max(1),
        ..PlanOptions::default()
    };
    let t = Instant::now();
    let memory = plan(&graph, &options)?;
    let plan_ms = t.elapsed().as_secs_f64() * 1000.0;
    let engine = Engine::builder()
        .kind(args.engine)
        .cpu_workers(args.workers)
        .build()?;
    let log = Arc::new(ChecksumLog::new(graph.ops().len()));
    let bodies = if args.check {
        Bodies::new(checksum_body(log.clone()))
    } else {
        Bodies::new(busy_body(BusyCost::scaled(args.scale)))
    };
    let (progress, shown) = progress();
    let run_options = RunOptions {
        mode: args.mode,
        hash_outputs: args.check,
        progress: Some(progress),
        ..RunOptions::default()
    };
    let report = executor::run(&graph, &memory, &engine, &bodies, &run_options)?;
    if shown.load(Ordering::Relaxed) {
        eprintln!();
    }
    let check = if args.check {
        Some(report.checksums(&log) == executor::reference(&graph))
    } else {
        None
    };
    let makespan_ms = report.makespan.as_secs_f64() * 1000.0;
    let busy_ms = report.busy.as_secs_f64() * 1000.0;
    if args.json {
        let mut obj = serde_json::json!({
            "model": report.model,
            "graph": source,
            "engine": args.engine.to_string(),
            "workers": args.workers,
            "colors": args.colors.max(1),
            "groups": memory.coloring.count,
            "mode": report.mode.to_string(),
            "match_range": memory.match_range,
            "inplace": memory.inplace,
            "ops": report.ops,
            "storages": memory.planned_storages(),
            "inplace_tensors": memory.inplace_count(),
            "planned_bytes": report.planned_bytes,
            "external_bytes": report.external_bytes,
            "peak_pool_bytes": report.peak_pool_bytes,
            "peak_in_use_bytes": report.peak_in_use_bytes,
            "plan_ms": plan_ms,
            "makespan_ms": makespan_ms,
            "busy_ms": busy_ms,
            "parallelism": report.parallelism,
            "scale": args.scale,
        });
        if let Some(ok) = check {
            obj["checksums_match"] = serde_json::Value::Bool(ok);
        }
        println!("{obj}");
    } else {
        println!(
            "model={} engine={} workers={} colors={} groups={} mode={} match_range={} inplace={} \
             ops={} storages={} planned_bytes={} external_bytes={} peak_pool_bytes={} \
             peak_in_use_bytes={} makespan_ms={:.2} busy_ms={:.2} parallelism={:.3}{}",
            report.model,
            args.engine,
            args.workers,
            args.colors.max(1),
            memory.coloring.count,
            report.mode,
            memory.match_range,
            memory.inplace,
            report.ops,
            memory.planned_storages(),
            report.planned_bytes,
            report.external_bytes,
            report.peak_pool_bytes,
            report.peak_in_use_bytes,
            makespan_ms,
            busy_ms,
            report.parallelism,
            match check {
                Some(ok) => format!(" checksums_match={ok}"),
                None => String::new(),
            }
        );
    }
    if check == Some(false) {
        return Err("the checksums differ from the serial run".into());
    }
    Ok(())
}
