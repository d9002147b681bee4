//! One side of a `depengine bench` run: the engine its settings build, the
//! system its result line names, and what its timed runs measured. A plain
//! run has one side; `--versus` gives a second, whose runs alternate with
//! the first's in the same process.

use depengine::bench::{
    line_round_trip_ns, quantile, roundtrip, run_trace_batched, run_trace_pushers,
    run_trace_serial, run_trace_stream, ReplayVars, RunResult, Summary, Trace, TraceReplay,
};
use depengine::{Engine, ReplayHelpers};
use std::time::Instant;

use super::{body_ns, result_line, shows_efficiency, BenchArgs};

/// The engine of one set of settings, ready to run the workload.
pub(super) struct Side {
    engine: Engine,
    /// The name on the result line: the executor and every setting that
    /// differs from the library's defaults.
    pub(super) system: String,
    /// The threads the line reports and the efficiency divides by.
    pub(super) workers: usize,
    /// The captured graph, with `--replay`: captured once, pushed by every
    /// run, as the rayon driver builds its graph once.
    replay: Option<TraceReplay>,
    /// With `--replay`: the capture's time per node, in ns (timed once,
    /// before any run; a replay pushed k times repays it where k times
    /// what it saves per push exceeds it).
    capture_ns_per_op: Option<f64>,
    samples: Samples,
}

/// Every figure of every timed run, in run order.
#[derive(Default)]
struct Samples {
    ns: Vec<f64>,
    eff: Vec<f64>,
    p50: Vec<f64>,
    p99: Vec<f64>,
    makespan: Vec<f64>,
    push_ns: Vec<f64>,
    worker_cpu: Vec<f64>,
    pusher_cpu: Vec<f64>,
    run_queue: Vec<f64>,
    worker_sleeps: Vec<f64>,
    pusher_sleeps: Vec<f64>,
    pusher_wakes: Vec<f64>,
    /// `--line-probe`: the round trip before each timed run, in ns.
    line_rtt: Vec<f64>,
}

/// Round trips of `--line-probe` before each timed run: 2-10 ms on the
/// 2-core sandbox, and enough that a scheduler's tick inside the probe
/// moves its mean by little.
const LINE_PROBE_TRIPS: u64 = 20_000;

impl Side {
    /// Builds the engine `args` describe, its worker threads' names
    /// starting with `thread_prefix`, and, with `--replay`, captures
    /// `trace` for it (not timed).
    pub(super) fn new(
        args: &BenchArgs,
        trace: Option<&Trace>,
        thread_prefix: &str,
    ) -> Result<Side, Box<dyn std::error::Error>> {
        let engine = build_engine(args, thread_prefix)?;
        // The naive executor runs every op on the thread that makes it
        // ready, and a serial scope on the thread that pushes it: the
        // pushing thread is the one worker.
        let workers: usize = match engine.pools().first() {
            Some(_) if args.serial => 1,
            Some(p) => p.1 + usize::from(args.help_wait),
            None => 1,
        };
        let (replay, capture_ns_per_op) = match trace {
            Some(trace) if args.replay => {
                let vars = if args.replay_engine_vars {
                    ReplayVars::Engine
                } else {
                    ReplayVars::Private
                };
                let start = Instant::now();
                let replay = TraceReplay::capture_with(&engine, trace, vars, args.replay_helpers)?;
                let ns = start.elapsed().as_nanos() as f64 / replay.len().max(1) as f64;
                (Some(replay), Some(ns))
            }
            _ => (None, None),
        };
        Ok(Side {
            engine,
            system: system_name(args),
            workers,
            replay,
            capture_ns_per_op,
            samples: Samples::default(),
        })
    }

    /// What the names of the first pool's worker threads start with,
    /// before their index: the threads `--cpu-time` counts as workers.
    pub(super) fn cpu_threads(&self) -> String {
        let pool = self
            .engine
            .pools()
            .first()
            .map(|p| p.0.clone())
            .unwrap_or_default();
        format!("{}-{pool}-", self.engine.thread_name_prefix())
    }

    /// The `--warm-up` runs, not recorded: the first allocates the
    /// blocks, queues and countdowns the timed runs reuse.
    pub(super) fn warm_up(
        &mut self,
        args: &BenchArgs,
        ops: usize,
        trace: Option<&Trace>,
    ) -> Result<(), Box<dyn std::error::Error>> {
        for _ in 0..args.warm_up {
            match trace {
                None => {
                    roundtrip(&self.engine, ops.min(10_000), body_ns(args), None)?;
                }
                Some(trace) => {
                    self.run_trace(args, trace)?;
                }
            }
        }
        Ok(())
    }

    /// One timed run, recorded; returns its ns per op.
    pub(super) fn timed_run(
        &mut self,
        args: &BenchArgs,
        ops: usize,
        trace: Option<&Trace>,
    ) -> Result<f64, Box<dyn std::error::Error>> {
        if args.line_probe {
            let ns = line_round_trip_ns(LINE_PROBE_TRIPS)
                .ok_or("--line-probe: could not start the probe's second thread")?;
            self.samples.line_rtt.push(ns);
        }
        let Some(trace) = trace else {
            let t = roundtrip(&self.engine, ops, body_ns(args), None)?;
            let ns = t.as_nanos() as f64 / ops as f64;
            self.samples.ns.push(ns);
            return Ok(ns);
        };
        let r = self.run_trace(args, trace)?;
        let total_ops = trace.ops.len() as f64;
        let t = r.elapsed.as_nanos() as f64;
        let s = &mut self.samples;
        s.ns.push(t / total_ops);
        s.push_ns.push(r.push_elapsed.as_nanos() as f64 / total_ops);
        s.eff
            .push(trace.total_body_ns() as f64 / (self.workers.max(1) as f64 * t));
        s.makespan.push(t / 1e6);
        if let Some(cpu) = r.cpu {
            s.worker_cpu.push(cpu.worker_share(t));
            s.pusher_cpu.push(cpu.pusher_share(t));
            s.run_queue.push(cpu.run_queue_share(t));
            s.worker_sleeps.push(cpu.worker_sleeps as f64 / total_ops);
            s.pusher_sleeps.push(cpu.pusher_sleeps as f64 / total_ops);
            s.pusher_wakes.push(cpu.pusher_wakes as f64 / total_ops);
        }
        if !r.latencies_ns.is_empty() {
            s.p50.push(quantile(&r.latencies_ns, 0.5) as f64 / 1e3);
            s.p99.push(quantile(&r.latencies_ns, 0.99) as f64 / 1e3);
        }
        Ok(t / total_ops)
    }

    fn run_trace(
        &mut self,
        args: &BenchArgs,
        trace: &Trace,
    ) -> Result<RunResult, depengine::EngineError> {
        if let Some(replay) = &self.replay {
            replay.run(&self.engine)
        } else if args.serial {
            run_trace_serial(&mut self.engine, trace, None)
        } else if args.stream {
            run_trace_stream(&self.engine, trace, None)
        } else if args.pushers > 1 {
            run_trace_pushers(&self.engine, trace, None, args.pushers)
        } else {
            run_trace_batched(&self.engine, trace, None, args.batch)
        }
    }

    /// The result line of the runs recorded, and the release of what the
    /// side captured.
    pub(super) fn finish(
        self,
        args: &BenchArgs,
        total_ops: usize,
    ) -> Result<String, Box<dyn std::error::Error>> {
        if let Some(replay) = self.replay {
            replay.release(&self.engine)?;
        }
        let s = &self.samples;
        let mut line = result_line(
            args,
            &self.system,
            self.workers,
            total_ops,
            s.ns.len(),
            Summary::of(&s.ns),
        );
        if !s.eff.is_empty() && shows_efficiency(args) {
            line += &format!(" efficiency={:.3}", Summary::of(&s.eff).median);
        }
        if !s.push_ns.is_empty() {
            line += &format!(" push_ns_per_op={:.1}", Summary::of(&s.push_ns).median);
        }
        if let Some(ns) = self.capture_ns_per_op {
            line += &format!(" capture_ns_per_op={ns:.1}");
        }
        if args.cpu_time {
            // Every run has its counters: the system has them (checked
            // before the engine was built) and the bench threads live
            // through every run.
            line += &format!(
                " worker_cpu={:.3} pusher_cpu={:.3} run_queue={:.3} worker_sleeps={:.4} pusher_sleeps={:.4} pusher_wakes={:.4}",
                Summary::of(&s.worker_cpu).median,
                Summary::of(&s.pusher_cpu).median,
                Summary::of(&s.run_queue).median,
                Summary::of(&s.worker_sleeps).median,
                Summary::of(&s.pusher_sleeps).median,
                Summary::of(&s.pusher_wakes).median
            );
        }
        if !s.line_rtt.is_empty() {
            let rtt = Summary::of(&s.line_rtt);
            line += &format!(
                " line_rtt_ns={:.0} line_rtt_min={:.0} line_rtt_max={:.0}",
                rtt.median, rtt.min, rtt.max
            );
        }
        if !s.p50.is_empty() {
            line += &format!(
                " p50_us={:.1} p99_us={:.1} makespan_ms={:.1}",
                Summary::of(&s.p50).median,
                Summary::of(&s.p99).median,
                Summary::of(&s.makespan).median
            );
        }
        Ok(line)
    }
}

fn build_engine(args: &BenchArgs, thread_prefix: &str) -> Result<Engine, depengine::BuildError> {
    let mut builder = Engine::builder()
        .thread_name_prefix(thread_prefix)
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
    if let Some(n) = args.pusher_queues_up_to {
        builder = builder.pusher_queues_up_to(n);
    }
    if let Some(on) = args.asymmetric_fence {
        builder = builder.asymmetric_wake_fence(on);
    }
    builder
        .linger_through_pushes(args.linger_through_pushes)
        .keep_one_searching(args.keep_one_searching)
        .deal_pushes(args.deal_pushes)
        .build()
}

/// `depengine-<executor>` and a suffix for every way of pushing and every
/// setting given, so that lines of different settings never share a name.
fn system_name(args: &BenchArgs) -> String {
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
    if args.deal_pushes {
        system += "-deal";
    }
    match args.asymmetric_fence {
        Some(true) => system += "-afence",
        Some(false) => system += "-fullfence",
        None => {}
    }
    if args.warm_up != 1 {
        system += &format!("-warm{}", args.warm_up);
    }
    system
}
