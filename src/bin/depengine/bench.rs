//! `depengine bench`: the engine on the benchmark workloads (empty or busy
//! bodies), and the traces that the peer drivers replay.

use std::ffi::OsString;
use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;

use clap::error::ErrorKind;
use clap::{Args, CommandFactory, FromArgMatches, Parser};

use depengine::bench::{
    account_cpu_threads, cpu_accounting_supported, ideal_schedule, quantile, Spec, Summary,
    Workload,
};
use depengine::{EngineKind, ReplayHelpers};

/// What the names of `--versus`'s second engine's worker threads start
/// with (the first keeps the library's `depengine`): short, so that the
/// kernel's 15 bytes keep the index.
const VERSUS_THREADS: &str = "versus";

mod side;

use side::Side;

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
    /// Timed runs after the warm-up runs; the median is reported.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Runs before the timed ones, not recorded (default 1: it allocates
    /// the op blocks, queues and countdowns the timed runs reuse). More
    /// let what adapts settle first: a replay's helpers try a single
    /// helper on a graph whose runs take long only after many runs
    /// (`ReplayHelpers::Adaptive`). Other than 1, the line's system gets
    /// `-warm<N>`.
    #[arg(long, value_name = "N", default_value_t = 1, conflicts_with_all = ["dump_trace", "ideal"])]
    warm_up: usize,
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
    /// `-replay-vars`), and `capture_ns_per_op`: the capture's time per
    /// node (once, before the runs), what pushing the graph whole must
    /// repay.
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
    /// default: the library's, 16; 0: none). Given, the line's system gets
    /// `-pq<N>`.
    #[arg(long, value_name = "N", conflicts_with_all = ["dump_trace", "ideal"])]
    pusher_queues_up_to: Option<usize>,
    /// Makes each pushing thread's queue a ring per worker, dealt to in
    /// turn (`EngineBuilder::deal_pushes`). The line's system gets
    /// `-deal`.
    #[arg(long, conflicts_with_all = ["dump_trace", "ideal"])]
    deal_pushes: bool,
    /// Splits the pools' sleep fence (on, the value when none is given)
    /// or keeps it whole (off) in every pool: a compiler fence after each
    /// op queued, a process-wide barrier (Linux's membarrier) at each
    /// worker's sleep (`EngineBuilder::asymmetric_wake_fence`; default:
    /// the library's, split in pools of up to 16 workers). Given, the
    /// line's system gets `-afence` or `-fullfence`.
    #[arg(long, value_name = "on|off", num_args = 0..=1, default_missing_value = "on",
          value_parser = parse_on_off, conflicts_with_all = ["dump_trace", "ideal"])]
    asymmetric_fence: Option<bool>,
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
    /// roundtrip. With --versus, on both lines, each side's own workers
    /// counted (the second engine's threads are named `versus-...`).
    #[arg(long, conflicts_with_all = ["dump_trace", "ideal"])]
    cpu_time: bool,
    /// Before each timed run (not timed), pass one cache line between
    /// this thread and another 20,000 times and report the mean round
    /// trip: `line_rtt_ns` (median over the runs), `line_rtt_min` and
    /// `line_rtt_max`. Every op passes lines between the pushing thread
    /// and a worker, and on some virtual machines that passage takes
    /// several times longer in some seconds than in others: the figure
    /// tells which state a line was measured in. With --versus, each
    /// side probes before its own runs.
    #[arg(long, conflicts_with_all = ["dump_trace", "ideal"])]
    line_probe: bool,
    /// Print what an engine with no overhead would do on `--workers`
    /// workers (list scheduling of the inferred graph, bodies only) as a
    /// line of system `ideal`, and exit: the yardstick for `efficiency`.
    #[arg(long, conflicts_with_all = ["dump_trace", "help_wait"])]
    ideal: bool,
    /// Write the workload's trace to FILE for the peer drivers and exit.
    #[arg(long, value_name = "FILE")]
    dump_trace: Option<PathBuf>,
    /// Run a second engine beside the first in the same process: this
    /// command's flags with FLAGS after them (a flag given twice keeps its
    /// last value), e.g. `--versus "--linger-us 0"`. After the warm-up
    /// runs of each, the two alternate for `--runs` rounds, each going first in
    /// every other round; both result lines are printed, then a `paired`
    /// line: the median, quartiles, min and max over the rounds of the
    /// second's ns per op over the first's, in how many rounds the second
    /// was faster, and the sign test of that count (`sign_p`: the chance
    /// of a split that uneven between two equals). Runs milliseconds apart
    /// see the same state of the machine, where separate processes see
    /// its drift. FLAGS may not change the workload or the number of runs
    /// or warm-up runs;
    /// --cpu-time goes outside FLAGS and applies to both.
    #[arg(long, value_name = "FLAGS", allow_hyphen_values = true, conflicts_with_all = ["dump_trace", "ideal"])]
    versus: Option<String>,
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

fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("unknown setting `{s}`: expected on or off")),
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
    check(&args, ops)?;
    let body_ns = body_ns(&args);
    let spec = Spec {
        workload: args.workload,
        ops,
        n: args.n,
        vars: args.vars,
        body_ns,
    };
    // Refused before anything is built: past a trace's 32-bit ids the ops
    // would name the wrong vars.
    spec.check()?;
    if let Some(available) = available_memory() {
        if args.dump_trace.is_some() || args.ideal {
            spec.check_trace_memory(available)?;
        } else if args.workload != Workload::Roundtrip {
            spec.check_run_memory(available)?;
        }
    }
    if let Some(path) = &args.dump_trace {
        if args.workload == Workload::Roundtrip {
            return Err("roundtrip is not a trace: the drivers run it themselves".into());
        }
        let mut out = BufWriter::new(File::create(path)?);
        spec.try_trace()?.write_to(&mut out)?;
        return Ok(());
    }
    if args.ideal {
        return print_ideal(&args, &spec);
    }
    let versus = match &args.versus {
        Some(flags) => Some(versus_args(&args, flags)?),
        None => None,
    };
    let trace = match args.workload {
        Workload::Roundtrip => None,
        _ => Some(spec.try_trace()?),
    };
    let total_ops = trace.as_ref().map_or(ops, |t| t.ops.len());
    let mut first = Side::new(&args, trace.as_ref(), depengine::DEFAULT_THREAD_NAME_PREFIX)?;
    let a_threads = args.cpu_time.then(|| first.cpu_threads());
    account_cpu_threads(a_threads.as_deref());
    let Some(b_args) = versus else {
        first.warm_up(&args, ops, trace.as_ref())?;
        for _ in 0..args.runs {
            first.timed_run(&args, ops, trace.as_ref())?;
        }
        println!("{}", first.finish(&args, total_ops)?);
        return Ok(());
    };
    // The second engine's threads named apart, so that `--cpu-time`
    // counts each side's own workers.
    let mut second = Side::new(&b_args, trace.as_ref(), VERSUS_THREADS)?;
    let b_threads = args.cpu_time.then(|| second.cpu_threads());
    if second.system == first.system && second.workers == first.workers {
        second.system += "-b";
    }
    first.warm_up(&args, ops, trace.as_ref())?;
    second.warm_up(&b_args, ops, trace.as_ref())?;
    let (mut a_ns, mut b_ns) = (Vec::new(), Vec::new());
    for round in 0..args.runs {
        // Each side goes first in every other round, so that what the
        // first run of a round pays for (the other side's workers going to
        // sleep, caches the other side filled) falls on both alike.
        for a_turn in [first_goes_first(round), !first_goes_first(round)] {
            if a_turn {
                account_cpu_threads(a_threads.as_deref());
                a_ns.push(first.timed_run(&args, ops, trace.as_ref())?);
            } else {
                account_cpu_threads(b_threads.as_deref());
                b_ns.push(second.timed_run(&b_args, ops, trace.as_ref())?);
            }
        }
    }
    let (a_system, a_workers) = (first.system.clone(), first.workers);
    let (b_system, b_workers) = (second.system.clone(), second.workers);
    println!("{}", first.finish(&args, total_ops)?);
    println!("{}", second.finish(&b_args, total_ops)?);
    let pair = Paired::of(&a_ns, &b_ns);
    println!(
        "paired workload={} body_us={} a={a_system} a_workers={a_workers} b={b_system} b_workers={b_workers} rounds={} ratio={:.3} q1={:.3} q3={:.3} min={:.3} max={:.3} b_faster={} sign_p={:.2e}",
        args.workload,
        args.body_us,
        a_ns.len(),
        pair.median,
        pair.q1,
        pair.q3,
        pair.min,
        pair.max,
        pair.b_faster,
        pair.sign_p
    );
    Ok(())
}

/// Refuses the arguments that name no run, with what to do instead.
fn check(args: &BenchArgs, ops: usize) -> Result<(), Box<dyn std::error::Error>> {
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
    Ok(())
}

/// The second side of `--versus FLAGS`: this command's own arguments with
/// `FLAGS` after them, a flag given twice taking its last value. The
/// workload and the number of runs must stay as they are: the two sides
/// run the same trace, round by round.
fn versus_args(args: &BenchArgs, flags: &str) -> Result<BenchArgs, Box<dyn std::error::Error>> {
    // Caught before the parse, which would blame the flags' conflict
    // with `--versus` itself.
    let alone = ["--cpu-time", "--ideal", "--dump-trace"];
    if let Some(flag) = flags
        .split_whitespace()
        .find_map(|t| alone.into_iter().find(|f| t.split('=').next() == Some(f)))
    {
        return Err(if flag == "--cpu-time" {
            format!("--versus {flags:?}: --cpu-time is for both sides of a pair; give it outside --versus")
        } else {
            format!("--versus {flags:?}: {flag} is not for one side of a pair; run it without --versus")
        }
        .into());
    }
    let mut argv: Vec<OsString> = vec!["bench".into()];
    argv.extend(own_args());
    argv.extend(flags.split_whitespace().map(OsString::from));
    let matches = BenchCommand::command()
        .args_override_self(true)
        .try_get_matches_from(argv)
        .map_err(|e| match e.kind() {
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                format!("--versus {flags:?}: asks for help or the version, which `depengine bench --help` gives; FLAGS are the second side's settings")
            }
            _ => format!("--versus {flags:?}: {}", first_line(&e.to_string())),
        })?;
    let b = BenchCommand::from_arg_matches(&matches)
        .map_err(|e| format!("--versus {flags:?}: {e}"))?
        .args;
    let ops = args.ops.unwrap_or_else(|| default_ops(args.workload));
    let b_ops = b.ops.unwrap_or_else(|| default_ops(b.workload));
    let kept = [
        ("--workload", b.workload == args.workload),
        ("--ops", b_ops == ops),
        ("--n", b.n == args.n),
        ("--body-us", b.body_us.to_bits() == args.body_us.to_bits()),
        ("--vars", b.vars == args.vars),
        ("--runs", b.runs == args.runs),
        ("--warm-up", b.warm_up == args.warm_up),
    ];
    if let Some((flag, _)) = kept.iter().find(|(_, same)| !same) {
        return Err(format!(
            "--versus {flags:?} changes {flag}: both sides run the same workload for the same number of rounds; give {flag} outside --versus"
        )
        .into());
    }
    check(&b, b_ops).map_err(|e| format!("--versus {flags:?}: {e}"))?;
    Ok(b)
}

/// The memory the system says is available (`MemAvailable` of
/// `/proc/meminfo`), where it says so.
fn available_memory() -> Option<u64> {
    mem_available(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
fn mem_available(info: &str) -> Option<u64> {
    let kb: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    kb.checked_mul(1024)
}

/// A clap message's first line without its `error: `: the usage and the
/// hint after it speak of the whole command, not of the flags given.
fn first_line(message: &str) -> &str {
    let line = message.lines().next().unwrap_or_default();
    line.strip_prefix("error: ").unwrap_or(line)
}

/// The arguments after `bench` on this process's command line.
fn own_args() -> Vec<OsString> {
    // The subcommand is the first argument: `depengine` has no flags of
    // its own that could come before it.
    std::env::args_os()
        .skip(1)
        .skip_while(|a| a != "bench")
        .skip(1)
        .collect()
}

/// The `bench` subcommand's arguments alone, to parse `--versus`'s side.
#[derive(Parser, Debug)]
#[command(name = "bench")]
struct BenchCommand {
    #[command(flatten)]
    args: BenchArgs,
}

/// Whether the first side runs first in `round` (0-based): in the even
/// rounds, the second side in the odd ones.
fn first_goes_first(round: usize) -> bool {
    round % 2 == 0
}

/// The second side's ns per op over the first's, round by round. A pair
/// of runs milliseconds apart shares the machine's state of the moment,
/// which a ratio of medians over separate processes does not.
#[derive(Debug, PartialEq)]
struct Paired {
    /// The median ratio (nearest rank, the upper of two middles).
    median: f64,
    /// The first and third quartiles (nearest rank): half the rounds'
    /// ratios lie between them.
    q1: f64,
    q3: f64,
    min: f64,
    max: f64,
    /// Rounds in which the second side was faster (ratio below 1).
    b_faster: usize,
    /// The two-sided sign test of the rounds (ties left out): how likely
    /// a count of faster rounds at least this far from half would be if
    /// neither side were faster. Unlike the ratio's quartiles, an outlier
    /// round moves it by one round at most.
    sign_p: f64,
}

impl Paired {
    /// The ratios of `b[i]` to `a[i]`, over the rounds both have.
    fn of(a: &[f64], b: &[f64]) -> Paired {
        let r: Vec<f64> = a.iter().zip(b).map(|(a, b)| b / a).collect();
        let at = |q: f64| quantile(&r, q);
        Paired {
            median: Summary::of(&r).median,
            q1: at(0.25),
            q3: at(0.75),
            min: at(0.0),
            max: at(1.0),
            b_faster: r.iter().filter(|&&x| x < 1.0).count(),
            sign_p: sign_test(
                r.iter().filter(|&&x| x < 1.0).count(),
                r.iter().filter(|&&x| x > 1.0).count(),
            ),
        }
    }
}

/// The exact two-sided binomial sign test: with `wins` and `losses` out
/// of `wins + losses` fair coin tosses, the chance of a split at least as
/// uneven. Summed in logarithms, so that long runs do not underflow.
fn sign_test(wins: usize, losses: usize) -> f64 {
    let n = wins + losses;
    if n == 0 {
        return 1.0;
    }
    let tail = wins.min(losses);
    let ln_half_n = n as f64 * std::f64::consts::LN_2;
    let mut ln_choose = 0.0; // ln C(n, 0)
    let mut p = 0.0;
    for i in 0..=tail {
        p += (ln_choose - ln_half_n).exp();
        ln_choose += ((n - i) as f64).ln() - ((i + 1) as f64).ln();
    }
    (2.0 * p).min(1.0)
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
    let trace = spec.try_trace()?;
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

#[cfg(test)]
mod tests {
    use super::{available_memory, first_goes_first, mem_available, sign_test, Paired};

    #[test]
    fn the_memory_available_is_read_from_meminfo() {
        let info = "MemTotal:       24576000 kB\nMemFree:  100 kB\nMemAvailable:   2048 kB\n";
        assert_eq!(mem_available(info), Some(2048 * 1024));
        assert_eq!(mem_available("MemTotal: 5 kB\n"), None);
        assert_eq!(mem_available("MemAvailable: lots\n"), None);
        #[cfg(target_os = "linux")]
        assert!(available_memory().is_some_and(|b| b > 0));
    }

    #[test]
    fn the_sides_take_turns_at_going_first() {
        let firsts: Vec<bool> = (0..4).map(first_goes_first).collect();
        assert_eq!(firsts, [true, false, true, false]);
    }

    #[test]
    fn a_pair_is_summed_up_round_by_round() {
        // Ratios 0.5, 2, 1.5, 1, 3 (b over a): sorted 0.5 1 1.5 2 3.
        let a = [2.0, 1.0, 2.0, 4.0, 1.0];
        let b = [1.0, 2.0, 3.0, 4.0, 3.0];
        let p = Paired::of(&a, &b);
        assert_eq!(
            p,
            Paired {
                median: 1.5,
                q1: 1.0,
                q3: 2.0,
                min: 0.5,
                max: 3.0,
                b_faster: 1,
                // One round a tie: 1 faster, 3 slower, 2 × 5/16.
                sign_p: 0.625,
            }
        );
        // Paired by round: the medians of the sides alone (2 and 3) would
        // say 1.5 too, but swapping two of b's rounds changes the pairs.
        let swapped = Paired::of(&a, &[2.0, 1.0, 3.0, 4.0, 3.0]);
        assert_eq!(swapped.min, 1.0);
        assert_eq!(swapped.b_faster, 0);
        assert_eq!(Paired::of(&[], &[]).b_faster, 0);
        // A tie counts neither way.
        let tie = Paired::of(&[1.0, 1.0, 1.0], &[1.0, 0.5, 2.0]);
        assert_eq!((tie.b_faster, tie.sign_p), (1, sign_test(1, 1)));
    }

    #[test]
    fn the_sign_test_is_the_binomial_tail_doubled() {
        // 10 tosses: P(X <= 1) = (1 + 10) / 1024, both tails twice that.
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.max(1e-300);
        assert!(close(sign_test(1, 9), 22.0 / 1024.0));
        assert!(close(sign_test(9, 1), 22.0 / 1024.0));
        assert!(close(sign_test(0, 10), 2.0 / 1024.0));
        // An even split is no evidence at all; one off it, little.
        assert_eq!(sign_test(5, 5), 1.0);
        assert!(close(sign_test(4, 6), 2.0 * 386.0 / 1024.0));
        assert_eq!(sign_test(0, 0), 1.0);
        // 3 of 20: (1 + 20 + 190 + 1140) / 2^20, doubled.
        assert!(close(sign_test(3, 17), 2.0 * 1351.0 / 1_048_576.0));
        // Long runs stay finite: 0 of 2000 is 2^-1999, which underflows
        // to 0 only below f64's range, not through a term of the sum.
        let p = sign_test(1000, 1000);
        assert!(p > 0.9 && p <= 1.0, "{p}");
        assert!(sign_test(700, 1300) < 1e-30);
    }
}
