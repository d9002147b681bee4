//! loom models of the dependency protocol. Run with
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --test loom`
//! (see `scripts/loom.sh`).
//!
//! Most models use the naive executor — no worker threads, so ops run inline
//! on whichever loom thread makes them ready — and loom threads as pushers and
//! as the foreign threads that complete async ops. That exercises the whole
//! var protocol, the push guard, completion and waits under every interleaving
//! loom explores. The last ones run one worker per pool (the pooled and the
//! per-device executors) for what the pools add on top: the wake-up of a
//! waiter by a worker's loop, and of one pool's worker by a completion on
//! another pool's.

#![cfg(loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

use depengine::{Completion, Engine, EngineKind, OpDesc, Property};

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(2);
    }
    builder.check(f);
}

/// [`model`] with at most `bound` preemptions whatever
/// `LOOM_MAX_PREEMPTIONS` asks: for models with more threads, whose
/// interleavings grow too many at the suite's bound (four threads, the
/// per-device model below, took 168 s at 2 and 1.5 s at 1 on the 2-core
/// sandbox).
fn model_within(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(builder.preemption_bound.map_or(bound, |b| b.min(bound)));
    builder.check(f);
}

fn naive() -> Engine {
    Engine::builder().kind(EngineKind::Naive).build().unwrap()
}

/// Pushes an async write on `v` whose completion is parked in the returned
/// slot, so a loom thread can complete it later.
fn parked_write(engine: &Engine, v: &depengine::Var) -> Arc<Mutex<Option<Completion>>> {
    let slot = Arc::new(Mutex::new(None));
    let s = slot.clone();
    engine
        .push_async(OpDesc::new("parked").writes(v), move |_, done| {
            *s.lock().unwrap() = Some(done);
        })
        .unwrap();
    slot
}

/// An op for [`push_from_two_threads`]: its name, writes and reads.
type RacingOp = (&'static str, Vec<depengine::Var>, Vec<depengine::Var>);

/// Pushes `theirs` from a new loom thread while this one pushes `ours`;
/// each op records its name when it runs. Returns the record once the other
/// thread's push has returned.
fn push_from_two_threads(
    engine: &Engine,
    theirs: RacingOp,
    ours: RacingOp,
) -> Arc<Mutex<Vec<&'static str>>> {
    let order = Arc::new(Mutex::new(Vec::new()));
    let push = |engine: &Engine, (name, writes, reads): RacingOp, order: Arc<Mutex<Vec<_>>>| {
        engine
            .push(OpDesc::new(name).writes(&writes).reads(&reads), move |_| {
                order.lock().unwrap().push(name);
                Ok(())
            })
            .unwrap();
    };
    let (e2, o2) = (engine.clone(), order.clone());
    let t = thread::spawn(move || push(&e2, theirs, o2));
    push(engine, ours, order.clone());
    t.join().unwrap();
    order
}

#[test]
fn read_never_runs_before_the_write_pushed_before_it() {
    model(|| {
        let engine = naive();
        let v = engine.new_var();
        let data = Arc::new(AtomicUsize::new(0));
        let slot = parked_write(&engine, &v);
        let seen = Arc::new(AtomicUsize::new(usize::MAX));
        let (d, s) = (data.clone(), seen.clone());
        let t = thread::spawn(move || {
            let done = slot.lock().unwrap().take().expect("write started at push");
            d.store(1, Ordering::Relaxed);
            done.done();
        });
        let (d, s2) = (data.clone(), s.clone());
        engine
            .push(OpDesc::new("read").reads(&v), move |_| {
                s2.store(d.load(Ordering::Relaxed), Ordering::Relaxed);
                Ok(())
            })
            .unwrap();
        t.join().unwrap();
        engine.wait_for_all().unwrap();
        assert_eq!(seen.load(Ordering::Relaxed), 1);
    });
}

#[test]
fn write_waits_for_every_earlier_read() {
    model(|| {
        let engine = naive();
        let v = engine.new_var();
        let readers_done = Arc::new(AtomicUsize::new(0));
        // Two async reads, completed by two threads.
        let mut slots = Vec::new();
        for _ in 0..2 {
            let slot = Arc::new(Mutex::new(None::<Completion>));
            let s = slot.clone();
            engine
                .push_async(OpDesc::new("read").reads(&v), move |_, done| {
                    *s.lock().unwrap() = Some(done);
                })
                .unwrap();
            slots.push(slot);
        }
        let seen = Arc::new(AtomicUsize::new(usize::MAX));
        let (r, s) = (readers_done.clone(), seen.clone());
        engine
            .push(OpDesc::new("write").writes(&v), move |_| {
                s.store(r.load(Ordering::SeqCst), Ordering::SeqCst);
                Ok(())
            })
            .unwrap();
        let threads: Vec<_> = slots
            .into_iter()
            .map(|slot| {
                let r = readers_done.clone();
                thread::spawn(move || {
                    let done = slot.lock().unwrap().take().unwrap();
                    r.fetch_add(1, Ordering::SeqCst);
                    done.done();
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        engine.wait_for_all().unwrap();
        assert_eq!(seen.load(Ordering::SeqCst), 2);
        assert_eq!(v.version(), 1);
    });
}

#[test]
fn push_guard_keeps_a_multi_var_op_until_every_var_has_it() {
    model(|| {
        let engine = naive();
        let (a, b) = (engine.new_var(), engine.new_var());
        let slot = parked_write(&engine, &b);
        let finished_b = Arc::new(AtomicUsize::new(0));
        let f = finished_b.clone();
        // Completing the write of b races with the push of an op on (a, b):
        // the op may run only after b's write, whichever var it meets first.
        let t = thread::spawn(move || {
            let done = slot.lock().unwrap().take().unwrap();
            f.store(1, Ordering::SeqCst);
            done.done();
        });
        let seen = Arc::new(AtomicUsize::new(usize::MAX));
        let (f, s) = (finished_b.clone(), seen.clone());
        engine
            .push(OpDesc::new("both").writes(&[&a, &b]), move |_| {
                s.store(f.load(Ordering::SeqCst), Ordering::SeqCst);
                Ok(())
            })
            .unwrap();
        t.join().unwrap();
        engine.wait_for_all().unwrap();
        assert_eq!(seen.load(Ordering::SeqCst), 1);
        assert_eq!((a.version(), b.version()), (1, 2));
    });
}

#[test]
fn delete_racing_completion_runs_the_callback_once_after_the_last_op() {
    model(|| {
        let engine = naive();
        let v = engine.new_var();
        let slot = parked_write(&engine, &v);
        let wrote = Arc::new(AtomicUsize::new(0));
        let w = wrote.clone();
        let t = thread::spawn(move || {
            let done = slot.lock().unwrap().take().unwrap();
            w.store(1, Ordering::SeqCst);
            done.done();
        });
        let callbacks = Arc::new(AtomicUsize::new(0));
        let seen_write = Arc::new(AtomicUsize::new(usize::MAX));
        let (c, s, w) = (callbacks.clone(), seen_write.clone(), wrote.clone());
        engine
            .delete_var_with(v, move || {
                c.fetch_add(1, Ordering::SeqCst);
                s.store(w.load(Ordering::SeqCst), Ordering::SeqCst);
            })
            .unwrap();
        t.join().unwrap();
        engine.wait_for_all().unwrap();
        assert_eq!(callbacks.load(Ordering::SeqCst), 1);
        assert_eq!(seen_write.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn foreign_completion_racing_a_wait_is_seen_by_the_waiter() {
    model(|| {
        let engine = naive();
        let v = engine.new_var();
        let slot = parked_write(&engine, &v);
        let data = Arc::new(AtomicUsize::new(0));
        let d = data.clone();
        let t = thread::spawn(move || {
            let done = slot.lock().unwrap().take().unwrap();
            d.store(7, Ordering::Relaxed);
            done.done();
        });
        engine.wait_for_var(&v).unwrap();
        // The wait returned after the write completed: its effect is visible.
        assert_eq!(data.load(Ordering::Relaxed), 7);
        assert_eq!(v.version(), 1);
        t.join().unwrap();
    });
}

#[test]
fn concurrent_pushers_cannot_queue_ops_in_opposite_orders() {
    model(|| {
        let engine = naive();
        let (a, b) = (engine.new_var(), engine.new_var());
        // Hold a and b so that both pushes below queue behind the holders.
        let sa = parked_write(&engine, &a);
        let sb = parked_write(&engine, &b);
        let order = push_from_two_threads(
            &engine,
            ("ba", vec![b.clone(), a.clone()], vec![]),
            ("ab", vec![a.clone(), b.clone()], vec![]),
        );
        sa.lock().unwrap().take().unwrap().done();
        sb.lock().unwrap().take().unwrap().done();
        // A cycle between the two ops would leave this waiting forever, which
        // loom reports as a deadlock.
        engine.wait_for_all().unwrap();
        assert_eq!(order.lock().unwrap().len(), 2);
    });
}

/// Ops of three or more vars first only try the locks, in the op's own
/// order, and fall back to var-id order when one is held: two pushers whose
/// ops name shared vars in opposite orders must neither deadlock on the
/// locks nor queue the ops in opposite orders on two vars.
#[test]
fn pushers_trying_three_locks_in_opposite_orders_take_one_order() {
    model(|| {
        let engine = naive();
        let (a, b, c) = (engine.new_var(), engine.new_var(), engine.new_var());
        // Hold a and c so that both pushes below queue behind the holders.
        let sa = parked_write(&engine, &a);
        let sc = parked_write(&engine, &c);
        // Tried in the orders c, b, a and a, b, c.
        let order = push_from_two_threads(
            &engine,
            ("cba", vec![c.clone()], vec![b.clone(), a.clone()]),
            ("abc", vec![a.clone()], vec![b.clone(), c.clone()]),
        );
        sa.lock().unwrap().take().unwrap().done();
        sc.lock().unwrap().take().unwrap().done();
        // Opposite orders on a and c would be a cycle, and this wait would
        // never return: loom reports it as a deadlock.
        engine.wait_for_all().unwrap();
        assert_eq!(order.lock().unwrap().len(), 2);
        assert_eq!((a.version(), b.version(), c.version()), (2, 0, 2));
    });
}

#[test]
fn a_failed_write_is_seen_by_the_op_after_it() {
    model(|| {
        let engine = naive();
        let v = engine.new_var();
        let slot = parked_write(&engine, &v);
        let t = thread::spawn(move || {
            let done = slot.lock().unwrap().take().unwrap();
            done.fail(depengine::OpError::msg("lost"));
        });
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        engine
            .push(OpDesc::new("after").reads(&v), move |_| {
                r.store(1, Ordering::SeqCst);
                Ok(())
            })
            .unwrap();
        t.join().unwrap();
        let err = engine.wait_for_all().unwrap_err();
        assert_eq!(err.failure().unwrap().message, "lost");
        assert_eq!(ran.load(Ordering::SeqCst), 0, "skipped after the failure");
    });
}

/// The skip check reads an op's vars only while the engine counts a
/// failed var. Here one var's failure is taken by a wait while another
/// var's failure is being recorded: the op behind the second must still
/// be skipped, whichever order the two take.
#[test]
fn taking_one_var_s_failure_does_not_hide_another_s() {
    model(|| {
        let engine = naive();
        let (a, b) = (engine.new_var(), engine.new_var());
        let slot_a = parked_write(&engine, &a);
        let slot_b = parked_write(&engine, &b);
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        engine
            .push(OpDesc::new("after b").reads(&b), move |_| {
                r.store(1, Ordering::SeqCst);
                Ok(())
            })
            .unwrap();
        slot_a
            .lock()
            .unwrap()
            .take()
            .unwrap()
            .fail(depengine::OpError::msg("a lost"));
        let t = thread::spawn(move || {
            let done = slot_b.lock().unwrap().take().unwrap();
            done.fail(depengine::OpError::msg("b lost"));
        });
        assert!(engine.wait_for_var(&a).is_err());
        t.join().unwrap();
        assert!(engine.wait_for_all().is_err());
        assert_eq!(ran.load(Ordering::SeqCst), 0, "skipped after b's failure");
    });
}

#[test]
fn a_completion_racing_the_body_completes_the_op_once_after_the_body() {
    model(|| {
        let engine = naive();
        let v = engine.new_var();
        let body_done = Arc::new(AtomicUsize::new(0));
        let seen_at_next = Arc::new(AtomicUsize::new(usize::MAX));
        let handle = Arc::new(Mutex::new(None));
        let (bd, h) = (body_done.clone(), handle.clone());
        engine
            .push_async(OpDesc::new("racing").writes(&v), move |ctx, done| {
                // A foreign thread completes the op while the body still runs
                // and then reads its context.
                *h.lock().unwrap() = Some(thread::spawn(move || done.done()));
                assert_eq!(ctx.name(), "racing");
                bd.store(1, Ordering::SeqCst);
            })
            .unwrap();
        let (bd, s) = (body_done.clone(), seen_at_next.clone());
        engine
            .push(OpDesc::new("next").writes(&v), move |_| {
                s.store(bd.load(Ordering::SeqCst), Ordering::SeqCst);
                Ok(())
            })
            .unwrap();
        let t = handle.lock().unwrap().take().unwrap();
        t.join().unwrap();
        engine.wait_for_all().unwrap();
        // The next op ran only after the racing op's body had returned.
        assert_eq!(seen_at_next.load(Ordering::SeqCst), 1);
        assert_eq!(v.version(), 2);
    });
}

/// Pushes an async write on `v` that appends `tag` to `log` and parks its
/// completion in the returned slot.
fn parked_logged_write(
    engine: &Engine,
    v: &depengine::Var,
    log: &Arc<Mutex<Vec<u32>>>,
    tag: u32,
) -> Arc<Mutex<Option<Completion>>> {
    let slot = Arc::new(Mutex::new(None));
    let (s, l) = (slot.clone(), log.clone());
    engine
        .push_async(OpDesc::new("parked").writes(v), move |_, done| {
            l.lock().unwrap().push(tag);
            *s.lock().unwrap() = Some(done);
        })
        .unwrap();
    slot
}

/// Pushes a logged write on `v` that completes in its body.
fn logged_write(engine: &Engine, v: &depengine::Var, log: &Arc<Mutex<Vec<u32>>>, tag: u32) {
    let l = log.clone();
    engine
        .push(OpDesc::new("logged").writes(v), move |_| {
            l.lock().unwrap().push(tag);
            Ok(())
        })
        .unwrap();
}

/// Three writes on a fresh var: w0 holds it, w1 (async) and w2 queue behind
/// it and become a run when w0 completes. Returns the var, the log, and the
/// parked completions of w0 and w1.
#[allow(clippy::type_complexity)]
fn run_of_three(
    engine: &Engine,
) -> (
    depengine::Var,
    Arc<Mutex<Vec<u32>>>,
    Arc<Mutex<Option<Completion>>>,
    Arc<Mutex<Option<Completion>>>,
) {
    let v = engine.new_var();
    let log = Arc::new(Mutex::new(Vec::new()));
    let s0 = parked_logged_write(engine, &v, &log, 0);
    let s1 = parked_logged_write(engine, &v, &log, 1);
    logged_write(engine, &v, &log, 2);
    (v, log, s0, s1)
}

#[test]
fn a_run_of_queued_writes_keeps_push_order_while_more_are_appended() {
    model(|| {
        let engine = naive();
        // A foreign thread completes w0 and then w1 while this thread
        // appends w3 and a read: they must queue behind the run.
        let (v, log, s0, s1) = run_of_three(&engine);
        let t = thread::spawn(move || {
            s0.lock()
                .unwrap()
                .take()
                .expect("w0 started at push")
                .done();
            // w1 started when w0 completed (inline, naive executor).
            s1.lock().unwrap().take().expect("w1 granted by w0").done();
        });
        logged_write(&engine, &v, &log, 3);
        let (l, seen) = (log.clone(), Arc::new(AtomicUsize::new(0)));
        let s = seen.clone();
        engine
            .push(OpDesc::new("r").reads(&v), move |_| {
                s.store(l.lock().unwrap().len(), Ordering::SeqCst);
                Ok(())
            })
            .unwrap();
        t.join().unwrap();
        engine.wait_for_all().unwrap();
        assert_eq!(*log.lock().unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(seen.load(Ordering::SeqCst), 4, "the read saw every write");
        assert_eq!(v.version(), 4);
    });
}

#[test]
fn a_failure_inside_a_run_reaches_the_rest_of_the_run() {
    model(|| {
        let engine = naive();
        let (v, log, s0, s1) = run_of_three(&engine);
        let t = thread::spawn(move || {
            s0.lock().unwrap().take().unwrap().done();
            s1.lock()
                .unwrap()
                .take()
                .unwrap()
                .fail(depengine::OpError::msg("lost"));
        });
        logged_write(&engine, &v, &log, 3);
        t.join().unwrap();
        let err = engine.wait_for_all().unwrap_err();
        assert_eq!(err.failure().unwrap().message, "lost");
        // w2 (in the run) and w3 (queued behind it) were skipped.
        assert_eq!(*log.lock().unwrap(), vec![0, 1]);
        // Failed and skipped writes complete too, and count as versions.
        assert_eq!(v.version(), 4);
    });
}

#[test]
fn a_write_waits_for_fast_reads_and_a_racing_read_takes_one_side() {
    model(|| {
        let engine = naive();
        let v = engine.new_var();
        // Reads in flight, counted in through the fast-read counter.
        let active = Arc::new(AtomicUsize::new(0));
        let slot = Arc::new(Mutex::new(None::<Completion>));
        let (s, a) = (slot.clone(), active.clone());
        engine
            .push_async(OpDesc::new("r1").reads(&v), move |_, done| {
                a.fetch_add(1, Ordering::SeqCst);
                *s.lock().unwrap() = Some(done);
            })
            .unwrap();
        // r1 completes on a foreign thread while the write is appended.
        let a = active.clone();
        let t = thread::spawn(move || {
            let done = slot.lock().unwrap().take().unwrap();
            a.fetch_sub(1, Ordering::SeqCst);
            done.done();
        });
        // A second read races the write's append from another pusher.
        let writing = Arc::new(AtomicUsize::new(0));
        let (e2, v2, w2, a2) = (engine.clone(), v.clone(), writing.clone(), active.clone());
        let u = thread::spawn(move || {
            e2.push(OpDesc::new("r2").reads(&v2), move |_| {
                a2.fetch_add(1, Ordering::SeqCst);
                assert_eq!(w2.load(Ordering::SeqCst), 0, "r2 overlapped the write");
                a2.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            })
            .unwrap();
        });
        let (w, a) = (writing.clone(), active.clone());
        engine
            .push(OpDesc::new("w").writes(&v), move |_| {
                w.store(1, Ordering::SeqCst);
                assert_eq!(a.load(Ordering::SeqCst), 0, "the write overlapped a read");
                w.store(0, Ordering::SeqCst);
                Ok(())
            })
            .unwrap();
        t.join().unwrap();
        u.join().unwrap();
        engine.wait_for_all().unwrap();
        assert_eq!(v.version(), 1);
    });
}

/// A write's completion takes the reads queued behind it out of the
/// queue and counts them in as a fast-read epoch under the var's lock,
/// then grants them after releasing it. Here the read also waits for `y`,
/// whose write another thread completes, so either completion can be the
/// read's last grant; and the next write of `x`, pushed by this thread
/// while the other two complete theirs, comes before the count (and
/// queues behind the read, the epoch then closed at once), or between the
/// unlock and the read's grant, or after it (and finds the epoch open and
/// closes it). In every order the read runs before that write. (Mutations
/// caught: the close not counting the reads, the epoch left open with a
/// write queued, the reads not counted in.)
#[test]
fn reads_granted_from_the_queue_after_the_unlock_run_before_the_next_write() {
    model(|| {
        let engine = naive();
        let (x, y) = (engine.new_var(), engine.new_var());
        let wx = parked_write(&engine, &x);
        let wy = parked_write(&engine, &y);
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        engine
            .push(OpDesc::new("r").reads(&x).writes(&y), move |_| {
                l.lock().unwrap().push("r");
                Ok(())
            })
            .unwrap();
        let complete = |slot: Arc<Mutex<Option<Completion>>>| {
            thread::spawn(move || slot.lock().unwrap().take().expect("started").done())
        };
        let (a, b) = (complete(wx), complete(wy));
        let l = log.clone();
        engine
            .push(OpDesc::new("w").writes(&x), move |_| {
                l.lock().unwrap().push("w");
                Ok(())
            })
            .unwrap();
        a.join().unwrap();
        b.join().unwrap();
        engine.wait_for_all().unwrap();
        assert_eq!(*log.lock().unwrap(), ["r", "w"]);
        assert_eq!(x.version(), 2);
    });
}

#[test]
fn dropping_the_last_handle_with_a_fast_read_running_keeps_the_var_until_it_ends() {
    model(|| {
        let engine = naive();
        let v = engine.new_var();
        let slot = Arc::new(Mutex::new(None::<Completion>));
        let s = slot.clone();
        engine
            .push_async(OpDesc::new("r").reads(&v), move |_, done| {
                *s.lock().unwrap() = Some(done);
            })
            .unwrap();
        drop_the_last_handle_while_completing(&engine, v, slot);
    });
}

/// Completes the parked op on a loom thread while this one drops `v`, the
/// var's last handle: nothing is left pending and the var is freed (a
/// self-reference never dropped leaves it among the engine's live vars; one
/// dropped twice is caught by the unit tests of `var/`, which count the
/// references).
fn drop_the_last_handle_while_completing(
    engine: &Engine,
    v: depengine::Var,
    slot: Arc<Mutex<Option<Completion>>>,
) {
    let t = thread::spawn(move || slot.lock().unwrap().take().unwrap().done());
    drop(v);
    t.join().unwrap();
    engine.wait_for_all().unwrap();
    assert!(engine.pending_ops().vars.is_empty());
    assert_eq!(engine.live_vars(), 0, "the var outlived its handle and ops");
}

/// A write granted with nothing queued behind it leaves the var with a CAS
/// instead of its lock (`var/fast_write.rs`). Its completion races the next
/// write's append: either the append closes it first and queues behind it,
/// or it has left and the next write is granted at once. Either way the
/// next write runs after it and sees its effect.
#[test]
fn a_write_leaving_without_the_lock_races_the_next_write_s_append() {
    model(|| {
        let engine = naive();
        let v = engine.new_var();
        let log = Arc::new(Mutex::new(Vec::new()));
        let s0 = parked_logged_write(&engine, &v, &log, 0);
        let data = Arc::new(AtomicUsize::new(0));
        let d = data.clone();
        let t = thread::spawn(move || {
            let done = s0.lock().unwrap().take().expect("w0 started at push");
            d.store(1, Ordering::Relaxed);
            done.done();
        });
        let seen = Arc::new(AtomicUsize::new(usize::MAX));
        let (d, s, l) = (data.clone(), seen.clone(), log.clone());
        engine
            .push(OpDesc::new("w1").writes(&v), move |_| {
                l.lock().unwrap().push(1);
                s.store(d.load(Ordering::Relaxed), Ordering::Relaxed);
                Ok(())
            })
            .unwrap();
        t.join().unwrap();
        engine.wait_for_all().unwrap();
        assert_eq!(*log.lock().unwrap(), vec![0, 1]);
        assert_eq!(seen.load(Ordering::Relaxed), 1, "w1 missed w0's effect");
        assert_eq!(v.version(), 2);
    });
}

/// The last handle's drop races a write leaving without the lock: the var's
/// self-reference is dropped (the var is no longer live once the write is
/// done) and only once (a second drop would free the var under the
/// completing write).
#[test]
fn dropping_the_last_handle_while_a_write_leaves_without_the_lock_frees_the_var_once() {
    model(|| {
        let engine = naive();
        let v = engine.new_var();
        let slot = parked_write(&engine, &v);
        drop_the_last_handle_while_completing(&engine, v, slot);
    });
}

/// An op body that adds one to `d` with a load and a store, not one RMW:
/// a lost update shows two writes the protocol did not order.
fn bump(d: Arc<AtomicUsize>) -> impl FnOnce(&depengine::OpCtx<'_>) -> depengine::OpResult {
    move |_| {
        let x = d.load(Ordering::Relaxed);
        d.store(x + 1, Ordering::Relaxed);
        Ok(())
    }
}

/// Races a one-var write (lock-free when the var is idle) with a two-var
/// op's write, whose append takes the idle var back under the lock, after
/// `before` one-var writes that each ran inline at its push and left `v`
/// idle (none: the var is idle from its creation). The two writes never
/// overlap and each sees the other's effect in one order or the other;
/// once their handles are gone, both vars are freed.
fn race_a_lock_free_write_with_a_locked_append(before: usize) {
    model(move || {
        let engine = naive();
        let (v, u) = (engine.new_var(), engine.new_var());
        let data = Arc::new(AtomicUsize::new(0));
        for _ in 0..before {
            engine
                .push(OpDesc::new("w0").writes(&v), bump(data.clone()))
                .unwrap();
        }
        let (e2, v2, d2) = (engine.clone(), v.clone(), data.clone());
        let t = thread::spawn(move || {
            e2.push(OpDesc::new("w1").writes(&v2), bump(d2)).unwrap();
        });
        engine
            .push(OpDesc::new("w2").reads(&u).writes(&v), bump(data.clone()))
            .unwrap();
        t.join().unwrap();
        engine.wait_for_all().unwrap();
        let all = before + 2;
        assert_eq!(data.load(Ordering::Relaxed), all, "two writes overlapped");
        assert_eq!(v.version(), all as u64);
        drop((v, u));
        assert_eq!(engine.live_vars(), 0, "a var outlived its handles and ops");
    });
}

/// A one-var write leaves its var idle, and the next one-var op takes it
/// with a CAS (`var/fast_write.rs`), racing a locked append.
#[test]
fn a_write_taking_an_idle_var_without_the_lock_races_a_locked_append() {
    race_a_lock_free_write_with_a_locked_append(1);
}

/// A var is born idle (`VarInner::new`): its first one-var op takes it
/// with a CAS, racing a locked append.
#[test]
fn a_fresh_var_taken_without_the_lock_races_a_locked_append() {
    race_a_lock_free_write_with_a_locked_append(0);
}

/// A one-var read opens a fast-read epoch on an idle var without the lock
/// while a one-var write takes the same idle var, after `before` one-var
/// writes that left it idle (none: idle from its creation). One of them
/// gets it, the other queues (or closes the epoch): the read sees the
/// write wholly or not at all.
fn race_a_read_and_a_write_for_an_idle_var(before: usize) {
    model(move || {
        let engine = naive();
        let v = engine.new_var();
        let data = Arc::new(AtomicUsize::new(0));
        for _ in 0..before {
            engine
                .push(OpDesc::new("w0").writes(&v), bump(data.clone()))
                .unwrap();
        }
        let seen = Arc::new(AtomicUsize::new(usize::MAX));
        let (e2, v2, d2, s2) = (engine.clone(), v.clone(), data.clone(), seen.clone());
        let t = thread::spawn(move || {
            e2.push(OpDesc::new("r").reads(&v2), move |_| {
                s2.store(d2.load(Ordering::Relaxed), Ordering::Relaxed);
                Ok(())
            })
            .unwrap();
        });
        engine
            .push(OpDesc::new("w1").writes(&v), bump(data.clone()))
            .unwrap();
        t.join().unwrap();
        engine.wait_for_all().unwrap();
        // The read ran wholly before w1 or wholly after it.
        let s = seen.load(Ordering::Relaxed);
        assert!(s == before || s == before + 1, "the read saw {s}");
        assert_eq!(data.load(Ordering::Relaxed), before + 1);
        assert_eq!(v.version(), before as u64 + 1);
        drop(v);
        assert_eq!(
            engine.live_vars(),
            0,
            "the var outlived its handles and ops"
        );
    });
}

#[test]
fn a_read_and_a_write_racing_for_an_idle_var_take_one_order() {
    race_a_read_and_a_write_for_an_idle_var(1);
}

#[test]
fn a_read_and_a_write_racing_for_a_fresh_var_take_one_order() {
    race_a_read_and_a_write_for_an_idle_var(0);
}

/// A pooled engine with one CPU worker (and its one IO worker).
fn pooled_one_worker() -> Engine {
    Engine::builder()
        .kind(EngineKind::Pooled)
        .cpu_workers(1)
        .copy_workers(1)
        .build()
        .unwrap()
}

#[test]
fn wait_for_all_wakes_when_a_pool_worker_completes_the_last_op() {
    // The worker completes both writes; the first one's completion makes
    // the second ready, the second's leaves the wake-up of the waiter to
    // the worker's loop, once it finds no op to run. A lost wake-up would
    // leave the waiter parked for good: loom reports the deadlock.
    model(|| {
        let engine = pooled_one_worker();
        let v = engine.new_var();
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..2 {
            let desc = OpDesc::new("w").writes(&v);
            engine.push(desc, bump(ran.clone())).unwrap();
        }
        engine.wait_for_all().unwrap();
        assert_eq!(ran.load(Ordering::Relaxed), 2);
    });
}

#[test]
fn wait_for_all_wakes_whichever_of_a_worker_and_another_thread_completes_last() {
    // One op completes on the pool worker (its wake-up left to the
    // worker's loop), an async one on a thread of the program's own (which
    // looks at once); either may be the last.
    model(|| {
        let engine = pooled_one_worker();
        let (a, b) = (engine.new_var(), engine.new_var());
        let slot = parked_write(&engine, &a);
        let ran = Arc::new(AtomicUsize::new(0));
        let desc = OpDesc::new("plain").writes(&b);
        engine.push(desc, bump(ran.clone())).unwrap();
        let completer = thread::spawn(move || loop {
            let done = slot.lock().unwrap().take();
            match done {
                Some(done) => break done.done(),
                None => thread::yield_now(),
            }
        });
        engine.wait_for_all().unwrap();
        assert_eq!(ran.load(Ordering::Relaxed), 1);
        completer.join().unwrap();
    });
}

/// Pushes a write of a new var, then a read of it with `property`, which
/// sends the read to another pool than the write's; waits for all and
/// returns what the read saw of the write (1 once it ended, 0 before).
fn read_on_another_pool_after_a_write(engine: &Engine, property: Property) -> usize {
    let v = engine.new_var();
    let data = Arc::new(AtomicUsize::new(0));
    let desc = OpDesc::new("write").writes(&v);
    engine.push(desc, bump(data.clone())).unwrap();
    let seen = Arc::new(AtomicUsize::new(usize::MAX));
    let s = seen.clone();
    let desc = OpDesc::new("read").reads(&v).property(property);
    engine
        .push(desc, move |_| {
            s.store(data.load(Ordering::Relaxed), Ordering::Relaxed);
            Ok(())
        })
        .unwrap();
    engine.wait_for_all().unwrap();
    seen.load(Ordering::Relaxed)
}

#[test]
fn an_op_made_ready_for_the_other_pool_wakes_its_worker_and_sees_the_write() {
    // The write runs on the compute pool's worker; its completion makes
    // the copy ready, and the copy belongs to the io pool: that pool's
    // worker, searching or asleep, must be woken for it, and the waiter
    // once the copy is done. A lost wake-up of either is a deadlock to
    // loom; a copy run before the write ended would see 0.
    model(|| {
        let engine = pooled_one_worker();
        let seen = read_on_another_pool_after_a_write(&engine, Property::CopyToDevice);
        assert_eq!(seen, 1, "the copy ran before the write ended");
    });
}

#[test]
fn a_prioritized_op_after_a_write_runs_on_the_priority_pool_after_it() {
    // The per-device engine's three CPU pools, one worker each: the write
    // runs on the compute pool, the prioritized read it makes ready goes
    // to the priority pool's heap, whose worker must be woken for it.
    // Four threads: one preemption (a lost wake-up of the priority pool's
    // worker is still reported as a deadlock at that bound; checked).
    model_within(1, || {
        let engine = Engine::builder()
            .kind(EngineKind::PerDevice)
            .cpu_workers(1)
            .cpu_priority_workers(1)
            .copy_workers(1)
            .build()
            .unwrap();
        let seen = read_on_another_pool_after_a_write(&engine, Property::CpuPrioritized);
        assert_eq!(seen, 1, "the read ran before the write ended");
    });
}
