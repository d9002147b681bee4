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
//! A replay's node bodies (`replay/run.rs`) are stored the same way, in
//! the graph's array of bodies: a boxed closure there cost a second,
//! dependent cache miss per node (the array entry, then the box), which
//! took about 60 ns a node from a random graph of 1 µs bodies on one
//! worker, where the array entry's line is cold.
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
//!
//! A node body ([`NodeKind`]) is built only from an `F: Fn + Send + Sync +
//! 'static`, and is `Send` and `Sync` like the `Box<dyn Fn + Send + Sync>`
//! it replaces: it is called through a shared reference, any number of
//! times and from any thread, which `Fn + Sync` allows, and it never moves
//! the closure out, so only `Drop` ends it. A closure that does not fit is
//! boxed, and the box (one word) is what is stored.

use std::marker::PhantomData;
use std::mem::{align_of, size_of, ManuallyDrop, MaybeUninit};

use super::completion::Completion;
#[cfg(all(test, not(loom)))]
use super::op::CtxOp;
use super::op::{OpCtx, OpResult};

/// Words of closure state an op's body stores inline.
pub(crate) const INLINE_WORDS: usize = 3;

/// Words of closure state a node's body stores inline: one, so that a
/// node's entry in the graph's array of bodies (vtable pointer and
/// state) is as small as the boxed body it replaces. A random graph of
/// empty bodies ran 53 ns a node at one worker with 16-byte entries and
/// 56.5 with 32-byte ones (a million nodes: the array outgrows the
/// caches, and a run reads it in no order).
pub(crate) const NODE_WORDS: usize = 1;

/// A kind's inline storage: word-aligned, uninitialized until stored.
type Storage<K> = MaybeUninit<<K as Kind>::Words>;

/// How a body is run: with a result (`push`), through a completion
/// (`push_async`), or by reference (a replay's node).
pub(crate) trait Kind: 'static {
    /// The call through the type-erased storage.
    type Call: Copy + 'static;
    /// The boxed body this kind replaces, whose auto traits (`Send`,
    /// `Sync`) the inline body takes.
    type Like;
    /// The words the closure is stored in.
    type Words;
}

/// A body that returns its result.
pub(crate) enum SyncKind {}
/// A body that completes through a [`Completion`].
pub(crate) enum AsyncKind {}
/// A replay's node body: called by reference, once per run.
pub(crate) enum NodeKind {}

impl Kind for SyncKind {
    type Call = for<'a, 'b> unsafe fn(*mut u8, &'a OpCtx<'b>) -> OpResult;
    type Like = Box<dyn FnOnce() + Send>;
    type Words = [usize; INLINE_WORDS];
}
impl Kind for AsyncKind {
    type Call = for<'a, 'b> unsafe fn(*mut u8, &'a OpCtx<'b>, Completion);
    type Like = Box<dyn FnOnce() + Send>;
    type Words = [usize; INLINE_WORDS];
}
impl Kind for NodeKind {
    type Call = unsafe fn(*const u8) -> OpResult;
    type Like = Box<dyn Fn() + Send + Sync>;
    type Words = [usize; NODE_WORDS];
}

/// The functions of one closure type.
struct VTable<K: Kind> {
    /// Calls the closure (an op's moves it out first).
    call: K::Call,
    /// Drops the closure in place.
    drop: unsafe fn(*mut u8),
}

/// A closure stored in place (see the module docs).
pub(crate) struct InlineBody<K: Kind> {
    vtable: &'static VTable<K>,
    data: Storage<K>,
    /// The auto traits of the boxed body it replaces: `Send` and not
    /// `Sync` for an op's body, both for a node's.
    _marker: PhantomData<K::Like>,
}

/// True when `F` fits the inline storage of kind `K`.
const fn fits<F, K: Kind>() -> bool {
    size_of::<F>() <= size_of::<Storage<K>>() && align_of::<F>() <= align_of::<Storage<K>>()
}

/// Writes `f` into fresh storage.
///
/// # Safety
///
/// `fits::<F, K>()` must hold.
unsafe fn store<F, K: Kind>(f: F) -> Storage<K> {
    let mut data = Storage::<K>::uninit();
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
unsafe fn drop_stored<F>(p: *mut u8) {
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

impl<F> Table<F>
where
    F: Fn() -> OpResult + Send + Sync + 'static,
{
    const NODE: VTable<NodeKind> = VTable {
        call: call_node::<F>,
        drop: drop_stored::<F>,
    };
}

/// # Safety
///
/// `p` holds a live `F`; it is moved out here and must not be used again.
unsafe fn call_sync<F>(p: *mut u8, ctx: &OpCtx<'_>) -> OpResult
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
unsafe fn call_async<F>(p: *mut u8, ctx: &OpCtx<'_>, done: Completion)
where
    F: FnOnce(&OpCtx<'_>, Completion),
{
    // SAFETY: per the contract above, the value is ours to move out.
    let f = unsafe { p.cast::<F>().read() };
    f(ctx, done)
}

/// # Safety
///
/// `p` holds a live `F` for the whole call; it stays in place.
unsafe fn call_node<F>(p: *const u8) -> OpResult
where
    F: Fn() -> OpResult,
{
    // SAFETY: per the contract above, a shared borrow of a live `F`.
    let f = unsafe { &*p.cast::<F>() };
    f()
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
        if !fits::<F, K>() {
            return Err(f);
        }
        Ok(InlineBody {
            vtable,
            // SAFETY: checked just above.
            data: unsafe { store::<F, K>(f) },
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
        unsafe { call(me.data.as_mut_ptr().cast(), ctx) }
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
        unsafe { call(me.data.as_mut_ptr().cast(), ctx, done) }
    }
}

impl InlineBody<NodeKind> {
    /// Stores `f` inline, or a box of it when it does not fit.
    pub(crate) fn new_node<F>(f: F) -> Self
    where
        F: Fn() -> OpResult + Send + Sync + 'static,
    {
        // SAFETY: `Table::<F>::NODE` is made for `F`.
        let boxed = match unsafe { Self::with_vtable(f, &Table::<F>::NODE) } {
            Ok(inline) => return inline,
            Err(f) => Box::new(f),
        };
        // SAFETY: `Table::<Box<F>>::NODE` is made for `Box<F>`.
        match unsafe { Self::with_vtable(boxed, &Table::<Box<F>>::NODE) } {
            Ok(body) => body,
            Err(_) => unreachable!("a box of a sized closure is one word"),
        }
    }

    /// Runs the closure; it stays for the next call.
    pub(crate) fn call(&self) -> OpResult {
        // SAFETY: the storage holds the `F` this vtable was made for (set
        // together in `with_vtable`), alive until `Drop`; `F: Sync` lets
        // any thread call it through a shared reference.
        unsafe { (self.vtable.call)(self.data.as_ptr().cast()) }
    }
}

impl<K: Kind> Drop for InlineBody<K> {
    fn drop(&mut self) {
        // SAFETY: a body not consumed by `call` still holds its closure,
        // of the type its vtable was made for.
        unsafe { (self.vtable.drop)(self.data.as_mut_ptr().cast()) }
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
            op: CtxOp::Block(&block),
            worker: None,
        })
    }

    #[test]
    fn fits_by_size_and_alignment() {
        assert!(fits::<[usize; INLINE_WORDS], SyncKind>());
        assert!(fits::<(), SyncKind>());
        assert!(!fits::<[usize; INLINE_WORDS + 1], SyncKind>());
        assert!(fits::<[usize; NODE_WORDS], NodeKind>());
        assert!(!fits::<[usize; NODE_WORDS + 1], NodeKind>());
        #[repr(align(32))]
        struct Aligned(#[allow(dead_code)] u8);
        assert!(!fits::<Aligned, SyncKind>());
        assert!(!fits::<Aligned, NodeKind>());
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

    #[test]
    fn a_node_body_is_no_bigger_than_the_box_it_replaces() {
        assert_eq!(
            size_of::<InlineBody<NodeKind>>(),
            size_of::<Box<dyn Fn() -> OpResult + Send + Sync>>()
        );
    }

    /// Counts the runs of a body and the drops of its one capture, in one
    /// word (so a closure of it alone goes inline).
    struct Counted(Arc<[AtomicUsize; 2]>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0[1].fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A node body holding a [`Counted`] and `extra`: runs on two threads
    /// at once, twice each, then is dropped.
    fn call_a_node_body_from_two_threads<const N: usize>(extra: [u64; N]) {
        let counts = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let c = Counted(counts.clone());
        let body = InlineBody::new_node(move || -> OpResult {
            c.0[0].fetch_add(1, Ordering::SeqCst);
            let sum: u64 = extra.iter().sum();
            Err(crate::engine::OpError::msg(format!("sum {sum}")))
        });
        let want = format!("sum {}", extra.iter().sum::<u64>());
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..2 {
                        let err = body.call().unwrap_err();
                        assert!(err.to_string().contains(&want), "{err}");
                    }
                });
            }
        });
        assert_eq!(counts[0].load(Ordering::SeqCst), 4);
        assert_eq!(
            counts[1].load(Ordering::SeqCst),
            0,
            "calls keep the closure"
        );
        drop(body);
        assert_eq!(counts[1].load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_one_word_node_body_runs_in_place_by_reference_and_drops_once() {
        assert!(fits::<Counted, NodeKind>());
        call_a_node_body_from_two_threads([]);
    }

    #[test]
    fn a_big_node_body_runs_from_its_box_and_drops_once() {
        assert!(!fits::<(Counted, [u64; 4]), NodeKind>());
        call_a_node_body_from_two_threads([1, 2, 3, 4]);
    }

    #[test]
    fn a_one_word_node_body_is_stored_inline_and_reads_back() {
        let x: u64 = 0x5555_6666_7777_8888;
        assert!(fits::<u64, NodeKind>());
        let body = InlineBody::new_node(move || -> OpResult {
            Err(crate::engine::OpError::msg(format!("{x:x}")))
        });
        for _ in 0..3 {
            let err = body.call().unwrap_err();
            assert!(err.to_string().contains("5555666677778888"), "{err}");
        }
    }

    #[test]
    fn a_panicking_node_body_can_run_again_and_drops_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let t = Tally(drops.clone());
        let body = InlineBody::new_node(move || -> OpResult {
            let _t = &t;
            panic!("boom")
        });
        for _ in 0..2 {
            assert!(catch_unwind(AssertUnwindSafe(|| body.call())).is_err());
        }
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        drop(body);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }
}
