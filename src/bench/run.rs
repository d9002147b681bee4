//! Replaying traces on the engine, and the `roundtrip` workload.

use std::time::{Duration, Instant};

use crate::sync::unmodelled::{AtomicU64, AtomicUsize, Ordering};
use crate::sync::{thread, Arc, Condvar, Mutex};
use crate::{
    Batch, Completion, Engine, EngineError, OpDesc, PrivateAccess, PrivateVar, Property, Replay,
    ReplayHelpers, Serial, Var,
};

use super::cpu::{CpuSnapshot, CpuUse};
use super::trace::{Trace, TraceOp};

/// What one timed run measured.
#[derive(Debug, Clone, Default)]
pub struct RunResult {
    /// From the first push to the return of `wait_for_all`.
    pub elapsed: Duration,
    /// From the first push to the return of the last: the pushing thread's
    /// share. At high worker counts one pushing thread caps the rate at
    /// which ops reach the workers, and this is that cap.
    pub push_elapsed: Duration,
    /// Push-to-start latency of every op of priority > 0, in push order, in
    /// nanoseconds.
    pub latencies_ns: Vec<u64>,
    /// Where the threads spent `elapsed`, when
    /// [`account_cpu`](super::account_cpu) is on and the system keeps the
    /// counters.
    pub cpu: Option<CpuUse>,
}

/// The clock of a timed run, with the threads' CPU counters beside it
/// when accounting is on. They are read before the clock starts and after
/// it stops, so that reading them is not part of the time.
struct RunClock {
    start: Instant,
    cpu: Option<CpuSnapshot>,
}

impl RunClock {
    fn start() -> RunClock {
        let cpu = CpuSnapshot::take_if_accounting();
        RunClock {
            start: Instant::now(),
            cpu,
        }
    }

    /// The time since the start, and what the threads did in it.
    fn stop(&self) -> (Duration, Option<CpuUse>) {
        let elapsed = self.start.elapsed();
        let cpu = self
            .cpu
            .as_ref()
            .and_then(|before| Some(before.until(&before.again()?)));
        (elapsed, cpu)
    }
}

/// Spins on the clock until `ns` nanoseconds have passed (a busy body).
///
/// The loop only reads the clock, as `busy` in `peers/common.h` does, so
/// the bodies of every system in the comparison overrun their time by the
/// same amount: with a `pause` in the loop, a 1 µs body took about 8 ns
/// longer here than the C drivers' (1,055–1,064 ns against 1,048–1,056 on
/// the 2-core sandbox), which showed up in the ratios of the 1 µs rows.
#[inline]
pub fn busy(ns: u32) {
    if ns == 0 {
        return;
    }
    let until = Instant::now() + Duration::from_nanos(u64::from(ns));
    while Instant::now() < until {}
}

/// Replays `trace` on `engine`: creates its vars, then (timed) pushes every
/// op in order and waits for all. Each body spins for its `body_ns` and
/// increments `counter` when one is given.
///
/// # Errors
///
/// Any error of the engine (none is expected).
pub fn run_trace(
    engine: &Engine,
    trace: &Trace,
    counter: Option<&Arc<AtomicUsize>>,
) -> Result<RunResult, EngineError> {
    run_trace_batched(engine, trace, counter, 0)
}

/// Sets `reads` and `writes` to the vars `op` reads and writes.
fn gather<'v>(
    trace: &Trace,
    op: &TraceOp,
    vars: &'v [Var],
    reads: &mut Vec<&'v Var>,
    writes: &mut Vec<&'v Var>,
) {
    reads.clear();
    writes.clear();
    reads.extend(trace.reads(op).iter().map(|&v| &vars[v as usize]));
    writes.extend(trace.writes(op).iter().map(|&v| &vars[v as usize]));
}

/// Where the replay pushes: the engine (op by op, or as a stream through
/// [`Engine::push_all`]), an open batch, or a serial scope.
enum Target<'e, 'b, 'c> {
    Engine(&'e Engine),
    Stream(&'e Engine),
    Batch(&'b mut Batch<'c>),
    Serial(&'b mut Serial<'c>),
}

impl Target<'_, '_, '_> {
    fn push<F>(&mut self, desc: OpDesc<'_>, body: F) -> Result<(), EngineError>
    where
        F: FnOnce(&crate::OpCtx<'_>) -> crate::OpResult + Send + 'static,
    {
        match self {
            Target::Engine(e) | Target::Stream(e) => e.push(desc, body),
            Target::Batch(b) => b.push(desc, body),
            Target::Serial(s) => s.push(desc, body),
        }
    }

    fn new_var(&self) -> Var {
        match self {
            Target::Engine(e) | Target::Stream(e) => e.new_var(),
            Target::Batch(_) => unreachable!("a run's batches are opened by the run"),
            Target::Serial(s) => s.new_var(),
        }
    }

    fn wait_for_all(&mut self) -> Result<(), EngineError> {
        match self {
            Target::Engine(e) | Target::Stream(e) => e.wait_for_all(),
            Target::Batch(_) => unreachable!("a run's batches are opened by the run"),
            Target::Serial(s) => s.wait_for_all(),
        }
    }
}

/// [`run_trace`], pushing the ops in batches of `batch` ([`Engine::batch`];
/// 0: one by one).
///
/// # Errors
///
/// Any error of the engine (none is expected).
pub fn run_trace_batched(
    engine: &Engine,
    trace: &Trace,
    counter: Option<&Arc<AtomicUsize>>,
    batch: usize,
) -> Result<RunResult, EngineError> {
    let (vars, result) = timed_pushes(Target::Engine(engine), trace, counter, batch)?;
    finish_run(engine, vars, result)
}

/// [`run_trace`], taking the ops as a stream ([`Engine::push_all`]), which
/// asks for the lines of the next ops' vars while it pushes; the ops with
/// a priority, and every op when `counter` is given, are pushed one by
/// one.
///
/// # Errors
///
/// Any error of the engine (none is expected).
pub fn run_trace_stream(
    engine: &Engine,
    trace: &Trace,
    counter: Option<&Arc<AtomicUsize>>,
) -> Result<RunResult, EngineError> {
    let (vars, result) = timed_pushes(Target::Stream(engine), trace, counter, 0)?;
    finish_run(engine, vars, result)
}

/// [`run_trace`] in a [`Serial`] scope ([`Engine::serial`]): every op runs
/// at its push, on this thread, without the var protocol.
///
/// # Errors
///
/// [`EngineError::SharedEngine`] while other clones of `engine` exist; any
/// other error of the engine (none is expected).
pub fn run_trace_serial(
    engine: &mut Engine,
    trace: &Trace,
    counter: Option<&Arc<AtomicUsize>>,
) -> Result<RunResult, EngineError> {
    let (vars, result) = {
        let mut serial = engine.serial()?;
        timed_pushes(Target::Serial(&mut serial), trace, counter, 0)?
    };
    finish_run(engine, vars, result)
}

/// Ops of a trace whose var lists a serial scope's stream resolves at a
/// time (see `timed_pushes`): 8,192 ops of 3-4 vars take 256 KB.
const STREAM_CHUNK: usize = 8192;

/// Creates the trace's vars, then (timed) pushes every op in order and
/// waits for all.
fn timed_pushes(
    mut target: Target<'_, '_, '_>,
    trace: &Trace,
    counter: Option<&Arc<AtomicUsize>>,
    batch: usize,
) -> Result<(Vec<Var>, RunResult), EngineError> {
    let vars: Vec<Var> = (0..trace.vars).map(|_| target.new_var()).collect();
    let high = trace.ops.iter().filter(|o| o.priority > 0).count();
    let starts: Arc<Vec<AtomicU64>> = Arc::new((0..high).map(|_| AtomicU64::new(0)).collect());
    // One handle on the start stamps per op with a priority, cloned
    // before the clock starts: a clone at each push writes the count's
    // line on the pushing thread and each body's drop writes it on a
    // worker, one line more passed between them at every hop of
    // `priority`'s chain, which the peers' drivers (stamping into plain
    // arrays) do not pay. In a build that stamped each hop's start and
    // end, the hop's median over 12 processes was 225 ns this way
    // against 255 with a clone per push; what sets it is mostly the
    // machine's state (BENCHMARKS.md, "The states of the 2-core sandbox").
    let mut stamps: Vec<Arc<Vec<AtomicU64>>> = (0..high).map(|_| starts.clone()).collect();
    let mut pushes: Vec<u64> = Vec::with_capacity(high);
    let mut reads: Vec<&Var> = Vec::with_capacity(32);
    let mut writes: Vec<&Var> = Vec::with_capacity(4);
    // The var lists of a serial scope's stream (below), filled once here
    // so that their pages are the process's before the clock starts: on
    // a virtual machine the first touch of fresh pages can cost as much
    // as the run (a fresh 1.5 MB list for 62,500 empty ops made them 110
    // ns per op, against 40). The run fills it again, chunk by chunk,
    // inside the clock.
    let stream = matches!(target, Target::Serial(_) | Target::Stream(_))
        && batch == 0
        && high == 0
        && counter.is_none();
    let mut refs: Vec<&Var> = Vec::new();
    if stream {
        let most = trace
            .ops
            .chunks(STREAM_CHUNK)
            .map(|c| {
                c.iter()
                    .map(|op| op.n_reads as usize + op.n_writes as usize)
                    .sum()
            })
            .max()
            .unwrap_or(0);
        if let Some(v) = vars.first() {
            refs.resize(most, v);
        }
    }
    target.wait_for_all()?;
    let clock = RunClock::start();
    let start = clock.start;
    let mut push_op = |target: &mut Target<'_, '_, '_>, op: &TraceOp| {
        gather(trace, op, &vars, &mut reads, &mut writes);
        let desc = OpDesc::new("bench")
            .reads(&reads)
            .writes(&writes)
            .priority(op.priority);
        let ns = op.body_ns;
        if op.priority > 0 {
            let slot = pushes.len();
            let starts = stamps.pop().expect("one handle per op with a priority");
            let counter = counter.cloned();
            pushes.push(start.elapsed().as_nanos() as u64);
            target.push(desc, move |_| {
                starts[slot].store(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
                busy(ns);
                if let Some(c) = counter {
                    c.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            })
        } else if let Some(c) = counter {
            let c = c.clone();
            target.push(desc, move |_| {
                busy(ns);
                c.fetch_add(1, Ordering::Relaxed);
                Ok(())
            })
        } else if ns == 0 {
            // An empty op captures nothing, as the peers' empty ops do: the
            // body is a zero-sized closure and boxing it allocates nothing.
            target.push(desc, |_| Ok(()))
        } else {
            target.push(desc, move |_| {
                busy(ns);
                Ok(())
            })
        }
    };
    match (&mut target, batch) {
        (Target::Serial(_) | Target::Stream(_), _) if stream => {
            // The ops go as a stream (`Serial::push_all`,
            // `Engine::push_all`), so that the lines of the next ones'
            // vars are asked for early; each op then needs var lists of
            // its own, alive together, instead of the two lists `push_op`
            // refills. They are resolved a chunk of ops at a time, inside
            // the clock as in `gather`, into one list that stays in cache
            // (one list for the whole trace, 28 MB for a million `random`
            // ops, made a serial scope's run 15% slower).
            for chunk in trace.ops.chunks(STREAM_CHUNK) {
                // A chunk's ids are one run of `var_ids`: the trace keeps
                // them op after op.
                let (first, last) = (&chunk[0], &chunk[chunk.len() - 1]);
                let base = first.reads_start as usize;
                let end =
                    last.reads_start as usize + last.n_reads as usize + last.n_writes as usize;
                refs.clear();
                refs.extend(trace.var_ids[base..end].iter().map(|&v| &vars[v as usize]));
                let refs = &refs;
                let ops = chunk.iter().map(|op| {
                    let r = op.reads_start as usize - base;
                    let w = r + op.n_reads as usize;
                    let desc = OpDesc::new("bench")
                        .reads(&refs[r..w])
                        .writes(&refs[w..w + op.n_writes as usize])
                        .priority(op.priority);
                    let ns = op.body_ns;
                    let body = move |_: &crate::OpCtx<'_>| {
                        if ns > 0 {
                            busy(ns);
                        }
                        Ok(())
                    };
                    (desc, body)
                });
                match &mut target {
                    Target::Serial(serial) => serial.push_all(ops)?,
                    Target::Stream(engine) => engine.push_all(ops)?,
                    Target::Engine(_) | Target::Batch(_) => unreachable!("not a stream"),
                }
            }
        }
        (Target::Engine(engine), b) if b > 0 => {
            for chunk in trace.ops.chunks(b) {
                engine.batch(|b| {
                    let mut target = Target::Batch(b);
                    chunk.iter().try_for_each(|op| push_op(&mut target, op))
                })?;
            }
        }
        _ => {
            for op in &trace.ops {
                push_op(&mut target, op)?;
            }
        }
    }
    let push_elapsed = start.elapsed();
    target.wait_for_all()?;
    let (elapsed, cpu) = clock.stop();
    let latencies_ns = pushes
        .iter()
        .zip(starts.iter())
        .map(|(&p, s)| s.load(Ordering::Relaxed).saturating_sub(p))
        .collect();
    drop(reads);
    drop(writes);
    Ok((
        vars,
        RunResult {
            elapsed,
            push_elapsed,
            latencies_ns,
            cpu,
        },
    ))
}

/// Deletes a run's vars and waits until they are gone (untimed).
fn delete_vars(engine: &Engine, vars: Vec<Var>) -> Result<(), EngineError> {
    for v in vars {
        engine.delete_var(v)?;
    }
    engine.wait_for_all()
}

/// Deletes a replay's vars (untimed) and makes its result.
fn finish_run(
    engine: &Engine,
    vars: Vec<Var>,
    result: RunResult,
) -> Result<RunResult, EngineError> {
    delete_vars(engine, vars)?;
    Ok(result)
}

/// Which vars a replayed trace's nodes name ([`run_trace_replay`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayVars {
    /// Engine vars: the replay's op holds every one of them, so its push
    /// and completion cost a var append and release each.
    Engine,
    /// Private vars of the replay ([`ReplayBuilder::private_var`](crate::ReplayBuilder::private_var)):
    /// the graph alone, as the oneTBB and rayon drivers get it.
    Private,
}

/// A trace captured as a [`Replay`](crate::Replay), to be pushed whole as
/// many times as wanted ([`TraceReplay::run`]): the graph is inferred once,
/// before any clock starts, as the oneTBB and rayon drivers build theirs,
/// and every run after the first reuses the countdowns of the one before,
/// as the rayon driver reuses its graph. Priorities are not kept: a
/// replay's nodes have none.
#[derive(Debug)]
pub struct TraceReplay {
    replay: Replay,
    /// The engine vars of [`ReplayVars::Engine`]; empty otherwise.
    vars: Vec<Var>,
}

impl TraceReplay {
    /// Captures `trace`: one node per op, in trace order, whose body spins
    /// for the op's `body_ns`.
    ///
    /// # Errors
    ///
    /// Any error of the engine (none is expected).
    pub fn capture(
        engine: &Engine,
        trace: &Trace,
        vars: ReplayVars,
    ) -> Result<TraceReplay, EngineError> {
        Self::capture_with(engine, trace, vars, ReplayHelpers::default())
    }

    /// [`TraceReplay::capture`] with the replay's runs given `helpers`
    /// ([`ReplayBuilder::helpers`](crate::ReplayBuilder::helpers)).
    ///
    /// # Errors
    ///
    /// Any error of the engine (none is expected).
    pub fn capture_with(
        engine: &Engine,
        trace: &Trace,
        vars: ReplayVars,
        helpers: ReplayHelpers,
    ) -> Result<TraceReplay, EngineError> {
        let mut builder = engine.replay_builder("bench");
        builder.helpers(helpers);
        let (engine_vars, private): (Vec<Var>, Vec<PrivateVar>) = match vars {
            ReplayVars::Engine => (
                (0..trace.vars).map(|_| engine.new_var()).collect(),
                Vec::new(),
            ),
            ReplayVars::Private => (
                Vec::new(),
                (0..trace.vars).map(|_| builder.private_var()).collect(),
            ),
        };
        let mut reads: Vec<&Var> = Vec::with_capacity(32);
        let mut writes: Vec<&Var> = Vec::with_capacity(4);
        let (mut p_reads, mut p_writes) = (Vec::with_capacity(32), Vec::with_capacity(4));
        for op in &trace.ops {
            let desc = match vars {
                ReplayVars::Engine => {
                    gather(trace, op, &engine_vars, &mut reads, &mut writes);
                    OpDesc::new("bench").reads(&reads).writes(&writes)
                }
                ReplayVars::Private => {
                    p_reads.clear();
                    p_writes.clear();
                    p_reads.extend(trace.reads(op).iter().map(|&v| private[v as usize]));
                    p_writes.extend(trace.writes(op).iter().map(|&v| private[v as usize]));
                    OpDesc::new("bench")
                }
            };
            let access = PrivateAccess::new().reads(&p_reads).writes(&p_writes);
            let ns = op.body_ns;
            if ns == 0 {
                builder.push_with(desc, access, || Ok(()))?;
            } else {
                builder.push_with(desc, access, move || {
                    busy(ns);
                    Ok(())
                })?;
            }
        }
        drop(reads);
        drop(writes);
        Ok(TraceReplay {
            replay: builder.build(),
            vars: engine_vars,
        })
    }

    /// Number of nodes (the trace's ops).
    pub fn len(&self) -> usize {
        self.replay.len()
    }

    /// True when the trace had no ops.
    pub fn is_empty(&self) -> bool {
        self.replay.len() == 0
    }

    /// One timed run: waits for the engine to be idle, then pushes the
    /// replay with [`Engine::push_replay`] and waits for all.
    ///
    /// # Errors
    ///
    /// Any error of the engine, such as `engine` not being the engine the
    /// replay was captured for.
    pub fn run(&self, engine: &Engine) -> Result<RunResult, EngineError> {
        engine.wait_for_all()?;
        let clock = RunClock::start();
        engine.push_replay(&self.replay)?;
        let push_elapsed = clock.start.elapsed();
        engine.wait_for_all()?;
        let (elapsed, cpu) = clock.stop();
        Ok(RunResult {
            elapsed,
            push_elapsed,
            latencies_ns: Vec::new(),
            cpu,
        })
    }

    /// Deletes the engine vars the capture made (if any) and waits until
    /// they are gone.
    ///
    /// # Errors
    ///
    /// Any error of the engine (none is expected).
    pub fn release(self, engine: &Engine) -> Result<(), EngineError> {
        drop(self.replay);
        delete_vars(engine, self.vars)
    }
}

/// [`run_trace`] through a [`Replay`](crate::Replay), once: captures the
/// trace ([`TraceReplay::capture`], not timed), then times one push of
/// it ([`TraceReplay::run`]). That first run also allocates the replay's
/// countdowns; a bench that runs a trace many times captures it once and
/// runs the capture, as `depengine bench --replay` does.
///
/// # Errors
///
/// Any error of the engine (none is expected).
pub fn run_trace_replay(
    engine: &Engine,
    trace: &Trace,
    vars: ReplayVars,
) -> Result<RunResult, EngineError> {
    let captured = TraceReplay::capture(engine, trace, vars)?;
    let result = captured.run(engine)?;
    captured.release(engine)?;
    Ok(result)
}

/// [`run_trace`] with `pushers` pushing threads: op `i` is pushed by
/// thread `i % pushers`, each thread in trace order, all at once. Only for
/// traces whose ops do not depend on one another's order (`indep`,
/// `indep-novars`): with several pushers the order between threads, and so
/// which op waits for which on a shared var, is whatever the threads make
/// it. One pushing thread caps the rate at which ops reach many workers;
/// this shows what several give. Priority latencies are not recorded.
///
/// # Errors
///
/// Any error of the engine (none is expected).
pub fn run_trace_pushers(
    engine: &Engine,
    trace: &Trace,
    counter: Option<&Arc<AtomicUsize>>,
    pushers: usize,
) -> Result<RunResult, EngineError> {
    let pushers = pushers.max(1);
    let vars: Vec<Var> = (0..trace.vars).map(|_| engine.new_var()).collect();
    engine.wait_for_all()?;
    let clock = RunClock::start();
    let pushed: Result<(), EngineError> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..pushers)
            .map(|t| {
                let vars = &vars;
                scope.spawn(move || -> Result<(), EngineError> {
                    let mut reads: Vec<&Var> = Vec::with_capacity(32);
                    let mut writes: Vec<&Var> = Vec::with_capacity(4);
                    for op in trace.ops.iter().skip(t).step_by(pushers) {
                        gather(trace, op, vars, &mut reads, &mut writes);
                        let desc = OpDesc::new("bench").reads(&reads).writes(&writes);
                        let ns = op.body_ns;
                        let counter = counter.cloned();
                        engine.push(desc, move |_| {
                            busy(ns);
                            if let Some(c) = counter {
                                c.fetch_add(1, Ordering::Relaxed);
                            }
                            Ok(())
                        })?;
                    }
                    Ok(())
                })
            })
            .collect();
        threads
            .into_iter()
            .try_for_each(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    });
    let push_elapsed = clock.start.elapsed();
    pushed?;
    engine.wait_for_all()?;
    let (elapsed, cpu) = clock.stop();
    finish_run(
        engine,
        vars,
        RunResult {
            elapsed,
            push_elapsed,
            latencies_ns: Vec::new(),
            cpu,
        },
    )
}

/// One handoff slot between the pushing side and the completing thread.
struct Handoff {
    slot: Mutex<(Option<Completion>, bool)>,
    ready: Condvar,
}

/// `roundtrip`: `rounds` × (push an async op writing x whose completion is
/// handed to another thread, which completes it after spinning `body_ns`;
/// then `wait_for_var(x)`). Returns the total time; the time per round trip
/// is that divided by `rounds`. `counter`, when given, counts completions.
///
/// The op is pushed as [`Property::Async`], as a program pushes an op
/// whose body only hands its work over: the per-device executor then runs
/// it on the thread that makes it ready (the pushing thread, when x is
/// free) instead of waking a worker for a body that takes no time, as
/// MXNet's engines run a `kAsync` op that is ready at its push (the MXNet
/// driver pushes its round trips so too).
///
/// # Errors
///
/// Any error of the engine; an error when the completing thread cannot be
/// started.
pub fn roundtrip(
    engine: &Engine,
    rounds: usize,
    body_ns: u32,
    counter: Option<&Arc<AtomicUsize>>,
) -> Result<Duration, EngineError> {
    let handoff = Arc::new(Handoff {
        slot: Mutex::new((None, false)),
        ready: Condvar::new(),
    });
    let h = handoff.clone();
    let counter_c = counter.cloned();
    let completer = thread::spawn_named("bench-completer".into(), move || loop {
        let done = {
            let mut g = h.slot.lock();
            loop {
                if let Some(c) = g.0.take() {
                    break c;
                }
                if g.1 {
                    return;
                }
                h.ready.wait(&mut g);
            }
        };
        busy(body_ns);
        if let Some(c) = &counter_c {
            c.fetch_add(1, Ordering::Relaxed);
        }
        done.done();
    })
    .map_err(|e| EngineError::Spawn {
        thread: "bench-completer".into(),
        message: e.to_string(),
    })?;
    let x = engine.new_var();
    engine.wait_for_all()?;
    let start = Instant::now();
    let mut result = Ok(());
    for _ in 0..rounds {
        let h = handoff.clone();
        result = engine
            .push_async(
                OpDesc::new("roundtrip")
                    .writes(&x)
                    .property(Property::Async),
                move |_, done| {
                    h.slot.lock().0 = Some(done);
                    h.ready.notify_one();
                },
            )
            .and_then(|()| engine.wait_for_var(&x));
        if result.is_err() {
            break;
        }
    }
    let elapsed = start.elapsed();
    handoff.slot.lock().1 = true;
    handoff.ready.notify_one();
    let _ = completer.join();
    result?;
    engine.delete_var(x)?;
    engine.wait_for_all()?;
    Ok(elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::{Spec, Workload};

    /// What every var's version must be after the trace's ops ran once:
    /// the ops that list it among their writes (once per op).
    fn expected_versions(trace: &Trace) -> Vec<u64> {
        let mut versions = vec![0; trace.vars];
        for op in &trace.ops {
            let mut seen: Vec<u32> = trace.writes(op).to_vec();
            seen.sort_unstable();
            seen.dedup();
            for v in seen {
                versions[v as usize] += 1;
            }
        }
        versions
    }

    #[test]
    fn a_stream_runs_every_op_of_the_trace_once() {
        // The stream (`Serial::push_all`, `Engine::push_all`) resolves
        // each op's vars out of a list per chunk of ops: a slip in its
        // offsets writes other vars, or none. The sizes pass one chunk
        // (`STREAM_CHUNK`), and the last chunk is partial.
        let workloads = [
            Spec::new(Workload::Indep, 20_000),
            Spec::new(Workload::Chain, 20_000),
            Spec {
                n: 100,
                ..Spec::new(Workload::Wavefront, 0)
            },
            Spec::new(Workload::Fan, 100),
            Spec::new(Workload::Rwmix, 20_000),
            Spec::new(Workload::Random, 20_000),
            Spec::new(Workload::Randsum, 10_000),
        ];
        for spec in workloads {
            let trace = spec.trace();
            let mut engine = Engine::builder().build().unwrap();
            let (vars, _) = {
                let mut serial = engine.serial().unwrap();
                timed_pushes(Target::Serial(&mut serial), &trace, None, 0).unwrap()
            };
            let got: Vec<u64> = vars.iter().map(Var::version).collect();
            assert_eq!(got, expected_versions(&trace), "{:?}", spec.workload);
            finish_run(&engine, vars, RunResult::default()).unwrap();
            let (vars, _) = timed_pushes(Target::Stream(&engine), &trace, None, 0).unwrap();
            let got: Vec<u64> = vars.iter().map(Var::version).collect();
            assert_eq!(
                got,
                expected_versions(&trace),
                "engine, {:?}",
                spec.workload
            );
            finish_run(&engine, vars, RunResult::default()).unwrap();
        }
    }
}
