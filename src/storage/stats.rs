//! Statistics of a storage manager.
//!
//! Every counter is updated with `Relaxed` atomics (or under a pool shard's
//! lock): they are figures for people and tests, and no memory is published
//! through them. A snapshot taken while other threads allocate may mix
//! moments; once the manager is quiescent it is exact, and then
//!
//! * `held() == in_use + cached`, and
//! * `allocated_bytes == held() + released_bytes`.

use crate::sync::unmodelled::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::fmt;

use crate::sync::CachePadded;

/// A snapshot of one manager's statistics.
///
/// All byte figures count blocks (the rounded sizes), not the sizes asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StorageStats {
    /// Bytes handed out and not yet freed.
    pub in_use: usize,
    /// Bytes freed by their users and kept in the pool for reuse.
    pub cached: usize,
    /// The largest `in_use` seen since the manager was made.
    pub peak_in_use: usize,
    /// Bytes obtained from the system since the manager was made.
    pub allocated_bytes: u64,
    /// Bytes returned to the system since the manager was made.
    pub released_bytes: u64,
    /// Allocations served from the pool's cache.
    pub from_pool: u64,
    /// Allocations served by the system allocator.
    pub from_system: u64,
    /// Allocations of size 0 (they hold no memory).
    pub zero_sized: u64,
    /// Times the cache was released because a limit was near or the system
    /// refused (explicit [`release_all`](super::Storage::release_all) calls
    /// are not counted).
    pub pressure_releases: u64,
    /// Allocations that failed with an out-of-memory error.
    pub failures: u64,
}

impl StorageStats {
    /// Bytes obtained from the system and not yet returned: `in_use + cached`.
    pub fn held(&self) -> usize {
        self.in_use + self.cached
    }

    /// Allocations served, from the pool or the system (size 0 excluded).
    pub fn served(&self) -> u64 {
        self.from_pool + self.from_system
    }
}

impl fmt::Display for StorageStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "in use {} B (peak {} B), cached {} B, allocated {} B, released {} B, \
             served {} from pool / {} from system, {} zero-sized, {} pressure releases, \
             {} failures",
            self.in_use,
            self.peak_in_use,
            self.cached,
            self.allocated_bytes,
            self.released_bytes,
            self.from_pool,
            self.from_system,
            self.zero_sized,
            self.pressure_releases,
            self.failures
        )
    }
}

/// Bytes in use and their peak: touched on every allocation and free, so they
/// share one cache line and nothing else does.
#[derive(Debug, Default)]
struct InUse {
    bytes: AtomicUsize,
    peak: AtomicUsize,
}

/// Counters touched only on the system path (rare for a warm pool).
#[derive(Debug, Default)]
struct SystemCounters {
    allocated: AtomicU64,
    released: AtomicU64,
    from_system: AtomicU64,
    zero_sized: AtomicU64,
    pressure_releases: AtomicU64,
    failures: AtomicU64,
}

/// The counters a manager keeps; the pool's hit count and cached bytes live
/// in its shards and are added by the manager when it takes a snapshot.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    in_use: CachePadded<InUse>,
    system: CachePadded<SystemCounters>,
}

impl Counters {
    /// `bytes` were handed out.
    pub(crate) fn acquired(&self, bytes: usize) {
        let now = self.in_use.bytes.fetch_add(bytes, Relaxed) + bytes;
        // Read first: the RMW on `peak` is only needed when a new peak is set.
        if now > self.in_use.peak.load(Relaxed) {
            self.in_use.peak.fetch_max(now, Relaxed);
        }
    }

    /// `bytes` came back from their user.
    pub(crate) fn returned(&self, bytes: usize) {
        self.in_use.bytes.fetch_sub(bytes, Relaxed);
    }

    pub(crate) fn in_use(&self) -> usize {
        self.in_use.bytes.load(Relaxed)
    }

    pub(crate) fn system_allocated(&self, bytes: usize) {
        self.system.allocated.fetch_add(bytes as u64, Relaxed);
        self.system.from_system.fetch_add(1, Relaxed);
    }

    pub(crate) fn system_released(&self, bytes: usize) {
        self.system.released.fetch_add(bytes as u64, Relaxed);
    }

    pub(crate) fn zero_sized(&self) {
        self.system.zero_sized.fetch_add(1, Relaxed);
    }

    pub(crate) fn pressure_release(&self) {
        self.system.pressure_releases.fetch_add(1, Relaxed);
    }

    pub(crate) fn failure(&self) {
        self.system.failures.fetch_add(1, Relaxed);
    }

    /// A snapshot, with the pool's figures filled in by the caller.
    pub(crate) fn snapshot(&self, cached: usize, from_pool: u64) -> StorageStats {
        StorageStats {
            in_use: self.in_use.bytes.load(Relaxed),
            cached,
            peak_in_use: self.in_use.peak.load(Relaxed),
            allocated_bytes: self.system.allocated.load(Relaxed),
            released_bytes: self.system.released.load(Relaxed),
            from_pool,
            from_system: self.system.from_system.load(Relaxed),
            zero_sized: self.system.zero_sized.load(Relaxed),
            pressure_releases: self.system.pressure_releases.load(Relaxed),
            failures: self.system.failures.load(Relaxed),
        }
    }
}
