//! `depengine bench`: the engine on the benchmark workloads (empty or busy
//! bodies), and the traces that the peer drivers replay.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;

use clap::Args;

use depengine::bench::{
    account_cpu, cpu_accounting_supported, ideal_schedule, quantile, roundtrip, run_trace_batched,
    run_trace_pushers, run_trace_serial, run_trace_stream, ReplayVars, Spec, Summary, TraceReplay,
    Workload,
};
use depengine::{Engine, EngineKind, ReplayHelpers};

/// Arguments of `depengine bench`.
#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
    /// Workload: indep, indep-novars, chain, readers, wavefront, fan, rwmix,
    /// random, randsum, priority or roundtrip.
    #[arg(long, default_value = "indep")]
    workload: Workload,
    /// Ops per run (fan: rounds of 101 ops; priority: low-priority ops;
    /// roundtrip: round trips). Default: 1,000,000; fan 10,000; priority
    /// 200,000; roundtrip 100,000.
    #[arg(long)]
    ops: Option<usize>,
    /// Grid side of wavefront (n × n ops).
    #[arg(long, default_value_t = 1000)]
    n: usize,
    /// Busy time of each body in µs (0: empty body).
    #[arg(long, default_value_t = 0.0)]
    body_us: f64,
    /// Executor: naive, pooled or per-device.
    #[arg(long, default_value = "per-device", value_parser = parse_kind)]
    engine: EngineKind,
    /// CPU worker threads (0: one per CPU).
    #[arg(long, default_value_t = 0)]
    workers: usize,
    /// Distinct vars written by indep and readers (the design notes' 1024 by
    /// default; 0: one var per op for indep, as the peer comparison runs it).
    #[arg(long, default_value_t = 1024)]
    vars: usize,
    /// Timed runs after one warm-up run; the median is reported.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// The pushing thread runs ready ops while it waits for all
    /// (`EngineBuilder::help_while_waiting`). It then counts as one of the
    /// threads: the line reports `workers` = CPU workers + 1 and computes
    /// efficiency over that many, as for the peers whose pusher is a worker.
    #[arg(long)]
    help_wait: bool,
    /// With --help-wait: the pushing thread also runs queued ops while it
    /// pushes, whenever the workers' backlog is long
    /// (`EngineBuilder::help_while_pushing`). The line's system gets
    /// `-pushing`.
    #[arg(long, requires = "help_wait")]
    help_push: bool,
    /// Push the ops in batches of this many (`Engine::batch`: the ops ready
    /// at their push are handed to the workers together when the batch
    /// closes; 0: one by one). The line's system gets `-batch<N>`.
    #[arg(long, default_value_t = 0, conflicts_with_all = ["dump_trace", "ideal"])]
    batch: usize,
    /// Push from this many threads at once, op i from thread i mod N
    /// (`indep` and `indep-novars` only, whose ops do not depend on the
    /// order between threads). The line's system gets `-pushers<N>`.
    #[arg(long, default_value_t = 1, conflicts_with_all = ["dump_trace", "ideal", "batch"])]
    pushers: usize,
    /// Capture the workload as a graph before the clock starts and push it
    /// whole (`Engine::push_replay`), as the oneTBB and rayon drivers are
    /// handed the graph: the cost of running a graph without inferring it.
    /// The workload's vars are the replay's private vars (the graph alone,
    /// as those drivers get it), or with --replay-engine-vars engine vars,
    /// which the replay's op holds. Not for priority (a replay's nodes have
    /// no priority) or roundtrip. The line's system gets `-replay` (or
    /// `-replay-vars`).
    #[arg(long, conflicts_with_all = ["dump_trace", "ideal", "batch", "pushers", "help_push"])]
    replay: bool,
    /// Run the ops in a serial scope (`Engine::serial`): each runs at its
    /// push, on the pushing thread, without the var protocol. The run uses
    /// that one thread whatever --workers says: the line reports
    /// `workers=1`. Not for roundtrip, whose async ops complete on another
    /// thread. The line's system gets `-serial`.
    #[arg(long, conflicts_with_all = ["dump_trace", "ideal", "batch", "pushers", "replay", "help_wait"])]
    serial: bool,
    /// Push the ops as a stream (`Engine::push_all`), which asks for the
    /// lines of the next ops' vars while it pushes, instead of one by one.
    /// Not for priority (whose high-priority ops are timed at their push)
    /// or roundtrip. The line's system gets `-stream`.
    #[arg(long, conflicts_with_all = ["dump_trace", "ideal", "batch", "pushers", "replay", "serial"])]
    stream: bool,
    /// With --replay: the workload's vars are engine vars.
    #[arg(long, requires = "replay")]
    replay_engine_vars: bool,
    /// With --replay: how many workers a run may use
    /// (`ReplayBuilder::helpers`): adaptive (the library's default: times
    /// runs with one helper and with every worker and keeps the faster),
    /// all or one. Other than adaptive, the line's system gets
    /// `-helpers-all` or `-helpers-one`.
    #[arg(long, value_name = "HOW", default_value = "adaptive", value_parser = parse_helpers, requires = "replay")]
    replay_helpers: ReplayHelpers,
    /// Most op blocks the engine keeps for reuse
    /// (`EngineBuilder::pooled_op_blocks`; default: the library's,
    /// 1,048,576). Given, the line's system gets `-pool<N>`.
    #[arg(long, value_name = "N", conflicts_with_all = ["dump_trace", "ideal"])]
    pooled_op_blocks: Option<usize>,
    /// Most queue entries the engine keeps buffers for once their vars
    /// are freed (`EngineBuilder::pooled_queue_entries`; default: the
    /// library's, 16,777,216; 0 keeps none). Given, the line's system gets
    /// `-qpool<N>`.
    #[arg(long, value_name = "N", conflicts_with_all = ["dump_trace", "ideal"])]
    pooled_queue_entries: Option<usize>,
    /// Most ops pending before the pushing thread waits for the workers
    /// (`EngineBuilder::max_lead`; default: the library's, 2,048 per
    /// worker; 0: no limit). Given, the line's system gets `-lead<N>`.
    #[arg(long, value_name = "N", conflicts_with_all = ["dump_trace", "ideal"])]
    max_lead: Option<usize>,
    /// Most workers of a pool that look for work at once
    /// (`EngineBuilder::max_searching`; default: the library's, half the
    /// pool). Given, the line's system gets `-search<N>`.
    #[arg(long, value_name = "N", conflicts_with_all = ["dump_trace", "ideal"])]
    max_searching: Option<usize>,
    /// How long, in µs, a worker that found no work keeps looking before
    /// it sleeps (`EngineBuilder::linger`; default: the library's, 50 µs;
    /// 0: it sleeps at once). Given, the line's system gets `-linger<US>`.
    #[arg(long, value_name = "US", conflicts_with_all = ["dump_trace", "ideal"])]
    linger_us: Option<u64>,
    /// Lets a lingering worker keep looking after an op is pushed
    /// (`EngineBuilder::linger_through_pushes`). The line's system gets
    /// `-lingerpush`.
    #[arg(long, conflicts_with_all = ["dump_trace", "ideal"])]
    linger_through_pushes: bool,
    /// Makes the last searching worker to find work wake a sleeper to
    /// search in its place (`EngineBuilder::keep_one_searching`). The
    /// line's system gets `-keepsearch`.
    #[arg(long, conflicts_with_all = ["dump_trace", "ideal"])]
    keep_one_searching: bool,
    /// Pools of at most N workers give each pushing thread a queue of its
    /// own for the ops ready at its push (`EngineBuilder::pusher_queues_up_to`;
    /// default: the library's, 2; 0: none). Given, the line's system gets
    /// `-pq<N>`.
    #[arg(long, value_name = "N", conflicts_with_all = ["dump_trace", "ideal"])]
    pusher_queues_up_to: Option<usize>,
    /// Splits the pools' sleep fence: a compiler fence after each op
    /// queued, a process-wide barrier (Linux's membarrier) at each
    /// worker's sleep (`EngineBuilder::asymmetric_wake_fence`). The line's
    /// system gets `-afence`.
    #[arg(long, conflicts_with_all = ["dump_trace", "ideal"])]
    asymmetric_fence: bool,
    /// Report where the threads spent each timed run, from each thread's
    /// CPU clock and the scheduler's run-queue time (Linux only; read
    /// before the clock starts and after it stops): `worker_cpu`, the
    /// workers' time on a CPU over time × workers (below 1: they slept);
    /// `pusher_cpu`, the pushing thread's (with --pushers, the thread that
    /// starts them and waits); `run_queue`, the time the
    /// pushing thread and the workers were ready without a CPU over time ×
    /// (workers + 1); `worker_sleeps` and `pusher_sleeps`, the times the
    /// workers (all together) and the pushing thread went to sleep, per
    /// op (each worker's sleep is a wake-up another thread paid for);
    /// `pusher_wakes`, the sleeping workers the pushing thread woke, per
    /// op (the engine counts them). Medians over the runs. Not for
    /// roundtrip.
    #[arg(long, conflicts_with_all = ["dump_trace", "ideal"])]
    cpu_time: bool,
    /// Print what an engine with no overhead would do on `--workers`
    /// workers (list scheduling of the inferred graph, bodies only) as a
    /// line of system `ideal`, and exit: the yardstick for `efficiency`.
    #[arg(long, conflicts_with_all = ["dump_trace", "help_wait"])]
    ideal: bool,
    /// Write the workload's trace to FILE for the peer drivers and exit.
    #[arg(long, value_name = "FILE")]
    dump_trace: Option<PathBuf>,
}

fn parse_kind(s: &str) -> Result<EngineKind, String> {
    s.parse()
        .map_err(|()| format!("unknown engine `{s}`: expected naive, pooled or per-device"))
}

fn parse_helpers(s: &str) -> Result<ReplayHelpers, String> {
    match s {
        "adaptive" => Ok(ReplayHelpers::Adaptive),
        "all" => Ok(ReplayHelpers::All),
        "one" => Ok(ReplayHelpers::One),
        _ => Err(format!(
            "unknown replay helpers `{s}`: expected adaptive, all or one"
        )),
    }
}

fn default_ops(w: Workload) -> usize {
    match w {
        Workload::Fan => 10_000,
        Workload::Priority => 200_000,
        Workload::Roundtrip => 100_000,
        _ => 1_000_000,
    }
}

pub(crate) fn run(args: BenchArgs) -> Result<(), Box<dyn std::error::Error>> {
    let ops = args.ops.unwrap_or_else(|| default_ops(args.workload));
    if ops == 0 || args.runs == 0 || args.n == 0 || args.body_us.is_nan() || args.body_us < 0.0 {
        return Err("--ops, --runs and --n must be at least 1 and --body-us at least 0".into());
    }
    if args.batch > 0 && args.workload == Workload::Roundtrip {
        return Err("--batch does not apply to roundtrip, which waits after every push".into());
    }
    if args.replay && matches!(args.workload, Workload::Priority | Workload::Roundtrip) {
        return Err(format!(
            "--replay does not apply to {}: a replay's nodes have no priority, and roundtrip waits after every push",
            args.workload
        )
        .into());
    }
    if args.serial && args.workload == Workload::Roundtrip {
        return Err(
            "--serial does not apply to roundtrip: its async ops complete on another thread".into(),
        );
    }
    if args.stream && args.workload == Workload::Priority {
        return Err(
            "--stream does not apply to priority: its high-priority ops are timed from their own pushes".into(),
        );
    }
    if args.stream && args.workload == Workload::Roundtrip {
        return Err("--stream does not apply to roundtrip, which waits after every push".into());
    }
    if args.cpu_time && args.workload == Workload::Roundtrip {
        return Err(
            "--cpu-time does not apply to roundtrip, whose time is a thread's round trips".into(),
        );
    }
    if args.cpu_time && !cpu_accounting_supported() {
        return Err(
            "--cpu-time needs per-thread CPU clocks and /proc/self/task, which only Linux has"
                .into(),
        );
    }
    if args.pushers == 0 {
        return Err("--pushers must be at least 1".into());
    }
    if args.pushers > 1 && !matches!(args.workload, Workload::Indep | Workload::IndepNoVars) {
        return Err(format!(
            "--pushers applies to indep and indep-novars only: the ops of {} depend on their push order, which several pushing threads would not keep",
            args.workload
        )
        .into());
    }
    let body_ns = body_ns(&args);
    let spec = Spec {
        workload: args.workload,
        ops,
        n: args.n,
        vars: args.vars,
        body_ns,
    };
    if let Some(path) = &args.dump_trace {
        if args.workload == Workload::Roundtrip {
            return Err("roundtrip is not a trace: the drivers run it themselves".into());
        }
        let mut out = BufWriter::new(File::create(path)?);
        spec.trace().write_to(&mut out)?;
        return Ok(());
    }
    if args.ideal {
        return print_ideal(&args, &spec);
    }
    let mut builder = Engine::builder()
        .kind(args.engine)
        .cpu_workers(args.workers)
        .help_while_waiting(args.help_wait)
        .help_while_pushing(args.help_push);
    if let Some(n) = args.pooled_op_blocks {
        builder = builder.pooled_op_blocks(n);
    }
    if let Some(n) = args.pooled_queue_entries {
        builder = builder.pooled_queue_entries(n);
    }
    if let Some(n) = args.max_lead {
        builder = builder.max_lead(n);
    }
    if let Some(n) = args.max_searching {
        builder = builder.max_searching(n);
    }
    if let Some(us) = args.linger_us {
        builder = builder.linger(std::time::Duration::from_micros(us));
    }
    builder = builder.linger_through_pushes(args.linger_through_pushes);
    builder = builder.keep_one_searching(args.keep_one_searching);
    if let Some(n) = args.pusher_queues_up_to {
        builder = builder.pusher_queues_up_to(n);
    }
    builder = builder.asymmetric_wake_fence(args.asymmetric_fence);
    let mut engine = builder.build()?;
    // The naive executor runs every op on the thread that makes it ready,
    // and a serial scope on the thread that pushes it: the pushing thread
    // is the one worker.
    let workers: usize = match engine.pools().first() {
        Some(_) if args.serial => 1,
        Some(p) => p.1 + usize::from(args.help_wait),
        None => 1,
    };
    let mut system = if args.help_wait {
        format!("depengine-{}-helping", args.engine)
    } else {
        format!("depengine-{}", args.engine)
    };
    if args.help_push {
        system += "-pushing";
    }
    if args.batch > 0 {
        system += &format!("-batch{}", args.batch);
    }
    if args.pushers > 1 {
        system += &format!("-pushers{}", args.pushers);
    }
    if args.replay {
        system += if args.replay_engine_vars {
            "-replay-vars"
        } else {
            "-replay"
        };
        system += match args.replay_helpers {
            ReplayHelpers::Adaptive => "",
            ReplayHelpers::All => "-helpers-all",
            ReplayHelpers::One => "-helpers-one",
        };
    }
    if args.serial {
        system += "-serial";
    }
    if args.stream {
        system += "-stream";
    }
    if let Some(n) = args.pooled_op_blocks {
        system += &format!("-pool{n}");
    }
    if let Some(n) = args.pooled_queue_entries {
        system += &format!("-qpool{n}");
    }
    if let Some(n) = args.max_lead {
        system += &format!("-lead{n}");
    }
    if let Some(n) = args.max_searching {
        system += &format!("-search{n}");
    }
    if let Some(us) = args.linger_us {
        system += &format!("-linger{us}");
    }
    if args.linger_through_pushes {
        system += "-lingerpush";
    }
    if args.keep_one_searching {
        system += "-keepsearch";
    }
    if let Some(n) = args.pusher_queues_up_to {
        system += &format!("-pq{n}");
    }
    if args.asymmetric_fence {
        system += "-afence";
    }

    let mut ns = Vec::with_capacity(args.runs);
    let mut eff = Vec::with_capacity(args.runs);
    let mut p50 = Vec::with_capacity(args.runs);
    let mut p99 = Vec::with_capacity(args.runs);
    let mut makespan = Vec::with_capacity(args.runs);
    let mut push_ns = Vec::with_capacity(args.runs);
    let (mut worker_cpu, mut pusher_cpu, mut run_queue) = (Vec::new(), Vec::new(), Vec::new());
    let (mut worker_sleeps, mut pusher_sleeps, mut pusher_wakes) =
        (Vec::new(), Vec::new(), Vec::new());
    // The workers are the first pool's, which runs the bench's ops.
    let pool = engine
        .pools()
        .first()
        .map(|p| p.0.clone())
        .unwrap_or_default();
    account_cpu(args.cpu_time.then_some(pool.as_str()));
    let total_ops;
    if args.workload == Workload::Roundtrip {
        total_ops = ops;
        roundtrip(&engine, ops.min(10_000), body_ns, None)?;
        for _ in 0..args.runs {
            let t = roundtrip(&engine, ops, body_ns, None)?;
            ns.push(t.as_nanos() as f64 / ops as f64);
        }
    } else {
        let trace = spec.trace();
        total_ops = trace.ops.len();
        let body_total = trace.total_body_ns() as f64;
        // A replay is captured once and pushed for every run, as the rayon
        // driver builds its graph once: the warm-up run allocates the
        // countdowns the timed runs reuse.
        let captured = if args.replay {
            let vars = if args.replay_engine_vars {
                ReplayVars::Engine
            } else {
                ReplayVars::Private
            };
            Some(TraceReplay::capture_with(
                &engine,
                &trace,
                vars,
                args.replay_helpers,
            )?)
        } else {
            None
        };
        let mut run_once = || {
            if let Some(captured) = &captured {
                captured.run(&engine)
            } else if args.serial {
                run_trace_serial(&mut engine, &trace, None)
            } else if args.stream {
                run_trace_stream(&engine, &trace, None)
            } else if args.pushers > 1 {
                run_trace_pushers(&engine, &trace, None, args.pushers)
            } else {
                run_trace_batched(&engine, &trace, None, args.batch)
            }
        };
        run_once()?; // warm-up
        for _ in 0..args.runs {
            let r = run_once()?;
            let t = r.elapsed.as_nanos() as f64;
            ns.push(t / total_ops as f64);
            push_ns.push(r.push_elapsed.as_nanos() as f64 / total_ops as f64);
            eff.push(body_total / (workers.max(1) as f64 * t));
            makespan.push(t / 1e6);
            if let Some(cpu) = r.cpu {
                worker_cpu.push(cpu.worker_share(t));
                pusher_cpu.push(cpu.pusher_share(t));
                run_queue.push(cpu.run_queue_share(t));
                worker_sleeps.push(cpu.worker_sleeps as f64 / total_ops as f64);
                pusher_sleeps.push(cpu.pusher_sleeps as f64 / total_ops as f64);
                pusher_wakes.push(cpu.pusher_wakes as f64 / total_ops as f64);
            }
            if !r.latencies_ns.is_empty() {
                p50.push(quantile(&r.latencies_ns, 0.5) as f64 / 1e3);
                p99.push(quantile(&r.latencies_ns, 0.99) as f64 / 1e3);
            }
        }
        if let Some(captured) = captured {
            captured.release(&engine)?;
        }
    }
    let mut line = result_line(
        &args,
        &system,
        workers,
        total_ops,
        args.runs,
        Summary::of(&ns),
    );
    if !eff.is_empty() && shows_efficiency(&args) {
        line += &format!(" efficiency={:.3}", Summary::of(&eff).median);
    }
    if !push_ns.is_empty() {
        line += &format!(" push_ns_per_op={:.1}", Summary::of(&push_ns).median);
    }
    if args.cpu_time {
        // Every run has its counters: the system has them (checked above)
        // and the bench threads live through every run.
        line += &format!(
            " worker_cpu={:.3} pusher_cpu={:.3} run_queue={:.3} worker_sleeps={:.4} pusher_sleeps={:.4} pusher_wakes={:.4}",
            Summary::of(&worker_cpu).median,
            Summary::of(&pusher_cpu).median,
            Summary::of(&run_queue).median,
            Summary::of(&worker_sleeps).median,
            Summary::of(&pusher_sleeps).median,
            Summary::of(&pusher_wakes).median
        );
    }
    if !p50.is_empty() {
        line += &format!(
            " p50_us={:.1} p99_us={:.1} makespan_ms={:.1}",
            Summary::of(&p50).median,
            Summary::of(&p99).median,
            Summary::of(&makespan).median
        );
    }
    println!("{line}");
    Ok(())
}

/// The fields every result line starts with, as the peer drivers print them.
fn result_line(
    args: &BenchArgs,
    system: &str,
    workers: usize,
    ops: usize,
    runs: usize,
    s: Summary,
) -> String {
    format!(
        "workload={} body_us={} system={system} workers={workers} ops={ops} runs={runs} ns_per_op={:.1} min={:.1} max={:.1}",
        args.workload, args.body_us, s.median, s.min, s.max
    )
}

/// Busy bodies have an efficiency; so has `priority`, whose low-priority
/// ops are busy whatever `--body-us` says.
fn shows_efficiency(args: &BenchArgs) -> bool {
    body_ns(args) > 0 || args.workload == Workload::Priority
}

/// `--body-us` in whole nanoseconds, as the trace's bodies take it.
fn body_ns(args: &BenchArgs) -> u32 {
    (args.body_us * 1000.0).round() as u32
}

/// `--ideal`: the zero-overhead schedule of the workload as a line of
/// system `ideal`.
fn print_ideal(args: &BenchArgs, spec: &Spec) -> Result<(), Box<dyn std::error::Error>> {
    if args.workload == Workload::Roundtrip {
        return Err("roundtrip is not a trace: it has no ideal schedule".into());
    }
    let workers = if args.workers == 0 {
        num_cpus::get()
    } else {
        args.workers
    };
    let trace = spec.trace();
    let ideal = ideal_schedule(&trace, workers);
    let per_op = ideal.makespan_ns as f64 / trace.ops.len() as f64;
    let one = Summary::of(&[per_op]);
    let mut line = result_line(args, "ideal", workers, trace.ops.len(), 1, one);
    line += &format!(
        " critical_path_us={:.1}",
        ideal.critical_path_ns as f64 / 1e3
    );
    if shows_efficiency(args) {
        line += &format!(" efficiency={:.3}", ideal.efficiency);
    }
    println!("{line}");
    Ok(())
}
