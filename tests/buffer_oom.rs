//! Out of memory with the engine: under a small limit, making a tensor first
//! drains the pool's cache (blocks that deletion ops handed back), then fails
//! with an error naming what was asked, held and cached; ops that ask for a
//! workspace past the limit fail like any op; and the engine stays usable.

use std::sync::Arc;

use depengine::storage::{
    DeviceId, PoolType, Storage, StorageConfig, StorageError, Tensor, Workspace,
};
use depengine::{Engine, EngineError, EngineKind, OpDesc};

const KIB: usize = 1024;

fn limited(limit: usize) -> Arc<dyn Storage> {
    StorageConfig::builder()
        .pool_type(PoolType::Exact)
        .page_size(4 * KIB)
        .reserve_percent(0)
        .limit_bytes(Some(limit))
        .build()
        .unwrap()
        .create(DeviceId::cpu(0))
}

/// A tensor of `kib` KiB of `u64`s.
fn tensor(e: &Engine, s: &Arc<dyn Storage>, kib: usize) -> Result<Tensor<u64>, StorageError> {
    Tensor::full(e, s, kib * KIB / 8, kib as u64)
}

#[test]
fn allocation_drains_the_cache_then_fails_and_the_engine_stays_usable() {
    for kind in [EngineKind::Pooled, EngineKind::PerDevice, EngineKind::Naive] {
        let e = Engine::builder().kind(kind).cpu_workers(2).build().unwrap();
        let s = limited(64 * KIB);

        // 48 KiB held, then two tensors dropped: their deletion ops cache 32.
        let a = tensor(&e, &s, 16).unwrap();
        let (b, c) = (tensor(&e, &s, 16).unwrap(), tensor(&e, &s, 16).unwrap());
        drop((b, c));
        e.wait_for_all().unwrap();
        let st = s.stats();
        assert_eq!((st.in_use, st.cached), (16 * KIB, 32 * KIB), "{kind:?}");

        // 40 KiB more only fits once the cache is released.
        let d = tensor(&e, &s, 40).unwrap();
        let st = s.stats();
        assert_eq!((st.in_use, st.cached), (56 * KIB, 0), "{kind:?}");
        assert_eq!(st.released_bytes, 32 * KIB as u64);
        assert!(st.pressure_releases >= 1);

        // Now 40 in use and 16 cached: 32 more drains the cache and still
        // does not fit.
        drop(a);
        e.wait_for_all().unwrap();
        assert_eq!(s.stats().cached, 16 * KIB);
        let err = tensor(&e, &s, 32).unwrap_err();
        match &err {
            StorageError::OutOfMemory {
                asked,
                rounded,
                in_use,
                cached,
                limit,
                ..
            } => {
                assert_eq!((*asked, *rounded), (32 * KIB, 32 * KIB));
                assert_eq!((*in_use, *cached, *limit), (40 * KIB, 0, Some(64 * KIB)));
            }
            other => panic!("{kind:?}: {other}"),
        }
        let text = err.to_string();
        assert!(text.contains("out of memory") && text.contains("DEPENGINE_STORAGE_LIMIT_BYTES"));
        let st = s.stats();
        assert_eq!((st.in_use, st.cached, st.failures), (40 * KIB, 0, 1));
        assert_eq!(st.released_bytes, 48 * KIB as u64);

        // The engine goes on: ops on the surviving tensor run and see its
        // values.
        let dc = d.clone();
        e.push(OpDesc::new("d += 1").writes(d.var()), move |ctx| {
            dc.write(ctx)?.iter_mut().for_each(|x| *x += 1);
            Ok(())
        })
        .unwrap();
        assert!(d.to_vec().unwrap().iter().all(|&x| x == 41));

        // An op whose workspace does not fit fails with the storage error;
        // the wait reports it once, then the engine is clean.
        let st = s.clone();
        e.push(OpDesc::new("big scratch"), move |ctx| {
            let ws = Workspace::<u8>::new(ctx, &st, 32 * KIB)?;
            assert!(ws.is_empty(), "not reached");
            Ok(())
        })
        .unwrap();
        match e.wait_for_all() {
            Err(EngineError::OpFailed(f)) => {
                assert_eq!(f.op, "big scratch");
                assert!(f.message.contains("out of memory"), "{}", f.message);
            }
            other => panic!("{kind:?}: {other:?}"),
        }
        e.wait_for_all().unwrap();
        let st = s.clone();
        let n = e
            .push_sync(OpDesc::new("small scratch"), move |ctx| {
                Ok(Workspace::<u8>::new(ctx, &st, 16 * KIB)?.len())
            })
            .unwrap();
        assert_eq!(n, 16 * KIB);

        // Freeing makes room again; at the end every byte is accounted for.
        drop(d);
        e.wait_for_all().unwrap();
        let again = tensor(&e, &s, 32).unwrap();
        drop(again);
        e.wait_for_all().unwrap();
        let st = s.stats();
        assert_eq!(st.in_use, 0, "{kind:?}: {st}");
        assert_eq!(st.cached as u64 + st.released_bytes, st.allocated_bytes);
    }
}
