//! Where a pool's worker time goes on a benchmark workload: running bodies,
//! idle beside a ready op, or idle with nothing ready.
//!
//! Pushes the ops of a workload (`depengine bench`'s traces) on an engine
//! of `WORKERS` CPU workers, each body spinning for `BODY_US` and noting
//! when it started and ended. An op counts as *ready* from the later of
//! its push and the end of every op it follows in the graph the engine
//! infers ([`depengine::bench::Trace::inferred_edges`]). Worker time not
//! spent in a body is then split, instant by instant, into time when some
//! op was ready but had not started (the scheduling's loss: a wake-up, a
//! completion still being processed, the pushing thread holding the CPU)
//! and time when nothing was ready (the graph's own shape). Both are given
//! in all and after the last push returned. A second line gives the
//! percentiles of the time from a body's end to the start of the next
//! body on the same thread: the protocol's cost per op on a worker (the
//! completion, finding the next op, starting it), plus any wait for work.
//!
//! Run with `cargo run --release --example idle_beside_ready -- [WORKLOAD
//! [WORKERS [BODY_US [OPS [ROUNDS]]]]]` (defaults randsum, 2, 10, 20000,
//! 3). `fan` counts rounds of 101 ops, as `depengine bench --ops` does;
//! `wavefront` runs a grid of side √OPS.

use std::error::Error;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use parking_lot::Mutex;

use depengine::bench::{busy, Spec, Trace, Workload};
use depengine::{Engine, OpDesc, Var};

/// The `i`-th command-line argument, parsed, or `default`.
fn arg<T: std::str::FromStr>(i: usize, default: T) -> Result<T, Box<dyn Error>>
where
    T::Err: std::fmt::Display,
{
    match std::env::args().nth(i) {
        None => Ok(default),
        Some(a) => a
            .parse()
            .map_err(|e| format!("argument {i} ({a:?}): {e}").into()),
    }
}

/// When each op was pushed, started and ended, in ns since the first push.
struct Times {
    /// Per thread, from each body's end to the start of the next body on
    /// the same thread, sorted: the worker's cost per op between bodies.
    gaps: Vec<u64>,
    pushed: Vec<u64>,
    start: Vec<u64>,
    end: Vec<u64>,
    last_push: u64,
    total: u64,
}

/// The instant every time is measured from: a static, so that a body's
/// captures (its op's index and body time) fit in the op block and the
/// push allocates nothing, as in the bench.
static EPOCH: OnceLock<Instant> = OnceLock::new();

fn now() -> u64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Each thread's (op, start, end) records, appended in order: a body
/// writes its own thread's buffer sequentially instead of two slots of
/// shared arrays, whose cache misses would count as idle time.
type Log = Arc<Mutex<Vec<(u32, u64, u64)>>>;
static LOGS: Mutex<Vec<Log>> = Mutex::new(Vec::new());

thread_local! {
    static LOG: Log = {
        let log: Log = Arc::new(Mutex::new(Vec::with_capacity(1 << 16)));
        LOGS.lock().push(log.clone());
        log
    };
}

/// Pushes every op of `trace` (one by one, as the bench does) and waits.
fn run(engine: &Engine, trace: &Trace) -> Result<Times, Box<dyn Error>> {
    let n = trace.ops.len();
    let vars: Vec<Var> = (0..trace.vars).map(|_| engine.new_var()).collect();
    let mut pushed = vec![0; n];
    let (mut reads, mut writes) = (Vec::new(), Vec::new());
    for log in LOGS.lock().iter() {
        log.lock().clear();
    }
    let t0 = now();
    for (i, op) in trace.ops.iter().enumerate() {
        reads.clear();
        writes.clear();
        reads.extend(trace.reads(op).iter().map(|&v| &vars[v as usize]));
        writes.extend(trace.writes(op).iter().map(|&v| &vars[v as usize]));
        let (i, body) = (i as u32, op.body_ns);
        let desc = OpDesc::new("op")
            .reads(&reads[..])
            .writes(&writes[..])
            .priority(op.priority);
        engine.push(desc, move |_| {
            let s = now();
            busy(body);
            let e = now();
            LOG.with(|l| l.lock().push((i, s, e)));
            Ok(())
        })?;
        pushed[i as usize] = now() - t0;
    }
    let last_push = now() - t0;
    engine.wait_for_all()?;
    let total = now() - t0;
    let (mut start, mut end) = (vec![0; n], vec![0; n]);
    let mut gaps = Vec::with_capacity(n);
    let mut seen = 0;
    for log in LOGS.lock().iter() {
        let log = log.lock();
        gaps.extend(log.windows(2).map(|w| w[1].1.saturating_sub(w[0].2)));
        for &(i, s, e) in log.iter() {
            start[i as usize] = s - t0;
            end[i as usize] = e - t0;
            seen += 1;
        }
    }
    if seen != n {
        return Err(format!("{seen} of {n} ops left a record").into());
    }
    gaps.sort_unstable();
    Ok(Times {
        gaps,
        pushed,
        start,
        end,
        last_push,
        total,
    })
}

/// Worker time (ns) idle beside a ready op, and idle with none ready: in
/// all, and after `from`.
struct Idle {
    beside_ready: u64,
    nothing_ready: u64,
    beside_ready_after: u64,
    nothing_ready_after: u64,
}

fn idle(times: &Times, preds: &[Vec<u32>], workers: u64) -> Idle {
    // Events: (time, change in running ops, change in ready-not-started).
    let mut events = Vec::with_capacity(3 * preds.len());
    for (i, ps) in preds.iter().enumerate() {
        let ready = ps
            .iter()
            .map(|&p| times.end[p as usize])
            .fold(times.pushed[i], u64::max);
        // A body that started before its push returned was ready no later.
        events.push((ready.min(times.start[i]), 0i64, 1i64));
        events.push((times.start[i], 1, -1));
        events.push((times.end[i], -1, 0));
    }
    events.sort_unstable();
    let mut out = Idle {
        beside_ready: 0,
        nothing_ready: 0,
        beside_ready_after: 0,
        nothing_ready_after: 0,
    };
    let (mut running, mut waiting, mut last) = (0i64, 0i64, 0u64);
    for (t, d_running, d_waiting) in events {
        let dt = t - last;
        let free = workers.saturating_sub(running.max(0) as u64);
        let after = last >= times.last_push;
        if free > 0 {
            let beside = free.min(waiting.max(0) as u64);
            out.beside_ready += dt * beside;
            out.nothing_ready += dt * (free - beside);
            if after {
                out.beside_ready_after += dt * beside;
                out.nothing_ready_after += dt * (free - beside);
            }
        }
        running += d_running;
        waiting += d_waiting;
        last = t;
    }
    out
}

fn main() -> Result<(), Box<dyn Error>> {
    let workload: Workload = arg(1, Workload::Randsum)?;
    let workers: usize = arg(2, 2)?;
    let body_us: u32 = arg(3, 10)?;
    let ops: usize = arg(4, 20_000)?;
    let rounds: usize = arg(5, 3)?;
    if workload == Workload::Roundtrip {
        return Err("roundtrip has no trace to push; pick another workload".into());
    }
    let mut spec = Spec::new(workload, ops);
    spec.body_ns = body_us.saturating_mul(1_000);
    if workload == Workload::Wavefront {
        // A grid of about OPS ops.
        spec.n = ((ops as f64).sqrt() as usize).max(1);
    }
    let trace = spec.trace();
    let preds = trace.inferred_edges();
    let engine = Engine::builder().cpu_workers(workers).build()?;
    let ms = |ns: u64| ns as f64 / 1e6;
    println!(
        "{workload}, {} ops, {body_us} µs bodies, {workers} workers (the first round warms up)",
        trace.ops.len()
    );
    for round in 0..=rounds {
        let times = run(&engine, &trace)?;
        if round == 0 {
            continue;
        }
        let idle = idle(&times, &preds, workers as u64);
        println!(
            "round {round}: {:.1} ms ({:.0} ns per op), pushes {:.1} ms; worker time idle beside a ready op {:.1} ms ({:.1} after the last push), with nothing ready {:.1} ms ({:.1})",
            ms(times.total),
            times.total as f64 / trace.ops.len() as f64,
            ms(times.last_push),
            ms(idle.beside_ready),
            ms(idle.beside_ready_after),
            ms(idle.nothing_ready),
            ms(idle.nothing_ready_after),
        );
        let q = |f: f64| {
            let g = &times.gaps;
            g.get(((g.len().max(1) - 1) as f64 * f) as usize)
                .copied()
                .unwrap_or(0)
        };
        println!(
            "  from a body's end to the next body's start on the same thread: p10 {} ns, median {} ns, p90 {} ns",
            q(0.1),
            q(0.5),
            q(0.9)
        );
    }
    Ok(())
}
