//! Captured graphs (`Replay`) on every executor: the same effects as
//! pushing their ops one by one, ordering with ordinary ops, failures
//! and misuse.

mod common;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use depengine::{
    Engine, EngineError, OpDesc, OpError, PrivateAccess, PrivateVar, Property, ReplayHelpers,
};

/// A node body that adds `weight` to `ran` each run, except the run
/// numbered `fail_on` (from 0), where it fails instead.
fn adds(
    ran: &Arc<AtomicUsize>,
    weight: usize,
    fail_on: Option<usize>,
) -> impl Fn() -> Result<(), OpError> + Send + Sync + 'static {
    let (ran, calls) = (ran.clone(), AtomicUsize::new(0));
    move || {
        let run = calls.fetch_add(1, Ordering::SeqCst);
        if Some(run) == fail_on {
            return Err(OpError::msg(format!("failed on run {run}")));
        }
        ran.fetch_add(weight, Ordering::SeqCst);
        Ok(())
    }
}

/// A node body that counts itself in `started`, then waits (up to a
/// generous bound) until `k` nodes have started, and counts itself in
/// `met` when they all did: run one at a time, the first waits out the
/// bound alone.
fn meets(
    started: &Arc<AtomicUsize>,
    met: &Arc<AtomicUsize>,
    k: usize,
) -> impl Fn() -> Result<(), OpError> + Send + Sync + 'static {
    let (started, met) = (started.clone(), met.clone());
    move || {
        started.fetch_add(1, Ordering::SeqCst);
        let t = Instant::now();
        while started.load(Ordering::SeqCst) < k && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_micros(100));
        }
        if started.load(Ordering::SeqCst) >= k {
            met.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A random op: the vars it reads and writes (distinct).
struct RandOp {
    reads: Vec<usize>,
    writes: Vec<usize>,
}

fn random_ops(seed: u64, n: usize, vars: usize) -> Vec<RandOp> {
    let mut s = seed;
    let mut next = |m: usize| {
        s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
        (mix(s) % m as u64) as usize
    };
    (0..n)
        .map(|_| {
            let (nr, nw) = (next(4), 1 + next(2));
            let mut used: Vec<usize> = Vec::new();
            let mut writes = Vec::new();
            let mut reads = Vec::new();
            for k in 0..nw + nr {
                let v = next(vars);
                if used.contains(&v) {
                    continue;
                }
                used.push(v);
                if k < nw {
                    writes.push(v);
                } else {
                    reads.push(v);
                }
            }
            RandOp { reads, writes }
        })
        .collect()
}

/// What op `i` does to the values: every write depends on the op, on every
/// var it reads and on the var's own value, so any reordering of dependent
/// ops changes some value.
fn apply(i: usize, op: &RandOp, vals: &[AtomicU64]) {
    let mut h = mix(i as u64 + 1);
    for &r in &op.reads {
        h = mix(h ^ vals[r].load(Ordering::Relaxed));
    }
    for &w in &op.writes {
        let old = vals[w].load(Ordering::Relaxed);
        vals[w].store(mix(h ^ old ^ w as u64), Ordering::Relaxed);
    }
}

#[test]
fn replays_have_the_effects_of_the_ops_pushed_one_by_one() {
    const VARS: usize = 12;
    const REPS: usize = 15;
    for seed in 1..=4u64 {
        let ops = Arc::new(random_ops(seed, 250, VARS));
        // The serial reference: the replay's ops in order, with the
        // ordinary op between replays.
        let want: Vec<AtomicU64> = (0..VARS).map(|_| AtomicU64::new(0)).collect();
        for rep in 0..REPS {
            for (i, op) in ops.iter().enumerate() {
                apply(i, op, &want);
            }
            want[0].store(
                mix(want[0].load(Ordering::Relaxed) ^ rep as u64),
                Ordering::Relaxed,
            );
        }
        for engine in common::every_executor() {
            // The first half engine vars, the second half private to the
            // replay.
            let vars: Vec<_> = (0..VARS / 2).map(|_| engine.new_var()).collect();
            let vals: Arc<Vec<AtomicU64>> =
                Arc::new((0..VARS).map(|_| AtomicU64::new(0)).collect());
            let mut b = engine.replay_builder("random");
            let private: Vec<PrivateVar> = (VARS / 2..VARS).map(|_| b.private_var()).collect();
            for i in 0..ops.len() {
                let engine_vars = |list: &[usize]| -> Vec<_> {
                    list.iter()
                        .filter(|&&v| v < VARS / 2)
                        .map(|&v| vars[v].clone())
                        .collect()
                };
                let private_vars = |list: &[usize]| -> Vec<_> {
                    list.iter()
                        .filter(|&&v| v >= VARS / 2)
                        .map(|&v| private[v - VARS / 2])
                        .collect()
                };
                let (reads, writes) = (engine_vars(&ops[i].reads), engine_vars(&ops[i].writes));
                let (p_reads, p_writes) =
                    (private_vars(&ops[i].reads), private_vars(&ops[i].writes));
                let (ops, vals) = (ops.clone(), vals.clone());
                b.push_with(
                    OpDesc::new(format!("op{i}")).reads(&reads).writes(&writes),
                    PrivateAccess::new().reads(&p_reads).writes(&p_writes),
                    move || {
                        apply(i, &ops[i], &vals);
                        Ok(())
                    },
                )
                .unwrap();
            }
            let replay = b.build();
            assert_eq!(replay.len(), ops.len());
            // The replay's op holds the engine vars only, and one of its
            // own for the private vars.
            assert!(replay.reads().len() + replay.writes().len() <= VARS / 2 + 1);
            for rep in 0..REPS {
                engine.push_replay(&replay).unwrap();
                let vals = vals.clone();
                engine
                    .push(OpDesc::new("between").writes(&vars[0]), move |_| {
                        let v = vals[0].load(Ordering::Relaxed);
                        vals[0].store(mix(v ^ rep as u64), Ordering::Relaxed);
                        Ok(())
                    })
                    .unwrap();
            }
            engine.wait_for_all().unwrap();
            for v in 0..VARS {
                assert_eq!(
                    vals[v].load(Ordering::Relaxed),
                    want[v].load(Ordering::Relaxed),
                    "seed {seed}, var {v}, {:?} with {:?}",
                    engine.kind(),
                    engine.pools()
                );
            }
            // A var some node writes went up by one per replay (the
            // replay's op writes it once), var 0 also by the ordinary ops.
            assert_eq!(vars[0].version(), 2 * REPS as u64);
        }
    }
}

#[test]
fn every_helper_setting_has_the_effects_of_the_ops_pushed_one_by_one() {
    // Enough runs for the adaptive policy to run the graph both ways
    // (one helper is tried on the third run, the workers again sixteen
    // runs later), and each run checked against the serial order.
    const VARS: usize = 8;
    const REPS: usize = 40;
    let ops = Arc::new(random_ops(7, 300, VARS));
    let want: Vec<AtomicU64> = (0..VARS).map(|_| AtomicU64::new(0)).collect();
    for (i, op) in ops.iter().enumerate() {
        apply(i, op, &want);
    }
    let want: Vec<u64> = want.iter().map(|v| v.load(Ordering::Relaxed)).collect();
    for setting in [
        ReplayHelpers::Adaptive,
        ReplayHelpers::All,
        ReplayHelpers::One,
    ] {
        for workers in [2, 4] {
            let engine = Engine::builder().cpu_workers(workers).build().unwrap();
            let vals: Arc<Vec<AtomicU64>> =
                Arc::new((0..VARS).map(|_| AtomicU64::new(0)).collect());
            let mut b = engine.replay_builder("random");
            b.helpers(setting);
            let private: Vec<PrivateVar> = (0..VARS).map(|_| b.private_var()).collect();
            for i in 0..ops.len() {
                let on = |list: &[usize]| -> Vec<PrivateVar> {
                    list.iter().map(|&v| private[v]).collect()
                };
                let (r, w) = (on(&ops[i].reads), on(&ops[i].writes));
                let (ops, vals) = (ops.clone(), vals.clone());
                b.push_with(
                    OpDesc::new(format!("op{i}")),
                    PrivateAccess::new().reads(&r).writes(&w),
                    move || {
                        apply(i, &ops[i], &vals);
                        Ok(())
                    },
                )
                .unwrap();
            }
            let replay = b.build();
            assert_eq!(replay.helpers(), setting);
            for rep in 0..REPS {
                for v in vals.iter() {
                    v.store(0, Ordering::Relaxed);
                }
                engine.push_replay(&replay).unwrap();
                engine.wait_for_all().unwrap();
                let got: Vec<u64> = vals.iter().map(|v| v.load(Ordering::Relaxed)).collect();
                assert_eq!(got, want, "{setting:?}, {workers} workers, run {rep}");
            }
        }
    }
}

/// Keeps the calling thread on its CPU for `d`.
fn hold_cpu(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// A node body that notes the thread it runs on and how many nodes run
/// at once, holding its CPU for `spin` so that others would overlap it.
fn notes_threads(
    threads: &Arc<std::sync::Mutex<Vec<std::thread::ThreadId>>>,
    active: &Arc<AtomicUsize>,
    most: &Arc<AtomicUsize>,
    spin: Duration,
) -> impl Fn() -> Result<(), OpError> + Send + Sync + 'static {
    let (threads, active, most) = (threads.clone(), active.clone(), most.clone());
    move || {
        let now = active.fetch_add(1, Ordering::SeqCst) + 1;
        most.fetch_max(now, Ordering::SeqCst);
        threads.lock().unwrap().push(std::thread::current().id());
        hold_cpu(spin);
        active.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
}

#[test]
fn a_replay_given_one_helper_runs_each_run_on_one_thread() {
    // 32 independent nodes on 4 workers: with the pool's workers they
    // spread (the fan test above); with one helper each run stays on the
    // worker that started it, one node at a time.
    const NODES: usize = 32;
    let engine = Engine::builder().cpu_workers(4).build().unwrap();
    let threads = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (active, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let vars: Vec<_> = (0..NODES).map(|_| engine.new_var()).collect();
    let mut b = engine.replay_builder("one");
    b.helpers(ReplayHelpers::One);
    for v in &vars {
        b.push(
            OpDesc::new("spin").writes(v),
            notes_threads(&threads, &active, &most, Duration::from_micros(50)),
        )
        .unwrap();
    }
    let replay = b.build();
    for run in 0..5 {
        threads.lock().unwrap().clear();
        engine.push_replay(&replay).unwrap();
        engine.wait_for_all().unwrap();
        let mut seen = threads.lock().unwrap().clone();
        assert_eq!(seen.len(), NODES, "run {run}");
        seen.dedup();
        assert_eq!(seen.len(), 1, "run {run}: nodes ran on {seen:?}");
    }
    assert_eq!(most.load(Ordering::SeqCst), 1);
}

#[test]
fn an_adaptive_replay_whose_runs_take_long_keeps_its_nodes_running_together() {
    // Two nodes that each wait (up to a bound) for the other to start,
    // then hold their worker for 26 ms: every run takes longer than the
    // policy's longest trial of one helper allows (at 2 workers, 25 ms;
    // runs past 1 ms are tried alone only once the graph has run a while,
    // which 40 runs of 1.5 ms would reach), so every run must have both
    // going at once. Run alone, the first would wait out the bound and
    // the count of runs that met would fall short.
    const RUNS: usize = 40;
    let engine = Engine::builder().cpu_workers(2).build().unwrap();
    let started = Arc::new(AtomicUsize::new(0));
    let met = Arc::new(AtomicUsize::new(0));
    let (x, y) = (engine.new_var(), engine.new_var());
    let mut b = engine.replay_builder("pair");
    for v in [&x, &y] {
        let (started, met) = (started.clone(), met.clone());
        b.push(OpDesc::new("meet").writes(v), move || {
            // The pair of this run: nodes 2k + 1 and 2k + 2 to start.
            let me = started.fetch_add(1, Ordering::SeqCst) + 1;
            let pair = me.div_ceil(2) * 2;
            let t = Instant::now();
            while started.load(Ordering::SeqCst) < pair && t.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_micros(50));
            }
            if started.load(Ordering::SeqCst) >= pair {
                met.fetch_add(1, Ordering::SeqCst);
            }
            hold_cpu(Duration::from_millis(26));
            Ok(())
        })
        .unwrap();
    }
    let replay = b.build();
    for _ in 0..RUNS {
        engine.push_replay(&replay).unwrap();
        engine.wait_for_all().unwrap();
    }
    assert_eq!(
        met.load(Ordering::SeqCst),
        2 * RUNS,
        "some run had one helper"
    );
}

#[test]
fn runs_of_a_replay_with_private_vars_only_follow_one_another() {
    // Each node reads the shared count, yields, and writes it back plus
    // one: two runs at once would lose increments.
    const NODES: u64 = 50;
    const PUSHES: u64 = 20;
    for engine in common::every_executor() {
        let count = Arc::new(AtomicU64::new(0));
        let mut b = engine.replay_builder("private");
        let t = b.private_var();
        for _ in 0..NODES {
            let c = count.clone();
            b.push_with(
                OpDesc::new("inc"),
                PrivateAccess::new().writes(&[t]),
                move || {
                    let v = c.load(Ordering::SeqCst);
                    std::thread::yield_now();
                    c.store(v + 1, Ordering::SeqCst);
                    Ok(())
                },
            )
            .unwrap();
        }
        let replay = b.build();
        for _ in 0..PUSHES {
            engine.push_replay(&replay).unwrap();
        }
        engine.wait_for_all().unwrap();
        assert_eq!(
            count.load(Ordering::SeqCst),
            NODES * PUSHES,
            "{:?}",
            engine.pools()
        );
    }
}

#[test]
fn independent_nodes_run_at_the_same_time_on_two_workers() {
    // Each node waits (up to a generous bound) for the other to start: on
    // one thread the first would wait out the bound alone.
    let engine = Engine::builder().cpu_workers(2).build().unwrap();
    let started = Arc::new(AtomicUsize::new(0));
    let met = Arc::new(AtomicUsize::new(0));
    let (x, y) = (engine.new_var(), engine.new_var());
    let mut b = engine.replay_builder("pair");
    b.helpers(ReplayHelpers::All);
    for v in [&x, &y] {
        b.push(OpDesc::new("meet").writes(v), meets(&started, &met, 2))
            .unwrap();
    }
    let replay = b.build();
    assert_eq!(replay.edges(), 0);
    engine.push_replay(&replay).unwrap();
    engine.wait_for_all().unwrap();
    assert_eq!(
        met.load(Ordering::SeqCst),
        2,
        "the two nodes never ran together"
    );
}

#[test]
fn a_fan_released_by_one_node_runs_on_every_worker() {
    // One node releases four that must all run at once: each waits (up to
    // a generous bound) for the other three to start. A run that grows by
    // one helper per release only ever had two of them going.
    const WIDTH: usize = 4;
    let engine = Engine::builder().cpu_workers(WIDTH).build().unwrap();
    let started = Arc::new(AtomicUsize::new(0));
    let met = Arc::new(AtomicUsize::new(0));
    let x = engine.new_var();
    let ys: Vec<_> = (0..WIDTH).map(|_| engine.new_var()).collect();
    let mut b = engine.replay_builder("fan");
    b.helpers(ReplayHelpers::All);
    b.push(OpDesc::new("root").writes(&x), || Ok(())).unwrap();
    for y in &ys {
        b.push(
            OpDesc::new("meet").reads(&x).writes(y),
            meets(&started, &met, WIDTH),
        )
        .unwrap();
    }
    let replay = b.build();
    assert_eq!(replay.edges(), WIDTH);
    engine.push_replay(&replay).unwrap();
    engine.wait_for_all().unwrap();
    assert_eq!(
        met.load(Ordering::SeqCst),
        WIDTH,
        "the fan's nodes never all ran together"
    );
}

#[test]
fn a_failed_node_skips_what_uses_its_vars_and_fails_the_replay() {
    for fail_by_panic in [false, true] {
        for engine in common::every_executor() {
            let (x, y, z) = (engine.new_var(), engine.new_var(), engine.new_var());
            let ran = Arc::new(AtomicUsize::new(0));
            let mut b = engine.replay_builder("step");
            b.push(OpDesc::new("bad").writes(&x), move || {
                if fail_by_panic {
                    panic!("boom");
                }
                Err(OpError::msg("boom"))
            })
            .unwrap();
            b.push(
                OpDesc::new("uses x").reads(&x).writes(&y),
                adds(&ran, 1, None),
            )
            .unwrap();
            b.push(OpDesc::new("then y").writes(&y), adds(&ran, 1, None))
                .unwrap();
            b.push(OpDesc::new("other").writes(&z), adds(&ran, 100, None))
                .unwrap();
            let replay = b.build();
            engine.push_replay(&replay).unwrap();
            let err = engine.wait_for_all().unwrap_err();
            let msg = err.to_string();
            assert!(
                msg.contains("node `bad` (#0) of replay `step` failed"),
                "{msg}"
            );
            assert!(msg.contains("boom"), "{msg}");
            assert!(msg.contains("2 later node(s)"), "{msg}");
            assert_eq!(fail_by_panic, msg.contains("panicked"), "{msg}");
            // `uses x` and `then y` (y tainted by the skipped `uses x`)
            // were skipped; `other` ran.
            assert_eq!(ran.load(Ordering::SeqCst), 100, "{:?}", engine.kind());
        }
    }
}

#[test]
fn a_replay_pushed_again_after_a_failed_run_runs_every_node() {
    for engine in common::every_executor() {
        let ran = Arc::new(AtomicUsize::new(0));
        let mut b = engine.replay_builder("again");
        let (a, bv, c, d) = (
            [b.private_var()],
            [b.private_var()],
            [b.private_var()],
            [b.private_var()],
        );
        fn on<'a>(reads: &'a [PrivateVar], writes: &'a [PrivateVar]) -> PrivateAccess<'a> {
            PrivateAccess::new().reads(reads).writes(writes)
        }
        // `c` comes first, so the serial executor runs it first: on the
        // second run it fails before `a` runs, and a taint of `a` left
        // over from the first run would then skip `a` and `b`.
        b.push_with(OpDesc::new("c"), on(&[], &c), adds(&ran, 100, Some(1)))
            .unwrap();
        b.push_with(OpDesc::new("a"), on(&[], &a), adds(&ran, 1, Some(0)))
            .unwrap();
        b.push_with(OpDesc::new("b"), on(&a, &bv), adds(&ran, 10, None))
            .unwrap();
        // Two predecessors: counted down, and set back for the next run.
        let bc = [bv[0], c[0]];
        b.push_with(OpDesc::new("d"), on(&bc, &d), adds(&ran, 1000, None))
            .unwrap();
        let replay = b.build();

        engine.push_replay(&replay).unwrap();
        let err = engine.wait_for_all().unwrap_err();
        assert!(err.to_string().contains("failed on run 0"), "{err}");
        // `b` and `d` were skipped.
        assert_eq!(ran.swap(0, Ordering::SeqCst), 100, "{:?}", engine.kind());
        engine.push_replay(&replay).unwrap();
        let err = engine.wait_for_all().unwrap_err();
        assert!(err.to_string().contains("failed on run 1"), "{err}");
        // Only `d` was skipped.
        assert_eq!(ran.swap(0, Ordering::SeqCst), 11, "{:?}", engine.kind());
        for _ in 0..3 {
            engine.push_replay(&replay).unwrap();
            engine.wait_for_all().unwrap();
            assert_eq!(ran.swap(0, Ordering::SeqCst), 1111, "{:?}", engine.kind());
        }
    }
}

#[test]
fn a_node_that_fails_without_writes_taints_nothing() {
    let engine = Engine::builder().cpu_workers(2).build().unwrap();
    let (x, y) = (engine.new_var(), engine.new_var());
    let ran = Arc::new(AtomicUsize::new(0));
    let mut b = engine.replay_builder("reads");
    b.push(OpDesc::new("w").writes(&x), || Ok(())).unwrap();
    b.push(OpDesc::new("bad reader").reads(&x), || {
        Err(OpError::msg("no"))
    })
    .unwrap();
    b.push(
        OpDesc::new("next writer").reads(&x).writes(&y),
        adds(&ran, 1, None),
    )
    .unwrap();
    engine.push_replay(&b.build()).unwrap();
    let msg = engine.wait_for_all().unwrap_err().to_string();
    assert!(
        msg.contains("node `bad reader` (#1)") && msg.contains("0 later node(s)"),
        "{msg}"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

#[test]
fn an_empty_replay_completes_and_writes_nothing() {
    for engine in common::every_executor() {
        let replay = engine.replay_builder("empty").build();
        assert!(replay.is_empty());
        engine.push_replay(&replay).unwrap();
        engine.wait_for_all().unwrap();
    }
}

#[test]
fn a_wait_inside_a_node_is_refused_not_a_deadlock() {
    // A node runs inside the replay's op or a helper op of the same
    // engine: waiting there for all would wait for itself.
    for engine in common::every_executor() {
        let errors = Arc::new(std::sync::Mutex::new(Vec::new()));
        let vars: Vec<_> = (0..4).map(|_| engine.new_var()).collect();
        let mut b = engine.replay_builder("waits");
        for v in &vars {
            let (e, errors) = (engine.clone(), errors.clone());
            b.push(OpDesc::new("waiter").writes(v), move || {
                let err = e.wait_for_all().unwrap_err();
                errors.lock().unwrap().push(err);
                Ok(())
            })
            .unwrap();
        }
        let replay = b.build();
        engine.push_replay(&replay).unwrap();
        engine.wait_for_all().unwrap();
        let errors = errors.lock().unwrap();
        assert_eq!(errors.len(), vars.len(), "{engine:?}");
        for err in errors.iter() {
            assert!(
                matches!(err, EngineError::WaitFromWorker { .. }),
                "{engine:?}: {err}"
            );
        }
    }
}

#[test]
fn a_replay_can_be_shared_between_threads_and_pushed_from_each() {
    // Its node bodies are stored type-erased (inline when small): the
    // replay must still be Send and Sync, and pushes from several threads
    // run it once each.
    fn send_sync<T: Send + Sync>() {}
    send_sync::<depengine::Replay>();
    let engine = Engine::builder().cpu_workers(2).build().unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let mut b = engine.replay_builder("shared");
    let x = b.private_var();
    b.push_with(
        OpDesc::new("add"),
        PrivateAccess::new().writes(&[x]),
        adds(&ran, 1, None),
    )
    .unwrap();
    let replay = b.build();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| engine.push_replay(&replay).unwrap());
        }
    });
    engine.wait_for_all().unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 4);
}

#[test]
fn misuse_is_an_error_naming_the_op() {
    let engine = Engine::builder().cpu_workers(1).build().unwrap();
    let other = Engine::builder().cpu_workers(1).build().unwrap();
    let x = engine.new_var();
    let mut b = engine.replay_builder("step");
    let err = b
        .push(OpDesc::new("urgent").writes(&x).priority(5), || Ok(()))
        .unwrap_err();
    assert!(matches!(err, EngineError::NotReplayable { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("op `urgent` of replay `step` sets a priority"),
        "{err}"
    );
    let err = b
        .push(
            OpDesc::new("copy")
                .writes(&x)
                .property(Property::CopyToDevice),
            || Ok(()),
        )
        .unwrap_err();
    assert!(
        err.to_string().contains("a property other than Normal"),
        "{err}"
    );
    let foreign = other.new_var();
    let err = b
        .push(OpDesc::new("foreign").reads(&foreign).writes(&x), || Ok(()))
        .unwrap_err();
    assert!(matches!(err, EngineError::ForeignVar { .. }), "{err}");
    let mut other_builder = engine.replay_builder("other");
    let theirs = other_builder.private_var();
    let err = b
        .push_with(
            OpDesc::new("stray").writes(&x),
            PrivateAccess::new().reads(&[theirs]),
            || Ok(()),
        )
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("op `stray` of replay `step` sets a private var of another replay"),
        "{err}"
    );
    assert!(b.is_empty(), "refused ops are not added");

    // A var deleted after the replay was built: the push is refused.
    let y = engine.new_var();
    b.push(OpDesc::new("w").writes(&y), || Ok(())).unwrap();
    let replay = b.build();
    engine.delete_var(y).unwrap();
    engine.wait_for_all().unwrap();
    let err = engine.push_replay(&replay).unwrap_err();
    assert!(matches!(err, EngineError::DeletedVar { .. }), "{err}");
    // Pushed to another engine: its vars are foreign there.
    let err = other.push_replay(&replay).unwrap_err();
    assert!(
        matches!(
            err,
            EngineError::ForeignVar { .. } | EngineError::DeletedVar { .. }
        ),
        "{err}"
    );
}
