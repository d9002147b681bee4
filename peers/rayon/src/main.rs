//! rayon on depengine's benchmark workloads, given the graph that depengine
//! infers (explicit edges, from `Trace::inferred_edges`): a hand-built DAG
//! where each op holds a count of the ops it follows, and the op that
//! brings a count to zero spawns (or, for the last one, runs in place) the
//! op it releases. The trace and its edges are built before the timed
//! region; timing starts when the ops that follow nothing are spawned (in
//! trace order, from inside `ThreadPool::scope`) and ends when the scope
//! returns. rayon has no priorities: push time of the high-priority ops =
//! the start of the run. `roundtrip` is not supported (rayon has no op that
//! completes from another thread).
//!
//! usage: depengine-rayon-peer --workload W [--ops N] [--n N] [--body-us B]
//! [--workers N] [--runs N] [--vars N]; prints the line of `depengine bench`.
//!
//! `PEER_CHECK=1` checks the order the graph kept with
//! `depengine::bench::OrderCheck` (the C drivers keep the same check in
//! `peers/common.h`): when op i starts, each var it uses has seen exactly
//! the writes pushed before i, and each var it writes also every read
//! pushed before i. The line then ends with `order_violations=N`, and the
//! driver exits with status 1 when N > 0.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

use depengine::bench::{
    busy, flag_or_exit as arg, print_checked, quantile, DriverResult, OrderCheck, Spec, Summary,
    Trace, Workload,
};

struct Graph {
    succ_start: Vec<u32>,
    succ: Vec<u32>,
    preds: Vec<u32>,
    roots: Vec<u32>,
}

impl Graph {
    fn of(trace: &Trace) -> Graph {
        let edges = trace.inferred_edges();
        let n = edges.len();
        let mut count = vec![0u32; n + 1];
        for p in &edges {
            for &q in p {
                count[q as usize + 1] += 1;
            }
        }
        for i in 0..n {
            count[i + 1] += count[i];
        }
        let mut fill = count.clone();
        let mut succ = vec![0u32; count[n] as usize];
        for (i, p) in edges.iter().enumerate() {
            for &q in p {
                succ[fill[q as usize] as usize] = i as u32;
                fill[q as usize] += 1;
            }
        }
        Graph {
            succ_start: count,
            succ,
            preds: edges.iter().map(|p| p.len() as u32).collect(),
            roots: (0..n as u32)
                .filter(|&i| edges[i as usize].is_empty())
                .collect(),
        }
    }
}

struct Run<'a> {
    trace: &'a Trace,
    graph: &'a Graph,
    pending: Vec<AtomicU32>,
    hi_slot: &'a [u32],
    starts: Vec<AtomicU64>,
    t0: Instant,
    check: Option<&'a OrderCheck>,
}

fn exec<'s>(s: &rayon::Scope<'s>, mut i: u32, run: &'s Run<'s>) {
    loop {
        let op = &run.trace.ops[i as usize];
        let slot = run.hi_slot[i as usize];
        if slot != u32::MAX {
            run.starts[slot as usize].store(run.t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
        if let Some(c) = run.check {
            c.start(run.trace, op);
        }
        busy(op.body_ns);
        if let Some(c) = run.check {
            c.end(run.trace, op);
        }
        let g = run.graph;
        let mut next = u32::MAX;
        for &j in &g.succ[g.succ_start[i as usize] as usize..g.succ_start[i as usize + 1] as usize]
        {
            if run.pending[j as usize].fetch_sub(1, Ordering::AcqRel) == 1 {
                if next != u32::MAX {
                    s.spawn(move |s| exec(s, next, run));
                }
                next = j;
            }
        }
        if next == u32::MAX {
            return;
        }
        i = next;
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let workload: Workload = arg(&args, "--workload", Workload::Indep);
    let default_ops = match workload {
        Workload::Fan => 10_000,
        Workload::Priority => 200_000,
        _ => 1_000_000,
    };
    let body_us: f64 = arg(&args, "--body-us", 0.0);
    let workers: usize = arg(&args, "--workers", 2);
    let runs: usize = arg(&args, "--runs", 5).max(1);
    let body_label = arg(&args, "--body-us", "0".to_string());
    if workload == Workload::Roundtrip {
        println!(
            "workload=roundtrip body_us={body_label} system=rayon workers={workers} unsupported"
        );
        return;
    }
    let spec = Spec {
        workload,
        ops: arg(&args, "--ops", default_ops),
        n: arg(&args, "--n", 1000),
        vars: arg(&args, "--vars", 0),
        body_ns: (body_us * 1000.0).round() as u32,
    };
    let trace = spec.trace();
    let graph = Graph::of(&trace);
    let check = (std::env::var("PEER_CHECK").as_deref() == Ok("1")).then(|| OrderCheck::of(&trace));
    let mut hi_slot = vec![u32::MAX; trace.ops.len()];
    let mut high = 0u32;
    for (i, op) in trace.ops.iter().enumerate() {
        if op.priority > 0 {
            hi_slot[i] = high;
            high += 1;
        }
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build()
        .expect("rayon pool");
    let body_total = trace.total_body_ns() as f64;
    let (mut ns, mut eff, mut p50, mut p99, mut mk) = (vec![], vec![], vec![], vec![], vec![]);
    for r in 0..=runs {
        let run = Run {
            trace: &trace,
            graph: &graph,
            pending: graph.preds.iter().map(|&p| AtomicU32::new(p)).collect(),
            hi_slot: &hi_slot,
            starts: (0..high).map(|_| AtomicU64::new(0)).collect(),
            t0: Instant::now(),
            check: check.as_ref(),
        };
        if let Some(c) = &check {
            c.reset();
        }
        let run = &run;
        let t0 = Instant::now();
        pool.scope(|s| {
            for &i in &graph.roots {
                s.spawn(move |s| exec(s, i, run));
            }
        });
        let t = t0.elapsed().as_nanos() as f64;
        if r == 0 {
            continue; // warm-up
        }
        ns.push(t / trace.ops.len() as f64);
        eff.push(body_total / (workers as f64 * t));
        mk.push(t / 1e6);
        if high > 0 {
            let lat: Vec<u64> = run
                .starts
                .iter()
                .map(|s| s.load(Ordering::Relaxed))
                .collect();
            p50.push(quantile(&lat, 0.5) as f64 / 1e3);
            p99.push(quantile(&lat, 0.99) as f64 / 1e3);
        }
    }
    let mut line = DriverResult {
        workload,
        body_label: &body_label,
        system: "rayon",
        workers,
        ops: trace.ops.len(),
        ns_per_op: &ns,
        efficiency: &eff,
        body_total_ns: body_total,
    }
    .line();
    if high > 0 {
        line += &format!(
            " p50_us={:.1} p99_us={:.1} makespan_ms={:.1}",
            Summary::of(&p50).median,
            Summary::of(&p99).median,
            Summary::of(&mk).median
        );
    }
    if !print_checked(line, check.as_ref()) {
        std::process::exit(1);
    }
}
