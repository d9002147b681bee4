//! How an op block names its vars: plain pointers, plus one word per var
//! that the var's protocol uses while the op is pending.

use std::cell::UnsafeCell;
use std::ptr::NonNull;

use crate::sync::Arc;

use super::super::op::OpPtr;
use super::VarInner;

/// A var named by an op block: a plain pointer, with no reference count of
/// its own.
///
/// Why: cloning an `Arc` per op and var touched the var's count line from
/// the pushing thread and again from the completing one — a cache line
/// handed over twice per op for nothing. Instead a var holds one reference
/// to itself from its creation until its last `Var` handle is dropped
/// and no op is pending on it (see `VarInner::orphan`). Every `VarPtr` lives
/// in the block of an op appended to that var, so the var is alive from the
/// append until the op releases it in `complete`; before the append the
/// pusher's `&Var` keeps it alive. `VarPtr` is neither `Clone` nor `Copy`: it
/// is only ever reached through the block of a pending op.
pub(crate) struct VarPtr(NonNull<VarInner>);

// SAFETY: a `VarPtr` stands for an `Arc<VarInner>` (which is `Send + Sync`)
// kept alive by the var's self-reference; it is only dereferenced while that
// holds (see the type's docs).
unsafe impl Send for VarPtr {}
// SAFETY: as above; `&VarPtr` gives only `&VarInner`, which is `Sync`.
unsafe impl Sync for VarPtr {}

impl VarPtr {
    pub(crate) fn new(var: &Arc<VarInner>) -> Self {
        VarPtr(NonNull::from(&**var))
    }

    /// The address, for deduplication and comparisons.
    #[inline]
    pub(crate) fn addr(&self) -> usize {
        self.0.as_ptr() as usize
    }

    /// A counted handle to the var, for keeping it beyond the op.
    pub(crate) fn to_arc(&self) -> Arc<VarInner> {
        let p = self.0.as_ptr() as *const VarInner;
        // SAFETY: the var is alive (see the type's docs) and was allocated by
        // `Arc::new` in `Core::new_var`; the new count is owned by the result.
        unsafe {
            Arc::increment_strong_count(p);
            Arc::from_raw(p)
        }
    }

    /// Drops the var's self-reference. The var may be freed here: the
    /// caller must not touch it through this pointer afterwards.
    ///
    /// # Safety
    ///
    /// The caller's completion call returned `true`: it took the var's
    /// self-reference out of the var's state and now owns it.
    pub(crate) unsafe fn release_self_ref(&self) {
        // SAFETY: per the contract above, one strong count is ours to drop.
        unsafe { Arc::decrement_strong_count(self.0.as_ptr() as *const VarInner) }
    }
}

impl std::ops::Deref for VarPtr {
    type Target = VarInner;
    #[inline]
    fn deref(&self) -> &VarInner {
        // SAFETY: a `VarPtr` is only reachable through the block of a pending
        // op appended to this var, which keeps the var alive (see the type's
        // docs); `complete` stops using it once it releases the var.
        unsafe { self.0.as_ref() }
    }
}

/// One var of an op, as its block keeps it.
pub(crate) struct VarSlot {
    pub(crate) var: VarPtr,
    /// Per-var protocol word, touched only while the op is pending on the
    /// var, and only by the thread the protocol gives it to:
    ///
    /// * a written var: the next write of the op's *run* on it (see
    ///   `VarInner::complete_write`), or 0. Written under the var's lock
    ///   before this op is granted the var; read by the thread that completes
    ///   the op, which the grant happens-before.
    /// * a read var: unused (0): every read is counted through the var's
    ///   fast-read counter (`fast_read.rs`), however it was granted.
    link: UnsafeCell<usize>,
}

impl VarSlot {
    pub(crate) fn new(var: &Arc<VarInner>) -> Self {
        VarSlot {
            var: VarPtr::new(var),
            link: UnsafeCell::new(0),
        }
    }

    /// The next op of this op's run on the var, if any.
    ///
    /// # Safety
    ///
    /// Only the thread that completes the op may call it (it owns the op).
    #[inline]
    pub(crate) unsafe fn run_next(&self) -> Option<OpPtr> {
        // SAFETY: written before the op was granted this var, which
        // happens-before its completion (see `link`).
        let p = unsafe { *self.link.get() };
        NonNull::new(p as *mut _).map(OpPtr)
    }

    /// Makes `next` the op after this one in a run.
    ///
    /// # Safety
    ///
    /// Called under the var's lock while the op waits in the var's queue:
    /// no other thread reads the word until the op is granted the var.
    #[inline]
    pub(crate) unsafe fn set_run_next(&self, next: OpPtr) {
        // SAFETY: per the contract above, this thread alone touches it now.
        unsafe { *self.link.get() = next.0.as_ptr() as usize };
    }
}

impl std::ops::Deref for VarSlot {
    type Target = VarInner;
    #[inline]
    fn deref(&self) -> &VarInner {
        &self.var
    }
}
