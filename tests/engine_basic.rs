//! Engine semantics on every executor: ordering, versions, waits, deletion,
//! operators, priorities, diagnostics and configuration.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use depengine::{Context, Engine, EngineKind, OpDesc, Property, Var};

#[test]
fn reads_do_not_bump_versions_writes_do() {
    for engine in common::every_executor() {
        let v = engine.new_var();
        for _ in 0..10 {
            engine.push(OpDesc::new("r").reads(&v), |_| Ok(())).unwrap();
        }
        engine.wait_for_all().unwrap();
        assert_eq!(v.version(), 0, "{:?}", engine.kind());
        for _ in 0..10 {
            engine
                .push(OpDesc::new("w").writes(&v), |_| Ok(()))
                .unwrap();
        }
        engine.wait_for_var(&v).unwrap();
        assert_eq!(v.version(), 10, "{:?}", engine.kind());
    }
}

#[test]
fn writes_to_one_var_run_in_push_order() {
    for engine in common::every_executor() {
        let v = engine.new_var();
        let log = Arc::new(Mutex::new(Vec::new()));
        for i in 0..500 {
            let log = log.clone();
            engine
                .push(OpDesc::new("append").writes(&v), move |_| {
                    log.lock().unwrap().push(i);
                    Ok(())
                })
                .unwrap();
        }
        engine.wait_for_var(&v).unwrap();
        let log = log.lock().unwrap();
        assert_eq!(*log, (0..500).collect::<Vec<_>>(), "{:?}", engine.kind());
    }
}

#[test]
fn reads_see_the_write_before_them_and_not_the_one_after() {
    for engine in common::every_executor() {
        let v = engine.new_var();
        let cell = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        for round in 1..=50usize {
            let c = cell.clone();
            engine
                .push(OpDesc::new("write").writes(&v), move |_| {
                    c.store(round, Ordering::Relaxed);
                    Ok(())
                })
                .unwrap();
            for _ in 0..4 {
                let (c, s) = (cell.clone(), seen.clone());
                engine
                    .push(OpDesc::new("read").reads(&v), move |_| {
                        s.lock().unwrap().push((round, c.load(Ordering::Relaxed)));
                        Ok(())
                    })
                    .unwrap();
            }
        }
        engine.wait_for_all().unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 200);
        for &(expected, got) in seen.iter() {
            assert_eq!(expected, got, "{:?}", engine.kind());
        }
    }
}

#[test]
fn duplicate_vars_count_once_and_read_write_is_a_write() {
    for engine in common::every_executor() {
        let v = engine.new_var();
        engine
            .push(
                OpDesc::new("dup").reads(&[&v, &v]).writes(&[&v, &v]),
                |ctx| {
                    assert!(ctx.name() == "dup");
                    Ok(())
                },
            )
            .unwrap();
        engine.wait_for_all().unwrap();
        assert_eq!(v.version(), 1);
    }
}

/// Small ops are deduplicated pairwise, large ones (over 32 vars) by
/// sorting: both must leave each var once, written if any entry writes it.
#[test]
fn duplicates_are_removed_on_both_sides_of_the_pairwise_bound() {
    for engine in common::every_executor() {
        for n in [5usize, 16, 31, 33, 60] {
            let vars: Vec<_> = (0..n).map(|_| engine.new_var()).collect();
            // Every var read twice, in reverse order the second time; every
            // third var also written twice.
            let reads: Vec<_> = vars.iter().chain(vars.iter().rev()).collect();
            let writes: Vec<_> = vars
                .iter()
                .step_by(3)
                .chain(vars.iter().step_by(3))
                .collect();
            let vs = vars.clone();
            let declared = engine
                .push_sync(
                    OpDesc::new("dups").reads(&reads).writes(&writes),
                    move |ctx| {
                        Ok(vs
                            .iter()
                            .map(|v| (ctx.declares_read(v), ctx.declares_write(v)))
                            .collect::<Vec<_>>())
                    },
                )
                .unwrap();
            for (i, v) in vars.iter().enumerate() {
                let written = i % 3 == 0;
                assert_eq!(declared[i], (!written, written), "n = {n}, var {i}");
                assert_eq!(v.version(), written as u64, "n = {n}, var {i}");
            }
        }
    }
}

#[test]
fn op_context_reports_declared_access() {
    for engine in common::every_executor() {
        let (a, b, c) = (engine.new_var(), engine.new_var(), engine.new_var());
        let (a2, b2, c2) = (a.clone(), b.clone(), c.clone());
        let r = engine
            .push_sync(OpDesc::new("ctx").reads(&[&a, &b]).writes(&b), move |ctx| {
                Ok((
                    ctx.declares_read(&a2),
                    ctx.declares_write(&b2),
                    ctx.declares_read(&b2),
                    ctx.declares_read(&c2) || ctx.declares_write(&c2),
                ))
            })
            .unwrap();
        assert_eq!(r, (true, true, false, false));
    }
}

#[test]
fn wait_to_write_waits_for_reads() {
    for engine in common::every_executor() {
        let v = engine.new_var();
        let done = Arc::new(AtomicUsize::new(0));
        for _ in 0..20 {
            let d = done.clone();
            engine
                .push(OpDesc::new("slow read").reads(&v), move |_| {
                    std::thread::sleep(std::time::Duration::from_micros(200));
                    d.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
                .unwrap();
        }
        engine.wait_to_write(&v).unwrap();
        assert_eq!(done.load(Ordering::SeqCst), 20, "{:?}", engine.kind());
        assert_eq!(v.version(), 0, "internal waits are not writes");
    }
}

#[test]
fn delete_var_runs_callback_after_last_op_and_refuses_later_use() {
    for engine in common::every_executor() {
        let v = engine.new_var();
        let ops_done = Arc::new(AtomicUsize::new(0));
        for _ in 0..10 {
            let d = ops_done.clone();
            engine
                .push(OpDesc::new("use").reads(&v), move |_| {
                    std::thread::sleep(std::time::Duration::from_micros(100));
                    d.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
                .unwrap();
        }
        let seen_at_delete = Arc::new(AtomicUsize::new(usize::MAX));
        let (d, s) = (ops_done.clone(), seen_at_delete.clone());
        let keep = v.clone();
        engine
            .delete_var_with(v, move || {
                s.store(d.load(Ordering::SeqCst), Ordering::SeqCst)
            })
            .unwrap();
        assert!(keep.is_deleted());
        let err = engine
            .push(OpDesc::new("late").writes(&keep), |_| Ok(()))
            .unwrap_err();
        assert!(err.to_string().contains("deleted"), "{err}");
        assert!(err.to_string().contains("late"), "{err}");
        engine.wait_for_all().unwrap();
        assert_eq!(seen_at_delete.load(Ordering::SeqCst), 10);
        let again = engine.delete_var(keep).unwrap_err();
        assert!(again.to_string().contains("deleted"));
    }
}

/// A push reads a var's deletion flag only once its engine has deleted
/// some var: a deletion made on another thread must still reach every
/// later push there, on the deleted var (refused) and on the others
/// (accepted), through plain pushes and through operators.
#[test]
fn a_deletion_on_another_thread_refuses_later_pushes_of_that_var_only() {
    for engine in common::every_executor() {
        let gone = engine.new_var();
        let kept = engine.new_var();
        let op = engine
            .new_operator(OpDesc::new("op").writes(&gone), |_| Ok(()))
            .unwrap();
        engine
            .push(OpDesc::new("before").writes(&gone), |_| Ok(()))
            .unwrap();
        let handle = gone.clone();
        std::thread::scope(|s| {
            s.spawn(|| engine.delete_var(handle).unwrap());
        });
        let err = engine
            .push(OpDesc::new("after").reads(&gone), |_| Ok(()))
            .unwrap_err();
        assert!(
            matches!(&err, depengine::EngineError::DeletedVar { op, .. } if op == "after"),
            "{err:?}"
        );
        let err = engine.push_operator(&op, 0).unwrap_err();
        assert!(
            matches!(err, depengine::EngineError::DeletedVar { .. }),
            "{err:?}"
        );
        let err = engine
            .new_operator(OpDesc::new("op2").reads(&gone), |_| Ok(()))
            .unwrap_err();
        assert!(
            matches!(err, depengine::EngineError::DeletedVar { .. }),
            "{err:?}"
        );
        engine
            .push(OpDesc::new("other").reads(&kept).writes(&kept), |_| Ok(()))
            .unwrap();
        engine.wait_for_all().unwrap();
        assert_eq!(kept.version(), 1);
        assert_eq!(
            gone.version(),
            2,
            "the write before the deletion and the deletion ran, nothing after"
        );
    }
}

#[test]
fn vars_of_another_engine_are_refused() {
    let a = Engine::builder().kind(EngineKind::Naive).build().unwrap();
    let b = Engine::builder().kind(EngineKind::Pooled).build().unwrap();
    let v = a.new_var();
    let err = b.push(OpDesc::new("x").reads(&v), |_| Ok(())).unwrap_err();
    assert!(
        matches!(err, depengine::EngineError::ForeignVar { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("another engine"));
    assert!(b.wait_for_var(&v).is_err());
    // Nothing was pushed: the engine is still clean.
    assert_eq!(b.pending(), 0);
    b.wait_for_all().unwrap();
}

#[test]
fn unknown_gpu_is_an_error() {
    let e = Engine::builder().gpus(1).build().unwrap();
    let err = e
        .push(OpDesc::new("k").context(Context::Gpu(3)), |_| Ok(()))
        .unwrap_err();
    assert!(err.to_string().contains("gpu(3)"), "{err}");
    e.push(OpDesc::new("k").context(Context::Gpu(0)), |_| Ok(()))
        .unwrap();
    e.wait_for_all().unwrap();
}

#[test]
fn operators_push_many_times_and_delete_after_their_pushes() {
    for engine in common::every_executor() {
        let v = engine.new_var();
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        let op = engine
            .new_operator(OpDesc::new("inc").writes(&v), move |_| {
                c.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .unwrap();
        for _ in 0..100 {
            engine.push_operator(&op, 0).unwrap();
        }
        engine.delete_operator(op).unwrap();
        engine.wait_for_all().unwrap();
        assert_eq!(count.load(Ordering::SeqCst), 100);
        assert_eq!(v.version(), 100, "deleting the operator is not a write");
    }
}

#[test]
fn priority_pool_runs_highest_priority_first() {
    let engine = Engine::builder()
        .kind(EngineKind::PerDevice)
        .cpu_priority_workers(1)
        .build()
        .unwrap();
    let gate = engine.new_var();
    let order = Arc::new(Mutex::new(Vec::new()));
    // Hold the single priority worker until every op below is queued. The
    // ops are pushed only once the gate runs: pushed while the gate still
    // waited in the queue, the priority-9 op would rightly go first, and
    // the order below would not be what this test means to check.
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let rx = Mutex::new(rx);
    let (started_tx, started) = std::sync::mpsc::channel::<()>();
    engine
        .push(
            OpDesc::new("gate")
                .writes(&gate)
                .property(Property::CpuPrioritized),
            move |_| {
                started_tx.send(()).unwrap();
                rx.lock().unwrap().recv().unwrap();
                Ok(())
            },
        )
        .unwrap();
    started.recv().unwrap();
    for p in [1, 5, -3, 9, 0, 5] {
        let o = order.clone();
        engine
            .push(
                OpDesc::new("p")
                    .property(Property::CpuPrioritized)
                    .priority(p),
                move |_| {
                    o.lock().unwrap().push(p);
                    Ok(())
                },
            )
            .unwrap();
    }
    // The gate holds the only priority worker: all six wait in its queue.
    assert_eq!(engine.pending(), 7);
    tx.send(()).unwrap();
    engine.wait_for_all().unwrap();
    assert_eq!(*order.lock().unwrap(), vec![9, 5, 5, 1, 0, -3]);
}

#[test]
fn env_config_names_the_bad_variable() {
    use std::collections::HashMap;
    let mut vars = HashMap::new();
    vars.insert("DEPENGINE_CPU_WORKERS".to_string(), "many".to_string());
    let err = Engine::builder().env_from(&vars).unwrap_err();
    assert!(err.to_string().contains("DEPENGINE_CPU_WORKERS"), "{err}");
    let mut vars = HashMap::new();
    vars.insert("DEPENGINE_ENGINE_TYPE".to_string(), "turbo".to_string());
    let err = Engine::builder().env_from(&vars).unwrap_err();
    assert!(err.to_string().contains("DEPENGINE_ENGINE_TYPE"), "{err}");
    let mut vars = HashMap::new();
    vars.insert(
        "DEPENGINE_ENGINE_TYPE".to_string(),
        "ThreadedEnginePerDevice".to_string(),
    );
    vars.insert("DEPENGINE_CPU_WORKERS".to_string(), "3".to_string());
    let e = Engine::builder().env_from(&vars).unwrap().build().unwrap();
    assert_eq!(e.kind(), EngineKind::PerDevice);
    assert_eq!(e.pools()[0], ("cpu".to_string(), 3));
}

#[test]
fn diagnostics_name_the_blocked_ops() {
    let engine = Engine::builder().kind(EngineKind::Pooled).build().unwrap();
    let a = engine.new_named_var("weights");
    let b = engine.new_var();
    // Completed only after the report below was taken.
    let (release, gate) = std::sync::mpsc::channel::<()>();
    engine
        .push_async(OpDesc::new("never yet").writes(&a), move |_, done| {
            std::thread::spawn(move || {
                let _ = gate.recv();
                done.done();
            });
        })
        .unwrap();
    engine
        .push(OpDesc::new("blocked").reads(&a).writes(&b), |_| Ok(()))
        .unwrap();
    let report = engine.pending_ops();
    let ra = report.var(a.id()).expect("a has pending work");
    assert_eq!(ra.name.as_deref(), Some("weights"));
    assert_eq!(
        ra.running_write.as_ref().map(|w| w.1.as_str()),
        Some("never yet")
    );
    assert_eq!(ra.queued.len(), 1);
    assert_eq!(ra.queued[0].name, "blocked");
    assert_eq!(ra.queued[0].writes, vec![b.id()]);
    let text = report.to_string();
    assert!(
        text.contains("never yet") && text.contains("blocked") && text.contains("weights"),
        "{text}"
    );
    release.send(()).unwrap();
    engine.wait_for_all().unwrap();
    assert!(engine.pending_ops().vars.is_empty());
}

#[test]
fn a_var_is_freed_once_its_handles_and_its_ops_are_gone() {
    for engine in common::every_executor() {
        let kind = engine.kind();
        // Never used; used by one-var ops only; by a many-var op; deleted.
        let unused = engine.new_var();
        let (one, a, b, del) = (
            engine.new_var(),
            engine.new_var(),
            engine.new_var(),
            engine.new_var(),
        );
        engine
            .push(OpDesc::new("w").writes(&one), |_| Ok(()))
            .unwrap();
        engine
            .push(OpDesc::new("r").reads(&one), |_| Ok(()))
            .unwrap();
        engine
            .push(OpDesc::new("ab").reads(&a).writes(&b), |_| Ok(()))
            .unwrap();
        engine.wait_for_all().unwrap();
        assert_eq!(engine.live_vars(), 5, "{kind:?}");
        drop((unused, one, a, b));
        engine.delete_var(del).unwrap();
        engine.wait_for_all().unwrap();
        assert_eq!(engine.live_vars(), 0, "{kind:?}");

        // An op not yet completed keeps its var alive after the last handle.
        let v = engine.new_var();
        let slot = Arc::new(Mutex::new(None));
        let s = slot.clone();
        engine
            .push_async(OpDesc::new("held").writes(&v), move |_, done| {
                *s.lock().unwrap() = Some(done);
            })
            .unwrap();
        engine
            .push(OpDesc::new("after").reads(&v), |_| Ok(()))
            .unwrap();
        drop(v);
        let done = loop {
            if let Some(done) = slot.lock().unwrap().take() {
                break done;
            }
            std::thread::yield_now();
        };
        assert_eq!(engine.live_vars(), 1, "{kind:?}: freed under its op");
        done.done();
        engine.wait_for_all().unwrap();
        assert_eq!(engine.live_vars(), 0, "{kind:?}");
    }
}

#[test]
fn async_ops_completed_from_other_threads() {
    for engine in common::every_executor() {
        let v = engine.new_var();
        let sum = Arc::new(AtomicUsize::new(0));
        for i in 0..200 {
            let s = sum.clone();
            engine
                .push_async(OpDesc::new("async").writes(&v), move |_, done| {
                    std::thread::spawn(move || {
                        s.fetch_add(i, Ordering::SeqCst);
                        done.done();
                    });
                })
                .unwrap();
        }
        engine.wait_for_var(&v).unwrap();
        assert_eq!(sum.load(Ordering::SeqCst), (0..200).sum::<usize>());
        assert_eq!(v.version(), 200);
    }
}

#[test]
fn copy_and_gpu_ops_run_on_their_pools() {
    let engine = Engine::builder()
        .kind(EngineKind::PerDevice)
        .gpus(2)
        .build()
        .unwrap();
    let names = Arc::new(Mutex::new(Vec::new()));
    for (ctx, prop) in [
        (Context::Gpu(1), Property::Normal),
        (Context::Gpu(0), Property::CopyToDevice),
        (Context::Cpu(0), Property::Normal),
        (Context::Cpu(0), Property::CpuPrioritized),
    ] {
        let n = names.clone();
        engine
            .push_sync(
                OpDesc::new("where").context(ctx).property(prop),
                move |_| {
                    n.lock()
                        .unwrap()
                        .push(std::thread::current().name().unwrap_or("").to_string());
                    Ok(())
                },
            )
            .unwrap();
    }
    let names = names.lock().unwrap();
    assert!(names[0].starts_with("depengine-gpu1-"), "{names:?}");
    assert!(names[1].starts_with("depengine-gpu0-copy-"), "{names:?}");
    assert!(names[2].starts_with("depengine-cpu-"), "{names:?}");
    assert!(names[3].starts_with("depengine-cpu-priority-"), "{names:?}");
}

/// Under the per-device executor an op pushed as `Property::Async` runs
/// on the thread that makes it ready, without a worker's wake-up: the
/// pushing thread when its vars are free, the worker whose completion
/// releases it otherwise. Without the property the same body runs on a
/// CPU worker.
#[test]
fn async_property_ops_run_on_the_thread_that_makes_them_ready() {
    let engine = Engine::builder()
        .kind(EngineKind::PerDevice)
        .cpu_workers(2)
        .build()
        .unwrap();
    let v = engine.new_var();
    let ran_on = Arc::new(Mutex::new(Vec::<String>::new()));
    let push_recording = |prop: Property| {
        let ran_on = ran_on.clone();
        engine
            .push_async(
                OpDesc::new("handoff").writes(&v).property(prop),
                move |_, done| {
                    let me = std::thread::current();
                    ran_on
                        .lock()
                        .unwrap()
                        .push(me.name().unwrap_or("unnamed").to_string());
                    // Completed from another thread, as an async op is.
                    std::thread::spawn(move || done.done());
                },
            )
            .unwrap();
    };
    let pusher = std::thread::current()
        .name()
        .unwrap_or("unnamed")
        .to_string();
    // Ready at its push: it runs here.
    push_recording(Property::Async);
    engine.wait_for_var(&v).unwrap();
    // Queued behind a write that a worker runs: the worker's completion
    // makes it ready, and it runs on that worker.
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    engine
        .push(OpDesc::new("hold").writes(&v), move |_| {
            go_rx.recv().unwrap();
            Ok(())
        })
        .unwrap();
    push_recording(Property::Async);
    go_tx.send(()).unwrap();
    engine.wait_for_var(&v).unwrap();
    // Without the property: on a worker, even when ready at its push.
    push_recording(Property::Normal);
    engine.wait_for_var(&v).unwrap();
    let ran_on = ran_on.lock().unwrap();
    assert_eq!(ran_on[0], pusher, "{ran_on:?}");
    assert!(ran_on[1].starts_with("depengine-cpu-"), "{ran_on:?}");
    assert!(ran_on[2].starts_with("depengine-cpu-"), "{ran_on:?}");
    assert_eq!(v.version(), 4);
}

/// The buffers of freed vars' queues are kept for later vars up to
/// `EngineBuilder::pooled_queue_entries`: with none kept, a few, or the
/// default, ops on fresh vars whose queues took a freed var's buffer run
/// in push order and read what the writes before them wrote. Each round
/// makes new vars and holds them all with one op until its ops are
/// pushed, so every queue grows long and the next round's queues start
/// in the buffers this round's leave behind.
#[test]
fn ops_run_the_same_under_every_queue_buffer_limit() {
    const VARS: usize = 8;
    const OPS: usize = 1500;
    for limit in [Some(0), Some(64), None] {
        let mut builder = Engine::builder().cpu_workers(2);
        if let Some(n) = limit {
            builder = builder.pooled_queue_entries(n);
        }
        let engine = builder.build().unwrap();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..4 {
            let vars: Vec<_> = (0..VARS).map(|_| engine.new_var()).collect();
            let go = hold_all(&engine, &vars);
            let steps = push_checked_steps(&engine, &vars, OPS, || {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((seed >> 33) as usize % VARS, (seed >> 45) as usize % VARS)
            });
            check_steps(
                &engine,
                &vars,
                steps,
                Some(go),
                &format!("{limit:?} round {round}"),
            );
        }
    }
}

/// A pushing thread held to a lead (`EngineBuilder::max_lead`) runs the
/// same ops in the same order as one that is not: random reads and writes
/// over a few vars, each read checked against what a serial run would
/// have seen, under limits from one op (every 256th push waits for all
/// before it) to none. In the first round every op queues behind one that
/// waits for the pushing thread, so the pushes find no completion and
/// must stop waiting; in the second they complete as they go.
#[test]
fn ops_run_the_same_under_every_lead_limit() {
    const VARS: usize = 16;
    const OPS: usize = 3000;
    for limit in [Some(1), Some(64), Some(0), None] {
        for held in [true, false] {
            let mut builder = Engine::builder().cpu_workers(2);
            if let Some(n) = limit {
                builder = builder.max_lead(n);
            }
            let engine = builder.build().unwrap();
            let vars: Vec<_> = (0..VARS).map(|_| engine.new_var()).collect();
            let go = held.then(|| hold_all(&engine, &vars));
            let mut seed = 0x2545_f491_4f6c_dd1du64;
            let steps = push_checked_steps(&engine, &vars, OPS, || {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (
                    (seed % VARS as u64) as usize,
                    ((seed >> 20) % VARS as u64) as usize,
                )
            });
            check_steps(&engine, &vars, steps, go, &format!("{limit:?} held {held}"));
        }
    }
}

/// Pushes an op that writes every var of `vars` and runs until the
/// returned sender sends: the ops pushed on them meanwhile all queue.
fn hold_all(engine: &Engine, vars: &[Var]) -> std::sync::mpsc::Sender<()> {
    let (go, wait) = std::sync::mpsc::channel::<()>();
    engine
        .push(OpDesc::new("hold").writes(vars), move |_| {
            wait.recv().expect("sent after the pushes");
            Ok(())
        })
        .unwrap();
    go
}

/// What [`push_checked_steps`] pushed, for [`check_steps`].
struct Steps {
    /// Per var, the steps that wrote it, in the order they ran.
    written: Arc<Vec<Mutex<Vec<usize>>>>,
    /// Per var, the writes pushed.
    pushed_writes: Vec<usize>,
}

/// Pushes `ops` steps: step i writes var `w` and reads var `r`, for `(w,
/// r)` from `next`, checks in its body that it reads as many writes of
/// `r` as a serial run would have, and logs itself under `w`.
fn push_checked_steps(
    engine: &Engine,
    vars: &[Var],
    ops: usize,
    mut next: impl FnMut() -> (usize, usize),
) -> Steps {
    let written: Arc<Vec<_>> = Arc::new(vars.iter().map(|_| Mutex::new(Vec::new())).collect());
    let mut pushed_writes = vec![0usize; vars.len()];
    for i in 0..ops {
        let (w, r) = next();
        let expect_read = pushed_writes[r];
        let log = written.clone();
        let mut desc = OpDesc::new("step").writes(&vars[w]);
        if r != w {
            desc = desc.reads(&vars[r]);
        }
        engine
            .push(desc, move |_| {
                if r != w {
                    let seen = log[r].lock().unwrap().len();
                    assert_eq!(seen, expect_read, "op {i} read var {r} too early or late");
                }
                log[w].lock().unwrap().push(i);
                Ok(())
            })
            .unwrap();
        pushed_writes[w] += 1;
    }
    Steps {
        written,
        pushed_writes,
    }
}

/// After [`push_checked_steps`], lets the op of [`hold_all`] end if one
/// holds the vars, waits for all, then checks that every step ran once,
/// each var's writes in push order, and that its version counts them
/// and the holding op's write besides.
fn check_steps(
    engine: &Engine,
    vars: &[Var],
    steps: Steps,
    held: Option<std::sync::mpsc::Sender<()>>,
    what: &str,
) {
    let extra = u64::from(held.is_some());
    if let Some(go) = held {
        go.send(()).unwrap();
    }
    let Steps {
        written,
        pushed_writes,
    } = steps;
    engine
        .wait_for_all()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    for (k, v) in vars.iter().enumerate() {
        let log = written[k].lock().unwrap();
        assert_eq!(log.len(), pushed_writes[k], "{what}");
        assert_eq!(v.version(), extra + log.len() as u64, "{what}");
        assert!(
            log.windows(2).all(|p| p[0] < p[1]),
            "{what}: var {k} written out of push order"
        );
    }
}

/// Blocks of completed ops are kept for reuse up to
/// `EngineBuilder::pooled_op_blocks` and freed beyond it: either way each
/// op is run once, in order, with its own vars. A limit of 0 frees nearly
/// every block, 64 keeps one batch, and the default keeps them all here.
#[test]
fn ops_run_the_same_under_every_op_block_limit() {
    for limit in [Some(0), Some(64), None] {
        for kind in [EngineKind::Naive, EngineKind::Pooled, EngineKind::PerDevice] {
            let mut builder = Engine::builder().kind(kind).cpu_workers(2);
            if let Some(n) = limit {
                builder = builder.pooled_op_blocks(n);
            }
            let engine = builder.build().unwrap();
            let vars: Vec<_> = (0..64).map(|_| engine.new_var()).collect();
            let logs: Vec<_> = (0..64).map(|_| Arc::new(Mutex::new(Vec::new()))).collect();
            // Three rounds of 3,000 ops: the blocks of a round's ops come
            // back to the pool (or are freed) before the next round takes
            // blocks again.
            for round in 0..3 {
                for i in 0..3000usize {
                    let k = (i * 7 + round) % 64;
                    let log = logs[k].clone();
                    let src = &vars[(k + 1) % 64];
                    engine
                        .push(OpDesc::new("step").reads(src).writes(&vars[k]), move |_| {
                            log.lock().unwrap().push((round, i));
                            Ok(())
                        })
                        .unwrap();
                }
                engine.wait_for_all().unwrap();
            }
            let total: usize = logs.iter().map(|l| l.lock().unwrap().len()).sum();
            assert_eq!(total, 9000, "{limit:?} {kind:?}");
            for (k, log) in logs.iter().enumerate() {
                let log = log.lock().unwrap();
                assert_eq!(vars[k].version(), log.len() as u64, "{limit:?} {kind:?}");
                assert!(
                    log.windows(2).all(|w| w[0] < w[1]),
                    "{limit:?} {kind:?}: var {k} written out of push order"
                );
            }
        }
    }
}

/// What each numbered op records: the pushing thread, its place in that
/// thread's pushes, and its sequence number.
type Numbered = Arc<Mutex<Vec<(usize, usize, u64)>>>;

/// The first thread to push owns the engine's push count and numbers its
/// ops without a locked add; the first push from another thread takes the
/// count from it (`push_count.rs`). Whatever the timing, every op gets a
/// number of its own, each thread's ops rise in its push order, and a
/// wait sees every op.
#[test]
fn ops_pushed_from_several_threads_get_distinct_numbers_in_each_thread_s_order() {
    const THREADS: usize = 4;
    const EACH: usize = 400;
    for (engine, main_first) in common::every_executor()
        .into_iter()
        .map(|e| (e, true))
        .chain(common::every_executor().into_iter().map(|e| (e, false)))
    {
        let engine = Arc::new(engine);
        let before = if main_first { 50 } else { 0 };
        let seen = Arc::new(Mutex::new(Vec::new()));
        let push_some = |engine: &Engine, seen: &Numbered, t, n| {
            let own = engine.new_var();
            for i in 0..n {
                let seen = seen.clone();
                engine
                    .push(OpDesc::new("numbered").writes(&own), move |ctx| {
                        seen.lock().unwrap().push((t, i, ctx.seq()));
                        Ok(())
                    })
                    .unwrap();
            }
        };
        // Either the main thread claims the count before the others push,
        // or the racing threads claim and revoke it among themselves.
        push_some(&engine, &seen, THREADS, before);
        let start = Arc::new(std::sync::Barrier::new(THREADS));
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let (engine, seen, start) = (engine.clone(), seen.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    push_some(&engine, &seen, t, EACH);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        engine.wait_for_all().unwrap();
        assert_eq!(engine.pending(), 0, "{:?}", engine.kind());
        let seen = std::mem::take(&mut *seen.lock().unwrap());
        assert_eq!(seen.len(), THREADS * EACH + before, "{:?}", engine.kind());
        let mut numbers: Vec<u64> = seen.iter().map(|s| s.2).collect();
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(
            numbers.len(),
            seen.len(),
            "{:?}: a number given twice",
            engine.kind()
        );
        for t in 0..=THREADS {
            let mut mine: Vec<(usize, u64)> = seen
                .iter()
                .filter(|s| s.0 == t)
                .map(|s| (s.1, s.2))
                .collect();
            mine.sort_unstable();
            assert!(
                mine.windows(2).all(|w| w[0].1 < w[1].1),
                "{:?}: thread {t}'s numbers do not rise in its push order",
                engine.kind()
            );
        }
        // A push after the others were joined comes after all of them.
        let last = Arc::new(Mutex::new(None));
        let l = last.clone();
        let v = engine.new_var();
        engine
            .push(OpDesc::new("last").writes(&v), move |ctx| {
                *l.lock().unwrap() = Some(ctx.seq());
                Ok(())
            })
            .unwrap();
        engine.wait_for_all().unwrap();
        let last = last.lock().unwrap().expect("ran");
        assert!(last > *numbers.last().unwrap(), "{:?}", engine.kind());
    }
}
