//! Pooled managers: a free list per block size, in lock-striped shards.
//!
//! One type serves both pool flavours of MXNet; they differ only in their
//! [`Rounding`]:
//!
//! * **exact size** ([`PoolType::Exact`]): sizes rounded up to a page, above
//!   the large-size threshold to multiples of it; a free block is reused only
//!   for a request of exactly its rounded size;
//! * **round** ([`PoolType::Round`]): powers of two up to the linear cutoff,
//!   multiples of the cutoff above it, so nearby sizes share a bucket.
//!
//! # Locking
//!
//! MXNet guards its whole pool with one mutex. Here the free lists are split
//! over [`SHARDS`] shards, each behind its own lock and on its own cache line;
//! a block size always maps to the same shard. Every power-of-two bucket gets
//! a shard of its own (shard = log2 of the size), other sizes are spread by a
//! hash. Threads that allocate different sizes therefore rarely meet on a
//! lock; the only state every allocation touches is the in-use counter (one
//! relaxed atomic add, see [`stats`](super::stats)).
//!
//! A shard's lock is held only to push or pop a pointer (and to take the
//! whole shard's lists when releasing); the system allocator is never called
//! under it.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ptr::NonNull;

use crate::sync::unmodelled::Mutex;
use crate::sync::CachePadded;

use super::rounding::Rounding;
use super::stats::StorageStats;
use super::system::{Cache, System};
use super::{Allocation, DeviceId, FreeError, PoolType, Storage, StorageConfig, StorageError};

/// Number of lock shards of a pool (a power of two, at least 64 so that every
/// power-of-two bucket has its own).
pub(crate) const SHARDS: usize = 64;

/// A cached block: the pool is its only owner.
struct Block(NonNull<u8>);

// SAFETY: a cached block is owned by the pool alone (no allocation refers to
// it), and is plain memory with no thread affinity.
unsafe impl Send for Block {}

/// A hasher for block sizes: page multiples have all-zero low bits, so the
/// size is mixed (SplitMix64's finaliser) before hashbrown uses it.
#[derive(Default)]
struct SizeHasher(u64);

impl Hasher for SizeHasher {
    fn finish(&self) -> u64 {
        mix(self.0)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = n as u64;
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[derive(Default)]
struct Shard {
    lists: HashMap<usize, Vec<Block>, BuildHasherDefault<SizeHasher>>,
    /// Bytes in `lists`.
    cached: usize,
    /// Allocations this shard served.
    hits: u64,
}

/// The shard of a block size: its own for a power of two, hashed otherwise.
pub(crate) fn shard_of(rounded: usize) -> usize {
    if rounded.is_power_of_two() {
        rounded.trailing_zeros() as usize % SHARDS
    } else {
        (mix(rounded as u64) as usize) % SHARDS
    }
}

/// The free lists of a pooled manager.
struct FreeLists {
    shards: Box<[CachePadded<Mutex<Shard>>]>,
}

impl FreeLists {
    fn new() -> Self {
        Self {
            shards: (0..SHARDS)
                .map(|_| CachePadded::new(Mutex::new(Shard::default())))
                .collect(),
        }
    }

    fn pop(&self, rounded: usize) -> Option<NonNull<u8>> {
        let mut shard = self.shards[shard_of(rounded)].lock();
        let block = shard.lists.get_mut(&rounded)?.pop()?;
        shard.cached -= rounded;
        shard.hits += 1;
        Some(block.0)
    }

    /// Caches a block; hands it back when the free list cannot grow.
    fn push(&self, ptr: NonNull<u8>, rounded: usize) -> Result<(), NonNull<u8>> {
        let mut shard = self.shards[shard_of(rounded)].lock();
        let shard = &mut *shard;
        if !shard.lists.contains_key(&rounded) && shard.lists.try_reserve(1).is_err() {
            return Err(ptr);
        }
        let list = shard.lists.entry(rounded).or_default();
        if list.try_reserve(1).is_err() {
            return Err(ptr);
        }
        list.push(Block(ptr));
        shard.cached += rounded;
        Ok(())
    }

    /// Takes every cached block out, shard by shard, and hands each to `f`
    /// outside the shard's lock; returns the bytes taken.
    fn drain(&self, mut f: impl FnMut(NonNull<u8>, usize)) -> usize {
        let mut total = 0;
        for shard in self.shards.iter() {
            let lists = {
                let mut shard = shard.lock();
                shard.cached = 0;
                std::mem::take(&mut shard.lists)
            };
            for (rounded, blocks) in lists {
                for block in blocks {
                    total += rounded;
                    f(block.0, rounded);
                }
            }
        }
        total
    }

    fn cached(&self) -> usize {
        self.shards.iter().map(|s| s.lock().cached).sum()
    }

    fn hits(&self) -> u64 {
        self.shards.iter().map(|s| s.lock().hits).sum()
    }
}

/// A pooled storage manager (exact-size or round, by its rounding).
///
/// Made by [`StorageConfig::create`] for [`PoolType::Exact`] and
/// [`PoolType::Round`], or directly with [`PooledStorage::exact`] and
/// [`PooledStorage::round`].
pub struct PooledStorage {
    kind: PoolType,
    rounding: Rounding,
    system: System,
    free: FreeLists,
}

impl PooledStorage {
    /// An exact-size pool ([`PoolType::Exact`]) for `ctx`: page size, large
    /// threshold, alignment and limit from `config`.
    pub fn exact(ctx: DeviceId, config: &StorageConfig) -> Self {
        Self::with_kind(ctx, PoolType::Exact, config)
    }

    /// A round pool ([`PoolType::Round`]) for `ctx`: page size, cutoff,
    /// alignment and limit from `config`.
    pub fn round(ctx: DeviceId, config: &StorageConfig) -> Self {
        Self::with_kind(ctx, PoolType::Round, config)
    }

    fn with_kind(ctx: DeviceId, kind: PoolType, config: &StorageConfig) -> Self {
        Self {
            kind,
            rounding: config.rounding_of(kind),
            system: System::new(ctx, config),
            free: FreeLists::new(),
        }
    }

    fn release_blocks(&self) -> usize {
        self.free.drain(|ptr, rounded| {
            // SAFETY: every cached block came from `self.system.obtain` with
            // its rounded size, and `drain` took it out of the pool, so it is
            // freed exactly once and nobody else refers to it.
            unsafe { self.system.dealloc(ptr, rounded) }
        })
    }
}

impl Cache for PooledStorage {
    fn release(&self) -> usize {
        self.release_blocks()
    }
    fn cached(&self) -> usize {
        self.free.cached()
    }
}

impl Storage for PooledStorage {
    fn context(&self) -> DeviceId {
        self.system.ctx()
    }

    fn pool_type(&self) -> PoolType {
        self.kind
    }

    fn rounding(&self) -> Rounding {
        self.rounding
    }

    fn alignment(&self) -> usize {
        self.system.align()
    }

    fn allocate(&self, size: usize) -> Result<Allocation, StorageError> {
        let rounded = self.system.round(size, |s| self.rounding.round(s))?;
        if rounded == 0 {
            return Ok(self.system.empty());
        }
        let ptr = match self.free.pop(rounded) {
            Some(ptr) => ptr,
            None => self.system.obtain(size, rounded, self)?,
        };
        self.system.counters.acquired(rounded);
        Ok(self.system.allocation(ptr, size, rounded))
    }

    fn free(&self, allocation: Allocation) -> Result<(), FreeError> {
        if !self.system.owns(&allocation) {
            return Err(FreeError::new(allocation, self.system.ctx()));
        }
        let rounded = allocation.rounded_size();
        if rounded == 0 {
            return Ok(());
        }
        let ptr = allocation.as_non_null();
        self.system.counters.returned(rounded);
        if let Err(ptr) = self.free.push(ptr, rounded) {
            // SAFETY: the allocation, consumed here, owned this block of
            // `rounded` bytes from `obtain`; the pool refused it, so it is
            // freed here once.
            unsafe { self.system.dealloc(ptr, rounded) };
        }
        Ok(())
    }

    fn free_direct(&self, allocation: Allocation) -> Result<(), FreeError> {
        self.system.free_to_system(allocation)
    }

    fn release_all(&self) -> usize {
        self.release_blocks()
    }

    fn stats(&self) -> StorageStats {
        self.system
            .counters
            .snapshot(self.free.cached(), self.free.hits())
    }
}

impl Drop for PooledStorage {
    fn drop(&mut self) {
        // Blocks still in use leak (their allocations may outlive the
        // manager only by a bug of their owner); cached ones go back.
        self.release_blocks();
    }
}

impl std::fmt::Debug for PooledStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PooledStorage")
            .field("ctx", &self.system.ctx())
            .field("kind", &self.kind)
            .field("rounding", &self.rounding)
            .field("stats", &self.stats())
            .finish()
    }
}
