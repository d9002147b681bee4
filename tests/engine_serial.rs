//! `Engine::serial`: ops run at their push without the var protocol give
//! what the same pushes to the engine give (values each op saw, final
//! values, versions, failures and what the waits report), checked against
//! pushes through the protocol on every executor, op by op and as streams
//! (`Serial::push_all`); the scope is refused
//! while the engine is shared, waits for earlier ops, and returns the
//! errors a push returns.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};

#[path = "common/fold.rs"]
mod fold;

use depengine::util::rng::SplitMix64;
use depengine::{
    Context, Engine, EngineError, EngineKind, OpCtx, OpDesc, OpError, Property, Serial, Var,
};

const VARS: usize = 12;
const OPS: usize = 2_000;

fn kinds() -> [(EngineKind, usize); 3] {
    [
        (EngineKind::Naive, 1),
        (EngineKind::Pooled, 2),
        (EngineKind::PerDevice, 2),
    ]
}

fn engine(kind: EngineKind, workers: usize) -> Engine {
    Engine::builder()
        .kind(kind)
        .cpu_workers(workers)
        .build()
        .unwrap()
}

/// How a random op ends.
#[derive(Clone, Copy, Debug)]
enum Fate {
    Ok,
    Fails,
    Panics,
}

/// One step of a random program: an op, or a wait on a var.
enum Step {
    Op {
        /// As listed: duplicates and vars both read and written included.
        reads: Vec<usize>,
        writes: Vec<usize>,
        no_skip: bool,
        fate: Fate,
    },
    WaitVar(usize),
}

fn random_program(seed: u64) -> Vec<Step> {
    let mut rng = SplitMix64::new(seed);
    (0..OPS)
        .map(|_| {
            if rng.below(40) == 0 {
                return Step::WaitVar(rng.below(VARS as u64) as usize);
            }
            let pick = |rng: &mut SplitMix64, most: u64| -> Vec<usize> {
                (0..rng.below(most + 1))
                    .map(|_| rng.below(VARS as u64) as usize)
                    .collect()
            };
            let writes = pick(&mut rng, 2);
            let reads = pick(&mut rng, 3);
            let fate = match rng.below(60) {
                0 => Fate::Fails,
                1 => Fate::Panics,
                _ => Fate::Ok,
            };
            Step::Op {
                reads,
                writes,
                no_skip: rng.below(25) == 0,
                fate,
            }
        })
        .collect()
}

/// What a run observed. Each write folds its op's index into the var's
/// value, and each op records a hash of what it read (0: it did not run),
/// so any reordering or skipped op changes some figure.
#[derive(Debug, PartialEq)]
struct Observed {
    seen: Vec<u64>,
    finals: Vec<u64>,
    versions: Vec<u64>,
    /// Per wait on a var: the failing op it reported, if any.
    var_waits: Vec<Option<String>>,
    /// The final `wait_for_all`: the first failure and how many more.
    all: Option<(String, usize)>,
}

/// The body of op `i` of the program.
fn body(
    i: usize,
    reads: &[usize],
    writes: &[usize],
    fate: Fate,
    values: &[AtomicU64],
    seen: &[AtomicU64],
) -> Result<(), OpError> {
    fold::fold(i, reads, writes, values, seen);
    match fate {
        Fate::Ok => Ok(()),
        Fate::Fails => Err(OpError::msg(format!("op{i} fails"))),
        Fate::Panics => panic!("op{i} panics"),
    }
}

fn failing_op(e: &EngineError) -> String {
    e.failure().expect("an op failure").op.clone()
}

/// Where a run pushes and waits.
enum Target<'e> {
    Engine(&'e Engine),
    Serial(Serial<'e>),
}

impl Target<'_> {
    fn wait_for_var(&mut self, var: &Var) -> Result<(), EngineError> {
        match self {
            Target::Engine(e) => e.wait_for_var(var),
            Target::Serial(s) => s.wait_for_var(var),
        }
    }

    fn wait_for_all(&mut self) -> Result<(), EngineError> {
        match self {
            Target::Engine(e) => e.wait_for_all(),
            Target::Serial(s) => s.wait_for_all(),
        }
    }
}

/// How a run pushes its ops.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    /// `Engine::push`, through the protocol.
    Protocol,
    /// `Serial::push`, one op at a time.
    Serial,
    /// `Serial::push_all`, the ops between two waits as one stream.
    Stream,
}

/// Runs the program through `Engine::push` and the engine's waits, or
/// through a serial scope of `engine`.
fn run(engine: &mut Engine, program: &[Step], mode: Mode) -> Observed {
    let vars: Vec<Var> = (0..VARS).map(|_| engine.new_var()).collect();
    let values: Arc<Vec<AtomicU64>> = Arc::new((0..VARS).map(|_| AtomicU64::new(1)).collect());
    let seen: Arc<Vec<AtomicU64>> =
        Arc::new((0..program.len()).map(|_| AtomicU64::new(0)).collect());
    let mut var_waits = Vec::new();
    let mut target = if mode == Mode::Protocol {
        Target::Engine(engine)
    } else {
        Target::Serial(engine.serial().unwrap())
    };
    let mut i = 0;
    while i < program.len() {
        if let (Mode::Stream, Target::Serial(s)) = (mode, &mut target) {
            // The ops up to the next wait, as one stream.
            let end = program[i..]
                .iter()
                .position(|step| matches!(step, Step::WaitVar(_)))
                .map_or(program.len(), |n| i + n);
            if end > i {
                let lists: Vec<(Vec<&Var>, Vec<&Var>)> = program[i..end]
                    .iter()
                    .map(|step| match step {
                        Step::Op { reads, writes, .. } => (
                            reads.iter().map(|&r| &vars[r]).collect(),
                            writes.iter().map(|&w| &vars[w]).collect(),
                        ),
                        Step::WaitVar(_) => unreachable!("the stream stops at waits"),
                    })
                    .collect();
                let (values, seen) = (&values, &seen);
                s.push_all(program[i..end].iter().zip(&lists).enumerate().map(
                    |(k, (step, (rv, wv)))| {
                        let Step::Op {
                            reads,
                            writes,
                            no_skip,
                            fate,
                        } = step
                        else {
                            unreachable!("the stream stops at waits")
                        };
                        let mut desc = OpDesc::new(format!("op{}", i + k)).reads(rv).writes(wv);
                        if *no_skip {
                            desc = desc.property(Property::NoSkip);
                        }
                        let (reads, writes, fate) = (reads.clone(), writes.clone(), *fate);
                        let body =
                            move |_: &OpCtx<'_>| body(i + k, &reads, &writes, fate, values, seen);
                        (desc, body)
                    },
                ))
                .unwrap();
                i = end;
                continue;
            }
        }
        let step = &program[i];
        match step {
            Step::WaitVar(v) => {
                let r = target.wait_for_var(&vars[*v]);
                var_waits.push(r.err().map(|e| failing_op(&e)));
            }
            Step::Op {
                reads,
                writes,
                no_skip,
                fate,
            } => {
                let rv: Vec<&Var> = reads.iter().map(|&r| &vars[r]).collect();
                let wv: Vec<&Var> = writes.iter().map(|&w| &vars[w]).collect();
                let mut desc = OpDesc::new(format!("op{i}")).reads(&rv).writes(&wv);
                if *no_skip {
                    desc = desc.property(Property::NoSkip);
                }
                let (reads, writes, fate) = (reads.clone(), writes.clone(), *fate);
                match &mut target {
                    // Borrows the shared state: a serial body runs before
                    // its push returns.
                    Target::Serial(s) => {
                        s.push(desc, |_| body(i, &reads, &writes, fate, &values, &seen))
                    }
                    Target::Engine(e) => {
                        let (values, seen) = (values.clone(), seen.clone());
                        e.push(desc, move |_| {
                            body(i, &reads, &writes, fate, &values, &seen)
                        })
                    }
                }
                .unwrap();
            }
        }
        i += 1;
    }
    let all = target.wait_for_all();
    drop(target);
    let all = all.err().map(|e| match e {
        EngineError::OpsFailed { first, more } => (first.op.clone(), more),
        e => (failing_op(&e), 0),
    });
    assert_eq!(engine.pending(), 0);
    Observed {
        seen: seen.iter().map(|s| s.load(Ordering::SeqCst)).collect(),
        finals: values.iter().map(|v| v.load(Ordering::SeqCst)).collect(),
        versions: vars.iter().map(Var::version).collect(),
        var_waits,
        all,
    }
}

#[test]
fn a_serial_scope_gives_what_pushes_through_the_protocol_give() {
    // The panics are the program's own; keep them off the test's output.
    let hook = Arc::new(std::panic::take_hook());
    let others = hook.clone();
    std::panic::set_hook(Box::new(move |info| {
        let own = info
            .payload()
            .downcast_ref::<String>()
            .is_some_and(|m| m.ends_with(" panics"));
        if !own {
            others(info);
        }
    }));
    for seed in [3, 17, 29] {
        let program = random_program(seed);
        // The reference: the same pushes and waits through the protocol,
        // on the one executor whose runs do not depend on timing (on the
        // others, a `wait_for_var` that clears a failure races the ops
        // that only read the var, which rule 3 does not wait for).
        let reference = run(&mut engine(EngineKind::Naive, 1), &program, Mode::Protocol);
        assert!(reference.all.is_some() && reference.var_waits.iter().any(Option::is_some));
        for (kind, workers) in kinds() {
            for mode in [Mode::Serial, Mode::Stream] {
                let mut e = engine(kind, workers);
                let got = run(&mut e, &program, mode);
                assert_eq!(got, reference, "{mode:?} on {kind:?}, seed {seed}");
            }
        }
    }
    drop(std::panic::take_hook());
    if let Ok(hook) = Arc::try_unwrap(hook) {
        std::panic::set_hook(hook);
    }
}

#[test]
fn a_shared_engine_is_refused_until_its_clones_drop() {
    let mut engine = engine(EngineKind::PerDevice, 1);
    let clone = engine.clone();
    let err = engine.serial().unwrap_err();
    assert!(
        matches!(err, EngineError::SharedEngine { handles: 2, engine: id } if id == clone.id()),
        "{err:?}"
    );
    assert!(err.to_string().contains("drop the other clones"), "{err}");
    // A clone dropped on another thread counts as dropped.
    std::thread::spawn(move || drop(clone)).join().unwrap();
    let mut serial = engine.serial().unwrap();
    let x = serial.new_var();
    serial
        .push(OpDesc::new("w").writes(&x), |_| Ok(()))
        .unwrap();
    drop(serial);
    assert_eq!(x.version(), 1);
}

#[test]
fn the_scope_waits_for_earlier_ops_and_leaves_their_failures_to_a_wait() {
    for (kind, workers) in kinds() {
        let mut engine = engine(kind, workers);
        let (x, y) = (engine.new_var(), engine.new_var());
        let value = Arc::new(AtomicU64::new(0));
        let (release, gate) = mpsc::channel::<()>();
        let v = value.clone();
        let gate = Mutex::new(gate);
        // Lets the op go a while after its push: a naive engine runs it at
        // its push, which waits until then; the others run it on a worker
        // while this thread opens the scope.
        let letgo = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            drop(release);
        });
        engine
            .push(OpDesc::new("slow").writes(&x), move |_| {
                let _ = gate.lock().unwrap().recv();
                v.store(7, Ordering::SeqCst);
                Ok(())
            })
            .unwrap();
        engine
            .push(OpDesc::new("broken").writes(&y), |_| {
                Err(OpError::msg("broken"))
            })
            .unwrap();
        let mut serial = engine.serial().unwrap();
        let mut read = 0;
        serial
            .push(OpDesc::new("reads x").reads(&x), |_| {
                read = value.load(Ordering::SeqCst);
                Ok(())
            })
            .unwrap();
        assert_eq!(read, 7, "{kind:?}");
        let mut ran = false;
        serial
            .push(OpDesc::new("reads y").reads(&y), |_| {
                ran = true;
                Ok(())
            })
            .unwrap();
        assert!(!ran, "an op on a failed var is skipped ({kind:?})");
        let err = serial.wait_for_var(&y).unwrap_err();
        assert_eq!(failing_op(&err), "broken");
        serial.wait_for_all().unwrap();
        letgo.join().unwrap();
    }
}

#[test]
fn bad_pushes_return_the_errors_of_engine_push_and_do_not_run() {
    let mut engine = Engine::builder().gpus(1).build().unwrap();
    let foreign = Engine::builder().build().unwrap().new_var();
    let mut serial = engine.serial().unwrap();
    let x = serial.new_var();
    let mut ran = 0;
    let err = serial
        .push(OpDesc::new("foreign").reads(&x).writes(&foreign), |_| {
            ran += 1;
            Ok(())
        })
        .unwrap_err();
    assert!(matches!(err, EngineError::ForeignVar { .. }), "{err:?}");
    let err = serial
        .push(
            OpDesc::new("gpu 3").writes(&x).context(Context::Gpu(3)),
            |_| {
                ran += 1;
                Ok(())
            },
        )
        .unwrap_err();
    assert!(matches!(err, EngineError::UnknownContext { .. }), "{err:?}");
    let gone = serial.new_named_var("gone");
    let keep = gone.clone();
    serial.delete_var(gone).unwrap();
    assert!(keep.is_deleted());
    let err = serial
        .push(OpDesc::new("late").reads(&keep), |_| {
            ran += 1;
            Ok(())
        })
        .unwrap_err();
    assert!(
        matches!(&err, EngineError::DeletedVar { op, .. } if op == "late"),
        "{err:?}"
    );
    assert_eq!(ran, 0);
    assert_eq!(x.version(), 0);
    let err = serial.delete_var(keep).unwrap_err();
    assert!(matches!(err, EngineError::DeletedVar { .. }), "{err:?}");
    drop(serial);
    engine.wait_for_all().unwrap();

    engine.shutdown().unwrap();
    let err = engine.serial().unwrap_err();
    assert!(matches!(err, EngineError::ShutDown { .. }), "{err:?}");
}

#[test]
fn a_scope_opened_inside_an_op_of_its_engine_is_refused() {
    let engine = engine(EngineKind::PerDevice, 1);
    let x = engine.new_var();
    let slot: Arc<Mutex<Option<Engine>>> = Arc::new(Mutex::new(None));
    let (tx, rx) = mpsc::channel();
    let inside = slot.clone();
    engine
        .push(OpDesc::new("opens a scope").writes(&x), move |_| {
            // Waits until the op's engine is the only handle, in the slot.
            let mut e = loop {
                if let Some(e) = inside.lock().unwrap().take() {
                    break e;
                }
                std::thread::yield_now();
            };
            let r = e.serial().map(drop);
            tx.send(r).unwrap();
            *inside.lock().unwrap() = Some(e);
            Ok(())
        })
        .unwrap();
    *slot.lock().unwrap() = Some(engine);
    let r = rx.recv().unwrap();
    assert!(
        matches!(
            r,
            Err(EngineError::WaitFromWorker {
                call: "Engine::serial"
            })
        ),
        "{r:?}"
    );
    // Back on this thread: wait for the op, then shut down here.
    let engine = loop {
        if let Some(e) = slot.lock().unwrap().take() {
            break e;
        }
        std::thread::yield_now();
    };
    engine.wait_for_all().unwrap();
}

#[test]
fn bodies_see_their_op_and_numbers_follow_the_engines() {
    let mut engine = engine(EngineKind::PerDevice, 1);
    let (a, b, c) = (engine.new_var(), engine.new_var(), engine.new_var());
    let (tx, rx) = mpsc::channel();
    let t = tx.clone();
    engine
        .push(OpDesc::new("before"), move |ctx| {
            t.send(ctx.seq()).unwrap();
            Ok(())
        })
        .unwrap();
    engine.wait_for_all().unwrap();
    let first = rx.recv().unwrap();
    let mut serial = engine.serial().unwrap();
    let mut seen = Vec::new();
    let check = |ctx: &OpCtx<'_>| {
        assert_eq!(ctx.name(), "ctx");
        assert_eq!(ctx.priority(), 5);
        assert_eq!(ctx.worker(), None);
        // Rule 2: a var both read and written is written.
        assert!(ctx.declares_read(&a) && !ctx.declares_write(&a));
        assert!(ctx.declares_write(&b) && !ctx.declares_read(&b));
        assert!(!ctx.declares_read(&c) && !ctx.declares_write(&c));
        ctx.seq()
    };
    for _ in 0..3 {
        serial
            .push(
                OpDesc::new("ctx")
                    .reads(&[&a, &b, &a])
                    .writes(&[&b, &b])
                    .priority(5),
                |ctx| {
                    seen.push(check(ctx));
                    Ok(())
                },
            )
            .unwrap();
    }
    drop(serial);
    assert_eq!(seen, vec![first + 1, first + 2, first + 3]);
    // A var listed twice among the writes is written once.
    assert_eq!((a.version(), b.version()), (0, 3));
    engine
        .push(OpDesc::new("after"), move |ctx| {
            tx.send(ctx.seq()).unwrap();
            Ok(())
        })
        .unwrap();
    engine.wait_for_all().unwrap();
    assert_eq!(rx.recv().unwrap(), first + 4);
    assert_eq!(engine.pending(), 0);
}

#[test]
fn many_writes_listed_with_repeats_bump_each_var_once() {
    let mut engine = engine(EngineKind::Naive, 1);
    let mut serial: Serial<'_> = engine.serial().unwrap();
    let vars: Vec<Var> = (0..40).map(|_| serial.new_var()).collect();
    // 40 distinct vars, each listed twice: more than are compared pairwise.
    let listed: Vec<&Var> = vars.iter().chain(vars.iter().rev()).collect();
    serial
        .push(OpDesc::new("wide").writes(&listed), |_| Ok(()))
        .unwrap();
    serial
        .push(OpDesc::new("narrow").writes(&listed[..3]), |_| Ok(()))
        .unwrap();
    assert!(vars[..3].iter().all(|v| v.version() == 2));
    assert!(vars[3..].iter().all(|v| v.version() == 1));
}

#[test]
fn a_stream_runs_each_op_in_its_turn_and_takes_at_most_eight_ahead() {
    let mut engine = engine(EngineKind::PerDevice, 1);
    let mut serial = engine.serial().unwrap();
    let vars: Vec<Var> = (0..100).map(|_| serial.new_var()).collect();
    let taken = std::cell::Cell::new(0usize);
    let ran = std::cell::Cell::new(0usize);
    serial
        .push_all(vars.iter().enumerate().map(|(i, v)| {
            taken.set(taken.get() + 1);
            let (taken, ran) = (&taken, &ran);
            let prev = i.checked_sub(1).map(|p| &vars[p]);
            (OpDesc::new("step").writes(v), move |_: &OpCtx<'_>| {
                // Every op before this one has run, none after it, and
                // what the ones before wrote is visible.
                assert_eq!(ran.get(), i);
                assert!(prev.is_none_or(|p| p.version() == 1));
                assert_eq!(v.version(), 0);
                assert!(
                    taken.get() <= (i + 1 + 8).min(100),
                    "op {i}: {}",
                    taken.get()
                );
                ran.set(i + 1);
                Ok(())
            })
        }))
        .unwrap();
    assert_eq!((taken.get(), ran.get()), (100, 100));
    assert!(vars.iter().all(|v| v.version() == 1));
}

#[test]
fn a_stream_stops_at_a_refused_op_and_runs_none_after_it() {
    let mut engine = engine(EngineKind::PerDevice, 1);
    let foreign = Engine::builder().build().unwrap().new_var();
    let mut serial = engine.serial().unwrap();
    let x = serial.new_var();
    let taken = std::cell::Cell::new(0usize);
    let ran = std::cell::Cell::new(0usize);
    let err = serial
        .push_all((0..50).map(|i| {
            taken.set(taken.get() + 1);
            let desc = OpDesc::new(format!("op{i}")).writes(if i == 20 { &foreign } else { &x });
            let ran = &ran;
            (desc, move |_: &OpCtx<'_>| {
                ran.set(ran.get() + 1);
                Ok(())
            })
        }))
        .unwrap_err();
    assert!(matches!(err, EngineError::ForeignVar { .. }), "{err:?}");
    assert_eq!(ran.get(), 20);
    assert_eq!(x.version(), 20);
    assert!(taken.get() <= 21 + 8, "{}", taken.get());
    drop(serial);
    engine.wait_for_all().unwrap();
}
