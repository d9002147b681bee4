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

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use depengine::{Engine, EngineBuilder, EngineKind, OpDesc, OpError};

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
