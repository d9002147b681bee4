//! `Engine::batch`: ops pushed in batches run in exactly the order the same
//! pushes one by one would give (checked against a serial run), on every
//! executor; waits inside a batch are refused; a batch that ends with an
//! error or a panic still runs what it pushed.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use depengine::util::rng::SplitMix64;
use depengine::{Engine, EngineError, EngineKind, OpDesc, OpError, Var};

fn engines() -> Vec<Engine> {
    [EngineKind::Naive, EngineKind::Pooled, EngineKind::PerDevice]
        .into_iter()
        .map(|k| Engine::builder().kind(k).cpu_workers(2).build().unwrap())
        .collect()
}

const VARS: usize = 16;
const OPS: usize = 3_000;

/// One random op: the vars it reads and writes (disjoint, deduplicated).
struct Op {
    reads: Vec<usize>,
    writes: Vec<usize>,
}

fn random_ops(seed: u64) -> Vec<Op> {
    let mut rng = SplitMix64::new(seed);
    (0..OPS)
        .map(|_| {
            let mut writes: Vec<usize> = (0..rng.below(3))
                .map(|_| rng.below(VARS as u64) as usize)
                .collect();
            writes.sort_unstable();
            writes.dedup();
            let mut reads: Vec<usize> = (0..rng.below(4))
                .map(|_| rng.below(VARS as u64) as usize)
                .filter(|r| !writes.contains(r))
                .collect();
            reads.sort_unstable();
            reads.dedup();
            Op { reads, writes }
        })
        .collect()
}

/// What a run observed: every op's view of the values it read, and the
/// final value of every var. Each write folds its op's index into the
/// var's value, so any reordering of dependent ops changes some figure.
#[derive(Debug, PartialEq)]
struct Observed {
    seen: Vec<u64>,
    finals: Vec<u64>,
}

/// Pushes one op: through the engine or through a batch.
type PushFn<'b> = dyn for<'a> FnMut(OpDesc<'a>, Box<dyn FnOnce() + Send>) + 'b;

/// Pushes `ops` on `engine`, in batches of `sizes` in turn (0: one by one
/// with `Engine::push`).
fn run(engine: &Engine, ops: &[Op], sizes: &[usize]) -> Observed {
    let vars: Vec<Var> = (0..VARS).map(|_| engine.new_var()).collect();
    let values: Arc<Vec<AtomicU64>> = Arc::new((0..VARS).map(|_| AtomicU64::new(1)).collect());
    let seen: Arc<Vec<AtomicU64>> = Arc::new((0..ops.len()).map(|_| AtomicU64::new(0)).collect());
    let push_one = |i: usize, push: &mut PushFn<'_>| {
        let op = &ops[i];
        let rv: Vec<&Var> = op.reads.iter().map(|&r| &vars[r]).collect();
        let wv: Vec<&Var> = op.writes.iter().map(|&w| &vars[w]).collect();
        let (reads, writes) = (op.reads.clone(), op.writes.clone());
        let (values, seen) = (values.clone(), seen.clone());
        push(
            OpDesc::new("op").reads(&rv).writes(&wv),
            Box::new(move || {
                let mut h = i as u64;
                for &r in &reads {
                    h = h
                        .wrapping_mul(31)
                        .wrapping_add(values[r].load(Ordering::SeqCst));
                }
                seen[i].store(h, Ordering::SeqCst);
                for &w in &writes {
                    let v = values[w].load(Ordering::SeqCst);
                    values[w].store(
                        v.wrapping_mul(1_000_003).wrapping_add(i as u64),
                        Ordering::SeqCst,
                    );
                }
            }),
        );
    };
    let mut i = 0;
    let mut k = 0;
    while i < ops.len() {
        let size = sizes[k % sizes.len()];
        k += 1;
        if size == 0 {
            push_one(i, &mut |desc, f| {
                engine
                    .push(desc, move |_| {
                        f();
                        Ok(())
                    })
                    .unwrap()
            });
            i += 1;
            continue;
        }
        let end = (i + size).min(ops.len());
        engine
            .batch(|b| {
                for j in i..end {
                    push_one(j, &mut |desc, f| {
                        b.push(desc, move |_| {
                            f();
                            Ok(())
                        })
                        .unwrap()
                    });
                }
                Ok(())
            })
            .unwrap();
        i = end;
    }
    engine.wait_for_all().unwrap();
    Observed {
        seen: seen.iter().map(|s| s.load(Ordering::SeqCst)).collect(),
        finals: values.iter().map(|v| v.load(Ordering::SeqCst)).collect(),
    }
}

#[test]
fn batches_run_ops_in_the_order_of_single_pushes() {
    let ops = random_ops(7);
    let serial = run(
        &Engine::builder().kind(EngineKind::Naive).build().unwrap(),
        &ops,
        &[0],
    );
    for engine in engines() {
        for sizes in [&[1][..], &[64], &[1000], &[3, 0, 17, 0, 0, 250]] {
            let got = run(&engine, &ops, sizes);
            assert_eq!(got, serial, "{:?}, batches of {sizes:?}", engine.kind());
        }
    }
}

#[test]
fn ops_held_by_a_batch_start_when_it_closes() {
    for engine in engines() {
        let v = engine.new_var();
        let w = engine.new_var();
        let ran = Arc::new(AtomicUsize::new(0));
        let held = engine
            .batch(|b| {
                for var in [&v, &w] {
                    let r = ran.clone();
                    b.push(OpDesc::new("held").writes(var), move |_| {
                        r.fetch_add(1, Ordering::SeqCst);
                        Ok(())
                    })?;
                }
                // The second write on `v` waits for the first: not held.
                b.push(OpDesc::new("after").writes(&v), |_| Ok(()))?;
                // Nothing held has started: the batch is still open.
                assert_eq!(ran.load(Ordering::SeqCst), 0, "{:?}", engine.kind());
                Ok(b.held())
            })
            .unwrap();
        assert_eq!(held, 2, "{:?}", engine.kind());
        engine.wait_for_all().unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 2);
        assert_eq!(v.version(), 2);
    }
}

#[test]
fn waits_inside_a_batch_are_refused_and_name_the_call() {
    for engine in engines() {
        let v = engine.new_var();
        let errs = engine
            .batch(|b| {
                b.push(OpDesc::new("w").writes(&v), |_| Ok(()))?;
                Ok([
                    engine.wait_for_var(&v).unwrap_err(),
                    engine.wait_for_all().unwrap_err(),
                    engine
                        .push_sync(OpDesc::new("sync").reads(&v), |_| Ok(1))
                        .unwrap_err(),
                ])
            })
            .unwrap();
        for (e, call) in errs
            .iter()
            .zip(["wait_for_var", "wait_for_all", "push_sync"])
        {
            assert!(
                matches!(e, EngineError::WaitInBatch { call: c } if *c == call),
                "{e}"
            );
            assert!(e.to_string().contains(call), "{e}");
        }
        // Closed: waits work again and the op ran.
        engine.wait_for_var(&v).unwrap();
        assert_eq!(v.version(), 1);
        // A batch on another engine does not stop waits on this one.
        let other = Engine::builder().kind(EngineKind::Naive).build().unwrap();
        other.batch(|_| engine.wait_for_all()).unwrap();
    }
}

#[test]
fn a_batch_that_fails_or_panics_still_runs_what_it_pushed() {
    for engine in engines() {
        let v = engine.new_var();
        let err = engine
            .batch(|b| {
                b.push(OpDesc::new("before the error").writes(&v), |_| Ok(()))?;
                Err::<(), _>(EngineError::ShutDown { op: "mine".into() })
            })
            .unwrap_err();
        assert!(matches!(err, EngineError::ShutDown { .. }));
        let caught = catch_unwind(AssertUnwindSafe(|| {
            engine.batch(|b| -> Result<(), EngineError> {
                b.push(OpDesc::new("before the panic").writes(&v), |_| Ok(()))?;
                panic!("expected test panic in a batch");
            })
        }));
        assert!(caught.is_err());
        // The thread's batch mark is gone with the batch.
        engine.wait_for_var(&v).unwrap();
        assert_eq!(v.version(), 2, "{:?}", engine.kind());
    }
}

#[test]
fn errors_and_failures_inside_a_batch_are_those_of_single_pushes() {
    for engine in engines() {
        let v = engine.new_var();
        let foreign = Engine::builder().build().unwrap().new_var();
        let log = Arc::new(Mutex::new(Vec::new()));
        let refused = engine
            .batch(|b| {
                let l = log.clone();
                b.push(OpDesc::new("fails").writes(&v), move |_| {
                    l.lock().unwrap().push("fails");
                    Err(OpError::msg("bad"))
                })?;
                let l = log.clone();
                b.push(OpDesc::new("skipped").reads(&v), move |_| {
                    l.lock().unwrap().push("skipped");
                    Ok(())
                })?;
                Ok(b.push(OpDesc::new("foreign").writes(&foreign), |_| Ok(())))
            })
            .unwrap();
        assert!(matches!(refused, Err(EngineError::ForeignVar { .. })));
        let f = engine.wait_for_all().unwrap_err();
        assert_eq!(f.failure().unwrap().op, "fails");
        assert_eq!(*log.lock().unwrap(), vec!["fails"], "{:?}", engine.kind());
    }
}

#[test]
fn nested_batches_refuse_waits_on_every_engine_still_open() {
    let a = Engine::builder()
        .kind(EngineKind::Pooled)
        .cpu_workers(2)
        .build()
        .unwrap();
    let b = Engine::builder().kind(EngineKind::Naive).build().unwrap();
    let (va, vb) = (a.new_var(), b.new_var());
    a.batch(|outer| {
        outer.push(OpDesc::new("a").writes(&va), |_| Ok(()))?;
        b.batch(|inner| {
            inner.push(OpDesc::new("b").writes(&vb), |_| Ok(()))?;
            // Both batches are open: waits on either would wait for
            // their own held ops.
            assert!(matches!(
                a.wait_for_all(),
                Err(EngineError::WaitInBatch { .. })
            ));
            assert!(matches!(
                b.wait_for_all(),
                Err(EngineError::WaitInBatch { .. })
            ));
            // A batch on the same engine inside another one is a batch too.
            a.batch(|same| same.push(OpDesc::new("a2").writes(&va), |_| Ok(())))?;
            assert!(matches!(
                a.wait_for_all(),
                Err(EngineError::WaitInBatch { .. })
            ));
            Ok(())
        })?;
        // The inner batch closed: its ops ran, and only `a`'s batch is open.
        b.wait_for_var(&vb)?;
        assert_eq!(vb.version(), 1);
        assert!(matches!(
            a.wait_for_var(&va),
            Err(EngineError::WaitInBatch { .. })
        ));
        Ok(())
    })
    .unwrap();
    a.wait_for_var(&va).unwrap();
    assert_eq!(va.version(), 2);
}
