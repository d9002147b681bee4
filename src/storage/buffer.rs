//! Tensors: memory from a storage manager plus a var of the engine.
//!
//! A [`Tensor<T>`] is `len` values of `T` in one [`Allocation`] of a
//! [`Storage`] manager, together with the engine [`Var`] that stands for that
//! memory. Ops declare the tensor through its var (`.reads(t.var())`,
//! `.writes(t.var())`) and, inside their body, ask for a view:
//! [`Tensor::read`] gives a [`ReadView`] (`&[T]`), [`Tensor::write`] a
//! [`WriteView`] (`&mut [T]`). Handles are cheap to clone and share one
//! buffer; dropping the last one pushes the buffer's *deletion op*, which
//! writes its var and hands the memory back to the pool only after every op
//! pushed before it on that var has finished (MXNet's delete-by-op).
//!
//! [`Buffer`] is `Tensor<u8>`: the untyped case is just a tensor of bytes.
//!
//! # Why the views are sound
//!
//! Handing out `&[T]` to readers and `&mut [T]` to a writer needs two
//! guarantees, both checked at run time:
//!
//! 1. **Between ops: the engine's read/write rules.** A view is only given to
//!    an op that declared the tensor's var: a write view needs a declared
//!    write, a read view a declared read or write
//!    ([`OpCtx::declares_read`], [`OpCtx::declares_write`]). The engine runs
//!    an op that writes a var alone on it, and ops that read it only
//!    alongside other readers (rule 1 of the engine contract); completing an
//!    op and granting the next one go through the var's lock, so every write
//!    an op made happens before the next op on the var starts. Asking for a
//!    view the op did not declare is a [`ViewError`], never a race.
//! 2. **Within an op: a borrow flag per buffer.** The engine's guarantee is
//!    per op, not per view: one body could ask twice. Each buffer carries an
//!    atomic flag used like `RefCell`'s: any number of read views or one
//!    write view, otherwise a [`ViewError::Borrowed`]. Because the flag is
//!    atomic and shared by every op, it is also a backstop across ops: a
//!    view still held when another op asks for an overlapping one is
//!    refused instead of racing.
//!
//! An async op completes only after its body has returned, even when the
//! body consumes its [`Completion`](crate::Completion) early (the engine
//! defers such a completion), so views taken in the body never overlap the
//! next op on the var.
//!
//! Views borrow both the tensor handle and the op's [`OpCtx`], so they cannot
//! outlive the body, and while one lives its handle does too: the buffer
//! cannot be freed under a view. Memory is initialised when a tensor is made
//! ([`Tensor::full`], [`Tensor::new`], [`Tensor::from_slice`]) and only ever
//! written with values of `T` afterwards, so a view never shows uninitialised
//! memory; `T: Copy` means there is nothing to drop.
//!
//! # The borrow flag
//!
//! | state | meaning | read view | write view |
//! |---|---|---|---|
//! | `UNUSED` (0) | no view | → 1 | → `WRITING` |
//! | `n` (1 ..= `MAX_READERS`) | `n` read views | → `n + 1` | refused |
//! | `WRITING` (`usize::MAX`) | one write view | refused | refused |
//!
//! Dropping a read view decrements; dropping the write view stores `UNUSED`.
//!
//! **Memory ordering.** Taking a view is an `Acquire` compare-and-swap,
//! dropping one a `Release` store or decrement. Dropping a write view
//! therefore synchronises with whoever takes the next view, and the readers'
//! decrements form one release sequence that the next writer's `Acquire`
//! reads from, so every access through one view happens before any
//! conflicting access through the next, whichever thread it is on.
//!
//! # Deletion
//!
//! When the last handle goes, the buffer's allocation moves into the callback
//! of [`Engine::delete_var_with`]: the deletion op writes the var, so it runs
//! after every op pushed before it that reads or writes the tensor, and the
//! block goes back to its manager only then. If the engine refuses the push
//! (it was shut down, or the var was deleted by hand) the callback is dropped
//! unrun and the block is freed at once: no op of a shut-down engine is
//! running, and no view can exist once the last handle is gone.

use std::fmt;
use std::marker::PhantomData;
use std::mem::{self, ManuallyDrop, MaybeUninit};
use std::ops::{Deref, DerefMut};

use crate::engine::{Engine, EngineError, OpCtx, OpDesc, Var, VarId};
use crate::sync::unmodelled::{AtomicUsize, Ordering};
use crate::sync::Arc;

use super::{OwnedAllocation, Storage, StorageError};

/// A tensor of bytes: the untyped buffer.
pub type Buffer = Tensor<u8>;

/// `len` values of `T` in memory from a [`Storage`] manager, with the engine
/// var that orders the ops on them.
///
/// Cloning is cheap: clones share the buffer. Dropping the last clone pushes
/// the deletion op that returns the memory to the pool after the last
/// pending op on it (at once if the engine was shut down).
///
/// # Views
///
/// Inside an op body, [`read`](Self::read) gives `&[T]` and
/// [`write`](Self::write) gives `&mut [T]`, checked at run time: a read view
/// needs the op to declare the tensor's var as read or written, a write view
/// as written; a view that would overlap another live view of the same
/// tensor (two write views, or a read and a write view) is refused, as
/// `RefCell` would. Each refusal is a [`ViewError`], which `?` turns into a
/// failure of the op. Since the engine runs a writer of a var alone and
/// readers only beside readers, a correct program never meets the second
/// refusal across ops; within one body it is what keeps `&mut [T]` unique.
/// Views borrow the op's context and cannot leave the body.
///
/// `T` is any `Copy` type with alignment up to 64 bytes (the least alignment
/// of every manager; larger is a compile-time error).
///
/// A tensor holds a clone of its engine: dropping the user's engine handles
/// does not shut the engine down while tensors live (an explicit
/// [`Engine::shutdown`] does; tensors dropped afterwards free their memory
/// at once).
///
/// # Examples
///
/// ```
/// use depengine::storage::{DeviceId, StorageConfig, Tensor};
/// use depengine::{Engine, OpDesc};
///
/// let engine = Engine::builder().build()?;
/// let storage = StorageConfig::default().create(DeviceId::cpu(0));
/// let x = Tensor::from_slice(&engine, &storage, &[1.0f32, 2.0, 3.0])?;
/// let y = Tensor::<f32>::new(&engine, &storage, 3)?; // zeros
///
/// // y = 2x: declare x as read and y as written, then take views.
/// let (xc, yc) = (x.clone(), y.clone());
/// engine.push(OpDesc::new("y = 2x").reads(x.var()).writes(y.var()), move |ctx| {
///     let x = xc.read(ctx)?;
///     let mut y = yc.write(ctx)?;
///     for (y, x) in y.iter_mut().zip(x.iter()) {
///         *y = 2.0 * x;
///     }
///     Ok(())
/// })?;
/// assert_eq!(y.to_vec()?, [2.0, 4.0, 6.0]);
///
/// // A write view of a tensor the op only reads is an error, not a race.
/// let xc = x.clone();
/// let r = engine.push_sync(OpDesc::new("bad").reads(x.var()), move |ctx| {
///     Ok(xc.write(ctx).is_err())
/// })?;
/// assert!(r);
///
/// // Dropping the last handles pushes the deletion ops; once they ran the
/// // blocks are back in the pool.
/// drop((x, y));
/// engine.wait_for_all()?;
/// assert_eq!(storage.stats().in_use, 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A view cannot leave the op body it was made in:
///
/// ```compile_fail,E0521
/// use depengine::storage::{DeviceId, StorageConfig, Tensor};
/// use depengine::{Engine, OpDesc};
/// let engine = Engine::builder().build().unwrap();
/// let storage = StorageConfig::default().create(DeviceId::cpu(0));
/// let t = Tensor::<u32>::new(&engine, &storage, 4).unwrap();
/// let t2 = t.clone();
/// let mut kept = None;
/// engine.push(OpDesc::new("leak").reads(t.var()), move |ctx| {
///     kept = Some(t2.read(ctx).unwrap()); // error: borrowed data escapes
///     Ok(())
/// }).unwrap();
/// ```
pub struct Tensor<T> {
    raw: Arc<RawBuffer>,
    len: usize,
    _elem: PhantomData<T>,
}

/// The untyped part shared by every handle of one buffer.
struct RawBuffer {
    engine: Engine,
    /// Moved into the deletion op by the drop, so that the deletion is
    /// handed the var's only handle (see `Engine::delete_var_with`).
    var: ManuallyDrop<Var>,
    /// The block, until the last handle's drop moves it into the deletion op.
    allocation: Option<OwnedAllocation>,
    borrow: BorrowFlag,
}

impl<T> Clone for Tensor<T> {
    fn clone(&self) -> Self {
        Tensor {
            raw: Arc::clone(&self.raw),
            len: self.len,
            _elem: PhantomData,
        }
    }
}

impl<T: Copy + Send + Sync + 'static> Tensor<T> {
    /// A tensor of `len` copies of `T::default()` (zeros for numbers).
    ///
    /// # Errors
    ///
    /// As [`Tensor::full`].
    pub fn new(
        engine: &Engine,
        storage: &Arc<dyn Storage>,
        len: usize,
    ) -> Result<Self, StorageError>
    where
        T: Default,
    {
        Self::full(engine, storage, len, T::default())
    }

    /// A tensor of `len` copies of `value`, in memory from `storage`, with a
    /// new var of `engine`.
    ///
    /// # Errors
    ///
    /// [`StorageError::OutOfMemory`] when the manager cannot serve the
    /// block, even after releasing its cache; [`StorageError::TooLarge`]
    /// when `len` values of `T` overflow the address space.
    pub fn full(
        engine: &Engine,
        storage: &Arc<dyn Storage>,
        len: usize,
        value: T,
    ) -> Result<Self, StorageError> {
        let allocation = allocate_init(storage, len, |slots| {
            for s in slots {
                s.write(value);
            }
        })?;
        Ok(Self::from_parts(engine, allocation, len))
    }

    /// A tensor holding a copy of `data`.
    ///
    /// # Errors
    ///
    /// As [`Tensor::full`].
    pub fn from_slice(
        engine: &Engine,
        storage: &Arc<dyn Storage>,
        data: &[T],
    ) -> Result<Self, StorageError> {
        let allocation = allocate_init(storage, data.len(), |slots| {
            for (s, v) in slots.iter_mut().zip(data) {
                s.write(*v);
            }
        })?;
        Ok(Self::from_parts(engine, allocation, data.len()))
    }

    fn from_parts(engine: &Engine, allocation: OwnedAllocation, len: usize) -> Self {
        Tensor {
            raw: Arc::new(RawBuffer {
                engine: engine.clone(),
                var: ManuallyDrop::new(engine.new_var()),
                allocation: Some(allocation),
                borrow: BorrowFlag::new(),
            }),
            len,
            _elem: PhantomData,
        }
    }

    /// A read view of the values, for the body of an op that declared this
    /// tensor's var among its reads or writes.
    ///
    /// # Errors
    ///
    /// [`ViewError::NotDeclared`] when the op declared neither;
    /// [`ViewError::Borrowed`] while a write view of this tensor is alive.
    pub fn read<'a>(&'a self, ctx: &'a OpCtx<'_>) -> Result<ReadView<'a, T>, ViewError> {
        let var: &Var = &self.raw.var;
        if !ctx.declares_read(var) && !ctx.declares_write(var) {
            return Err(ViewError::NotDeclared {
                op: ctx.name().to_owned(),
                var: var.id(),
                access: Access::Read,
            });
        }
        self.raw
            .borrow
            .try_read()
            .map_err(|held| ViewError::Borrowed {
                op: ctx.name().to_owned(),
                var: var.id(),
                access: Access::Read,
                held,
            })?;
        // SAFETY: the block holds `len` initialised values of `T` (written at
        // creation, and only ever rewritten with values of `T`), aligned
        // (`allocate_init` checked the alignment) and live while `self` is
        // borrowed (the last handle frees it, and `self` is one). Nothing
        // writes them while the slice lives: a write through this buffer
        // needs a write view, which the flag now refuses until this view is
        // dropped; by the engine's rules no op that writes the var runs
        // alongside this one, so in a correct program that refusal never
        // happens.
        let slice = unsafe { std::slice::from_raw_parts(self.ptr(), self.len) };
        Ok(ReadView {
            slice,
            flag: &self.raw.borrow,
        })
    }

    /// A write view of the values, for the body of an op that declared this
    /// tensor's var among its writes.
    ///
    /// # Errors
    ///
    /// [`ViewError::ReadOnly`] when the op declared the var only as read;
    /// [`ViewError::NotDeclared`] when it declared it not at all;
    /// [`ViewError::Borrowed`] while another view of this tensor is alive.
    pub fn write<'a>(&'a self, ctx: &'a OpCtx<'_>) -> Result<WriteView<'a, T>, ViewError> {
        let var: &Var = &self.raw.var;
        if !ctx.declares_write(var) {
            let op = ctx.name().to_owned();
            return Err(if ctx.declares_read(var) {
                ViewError::ReadOnly { op, var: var.id() }
            } else {
                ViewError::NotDeclared {
                    op,
                    var: var.id(),
                    access: Access::Write,
                }
            });
        }
        self.raw
            .borrow
            .try_write()
            .map_err(|held| ViewError::Borrowed {
                op: ctx.name().to_owned(),
                var: var.id(),
                access: Access::Write,
                held,
            })?;
        // SAFETY: valid, aligned and initialised as in `read`. The slice is
        // the only reference to the values while it lives: the flag is now
        // `WRITING`, so no other view of this buffer can be made until it is
        // dropped, and views are the only safe access to the block. By the
        // engine's rules the op that declared the write runs alone on the
        // var, so in a correct program no other op even asks.
        let slice = unsafe { std::slice::from_raw_parts_mut(self.ptr(), self.len) };
        Ok(WriteView {
            slice,
            flag: &self.raw.borrow,
        })
    }

    /// Copies the values out: pushes an op that reads the tensor and waits
    /// for it (so it sees every write pushed before).
    ///
    /// # Errors
    ///
    /// As [`Engine::push_sync`]: the failure of an earlier op that wrote the
    /// tensor, or [`EngineError::WaitFromWorker`] from inside an op.
    pub fn to_vec(&self) -> Result<Vec<T>, EngineError> {
        let t = self.clone();
        self.raw.engine.push_sync(
            OpDesc::new("tensor to_vec").reads(&*self.raw.var),
            move |ctx| Ok(t.read(ctx)?.to_vec()),
        )
    }

    /// The start of the values. Valid until the deletion op pushed by the
    /// last handle's drop has run (or, when that push is refused because the
    /// engine was shut down or the var deleted by hand, until that drop).
    /// Reading or writing through it is only free of data races inside an op
    /// that declared the var accordingly, and is the caller's `unsafe`
    /// responsibility. Prefer [`read`](Self::read) and
    /// [`write`](Self::write).
    pub fn as_ptr(&self) -> *const T {
        self.ptr()
    }

    fn ptr(&self) -> *mut T {
        self.raw.block().as_ptr().cast()
    }
}

impl<T> Tensor<T> {
    /// The var that stands for this tensor: declare it in the ops that read
    /// or write the tensor.
    pub fn var(&self) -> &Var {
        &self.raw.var
    }

    /// The engine whose var this is.
    pub fn engine(&self) -> &Engine {
        &self.raw.engine
    }

    /// The manager the memory came from and goes back to.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        self.raw.block().storage()
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the tensor holds no values.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size of the values in bytes.
    pub fn size_bytes(&self) -> usize {
        self.len * mem::size_of::<T>()
    }

    /// Size of the block that holds them (the pool's bucket).
    pub fn rounded_bytes(&self) -> usize {
        self.raw.block().rounded_size()
    }

    /// Number of handles sharing this buffer.
    pub fn handles(&self) -> usize {
        Arc::strong_count(&self.raw)
    }
}

impl RawBuffer {
    fn block(&self) -> &OwnedAllocation {
        self.allocation
            .as_ref()
            .expect("a buffer keeps its allocation until its last handle is dropped")
    }
}

impl Drop for RawBuffer {
    fn drop(&mut self) {
        // SAFETY: `drop` runs once, and nothing reads `self.var` after
        // this line: the handle is dropped here or moved into the
        // deletion below.
        let var = unsafe { ManuallyDrop::take(&mut self.var) };
        let Some(allocation) = self.allocation.take() else {
            return;
        };
        // The deletion op frees the block (by dropping it) after every op
        // pushed before it on the var. If the push is refused, the closure is
        // dropped unrun and the block freed now: see "Deletion" in the module
        // docs for why that is sound.
        let _ = self.engine.delete_var_with(var, move || drop(allocation));
    }
}

impl<T> fmt::Debug for Tensor<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor")
            .field("var", &self.raw.var.id())
            .field("elem", &std::any::type_name::<T>())
            .field("len", &self.len)
            .field("context", &self.raw.block().context())
            .finish()
    }
}

/// Allocates room for `len` values of `T` from `storage` and initialises
/// every one with `init`, which must write each slot.
pub(super) fn allocate_init<T: Copy>(
    storage: &Arc<dyn Storage>,
    len: usize,
    init: impl FnOnce(&mut [MaybeUninit<T>]),
) -> Result<OwnedAllocation, StorageError> {
    const {
        assert!(
            mem::align_of::<T>() <= 64,
            "element alignment above 64 bytes"
        )
    };
    let bytes = len
        .checked_mul(mem::size_of::<T>())
        .ok_or(StorageError::TooLarge {
            ctx: storage.context(),
            asked: usize::MAX,
            align: storage.alignment(),
        })?;
    let mut allocation = OwnedAllocation::new(Arc::clone(storage), bytes)?;
    debug_assert_eq!(allocation.as_ptr() as usize % mem::align_of::<T>(), 0);
    let ptr = allocation
        .as_uninit_mut()
        .as_mut_ptr()
        .cast::<MaybeUninit<T>>();
    // SAFETY: the block is at least `len * size_of::<T>()` bytes and aligned
    // to 64 or more: only this crate's managers make allocations
    // (`Allocation::new` is crate-private) and their configured alignment is
    // validated to be at least 64, while `T`'s alignment is at most 64 (the
    // const assertion above). It is exclusively ours through `&mut
    // allocation`; `MaybeUninit<T>` has no validity requirement. For a
    // zero-sized `T` the pointer is non-null and aligned, as a slice needs.
    let slots = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
    init(slots);
    Ok(allocation)
}

/// A read-only view of a tensor's values inside an op body; dereferences to
/// `&[T]`. Made by [`Tensor::read`].
pub struct ReadView<'a, T> {
    slice: &'a [T],
    flag: &'a BorrowFlag,
}

impl<T> Deref for ReadView<'_, T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        self.slice
    }
}

impl<T> Drop for ReadView<'_, T> {
    fn drop(&mut self) {
        self.flag.end_read();
    }
}

impl<T: fmt::Debug> fmt::Debug for ReadView<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.slice, f)
    }
}

/// The single writable view of a tensor's values inside an op body;
/// dereferences to `&mut [T]`. Made by [`Tensor::write`].
pub struct WriteView<'a, T> {
    slice: &'a mut [T],
    flag: &'a BorrowFlag,
}

impl<T> Deref for WriteView<'_, T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        self.slice
    }
}

impl<T> DerefMut for WriteView<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.slice
    }
}

impl<T> Drop for WriteView<'_, T> {
    fn drop(&mut self) {
        self.flag.end_write();
    }
}

impl<T: fmt::Debug> fmt::Debug for WriteView<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.slice, f)
    }
}

/// The kind of a view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// A read view (`&[T]`).
    Read,
    /// A write view (`&mut [T]`).
    Write,
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Access::Read => "read",
            Access::Write => "write",
        })
    }
}

/// Why a view of a tensor was refused. Converts into an
/// [`OpError`](crate::OpError) with `?` inside an op body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ViewError {
    /// The op did not declare the tensor's var at all.
    #[error(
        "op `{op}` asked for a {access} view of the tensor of {var}, which it did not \
         declare; add `tensor.var()` to the op's {}",
        if *access == Access::Read { "reads (or writes)" } else { "writes" }
    )]
    NotDeclared {
        /// The op's name.
        op: String,
        /// The tensor's var.
        var: VarId,
        /// The view asked for.
        access: Access,
    },
    /// The op declared the tensor's var as read only and asked to write it.
    #[error(
        "op `{op}` asked for a write view of the tensor of {var}, which it declared \
         as read only; declare it with `writes` to write it"
    )]
    ReadOnly {
        /// The op's name.
        op: String,
        /// The tensor's var.
        var: VarId,
    },
    /// Another view of the tensor is alive and the two would overlap (two
    /// write views, or a read and a write view).
    #[error(
        "op `{op}` asked for a {access} view of the tensor of {var} while a {held} \
         view of it is alive; drop the earlier view first (or, in an async op, do \
         not complete the op while a view is alive)"
    )]
    Borrowed {
        /// The op's name.
        op: String,
        /// The tensor's var.
        var: VarId,
        /// The view asked for.
        access: Access,
        /// The kind of view that is alive.
        held: Access,
    },
}

/// The `RefCell`-like flag of one buffer; the state machine is in the module
/// docs ("The borrow flag").
struct BorrowFlag(AtomicUsize);

/// No view is alive.
const UNUSED: usize = 0;
/// One write view is alive.
const WRITING: usize = usize::MAX;
/// The most read views at once (one below `WRITING`).
const MAX_READERS: usize = usize::MAX - 1;

impl BorrowFlag {
    fn new() -> Self {
        BorrowFlag(AtomicUsize::new(UNUSED))
    }

    /// Counts one more read view; refused while a write view is alive.
    fn try_read(&self) -> Result<(), Access> {
        let mut cur = self.0.load(Ordering::Relaxed);
        loop {
            if cur == WRITING || cur == MAX_READERS {
                return Err(if cur == WRITING {
                    Access::Write
                } else {
                    Access::Read
                });
            }
            match self
                .0
                .compare_exchange_weak(cur, cur + 1, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return Ok(()),
                Err(now) => cur = now,
            }
        }
    }

    /// Takes the single write view; refused while any view is alive.
    fn try_write(&self) -> Result<(), Access> {
        match self
            .0
            .compare_exchange(UNUSED, WRITING, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => Ok(()),
            Err(WRITING) => Err(Access::Write),
            Err(_) => Err(Access::Read),
        }
    }

    fn end_read(&self) {
        let prev = self.0.fetch_sub(1, Ordering::Release);
        debug_assert!(prev != UNUSED && prev != WRITING);
    }

    fn end_write(&self) {
        debug_assert_eq!(self.0.load(Ordering::Relaxed), WRITING);
        self.0.store(UNUSED, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn handles_and_views_are_thread_safe() {
        assert_send_sync::<Tensor<f32>>();
        assert_send_sync::<Buffer>();
        assert_send_sync::<ReadView<'static, u64>>();
        assert_send_sync::<WriteView<'static, u64>>();
        assert_send_sync::<ViewError>();
        assert_send_sync::<super::super::Workspace<'static, f64>>();
    }

    #[test]
    fn borrow_flag_follows_the_state_table() {
        let f = BorrowFlag::new();
        f.try_read().unwrap();
        f.try_read().unwrap();
        assert_eq!(f.try_write(), Err(Access::Read));
        f.end_read();
        f.end_read();
        f.try_write().unwrap();
        assert_eq!(f.try_write(), Err(Access::Write));
        assert_eq!(f.try_read(), Err(Access::Write));
        f.end_write();
        f.try_read().unwrap();
        f.end_read();
        assert_eq!(f.0.load(Ordering::Relaxed), UNUSED);
    }
}
