//! Many threads allocate, write, check and free through one manager, handing
//! allocations to each other; a canary in every live block proves that no
//! two live allocations ever share memory, and at the end every byte is
//! accounted for.
//!
//! Bounded operation counts and fixed seeds: the run is the same every time
//! up to thread interleaving, and takes well under a second.

use std::sync::{Arc, Barrier, Mutex};

use depengine::storage::{
    Allocation, DeviceId, PoolType, Storage, StorageConfig, StorageError, StorageStats,
};
use depengine::util::rng::SplitMix64;

const THREADS: u64 = 8;
const OPS: usize = 3000;
const MAX_LIVE: usize = 24;
const SEED: u64 = 0x5EED_0003;

/// A live allocation and the canary written into it.
struct Live {
    alloc: Allocation,
    id: u64,
    fill: u8,
}

/// The canary: an 8-byte id (never eight equal bytes) at the start, then a
/// fill byte. A block that overlapped another live block would have part of
/// its canary overwritten by the other's.
fn write_canary(alloc: &mut Allocation, id: u64) -> u8 {
    let fill = (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8;
    alloc.fill(fill);
    if alloc.size() >= 8 {
        // SAFETY: the block holds at least 8 bytes and `alloc` is borrowed
        // mutably, so nothing else writes it; `write_unaligned` has no
        // alignment demand (the block is 64-aligned anyway).
        unsafe { alloc.as_ptr().cast::<u64>().write_unaligned(id) };
    }
    fill
}

fn check_canary(live: &Live) {
    let size = live.alloc.size();
    // SAFETY: `write_canary` initialised all `size` bytes, and the canary's
    // owner is the only thread that can reach the block.
    let bytes = unsafe { live.alloc.as_slice() };
    let body = if size >= 8 {
        let head = u64::from_ne_bytes(bytes[..8].try_into().unwrap());
        assert_eq!(head, live.id, "canary id overwritten: {:?}", live.alloc);
        &bytes[8..]
    } else {
        bytes
    };
    // All bytes equal `fill`: the first is, and each equals the next
    // (one memcmp, fast in debug builds too).
    let ok = body.is_empty() || (body[0] == live.fill && body[1..] == body[..body.len() - 1]);
    assert!(ok, "canary fill overwritten: {:?}", live.alloc);
}

/// Mostly small blocks, some medium, a few large; some of size 0.
fn draw_size(rng: &mut SplitMix64) -> usize {
    match rng.below(100) {
        0..=2 => 0,
        3..=69 => rng.range_inclusive(1, 8192) as usize,
        70..=94 => rng.range_inclusive(8193, 64 << 10) as usize,
        _ => rng.range_inclusive((64 << 10) + 1, 256 << 10) as usize,
    }
}

#[derive(Default, Debug, Clone, Copy)]
struct Tally {
    served: u64,
    zero: u64,
    failed: u64,
}

fn stress(storage: Arc<dyn Storage>, seed: u64) -> Tally {
    let exchange: Mutex<Vec<Live>> = Mutex::new(Vec::new());
    let barrier = Barrier::new(THREADS as usize);
    let tallies: Vec<Tally> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let storage = &storage;
                let exchange = &exchange;
                let barrier = &barrier;
                s.spawn(move || {
                    let mut rng =
                        SplitMix64::new(seed ^ (t + 1).wrapping_mul(0xA24B_AED4_963E_E407));
                    let mut live: Vec<Live> = Vec::new();
                    let mut tally = Tally::default();
                    let release = |l: Live, direct: bool| {
                        check_canary(&l);
                        if direct {
                            storage.free_direct(l.alloc).unwrap();
                        } else {
                            storage.free(l.alloc).unwrap();
                        }
                    };
                    barrier.wait();
                    for seq in 0..OPS as u64 {
                        let r = rng.below(100);
                        if r < 50 || live.is_empty() {
                            if live.len() >= MAX_LIVE {
                                let i = rng.below(live.len() as u64) as usize;
                                release(live.swap_remove(i), false);
                            }
                            let size = draw_size(&mut rng);
                            match storage.allocate(size) {
                                Ok(mut alloc) => {
                                    if size == 0 {
                                        tally.zero += 1;
                                    } else {
                                        tally.served += 1;
                                    }
                                    let id = 0xC300_0000_0000_0000 | (t << 32) | seq;
                                    let fill = write_canary(&mut alloc, id);
                                    live.push(Live { alloc, id, fill });
                                }
                                Err(StorageError::OutOfMemory { .. }) => tally.failed += 1,
                                Err(e) => panic!("unexpected error: {e}"),
                            }
                        } else if r < 82 {
                            let i = rng.below(live.len() as u64) as usize;
                            release(live.swap_remove(i), r < 40);
                        } else if r < 92 {
                            let i = rng.below(live.len() as u64) as usize;
                            exchange.lock().unwrap().push(live.swap_remove(i));
                        } else if r < 99 {
                            let taken = exchange.lock().unwrap().pop();
                            if let Some(l) = taken {
                                release(l, false);
                            }
                        } else if t == 0 {
                            storage.release_all();
                        }
                    }
                    for l in live {
                        release(l, false);
                    }
                    tally
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for l in exchange.into_inner().unwrap() {
        check_canary(&l);
        storage.free(l.alloc).unwrap();
    }
    tallies.iter().fold(Tally::default(), |a, t| Tally {
        served: a.served + t.served,
        zero: a.zero + t.zero,
        failed: a.failed + t.failed,
    })
}

fn assert_accounted(kind: PoolType, s: &StorageStats, tally: Tally) {
    assert_eq!(s.in_use, 0, "{kind:?}: {s}");
    assert_eq!(
        s.cached as u64 + s.released_bytes,
        s.allocated_bytes,
        "{kind:?}: cached + released = allocated: {s}"
    );
    assert_eq!(s.served(), tally.served, "{kind:?}: {s}");
    assert_eq!(s.zero_sized, tally.zero, "{kind:?}: {s}");
    assert_eq!(s.failures, tally.failed, "{kind:?}: {s}");
}

#[test]
fn many_threads_never_share_a_live_block_and_every_byte_is_accounted_for() {
    for (i, kind) in [
        PoolType::Exact,
        PoolType::Round,
        PoolType::Naive,
        PoolType::Unpooled,
    ]
    .into_iter()
    .enumerate()
    {
        let storage = StorageConfig::builder()
            .pool_type(kind)
            .build()
            .unwrap()
            .create(DeviceId::cpu(0));
        let tally = stress(Arc::clone(&storage), SEED + i as u64);
        let s = storage.stats();
        assert_accounted(kind, &s, tally);
        assert_eq!(tally.failed, 0, "{kind:?}: no limit, no failure");
        if matches!(kind, PoolType::Exact | PoolType::Round) {
            assert!(s.from_pool > 0, "{kind:?} reused nothing: {s}");
        } else {
            assert_eq!(s.cached, 0);
        }
        storage.release_all();
        let s = storage.stats();
        assert_eq!(s.released_bytes, s.allocated_bytes, "{kind:?}: {s}");
    }
}

#[test]
fn many_threads_under_a_tight_limit_fail_cleanly_and_never_pass_it() {
    const LIMIT: usize = 2 << 20;
    for (i, kind) in [PoolType::Exact, PoolType::Round, PoolType::Naive]
        .into_iter()
        .enumerate()
    {
        let storage = StorageConfig::builder()
            .pool_type(kind)
            .limit_bytes(Some(LIMIT))
            .build()
            .unwrap()
            .create(DeviceId::cpu(0));
        let tally = stress(Arc::clone(&storage), SEED + 100 + i as u64);
        let s = storage.stats();
        assert_accounted(kind, &s, tally);
        assert!(s.peak_in_use <= LIMIT, "{kind:?}: {s}");
        assert!(s.held() <= LIMIT, "{kind:?}: {s}");
        assert!(
            tally.failed > 0,
            "{kind:?}: the limit was never reached: {s}"
        );
        // Usable after the failures.
        let a = storage.allocate(LIMIT / 2).unwrap();
        storage.free(a).unwrap();
    }
}
