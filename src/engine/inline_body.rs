//! Small op bodies stored in the op block itself, not in a heap box.
//!
//! # Why
//!
//! The block pool (`block_pool.rs`) takes the allocation of the block
//! itself out of the steady state, but a body that captures anything (an
//! `Arc`, an index, a size) was still boxed: one `malloc` on the pushing
//! thread and one `free` on the worker that ran it, for every op, and the
//! free lands in an allocator arena that belongs to another thread. With
//! 1 µs bodies on 2 workers, `perf` put 6% of all samples in that pair.
//!
//! A closure of at most [`INLINE_WORDS`] words, aligned to at most a word,
//! is now moved into the block next to a pointer to its two functions
//! (call, drop); bigger or more aligned closures are boxed as before.
//!
//! # Soundness
//!
//! The storage is a plain array of words, so the type system no longer
//! sees the closure: [`InlineBody`] stands in for it. It is built only from
//! an `F: Send + 'static` that fits the storage (size and alignment checked
//! before the write), it is `Send` and not `Sync` like the `Box<dyn FnOnce +
//! Send>` it replaces, and the closure inside is either called once (which
//! moves it out and consumes the body) or dropped once by `Drop`, never
//! both: `call` wraps the body in `ManuallyDrop` before it moves the closure
//! out.

use std::marker::PhantomData;
use std::mem::{align_of, size_of, ManuallyDrop, MaybeUninit};

use super::completion::Completion;
use super::op::{OpCtx, OpResult};

/// Words of closure state stored inline.
pub(crate) const INLINE_WORDS: usize = 3;

type Storage = [MaybeUninit<usize>; INLINE_WORDS];

/// How a body is run: with a result (`push`) or through a completion
/// (`push_async`).
pub(crate) trait Kind: 'static {
    /// The call through the type-erased storage.
    type Call: Copy + 'static;
}

/// A body that returns its result.
pub(crate) enum SyncKind {}
/// A body that completes through a [`Completion`].
pub(crate) enum AsyncKind {}

impl Kind for SyncKind {
    type Call = for<'a, 'b> unsafe fn(*mut Storage, &'a OpCtx<'b>) -> OpResult;
}
impl Kind for AsyncKind {
    type Call = for<'a, 'b> unsafe fn(*mut Storage, &'a OpCtx<'b>, Completion);
}

/// The functions of one closure type.
struct VTable<K: Kind> {
    /// Moves the closure out of the storage and calls it.
    call: K::Call,
    /// Drops the closure in place.
    drop: unsafe fn(*mut Storage),
}

/// Gives [`InlineBody`] the auto traits of the boxed body it replaces:
/// `Send`, not `Sync`.
type LikeABox = PhantomData<Box<dyn FnOnce() + Send>>;

/// A closure stored in place (see the module docs).
pub(crate) struct InlineBody<K: Kind> {
    vtable: &'static VTable<K>,
    data: Storage,
    _marker: LikeABox,
}

/// True when `F` fits the inline storage.
const fn fits<F>() -> bool {
    size_of::<F>() <= size_of::<Storage>() && align_of::<F>() <= align_of::<Storage>()
}

/// Writes `f` into fresh storage.
///
/// # Safety
///
/// `fits::<F>()` must hold.
unsafe fn store<F>(f: F) -> Storage {
    let mut data: Storage = [MaybeUninit::uninit(); INLINE_WORDS];
    // SAFETY: the caller checked that `F` fits the storage in size and
    // alignment; the storage is fresh, so nothing is overwritten.
    unsafe { data.as_mut_ptr().cast::<F>().write(f) };
    data
}

/// Drops the `F` stored at `p`.
///
/// # Safety
///
/// `p` holds a live `F`, which is not used again.
unsafe fn drop_stored<F>(p: *mut Storage) {
    // SAFETY: per the contract above.
    unsafe { p.cast::<F>().drop_in_place() }
}

/// The vtables, one per closure type: an associated const, so that a
/// reference to it is promoted to `'static`.
struct Table<F>(PhantomData<F>);

impl<F> Table<F>
where
    F: FnOnce(&OpCtx<'_>) -> OpResult + Send + 'static,
{
    const SYNC: VTable<SyncKind> = VTable {
        call: call_sync::<F>,
        drop: drop_stored::<F>,
    };
}

impl<F> Table<F>
where
    F: FnOnce(&OpCtx<'_>, Completion) + Send + 'static,
{
    const ASYNC: VTable<AsyncKind> = VTable {
        call: call_async::<F>,
        drop: drop_stored::<F>,
    };
}

/// # Safety
///
/// `p` holds a live `F`; it is moved out here and must not be used again.
unsafe fn call_sync<F>(p: *mut Storage, ctx: &OpCtx<'_>) -> OpResult
where
    F: FnOnce(&OpCtx<'_>) -> OpResult,
{
    // SAFETY: per the contract above, the value is ours to move out.
    let f = unsafe { p.cast::<F>().read() };
    f(ctx)
}

/// # Safety
///
/// As [`call_sync`].
unsafe fn call_async<F>(p: *mut Storage, ctx: &OpCtx<'_>, done: Completion)
where
    F: FnOnce(&OpCtx<'_>, Completion),
{
    // SAFETY: per the contract above, the value is ours to move out.
    let f = unsafe { p.cast::<F>().read() };
    f(ctx, done)
}

impl<K: Kind> InlineBody<K> {
    /// Stores `f` inline with `vtable`, or gives it back when it does not
    /// fit.
    ///
    /// # Safety
    ///
    /// `vtable` is the one [`Table`] made for `F`: its functions read the
    /// storage as an `F`.
    unsafe fn with_vtable<F>(f: F, vtable: &'static VTable<K>) -> Result<Self, F> {
        if !fits::<F>() {
            return Err(f);
        }
        Ok(InlineBody {
            vtable,
            // SAFETY: checked just above.
            data: unsafe { store(f) },
            _marker: PhantomData,
        })
    }
}

impl InlineBody<SyncKind> {
    /// Stores `f` inline, or gives it back when it does not fit.
    pub(crate) fn new_sync<F>(f: F) -> Result<Self, F>
    where
        F: FnOnce(&OpCtx<'_>) -> OpResult + Send + 'static,
    {
        // SAFETY: `Table::<F>::SYNC` is made for `F`.
        unsafe { Self::with_vtable(f, &Table::<F>::SYNC) }
    }

    /// Runs the closure, consuming the body.
    pub(crate) fn call(self, ctx: &OpCtx<'_>) -> OpResult {
        let mut me = ManuallyDrop::new(self);
        let call = me.vtable.call;
        // SAFETY: the storage holds the `F` this vtable was made for (set
        // together in `with_vtable`); `ManuallyDrop` keeps `Drop` from touching
        // it after `call` has moved it out.
        unsafe { call(&mut me.data, ctx) }
    }
}

impl InlineBody<AsyncKind> {
    /// Stores `f` inline, or gives it back when it does not fit.
    pub(crate) fn new_async<F>(f: F) -> Result<Self, F>
    where
        F: FnOnce(&OpCtx<'_>, Completion) + Send + 'static,
    {
        // SAFETY: `Table::<F>::ASYNC` is made for `F`.
        unsafe { Self::with_vtable(f, &Table::<F>::ASYNC) }
    }

    /// Runs the closure, consuming the body.
    pub(crate) fn call(self, ctx: &OpCtx<'_>, done: Completion) {
        let mut me = ManuallyDrop::new(self);
        let call = me.vtable.call;
        // SAFETY: as in the sync `call`.
        unsafe { call(&mut me.data, ctx, done) }
    }
}

impl<K: Kind> Drop for InlineBody<K> {
    fn drop(&mut self) {
        // SAFETY: a body not consumed by `call` still holds its closure,
        // of the type its vtable was made for.
        unsafe { (self.vtable.drop)(&mut self.data) }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::super::op::{Body, OpBlock};
    use super::*;

    /// Counts its drops: a capture whose every drop is seen.
    struct Tally(Arc<AtomicUsize>);

    impl Drop for Tally {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn with_ctx<R>(f: impl FnOnce(&OpCtx<'_>) -> R) -> R {
        let block = OpBlock::empty();
        f(&OpCtx {
            block: &block,
            worker: None,
        })
    }

    #[test]
    fn fits_by_size_and_alignment() {
        assert!(fits::<[usize; INLINE_WORDS]>());
        assert!(fits::<()>());
        assert!(!fits::<[usize; INLINE_WORDS + 1]>());
        #[repr(align(32))]
        struct Aligned(#[allow(dead_code)] u8);
        assert!(!fits::<Aligned>());
    }

    #[test]
    fn small_bodies_go_inline_and_big_ones_in_a_box() {
        let n = Arc::new(AtomicUsize::new(0));
        let t = Tally(n.clone());
        assert!(matches!(
            Body::sync(move |_| {
                let _t = &t;
                Ok(())
            }),
            Body::InlineSync(_)
        ));
        let big = [1u64; 8];
        assert!(matches!(
            Body::sync(move |_| {
                assert_eq!(big.len(), 8);
                Ok(())
            }),
            Body::Sync(_)
        ));
        let t = Tally(n.clone());
        assert!(matches!(
            Body::asynchronous(move |_, _| {
                let _t = &t;
            }),
            Body::InlineAsync(_)
        ));
        // Both small bodies were dropped unrun, once each.
        assert_eq!(n.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_called_body_runs_once_and_drops_its_captures_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let runs = Arc::new(AtomicUsize::new(0));
        let t = Tally(drops.clone());
        let r = runs.clone();
        let body = InlineBody::new_sync(move |_: &OpCtx<'_>| -> OpResult {
            let _t = &t;
            r.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .unwrap_or_else(|_| panic!("two words fit"));
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        assert!(with_ctx(|ctx| body.call(ctx)).is_ok());
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_body_dropped_unrun_drops_its_captures_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let t = Tally(drops.clone());
        let body = InlineBody::new_sync(move |_: &OpCtx<'_>| -> OpResult {
            let _t = &t;
            panic!("must not run")
        })
        .unwrap_or_else(|_| panic!("one word fits"));
        drop(body);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_panicking_body_drops_its_captures_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let t = Tally(drops.clone());
        let body = InlineBody::new_sync(move |_: &OpCtx<'_>| -> OpResult {
            let _t = &t;
            panic!("boom")
        })
        .unwrap_or_else(|_| panic!("one word fits"));
        let caught = catch_unwind(AssertUnwindSafe(|| with_ctx(|ctx| body.call(ctx))));
        assert!(caught.is_err());
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn captures_come_out_intact() {
        // Three words of distinct values, read back by the body.
        let (a, b): (u64, Box<str>) = (0x1111_2222_3333_4444, "xyz".into());
        let body = InlineBody::new_sync(move |_: &OpCtx<'_>| -> OpResult {
            Err(crate::engine::OpError::msg(format!("{a:x}{b}")))
        })
        .unwrap_or_else(|_| panic!("three words fit"));
        let err = with_ctx(|ctx| body.call(ctx)).unwrap_err();
        assert!(err.to_string().contains("1111222233334444xyz"), "{err}");
    }
}
