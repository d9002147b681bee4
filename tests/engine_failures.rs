//! Every failure path of rules 4–7, on every executor.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use depengine::{Engine, EngineError, EngineKind, FailureKind, OpDesc, OpError, Property};

fn engines() -> Vec<Engine> {
    [EngineKind::Naive, EngineKind::Pooled, EngineKind::PerDevice]
        .into_iter()
        .map(|k| Engine::builder().kind(k).cpu_workers(2).build().unwrap())
        .collect()
}

fn quiet_panics() {
    // Panics in op bodies are expected here; keep the test output readable.
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = info.to_string();
            if !msg.contains("expected test panic") {
                default(info);
            }
        }));
    });
}

#[test]
fn an_error_fails_the_written_var_once_then_the_var_is_clean() {
    for engine in engines() {
        let v = engine.new_var();
        engine
            .push(OpDesc::new("bad write").writes(&v), |_| {
                Err(OpError::msg("disk full"))
            })
            .unwrap();
        let err = engine.wait_for_var(&v).unwrap_err();
        let f = err.failure().expect("an op failure");
        assert_eq!(f.op, "bad write");
        assert_eq!(f.kind, FailureKind::Error);
        assert_eq!(f.message, "disk full");
        assert!(err.to_string().contains("bad write") && err.to_string().contains("disk full"));
        // Reported once: the var and the engine are clean again.
        engine.wait_for_var(&v).unwrap();
        engine.wait_for_all().unwrap();
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        engine
            .push(OpDesc::new("after").writes(&v), move |_| {
                r.store(true, Ordering::SeqCst);
                Ok(())
            })
            .unwrap();
        engine.wait_for_var(&v).unwrap();
        assert!(ran.load(Ordering::SeqCst), "{:?}", engine.kind());
    }
}

#[test]
fn a_panic_is_caught_and_workers_survive() {
    quiet_panics();
    for engine in engines() {
        let v = engine.new_var();
        for _ in 0..8 {
            engine
                .push(OpDesc::new("panics").writes(&v), |_| {
                    panic!("expected test panic")
                })
                .unwrap();
        }
        let err = engine.wait_for_all().unwrap_err();
        let f = err.failure().unwrap();
        assert_eq!(f.kind, FailureKind::Panic);
        assert!(f.message.contains("expected test panic"));
        // Every worker is still alive: plenty of ops still run.
        let count = Arc::new(AtomicUsize::new(0));
        for _ in 0..100 {
            let c = count.clone();
            let w = engine.new_var();
            engine
                .push(OpDesc::new("ok").writes(&w), move |_| {
                    c.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
                .unwrap();
        }
        engine.wait_for_all().unwrap();
        assert_eq!(count.load(Ordering::SeqCst), 100);
    }
}

#[test]
fn failure_propagates_through_a_chain_and_skips_dependents() {
    for engine in engines() {
        let (a, b, c, unrelated) = (
            engine.new_var(),
            engine.new_var(),
            engine.new_var(),
            engine.new_var(),
        );
        let ran = Arc::new(AtomicUsize::new(0));
        engine
            .push(OpDesc::new("root").writes(&a), |_| {
                Err(OpError::msg("boom"))
            })
            .unwrap();
        for (name, r, w) in [("a->b", &a, &b), ("b->c", &b, &c)] {
            let ran = ran.clone();
            engine
                .push(OpDesc::new(name).reads(r).writes(w), move |_| {
                    ran.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
                .unwrap();
        }
        let r2 = ran.clone();
        engine
            .push(OpDesc::new("unrelated").writes(&unrelated), move |_| {
                r2.fetch_add(100, Ordering::SeqCst);
                Ok(())
            })
            .unwrap();
        let err = engine.wait_for_var(&c).unwrap_err();
        assert_eq!(err.failure().unwrap().op, "root", "{:?}", engine.kind());
        // Skipped writes still complete (versions count completed writes).
        assert_eq!(b.version(), 1);
        // wait_for_all reports nothing new (root was reported) and cleans b.
        engine.wait_for_all().unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 100, "only the unrelated op ran");
        engine.wait_for_var(&b).unwrap();
    }
}

#[test]
fn no_skip_ops_run_despite_failed_inputs() {
    for engine in engines() {
        let v = engine.new_var();
        engine
            .push(OpDesc::new("fails").writes(&v), |_| Err(OpError::msg("x")))
            .unwrap();
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        engine
            .push(
                OpDesc::new("cleanup").reads(&v).property(Property::NoSkip),
                move |_| {
                    r.store(true, Ordering::SeqCst);
                    Ok(())
                },
            )
            .unwrap();
        assert!(engine.wait_for_all().is_err());
        assert!(ran.load(Ordering::SeqCst));
    }
}

#[test]
fn completion_errors_and_dropped_completions_fail_the_op() {
    quiet_panics();
    for engine in engines() {
        let (a, b, c) = (engine.new_var(), engine.new_var(), engine.new_var());
        engine
            .push_async(OpDesc::new("async err").writes(&a), |_, done| {
                std::thread::spawn(move || done.fail(OpError::msg("device lost")));
            })
            .unwrap();
        engine
            .push_async(OpDesc::new("forgot").writes(&b), |_, done| {
                drop(done);
            })
            .unwrap();
        engine
            .push_async(OpDesc::new("async panic").writes(&c), |_, _done| {
                panic!("expected test panic");
            })
            .unwrap();
        let fa = engine.wait_for_var(&a).unwrap_err();
        assert_eq!(fa.failure().unwrap().message, "device lost");
        let fb = engine.wait_for_var(&b).unwrap_err();
        assert_eq!(fb.failure().unwrap().kind, FailureKind::CompletionDropped);
        assert!(fb.to_string().contains("forgot"));
        let fc = engine.wait_for_var(&c).unwrap_err();
        assert_eq!(fc.failure().unwrap().kind, FailureKind::Panic);
        assert!(fc
            .failure()
            .unwrap()
            .message
            .contains("expected test panic"));
        engine.wait_for_all().unwrap();
    }
}

#[test]
fn push_sync_returns_the_body_error_and_skips() {
    for engine in engines() {
        let v = engine.new_var();
        let err = engine
            .push_sync(
                OpDesc::new("sync bad").writes(&v),
                |_| -> Result<(), OpError> { Err(OpError::msg("nope")) },
            )
            .unwrap_err();
        assert_eq!(err.failure().unwrap().message, "nope");
        // The failure stays on v for ops that depend on it...
        let err = engine
            .push_sync(OpDesc::new("reader").reads(&v), |_| Ok(1))
            .unwrap_err();
        assert_eq!(err.failure().unwrap().op, "sync bad");
        // ...until a wait on v reports it.
        assert!(engine.wait_for_var(&v).is_err());
        assert_eq!(
            engine
                .push_sync(OpDesc::new("reader").reads(&v), |_| Ok(7))
                .unwrap(),
            7
        );
        engine.wait_for_all().unwrap();
    }
}

#[test]
fn waiting_from_inside_an_op_is_an_error_not_a_deadlock() {
    for engine in engines() {
        let v = engine.new_var();
        let inner = engine.clone();
        let v2 = v.clone();
        let result = engine
            .push_sync(OpDesc::new("waits"), move |_| {
                let a = inner.wait_for_all();
                let b = inner.wait_for_var(&v2);
                let c = inner.push_sync(OpDesc::new("nested"), |_| Ok(()));
                Ok((a, b, c))
            })
            .unwrap();
        for r in [result.0, result.1, result.2] {
            assert!(
                matches!(r, Err(EngineError::WaitFromWorker { .. })),
                "{:?}: {r:?}",
                engine.kind()
            );
        }
        engine.wait_for_all().unwrap();
    }
}

#[test]
fn pushing_after_shutdown_is_refused() {
    for engine in engines() {
        let v = engine.new_var();
        engine
            .push(OpDesc::new("before").writes(&v), |_| Ok(()))
            .unwrap();
        engine.shutdown().unwrap();
        assert_eq!(v.version(), 1, "shutdown ran pushed work");
        let err = engine
            .push(OpDesc::new("after").writes(&v), |_| Ok(()))
            .unwrap_err();
        assert!(matches!(err, EngineError::ShutDown { .. }));
        assert!(err.to_string().contains("after"));
        // A second shutdown is harmless.
        engine.shutdown().unwrap();
    }
}

#[test]
fn dropping_the_engine_finishes_pending_work_and_joins_threads() {
    for kind in [EngineKind::Naive, EngineKind::Pooled, EngineKind::PerDevice] {
        let done = Arc::new(AtomicUsize::new(0));
        let weak_marker = Arc::new(());
        {
            let engine = Engine::builder().kind(kind).cpu_workers(2).build().unwrap();
            let v = engine.new_var();
            for _ in 0..200 {
                let d = done.clone();
                let m = weak_marker.clone();
                engine
                    .push(OpDesc::new("work").writes(&v), move |_| {
                        let _keep = &m;
                        std::thread::sleep(std::time::Duration::from_micros(20));
                        d.fetch_add(1, Ordering::SeqCst);
                        Ok(())
                    })
                    .unwrap();
            }
            let d = done.clone();
            engine
                .push_async(OpDesc::new("late async").writes(&v), move |_, c| {
                    std::thread::spawn(move || {
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        d.fetch_add(1, Ordering::SeqCst);
                        c.done();
                    });
                })
                .unwrap();
        }
        assert_eq!(done.load(Ordering::SeqCst), 201, "{kind:?}: no work lost");
        // Every op body (and so every closure capture) was dropped.
        assert_eq!(Arc::strong_count(&weak_marker), 1);
    }
}

#[test]
fn dropping_the_last_handle_inside_an_op_does_not_deadlock() {
    let engine = Engine::builder().kind(EngineKind::Pooled).build().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let inner = engine.clone();
    engine
        .push(OpDesc::new("owns the last handle"), move |_| {
            let _ = rx.recv();
            drop(inner);
            Ok(())
        })
        .unwrap();
    drop(engine);
    tx.send(()).unwrap();
    // Reaching here means neither drop blocked forever.
}

#[test]
fn an_op_racing_a_deletion_is_failed_not_run() {
    // A push that passes the deleted check just before a concurrent
    // delete_var of the same var must not run after the deletion.
    for engine in engines() {
        for _ in 0..200 {
            let v = engine.new_var();
            let ran_after = Arc::new(AtomicBool::new(false));
            let deleted = Arc::new(AtomicBool::new(false));
            let (e2, v2, d2) = (engine.clone(), v.clone(), deleted.clone());
            let t = std::thread::spawn(move || {
                e2.delete_var_with(v2, move || d2.store(true, Ordering::SeqCst))
                    .unwrap();
            });
            let (r, d) = (ran_after.clone(), deleted.clone());
            let _ = engine.push(OpDesc::new("racer").writes(&v), move |_| {
                if d.load(Ordering::SeqCst) {
                    r.store(true, Ordering::SeqCst);
                }
                Ok(())
            });
            t.join().unwrap();
            let _ = engine.wait_for_all();
            assert!(!ran_after.load(Ordering::SeqCst), "{:?}", engine.kind());
        }
    }
}

#[test]
fn an_async_body_may_use_its_context_after_completing_itself() {
    for engine in engines() {
        let v = engine.new_var();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        for i in 0..200 {
            let s = seen.clone();
            let v2 = v.clone();
            engine
                .push_async(
                    OpDesc::new(format!("self-completing {i}")).writes(&v),
                    move |ctx, done| {
                        if i % 2 == 0 {
                            done.done();
                        } else {
                            std::thread::spawn(move || done.done());
                        }
                        // The op may be complete by now; its context is still valid.
                        s.lock()
                            .unwrap()
                            .push((ctx.name().to_string(), ctx.declares_write(&v2)));
                    },
                )
                .unwrap();
        }
        engine.wait_for_var(&v).unwrap();
        assert_eq!(v.version(), 200);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 200);
        for (i, (name, declared)) in seen.iter().enumerate() {
            assert_eq!(name, &format!("self-completing {i}"), "{:?}", engine.kind());
            assert!(declared);
        }
    }
}

#[test]
fn a_panicking_async_body_reports_its_panic_message() {
    quiet_panics();
    for engine in engines() {
        let v = engine.new_var();
        engine
            .push_async(OpDesc::new("async boom").writes(&v), |_, _done| {
                panic!("expected test panic in async body")
            })
            .unwrap();
        let err = engine.wait_for_var(&v).unwrap_err();
        let f = err.failure().unwrap();
        assert_eq!(f.kind, FailureKind::Panic, "{:?}", engine.kind());
        assert!(f.message.contains("expected test panic in async body"));
    }
}

#[test]
fn wait_for_all_reports_how_many_independent_failures_it_saw() {
    for engine in engines() {
        let (a, b, c) = (engine.new_var(), engine.new_var(), engine.new_var());
        for (name, v) in [("fails a", &a), ("fails b", &b), ("fails c", &c)] {
            engine
                .push(OpDesc::new(name).writes(v), |_| Err(OpError::msg("x")))
                .unwrap();
        }
        let err = engine.wait_for_all().unwrap_err();
        match &err {
            EngineError::OpsFailed { first, more } => {
                assert_eq!(*more, 2, "{:?}", engine.kind());
                assert!(first.op.starts_with("fails "));
            }
            other => panic!("{:?}: expected OpsFailed, got {other:?}", engine.kind()),
        }
        assert!(err.to_string().contains("2 more"), "{err}");
        // All reported: every var is clean and nothing is reported twice.
        engine.wait_for_all().unwrap();
        for v in [&a, &b, &c] {
            engine.wait_for_var(v).unwrap();
        }
    }
}
