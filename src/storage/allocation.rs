//! Device contexts and the allocation handle the managers hand out.

use std::fmt;
use std::mem::MaybeUninit;
use std::ptr::NonNull;

/// The kind of device a storage manager serves.
///
/// There is no accelerator runtime in this crate: a `Gpu` manager allocates
/// host memory that stands in for device memory, so that per-device pools,
/// limits and statistics behave as they would on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeviceKind {
    /// Host memory.
    Cpu,
    /// (Simulated) accelerator memory.
    Gpu,
}

/// A device context: which memory a manager serves. The engine's context maps
/// onto this one-to-one.
///
/// # Examples
///
/// ```
/// use depengine::storage::DeviceId;
/// assert_eq!(DeviceId::cpu(0).to_string(), "cpu(0)");
/// assert_eq!(DeviceId::gpu(1).to_string(), "gpu(1)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId {
    /// The kind of device.
    pub kind: DeviceKind,
    /// The device's index among those of its kind.
    pub id: u32,
}

impl DeviceId {
    /// Host memory number `id` (usually 0).
    pub const fn cpu(id: u32) -> Self {
        Self {
            kind: DeviceKind::Cpu,
            id,
        }
    }

    /// Accelerator number `id`.
    pub const fn gpu(id: u32) -> Self {
        Self {
            kind: DeviceKind::Gpu,
            id,
        }
    }
}

impl Default for DeviceId {
    fn default() -> Self {
        Self::cpu(0)
    }
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            DeviceKind::Cpu => write!(f, "cpu({})", self.id),
            DeviceKind::Gpu => write!(f, "gpu({})", self.id),
        }
    }
}

/// A block of memory handed out by a [`Storage`](super::Storage) manager.
///
/// # Ownership contract
///
/// An `Allocation` is the unique owner of its block, like a `Box<[u8]>`
/// without a destructor: it is neither `Clone` nor `Copy`, and only a manager
/// makes one. The block stays valid until the allocation is handed back to
/// [`Storage::free`](super::Storage::free) or
/// [`Storage::free_direct`](super::Storage::free_direct) of the manager that
/// made it; both take it by value, so a block cannot be freed twice or used
/// after its free by safe code. Dropping an `Allocation` without freeing it
/// leaks the block (safely) and leaves it counted as in use.
///
/// * The block is at least [`size`](Self::size) bytes long (in fact
///   [`rounded_size`](Self::rounded_size)) and aligned to the manager's
///   alignment (64 bytes or more).
/// * A size-0 allocation holds no memory: its pointer is dangling but aligned
///   and non-null, and it is never passed to the system deallocator.
/// * Fresh blocks, and blocks reused from a pool, hold unspecified bytes: they
///   count as uninitialised until written.
///
/// The types forbid freeing twice and using a freed block:
///
/// ```compile_fail,E0382
/// use depengine::storage::{DeviceId, StorageConfig};
/// let storage = StorageConfig::default().create(DeviceId::cpu(0));
/// let a = storage.allocate(10).unwrap();
/// storage.free(a).unwrap();
/// storage.free(a).unwrap(); // error: use of moved value `a`
/// ```
///
/// ```compile_fail,E0599
/// use depengine::storage::{DeviceId, StorageConfig};
/// let storage = StorageConfig::default().create(DeviceId::cpu(0));
/// let a = storage.allocate(10).unwrap();
/// let b = a.clone(); // error: `Allocation` is not `Clone`
/// ```
///
/// ```compile_fail,E0505
/// use depengine::storage::{DeviceId, StorageConfig};
/// let storage = StorageConfig::default().create(DeviceId::cpu(0));
/// let mut a = storage.allocate(10).unwrap();
/// let view = a.as_uninit_mut();
/// storage.free(a).unwrap(); // error: `a` is borrowed by `view`
/// view[0].write(1);
/// ```
///
/// # Thread safety
///
/// `Allocation` is `Send` and `Sync`: it owns its block exclusively, and
/// shared access (`&Allocation`) gives out only raw pointers and `unsafe`
/// views, whose callers promise the absence of data races. The deletion op
/// of a buffer may therefore free it on another thread, long after it was
/// allocated.
#[must_use = "an allocation that is dropped without being freed leaks its block"]
pub struct Allocation {
    ptr: NonNull<u8>,
    size: usize,
    rounded: usize,
    ctx: DeviceId,
    owner: u64,
}

// SAFETY: an `Allocation` owns its block exclusively (it is neither `Clone`
// nor `Copy` and only a manager creates one), like `Box<[u8]>`; the block is
// plain bytes with no thread affinity, and every manager's `free` may run on
// any thread.
unsafe impl Send for Allocation {}
// SAFETY: through `&Allocation` only raw pointers and `unsafe` views are
// reachable; whoever dereferences them promises there is no data race, as
// with `*mut u8`. No interior mutability is reachable safely.
unsafe impl Sync for Allocation {}

impl Allocation {
    /// Only managers make allocations: `ptr` must be a block of `rounded`
    /// bytes (or dangling when `rounded == 0`) owned by manager `owner`.
    pub(crate) fn new(
        ptr: NonNull<u8>,
        size: usize,
        rounded: usize,
        ctx: DeviceId,
        owner: u64,
    ) -> Self {
        debug_assert!(size <= rounded);
        Self {
            ptr,
            size,
            rounded,
            ctx,
            owner,
        }
    }

    /// The start of the block. Valid for reads and writes of
    /// [`rounded_size`](Self::rounded_size) bytes while the allocation lives.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The start of the block, non-null.
    pub fn as_non_null(&self) -> NonNull<u8> {
        self.ptr
    }

    /// The size that was asked for.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The size of the block that serves the request (the pool's bucket).
    pub fn rounded_size(&self) -> usize {
        self.rounded
    }

    /// Whether the allocation is of size 0 (and holds no memory).
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// The context whose manager made this allocation.
    pub fn context(&self) -> DeviceId {
        self.ctx
    }

    pub(crate) fn owner(&self) -> u64 {
        self.owner
    }

    /// The first [`size`](Self::size) bytes, possibly uninitialised; safe
    /// because the allocation is borrowed mutably and owns its block.
    pub fn as_uninit_mut(&mut self) -> &mut [MaybeUninit<u8>] {
        // SAFETY: the block is valid for `rounded >= size` bytes (or `size` is
        // 0 and the pointer is non-null and aligned); `&mut self` gives
        // exclusive access to it for the borrow; `MaybeUninit<u8>` has no
        // validity requirement.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().cast(), self.size) }
    }

    /// Sets the first [`size`](Self::size) bytes to `byte`, which initialises
    /// them.
    pub fn fill(&mut self, byte: u8) {
        // SAFETY: valid for `size` bytes and exclusively borrowed (see
        // `as_uninit_mut`); `write_bytes` of `u8` has no alignment demand.
        unsafe { self.ptr.as_ptr().write_bytes(byte, self.size) }
    }

    /// The first [`size`](Self::size) bytes.
    ///
    /// # Safety
    ///
    /// Those bytes must have been initialised (by [`fill`](Self::fill), a
    /// write through [`as_uninit_mut`](Self::as_uninit_mut) or the raw
    /// pointer), and no other thread may write them while the slice lives.
    pub unsafe fn as_slice(&self) -> &[u8] {
        // SAFETY: valid and aligned for `size` bytes; initialised and free of
        // concurrent writes by the caller's promise.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.size) }
    }

    /// The first [`size`](Self::size) bytes, mutably.
    ///
    /// # Safety
    ///
    /// Those bytes must have been initialised, and no other thread may read
    /// or write them while the slice lives.
    pub unsafe fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: valid for `size` bytes and exclusively borrowed; initialised
        // and unshared by the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.size) }
    }
}

impl fmt::Debug for Allocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Allocation")
            .field("ptr", &self.ptr)
            .field("size", &self.size)
            .field("rounded", &self.rounded)
            .field("ctx", &self.ctx)
            .finish()
    }
}
