//! MXNet's storage suite restated for these managers, plus statistics,
//! out-of-memory and registry behaviour.

use std::sync::Arc;

use depengine::storage::{
    DeviceId, PoolType, Storage, StorageConfig, StorageError, StorageStats, Storages,
};

const ALL: [PoolType; 4] = [
    PoolType::Naive,
    PoolType::Exact,
    PoolType::Round,
    PoolType::Unpooled,
];

fn manager(kind: PoolType) -> Arc<dyn Storage> {
    StorageConfig::builder()
        .pool_type(kind)
        .build()
        .unwrap()
        .create(DeviceId::cpu(0))
}

/// The MXNet round pool of the GPU test: cutoff 2^20.
fn round_pool_2_20() -> Arc<dyn Storage> {
    StorageConfig::builder()
        .pool_type(PoolType::Round)
        .round_cutoff(1 << 20)
        .build()
        .unwrap()
        .create(DeviceId::gpu(0))
}

/// Quiescent invariants that hold at every point of a single-threaded run.
fn assert_consistent(s: &StorageStats) {
    assert_eq!(
        s.allocated_bytes,
        s.held() as u64 + s.released_bytes,
        "allocated = in use + cached + released: {s}"
    );
    assert!(s.peak_in_use >= s.in_use, "{s}");
}

#[test]
fn basic_allocate_free_every_kind() {
    for kind in ALL {
        let m = manager(kind);
        assert_eq!(m.pool_type(), kind);
        let a = m.allocate(1024).unwrap();
        assert_eq!(a.context(), DeviceId::cpu(0));
        assert_eq!(a.size(), 1024);
        assert!(a.rounded_size() >= 1024);
        m.free(a).unwrap();
        let a = m.allocate(1024).unwrap();
        assert_eq!(a.size(), 1024);
        m.free(a).unwrap();
        let s = m.stats();
        assert_eq!(s.in_use, 0, "{kind:?}: {s}");
        assert_consistent(&s);
    }
}

#[test]
fn blocks_are_aligned_to_at_least_64_bytes() {
    for kind in ALL {
        let m = manager(kind);
        assert!(m.alignment() >= 64);
        let sizes = [1, 7, 63, 64, 65, 100, 1000, 4095, 4097, 65_537, 1 << 20];
        let live: Vec<_> = sizes.iter().map(|&s| m.allocate(s).unwrap()).collect();
        for a in &live {
            assert_eq!(a.as_ptr() as usize % 64, 0, "{kind:?}: {a:?}");
        }
        for a in live {
            m.free(a).unwrap();
        }
    }
    // A larger alignment is honoured too.
    let m = StorageConfig::builder()
        .pool_type(PoolType::Naive)
        .alignment(4096)
        .build()
        .unwrap()
        .create(DeviceId::cpu(0));
    let a = m.allocate(10).unwrap();
    assert_eq!(a.as_ptr() as usize % 4096, 0);
    m.free(a).unwrap();
}

#[test]
fn size_zero_is_allowed_and_holds_nothing() {
    for kind in ALL {
        let m = manager(kind);
        let mut a = m.allocate(0).unwrap();
        assert!(a.is_empty());
        assert_eq!(a.rounded_size(), 0);
        assert_eq!(a.as_ptr() as usize % m.alignment(), 0);
        assert!(!a.as_ptr().is_null());
        assert!(a.as_uninit_mut().is_empty());
        a.fill(1);
        // SAFETY: an empty slice needs no initialised bytes.
        assert!(unsafe { a.as_slice() }.is_empty());
        m.free(a).unwrap();
        let b = m.allocate(0).unwrap();
        m.free_direct(b).unwrap();
        let s = m.stats();
        assert_eq!(s.zero_sized, 2);
        assert_eq!((s.in_use, s.cached, s.allocated_bytes), (0, 0, 0), "{s}");
        assert_eq!(s.served(), 0);
    }
}

#[test]
fn free_then_allocate_same_rounded_size_returns_the_same_block() {
    for kind in [PoolType::Exact, PoolType::Round] {
        let m = manager(kind);
        let a = m.allocate(1024).unwrap();
        let p = a.as_ptr();
        m.free(a).unwrap();
        let b = m.allocate(1024).unwrap();
        assert_eq!(b.as_ptr(), p, "{kind:?}");
        m.free(b).unwrap();
        // Another size of the same rounded block.
        let c = m.allocate(4000).unwrap();
        assert_eq!(c.as_ptr(), p, "{kind:?}");
        m.free(c).unwrap();
        let s = m.stats();
        assert_eq!((s.from_system, s.from_pool), (1, 2), "{kind:?}: {s}");
        assert_consistent(&s);
    }
}

#[test]
fn round_pool_buckets_with_cutoff_2_20() {
    let m = round_pool_2_20();
    // 32 and 4095 share a 4 KiB block.
    let a = m.allocate(32).unwrap();
    assert_eq!(a.rounded_size(), 4096);
    let p = a.as_ptr();
    m.free(a).unwrap();
    let b = m.allocate(4095).unwrap();
    assert_eq!((b.as_ptr(), b.rounded_size()), (p, 4096));
    m.free(b).unwrap();
    // Powers of two below the cutoff.
    let c = m.allocate(5000).unwrap();
    assert_eq!(c.rounded_size(), 8192);
    m.free(c).unwrap();
    // 2 MiB + 1 and 3 MiB share a 3 MiB block (linear above the cutoff).
    let d = m.allocate((2 << 20) + 1).unwrap();
    assert_eq!(d.rounded_size(), 3 << 20);
    let q = d.as_ptr();
    m.free(d).unwrap();
    let e = m.allocate(3 << 20).unwrap();
    assert_eq!((e.as_ptr(), e.rounded_size()), (q, 3 << 20));
    m.free(e).unwrap();
    // 3 MiB + 1 is the next bucket: not the cached 3 MiB block.
    let f = m.allocate((3 << 20) + 1).unwrap();
    assert_eq!(f.rounded_size(), 4 << 20);
    m.free(f).unwrap();
    let s = m.stats();
    assert_eq!((s.from_system, s.from_pool), (4, 2), "{s}");
    assert_eq!(s.cached, 4096 + 8192 + (3 << 20) + (4 << 20));
    assert_consistent(&s);
}

#[test]
fn exact_pool_rounds_to_pages_and_reuses_only_exact_matches() {
    let m = manager(PoolType::Exact);
    for (asked, block) in [
        (1, 4096),
        (4096, 4096),
        (4097, 8192),
        (2 << 20, 2 << 20),
        ((2 << 20) + 1, 4 << 20),
    ] {
        let a = m.allocate(asked).unwrap();
        assert_eq!(a.rounded_size(), block, "asked {asked}");
        m.free(a).unwrap();
    }
    m.release_all();
    let a = m.allocate(4096).unwrap();
    let p = a.as_ptr();
    m.free(a).unwrap();
    // An 8 KiB request does not take the cached 4 KiB block.
    let b = m.allocate(8192).unwrap();
    assert_ne!(b.as_ptr(), p);
    let s = m.stats();
    assert_eq!(s.cached, 4096);
    m.free(b).unwrap();
    assert_consistent(&m.stats());
}

#[test]
fn statistics_follow_every_operation() {
    let m = manager(PoolType::Exact);
    let a = m.allocate(100).unwrap(); // 4 KiB from the system
    let b = m.allocate(5000).unwrap(); // 8 KiB from the system
    let s = m.stats();
    assert_eq!((s.in_use, s.cached, s.peak_in_use), (12288, 0, 12288));
    assert_eq!(
        (s.from_system, s.from_pool, s.allocated_bytes),
        (2, 0, 12288)
    );
    m.free(a).unwrap();
    let s = m.stats();
    assert_eq!((s.in_use, s.cached, s.peak_in_use), (8192, 4096, 12288));
    let c = m.allocate(4096).unwrap(); // from the pool
    let s = m.stats();
    assert_eq!((s.in_use, s.cached, s.from_pool), (12288, 0, 1));
    m.free_direct(c).unwrap(); // bypasses the pool
    let s = m.stats();
    assert_eq!((s.in_use, s.cached, s.released_bytes), (8192, 0, 4096));
    m.free(b).unwrap();
    assert_eq!(m.stats().cached, 8192);
    assert_eq!(m.release_all(), 8192);
    let s = m.stats();
    assert_eq!((s.in_use, s.cached, s.released_bytes), (0, 0, 12288));
    assert_eq!(s.allocated_bytes, 12288);
    assert_eq!(s.peak_in_use, 12288);
    assert_eq!(s.pressure_releases, 0);
    assert_consistent(&s);
    assert!(s.to_string().contains("peak 12288"), "{s}");
}

#[test]
fn unpooled_and_naive_return_every_free_to_the_system() {
    for kind in [PoolType::Naive, PoolType::Unpooled] {
        let m = manager(kind);
        let a = m.allocate(1000).unwrap();
        let expect = if kind == PoolType::Naive { 1000 } else { 4096 };
        assert_eq!(a.rounded_size(), expect);
        m.free(a).unwrap();
        let s = m.stats();
        assert_eq!(
            (s.in_use, s.cached, s.released_bytes),
            (0, 0, expect as u64)
        );
        assert_eq!(m.release_all(), 0);
        assert_consistent(&s);
    }
}

#[test]
fn memory_is_writable_through_the_handle() {
    let m = manager(PoolType::Round);
    let mut a = m.allocate(3000).unwrap();
    for (i, byte) in a.as_uninit_mut().iter_mut().enumerate() {
        byte.write(i as u8);
    }
    // SAFETY: every byte was written just above; `a` is not shared.
    let bytes = unsafe { a.as_mut_slice() };
    bytes[0] = 255;
    // SAFETY: as above.
    let bytes = unsafe { a.as_slice() };
    assert_eq!(bytes.len(), 3000);
    assert_eq!(
        (bytes[0], bytes[1], bytes[2999]),
        (255, 1, (2999 % 256) as u8)
    );
    // Handles cross threads (a deletion op frees on a worker).
    let m2 = Arc::clone(&m);
    std::thread::spawn(move || m2.free(a).unwrap())
        .join()
        .unwrap();
    assert_eq!(m.stats().in_use, 0);
}

#[test]
fn one_manager_per_context() {
    let storages = Storages::new(StorageConfig::default());
    let cpu = storages.get(DeviceId::cpu(0));
    assert!(Arc::ptr_eq(&cpu, &storages.get(DeviceId::cpu(0))));
    let gpu = storages.get(DeviceId::gpu(1));
    assert!(!Arc::ptr_eq(&cpu, &gpu));
    assert_eq!(gpu.context(), DeviceId::gpu(1));
    assert!(storages.existing(DeviceId::gpu(7)).is_none());

    let a = storages.allocate(10, DeviceId::gpu(1)).unwrap();
    assert_eq!(a.context(), DeviceId::gpu(1));
    let b = storages.allocate(10, DeviceId::cpu(0)).unwrap();
    storages.free(a).unwrap();
    storages.free_direct(b).unwrap();
    assert_eq!(storages.stats(DeviceId::gpu(1)).unwrap().cached, 4096);
    assert_eq!(storages.stats(DeviceId::cpu(0)).unwrap().cached, 0);
    assert_eq!(storages.release_all(), 4096);

    // An allocation of another front is refused and handed back.
    let other = Storages::new(StorageConfig::default());
    let c = other.allocate(10, DeviceId::cpu(0)).unwrap();
    let c = storages.free(c).unwrap_err().into_allocation();
    let d = other.allocate(10, DeviceId::cpu(3)).unwrap();
    let d = storages.free(d).unwrap_err().into_allocation();
    other.free(c).unwrap();
    other.free(d).unwrap();
}

#[test]
fn the_global_front_reads_the_environment_once() {
    // The test environment does not set DEPENGINE_STORAGE_*; whatever it is,
    // two calls give the same front.
    if let Ok(g) = Storages::global() {
        assert!(std::ptr::eq(g, Storages::global().unwrap()));
    }
}

// ---------------------------------------------------------------- out of memory

fn limited(kind: PoolType, limit: usize, reserve: u32) -> Arc<dyn Storage> {
    StorageConfig::builder()
        .pool_type(kind)
        .limit_bytes(Some(limit))
        .reserve_percent(reserve)
        .build()
        .unwrap()
        .create(DeviceId::cpu(0))
}

#[test]
fn past_the_limit_the_cache_is_drained_first_then_an_error_names_the_figures() {
    const PAGE: usize = 4096;
    let m = limited(PoolType::Exact, 16 * PAGE, 0);
    let mut live: Vec<_> = (0..8).map(|_| m.allocate(PAGE).unwrap()).collect();
    for a in live.drain(4..) {
        m.free(a).unwrap();
    }
    assert_eq!((m.stats().in_use, m.stats().cached), (4 * PAGE, 4 * PAGE));

    // 10 pages fit only once the 4 cached pages are gone.
    let big = m.allocate(10 * PAGE).unwrap();
    let s = m.stats();
    assert_eq!((s.in_use, s.cached), (14 * PAGE, 0), "{s}");
    assert_eq!(s.released_bytes, 4 * PAGE as u64);
    assert_eq!(s.pressure_releases, 1);

    // 4 more pages do not fit at all.
    let err = m.allocate(3 * PAGE + 1).unwrap_err();
    let msg = err.to_string();
    match err {
        StorageError::OutOfMemory {
            asked,
            rounded,
            in_use,
            cached,
            limit,
            ctx,
        } => {
            assert_eq!(
                (asked, rounded, in_use, cached),
                (3 * PAGE + 1, 4 * PAGE, 14 * PAGE, 0)
            );
            assert_eq!(limit, Some(16 * PAGE));
            assert_eq!(ctx, DeviceId::cpu(0));
        }
        other => panic!("unexpected error {other:?}"),
    }
    for needle in [
        "out of memory on cpu(0)",
        "asked for 12289 bytes",
        "57344 bytes held in use",
        "0 bytes cached",
        "limit 65536",
    ] {
        assert!(msg.contains(needle), "{needle:?} not in {msg}");
    }
    assert_eq!(m.stats().failures, 1);

    // The manager stays usable: free, and the same request succeeds.
    m.free(big).unwrap();
    let again = m.allocate(3 * PAGE + 1).unwrap();
    m.free(again).unwrap();
    for a in live {
        m.free(a).unwrap();
    }
    let s = m.stats();
    assert_eq!(s.in_use, 0);
    assert!(s.held() <= 16 * PAGE);
    assert_consistent(&s);
}

#[test]
fn the_reserve_releases_the_cache_before_the_limit_is_reached() {
    const PAGE: usize = 4096;
    // Limit 100 pages, reserve 10 %: past 90 pages held, the cache goes.
    let m = limited(PoolType::Exact, 100 * PAGE, 10);
    let a = m.allocate(70 * PAGE).unwrap();
    let b = m.allocate(20 * PAGE).unwrap();
    m.free(b).unwrap();
    assert_eq!(m.stats().cached, 20 * PAGE);
    // 1 page more would hold 91 pages: the cache is released first.
    let c = m.allocate(PAGE).unwrap();
    let s = m.stats();
    assert_eq!((s.in_use, s.cached, s.pressure_releases), (71 * PAGE, 0, 1));
    m.free(a).unwrap();
    m.free(c).unwrap();
}

#[test]
fn every_kind_obeys_the_limit_and_recovers() {
    for kind in ALL {
        let m = limited(kind, 1 << 20, 0);
        let a = m.allocate(768 << 10).unwrap();
        let err = m.allocate(512 << 10).unwrap_err();
        assert!(matches!(err, StorageError::OutOfMemory { .. }), "{kind:?}");
        m.free(a).unwrap();
        let b = m.allocate(512 << 10).unwrap();
        m.free(b).unwrap();
        let s = m.stats();
        assert_eq!((s.in_use, s.failures), (0, 1), "{kind:?}: {s}");
    }
}

#[test]
fn a_request_the_system_refuses_is_an_error_not_an_abort() {
    for kind in ALL {
        let m = manager(kind);
        let keep = m.allocate(4096).unwrap();
        // 1 PiB: more than any 48-bit address space holds.
        let err = m.allocate(1 << 50).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, StorageError::OutOfMemory { limit: None, .. }),
            "{err:?}"
        );
        assert!(msg.contains("asked for 1125899906842624 bytes"), "{msg}");
        // Too large to describe at all.
        let err = m.allocate(usize::MAX - 10).unwrap_err();
        assert!(matches!(err, StorageError::TooLarge { .. }), "{err:?}");
        assert!(err.to_string().contains("cannot allocate"), "{err}");
        // Still usable.
        m.free(keep).unwrap();
        let a = m.allocate(100).unwrap();
        m.free(a).unwrap();
    }
}

#[test]
fn an_owned_allocation_goes_back_to_the_pool_when_dropped() {
    use depengine::storage::OwnedAllocation;
    let m = manager(PoolType::Exact);
    let p = {
        let mut scratch = OwnedAllocation::new(Arc::clone(&m), 5000).unwrap();
        scratch.fill(3);
        assert_eq!(scratch.rounded_size(), 8192);
        assert!(Arc::ptr_eq(scratch.storage(), &m));
        scratch.as_ptr()
    };
    let s = m.stats();
    assert_eq!((s.in_use, s.cached), (0, 8192));
    // Taken apart, it is no longer freed on drop.
    let owned = OwnedAllocation::new(Arc::clone(&m), 8000).unwrap();
    assert_eq!(owned.as_ptr(), p);
    let (storage, a) = owned.into_parts();
    assert_eq!(m.stats().in_use, 8192);
    storage.free(a).unwrap();
    assert_eq!(m.stats().in_use, 0);
    // Across threads, as a deletion op would.
    let owned = OwnedAllocation::new(Arc::clone(&m), 10).unwrap();
    std::thread::spawn(move || drop(owned)).join().unwrap();
    assert_eq!(m.stats().in_use, 0);
}
