//! Errors of the storage managers and of their configuration.

use std::fmt;

use super::{Allocation, DeviceId};

/// Why an allocation failed.
///
/// Allocation never aborts the process: when neither the cache nor the system
/// can serve a request, the manager returns one of these and stays usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// The request could not be served within the limit, or the system
    /// allocator refused it, even after the cache was released and the
    /// allocation retried once.
    #[error(
        "out of memory on {ctx}: asked for {asked} bytes (a block of {rounded}), \
         {in_use} bytes held in use, {cached} bytes cached, {}; \
         free some allocations, or raise DEPENGINE_STORAGE_LIMIT_BYTES",
        limit_text(*limit)
    )]
    OutOfMemory {
        /// The context whose manager refused.
        ctx: DeviceId,
        /// Bytes the caller asked for.
        asked: usize,
        /// The block size the request rounds to.
        rounded: usize,
        /// Bytes handed out and not yet freed, when the request failed.
        in_use: usize,
        /// Bytes cached in the pool, when the request failed.
        cached: usize,
        /// The configured limit, if any.
        limit: Option<usize>,
    },
    /// The request is too large to describe as a memory block at all (its
    /// rounded size overflows, or exceeds `isize::MAX`).
    #[error(
        "cannot allocate {asked} bytes on {ctx}: the size, rounded to a pool block \
         and aligned to {align} bytes, exceeds what the address space can describe"
    )]
    TooLarge {
        /// The context whose manager refused.
        ctx: DeviceId,
        /// Bytes the caller asked for.
        asked: usize,
        /// The manager's alignment.
        align: usize,
    },
}

fn limit_text(limit: Option<usize>) -> String {
    match limit {
        Some(l) => format!("limit {l} bytes"),
        None => "no limit set (the system allocator refused)".to_owned(),
    }
}

fn var_text(var: Option<&'static str>) -> String {
    var.map(|v| format!(" (environment variable {v})"))
        .unwrap_or_default()
}

/// A free was handed an allocation that this manager did not make.
///
/// The allocation is handed back untouched: [`FreeError::into_allocation`]
/// returns it so the caller can give it to the right manager.
#[derive(thiserror::Error)]
#[error(
    "allocation of {} bytes on {} was not made by the {manager} storage manager \
     it was freed to; free it through the manager that made it",
    allocation.size(),
    allocation.context()
)]
pub struct FreeError {
    allocation: Allocation,
    manager: DeviceId,
}

impl FreeError {
    pub(crate) fn new(allocation: Allocation, manager: DeviceId) -> Self {
        Self {
            allocation,
            manager,
        }
    }

    /// The context of the manager that refused the allocation.
    pub fn manager(&self) -> DeviceId {
        self.manager
    }

    /// The allocation, handed back.
    pub fn into_allocation(self) -> Allocation {
        self.allocation
    }
}

impl fmt::Debug for FreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FreeError")
            .field("allocation", &self.allocation)
            .field("manager", &self.manager)
            .finish()
    }
}

/// A storage configuration that cannot be built.
///
/// Every message names the setting and the environment variable that sets
/// it, so a person can fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// An environment variable holds a value that cannot be parsed.
    #[error("{var}={value:?}: {reason}")]
    BadVariable {
        /// The variable's name.
        var: &'static str,
        /// Its value.
        value: String,
        /// What was expected.
        reason: String,
    },
    /// A setting is out of range, or inconsistent with another one.
    #[error("storage setting {setting}{}: {reason}", var_text(*var))]
    Invalid {
        /// The builder setting.
        setting: &'static str,
        /// The environment variable that sets it, if one does.
        var: Option<&'static str>,
        /// What is wrong and what is allowed.
        reason: String,
    },
}
