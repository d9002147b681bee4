//! One manager per context: the front that hands out managers and routes
//! allocations and frees to them (MXNet's `StorageImpl`).

use crate::sync::Arc;
use std::collections::HashMap;

use crate::sync::unmodelled::{OnceCell, RwLock};

use super::{
    Allocation, BuildError, DeviceId, FreeError, Storage, StorageConfig, StorageError, StorageStats,
};

/// The managers of every context, made lazily from one configuration.
///
/// # Examples
///
/// ```
/// use depengine::storage::{DeviceId, StorageConfig, Storages};
/// let storages = Storages::new(StorageConfig::default());
/// let a = storages.allocate(1000, DeviceId::cpu(0))?;
/// assert_eq!(a.rounded_size(), 4096);
/// storages.free(a)?;
/// assert_eq!(storages.stats(DeviceId::cpu(0)).unwrap().cached, 4096);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Storages {
    config: StorageConfig,
    managers: RwLock<HashMap<DeviceId, Arc<dyn Storage>>>,
}

static GLOBAL: OnceCell<Storages> = OnceCell::new();

impl Storages {
    /// Managers made from `config`.
    pub fn new(config: StorageConfig) -> Self {
        Self {
            config,
            managers: RwLock::new(HashMap::new()),
        }
    }

    /// Managers configured by the `DEPENGINE_STORAGE_*` variables.
    ///
    /// # Errors
    ///
    /// [`BuildError`] naming the variable whose value is bad.
    pub fn from_env() -> Result<Self, BuildError> {
        Ok(Self::new(StorageConfig::from_env()?))
    }

    /// The process-wide managers, configured from the environment on first
    /// use. Only the API edge should use this; the engine's internals take a
    /// `Storages` (or a manager) explicitly.
    ///
    /// # Errors
    ///
    /// [`BuildError`] when the environment is bad; the next call reads it
    /// again.
    pub fn global() -> Result<&'static Storages, BuildError> {
        GLOBAL.get_or_try_init(Self::from_env)
    }

    /// The configuration every manager is made from.
    pub fn config(&self) -> &StorageConfig {
        &self.config
    }

    /// The manager of `ctx`, made on first use.
    pub fn get(&self, ctx: DeviceId) -> Arc<dyn Storage> {
        if let Some(m) = self.managers.read().get(&ctx) {
            return Arc::clone(m);
        }
        let mut managers = self.managers.write();
        Arc::clone(
            managers
                .entry(ctx)
                .or_insert_with(|| self.config.create(ctx)),
        )
    }

    /// The manager of `ctx`, if it has been made.
    pub fn existing(&self, ctx: DeviceId) -> Option<Arc<dyn Storage>> {
        self.managers.read().get(&ctx).cloned()
    }

    /// Allocates `size` bytes on `ctx`.
    ///
    /// # Errors
    ///
    /// As [`Storage::allocate`].
    pub fn allocate(&self, size: usize, ctx: DeviceId) -> Result<Allocation, StorageError> {
        self.get(ctx).allocate(size)
    }

    /// Frees `allocation` to the manager of its context (into its pool).
    ///
    /// # Errors
    ///
    /// [`FreeError`], handing the allocation back, when it was not made by
    /// one of these managers.
    pub fn free(&self, allocation: Allocation) -> Result<(), FreeError> {
        match self.existing(allocation.context()) {
            Some(m) => m.free(allocation),
            None => {
                let ctx = allocation.context();
                Err(FreeError::new(allocation, ctx))
            }
        }
    }

    /// Frees `allocation` straight to the system, bypassing the pool.
    ///
    /// # Errors
    ///
    /// As [`free`](Self::free).
    pub fn free_direct(&self, allocation: Allocation) -> Result<(), FreeError> {
        match self.existing(allocation.context()) {
            Some(m) => m.free_direct(allocation),
            None => {
                let ctx = allocation.context();
                Err(FreeError::new(allocation, ctx))
            }
        }
    }

    /// Releases every manager's cache; the bytes released.
    pub fn release_all(&self) -> usize {
        let managers: Vec<_> = self.managers.read().values().cloned().collect();
        managers.iter().map(|m| m.release_all()).sum()
    }

    /// Statistics of the manager of `ctx`, if it has been made.
    pub fn stats(&self, ctx: DeviceId) -> Option<StorageStats> {
        self.existing(ctx).map(|m| m.stats())
    }
}

impl std::fmt::Debug for Storages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut contexts: Vec<DeviceId> = self.managers.read().keys().copied().collect();
        contexts.sort();
        f.debug_struct("Storages")
            .field("config", &self.config)
            .field("contexts", &contexts)
            .finish()
    }
}
