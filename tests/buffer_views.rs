//! Tensors on the engine: views checked against what the op declared, the
//! borrow flag within a body, an early async completion, deletion
//! by dropping the last handle (after the last pending op, or at once on a
//! shut-down engine), and the temporary workspace.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use depengine::storage::{
    Access, Buffer, DeviceId, PoolType, Storage, StorageConfig, Storages, Tensor, ViewError,
    Workspace,
};
use depengine::{Context, Engine, EngineError, EngineKind, OpDesc};

fn engine(kind: EngineKind) -> Engine {
    Engine::builder().kind(kind).cpu_workers(2).build().unwrap()
}

fn pool() -> Arc<dyn Storage> {
    StorageConfig::builder()
        .pool_type(PoolType::Exact)
        .build()
        .unwrap()
        .create(DeviceId::cpu(0))
}

const KINDS: [EngineKind; 3] = [EngineKind::Naive, EngineKind::Pooled, EngineKind::PerDevice];

#[test]
fn a_declared_read_gets_a_read_view_and_a_declared_write_both() {
    for kind in KINDS {
        let (e, s) = (engine(kind), pool());
        let t = Tensor::from_slice(&e, &s, &[1u32, 2, 3]).unwrap();
        let tc = t.clone();
        let sum = e
            .push_sync(OpDesc::new("sum").reads(t.var()), move |ctx| {
                Ok(tc.read(ctx)?.iter().sum::<u32>())
            })
            .unwrap();
        assert_eq!(sum, 6);
        // A write declares a read as well: both views, one after the other.
        let tc = t.clone();
        e.push_sync(OpDesc::new("double").writes(t.var()), move |ctx| {
            let before: Vec<u32> = tc.read(ctx)?.to_vec();
            let mut w = tc.write(ctx)?;
            for (w, b) in w.iter_mut().zip(before) {
                *w = 2 * b;
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(t.to_vec().unwrap(), [2, 4, 6]);
    }
}

#[test]
fn a_write_view_of_a_buffer_declared_as_read_is_an_error() {
    let (e, s) = (engine(EngineKind::Pooled), pool());
    let t = Tensor::<f64>::new(&e, &s, 8).unwrap();
    let tc = t.clone();
    let err = e
        .push_sync(OpDesc::new("sneaky").reads(t.var()), move |ctx| {
            Ok(tc.write(ctx).map(|_| ()).unwrap_err())
        })
        .unwrap();
    assert_eq!(
        err,
        ViewError::ReadOnly {
            op: "sneaky".into(),
            var: t.var().id(),
        }
    );
    assert!(err.to_string().contains("declared as read only"), "{err}");

    // With `?` the refusal fails the op, and the wait reports it.
    let tc = t.clone();
    e.push(OpDesc::new("sneaky again").reads(t.var()), move |ctx| {
        tc.write(ctx)?[0] = 1.0;
        Ok(())
    })
    .unwrap();
    let failure = e.wait_for_all().unwrap_err().to_string();
    assert!(
        failure.contains("sneaky again") && failure.contains("read only"),
        "{failure}"
    );
    assert_eq!(t.to_vec().unwrap(), [0.0; 8]);
}

#[test]
fn a_view_of_an_undeclared_buffer_is_an_error() {
    let (e, s) = (engine(EngineKind::PerDevice), pool());
    let (t, other) = (
        Tensor::<u8>::new(&e, &s, 4).unwrap(),
        Tensor::<u8>::new(&e, &s, 4).unwrap(),
    );
    let tc = t.clone();
    let (r, w) = e
        .push_sync(OpDesc::new("other").writes(other.var()), move |ctx| {
            Ok((tc.read(ctx).map(|_| ()), tc.write(ctx).map(|_| ())))
        })
        .unwrap();
    let var = t.var().id();
    let op = "other".to_string();
    assert_eq!(
        r,
        Err(ViewError::NotDeclared {
            op: op.clone(),
            var,
            access: Access::Read
        })
    );
    assert_eq!(
        w,
        Err(ViewError::NotDeclared {
            op,
            var,
            access: Access::Write
        })
    );
}

#[test]
fn overlapping_views_in_one_body_are_refused() {
    let (e, s) = (engine(EngineKind::Pooled), pool());
    let t: Buffer = Tensor::new(&e, &s, 16).unwrap();
    let tc = t.clone();
    let outcomes = e
        .push_sync(OpDesc::new("overlap").writes(t.var()), move |ctx| {
            let mut out = Vec::new();
            {
                let _w = tc.write(ctx)?;
                out.push(tc.write(ctx).map(|_| ()));
                out.push(tc.read(ctx).map(|_| ()));
            }
            {
                let r1 = tc.read(ctx)?;
                let r2 = tc.read(ctx)?; // readers share
                assert_eq!(r1.len() + r2.len(), 32);
                out.push(tc.write(ctx).map(|_| ()));
            }
            // Every view dropped: writing is allowed again.
            tc.write(ctx)?.fill(7);
            Ok(out)
        })
        .unwrap();
    let held = |access, held| {
        Err(ViewError::Borrowed {
            op: "overlap".into(),
            var: t.var().id(),
            access,
            held,
        })
    };
    assert_eq!(
        outcomes,
        [
            held(Access::Write, Access::Write),
            held(Access::Read, Access::Write),
            held(Access::Write, Access::Read),
        ]
    );
    assert_eq!(t.to_vec().unwrap(), [7u8; 16]);
}

#[test]
fn values_written_by_one_op_are_seen_by_the_next() {
    for kind in KINDS {
        let (e, s) = (engine(kind), pool());
        let a = Tensor::<u64>::new(&e, &s, 1000).unwrap();
        let b = Tensor::<u64>::new(&e, &s, 1000).unwrap();
        for round in 0..50u64 {
            let ac = a.clone();
            e.push(OpDesc::new("a += round").writes(a.var()), move |ctx| {
                for x in ac.write(ctx)?.iter_mut() {
                    *x += round;
                }
                Ok(())
            })
            .unwrap();
            let (ac, bc) = (a.clone(), b.clone());
            e.push(
                OpDesc::new("b += a").reads(a.var()).writes(b.var()),
                move |ctx| {
                    let a = ac.read(ctx)?;
                    for (b, a) in bc.write(ctx)?.iter_mut().zip(a.iter()) {
                        *b += *a;
                    }
                    Ok(())
                },
            )
            .unwrap();
        }
        // a = sum(0..50) = 1225; b = sum over rounds of a's running value.
        let expect_b: u64 = (0..50u64).map(|r| r * (r + 1) / 2).sum();
        assert_eq!(a.to_vec().unwrap(), vec![1225; 1000], "{kind:?}");
        assert_eq!(b.to_vec().unwrap(), vec![expect_b; 1000], "{kind:?}");
    }
}

#[test]
fn an_async_body_that_completes_early_keeps_the_var_until_it_returns() {
    // The async body's completion is consumed (on the test thread) while the
    // body still holds a write view: the engine defers the completion, so the
    // next writer starts only after the body has dropped its view and
    // returned, and gets its own view without any refusal. (Threaded
    // executors only: under the naive one the body would run inside `push`,
    // on the thread that must consume the completion.)
    for kind in [EngineKind::Pooled, EngineKind::PerDevice] {
        let (e, s) = (engine(kind), pool());
        let t = Tensor::<u32>::new(&e, &s, 4).unwrap();
        let (done_tx, done_rx) = mpsc::channel();
        let (consumed_tx, consumed_rx) = mpsc::channel::<()>();
        let next_ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (tc, nr) = (t.clone(), next_ran.clone());
        let seen_next = Arc::new(Mutex::new(None));
        let sn = seen_next.clone();
        e.push_async(OpDesc::new("early").writes(t.var()), move |ctx, done| {
            let mut w = tc.write(ctx).unwrap();
            w[0] = 1;
            done_tx.send(done).unwrap();
            consumed_rx.recv().unwrap();
            *sn.lock().unwrap() = Some(nr.load(std::sync::atomic::Ordering::SeqCst));
            w[0] = 2;
        })
        .unwrap();
        let (tc, nr) = (t.clone(), next_ran.clone());
        let result = Arc::new(Mutex::new(None));
        let rc = result.clone();
        e.push(OpDesc::new("next").writes(t.var()), move |ctx| {
            nr.store(true, std::sync::atomic::Ordering::SeqCst);
            let r = tc.write(ctx).map(|mut w| {
                assert_eq!(w[0], 2, "the early op's last write is visible");
                w[0] = 3;
            });
            *rc.lock().unwrap() = Some(r.is_ok());
            Ok(())
        })
        .unwrap();
        done_rx.recv().unwrap().done();
        consumed_tx.send(()).unwrap();
        e.wait_for_all().unwrap();
        assert_eq!(
            *seen_next.lock().unwrap(),
            Some(false),
            "{kind:?}: next ran during the body"
        );
        assert_eq!(*result.lock().unwrap(), Some(true), "{kind:?}");
        assert_eq!(t.to_vec().unwrap(), [3, 0, 0, 0]);
    }
}

#[test]
fn dropping_the_last_handle_frees_after_the_last_pending_op() {
    for kind in [EngineKind::Pooled, EngineKind::PerDevice] {
        let (e, s) = (engine(kind), pool());
        let t = Tensor::<u8>::new(&e, &s, 5000).unwrap();
        assert_eq!(t.rounded_bytes(), 8192);
        let (go_tx, go_rx) = mpsc::channel::<()>();
        // The op declares the var but holds no handle: only the deletion op
        // keeps the memory alive for it.
        let var = t.var().clone();
        e.push(OpDesc::new("slow reader").reads(&var), move |_| {
            go_rx.recv().unwrap();
            Ok(())
        })
        .unwrap();
        drop(t);
        assert!(var.is_deleted());
        let st = s.stats();
        assert_eq!(
            (st.in_use, st.cached),
            (8192, 0),
            "{kind:?}: freed too early"
        );
        go_tx.send(()).unwrap();
        e.wait_for_all().unwrap();
        let st = s.stats();
        assert_eq!((st.in_use, st.cached), (0, 8192), "{kind:?}");
        // The next tensor of that size reuses the block.
        let t = Tensor::<u8>::new(&e, &s, 6000).unwrap();
        assert_eq!(s.stats().from_pool, 1);
        drop(t);
        e.wait_for_all().unwrap();
        assert_eq!(s.stats().in_use, 0);
    }
}

#[test]
fn the_last_handle_can_be_dropped_inside_an_op() {
    let (e, s) = (engine(EngineKind::Pooled), pool());
    let t = Tensor::<u16>::full(&e, &s, 100, 9).unwrap();
    let var = t.var().clone();
    e.push(OpDesc::new("consume").writes(&var), move |ctx| {
        let sum: u32 = t.read(ctx)?.iter().map(|&x| u32::from(x)).sum();
        assert_eq!(sum, 900);
        drop(t); // the deletion op queues behind this op
        Ok(())
    })
    .unwrap();
    e.wait_for_all().unwrap();
    assert!(var.is_deleted());
    assert_eq!(s.stats().in_use, 0);
}

#[test]
fn on_a_shut_down_engine_the_memory_is_freed_at_once() {
    let (e, s) = (engine(EngineKind::Pooled), pool());
    let t = Tensor::<u64>::new(&e, &s, 10).unwrap();
    e.shutdown().unwrap();
    assert!(matches!(t.to_vec(), Err(EngineError::ShutDown { .. })));
    drop(t);
    let st = s.stats();
    assert_eq!((st.in_use, st.cached), (0, 4096));
}

#[test]
fn a_tensor_keeps_its_engine_alive_until_its_deletion_ran() {
    let s = pool();
    let e = engine(EngineKind::Pooled);
    let t = Tensor::<u64>::full(&e, &s, 10, 5).unwrap();
    drop(e); // the tensor still holds a clone
    assert_eq!(t.to_vec().unwrap(), [5; 10]);
    drop(t); // pushes the deletion, then drops the last engine handle
    assert_eq!(s.stats().in_use, 0);
}

#[test]
fn empty_and_zero_sized_tensors() {
    let (e, s) = (engine(EngineKind::Naive), pool());
    let empty = Tensor::<f32>::new(&e, &s, 0).unwrap();
    assert!(empty.is_empty());
    assert_eq!(empty.to_vec().unwrap(), Vec::<f32>::new());
    let units = Tensor::<()>::new(&e, &s, 3).unwrap();
    assert_eq!(units.to_vec().unwrap(), [(); 3]);
    assert_eq!(units.size_bytes(), 0);
    drop((empty, units));
    e.wait_for_all().unwrap();
    assert_eq!(s.stats().in_use, 0);
}

#[test]
fn a_workspace_comes_from_the_pool_and_is_back_after_the_op() {
    let e = engine(EngineKind::PerDevice);
    let storages = Arc::new(Storages::new(
        StorageConfig::builder()
            .pool_type(PoolType::Round)
            .build()
            .unwrap(),
    ));
    for round in 0..3u64 {
        let st = storages.clone();
        let seen = e
            .push_sync(OpDesc::new("with scratch"), move |ctx| {
                let storage = st.get(ctx.context().into());
                let mut tmp = Workspace::<u64>::new(ctx, &storage, 1000)?;
                assert!(tmp.iter().all(|&x| x == 0), "a workspace starts zeroed");
                tmp.iter_mut().for_each(|x| *x = round);
                // In use while the op runs.
                Ok((storage.stats().in_use, tmp.rounded_bytes()))
            })
            .unwrap();
        assert_eq!(seen, (8192, 8192));
        let stats = storages.stats(DeviceId::cpu(0)).unwrap();
        assert_eq!((stats.in_use, stats.cached), (0, 8192), "round {round}");
        assert_eq!((stats.from_system, stats.from_pool), (1, round));
    }
    // A GPU op's workspace comes from that device's manager.
    let e = Engine::builder().gpus(1).build().unwrap();
    let st = storages.clone();
    e.push_sync(
        OpDesc::new("gpu scratch").context(Context::Gpu(0)),
        move |ctx| {
            let storage = st.get(ctx.context().into());
            let ws = Workspace::full(ctx, &storage, 10, 1.5f32)?;
            Ok(ws.iter().sum::<f32>())
        },
    )
    .unwrap();
    let gpu = storages.stats(DeviceId::gpu(0)).unwrap();
    assert_eq!((gpu.in_use, gpu.cached, gpu.from_system), (0, 4096, 1));
}
