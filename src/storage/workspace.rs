//! Scratch memory for a running op (MXNet's temporary-space resource).
//!
//! An op body that needs temporary memory asks for a [`Workspace`]: values
//! from a storage manager's pool, initialised, owned by the body alone. Its
//! lifetime is tied to the body's `&OpCtx` borrow, so it cannot outlive the
//! op; dropping it (at the latest when the body returns) hands the block back
//! to the pool, where the next op's workspace of the same rounded size finds
//! it.

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

use crate::engine::{Context, OpCtx};
use crate::sync::Arc;

use super::buffer::allocate_init;
use super::{DeviceId, OwnedAllocation, Storage, StorageError};

/// Scratch values for the body of one op; dereferences to `[T]`.
///
/// The block comes from the manager's pool and goes back to it when the
/// workspace is dropped, which is at the latest when the op body returns:
/// the lifetime `'a` is the body's borrow of its [`OpCtx`].
///
/// # Examples
///
/// ```
/// use depengine::storage::{DeviceId, StorageConfig, Workspace};
/// use depengine::{Engine, OpDesc};
///
/// let engine = Engine::builder().build()?;
/// let storage = StorageConfig::default().create(DeviceId::cpu(0));
/// for _ in 0..2 {
///     let s = storage.clone();
///     let sum = engine.push_sync(OpDesc::new("scratch"), move |ctx| {
///         let mut tmp = Workspace::<u64>::new(ctx, &s, 100)?;
///         for (i, x) in tmp.iter_mut().enumerate() {
///             *x = i as u64;
///         }
///         Ok(tmp.iter().sum::<u64>())
///     })?;
///     assert_eq!(sum, 4950);
/// }
/// // The second op reused the first op's block, which is cached again now.
/// let stats = storage.stats();
/// assert_eq!((stats.from_system, stats.from_pool), (1, 1));
/// assert_eq!((stats.in_use, stats.cached), (0, 4096));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// It cannot be kept past the body:
///
/// ```compile_fail,E0521
/// use depengine::storage::{DeviceId, StorageConfig, Workspace};
/// use depengine::{Engine, OpDesc};
/// let engine = Engine::builder().build().unwrap();
/// let storage = StorageConfig::default().create(DeviceId::cpu(0));
/// let mut kept = None;
/// engine.push(OpDesc::new("leak"), move |ctx| {
///     kept = Some(Workspace::<u8>::new(ctx, &storage, 10).unwrap()); // error
///     Ok(())
/// }).unwrap();
/// ```
pub struct Workspace<'a, T = u8> {
    /// Holds `len` initialised values of `T`; freed into the pool on drop.
    allocation: OwnedAllocation,
    len: usize,
    _op: PhantomData<(&'a (), T)>,
}

impl<'a, T: Copy + Send + Sync + 'static> Workspace<'a, T> {
    /// `len` copies of `T::default()` (zeros for numbers) from `storage`.
    ///
    /// # Errors
    ///
    /// As [`Workspace::full`].
    pub fn new(
        ctx: &'a OpCtx<'_>,
        storage: &Arc<dyn Storage>,
        len: usize,
    ) -> Result<Self, StorageError>
    where
        T: Default,
    {
        Self::full(ctx, storage, len, T::default())
    }

    /// `len` copies of `value` from `storage`, for the op whose context is
    /// `ctx`.
    ///
    /// # Errors
    ///
    /// [`StorageError::OutOfMemory`] when the manager cannot serve the block
    /// even after releasing its cache; [`StorageError::TooLarge`] when `len`
    /// values of `T` overflow the address space. Both convert into an
    /// [`OpError`](crate::OpError) with `?`.
    pub fn full(
        ctx: &'a OpCtx<'_>,
        storage: &Arc<dyn Storage>,
        len: usize,
        value: T,
    ) -> Result<Self, StorageError> {
        let _ = ctx; // only its lifetime matters
        let allocation = allocate_init(storage, len, |slots| {
            for s in slots {
                s.write(value);
            }
        })?;
        Ok(Workspace {
            allocation,
            len,
            _op: PhantomData,
        })
    }
}

impl<T> Workspace<'_, T> {
    /// Size of the block that serves the workspace (the pool's bucket).
    pub fn rounded_bytes(&self) -> usize {
        self.allocation.rounded_size()
    }

    /// The manager the block goes back to.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        self.allocation.storage()
    }
}

impl<T> Deref for Workspace<'_, T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        // SAFETY: the block holds `len` values of `T`, initialised by
        // `allocate_init` and aligned for `T` (checked there); the workspace
        // owns it alone, and `&self` keeps out writers for the borrow.
        unsafe { std::slice::from_raw_parts(self.allocation.as_ptr().cast(), self.len) }
    }
}

impl<T> DerefMut for Workspace<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference to
        // the values for the borrow.
        unsafe { std::slice::from_raw_parts_mut(self.allocation.as_ptr().cast(), self.len) }
    }
}

impl<T> fmt::Debug for Workspace<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Workspace")
            .field("elem", &std::any::type_name::<T>())
            .field("len", &self.len)
            .field("allocation", &*self.allocation)
            .finish()
    }
}

/// The memory an op's context runs on: `Cpu(i)` and `CpuPinned(i)` use host
/// memory `i`, `Gpu(i)` the (simulated) device `i`. So an op finds its
/// workspace's manager with `storages.get(ctx.context().into())`.
impl From<Context> for DeviceId {
    fn from(ctx: Context) -> Self {
        match ctx {
            Context::Cpu(id) | Context::CpuPinned(id) => DeviceId::cpu(id),
            Context::Gpu(id) => DeviceId::gpu(id),
        }
    }
}
