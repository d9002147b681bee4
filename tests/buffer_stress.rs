//! Many threads push ops that write and read random tensors and drop them at
//! random moments (on the pushing thread, or inside an op), on every engine
//! kind. Checked:
//!
//! * no tensor is freed while an op that declared it is still running:
//!   "observer" ops declare a tensor's var but hold no handle (only its
//!   address), so only the deletion op's place in the var's queue keeps the
//!   memory alive for them; the storage under test poisons every block it is
//!   handed back, and the observers check a canary before and after their
//!   work;
//! * values equal a serial run: each pushing thread keeps a plain model of
//!   its tensors, updated in push order, and ops compare against snapshots of
//!   it; the shared accumulators, written by every thread in whatever order
//!   the engine picks, are compared with the sum of the models (their ops
//!   commute);
//! * every byte is accounted for: in use 0, cached + released = allocated,
//!   and exactly one free per tensor made.
//!
//! Bounded operation counts and fixed seeds; a run takes well under a second
//! in release builds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

use depengine::storage::rounding::Rounding;
use depengine::storage::{
    Allocation, DeviceId, FreeError, PoolType, Storage, StorageConfig, StorageError, StorageStats,
    Tensor,
};
use depengine::util::rng::SplitMix64;
use depengine::{Engine, EngineKind, OpDesc, OpError};

const PUSHERS: u64 = 4;
const STEPS: usize = 1000;
const SLOTS: usize = 6;
const SHARED: usize = 3;
const ACC_LEN: usize = 64;
const MAX_LEN: u64 = 512;
/// Every so many steps a pusher waits for all pushed work.
const SYNC_EVERY: usize = 250;
const SEED: u64 = 0x5EED_B0FF;
const POISON: u8 = 0xA5;

/// A manager that fills every block it is handed back with [`POISON`] before
/// passing it on, and counts frees: a premature free shows up as a broken
/// canary in a still-running op.
#[derive(Debug)]
struct Poisoning {
    inner: Arc<dyn Storage>,
    frees: AtomicU64,
}

impl Storage for Poisoning {
    fn context(&self) -> DeviceId {
        self.inner.context()
    }
    fn pool_type(&self) -> PoolType {
        self.inner.pool_type()
    }
    fn rounding(&self) -> Rounding {
        self.inner.rounding()
    }
    fn alignment(&self) -> usize {
        self.inner.alignment()
    }
    fn allocate(&self, size: usize) -> Result<Allocation, StorageError> {
        self.inner.allocate(size)
    }
    fn free(&self, mut allocation: Allocation) -> Result<(), FreeError> {
        allocation.fill(POISON);
        self.frees.fetch_add(1, Ordering::Relaxed);
        self.inner.free(allocation)
    }
    fn free_direct(&self, mut allocation: Allocation) -> Result<(), FreeError> {
        allocation.fill(POISON);
        self.frees.fetch_add(1, Ordering::Relaxed);
        self.inner.free_direct(allocation)
    }
    fn release_all(&self) -> usize {
        self.inner.release_all()
    }
    fn stats(&self) -> StorageStats {
        self.inner.stats()
    }
}

/// Element 0 of tensor `id`; the last element holds its complement. Ops
/// only ever write the elements in between.
fn canary(id: u64) -> u64 {
    id.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1
}

fn check_canary(values: &[u64], id: u64, op: &str) -> Result<(), OpError> {
    let (first, last) = (values[0], values[values.len() - 1]);
    if first != canary(id) || last != !canary(id) {
        return Err(OpError::msg(format!(
            "{op}: canary of tensor {id} broken ({first:#x}, {last:#x}): freed or reused under a running op"
        )));
    }
    Ok(())
}

/// The update ops apply, on the tensor and on the model alike.
fn update(dst: &mut [u64], src: &[u64], salt: u64) {
    let inner = src.len() - 2;
    let n = dst.len();
    for (k, d) in dst[1..n - 1].iter_mut().enumerate() {
        *d = d.wrapping_mul(3) ^ src[1 + k % inner].wrapping_add(salt);
    }
}

fn accumulate(acc: &mut [u64], src: &[u64]) {
    let inner = src.len() - 2;
    for (k, a) in acc.iter_mut().enumerate() {
        *a = a.wrapping_add(src[1 + k % inner]);
    }
}

fn checksum(values: &[u64]) -> u64 {
    values
        .iter()
        .fold(0u64, |h, &v| h.rotate_left(5).wrapping_add(v))
}

struct Slot {
    t: Tensor<u64>,
    model: Vec<u64>,
    id: u64,
}

struct Shared {
    engine: Engine,
    storage: Arc<dyn Storage>,
    acc: Vec<Tensor<u64>>,
    made: AtomicU64,
}

/// One pushing thread; returns its contributions to the accumulators.
fn pusher(sh: &Shared, thread: u64) -> Vec<Vec<u64>> {
    let e = &sh.engine;
    let mut rng = SplitMix64::new(SEED ^ thread.wrapping_mul(0xD1B5_4A32_D192_ED03));
    let mut slots: Vec<Option<Slot>> = (0..SLOTS).map(|_| None).collect();
    let mut contrib = vec![vec![0u64; ACC_LEN]; SHARED];

    for step in 0..STEPS {
        if step % SYNC_EVERY == SYNC_EVERY - 1 {
            // Let the engine catch up now and then, so that later tensors
            // reuse the blocks of dropped ones (pushing alone outpaces it).
            e.wait_for_all().unwrap();
        }
        let i = rng.below(SLOTS as u64) as usize;
        let Some(slot) = &slots[i] else {
            let len = rng.range_inclusive(2, MAX_LEN) as usize;
            let id = (thread << 32) | step as u64;
            let mut model: Vec<u64> = (0..len).map(|_| rng.next_u64()).collect();
            model[0] = canary(id);
            model[len - 1] = !canary(id);
            let t = Tensor::from_slice(e, &sh.storage, &model).unwrap();
            sh.made.fetch_add(1, Ordering::Relaxed);
            slots[i] = Some(Slot { t, model, id });
            continue;
        };
        // Ops borrow the vars they declare and move their own handles.
        let (t, id, var) = (slot.t.clone(), slot.id, slot.t.var().clone());
        match rng.below(100) {
            // dst[i] = f(dst[i], src[j]) with views.
            0..=34 => {
                let j = rng.below(SLOTS as u64) as usize;
                let src = match &slots[j] {
                    Some(s) if j != i => (s.t.clone(), s.id, s.model.clone()),
                    _ => continue,
                };
                let salt = step as u64;
                let (src_t, src_id, src_model) = src;
                let src_var = src_t.var().clone();
                let desc = OpDesc::new("update").reads(&src_var).writes(&var);
                e.push(desc, move |ctx| {
                    let s = src_t.read(ctx)?;
                    let mut d = t.write(ctx)?;
                    check_canary(&s, src_id, "update")?;
                    check_canary(&d, id, "update")?;
                    update(&mut d, &s, salt);
                    Ok(())
                })
                .unwrap();
                let slot = slots[i].as_mut().unwrap();
                update(&mut slot.model, &src_model, salt);
            }
            // An observer: declares the var, holds only the address.
            35..=54 => {
                let (addr, len) = (t.as_ptr() as usize, t.len());
                let expect = checksum(&slot.model);
                drop(t);
                e.push(OpDesc::new("observe").reads(&var), move |_| {
                    // SAFETY: this op declares a read of the tensor's var, so
                    // no op that writes it runs now; the tensor's deletion op
                    // writes the var and was pushed (if at all) after this
                    // op, so the block is neither written nor freed until this
                    // op completes. That ordering is what this test checks.
                    let values = unsafe { std::slice::from_raw_parts(addr as *const u64, len) };
                    check_canary(values, id, "observe (before)")?;
                    let sum = checksum(values);
                    check_canary(values, id, "observe (after)")?;
                    if sum != expect {
                        return Err(OpError::msg(format!(
                            "observe: tensor {id} differs from the serial model"
                        )));
                    }
                    Ok(())
                })
                .unwrap();
            }
            // Shared accumulator += src: commutes with the other threads'.
            55..=69 => {
                let a = rng.below(SHARED as u64) as usize;
                let acc = sh.acc[a].clone();
                let acc_var = acc.var().clone();
                accumulate(&mut contrib[a], &slot.model);
                let desc = OpDesc::new("accumulate").reads(&var).writes(&acc_var);
                e.push(desc, move |ctx| {
                    let s = t.read(ctx)?;
                    check_canary(&s, id, "accumulate")?;
                    accumulate(&mut acc.write(ctx)?, &s);
                    Ok(())
                })
                .unwrap();
            }
            // Compare with a snapshot of the model.
            70..=79 => {
                let expect = slot.model.clone();
                e.push(OpDesc::new("check").reads(&var), move |ctx| {
                    if *t.read(ctx)? != *expect {
                        return Err(OpError::msg(format!(
                            "check: tensor {id} differs from the serial model"
                        )));
                    }
                    Ok(())
                })
                .unwrap();
            }
            // Drop the last handle here, often with ops still pending on it.
            80..=91 => {
                drop(t);
                slots[i] = None;
            }
            // Hand the last handle to an op, which drops it when its body ends.
            _ => {
                slots[i] = None;
                e.push(OpDesc::new("last use").writes(&var), move |ctx| {
                    let mut d = t.write(ctx)?;
                    check_canary(&d, id, "last use")?;
                    d[1] = d[1].wrapping_add(1);
                    drop(d);
                    drop(t);
                    Ok(())
                })
                .unwrap();
            }
        }
    }
    contrib
}

fn run(kind: EngineKind, pool: PoolType) {
    let inner = StorageConfig::builder()
        .pool_type(pool)
        .build()
        .unwrap()
        .create(DeviceId::cpu(0));
    let poisoning = Arc::new(Poisoning {
        inner,
        frees: AtomicU64::new(0),
    });
    let storage: Arc<dyn Storage> = poisoning.clone();
    let engine = Engine::builder().kind(kind).cpu_workers(2).build().unwrap();
    let acc = (0..SHARED)
        .map(|_| Tensor::<u64>::new(&engine, &storage, ACC_LEN).unwrap())
        .collect();
    let shared = Arc::new(Shared {
        engine: engine.clone(),
        storage: storage.clone(),
        acc,
        made: AtomicU64::new(SHARED as u64),
    });

    let barrier = Arc::new(Barrier::new(PUSHERS as usize));
    let handles: Vec<_> = (0..PUSHERS)
        .map(|t| {
            let (sh, b) = (shared.clone(), barrier.clone());
            std::thread::spawn(move || {
                b.wait();
                pusher(&sh, t)
            })
        })
        .collect();
    let contribs: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    engine
        .wait_for_all()
        .unwrap_or_else(|e| panic!("{kind:?}/{pool:?}: {e}"));

    // The accumulators equal the sum of every thread's serial model.
    for (a, acc) in shared.acc.iter().enumerate() {
        let mut expect = vec![0u64; ACC_LEN];
        for c in &contribs {
            for (x, y) in expect.iter_mut().zip(&c[a]) {
                *x = x.wrapping_add(*y);
            }
        }
        assert_eq!(acc.to_vec().unwrap(), expect, "{kind:?}/{pool:?}: acc {a}");
    }

    let made = shared.made.load(Ordering::Relaxed);
    drop(shared);
    engine.wait_for_all().unwrap();
    let s = storage.stats();
    assert_eq!(s.in_use, 0, "{kind:?}/{pool:?}: {s}");
    assert_eq!(
        s.cached as u64 + s.released_bytes,
        s.allocated_bytes,
        "{kind:?}/{pool:?}: {s}"
    );
    assert_eq!(
        poisoning.frees.load(Ordering::Relaxed),
        made,
        "{kind:?}/{pool:?}: one free per tensor"
    );
    assert!(
        s.from_pool > 0,
        "{kind:?}/{pool:?}: the pool was reused: {s}"
    );
}

#[test]
fn threaded_pool_exact() {
    run(EngineKind::Pooled, PoolType::Exact);
}

#[test]
fn per_device_round() {
    run(EngineKind::PerDevice, PoolType::Round);
}

#[test]
fn naive_engine_exact() {
    run(EngineKind::Naive, PoolType::Exact);
}
