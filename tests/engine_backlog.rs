//! A backlog of ready ops reaches every worker of a pool, however the
//! workers were parked or searching when it was queued.
//!
//! Each op holds its worker until as many ops run at once as the pool has
//! workers, so the round ends only if every worker was woken and took one.
//! A worker left asleep beside the backlog shows as ops that give up
//! waiting (after a bound far above any wake-up chain), and the round's
//! peak stays below the pool's size. Rounds follow each other at once, so
//! the workers of the last round are still searching when the next
//! backlog is pushed: the case where pushes skip the wake-up and the
//! searchers and the workers they wake must hand it on.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use depengine::{Engine, EngineKind, OpDesc};

/// How long an op waits for the others before it gives up: a failure
/// bound, not a speed figure (a healthy round ends in milliseconds).
const GIVE_UP: Duration = Duration::from_secs(20);

fn every_worker_takes_part(kind: EngineKind, workers: usize, with_vars: bool) {
    let engine = Engine::builder()
        .kind(kind)
        .cpu_workers(workers)
        .build()
        .unwrap();
    for round in 0..12 {
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let gave_up = Arc::new(AtomicUsize::new(0));
        let vars: Vec<_> = (0..4 * workers).map(|_| engine.new_var()).collect();
        for var in &vars {
            let (running, peak, gave_up) = (running.clone(), peak.clone(), gave_up.clone());
            let body = move |_: &depengine::OpCtx<'_>| {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                let deadline = Instant::now() + GIVE_UP;
                while peak.load(Ordering::SeqCst) < workers {
                    if Instant::now() > deadline {
                        gave_up.fetch_add(1, Ordering::SeqCst);
                        break;
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
                running.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            };
            if with_vars {
                engine.push(OpDesc::new("hold").writes(var), body).unwrap();
            } else {
                engine.push(OpDesc::new("hold"), body).unwrap();
            }
        }
        engine.wait_for_all().unwrap();
        assert_eq!(
            (peak.load(Ordering::SeqCst), gave_up.load(Ordering::SeqCst)),
            (workers, 0),
            "round {round}: the backlog reached only {} of {workers} workers at once",
            peak.load(Ordering::SeqCst)
        );
    }
}

#[test]
fn a_backlog_reaches_every_worker_of_a_large_pool() {
    // Above two workers the pushes go through the pool's injector.
    every_worker_takes_part(EngineKind::PerDevice, 12, false);
}

#[test]
fn a_backlog_of_ops_with_vars_reaches_every_worker() {
    every_worker_takes_part(EngineKind::PerDevice, 8, true);
}

#[test]
fn a_backlog_reaches_both_workers_of_a_pool_with_pusher_queues() {
    every_worker_takes_part(EngineKind::PerDevice, 2, false);
}

#[test]
fn a_backlog_reaches_every_worker_of_the_shared_pool() {
    every_worker_takes_part(EngineKind::Pooled, 8, false);
}
