//! Op descriptions (what a user pushes) and op blocks (what the engine keeps
//! for a pushed op until it completes).

use std::borrow::Cow;
use std::cell::UnsafeCell;
use std::fmt;
use std::ptr::NonNull;

use crate::sync::{Arc, AtomicU8, AtomicUsize, Ordering};

use super::completion::Completion;
use super::error::OpError;
use super::inline_body::{AsyncKind, InlineBody, SyncKind};
use super::signal::Signal;
use super::var::{Var, VarSlot};

/// What an op body returns.
pub type OpResult = Result<(), OpError>;

/// Where an op runs.
///
/// `Gpu(id)` devices are simulated: each has its own worker pool and copy pool
/// under the per-device executor, so device-parallel programs can be modelled
/// on a CPU-only machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Context {
    /// CPU device `id` (all CPU ids share the CPU pools).
    Cpu(u32),
    /// Simulated GPU device `id`.
    Gpu(u32),
    /// CPU memory pinned for transfers to and from devices (runs on the CPU pools).
    CpuPinned(u32),
}

impl Default for Context {
    fn default() -> Self {
        Context::Cpu(0)
    }
}

impl Context {
    /// The simulated GPU id, if this is a GPU context.
    pub fn gpu_id(self) -> Option<u32> {
        match self {
            Context::Gpu(id) => Some(id),
            _ => None,
        }
    }
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Context::Cpu(id) => write!(f, "cpu({id})"),
            Context::Gpu(id) => write!(f, "gpu({id})"),
            Context::CpuPinned(id) => write!(f, "cpu_pinned({id})"),
        }
    }
}

/// The kind of an op, which decides the pool that runs it (as MXNet's
/// `FnProperty`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Property {
    /// An ordinary computation.
    #[default]
    Normal,
    /// A copy from the CPU to a device: runs on the device's copy workers.
    CopyToDevice,
    /// A copy from a device to the CPU: runs on the device's copy workers.
    CopyFromDevice,
    /// A CPU op served by the priority pool, highest priority first.
    CpuPrioritized,
    /// An op whose body only starts work elsewhere; the per-device executor
    /// may run it inline on the thread that made it ready.
    Async,
    /// A deletion op (pushed by `delete_var`); always runs, may run inline.
    DeleteVar,
    /// Runs even when a var it reads or writes has failed.
    NoSkip,
}

impl Property {
    /// True when the op runs even if its inputs failed.
    pub(crate) fn never_skipped(self) -> bool {
        matches!(self, Property::NoSkip | Property::DeleteVar)
    }
}

/// A list of vars an op reads or writes, borrowed for the duration of the push.
///
/// Built from `&[Var]`, `&[&Var]`, `&Vec<Var>` or arrays of either, so pushing
/// allocates nothing.
#[derive(Clone, Copy)]
pub struct VarList<'a>(VarListInner<'a>);

#[derive(Clone, Copy)]
enum VarListInner<'a> {
    Owned(&'a [Var]),
    Refs(&'a [&'a Var]),
}

impl<'a> VarList<'a> {
    /// The empty list.
    pub const EMPTY: VarList<'static> = VarList(VarListInner::Owned(&[]));

    pub(crate) fn len(&self) -> usize {
        match self.0 {
            VarListInner::Owned(v) => v.len(),
            VarListInner::Refs(v) => v.len(),
        }
    }

    /// Calls `f` on each var in order, stopping at its first error.
    ///
    /// Why not [`VarList::iter`]: its `next` matches on the kind of list
    /// for every var, and a chain of two lists adds a check of which list
    /// it is in. Here the match is made once per list and each arm is a
    /// plain slice loop: with this and [`VarList::push_slots`], a
    /// one-thread `random` went from 1,718 to 1,631 instructions per op
    /// (callgrind).
    #[inline(always)]
    pub(crate) fn try_each<E>(&self, mut f: impl FnMut(&'a Var) -> Result<(), E>) -> Result<(), E> {
        match self.0 {
            VarListInner::Owned(v) => v.iter().try_for_each(&mut f),
            VarListInner::Refs(v) => v.iter().try_for_each(|v| f(v)),
        }
    }

    /// True when `f` holds for every var (stops at the first that fails);
    /// one match per list, as [`VarList::try_each`].
    #[inline(always)]
    pub(crate) fn all(&self, mut f: impl FnMut(&'a Var) -> bool) -> bool {
        match self.0 {
            VarListInner::Owned(v) => v.iter().all(&mut f),
            VarListInner::Refs(v) => v.iter().all(|v| f(v)),
        }
    }

    /// Appends a slot for each var, in order, to `slots` (one match per
    /// list, as [`VarList::try_each`]).
    #[inline(always)]
    pub(crate) fn push_slots(&self, slots: &mut VarVec) {
        match self.0 {
            VarListInner::Owned(v) => v.iter().for_each(|v| slots.push(VarSlot::new(&v.inner))),
            VarListInner::Refs(v) => v.iter().for_each(|v| slots.push(VarSlot::new(&v.inner))),
        }
    }

    /// The vars in order.
    #[inline]
    pub(crate) fn iter(&self) -> VarIter<'a> {
        match self.0 {
            VarListInner::Owned(v) => VarIter::Owned(v.iter()),
            VarListInner::Refs(v) => VarIter::Refs(v.iter()),
        }
    }
}

/// Iterator over a [`VarList`].
pub(crate) enum VarIter<'a> {
    Owned(std::slice::Iter<'a, Var>),
    Refs(std::slice::Iter<'a, &'a Var>),
}

impl<'a> Iterator for VarIter<'a> {
    type Item = &'a Var;

    #[inline]
    fn next(&mut self) -> Option<&'a Var> {
        match self {
            VarIter::Owned(i) => i.next(),
            VarIter::Refs(i) => i.next().copied(),
        }
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            VarIter::Owned(i) => i.size_hint(),
            VarIter::Refs(i) => i.size_hint(),
        }
    }
}

impl<'a> From<&'a [Var]> for VarList<'a> {
    fn from(v: &'a [Var]) -> Self {
        VarList(VarListInner::Owned(v))
    }
}
impl<'a> From<&'a Vec<Var>> for VarList<'a> {
    fn from(v: &'a Vec<Var>) -> Self {
        VarList(VarListInner::Owned(v))
    }
}
impl<'a, const N: usize> From<&'a [Var; N]> for VarList<'a> {
    fn from(v: &'a [Var; N]) -> Self {
        VarList(VarListInner::Owned(v))
    }
}
impl<'a> From<&'a [&'a Var]> for VarList<'a> {
    fn from(v: &'a [&'a Var]) -> Self {
        VarList(VarListInner::Refs(v))
    }
}
impl<'a> From<&'a Vec<&'a Var>> for VarList<'a> {
    fn from(v: &'a Vec<&'a Var>) -> Self {
        VarList(VarListInner::Refs(v))
    }
}
impl<'a, const N: usize> From<&'a [&'a Var; N]> for VarList<'a> {
    fn from(v: &'a [&'a Var; N]) -> Self {
        VarList(VarListInner::Refs(v))
    }
}
impl<'a> From<&'a Var> for VarList<'a> {
    fn from(v: &'a Var) -> Self {
        VarList(VarListInner::Owned(std::slice::from_ref(v)))
    }
}

/// Description of an op to push: name, vars read and written, context,
/// property and priority. Cheap to build; borrows its var lists.
///
/// # Examples
///
/// ```
/// use depengine::{Engine, OpDesc, Property};
/// let engine = Engine::builder().build().unwrap();
/// let (a, b) = (engine.new_var(), engine.new_var());
/// let desc = OpDesc::new("copy a to b")
///     .reads(&a)
///     .writes(&b)
///     .property(Property::Normal)
///     .priority(3);
/// engine.push(desc, |_| Ok(())).unwrap();
/// // Several vars: a slice of vars or of references.
/// let both = [&a, &b];
/// engine.push(OpDesc::new("read both").reads(&both), |_| Ok(())).unwrap();
/// engine.wait_for_all().unwrap();
/// assert_eq!((a.version(), b.version()), (0, 1));
/// ```
#[derive(Clone)]
pub struct OpDesc<'a> {
    pub(crate) name: Cow<'static, str>,
    pub(crate) reads: VarList<'a>,
    pub(crate) writes: VarList<'a>,
    pub(crate) context: Context,
    pub(crate) property: Property,
    pub(crate) priority: i32,
}

impl<'a> OpDesc<'a> {
    /// An op named `name` that reads and writes nothing, on `cpu(0)`, normal
    /// property, priority 0.
    pub fn new(name: impl Into<Cow<'static, str>>) -> Self {
        OpDesc {
            name: name.into(),
            reads: VarList::EMPTY,
            writes: VarList::EMPTY,
            context: Context::Cpu(0),
            property: Property::Normal,
            priority: 0,
        }
    }

    /// Vars the op reads (replaces any earlier list).
    pub fn reads(mut self, vars: impl Into<VarList<'a>>) -> Self {
        self.reads = vars.into();
        self
    }

    /// Vars the op writes (replaces any earlier list).
    pub fn writes(mut self, vars: impl Into<VarList<'a>>) -> Self {
        self.writes = vars.into();
        self
    }

    /// Where the op runs.
    pub fn context(mut self, context: Context) -> Self {
        self.context = context;
        self
    }

    /// The op's kind.
    pub fn property(mut self, property: Property) -> Self {
        self.property = property;
        self
    }

    /// Priority among ready ops of the same pool: higher runs first.
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    /// The op's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Debug for OpDesc<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpDesc")
            .field("name", &self.name)
            .field("reads", &self.reads.len())
            .field("writes", &self.writes.len())
            .field("context", &self.context)
            .field("property", &self.property)
            .field("priority", &self.priority)
            .finish()
    }
}

/// What a running op body can see about itself.
pub struct OpCtx<'a> {
    pub(crate) op: CtxOp<'a>,
    pub(crate) worker: Option<usize>,
}

/// Where a running body's facts about its op come from.
pub(crate) enum CtxOp<'a> {
    /// An op pushed through the var protocol: its block.
    Block(&'a OpBlock),
    /// An op a [`Serial`](crate::Serial) scope runs at its push, which has
    /// no block: its description and sequence number.
    Serial { desc: &'a OpDesc<'a>, seq: u64 },
}

impl OpCtx<'_> {
    /// The op's name.
    pub fn name(&self) -> &str {
        match &self.op {
            CtxOp::Block(b) => &b.name,
            CtxOp::Serial { desc, .. } => &desc.name,
        }
    }

    /// The op's context.
    pub fn context(&self) -> Context {
        match &self.op {
            CtxOp::Block(b) => b.context,
            CtxOp::Serial { desc, .. } => desc.context,
        }
    }

    /// The op's priority.
    pub fn priority(&self) -> i32 {
        match &self.op {
            CtxOp::Block(b) => b.priority,
            CtxOp::Serial { desc, .. } => desc.priority,
        }
    }

    /// Engine-wide push sequence number of this op.
    pub fn seq(&self) -> u64 {
        match &self.op {
            CtxOp::Block(b) => b.seq,
            CtxOp::Serial { seq, .. } => *seq,
        }
    }

    /// Index of the worker running the op within its pool, or `None` when it
    /// runs inline on a pushing or completing thread, or on a thread helping
    /// while it waits ([`EngineBuilder::help_while_waiting`](crate::EngineBuilder::help_while_waiting)).
    pub fn worker(&self) -> Option<usize> {
        self.worker
    }

    /// True when the op declared `var` among the vars it reads (and not writes).
    pub fn declares_read(&self, var: &Var) -> bool {
        let addr = Arc::as_ptr(&var.inner) as usize;
        match &self.op {
            CtxOp::Block(b) => b.reads().iter().any(|v| v.var.addr() == addr),
            // Rule 2: a var both read and written is written.
            CtxOp::Serial { desc, .. } => {
                desc.reads.iter().any(|v| v == var) && !desc.writes.iter().any(|v| v == var)
            }
        }
    }

    /// True when the op declared `var` among the vars it writes.
    pub fn declares_write(&self, var: &Var) -> bool {
        let addr = Arc::as_ptr(&var.inner) as usize;
        match &self.op {
            CtxOp::Block(b) => b.writes().iter().any(|v| v.var.addr() == addr),
            CtxOp::Serial { desc, .. } => desc.writes.iter().any(|v| v == var),
        }
    }
}

pub(crate) type SyncBody = Box<dyn FnOnce(&OpCtx<'_>) -> OpResult + Send>;
pub(crate) type AsyncBody = Box<dyn FnOnce(&OpCtx<'_>, Completion) + Send>;
pub(crate) type SharedBody = Arc<dyn Fn(&OpCtx<'_>) -> OpResult + Send + Sync>;

/// The body of an op, taken out of the block when it runs.
pub(crate) enum Body {
    /// Nothing to run (a recycled block, or a body already taken).
    Empty,
    /// Returns its result.
    Sync(SyncBody),
    /// Completes through a [`Completion`].
    Async(AsyncBody),
    /// A reusable operator's body.
    Shared(SharedBody),
    /// A small sync body stored in the block (`inline_body.rs`).
    InlineSync(InlineBody<SyncKind>),
    /// A small async body stored in the block.
    InlineAsync(InlineBody<AsyncKind>),
}

impl Body {
    /// A sync body: in place when it is small enough, else boxed.
    pub(crate) fn sync<F>(f: F) -> Body
    where
        F: FnOnce(&OpCtx<'_>) -> OpResult + Send + 'static,
    {
        match InlineBody::new_sync(f) {
            Ok(inline) => Body::InlineSync(inline),
            Err(f) => Body::Sync(Box::new(f)),
        }
    }

    /// An async body: in place when it is small enough, else boxed.
    pub(crate) fn asynchronous<F>(f: F) -> Body
    where
        F: FnOnce(&OpCtx<'_>, Completion) + Send + 'static,
    {
        match InlineBody::new_async(f) {
            Ok(inline) => Body::InlineAsync(inline),
            Err(f) => Body::Async(Box::new(f)),
        }
    }
}

/// What the engine keeps for a pushed op.
///
/// Lifecycle: taken from the engine's block pool by the pushing thread, which
/// fills every field, then published into the queues of its vars. From then on
/// the plain fields are read-only until the op completes; `body` and `poisoned`
/// belong to the one thread that brought `wait` to zero (it runs the op).
/// After completion the block goes back to the pool.
// `repr(C)` keeps the declared order: the fields a worker touches for every
// op (counter, kind, routing, var list with its inline storage, body) fill
// the first two cache lines; the cold ones (name, sequence number, signal,
// async hand-over) come last. Every line the pusher writes is a line the
// worker must fetch from the pusher's core, so fewer lines per op is what
// makes handing an op over cheap. The pusher writes the cold line too, but
// a worker reads or rewrites it only when `cold_owned` says there is
// something there to tell or drop (see that field).
#[repr(C, align(64))]
pub(crate) struct OpBlock {
    /// Dependencies still missing, plus one guard held by the pusher while it
    /// appends the op to its vars (so the op cannot start before every var has it).
    pub(crate) wait: AtomicUsize,
    pub(crate) priority: i32,
    /// Number of leading entries of `vars` that are written.
    pub(crate) nwrites: u32,
    pub(crate) property: Property,
    /// Internal waits that write a var without counting as a write.
    pub(crate) bump_version: bool,
    /// Met a deleted var at push time: fails instead of running.
    pub(crate) poisoned: UnsafeCell<bool>,
    /// Async ops: where the body is (see `completion.rs`, "completion
    /// during the body").
    pub(crate) async_phase: AtomicU8,
    pub(crate) context: Context,
    /// The cold line holds something the completion must tell or drop: a
    /// signal, or a name the push handed over as an owned string. Set by
    /// the push, on the first line, which the completing thread reads
    /// anyway.
    ///
    /// Why: every push writes the cold line (name, sequence number,
    /// signal) on the pushing thread's core. A completion that read the
    /// signal and a reset that rewrote the name and signal fetched that
    /// line from the pusher's core for every op, where nearly every op
    /// has no signal and a `'static` name: in `perf` of the empty `fan` at
    /// one worker, the load of `signal` held 11–17% of `Core::complete`'s
    /// samples. Now a plain op's cold line never leaves the pushing
    /// thread's core, which writes it again when it takes the block back.
    pub(crate) cold_owned: bool,
    /// `vars` lives on the heap (the push sets it once it has filled the
    /// list), so that [`OpBlock::prefetch_spilled_vars`] can tell from the
    /// first line: the vector's own flag, its capacity, is on the second,
    /// which a completion granting many ops has not asked for yet.
    pub(crate) vars_on_heap: bool,
    /// The vars, deduplicated: the written ones first, then those only read.
    pub(crate) vars: VarVec,
    pub(crate) body: UnsafeCell<Body>,
    pub(crate) seq: u64,
    pub(crate) name: Cow<'static, str>,
    /// Told the outcome when the op completes.
    pub(crate) signal: Option<Arc<Signal>>,
    /// Async ops: a result handed over while the body was still running.
    pub(crate) async_result: UnsafeCell<Option<Box<AsyncResult>>>,
}

/// The body of an async op is not running (sync ops stay here).
pub(crate) const PHASE_IDLE: u8 = 0;
/// The async body is running on the executing thread.
pub(crate) const PHASE_IN_BODY: u8 = 1;
/// The completion arrived while the body was running; the executing thread
/// completes the op once the body has returned.
pub(crate) const PHASE_DONE_IN_BODY: u8 = 2;
/// The body returned before the completion arrived; the completion
/// completes the op.
pub(crate) const PHASE_BODY_RETURNED: u8 = 3;

/// What an async completion reports.
pub(crate) type AsyncResult = Result<(), (super::error::FailureKind, String)>;

/// Vars kept inline in an op block before spilling to the heap.
pub(crate) const INLINE_VARS: usize = 3;

/// Slots of a spilled var list asked for ahead at most (eight lines): an
/// op of more vars meets the misses on the rest.
const SPILL_PREFETCH_SLOTS: usize = 32;

/// An op's var list: inline for the common few vars.
pub(crate) type VarVec = smallvec::SmallVec<[VarSlot; INLINE_VARS]>;

impl OpBlock {
    pub(crate) fn empty() -> Self {
        OpBlock {
            wait: AtomicUsize::new(0),
            seq: 0,
            name: Cow::Borrowed(""),
            nwrites: 0,
            vars: VarVec::new(),
            context: Context::Cpu(0),
            cold_owned: false,
            vars_on_heap: false,
            property: Property::Normal,
            priority: 0,
            bump_version: true,
            body: UnsafeCell::new(Body::Empty),
            poisoned: UnsafeCell::new(false),
            signal: None,
            async_phase: AtomicU8::new(PHASE_IDLE),
            async_result: UnsafeCell::new(None),
        }
    }

    /// The vars the op writes and those it only reads, from one look at
    /// `vars`: each look at a small vector checks where its items are,
    /// and `execute` and `complete` each looked three times.
    #[inline]
    pub(crate) fn split_vars(&self) -> (&[VarSlot], &[VarSlot]) {
        self.vars.split_at(self.nwrites as usize)
    }

    /// Asks for the lines of the var list when it lives on the heap (more
    /// than [`INLINE_VARS`] vars): for reading the slots in use (a thread
    /// about to run the op), or for writing the whole capacity (a pusher
    /// about to fill a recycled block).
    ///
    /// Why: those lines were last written on another core (by the pusher,
    /// or read there by the worker that completed the block's last op),
    /// and the block's prefetches reach only the block. `execute` met the
    /// miss at the first slot it read, then asked for the vars' lines:
    /// the largest single stall of a worker on the busy `randsum` at one
    /// worker; a push of a recycled block met it in its dedup of the
    /// slots. Asked for as soon as the list's address is at hand, the
    /// miss overlaps the rest of the completion (or of the push before).
    /// Reads the block's first line only for a list kept inline; for one
    /// on the heap, also its address and capacity on the second, which the
    /// thread that fills or runs the op reads next anyway.
    #[inline]
    pub(crate) fn prefetch_spilled_vars(&self, intent: Intent) {
        if !self.vars_on_heap {
            return;
        }
        let slots = match intent {
            Intent::Fill => self.vars.capacity(),
            Intent::Read | Intent::Write => self.vars.len(),
        };
        let bytes = slots.min(SPILL_PREFETCH_SLOTS) * std::mem::size_of::<VarSlot>();
        for line in super::prefetch::lines_of(self.vars.as_ptr() as usize, bytes) {
            match intent {
                Intent::Read => super::prefetch::line(line as *const u8),
                Intent::Write | Intent::Fill => super::prefetch::line_for_write(line as *const u8),
            }
        }
    }

    /// Vars the op writes.
    #[inline]
    pub(crate) fn writes(&self) -> &[VarSlot] {
        &self.vars[..self.nwrites as usize]
    }

    /// Vars the op reads and does not write.
    #[inline]
    pub(crate) fn reads(&self) -> &[VarSlot] {
        &self.vars[self.nwrites as usize..]
    }

    /// True when the fields a push fills hold nothing that needs a drop
    /// (`Core::push_to` forgets them instead of dropping them).
    ///
    /// A reset block may keep a borrowed `'static` name: it needs no drop.
    pub(crate) fn is_reset(&mut self) -> bool {
        self.vars.is_empty()
            && !self.cold_owned
            && matches!(self.name, Cow::Borrowed(_))
            && matches!(self.body.get_mut(), Body::Empty)
            && self.signal.is_none()
            && self.async_result.get_mut().is_none()
    }

    /// Drops everything the op held; keeps the vectors' capacity for reuse.
    pub(crate) fn reset(&mut self) {
        self.vars.clear();
        self.nwrites = 0;
        // An op that ran had its body taken then; only one that never ran
        // (skipped, poisoned) still holds one. Testing first spares every
        // other op an out-of-line call to drop an empty body.
        if !matches!(self.body.get_mut(), Body::Empty) {
            *self.body.get_mut() = Body::Empty;
        }
        *self.poisoned.get_mut() = false;
        // The cold line only when it holds something (see `cold_owned`);
        // an async op's hand-over is taken before its completion, but an
        // async op clears the line anyway.
        if self.cold_owned || self.async_phase.load(Ordering::Relaxed) != PHASE_IDLE {
            self.signal = None;
            *self.async_result.get_mut() = None;
            self.name = Cow::Borrowed("");
            self.cold_owned = false;
        }
        self.async_phase.store(PHASE_IDLE, Ordering::Relaxed);
    }
}

/// What a prefetch of an op block is for.
#[derive(Clone, Copy)]
pub(crate) enum Intent {
    /// The block's two hot lines will be read (a worker about to run the
    /// op).
    Read,
    /// The block's two hot lines will be written (a completion about to
    /// grant the op).
    Write,
    /// Every line of the block will be written (a pusher about to fill a
    /// recycled block).
    // Under loom blocks are not recycled (`block_pool.rs`).
    #[cfg_attr(loom, allow(dead_code))]
    Fill,
}

/// Asks the CPU to start fetching `block`'s lines into this core's cache
/// (the two hot ones, or all of them to fill it): a block usually lies in
/// another core's cache when it is needed.
#[inline]
pub(crate) fn prefetch_block(block: *const OpBlock, intent: Intent) {
    let p = block as *const u8;
    match intent {
        // For writing, so that the stores into the block do not each wait
        // for the core that last wrote it to give the line up.
        Intent::Write => {
            super::prefetch::line_for_write(p);
            super::prefetch::line_for_write(p.wrapping_add(64));
        }
        // A push writes the name and the signal too, on the block's third
        // line, before the locked increment that numbers the op; that
        // increment waits for every store before it, so a line left out
        // here is a miss it waits on.
        Intent::Fill => {
            for line in (0..std::mem::size_of::<OpBlock>()).step_by(64) {
                super::prefetch::line_for_write(p.wrapping_add(line));
            }
        }
        Intent::Read => {
            super::prefetch::line(p);
            super::prefetch::line(p.wrapping_add(64));
        }
    }
}

/// A pointer to a live op block, passed between threads through var queues
/// and worker queues.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct OpPtr(pub(crate) NonNull<OpBlock>);

// SAFETY: an `OpPtr` is only a name for a block; the protocol in `core/`
// guarantees that the mutable parts of the block are touched by one thread at a
// time (the one that brought `wait` to zero), and `OpBlock`'s shared parts are
// `Sync` data (atomics, read-only fields). Moving the pointer to another thread
// is how an op travels from the pushing thread to a worker.
unsafe impl Send for OpPtr {}

impl OpPtr {
    /// Shared access to the block.
    ///
    /// # Safety
    ///
    /// The block must still be live: pushed and not yet recycled. That holds
    /// from the push until the completing thread hands it back to the pool.
    pub(crate) unsafe fn get<'a>(self) -> &'a OpBlock {
        // SAFETY: the caller guarantees the block is live (see above); blocks
        // are boxed and never move while live.
        unsafe { self.0.as_ref() }
    }
}

impl fmt::Debug for OpPtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpPtr({:p})", self.0)
    }
}

#[cfg(all(test, not(loom)))]
mod layout_tests {
    use super::*;

    #[test]
    fn reset_leaves_nothing_for_a_push_to_drop() {
        // A push overwrites a pooled block's name, body and signal without
        // dropping them: whatever they held must be gone after `reset`.
        let held = std::sync::Arc::new(());
        let mut b = OpBlock::empty();
        assert!(b.is_reset());
        let in_body = held.clone();
        *b.body.get_mut() = Body::sync(move |_| {
            let _keep = &in_body;
            Ok(())
        });
        // As a push with a signal or an owned name leaves the block.
        b.name = Cow::Owned("named".to_string());
        b.signal = Some(Arc::new(Signal::new()));
        b.cold_owned = true;
        assert!(!b.is_reset());
        assert_eq!(std::sync::Arc::strong_count(&held), 2);
        b.reset();
        assert!(b.is_reset());
        assert_eq!(
            std::sync::Arc::strong_count(&held),
            1,
            "reset dropped the body"
        );
    }

    #[test]
    fn an_async_op_s_reset_clears_the_cold_line_too() {
        let mut b = OpBlock::empty();
        b.async_phase.store(PHASE_BODY_RETURNED, Ordering::Relaxed);
        *b.async_result.get_mut() = Some(Box::new(Ok(())));
        assert!(!b.is_reset());
        b.reset();
        assert!(b.is_reset());
    }

    #[test]
    fn a_plain_op_s_reset_leaves_the_cold_line_alone() {
        // What `cold_owned` spares: the reset of an op with a `'static`
        // name and no signal does not write the cold line, and the block
        // is ready for the next push as it is.
        let mut b = OpBlock::empty();
        b.name = Cow::Borrowed("plain");
        b.seq = 7;
        b.reset();
        assert!(b.is_reset());
        assert_eq!(b.name, "plain");
        assert_eq!(b.seq, 7);
    }

    #[test]
    fn hot_fields_share_the_first_two_cache_lines() {
        let b = OpBlock::empty();
        let base = &b as *const OpBlock as usize;
        let end_of = |p: usize, size: usize| p + size - base;
        assert!(
            end_of(
                &b.vars as *const VarVec as usize,
                std::mem::size_of::<VarVec>()
            ) <= 128
        );
        assert!(end_of(b.body.get() as usize, std::mem::size_of::<Body>()) <= 128);
        // Read by every completion to know whether to touch the cold line.
        assert!(end_of(&b.cold_owned as *const bool as usize, 1) <= 64);
        // Read by every grant that readies an op.
        assert!(end_of(&b.vars_on_heap as *const bool as usize, 1) <= 64);
        assert!(&b.signal as *const _ as usize - base >= 128);
        assert_eq!(base % 64, 0);
    }
}
