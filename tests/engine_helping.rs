//! `EngineBuilder::help_while_waiting`: a thread blocked in `wait_for_all`
//! runs queued ops itself.
//!
//! Each test holds the only CPU worker inside an op that needs a second op
//! to have run. The waiting thread is then the only thread that can run it:
//! with helping the wait returns; without, the held op gives up after a
//! minute and fails, and the test with it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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

// ---------------------------------------------------------------------------
// `help_while_pushing`
// ---------------------------------------------------------------------------

fn pushing_engine(on: bool) -> Engine {
    Engine::builder()
        .cpu_workers(1)
        .help_while_pushing(on)
        .build()
        .unwrap()
}

/// In an op's body: counts the op in `on_pusher` when it runs on the
/// pushing thread `here`, which is no worker.
fn count_if_on(here: ThreadId, on_pusher: &AtomicUsize, ctx: &depengine::OpCtx<'_>) {
    if std::thread::current().id() == here {
        assert_eq!(ctx.worker(), None, "a pusher's op is on no worker");
        on_pusher.fetch_add(1, Ordering::SeqCst);
    }
}

/// Pushes `n` independent ops, each counting itself when it runs on this
/// thread; returns that count and the ops' vars.
fn push_independent(engine: &Engine, n: usize) -> (Arc<AtomicUsize>, Vec<depengine::Var>) {
    let here = std::thread::current().id();
    let on_pusher = Arc::new(AtomicUsize::new(0));
    let vars: Vec<_> = (0..n).map(|_| engine.new_var()).collect();
    for v in &vars {
        let on_pusher = on_pusher.clone();
        engine
            .push(OpDesc::new("independent").writes(v), move |ctx| {
                count_if_on(here, &on_pusher, ctx);
                Ok(())
            })
            .unwrap();
    }
    (on_pusher, vars)
}

#[test]
fn pushes_run_the_backlog_the_busy_worker_cannot() {
    let engine = pushing_engine(true);
    let release = hold_the_worker(&engine);
    let (on_pusher, vars) = push_independent(&engine, 1000);
    // The worker is still held: only the pushes can have run these, and
    // they leave a backlog of at most 64 plus the 16 pushes between looks.
    let ran = on_pusher.load(Ordering::SeqCst);
    assert!(
        ran >= 1000 - 64 - 16,
        "only {ran} of 1000 ops ran on the pushing thread"
    );
    release.send(()).unwrap();
    engine.wait_for_all().unwrap();
    assert!(vars.iter().all(|v| v.version() == 1));
}

#[test]
fn pushes_do_not_help_unless_asked() {
    let engine = pushing_engine(false);
    let release = hold_the_worker(&engine);
    let (on_pusher, vars) = push_independent(&engine, 1000);
    assert_eq!(on_pusher.load(Ordering::SeqCst), 0);
    release.send(()).unwrap();
    engine.wait_for_all().unwrap();
    assert_eq!(
        on_pusher.load(Ordering::SeqCst),
        0,
        "the waiter did not help either"
    );
    assert!(vars.iter().all(|v| v.version() == 1));
}

thread_local! {
    static DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

#[test]
fn a_push_from_an_op_the_pusher_runs_does_not_help_again() {
    // Every op the pusher runs pushes 100 more: were those pushes to help
    // too, the pusher would run ops inside ops, with no bound on the depth.
    let engine = pushing_engine(true);
    let release = hold_the_worker(&engine);
    let deepest = Arc::new(AtomicUsize::new(0));
    let children = Arc::new(AtomicUsize::new(0));
    let count = {
        let deepest = deepest.clone();
        move || {
            let d = DEPTH.with(|d| d.get()) + 1;
            deepest.fetch_max(d, Ordering::SeqCst);
            d
        }
    };
    let (on_pusher, _vars) = push_independent(&engine, 200);
    for _ in 0..20 {
        let (inner, count, children) = (engine.clone(), count.clone(), children.clone());
        engine
            .push(OpDesc::new("parent"), move |_| {
                DEPTH.with(|d| d.set(count()));
                for _ in 0..100 {
                    let (count, children) = (count.clone(), children.clone());
                    inner
                        .push(OpDesc::new("child"), move |_| {
                            let d = count();
                            DEPTH.with(|cell| cell.set(d));
                            children.fetch_add(1, Ordering::SeqCst);
                            DEPTH.with(|cell| cell.set(d - 1));
                            Ok(())
                        })
                        .unwrap();
                }
                DEPTH.with(|d| d.set(d.get() - 1));
                Ok(())
            })
            .unwrap();
    }
    assert!(on_pusher.load(Ordering::SeqCst) > 0, "the pushes helped");
    release.send(()).unwrap();
    engine.wait_for_all().unwrap();
    assert_eq!(children.load(Ordering::SeqCst), 2000);
    assert_eq!(
        deepest.load(Ordering::SeqCst),
        1,
        "an op ran inside another"
    );
}

/// Pushes a chain of `n` ops on one new var, each checking that it runs
/// in push order and counting itself when it runs on this thread; returns
/// that count and the var.
fn push_chain(engine: &Engine, n: usize) -> (Arc<AtomicUsize>, depengine::Var) {
    let here = std::thread::current().id();
    let on_pusher = Arc::new(AtomicUsize::new(0));
    let next = Arc::new(AtomicUsize::new(0));
    let v = engine.new_var();
    for i in 0..n {
        let (on_pusher, next) = (on_pusher.clone(), next.clone());
        engine
            .push(OpDesc::new("link").writes(&v), move |ctx| {
                assert_eq!(next.fetch_add(1, Ordering::SeqCst), i, "out of order");
                count_if_on(here, &on_pusher, ctx);
                Ok(())
            })
            .unwrap();
    }
    (on_pusher, v)
}

#[test]
fn pushes_far_ahead_run_a_short_queue_the_busy_worker_cannot() {
    // A chain queues one op at a time, far below the backlog that makes a
    // push help; what makes these pushes help is how many ops are pending.
    let engine = pushing_engine(true);
    let release = hold_the_worker(&engine);
    let (on_pusher, v) = push_chain(&engine, 3000);
    // With the worker held, a push that finds more than the window of
    // 1,024 pending ops (one worker) runs the chain until half of that is
    // left; it looks every 64 pushes, so no more than 1,024 + 64 links
    // (and the held op) can be left for the worker.
    let ran = on_pusher.load(Ordering::SeqCst);
    assert!(
        ran >= 3000 - 1024 - 64,
        "only {ran} of 3000 links ran on the pushing thread"
    );
    release.send(()).unwrap();
    engine.wait_for_all().unwrap();
    assert_eq!(v.version(), 3000);
}

#[test]
fn pushes_far_ahead_with_nothing_queued_do_not_wait() {
    // 3000 ops wait for an async op that only this thread completes, after
    // it has pushed them: a push that waited for the pending ops to drain
    // would never return.
    let engine = pushing_engine(true);
    let gate = engine.new_var();
    let handle = Arc::new(Mutex::new(None));
    {
        let handle = handle.clone();
        engine
            .push_async(OpDesc::new("gate").writes(&gate), move |_, done| {
                *handle.lock().unwrap() = Some(done);
            })
            .unwrap();
    }
    let ran = Arc::new(AtomicUsize::new(0));
    let (pushed_tx, pushed_rx) = mpsc::channel();
    let pusher = {
        let (engine, gate, ran) = (engine.clone(), gate.clone(), ran.clone());
        std::thread::spawn(move || {
            let vars: Vec<_> = (0..3000).map(|_| engine.new_var()).collect();
            for v in &vars {
                let ran = ran.clone();
                engine
                    .push(OpDesc::new("gated").reads(&gate).writes(v), move |_| {
                        ran.fetch_add(1, Ordering::SeqCst);
                        Ok(())
                    })
                    .unwrap();
            }
            pushed_tx.send(()).unwrap();
            vars
        })
    };
    let returned = pushed_rx.recv_timeout(Duration::from_secs(60));
    // Complete the gate either way, so that a failing test still ends.
    let done = loop {
        if let Some(done) = handle.lock().unwrap().take() {
            break done;
        }
        std::thread::yield_now();
    };
    assert_eq!(ran.load(Ordering::SeqCst), 0, "an op ran before its gate");
    done.done();
    returned.expect("the pushes waited for ops that could not run yet");
    let vars = pusher.join().unwrap();
    engine.wait_for_all().unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 3000);
    assert!(vars.iter().all(|v| v.version() == 1));
}

#[test]
fn a_helping_pusher_runs_queued_ops_while_the_lead_holds_its_pushes() {
    // The only worker is held until the last push, so an op that runs
    // before then runs on the pushing thread, and a push waits on the
    // lead (64 pending; it looks every 256 pushes) before the last: the
    // waiting push runs queued ops, as a wait for all does. Without that
    // it naps, the held worker completes nothing, and none runs.
    let engine = Engine::builder()
        .kind(EngineKind::PerDevice)
        .cpu_workers(1)
        .help_while_waiting(true)
        .max_lead(64)
        .build()
        .unwrap();
    let release = hold_the_worker(&engine);
    let pushing = Arc::new(AtomicBool::new(true));
    let early = Arc::new(AtomicUsize::new(0));
    let on_a_worker = Arc::new(AtomicUsize::new(0));
    let vars: Vec<_> = (0..1000).map(|_| engine.new_var()).collect();
    for v in &vars {
        let (p, e, w) = (pushing.clone(), early.clone(), on_a_worker.clone());
        engine
            .push(OpDesc::new("op").writes(v), move |ctx| {
                if p.load(Ordering::SeqCst) {
                    e.fetch_add(1, Ordering::SeqCst);
                    if ctx.worker().is_some() {
                        w.fetch_add(1, Ordering::SeqCst);
                    }
                }
                Ok(())
            })
            .unwrap();
    }
    pushing.store(false, Ordering::SeqCst);
    release.send(()).unwrap();
    engine.wait_for_all().unwrap();
    assert!(
        early.load(Ordering::SeqCst) > 0,
        "no op ran while the pushes were held by the lead"
    );
    assert_eq!(
        on_a_worker.load(Ordering::SeqCst),
        0,
        "the held worker ran an op"
    );
}
