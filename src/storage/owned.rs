//! An allocation that returns to its manager when dropped: what a scratch
//! workspace of a running op, or any scoped use, wants.

use crate::sync::Arc;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};

use super::{Allocation, Storage, StorageError};

/// An [`Allocation`] together with its manager; dropping it frees the block
/// into the manager's pool.
///
/// It dereferences to the [`Allocation`], so the block is reached the same
/// way. Use [`into_parts`](Self::into_parts) to take the allocation back
/// when something else (a buffer's deletion op) decides when it is freed.
///
/// # Examples
///
/// ```
/// use depengine::storage::{DeviceId, OwnedAllocation, StorageConfig};
/// let storage = StorageConfig::default().create(DeviceId::cpu(0));
/// {
///     let mut scratch = OwnedAllocation::new(storage.clone(), 1000)?;
///     scratch.fill(0);
/// } // back in the pool here
/// let s = storage.stats();
/// assert_eq!((s.in_use, s.cached), (0, 4096));
/// # Ok::<(), depengine::storage::StorageError>(())
/// ```
pub struct OwnedAllocation {
    storage: Arc<dyn Storage>,
    /// Always holds a live allocation of `storage`, until `drop` or
    /// `into_parts` takes it out, each exactly once.
    allocation: ManuallyDrop<Allocation>,
}

impl OwnedAllocation {
    /// Allocates `size` bytes from `storage`.
    ///
    /// # Errors
    ///
    /// As [`Storage::allocate`].
    pub fn new(storage: Arc<dyn Storage>, size: usize) -> Result<Self, StorageError> {
        let allocation = storage.allocate(size)?;
        Ok(Self {
            storage,
            allocation: ManuallyDrop::new(allocation),
        })
    }

    /// The manager the block goes back to.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// The manager and the allocation, which will no longer be freed on drop.
    pub fn into_parts(self) -> (Arc<dyn Storage>, Allocation) {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped nor used again, so each field is
        // moved out exactly once; `allocation` still holds its value (only
        // `drop`, which will not run, takes it otherwise).
        unsafe {
            (
                std::ptr::read(&this.storage),
                ManuallyDrop::take(&mut this.allocation),
            )
        }
    }
}

impl Deref for OwnedAllocation {
    type Target = Allocation;

    fn deref(&self) -> &Allocation {
        &self.allocation
    }
}

impl DerefMut for OwnedAllocation {
    fn deref_mut(&mut self) -> &mut Allocation {
        &mut self.allocation
    }
}

impl Drop for OwnedAllocation {
    fn drop(&mut self) {
        // SAFETY: `drop` runs once and nothing uses `allocation` after it;
        // `into_parts` skips `drop`, so the value is still there.
        let allocation = unsafe { ManuallyDrop::take(&mut self.allocation) };
        // The allocation was made by this very manager, so `free` cannot
        // refuse it; were it to, the block would leak rather than be freed
        // to the wrong place.
        let _ = self.storage.free(allocation);
    }
}

impl std::fmt::Debug for OwnedAllocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedAllocation")
            .field("allocation", &*self.allocation)
            .field("storage", &self.storage.context())
            .finish()
    }
}
