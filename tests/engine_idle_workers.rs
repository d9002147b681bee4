//! Workers that run out of ready ops while another runs a long one: they
//! search, linger while nothing is pushed, then sleep (`linger.rs`,
//! `sleep.rs`), and the long op's completion must still reach them.
//!
//! Each round pushes one long write of `x` and then readers of `x`, so
//! that every other worker (and, with `help_while_waiting`, the waiting
//! thread) finds nothing to run for longer than a linger, and goes to
//! sleep, before the write completes and makes all the readers ready at
//! once. A lost wake-up would leave a reader queued with every worker
//! asleep: the wait runs on a thread of its own, and the test fails
//! instead of hanging when it does not return within a minute. The
//! readers then check that the write was done before them, and the
//! rounds that every reader ran.
//!
//! The lone pushes of the last tests reach workers in every state:
//! searching, lingering, on their way to sleep, asleep. Each op must start
//! with no later push to wake anybody for it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use depengine::util::rng::SplitMix64;
use depengine::{BuildError, Engine, EngineBuilder, EngineKind, OpDesc, OpError};

/// Far longer than a searcher lingers (50 µs), so that the others sleep.
const LONG_WRITE: Duration = Duration::from_millis(3);
const READERS: usize = 8;
const ROUNDS: usize = 12;

fn spin(d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// Runs the rounds on `engine`; panics on a wrong order or a lost op.
fn long_write_then_readers(engine: Engine) {
    let x = engine.new_var();
    for round in 0..ROUNDS {
        let written = Arc::new(AtomicBool::new(false));
        let ran = Arc::new(AtomicUsize::new(0));
        let w = written.clone();
        engine
            .push(OpDesc::new("long write").writes(&x), move |_| {
                spin(LONG_WRITE);
                w.store(true, Ordering::SeqCst);
                Ok(())
            })
            .unwrap();
        for _ in 0..READERS {
            let (w, ran) = (written.clone(), ran.clone());
            engine
                .push(OpDesc::new("reader").reads(&x), move |_| {
                    if !w.load(Ordering::SeqCst) {
                        return Err(OpError::msg("a reader ran before the write"));
                    }
                    spin(Duration::from_micros(20));
                    ran.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
                .unwrap();
        }
        let (done_tx, done_rx) = mpsc::channel();
        let waiter = engine.clone();
        std::thread::spawn(move || {
            let _ = done_tx.send(waiter.wait_for_all());
        });
        match done_rx.recv_timeout(Duration::from_secs(60)) {
            Ok(result) => result.unwrap(),
            Err(_) => panic!("round {round}: wait_for_all did not return within a minute"),
        }
        assert_eq!(ran.load(Ordering::SeqCst), READERS, "round {round}");
    }
}

#[test]
fn sleeping_workers_are_woken_for_the_readers_a_long_write_releases() {
    for (kind, workers) in [
        (EngineKind::PerDevice, 2),
        (EngineKind::PerDevice, 4),
        (EngineKind::Pooled, 3),
    ] {
        let engine = Engine::builder()
            .kind(kind)
            .cpu_workers(workers)
            .build()
            .unwrap();
        long_write_then_readers(engine);
    }
}

/// With one worker and a waiting thread that helps, the worker lingers
/// for the helper's ops too. A helper naps for a bounded time and looks
/// again, so a lost wake-up would only slow this one down: it checks the
/// order and that every reader ran.
#[test]
fn a_lone_worker_and_a_helping_waiter_finish_every_round() {
    for kind in [EngineKind::PerDevice, EngineKind::Pooled] {
        let engine = Engine::builder()
            .kind(kind)
            .cpu_workers(1)
            .help_while_waiting(true)
            .build()
            .unwrap();
        long_write_then_readers(engine);
    }
}

/// The search settings change when workers sleep, never whether they are
/// woken: with one searcher (waking a successor when it finds work, or
/// not), with no linger, and with a linger that outlasts the long write
/// and goes on through pushes, every round still finishes in order.
#[test]
fn every_search_setting_still_wakes_the_workers_for_the_readers() {
    type Tune = fn(EngineBuilder) -> EngineBuilder;
    let tunings: [(&str, Tune); 4] = [
        ("one searcher", |b| b.max_searching(1)),
        ("one searcher that keeps one searching", |b| {
            b.max_searching(1).keep_one_searching(true)
        }),
        ("no linger", |b| b.linger(Duration::ZERO)),
        ("a long linger through pushes", |b| {
            b.linger(Duration::from_millis(5))
                .linger_through_pushes(true)
        }),
    ];
    for (what, tune) in tunings {
        for (kind, workers) in [(EngineKind::PerDevice, 4), (EngineKind::Pooled, 3)] {
            eprintln!("{what}, {kind}, {workers} workers");
            let builder = Engine::builder().kind(kind).cpu_workers(workers);
            long_write_then_readers(tune(builder).build().unwrap());
        }
    }
}

/// Pushes ops one at a time, each after a pause of 0 to 200 µs (fixed
/// seed), and waits for each to start before the next: with no later
/// push, a lost wake-up leaves the op queued with every worker asleep.
/// The pushes run on a thread of their own, which hands the engine back
/// when they are done; the test fails, instead of hanging, when an op has
/// not started within 10 s (a hang guard, not a time measured). The
/// engine is then left to that thread: dropping it would wait for the
/// stranded op.
fn lone_pushes_each_start(engine: Engine, pushes: usize) -> Engine {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut rng = SplitMix64::new(42);
        let x = engine.new_var();
        for i in 0..pushes {
            spin(Duration::from_micros(rng.below(200)));
            let started = Arc::new(AtomicBool::new(false));
            let s = started.clone();
            // Alternately an op of no var and a write, so that both the
            // pushing thread's queue and a var's grant hand ops over.
            let desc = if i % 2 == 0 {
                OpDesc::new("lone")
            } else {
                OpDesc::new("lone write").writes(&x)
            };
            engine
                .push(desc, move |_| {
                    s.store(true, Ordering::SeqCst);
                    Ok(())
                })
                .unwrap();
            let deadline = Instant::now() + Duration::from_secs(10);
            while !started.load(Ordering::SeqCst) {
                if Instant::now() > deadline {
                    let _ = tx.send(Err(i));
                    std::mem::forget(engine);
                    return;
                }
                std::thread::yield_now();
            }
        }
        engine.wait_for_all().unwrap();
        let _ = tx.send(Ok(engine));
    });
    match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(Ok(engine)) => engine,
        Ok(Err(i)) => panic!("push {i}: the op did not start within 10 s (a lost wake-up)"),
        Err(e) => panic!("the lone pushes did not finish within two minutes: {e}"),
    }
}

#[test]
fn a_lone_push_wakes_a_worker_whatever_state_the_workers_are_in() {
    // 8 workers: by default the sleep fence is split there where the
    // system has the barrier (`EngineBuilder::asymmetric_wake_fence`).
    for (kind, workers, linger) in [
        (EngineKind::PerDevice, 2, None),
        (EngineKind::PerDevice, 4, Some(Duration::ZERO)),
        (EngineKind::Pooled, 3, None),
        (EngineKind::PerDevice, 8, Some(Duration::ZERO)),
        (EngineKind::Pooled, 8, None),
    ] {
        let mut builder = Engine::builder().kind(kind).cpu_workers(workers);
        if let Some(l) = linger {
            builder = builder.linger(l);
        }
        lone_pushes_each_start(builder.build().unwrap(), 2_000);
    }
}

/// With the sleep fence split (`asymmetric_wake_fence`) a worker going to
/// sleep pays for both sides, and the pushes and completions fence only
/// against the compiler: the workers must still be woken for every op,
/// through the shared queue or a pushing thread's own. Where the barrier
/// cannot be had, the builder says so by name and there is nothing to run.
#[test]
fn with_the_sleep_fence_split_every_op_still_reaches_a_worker() {
    let split = |b: EngineBuilder| b.asymmetric_wake_fence(true);
    if let Err(e) = split(Engine::builder()).build() {
        assert!(
            matches!(
                e,
                BuildError::Unavailable {
                    setting: "asymmetric_wake_fence",
                    ..
                }
            ),
            "{e}"
        );
        eprintln!("skipped: {e}");
        return;
    }
    for (kind, workers, queues, linger) in [
        (EngineKind::PerDevice, 2, None, None),
        (EngineKind::PerDevice, 4, Some(4), Some(Duration::ZERO)),
        (EngineKind::PerDevice, 4, Some(0), None),
        (EngineKind::Pooled, 3, None, Some(Duration::ZERO)),
    ] {
        eprintln!("{kind}, {workers} workers, pusher queues {queues:?}, linger {linger:?}");
        let mut builder = split(Engine::builder().kind(kind).cpu_workers(workers));
        if let Some(n) = queues {
            builder = builder.pusher_queues_up_to(n);
        }
        if let Some(l) = linger {
            builder = builder.linger(l);
        }
        let engine = lone_pushes_each_start(builder.build().unwrap(), 2_000);
        long_write_then_readers(engine);
    }
}

/// Dealing (`deal_pushes`): each op a pushing thread makes ready goes to
/// the ring of one worker in turn, which may be asleep or busy with the
/// long write. The lone pushes must still each start (another worker
/// looks in every ring once its back-off is spent, and a worker going to
/// sleep checks them all), with the linger and without, one searcher or
/// the default half, and the readers of every round must still run.
#[test]
fn dealt_ops_reach_a_worker_whichever_ring_they_are_dealt_to() {
    for (kind, workers, linger, searchers) in [
        (EngineKind::PerDevice, 2, None, None),
        (EngineKind::PerDevice, 4, Some(Duration::ZERO), None),
        (EngineKind::PerDevice, 4, None, Some(1)),
        (EngineKind::Pooled, 3, None, None),
        (EngineKind::PerDevice, 8, Some(Duration::ZERO), None),
    ] {
        eprintln!("{kind}, {workers} workers, linger {linger:?}, searchers {searchers:?}");
        let mut builder = Engine::builder()
            .kind(kind)
            .cpu_workers(workers)
            .deal_pushes(true);
        if let Some(l) = linger {
            builder = builder.linger(l);
        }
        if let Some(n) = searchers {
            builder = builder.max_searching(n);
        }
        let engine = lone_pushes_each_start(builder.build().unwrap(), 2_000);
        long_write_then_readers(engine);
    }
}
