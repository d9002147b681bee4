//! A yardstick for depengine's benchmarks: the default engine's inference
//! protocol with the lightest op that keeps it, on the same traces.
//!
//! Why: BENCHMARKS-HISTORY.md ("Per-op duties taken out one at a time") found that
//! none of the duties a patch can take out of the engine's op is where its
//! time beyond the bodies goes at 2 workers. This driver keeps the
//! protocol and drops everything else, so that the engine's cost can be
//! read against it row by row: what the engine spends beyond this is
//! layout and machinery, not inference.
//!
//! What it keeps, as the engine does: one pushing thread appends each op
//! to its vars in push order, each var under a lock of its own, with a
//! count of granted reads, a write flag and a queue of the ops not yet
//! granted. Reads between two writes share the var, a write holds it
//! alone. An op's count starts at its vars + 1 (the pusher's guard, as
//! `Core::push` keeps it) and the op is ready when it reaches zero. The
//! worker that completes an op releases its vars and grants what waited,
//! keeps one op it made ready to run next and puts the rest on its own
//! deque; ops ready at their push go to a shared injector; an idle worker
//! steals from the injector, then from the other workers. The pushing
//! thread runs at most `--max-lead` ops ahead of the completions (default
//! the engine's, 2,048 per worker), looking every 256 pushes.
//!
//! What it drops: an op is an index into the trace, not a closure in a
//! block; its var list is deduplicated (a var both read and written is a
//! write, as in the engine) before the clock starts; the var state is a
//! dense array (a lock, a count, a flag and a queue: 48 bytes a var) and
//! the op counts an array of 4-byte counters; no names, versions,
//! failures, priorities, deletions or waits on one var. Idle workers spin
//! and yield every 64 looks instead of sleeping.
//!
//! usage: depengine-lean-control --workload W [--ops N] [--n N] [--body-us B]
//! [--workers N] [--runs N] [--vars N] [--max-lead N] [--op-stride B]
//! [--var-stride B] [--recycle N [--recycle-order shared|batched|ring]];
//! prints the line of
//! `depengine bench` with `system=lean`. `roundtrip` and `priority` are not
//! supported (no async ops, no priorities). `--op-stride B` and
//! `--var-stride B` space the op counts and the var states B bytes apart
//! (default: dense), as the engine's op blocks and vars are, to see what
//! density is worth. `--recycle N` hands N op slots round instead, as
//! the engine's block pool does: the pusher takes a free one for each op
//! (in batches, from a shared list) and the worker that completes the op
//! gives it back, so the lines of an op's state go from a worker's core
//! to the pusher's for every op. `--recycle-order` says how they go
//! round: `shared` (the default) through one queue, a slot at a time;
//! `batched` in batches of 64 through a locked list, as the engine's
//! pool moves its blocks; `ring` in address order, the k-th op pushed
//! taking slot k mod N once the op that held it has completed.
//!
//! `PEER_CHECK=1` checks the order the run kept, as the other drivers do
//! (`depengine::bench::OrderCheck`); the line then ends with
//! `order_violations=N`, and the driver exits with status 1 when N > 0.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

use crossbeam_deque::{Injector, Steal, Stealer, Worker};
use crossbeam_utils::CachePadded;
use depengine::bench::{
    busy, flag_or_exit as arg, print_checked, DriverResult, OrderCheck, Spec, Trace, Workload,
};
use parking_lot::Mutex;

/// Marks a queued write in a var's queue (op ids stay below it).
const WRITE: u32 = 1 << 31;
/// Pushes between two looks at the lead, as the engine's `CHECK_EVERY`.
const CHECK_EVERY: usize = 256;
/// Looks an idle worker spins between two yields.
const SPINS_PER_YIELD: u32 = 64;
/// Slots given back at once with `--recycle-order batched`, as the
/// engine's block pool moves its blocks.
const BATCH: usize = 64;

/// How `--recycle` hands the op slots round (`--recycle-order`).
// One value per run, in place: boxing the injector would add a load to
// every take and give of `shared`, whose figures predate the others.
#[allow(clippy::large_enum_variant)]
enum Recycle {
    /// `shared` (the default): each completed slot goes back on its own
    /// through one queue that every worker and the pusher use.
    Shared(Injector<u32>),
    /// `batched`, as the engine's block pool: a worker gives slots back
    /// in batches of [`BATCH`] through a locked list, which the pusher
    /// takes the newest batch of.
    Batched(Mutex<Vec<Vec<u32>>>),
    /// `ring`: the k-th op pushed takes slot k mod N, so the pusher walks
    /// the slots in address order; it waits, if need be, for the op that
    /// held the slot to complete (the slot's third word is 1 meanwhile).
    Ring(u64),
}

/// One var's state, under its lock.
#[derive(Default)]
struct VarQ {
    readers: u32,
    writer: bool,
    /// Ops not yet granted, in push order (`WRITE` set for writes).
    queue: VecDeque<u32>,
}

/// Each op's vars, deduplicated, written ones first: `vars[start[i]..
/// start[i + 1]]`, the first `nwrites[i]` of them written.
struct OpVars {
    start: Vec<u32>,
    nwrites: Vec<u32>,
    vars: Vec<u32>,
}

impl OpVars {
    fn of(trace: &Trace) -> OpVars {
        let mut start = vec![0u32];
        let mut nwrites = Vec::with_capacity(trace.ops.len());
        let mut vars = Vec::with_capacity(trace.var_ids.len());
        for op in &trace.ops {
            let first = vars.len();
            for &v in trace.writes(op) {
                if !vars[first..].contains(&v) {
                    vars.push(v);
                }
            }
            let w = vars.len() - first;
            for &v in trace.reads(op) {
                if !vars[first..].contains(&v) {
                    vars.push(v);
                }
            }
            nwrites.push(w as u32);
            start.push(vars.len() as u32);
        }
        OpVars {
            start,
            nwrites,
            vars,
        }
    }

    /// The op's vars, each with whether it is written.
    fn of_op(&self, i: u32) -> impl Iterator<Item = (u32, bool)> + '_ {
        let s = self.start[i as usize] as usize;
        let e = self.start[i as usize + 1] as usize;
        let w = s + self.nwrites[i as usize] as usize;
        (s..e).map(move |k| (self.vars[k], k < w))
    }
}

struct Shared<'a> {
    trace: &'a Trace,
    ops: OpVars,
    /// Var v's state is `vars[v * var_step]` (`--var-stride`).
    vars: Vec<Mutex<VarQ>>,
    var_step: usize,
    /// The op slots: slot s's count is `pending[s * op_step]`
    /// (`--op-stride`), and with `--recycle` the op it holds is at
    /// `pending[s * op_step + 1]`. Without it, slot i is op i's for good.
    pending: Vec<AtomicU32>,
    op_step: usize,
    /// `--recycle`: how the slots go round, given back by the workers
    /// once their op completed, as the engine's block pool hands its op
    /// blocks round.
    recycle: Option<Recycle>,
    injector: Injector<u32>,
    stealers: Vec<Stealer<u32>>,
    /// Ops each worker completed, all runs together.
    done: Vec<CachePadded<AtomicU64>>,
    shutdown: AtomicBool,
    check: Option<OrderCheck>,
}

impl Shared<'_> {
    fn var(&self, v: u32) -> &Mutex<VarQ> {
        &self.vars[v as usize * self.var_step]
    }

    fn count(&self, s: u32) -> &AtomicU32 {
        &self.pending[s as usize * self.op_step]
    }

    /// The op slot `s` holds.
    fn op_of(&self, s: u32) -> u32 {
        match self.recycle {
            Some(_) => self.pending[s as usize * self.op_step + 1].load(Ordering::Relaxed),
            None => s,
        }
    }

    fn completed(&self) -> u64 {
        self.done.iter().map(|d| d.load(Ordering::Acquire)).sum()
    }

    /// The pusher's side: appends op `i`, in slot `s`, to its vars; true
    /// when every var granted it at once (or it has none), so the caller
    /// dispatches it.
    fn append(&self, i: u32, s: u32) -> bool {
        let n = self.ops.of_op(i).count() as u32;
        if self.recycle.is_some() {
            self.pending[s as usize * self.op_step + 1].store(i, Ordering::Relaxed);
        }
        self.count(s).store(n + 1, Ordering::Relaxed);
        let mut granted = 0u32;
        for (v, write) in self.ops.of_op(i) {
            let mut q = self.var(v).lock();
            let free = q.queue.is_empty() && !q.writer;
            if write {
                if free && q.readers == 0 {
                    q.writer = true;
                    granted += 1;
                } else {
                    q.queue.push_back(s | WRITE);
                }
            } else if free {
                q.readers += 1;
                granted += 1;
            } else {
                q.queue.push_back(s);
            }
        }
        // Each var grants the op once: with all granted here no other
        // thread touches the count, else the last decrement dispatches.
        granted == n || self.count(s).fetch_sub(granted + 1, Ordering::AcqRel) == granted + 1
    }

    /// A worker's side: runs the op in slot `s`, releases its vars and
    /// grants what waited; ops made ready go to `next` (the first) and
    /// `local`. With `--recycle` the slot then goes back (through `give`
    /// with `--recycle-order batched`).
    fn run(
        &self,
        s: u32,
        next: &mut Option<u32>,
        local: &Worker<u32>,
        grants: &mut Vec<u32>,
        give: &mut Vec<u32>,
    ) {
        let i = self.op_of(s);
        let op = &self.trace.ops[i as usize];
        if let Some(c) = &self.check {
            c.start(self.trace, op);
        }
        busy(op.body_ns);
        if let Some(c) = &self.check {
            c.end(self.trace, op);
        }
        for (v, write) in self.ops.of_op(i) {
            {
                let mut q = self.var(v).lock();
                if write {
                    q.writer = false;
                } else {
                    q.readers -= 1;
                }
                if !q.writer && q.readers == 0 {
                    match q.queue.front() {
                        Some(&j) if j & WRITE != 0 => {
                            q.queue.pop_front();
                            q.writer = true;
                            grants.push(j & !WRITE);
                        }
                        _ => {
                            while let Some(&j) = q.queue.front() {
                                if j & WRITE != 0 {
                                    break;
                                }
                                q.queue.pop_front();
                                q.readers += 1;
                                grants.push(j);
                            }
                        }
                    }
                }
            }
            // Granted after the unlock, as the engine does: each grant is
            // a locked decrement on a count the pusher wrote.
            for j in grants.drain(..) {
                if self.count(j).fetch_sub(1, Ordering::AcqRel) == 1 {
                    match next {
                        None => *next = Some(j),
                        Some(_) => local.push(j),
                    }
                }
            }
        }
        match &self.recycle {
            None => {}
            Some(Recycle::Shared(free)) => free.push(s),
            Some(Recycle::Batched(list)) => {
                give.push(s);
                if give.len() == BATCH {
                    list.lock().push(std::mem::take(give));
                }
            }
            Some(Recycle::Ring(_)) => {
                self.pending[s as usize * self.op_step + 2].store(0, Ordering::Release)
            }
        }
    }

    fn find(&self, local: &Worker<u32>, me: usize) -> Option<u32> {
        if let Some(i) = local.pop() {
            return Some(i);
        }
        loop {
            match self.injector.steal_batch_and_pop(local) {
                Steal::Success(i) => return Some(i),
                Steal::Retry => continue,
                Steal::Empty => break,
            }
        }
        for (k, s) in self.stealers.iter().enumerate() {
            if k == me {
                continue;
            }
            loop {
                match s.steal() {
                    Steal::Success(i) => return Some(i),
                    Steal::Retry => continue,
                    Steal::Empty => break,
                }
            }
        }
        None
    }

    fn worker(&self, local: Worker<u32>, me: usize) {
        let mut next = None;
        let mut grants = Vec::new();
        let mut give = Vec::new();
        let mut spins = 0u32;
        loop {
            match next.take().or_else(|| self.find(&local, me)) {
                Some(i) => {
                    spins = 0;
                    self.run(i, &mut next, &local, &mut grants, &mut give);
                    self.done[me].fetch_add(1, Ordering::Release);
                }
                None => {
                    if self.shutdown.load(Ordering::Acquire) {
                        return;
                    }
                    spins += 1;
                    if spins.is_multiple_of(SPINS_PER_YIELD) {
                        std::thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                }
            }
        }
    }

    /// One timed run: pushes every op in order, then waits for all.
    /// `base` is the count of ops completed by the runs before.
    /// With `--recycle`, `cache` (`shared`) or `take` (`batched`) holds
    /// the free slots the pusher took in a batch and has not used yet.
    fn push_all(&self, base: u64, max_lead: u64, cache: &Worker<u32>, take: &mut Vec<u32>) {
        let n = self.trace.ops.len();
        for i in 0..n {
            let s = match &self.recycle {
                None => i as u32,
                Some(Recycle::Batched(list)) => loop {
                    if let Some(s) = take.pop() {
                        break s;
                    }
                    match list.lock().pop() {
                        Some(batch) => *take = batch,
                        None => std::thread::yield_now(),
                    }
                },
                Some(Recycle::Ring(slots)) => {
                    let s = ((base + i as u64) % slots) as usize;
                    let busy = &self.pending[s * self.op_step + 2];
                    while busy.load(Ordering::Acquire) != 0 {
                        std::thread::yield_now();
                    }
                    busy.store(1, Ordering::Relaxed);
                    s as u32
                }
                Some(Recycle::Shared(free)) => loop {
                    if let Some(s) = cache.pop() {
                        break s;
                    }
                    match free.steal_batch_and_pop(cache) {
                        Steal::Success(s) => break s,
                        Steal::Retry => {}
                        Steal::Empty => std::thread::yield_now(),
                    }
                },
            };
            if self.append(i as u32, s) {
                self.injector.push(s);
            }
            if max_lead > 0 && (i + 1) % CHECK_EVERY == 0 {
                let pushed = base + i as u64 + 1;
                if pushed - self.completed() > max_lead {
                    while pushed - self.completed() > max_lead / 2 {
                        std::thread::yield_now();
                    }
                }
            }
        }
        let all = base + n as u64;
        while self.completed() < all {
            std::thread::yield_now();
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let workload: Workload = arg(&args, "--workload", Workload::Indep);
    let body_label = arg(&args, "--body-us", "0".to_string());
    let body_us: f64 = arg(&args, "--body-us", 0.0);
    let workers: usize = arg(&args, "--workers", 2).max(1);
    let runs: usize = arg(&args, "--runs", 5).max(1);
    let max_lead: u64 = arg(&args, "--max-lead", 2048 * workers as u64);
    if matches!(workload, Workload::Roundtrip | Workload::Priority) {
        println!(
            "workload={workload} body_us={body_label} system=lean workers={workers} unsupported"
        );
        return;
    }
    let spec = Spec {
        workload,
        ops: arg(
            &args,
            "--ops",
            if workload == Workload::Fan {
                10_000
            } else {
                1_000_000
            },
        ),
        n: arg(&args, "--n", 1000),
        vars: arg(&args, "--vars", 0),
        body_ns: (body_us * 1000.0).round() as u32,
    };
    let trace = spec.trace();
    // Spacing the op counts and the var states out as the engine's op
    // blocks and vars are (192 bytes each) says what density is worth.
    let op_stride: usize = arg(&args, "--op-stride", 4);
    let var_stride: usize = arg(&args, "--var-stride", 0);
    // `--recycle N`: N op slots handed round (0: one slot per op, never
    // reused), each with room for the op it holds.
    let recycle: usize = arg(&args, "--recycle", 0);
    let order: String = arg(&args, "--recycle-order", "shared".to_string());
    if !matches!(order.as_str(), "shared" | "batched" | "ring") {
        eprintln!("--recycle-order {order}: expected shared, batched or ring");
        std::process::exit(2);
    }
    if recycle == 0 && args.iter().any(|a| a == "--recycle-order") {
        eprintln!("--recycle-order {order}: only with --recycle N (N slots to hand round)");
        std::process::exit(2);
    }
    // Slots held back in the workers' partial batches must leave the
    // pusher some, or it would wait for a batch that never fills.
    if order == "batched" && recycle > 0 && recycle < BATCH * (workers + 1) {
        eprintln!(
            "--recycle {recycle} --recycle-order batched: at least {} slots for {workers} workers",
            BATCH * (workers + 1)
        );
        std::process::exit(2);
    }
    // A slot holds the op's count, with `--recycle` the op, and in a
    // ring whether its op is still in flight.
    let op_step = op_stride.div_ceil(std::mem::size_of::<AtomicU32>()).max(
        match (recycle > 0, order.as_str()) {
            (false, _) => 1,
            (true, "ring") => 3,
            (true, _) => 2,
        },
    );
    let slots = if recycle > 0 {
        recycle
    } else {
        trace.ops.len()
    };
    if slots >= WRITE as usize {
        eprintln!("{slots} op slots: the queues mark writes with bit 31, so at most {WRITE} - 1");
        std::process::exit(2);
    }
    let var_step = var_stride
        .div_ceil(std::mem::size_of::<Mutex<VarQ>>())
        .max(1);
    let locals: Vec<Worker<u32>> = (0..workers).map(|_| Worker::new_lifo()).collect();
    let shared = Shared {
        trace: &trace,
        ops: OpVars::of(&trace),
        vars: (0..trace.vars * var_step)
            .map(|_| Mutex::default())
            .collect(),
        var_step,
        pending: (0..slots * op_step).map(|_| AtomicU32::new(0)).collect(),
        op_step,
        recycle: (recycle > 0).then(|| match order.as_str() {
            "batched" => {
                let all: Vec<u32> = (0..recycle as u32).collect();
                Recycle::Batched(Mutex::new(all.chunks(BATCH).map(<[u32]>::to_vec).collect()))
            }
            "ring" => Recycle::Ring(recycle as u64),
            _ => {
                let free = Injector::new();
                (0..recycle as u32).for_each(|s| free.push(s));
                Recycle::Shared(free)
            }
        }),
        injector: Injector::new(),
        stealers: locals.iter().map(Worker::stealer).collect(),
        done: (0..workers)
            .map(|_| CachePadded::new(AtomicU64::new(0)))
            .collect(),
        shutdown: AtomicBool::new(false),
        check: (std::env::var("PEER_CHECK").as_deref() == Ok("1")).then(|| OrderCheck::of(&trace)),
    };
    let body_total = trace.total_body_ns() as f64;
    let (mut ns, mut eff) = (vec![], vec![]);
    let cache = Worker::new_lifo();
    let mut take = Vec::new();
    std::thread::scope(|s| {
        for (me, local) in locals.into_iter().enumerate() {
            let shared = &shared;
            std::thread::Builder::new()
                .name(format!("lean-{me}"))
                .spawn_scoped(s, move || shared.worker(local, me))
                .expect("spawn a worker");
        }
        for r in 0..=runs {
            if let Some(c) = &shared.check {
                c.reset();
            }
            let base = shared.completed();
            let t0 = Instant::now();
            shared.push_all(base, max_lead, &cache, &mut take);
            let t = t0.elapsed().as_nanos() as f64;
            if r == 0 {
                continue; // warm-up
            }
            ns.push(t / trace.ops.len() as f64);
            eff.push(body_total / (workers as f64 * t));
        }
        shared.shutdown.store(true, Ordering::Release);
    });
    let line = DriverResult {
        workload,
        body_label: &body_label,
        system: "lean",
        workers,
        ops: trace.ops.len(),
        ns_per_op: &ns,
        efficiency: &eff,
        body_total_ns: body_total,
    }
    .line();
    if !print_checked(line, shared.check.as_ref()) {
        std::process::exit(1);
    }
}
