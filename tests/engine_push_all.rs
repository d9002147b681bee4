//! `Engine::push_all`: ops taken from an iterator as a stream run as the
//! same pushes one by one run them (values each op saw, final values,
//! versions, the failures the final wait reports), on every executor,
//! checked against single pushes; the stream takes at most eight ops
//! ahead of the one it pushes and stops at the first refused op.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

#[path = "common/fold.rs"]
mod fold;

use depengine::util::rng::SplitMix64;
use depengine::{Engine, EngineError, EngineKind, OpCtx, OpDesc, OpError, Var};

const VARS: usize = 64;
const OPS: usize = 3_000;

fn engine(kind: EngineKind, workers: usize) -> Engine {
    Engine::builder()
        .kind(kind)
        .cpu_workers(workers)
        .build()
        .unwrap()
}

/// One random op: the vars it reads and writes (duplicates and vars both
/// read and written included) and whether it fails.
struct Op {
    reads: Vec<usize>,
    writes: Vec<usize>,
    fails: bool,
}

fn random_program(seed: u64) -> Vec<Op> {
    let mut rng = SplitMix64::new(seed);
    (0..OPS)
        .map(|_| {
            let pick = |rng: &mut SplitMix64, most: u64| -> Vec<usize> {
                (0..rng.below(most + 1))
                    .map(|_| rng.below(VARS as u64) as usize)
                    .collect()
            };
            let writes = pick(&mut rng, 2);
            let reads = pick(&mut rng, 3);
            // A failing op writes nothing, so its failure taints no var
            // and the ops after it still run: the runs differ only in
            // which failure the final wait names first (the first to
            // complete, which on the threaded executors is timing).
            if rng.below(100) == 0 {
                Op {
                    reads,
                    writes: Vec::new(),
                    fails: true,
                }
            } else {
                Op {
                    reads,
                    writes,
                    fails: false,
                }
            }
        })
        .collect()
}

/// What a run observed: each op's hash of what it read (0: it did not
/// run), each var's final value and version, and how many failures the
/// final wait reported.
#[derive(Debug, PartialEq)]
struct Observed {
    seen: Vec<u64>,
    finals: Vec<u64>,
    versions: Vec<u64>,
    failures: usize,
}

/// The body of op `i` (see `fold`), failing when the program says so.
fn body(i: usize, op: &Op, values: &[AtomicU64], seen: &[AtomicU64]) -> Result<(), OpError> {
    fold::fold(i, &op.reads, &op.writes, values, seen);
    if op.fails {
        return Err(OpError::msg(format!("op{i} fails")));
    }
    Ok(())
}

/// Runs the program on `engine`, as one stream or op by op.
fn run(engine: &Engine, program: &Arc<Vec<Op>>, stream: bool) -> Observed {
    let vars: Vec<Var> = (0..VARS).map(|_| engine.new_var()).collect();
    let values: Arc<Vec<AtomicU64>> = Arc::new((0..VARS).map(|_| AtomicU64::new(1)).collect());
    let seen: Arc<Vec<AtomicU64>> =
        Arc::new((0..program.len()).map(|_| AtomicU64::new(0)).collect());
    let lists: Vec<(Vec<&Var>, Vec<&Var>)> = program
        .iter()
        .map(|op| {
            (
                op.reads.iter().map(|&r| &vars[r]).collect(),
                op.writes.iter().map(|&w| &vars[w]).collect(),
            )
        })
        .collect();
    let op = |i: usize| {
        let desc = OpDesc::new(format!("op{i}"))
            .reads(&lists[i].0)
            .writes(&lists[i].1);
        let (program, values, seen) = (program.clone(), values.clone(), seen.clone());
        let body = move |_: &OpCtx<'_>| body(i, &program[i], &values, &seen);
        (desc, body)
    };
    if stream {
        engine.push_all((0..program.len()).map(op)).unwrap();
    } else {
        for i in 0..program.len() {
            let (desc, body) = op(i);
            engine.push(desc, body).unwrap();
        }
    }
    let failures = match engine.wait_for_all() {
        Ok(()) => 0,
        Err(EngineError::OpsFailed { first, more }) => {
            assert!(first.message.ends_with(" fails"), "{first:?}");
            more + 1
        }
        Err(e) => {
            assert!(e.failure().is_some(), "{e:?}");
            1
        }
    };
    assert_eq!(engine.pending(), 0);
    Observed {
        seen: seen.iter().map(|s| s.load(Ordering::SeqCst)).collect(),
        finals: values.iter().map(|v| v.load(Ordering::SeqCst)).collect(),
        versions: vars.iter().map(Var::version).collect(),
        failures,
    }
}

#[test]
fn a_stream_gives_what_the_same_pushes_one_by_one_give_on_every_executor() {
    for seed in [5, 23, 41] {
        let program = Arc::new(random_program(seed));
        let reference = run(&engine(EngineKind::Naive, 1), &program, false);
        // The program exercises what it claims: failures, every op run,
        // and each var written many times.
        assert!(reference.failures > 10, "seed {seed}");
        assert!(reference.seen.iter().all(|&s| s != 0), "seed {seed}");
        assert!(reference.versions.iter().all(|&v| v > 20), "seed {seed}");
        for (kind, workers) in [
            (EngineKind::Naive, 1),
            (EngineKind::Pooled, 2),
            (EngineKind::PerDevice, 1),
            (EngineKind::PerDevice, 2),
        ] {
            let got = run(&engine(kind, workers), &program, true);
            assert_eq!(
                got, reference,
                "{kind:?} with {workers} workers, seed {seed}"
            );
        }
    }
}

#[test]
fn a_stream_takes_at_most_eight_ops_ahead_of_the_one_it_pushes() {
    // The naive executor runs each op at its push, on this thread: an op
    // that has run has been pushed, and one that has not, has not.
    let engine = engine(EngineKind::Naive, 1);
    let vars: Vec<Var> = (0..100).map(|_| engine.new_var()).collect();
    let taken = Arc::new(AtomicUsize::new(0));
    let ran = Arc::new(AtomicUsize::new(0));
    engine
        .push_all(vars.iter().enumerate().map(|(i, v)| {
            // Op i is taken: at least i - 7 ops before it are pushed.
            assert!(ran.load(Ordering::SeqCst) + 7 >= i, "op {i} taken early");
            taken.fetch_add(1, Ordering::SeqCst);
            let (taken, ran) = (taken.clone(), ran.clone());
            let body = move |_: &OpCtx<'_>| {
                // Every op before this one has been pushed and run, and
                // no more than seven after it taken.
                assert_eq!(ran.load(Ordering::SeqCst), i);
                let t = taken.load(Ordering::SeqCst);
                assert!(t > i && t <= (i + 8).min(100), "op {i}: {t} taken");
                ran.store(i + 1, Ordering::SeqCst);
                Ok(())
            };
            (OpDesc::new("step").writes(v), body)
        }))
        .unwrap();
    assert_eq!(
        (taken.load(Ordering::SeqCst), ran.load(Ordering::SeqCst)),
        (100, 100)
    );
    assert!(vars.iter().all(|v| v.version() == 1));
}

#[test]
fn a_stream_stops_at_a_refused_op_and_pushes_none_after_it() {
    for (kind, workers) in [(EngineKind::Naive, 1), (EngineKind::PerDevice, 2)] {
        let engine = engine(kind, workers);
        let foreign = Engine::builder().build().unwrap().new_var();
        let x = engine.new_var();
        let taken = AtomicUsize::new(0);
        let ran = Arc::new(AtomicUsize::new(0));
        let err = engine
            .push_all((0..50).map(|i| {
                taken.fetch_add(1, Ordering::SeqCst);
                let desc =
                    OpDesc::new(format!("op{i}")).writes(if i == 20 { &foreign } else { &x });
                let ran = ran.clone();
                (desc, move |_: &OpCtx<'_>| {
                    ran.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
            }))
            .unwrap_err();
        assert!(matches!(err, EngineError::ForeignVar { .. }), "{err:?}");
        engine.wait_for_all().unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 20, "{kind:?}");
        assert_eq!(x.version(), 20, "{kind:?}");
        assert!(taken.load(Ordering::SeqCst) <= 20 + 8, "{kind:?}");
    }
}
