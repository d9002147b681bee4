//! Vars and the per-var dependency protocol.
//!
//! # The protocol
//!
//! Each var keeps, under its own short mutex, the ops that hold it and the ops
//! queued behind them, in push order:
//!
//! | state            | meaning                                            |
//! |------------------|----------------------------------------------------|
//! | `readers = n`    | `n` granted reads (ready or running), no writer    |
//! | `writer = Some`  | one granted write (ready or running), no readers   |
//! | `queue`          | ops not granted yet, in push order                 |
//!
//! * **append read**: granted at once iff there is no writer and the queue is
//!   empty; otherwise queued.
//! * **append write**: granted at once iff there is no writer, no reader and the
//!   queue is empty; otherwise queued.
//! * **complete read**: `readers -= 1`; when it reaches 0 and the queue head is
//!   a write, that write is granted.
//! * **complete write**: the writer leaves; if the queue head is a write it is
//!   granted alone, otherwise every read up to the next write is granted.
//!
//! This is rule 1 of the engine contract: per var, effects happen in push
//! order; reads between two writes share the var, writes hold it alone.
//!
//! *Granting* an op decrements its `wait` counter; whoever brings it to zero
//! owns the op and dispatches it. The counter starts at (number of vars + 1):
//! the extra one is the pusher's guard, dropped after the op has been appended
//! to every var, so that an op never starts while it is still being appended.
//!
//! # Memory ordering
//!
//! Everything above happens under the var's mutex, so a write's effects
//! (made before its completion locked the var) happen-before the grant of the
//! next op. The `wait` decrement is `AcqRel`: the thread that reaches zero
//! acquires every grant, and hands the op to a worker through a queue
//! (release/acquire). `version` and `failed` are atomics only so that readers
//! outside the lock (`Var::version`, the skip check before running an op) need
//! no lock; they are written under the lock with `Release` and read `Acquire`.

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::fmt;
use std::ptr::NonNull;

use crate::sync::{Arc, AtomicBool, AtomicU64, Mutex, MutexGuard, Ordering};

use super::error::Failure;
use super::op::OpPtr;
use super::ready::ReadyList;

/// Most writes taken from a var's queue as one run (see
/// [`VarInner::complete_write`]): enough to amortise the lock, few enough
/// that a run's last op (the var's recorded writer) stays close to the op
/// actually running.
const MAX_RUN: usize = 32;

/// Identity of a var: the engine that made it and its number there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VarId {
    /// The engine that created the var.
    pub engine: u64,
    /// The var's number within that engine.
    pub id: u64,
}

impl fmt::Display for VarId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "var#{}", self.id)
    }
}

/// A handle that stands for a piece of mutable state (a buffer, a tensor, a
/// file). Ops declare the vars they read and write; the engine orders them.
///
/// Cheap to clone; clones name the same var. A var belongs to the engine that
/// created it: using it with another engine is an error, never a silent bug.
///
/// # Examples
///
/// ```
/// use depengine::{Engine, OpDesc};
/// let engine = Engine::builder().build().unwrap();
/// let v = engine.new_var();
/// for _ in 0..3 {
///     engine.push(OpDesc::new("w").writes(&v), |_| Ok(())).unwrap();
/// }
/// engine.wait_for_var(&v).unwrap();
/// assert_eq!(v.version(), 3);
/// ```
#[derive(Clone)]
pub struct Var {
    pub(crate) inner: Arc<VarInner>,
}

impl Var {
    /// The var's identity.
    pub fn id(&self) -> VarId {
        self.inner.id
    }

    /// The name given at creation, if any.
    pub fn name(&self) -> Option<&str> {
        self.inner.name.as_deref()
    }

    /// Number of completed writes to this var (internal waits do not count).
    pub fn version(&self) -> u64 {
        self.inner.done.version.load(Ordering::Acquire)
    }

    /// True once `delete_var` has been pushed for this var.
    pub fn is_deleted(&self) -> bool {
        self.inner.deleted.load(Ordering::Acquire)
    }
}

impl fmt::Debug for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.inner.describe())
    }
}

impl PartialEq for Var {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}
impl Eq for Var {}

impl std::hash::Hash for Var {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.inner.id.hash(state)
    }
}

/// How an op holds a var.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
}

// `repr(C)` keeps the three groups in this order, each on its own line(s).
#[repr(C)]
pub(crate) struct VarInner {
    /// The pushers' side: the state every append locks and changes. A
    /// completion takes this lock only to grant queued ops (once per run of
    /// writes) or to release a read.
    pub(crate) state: Line<Mutex<VarState>>,
    /// The completions' side: what a completion changes without the lock.
    pub(crate) done: Line<VarDone>,
    /// Read-only after creation: stays shared in every core's cache.
    pub(crate) id: VarId,
    pub(crate) name: Option<Box<str>>,
    /// Set when `delete_var` is pushed; later pushes are refused. Written
    /// once, so it lives with the read-only fields that every push reads.
    pub(crate) deleted: AtomicBool,
}

/// A cache line of its own: a value written by one group of threads does
/// not share its line with values other threads write.
#[repr(align(64))]
pub(crate) struct Line<T>(T);

impl<T> std::ops::Deref for Line<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}

/// The fields of a var that completions write.
pub(crate) struct VarDone {
    /// Completed writes; bumped only by the write that holds the var.
    pub(crate) version: AtomicU64,
    /// Mirrors `failure.is_some()` for the lock-free skip check.
    pub(crate) failed: AtomicBool,
    /// The failure the var carries (rule 5). Taken after `state` when both
    /// are held.
    pub(crate) failure: Mutex<Option<Arc<Failure>>>,
}

/// A var named by an op block: a plain pointer, with no reference count of
/// its own.
///
/// Why: cloning an `Arc` per op and var touched the var's count line from
/// the pushing thread and again from the completing one — a cache line
/// handed over twice per op for nothing. Instead a var holds one reference
/// to itself while it is *busy* (some op holds it or waits in its queue):
/// taken by the append that finds it idle, dropped by the completion that
/// leaves it idle (see [`VarInner::append_read`] and
/// [`VarInner::complete_write`]). Every `VarPtr` lives in the block of an op
/// that is appended to that var, so the var is busy, hence alive, from the
/// append until the op releases it in `complete`; before the append the
/// pusher's `&Var` keeps it alive. `VarPtr` is neither `Clone` nor `Copy`:
/// it is only ever reached through the block of a pending op.
pub(crate) struct VarPtr(NonNull<VarInner>);

// SAFETY: a `VarPtr` stands for an `Arc<VarInner>` (which is `Send + Sync`)
// kept alive by the var's busy reference; it is only dereferenced while that
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

    /// Drops the var's busy reference. The var may be freed here: the
    /// caller must not touch it through this pointer afterwards.
    ///
    /// # Safety
    ///
    /// The caller's completion left the var idle (the completion call
    /// returned `true`), so it owns the busy reference taken by the append
    /// that found the var idle.
    pub(crate) unsafe fn release_busy(&self) {
        // SAFETY: per the contract above, one strong count is ours to drop.
        unsafe { Arc::decrement_strong_count(self.0.as_ptr() as *const VarInner) }
    }
}

impl std::ops::Deref for VarPtr {
    type Target = VarInner;
    #[inline]
    fn deref(&self) -> &VarInner {
        // SAFETY: a `VarPtr` is only reachable through the block of a pending
        // op appended to this var, which keeps the var busy and so alive (see
        // the type's docs); `complete` stops using it once it releases the
        // var.
        unsafe { self.0.as_ref() }
    }
}

/// One var of an op, as its block keeps it.
pub(crate) struct VarSlot {
    pub(crate) var: VarPtr,
    /// Set when this op is part of a *run* on the var (see
    /// [`VarInner::complete_write`]): the next write of the run, which this
    /// op's completion grants without taking the var's lock. Written under
    /// the var's lock before this op is granted the var; read by the thread
    /// that completes this op, which the grant happens-before.
    run_next: UnsafeCell<Option<OpPtr>>,
}

impl VarSlot {
    pub(crate) fn new(var: &Arc<VarInner>) -> Self {
        VarSlot {
            var: VarPtr::new(var),
            run_next: UnsafeCell::new(None),
        }
    }

    /// The next op of this op's run on the var, if any.
    ///
    /// # Safety
    ///
    /// Only the thread that completes the op may call it (it owns the op).
    pub(crate) unsafe fn run_next(&self) -> Option<OpPtr> {
        // SAFETY: written before the op was granted this var, which
        // happens-before its completion (see the field's docs).
        unsafe { *self.run_next.get() }
    }
}

impl std::ops::Deref for VarSlot {
    type Target = VarInner;
    #[inline]
    fn deref(&self) -> &VarInner {
        &self.var
    }
}

pub(crate) struct VarState {
    pub(crate) readers: u32,
    /// Set under the lock by the deletion op's append: anything appended later
    /// is poisoned instead of touching a deleted var.
    pub(crate) deleted: bool,
    pub(crate) writer: Option<OpPtr>,
    pub(crate) queue: VecDeque<(OpPtr, Access)>,
}

impl VarState {
    /// No op holds the var or waits for it.
    #[inline]
    fn is_idle(&self) -> bool {
        self.writer.is_none() && self.readers == 0 && self.queue.is_empty()
    }
}

/// Result of appending an op to a var.
pub(crate) struct Appended {
    /// The op holds the var at once.
    pub(crate) granted: bool,
    /// The var had already been deleted by an earlier push.
    pub(crate) after_delete: bool,
}

impl VarInner {
    pub(crate) fn new(id: VarId, name: Option<Box<str>>) -> Self {
        VarInner {
            state: Line(Mutex::new(VarState {
                readers: 0,
                deleted: false,
                writer: None,
                queue: VecDeque::new(),
            })),
            done: Line(VarDone {
                version: AtomicU64::new(0),
                failed: AtomicBool::new(false),
                failure: Mutex::new(None),
            }),
            id,
            name,
            deleted: AtomicBool::new(false),
        }
    }

    pub(crate) fn describe(&self) -> String {
        match &self.name {
            Some(n) => format!("{} ({n})", self.id),
            None => self.id.to_string(),
        }
    }

    pub(crate) fn append_read(&self, op: OpPtr) -> Appended {
        self.append_read_locked(&mut self.state.lock(), op)
    }

    fn append_read_locked(&self, s: &mut VarState, op: OpPtr) -> Appended {
        let after_delete = s.deleted;
        self.take_busy_if_idle(s);
        let granted = s.writer.is_none() && s.queue.is_empty();
        if granted {
            s.readers += 1;
        } else {
            s.queue.push_back((op, Access::Read));
        }
        Appended {
            granted,
            after_delete,
        }
    }

    /// Appends a write; `deletes` marks the var deleted for every later append.
    pub(crate) fn append_write(&self, op: OpPtr, deletes: bool) -> Appended {
        self.append_write_locked(&mut self.state.lock(), op, deletes)
    }

    fn append_write_locked(&self, s: &mut VarState, op: OpPtr, deletes: bool) -> Appended {
        let after_delete = s.deleted;
        s.deleted |= deletes;
        self.take_busy_if_idle(s);
        let granted = s.writer.is_none() && s.readers == 0 && s.queue.is_empty();
        if granted {
            s.writer = Some(op);
        } else {
            s.queue.push_back((op, Access::Write));
        }
        Appended {
            granted,
            after_delete,
        }
    }

    /// The append that finds the var idle takes its busy reference (see
    /// [`VarPtr`]); the completion that leaves it idle drops it.
    #[inline]
    fn take_busy_if_idle(&self, s: &VarState) {
        if s.is_idle() {
            // SAFETY: every `VarInner` is created inside an `Arc`
            // (`Core::new_var`), and the caller holds a reference to it.
            unsafe { Arc::increment_strong_count(self as *const VarInner) };
        }
    }

    /// Completes a granted read. Returns `true` when the var is idle now:
    /// the caller then owns its busy reference and must drop it (after this
    /// call, which releases the lock) with [`VarPtr::release_busy`].
    #[must_use]
    pub(crate) fn complete_read(&self, ready: &mut ReadyList) -> bool {
        let mut s = self.state.lock();
        debug_assert!(
            s.readers > 0,
            "read completed on {} with no reader",
            self.id
        );
        s.readers -= 1;
        if s.readers == 0 {
            if let Some(&(op, Access::Write)) = s.queue.front() {
                s.queue.pop_front();
                s.writer = Some(op);
                grant(op, ready);
            }
        }
        s.is_idle()
    }

    /// Completes the granted write. `failure` (if any) is recorded on the var
    /// before the next op is granted, so that op sees it (rule 5). Returns
    /// `true` when the var is idle now, as [`VarInner::complete_read`].
    ///
    /// # Runs
    ///
    /// When the next queued op is a write, the writes queued right behind it
    /// are taken out of the queue with it as a *run*: each is linked to the
    /// next through `run_next` in its block, and the var's `writer` names the
    /// last. A write of a run that is not the last grants the next one
    /// itself (`run_next`), without taking the var's lock. Why: in a chain
    /// of writes the pushing thread appends to the var for every op; if the
    /// completing worker also locked it for every op, the var's line would
    /// move between their cores twice per op. Order is unchanged: the run is
    /// the queue's head, taken in push order, and anything appended later
    /// queues behind its last op.
    #[must_use]
    pub(crate) fn complete_write(
        &self,
        run_next: Option<OpPtr>,
        failure: Option<&Arc<Failure>>,
        bump_version: bool,
        ready: &mut ReadyList,
    ) -> bool {
        if let Some(next) = run_next {
            if bump_version {
                // The run holds the var: no other write can bump it now.
                let v = self.done.version.load(Ordering::Relaxed);
                self.done.version.store(v + 1, Ordering::Release);
            }
            if let Some(f) = failure {
                self.record_failure(f);
            }
            grant(next, ready);
            return false;
        }
        let mut s = self.state.lock();
        debug_assert!(
            s.writer.is_some(),
            "write completed on {} with no writer",
            self.id
        );
        s.writer = None;
        if bump_version {
            // Writers bump it only while they hold the var: no
            // read-modify-write (a locked instruction) is needed.
            let v = self.done.version.load(Ordering::Relaxed);
            self.done.version.store(v + 1, Ordering::Release);
        }
        if let Some(f) = failure {
            self.record_failure(f);
        }
        match s.queue.front() {
            Some(&(op, Access::Write)) => {
                s.queue.pop_front();
                let mut last = op;
                let mut len = 1;
                while len < MAX_RUN {
                    match s.queue.front() {
                        Some(&(next, Access::Write)) => {
                            s.queue.pop_front();
                            self.link_run(last, next);
                            last = next;
                            len += 1;
                        }
                        _ => break,
                    }
                }
                s.writer = Some(last);
                grant(op, ready);
            }
            Some(&(_, Access::Read)) => {
                while let Some(&(op, Access::Read)) = s.queue.front() {
                    s.queue.pop_front();
                    s.readers += 1;
                    grant(op, ready);
                }
            }
            None => {}
        }
        s.is_idle()
    }

    /// Records `f` unless the var already carries a failure. Called before
    /// the op after the failed one is granted, so that op sees it.
    fn record_failure(&self, f: &Arc<Failure>) {
        let mut g = self.done.failure.lock();
        if g.is_none() {
            *g = Some(f.clone());
            self.done.failed.store(true, Ordering::Release);
        }
    }

    /// Makes `next` the op after `op` in a run on this var.
    fn link_run(&self, op: OpPtr, next: OpPtr) {
        // SAFETY: `op` is queued on this var (not granted it yet), so it is
        // live and nobody reads its slot for this var until the grant, which
        // comes after this write (see `VarSlot::run_next`).
        let b = unsafe { op.get() };
        let me = self as *const VarInner as usize;
        let slot = b
            .writes()
            .iter()
            .find(|v| v.var.addr() == me)
            .expect("a queued write names the var in its writes");
        // SAFETY: as above: no other thread touches this cell now.
        unsafe { *slot.run_next.get() = Some(next) };
    }

    /// The var's failure, if any.
    pub(crate) fn failure(&self) -> Option<Arc<Failure>> {
        if !self.done.failed.load(Ordering::Acquire) {
            return None;
        }
        self.done.failure.lock().clone()
    }

    /// Takes the var's failure (it has been reported): the var is clean again.
    pub(crate) fn take_failure(&self) -> Option<Arc<Failure>> {
        if !self.done.failed.load(Ordering::Acquire) {
            return None;
        }
        let mut g = self.done.failure.lock();
        self.done.failed.store(false, Ordering::Release);
        g.take()
    }

    /// Clears the failure if it is `failure` (reported by `wait_for_all`).
    pub(crate) fn clear_failure_if(&self, failure: &Arc<Failure>) {
        let mut g = self.done.failure.lock();
        if g.as_ref().is_some_and(|f| Arc::ptr_eq(f, failure)) {
            *g = None;
            self.done.failed.store(false, Ordering::Release);
        }
    }

    /// True when no write is granted or queued (and, for `and_reads`, no read):
    /// a wait on the var can return at once.
    pub(crate) fn is_idle(&self, and_reads: bool) -> bool {
        let s = self.state.lock();
        s.writer.is_none() && s.queue.is_empty() && (!and_reads || s.readers == 0)
    }
}

/// Appends an op to all its vars at once: every var's lock is taken, in
/// var-id order, before the first append and released after the last.
///
/// Why: with several pushing threads, appending var by var could queue op X
/// before Y on one var and Y before X on another — a cycle, so neither would
/// ever run. Holding all the locks (two-phase locking) makes the appends of
/// any two ops that share vars happen in one order on every shared var;
/// taking the locks in one global order makes the locking deadlock-free.
/// One-var ops — the common case — take one lock as before.
///
/// Returns how many vars granted the op at once, and whether any had been
/// deleted before.
pub(crate) fn append_all(
    op: OpPtr,
    reads: &[VarSlot],
    writes: &[VarSlot],
    deletes: bool,
) -> (usize, bool) {
    let n = reads.len() + writes.len();
    if n == 1 {
        let a = match reads.first() {
            Some(v) => v.append_read(op),
            None => writes[0].append_write(op, deletes),
        };
        return (a.granted as usize, a.after_delete);
    }
    const INLINE: usize = 16;
    // Var ids are unique within an engine and all vars of an op belong to
    // one engine (checked at push), so they give a total lock order.
    let key = |v: &VarSlot| v.id.id as usize;
    let mut inline_order = [(0usize, false, 0usize); INLINE];
    let mut spill_order = Vec::new();
    let order: &mut [(usize, bool, usize)] = if n <= INLINE {
        &mut inline_order[..n]
    } else {
        spill_order.resize(n, (0usize, false, 0usize));
        &mut spill_order[..]
    };
    for (i, v) in reads.iter().enumerate() {
        order[i] = (key(v), false, i);
    }
    for (i, v) in writes.iter().enumerate() {
        order[reads.len() + i] = (key(v), true, i);
    }
    order.sort_unstable_by_key(|o| o.0);
    let mut guards = Vec::new();
    let mut inline_guards: [Option<MutexGuard<'_, VarState>>; INLINE] = Default::default();
    let mut granted = 0;
    let mut after_delete = false;
    for (slot, &(_, is_write, i)) in order.iter().enumerate() {
        let var: &VarInner = if is_write { &writes[i] } else { &reads[i] };
        let mut g = var.state.lock();
        let a = if is_write {
            var.append_write_locked(&mut g, op, deletes)
        } else {
            var.append_read_locked(&mut g, op)
        };
        granted += a.granted as usize;
        after_delete |= a.after_delete;
        if slot < INLINE {
            inline_guards[slot] = Some(g);
        } else {
            guards.push(g);
        }
    }
    drop(guards);
    drop(inline_guards);
    (granted, after_delete)
}

/// Grants `op` one of its dependencies; collects it when that was the last.
#[inline]
pub(crate) fn grant(op: OpPtr, ready: &mut ReadyList) {
    // SAFETY: a queued or granted op is live: it completes (and is recycled)
    // only after every one of its vars has granted it, and this is one of them.
    let block = unsafe { op.get() };
    if block.wait.fetch_sub(1, Ordering::AcqRel) == 1 {
        ready.push(op);
    }
}

#[cfg(all(test, not(loom)))]
mod layout_tests {
    use super::*;

    #[test]
    fn pushers_and_completions_write_different_cache_lines() {
        let v = VarInner::new(VarId { engine: 1, id: 0 }, None);
        let base = &v as *const VarInner as usize;
        let line = |p: usize| (p - base) / 64;
        let state = &v.state as *const Line<Mutex<VarState>> as usize;
        let state_end = state + std::mem::size_of::<Mutex<VarState>>() - 1;
        let done = &v.done as *const Line<VarDone> as usize;
        let done_end = done + std::mem::size_of::<VarDone>() - 1;
        let cold = &v.id as *const VarId as usize;
        assert_eq!(base % 64, 0);
        // The lock and the queue fit one line; the completions' fields another;
        // the read-only fields a third.
        assert_eq!(line(state), line(state_end));
        assert_eq!(line(done), line(done_end));
        assert!(line(state_end) < line(done));
        assert!(line(done_end) < line(cold));
    }
}
