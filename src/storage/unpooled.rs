//! The unpooled manager: the exact-size pool's rounding and accounting, with
//! every free returning its block to the system at once.

use super::naive::{direct_storage, Direct};
use super::{DeviceId, PoolType, StorageConfig};

/// The unpooled manager ([`PoolType::Unpooled`]).
///
/// Blocks are rounded as in the exact-size pool (so the memory a workload
/// holds is the same as with the pool), but nothing is cached: every free
/// returns memory to the system. Useful to measure what the cache saves, and
/// to keep memory low when blocks are seldom reused.
#[derive(Debug)]
pub struct UnpooledStorage(Direct);

impl UnpooledStorage {
    /// An unpooled manager for `ctx`, with page size, threshold, alignment and
    /// limit from `config`.
    pub fn new(ctx: DeviceId, config: &StorageConfig) -> Self {
        Self(Direct::new(ctx, PoolType::Unpooled, config))
    }
}

direct_storage!(UnpooledStorage);
