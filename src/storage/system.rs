//! The system side shared by every manager: aligned allocation through
//! `std::alloc`, the limit and reserve, and the release-and-retry protocol.
//!
//! # Out-of-memory protocol
//!
//! A manager asks [`System::obtain`] for a block when its cache cannot serve
//! a request. Then:
//!
//! 1. if a limit is set and the new block would leave less than the reserve
//!    (`reserve_percent` of the limit) unheld, the cache is released first;
//! 2. the block is reserved against the limit (a compare-and-swap on the
//!    bytes held, so concurrent requests never pass the limit together) and
//!    taken from `std::alloc::alloc`, which reports failure by returning null
//!    rather than aborting;
//! 3. when the limit or the system refuses, the cache is released and the
//!    request retried once;
//! 4. when that fails too, the request returns
//!    [`StorageError::OutOfMemory`] naming the bytes asked, in use and
//!    cached. Nothing is left half-done: the manager stays usable.
//!
//! Bookkeeping never aborts either: the pools grow their free lists with
//! `try_reserve` and hand a block straight back to the system when that
//! fails.

use crate::sync::unmodelled::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::alloc::{self, Layout};
use std::ptr::NonNull;

use crate::sync::CachePadded;

use super::stats::Counters;
use super::{Allocation, DeviceId, FreeError, StorageConfig, StorageError};

/// Source of the owner ids that tie an allocation to its manager.
static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

/// What a manager can give back to the system under memory pressure.
pub(crate) trait Cache {
    /// Returns every cached block to the system; the bytes released.
    fn release(&self) -> usize;
    /// Bytes cached now.
    fn cached(&self) -> usize;
}

/// The cache of a manager that keeps none.
pub(crate) struct NoCache;

impl Cache for NoCache {
    fn release(&self) -> usize {
        0
    }
    fn cached(&self) -> usize {
        0
    }
}

/// System allocation, limit accounting and statistics of one manager.
#[derive(Debug)]
pub(crate) struct System {
    ctx: DeviceId,
    owner: u64,
    align: usize,
    limit: Option<usize>,
    /// `limit` less the reserve: past this, the cache is released first.
    soft_limit: Option<usize>,
    /// Bytes obtained from the system and not returned (`in_use + cached`);
    /// kept only when a limit is set, which is the only reader.
    held: CachePadded<AtomicUsize>,
    pub(crate) counters: Counters,
}

impl System {
    pub(crate) fn new(ctx: DeviceId, config: &StorageConfig) -> Self {
        let limit = config.limit_bytes();
        let soft_limit = limit.map(|l| {
            let reserve = (l as u128 * u128::from(config.reserve_percent()) / 100) as usize;
            l - reserve
        });
        Self {
            ctx,
            owner: NEXT_OWNER.fetch_add(1, Relaxed),
            align: config.alignment(),
            limit,
            soft_limit,
            held: CachePadded::new(AtomicUsize::new(0)),
            counters: Counters::default(),
        }
    }

    pub(crate) fn ctx(&self) -> DeviceId {
        self.ctx
    }

    pub(crate) fn align(&self) -> usize {
        self.align
    }

    /// Whether `allocation` was made by this manager.
    pub(crate) fn owns(&self, allocation: &Allocation) -> bool {
        allocation.owner() == self.owner
    }

    /// Wraps a block of this manager into an allocation.
    pub(crate) fn allocation(&self, ptr: NonNull<u8>, size: usize, rounded: usize) -> Allocation {
        Allocation::new(ptr, size, rounded, self.ctx, self.owner)
    }

    /// The allocation of a size-0 request: a dangling, aligned pointer that is
    /// never passed to the deallocator.
    pub(crate) fn empty(&self) -> Allocation {
        self.counters.zero_sized();
        let ptr = NonNull::new(std::ptr::without_provenance_mut::<u8>(self.align))
            .unwrap_or(NonNull::dangling());
        self.allocation(ptr, 0, 0)
    }

    /// The layout of a block of `rounded` bytes, or the error for a request
    /// of `asked` bytes that cannot have one.
    pub(crate) fn layout(&self, asked: usize, rounded: usize) -> Result<Layout, StorageError> {
        Layout::from_size_align(rounded, self.align).map_err(|_| StorageError::TooLarge {
            ctx: self.ctx,
            asked,
            align: self.align,
        })
    }

    /// Rounds `size` with `round`, checking that the block can be described.
    pub(crate) fn round(
        &self,
        size: usize,
        round: impl FnOnce(usize) -> Option<usize>,
    ) -> Result<usize, StorageError> {
        let rounded = round(size).ok_or(StorageError::TooLarge {
            ctx: self.ctx,
            asked: size,
            align: self.align,
        })?;
        self.layout(size, rounded)?;
        Ok(rounded)
    }

    /// A new block of `rounded` (> 0) bytes from the system, following the
    /// out-of-memory protocol of the module notes.
    pub(crate) fn obtain(
        &self,
        asked: usize,
        rounded: usize,
        cache: &dyn Cache,
    ) -> Result<NonNull<u8>, StorageError> {
        debug_assert!(rounded > 0);
        let layout = self.layout(asked, rounded)?;
        if self.near_limit(rounded) && cache.release() > 0 {
            self.counters.pressure_release();
        }
        if let Some(ptr) = self.try_alloc(layout) {
            return Ok(ptr);
        }
        if cache.release() > 0 {
            self.counters.pressure_release();
        }
        if let Some(ptr) = self.try_alloc(layout) {
            return Ok(ptr);
        }
        self.counters.failure();
        Err(StorageError::OutOfMemory {
            ctx: self.ctx,
            asked,
            rounded,
            in_use: self.counters.in_use(),
            cached: cache.cached(),
            limit: self.limit,
        })
    }

    fn near_limit(&self, rounded: usize) -> bool {
        match self.soft_limit {
            Some(soft) => self.held.load(Relaxed).saturating_add(rounded) > soft,
            None => false,
        }
    }

    /// Reserves `layout.size()` against the limit, then asks the system.
    fn try_alloc(&self, layout: Layout) -> Option<NonNull<u8>> {
        let bytes = layout.size();
        if let Some(limit) = self.limit {
            // Relaxed suffices: `held` publishes no memory, and the CAS alone
            // makes concurrent reservations add up.
            self.held
                .fetch_update(Relaxed, Relaxed, |h| {
                    h.checked_add(bytes).filter(|&n| n <= limit)
                })
                .ok()?;
        }
        // SAFETY: `layout` has a non-zero size (callers serve size 0 without
        // the system) and a valid power-of-two alignment.
        let ptr = NonNull::new(unsafe { alloc::alloc(layout) });
        match ptr {
            Some(ptr) => {
                self.counters.system_allocated(bytes);
                Some(ptr)
            }
            None => {
                if self.limit.is_some() {
                    self.held.fetch_sub(bytes, Relaxed);
                }
                None
            }
        }
    }

    /// Returns a block to the system.
    ///
    /// # Safety
    ///
    /// `ptr` must be a block of `rounded` (> 0) bytes obtained from
    /// [`obtain`](Self::obtain) of this `System`, not returned since, and not
    /// used after this call.
    pub(crate) unsafe fn dealloc(&self, ptr: NonNull<u8>, rounded: usize) {
        debug_assert!(rounded > 0);
        // SAFETY: `obtain` allocated the block with exactly this size and
        // alignment, and checked that they form a valid layout then; neither
        // has changed.
        let layout = unsafe { Layout::from_size_align_unchecked(rounded, self.align) };
        // SAFETY: by the caller's promise the block came from `alloc::alloc`
        // with `layout` and is freed once.
        unsafe { alloc::dealloc(ptr.as_ptr(), layout) };
        if self.limit.is_some() {
            self.held.fetch_sub(rounded, Relaxed);
        }
        self.counters.system_released(rounded);
    }

    /// Returns an allocation's block straight to the system (no pool): the
    /// free path of the naive manager and the pool's `free_direct`.
    ///
    /// # Errors
    ///
    /// [`FreeError`] handing the allocation back when this system did not
    /// make it.
    pub(crate) fn free_to_system(&self, allocation: Allocation) -> Result<(), FreeError> {
        if !self.owns(&allocation) {
            return Err(FreeError::new(allocation, self.ctx()));
        }
        let rounded = allocation.rounded_size();
        if rounded == 0 {
            return Ok(());
        }
        self.counters.returned(rounded);
        // SAFETY: the allocation, consumed here, owned this block of
        // `rounded` bytes from `obtain` of this system; it is freed once.
        unsafe { self.dealloc(allocation.as_non_null(), rounded) };
        Ok(())
    }
}
