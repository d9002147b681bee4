//! Storage managers: naive, pooled (exact-size and round), unpooled.
//!
//! A [`Storage`] manager serves the memory of one device context
//! ([`DeviceId`]); [`Storages`] makes one per context, lazily, from one
//! [`StorageConfig`] (a builder, or the `DEPENGINE_STORAGE_*` environment
//! variables, see [`config`]). Managers hand out [`Allocation`]s: unique,
//! `Send` handles to aligned blocks, which go back by value through
//! [`Storage::free`] (into the pool) or [`Storage::free_direct`] (to the
//! system), or are wrapped in an [`OwnedAllocation`] that frees on drop.
//!
//! | kind | rounding | on free |
//! |---|---|---|
//! | [`PoolType::Naive`] | none | to the system |
//! | [`PoolType::Exact`] | page, then large-threshold multiples | cached; reused for the same rounded size |
//! | [`PoolType::Round`] | powers of two, then cutoff multiples | cached; reused for the same bucket |
//! | [`PoolType::Unpooled`] | as `Exact` | to the system |
//!
//! Allocation never aborts the process: past the limit, or when the system
//! refuses, a manager releases its cache, retries once, then returns
//! [`StorageError::OutOfMemory`] (see the protocol in `system.rs`).
//!
//! Managers are `Send + Sync` and meant to be shared behind `Arc`: a buffer's
//! deletion op may free an allocation on any thread, long after it was made.
//!
//! On top of the managers sit the engine-facing types: a [`Tensor`] (or
//! [`Buffer`], its untyped form) is an allocation plus an engine var, with
//! views checked against what the running op declared, and a deletion op
//! pushed when its last handle is dropped; a [`Workspace`] is scratch memory
//! from the pool for one running op.
//!
//! # Examples
//!
//! ```
//! use depengine::storage::{DeviceId, PoolType, StorageConfig};
//! let storage = StorageConfig::builder()
//!     .pool_type(PoolType::Exact)
//!     .build()?
//!     .create(DeviceId::cpu(0));
//! let mut a = storage.allocate(1000)?;
//! a.fill(7);
//! // SAFETY: `fill` initialised the bytes; nothing else can reach them.
//! assert!(unsafe { a.as_slice() }.iter().all(|&b| b == 7));
//! let p = a.as_ptr();
//! storage.free(a)?; // into the pool
//! let b = storage.allocate(4000)?; // same 4 KiB page: the same block
//! assert_eq!(b.as_ptr(), p);
//! storage.free(b)?;
//! assert_eq!(storage.stats().from_pool, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod allocation;
mod buffer;
pub mod config;
mod error;
mod naive;
mod owned;
mod pool;
mod registry;
pub mod rounding;
mod stats;
mod system;
mod unpooled;
mod workspace;

#[cfg(test)]
mod tests;

pub use allocation::{Allocation, DeviceId, DeviceKind};
pub use buffer::{Access, Buffer, ReadView, Tensor, ViewError, WriteView};
pub use config::{PoolType, StorageBuilder, StorageConfig};
pub use error::{BuildError, FreeError, StorageError};
pub use naive::NaiveStorage;
pub use owned::OwnedAllocation;
pub use pool::PooledStorage;
pub use registry::Storages;
pub use stats::StorageStats;
pub use unpooled::UnpooledStorage;
pub use workspace::Workspace;

use rounding::Rounding;

/// A storage manager: the memory of one device context.
///
/// Implementations are `Send + Sync`; share them behind `Arc`.
pub trait Storage: Send + Sync + std::fmt::Debug {
    /// The context this manager serves.
    fn context(&self) -> DeviceId;

    /// Which kind of manager this is.
    fn pool_type(&self) -> PoolType;

    /// How requests are rounded to blocks.
    fn rounding(&self) -> Rounding;

    /// The alignment of every block (at least 64).
    fn alignment(&self) -> usize;

    /// A block of at least `size` bytes, aligned to
    /// [`alignment`](Self::alignment): from the cache when a block of the
    /// same rounded size is there, else from the system. Size 0 is allowed
    /// and holds no memory.
    ///
    /// # Errors
    ///
    /// [`StorageError::OutOfMemory`] when neither the limit nor the system
    /// allow the block even after the cache was released;
    /// [`StorageError::TooLarge`] when the size cannot be a block at all.
    fn allocate(&self, size: usize) -> Result<Allocation, StorageError>;

    /// Gives `allocation` back: a pool caches its block for reuse, other
    /// managers return it to the system.
    ///
    /// # Errors
    ///
    /// [`FreeError`], handing the allocation back untouched, when this
    /// manager did not make it.
    fn free(&self, allocation: Allocation) -> Result<(), FreeError>;

    /// Gives `allocation` back straight to the system, bypassing the pool.
    ///
    /// # Errors
    ///
    /// As [`free`](Self::free).
    fn free_direct(&self, allocation: Allocation) -> Result<(), FreeError>;

    /// Returns every cached block to the system; the bytes released.
    fn release_all(&self) -> usize;

    /// A snapshot of the statistics (exact when no other thread is using the
    /// manager).
    fn stats(&self) -> StorageStats;
}
