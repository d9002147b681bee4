//! The naive manager: every request goes to the system allocator, aligned,
//! and every free returns the block at once. Also the shared engine of the
//! unpooled manager, which differs only in its rounding.

use super::rounding::Rounding;
use super::stats::StorageStats;
use super::system::{NoCache, System};
use super::{Allocation, DeviceId, FreeError, PoolType, StorageConfig, StorageError};

/// A manager without a cache: allocation and free go straight to the system.
#[derive(Debug)]
pub(crate) struct Direct {
    kind: PoolType,
    rounding: Rounding,
    system: System,
}

impl Direct {
    pub(crate) fn new(ctx: DeviceId, kind: PoolType, config: &StorageConfig) -> Self {
        Self {
            kind,
            rounding: config.rounding_of(kind),
            system: System::new(ctx, config),
        }
    }

    pub(crate) fn context(&self) -> DeviceId {
        self.system.ctx()
    }

    pub(crate) fn pool_type(&self) -> PoolType {
        self.kind
    }

    pub(crate) fn rounding(&self) -> Rounding {
        self.rounding
    }

    pub(crate) fn alignment(&self) -> usize {
        self.system.align()
    }

    pub(crate) fn allocate(&self, size: usize) -> Result<Allocation, StorageError> {
        let rounded = self.system.round(size, |s| self.rounding.round(s))?;
        if rounded == 0 {
            return Ok(self.system.empty());
        }
        let ptr = self.system.obtain(size, rounded, &NoCache)?;
        self.system.counters.acquired(rounded);
        Ok(self.system.allocation(ptr, size, rounded))
    }

    pub(crate) fn free(&self, allocation: Allocation) -> Result<(), FreeError> {
        self.system.free_to_system(allocation)
    }

    pub(crate) fn stats(&self) -> StorageStats {
        self.system.counters.snapshot(0, 0)
    }
}

/// The naive manager ([`PoolType::Naive`]): aligned system allocation of
/// exactly the size asked, no cache.
///
/// The baseline the pools are measured against, and the right choice when
/// another allocator already caches.
#[derive(Debug)]
pub struct NaiveStorage(Direct);

impl NaiveStorage {
    /// A naive manager for `ctx` (alignment and limit from `config`).
    pub fn new(ctx: DeviceId, config: &StorageConfig) -> Self {
        Self(Direct::new(ctx, PoolType::Naive, config))
    }
}

/// Implements [`Storage`] for a newtype over [`Direct`].
macro_rules! direct_storage {
    ($ty:ty) => {
        impl $crate::storage::Storage for $ty {
            fn context(&self) -> $crate::storage::DeviceId {
                self.0.context()
            }
            fn pool_type(&self) -> $crate::storage::PoolType {
                self.0.pool_type()
            }
            fn rounding(&self) -> $crate::storage::rounding::Rounding {
                self.0.rounding()
            }
            fn alignment(&self) -> usize {
                self.0.alignment()
            }
            fn allocate(
                &self,
                size: usize,
            ) -> Result<$crate::storage::Allocation, $crate::storage::StorageError> {
                self.0.allocate(size)
            }
            fn free(
                &self,
                allocation: $crate::storage::Allocation,
            ) -> Result<(), $crate::storage::FreeError> {
                self.0.free(allocation)
            }
            fn free_direct(
                &self,
                allocation: $crate::storage::Allocation,
            ) -> Result<(), $crate::storage::FreeError> {
                self.0.free(allocation)
            }
            fn release_all(&self) -> usize {
                0
            }
            fn stats(&self) -> $crate::storage::StorageStats {
                self.0.stats()
            }
        }
    };
}
pub(crate) use direct_storage;

direct_storage!(NaiveStorage);
