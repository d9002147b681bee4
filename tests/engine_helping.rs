//! `EngineBuilder::help_while_waiting`: a thread blocked in `wait_for_all`
//! runs queued ops itself.
//!
//! Each test holds the only CPU worker inside an op that needs a second op
//! to have run. The waiting thread is then the only thread that can run it:
//! with helping the wait returns; without, the held op gives up after a
//! minute and fails, and the test with it.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

use depengine::{Engine, EngineError, EngineKind, OpDesc, OpError};

/// What the second op saw: its thread, its worker index, and what a wait
/// from inside it returned.
type Seen = Arc<Mutex<Option<(ThreadId, Option<usize>, Result<(), EngineError>)>>>;

fn helping_engine(kind: EngineKind) -> Engine {
    Engine::builder()
        .kind(kind)
        .cpu_workers(1)
        .help_while_waiting(true)
        .build()
        .unwrap()
}

/// Pushes an op that occupies the only worker until `release` is told, and
/// returns once it runs.
fn hold_the_worker(engine: &Engine) -> mpsc::Sender<()> {
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let held = engine.new_var();
    engine
        .push(OpDesc::new("hold").writes(&held), move |_| {
            started_tx.send(()).unwrap();
            match release_rx.recv_timeout(Duration::from_secs(60)) {
                Ok(()) => Ok(()),
                Err(_) => Err(OpError::msg("the waiting thread never ran `release`")),
            }
        })
        .unwrap();
    started_rx.recv().unwrap();
    release_tx
}

fn waiter_runs_the_op_the_busy_worker_cannot(kind: EngineKind) {
    let engine = helping_engine(kind);
    let release = hold_the_worker(&engine);
    let seen: Seen = Arc::new(Mutex::new(None));
    let (s, inner) = (seen.clone(), engine.clone());
    let v = engine.new_var();
    engine
        .push(OpDesc::new("release").writes(&v), move |ctx| {
            let nested = inner.wait_for_all();
            *s.lock().unwrap() = Some((std::thread::current().id(), ctx.worker(), nested));
            release.send(()).unwrap();
            Ok(())
        })
        .unwrap();
    engine.wait_for_all().unwrap();
    let (thread, worker, nested) = seen.lock().unwrap().take().expect("`release` ran");
    assert_eq!(
        thread,
        std::thread::current().id(),
        "ran on the waiting thread"
    );
    assert_eq!(worker, None, "an op run by a waiter is on no worker");
    assert!(
        matches!(nested, Err(EngineError::WaitFromWorker { .. })),
        "a wait inside an op run by the waiter is refused like one on a worker: {nested:?}"
    );
}

#[test]
fn per_device_waiter_runs_the_op_the_busy_worker_cannot() {
    waiter_runs_the_op_the_busy_worker_cannot(EngineKind::PerDevice);
}

#[test]
fn pooled_waiter_runs_the_op_the_busy_worker_cannot() {
    waiter_runs_the_op_the_busy_worker_cannot(EngineKind::Pooled);
}

#[test]
fn a_panic_in_an_op_run_by_the_waiter_is_reported_and_the_waiter_lives() {
    let engine = helping_engine(EngineKind::PerDevice);
    let release = hold_the_worker(&engine);
    let v = engine.new_var();
    engine
        .push(OpDesc::new("release-then-panic").writes(&v), move |_| {
            release.send(()).unwrap();
            panic!("boom in the waiter");
        })
        .unwrap();
    match engine.wait_for_all() {
        Err(EngineError::OpFailed(f)) => {
            let text = f.to_string();
            assert!(text.contains("release-then-panic"), "{text}");
            assert!(text.contains("boom in the waiter"), "{text}");
        }
        other => panic!("expected the panic to be reported, got {other:?}"),
    }
    // The engine and the var stay usable, and the failure was reported once.
    engine
        .push(OpDesc::new("after").writes(&v), |_| Ok(()))
        .unwrap();
    engine.wait_for_all().unwrap();
}

#[test]
fn a_dependent_chain_released_by_the_waiter_runs_in_order() {
    let engine = helping_engine(EngineKind::PerDevice);
    let release = hold_the_worker(&engine);
    let v = engine.new_var();
    let log = Arc::new(Mutex::new(Vec::new()));
    for i in 0..50u32 {
        let log = log.clone();
        engine
            .push(OpDesc::new("chain").writes(&v), move |_| {
                log.lock().unwrap().push(i);
                Ok(())
            })
            .unwrap();
    }
    let r = Mutex::new(Some(release));
    engine
        .push(OpDesc::new("release").reads(&v), move |_| {
            if let Some(tx) = r.lock().unwrap().take() {
                tx.send(()).unwrap();
            }
            Ok(())
        })
        .unwrap();
    engine.wait_for_all().unwrap();
    assert_eq!(*log.lock().unwrap(), (0..50).collect::<Vec<_>>());
}
