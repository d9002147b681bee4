//! Randomized stress: several threads push random read/write ops on shared
//! vars at once (including read-only ops, which take the fast-read path). Every op checks, with an atomic per var, that it holds the
//! var as the contract says (one writer alone, or readers together); each
//! thread's private counter must equal a serial count. Bounded in ops. The
//! batched variants push through `Engine::batch`, several pushers at once;
//! in the pushing variants the pushers also run queued ops themselves.

use std::sync::atomic::{AtomicIsize, AtomicU64, Ordering};
use std::sync::Arc;

use depengine::util::rng::SplitMix64;
use depengine::{Engine, EngineKind, OpCtx, OpDesc, OpError, OpResult, Var};

const VARS: usize = 48;
const PUSHERS: usize = 3;
const OPS_PER_PUSHER: usize = 10_000;

fn stress(kind: EngineKind, workers: usize) {
    stress_with(kind, workers, false, false);
}

/// What a variant adds to the plain stress.
#[derive(Clone, Copy, Default)]
struct Variant {
    /// Every pusher also waits for all now and then, running queued ops
    /// itself while it waits (`help_while_waiting`).
    helping: bool,
    /// Every pusher pushes through `Engine::batch`, 1 to 64 ops at a time.
    batched: bool,
    /// A push runs queued ops when the workers' backlog is long
    /// (`help_while_pushing`).
    pushing: bool,
    /// One searching worker at a time (`max_searching`), lingering through
    /// pushes (`linger_through_pushes`) for up to 1 ms (`linger`).
    searching_tuned: bool,
    /// One searching worker at a time (`max_searching`), which wakes a
    /// sleeper to search in its place when it finds work
    /// (`keep_one_searching`).
    keeping_one_searching: bool,
    /// No pool gives pushing threads queues of their own
    /// (`pusher_queues_up_to(0)`): every ready op a pushing thread
    /// dispatches goes through the pool's shared queue, as in pools past
    /// the default bound of 16 workers.
    no_pusher_queues: bool,
    /// The pools' sleep fence split (`asymmetric_wake_fence`); the test
    /// is skipped where the system has no barrier for it.
    asymmetric_fence: bool,
    /// Each pushing thread deals the ops ready at its push to a ring per
    /// worker (`deal_pushes`).
    dealing: bool,
}

type BoxedBody = Box<dyn FnOnce(&OpCtx<'_>) -> OpResult + Send>;

fn stress_with(kind: EngineKind, workers: usize, helping: bool, batched: bool) {
    stress_variant(
        kind,
        workers,
        Variant {
            helping,
            batched,
            ..Variant::default()
        },
    );
}

fn stress_variant(kind: EngineKind, workers: usize, variant: Variant) {
    let Variant {
        helping,
        batched,
        pushing,
        searching_tuned,
        keeping_one_searching,
        no_pusher_queues,
        asymmetric_fence,
        dealing,
    } = variant;
    let mut builder = Engine::builder()
        .kind(kind)
        .cpu_workers(workers)
        .help_while_waiting(helping)
        .help_while_pushing(pushing);
    if searching_tuned {
        builder = builder
            .max_searching(1)
            .linger(std::time::Duration::from_millis(1))
            .linger_through_pushes(true);
    }
    if keeping_one_searching {
        builder = builder.max_searching(1).keep_one_searching(true);
    }
    if no_pusher_queues {
        builder = builder.pusher_queues_up_to(0);
    }
    if asymmetric_fence {
        builder = builder.asymmetric_wake_fence(true);
    }
    if dealing {
        builder = builder.deal_pushes(true);
    }
    let engine = match builder.build() {
        Ok(engine) => engine,
        Err(e @ depengine::BuildError::Unavailable { .. }) if asymmetric_fence => {
            eprintln!("skipped: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let vars: Arc<Vec<Var>> = Arc::new((0..VARS).map(|_| engine.new_var()).collect());
    let holders: Arc<Vec<AtomicIsize>> = Arc::new((0..VARS).map(|_| AtomicIsize::new(0)).collect());
    let threads: Vec<_> = (0..PUSHERS)
        .map(|t| {
            let (engine, vars, holders) = (engine.clone(), vars.clone(), holders.clone());
            std::thread::spawn(move || {
                let mut rng = SplitMix64::new(1000 + t as u64);
                let private = engine.new_var();
                let counter = Arc::new(AtomicU64::new(0));
                let mut expected = 0u64;
                // Ops generated but not pushed yet: (reads, writes, body),
                // pushed together at the end of each batch.
                let mut chunk: Vec<(Vec<usize>, Vec<usize>, bool, BoxedBody)> = Vec::new();
                let mut chunk_len = 1;
                let flush = |chunk: &mut Vec<(Vec<usize>, Vec<usize>, bool, BoxedBody)>| {
                    let desc_of = |r: &[usize], w: &[usize], bump: bool| {
                        let rv: Vec<&Var> = r.iter().map(|&r| &vars[r]).collect();
                        let mut wv: Vec<&Var> = w.iter().map(|&w| &vars[w]).collect();
                        if bump {
                            wv.push(&private);
                        }
                        (rv, wv)
                    };
                    if batched {
                        engine
                            .batch(|b| {
                                for (r, w, bump, body) in chunk.drain(..) {
                                    let (rv, wv) = desc_of(&r, &w, bump);
                                    b.push(OpDesc::new("stress").reads(&rv).writes(&wv), body)?;
                                }
                                Ok(())
                            })
                            .unwrap();
                    } else {
                        for (r, w, bump, body) in chunk.drain(..) {
                            let (rv, wv) = desc_of(&r, &w, bump);
                            engine
                                .push(OpDesc::new("stress").reads(&rv).writes(&wv), body)
                                .unwrap();
                        }
                    }
                };
                for i in 0..OPS_PER_PUSHER {
                    // A third of the ops only read: one var mostly, which
                    // takes the lock-free fast-read path when it can.
                    let nw = rng.below(3) as usize;
                    let nr = match (nw, rng.below(4) as usize) {
                        (0, 0) | (0, 2) | (0, 3) => 1,
                        (_, n) => n,
                    };
                    let reads: Vec<usize> =
                        (0..nr).map(|_| rng.below(VARS as u64) as usize).collect();
                    let writes: Vec<usize> =
                        (0..nw).map(|_| rng.below(VARS as u64) as usize).collect();
                    // Rule 2: a var both read and written is written.
                    let mut w_idx = writes.clone();
                    w_idx.sort_unstable();
                    w_idx.dedup();
                    let mut r_idx: Vec<usize> = reads
                        .iter()
                        .copied()
                        .filter(|r| !w_idx.contains(r))
                        .collect();
                    r_idx.sort_unstable();
                    r_idx.dedup();
                    let bump = i % 7 == 0;
                    if bump {
                        expected = expected.wrapping_mul(3).wrapping_add(i as u64);
                    }
                    let (h, c) = (holders.clone(), counter.clone());
                    let spin = rng.below(50);
                    let body: BoxedBody = Box::new(move |_| {
                        for &w in &w_idx {
                            if h[w]
                                .compare_exchange(0, -1, Ordering::SeqCst, Ordering::SeqCst)
                                .is_err()
                            {
                                return Err(OpError::msg(format!(
                                    "write of var {w} overlapped another op"
                                )));
                            }
                        }
                        for &r in &r_idx {
                            if h[r].fetch_add(1, Ordering::SeqCst) < 0 {
                                return Err(OpError::msg(format!(
                                    "read of var {r} overlapped a write"
                                )));
                            }
                        }
                        for _ in 0..spin {
                            std::hint::spin_loop();
                        }
                        if bump {
                            let v = c.load(Ordering::Relaxed);
                            c.store(v.wrapping_mul(3).wrapping_add(i as u64), Ordering::Relaxed);
                        }
                        for &r in &r_idx {
                            h[r].fetch_sub(1, Ordering::SeqCst);
                        }
                        for &w in &w_idx {
                            h[w].store(0, Ordering::SeqCst);
                        }
                        Ok(())
                    });
                    chunk.push((reads, writes, bump, body));
                    let last = i + 1 == OPS_PER_PUSHER;
                    if chunk.len() >= chunk_len || last || (helping && i % 1000 == 999) {
                        flush(&mut chunk);
                        if batched {
                            chunk_len = 1 + rng.below(64) as usize;
                        }
                    }
                    if helping && i % 1000 == 999 {
                        engine.wait_for_all().unwrap();
                    }
                }
                engine.wait_for_var(&private).unwrap();
                assert_eq!(
                    counter.load(Ordering::Relaxed),
                    expected,
                    "thread {t}: order of its own writes"
                );
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    engine.wait_for_all().unwrap();
    assert!(holders.iter().all(|h| h.load(Ordering::SeqCst) == 0));
}

#[test]
fn stress_pooled_2() {
    stress(EngineKind::Pooled, 2);
}

#[test]
fn stress_pooled_4() {
    stress(EngineKind::Pooled, 4);
}

#[test]
fn stress_per_device_3() {
    stress(EngineKind::PerDevice, 3);
}

#[test]
fn stress_naive() {
    stress(EngineKind::Naive, 1);
}

#[test]
fn stress_per_device_1_helping() {
    stress_with(EngineKind::PerDevice, 1, true, false);
}

#[test]
fn stress_pooled_2_helping() {
    stress_with(EngineKind::Pooled, 2, true, false);
}

#[test]
fn stress_pooled_2_batched() {
    stress_with(EngineKind::Pooled, 2, false, true);
}

#[test]
fn stress_per_device_3_batched_helping() {
    stress_with(EngineKind::PerDevice, 3, true, true);
}

#[test]
fn stress_per_device_1_pushing() {
    // Whether the pushes help depends on how the threads are scheduled
    // (alone, three pushers outrun one worker; beside the other stress
    // tests, not always): this checks the order, `engine_helping.rs` that
    // pushes help.
    stress_variant(
        EngineKind::PerDevice,
        1,
        Variant {
            pushing: true,
            ..Variant::default()
        },
    );
}

#[test]
fn stress_pooled_2_helping_pushing() {
    stress_variant(
        EngineKind::Pooled,
        2,
        Variant {
            helping: true,
            pushing: true,
            ..Variant::default()
        },
    );
}

#[test]
fn stress_per_device_4_searching_tuned() {
    stress_variant(
        EngineKind::PerDevice,
        4,
        Variant {
            searching_tuned: true,
            ..Variant::default()
        },
    );
}

#[test]
fn stress_per_device_4_keeping_one_searching() {
    stress_variant(
        EngineKind::PerDevice,
        4,
        Variant {
            keeping_one_searching: true,
            ..Variant::default()
        },
    );
}

#[test]
fn stress_per_device_4_without_pusher_queues() {
    stress_variant(
        EngineKind::PerDevice,
        4,
        Variant {
            no_pusher_queues: true,
            ..Variant::default()
        },
    );
}

#[test]
fn stress_per_device_4_with_pusher_queues_and_the_sleep_fence_split() {
    stress_variant(
        EngineKind::PerDevice,
        4,
        Variant {
            asymmetric_fence: true,
            ..Variant::default()
        },
    );
}

#[test]
fn stress_per_device_4_dealing() {
    stress_variant(
        EngineKind::PerDevice,
        4,
        Variant {
            dealing: true,
            ..Variant::default()
        },
    );
}

/// Dealing in a pool of 8 with its other defaults (the sleep fence split
/// where the system has the barrier), batched pushes and pushers that
/// help while they wait, which take ops from every worker's ring.
#[test]
fn stress_pooled_8_batched_helping_dealing() {
    stress_variant(
        EngineKind::Pooled,
        8,
        Variant {
            batched: true,
            helping: true,
            dealing: true,
            ..Variant::default()
        },
    );
}

/// A pool of 8 workers as built by default: pushing threads' queues, and
/// the sleep fence split where the system has the barrier (full where it
/// does not), on more workers than this machine may have cores.
#[test]
fn stress_per_device_8_with_the_defaults_of_a_large_pool() {
    stress_with(EngineKind::PerDevice, 8, false, false);
}

#[test]
fn stress_pooled_8_batched_helping_with_the_defaults_of_a_large_pool() {
    stress_with(EngineKind::Pooled, 8, true, true);
}

#[test]
fn stress_pooled_2_batched_with_the_sleep_fence_split() {
    stress_variant(
        EngineKind::Pooled,
        2,
        Variant {
            batched: true,
            asymmetric_fence: true,
            ..Variant::default()
        },
    );
}

#[test]
fn stress_naive_batched() {
    stress_with(EngineKind::Naive, 1, false, true);
}
