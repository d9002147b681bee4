//! Vars and the per-var dependency protocol.
//!
//! # The protocol
//!
//! Each var keeps, under its own short mutex, the ops that hold it and the ops
//! queued behind them, in push order:
//!
//! | state            | meaning                                            |
//! |------------------|----------------------------------------------------|
//! | reads `n`        | `n` granted reads (ready or running), no writer    |
//! | `writer = Some`  | one granted write (ready or running), no readers   |
//! | `queue`          | ops not granted yet, in push order                 |
//!
//! * **append read**: granted at once iff there is no writer and the queue is
//!   empty; otherwise queued.
//! * **append write**: granted at once iff there is no writer, no reader and the
//!   queue is empty; otherwise queued.
//! * **complete read**: the count of granted reads drops by one; when it
//!   reaches 0 and the queue head is a write, that write is granted.
//! * **complete write**: the writer leaves; if the queue head is a write it is
//!   granted alone, otherwise every read up to the next write is granted.
//!
//! This is rule 1 of the engine contract: per var, effects happen in push
//! order; reads between two writes share the var, writes hold it alone.
//!
//! Three refinements keep the pushing thread and the workers off each
//! other's cache lines, and locks off the common paths, without changing
//! these rules: granted reads are counted in and out on two counters
//! kept on different lines, so a read's completion takes no lock
//! (`fast_read.rs`), writes queued back to
//! back are granted as a run that passes the var from one to the next
//! without its lock (`protocol.rs`), and a write with nothing queued behind
//! it leaves the var with a CAS instead of the lock, after which a one-var
//! op takes the idle var with a CAS as well (`fast_write.rs`).
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
//! no lock; they are written by the write holding the var with `Release` and
//! read `Acquire`. The run, fast-read and fast-write refinements give their
//! own arguments in their docs.

mod fast_read;
mod fast_write;
mod protocol;
mod queue;
mod queue_pool;
mod slot;
#[cfg(all(test, not(loom)))]
mod test_support;

use std::fmt;

use crate::sync::{
    Arc, AtomicBool, AtomicU64, AtomicUsize, CachePadded, Mutex, Ordering, TryMutex,
};

use super::error::Failure;
use super::op::OpPtr;
use queue::OpQueue;

pub(crate) use protocol::WriteExit;
pub(crate) use queue_pool::QueuePool;
pub(crate) use slot::VarSlot;

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
/// Its memory is freed once its last handle is dropped and the last op
/// pushed on it has completed, whichever comes later (`delete_var` is the
/// way to run something at that point).
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
pub struct Var {
    pub(crate) inner: Arc<VarInner>,
    /// The engine that made the var (`inner.id.engine`), kept in the
    /// handle: every push checks it, the push reads the handle anyway,
    /// and an engine that deletes no var then never has its pushes read
    /// the var's read-only line (see `Core::check_var`).
    engine: u64,
}

impl Var {
    /// The first handle of a var made by `Core::new_var`.
    pub(crate) fn new(inner: Arc<VarInner>) -> Var {
        let engine = inner.id.engine;
        Var { inner, engine }
    }

    /// The engine that made the var, read from the handle.
    #[inline]
    pub(crate) fn engine(&self) -> u64 {
        self.engine
    }
}

impl Clone for Var {
    fn clone(&self) -> Self {
        self.inner.done.handles.fetch_add(1, Ordering::Relaxed);
        Var {
            inner: self.inner.clone(),
            engine: self.engine,
        }
    }
}

impl Drop for Var {
    fn drop(&mut self) {
        // The engine holds vars through `Arc`s too (the var's reference to
        // itself, failure logs), so the `Arc` count cannot tell when the
        // user is done with a var: the handle count can.
        if self.inner.done.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.inner.orphan();
        }
    }
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

    /// No other handle of this var exists, and every handle made from
    /// now on is a clone of this one (or of its clones): a caller that
    /// drops this handle without cloning it leaves none.
    ///
    /// Why a count of one read here proves it: handles are made only by
    /// cloning a handle, and each handle's increment comes, in the
    /// count's modification order, after that of the handle it was cloned
    /// from and before its own decrement. A value of one at some point of
    /// that order means this handle was the only one alive then, so every
    /// handle made later descends from it, and none is made while
    /// `&mut self` is held. A stale read of one says the same of an
    /// earlier point, which is enough.
    pub(crate) fn is_only_handle(&mut self) -> bool {
        self.inner.done.handles.load(Ordering::Acquire) == 1
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
    /// The pushers' side: what every append changes. A completion takes
    /// the lock only to grant queued ops (once per run of writes) or to
    /// end a fast-read drain.
    pub(crate) hot: Line<VarHot>,
    /// The completions' side: what a completion changes without the lock.
    pub(crate) done: Line<VarDone>,
    /// Read-only after creation: stays shared in every core's cache.
    pub(crate) id: VarId,
    pub(crate) name: Option<Box<str>>,
    /// Set when `delete_var` is pushed; later pushes are refused. Written
    /// once, so it lives with the read-only fields that every push reads.
    pub(crate) deleted: AtomicBool,
    /// Where the queue's deque comes from when it outgrows its inline
    /// head, and goes when the var is freed (`queue_pool.rs`).
    queues: Option<Arc<QueuePool>>,
}

impl Drop for VarInner {
    fn drop(&mut self) {
        if let Some(pool) = &self.queues {
            let queue = std::mem::replace(&mut self.hot.0.state.get_mut().queue, OpQueue::new());
            if let Some(d) = queue.into_deque() {
                pool.give(d);
            }
        }
    }
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

/// The fields of a var that appends write.
pub(crate) struct VarHot {
    pub(crate) state: TryMutex<VarState>,
    /// The fast-read epoch, `OPEN` bit and reads counted in
    /// (`fast_read.rs`), or the fast write's address, or the idle token
    /// (`fast_write.rs`).
    fast: AtomicU64,
}

/// The fields of a var that completions write.
pub(crate) struct VarDone {
    /// Completed writes; bumped only by the write that holds the var.
    pub(crate) version: AtomicU64,
    /// Mirrors `failure.is_some()` for the lock-free skip check.
    pub(crate) failed: AtomicBool,
    /// Mirrors [`VarInner::deleted`] on this line for serial scopes
    /// (`serial.rs`): their ops write this line anyway (the version), so
    /// checking the deletion here saves them the read-only line, which a
    /// var used once every many ops has often lost.
    pub(crate) deleted: AtomicBool,
    /// The failure the var carries (rule 5). Taken after `state` when both
    /// are held.
    pub(crate) failure: Mutex<Option<Arc<Failure>>>,
    /// Fast reads counted out (`fast_read.rs`).
    fast_done: AtomicU64,
    /// `Var` handles alive.
    handles: AtomicUsize,
}

pub(crate) struct VarState {
    /// Set under the lock by the deletion op's append: anything appended later
    /// is poisoned instead of touching a deleted var.
    pub(crate) deleted: bool,
    /// The var holds one strong count of itself (see `slot.rs`).
    self_ref: bool,
    /// Its last `Var` handle is gone: no more appends will come.
    orphaned: bool,
    /// A closed fast-read epoch still has reads running.
    pub(crate) draining: bool,
    pub(crate) writer: Option<OpPtr>,
    pub(crate) queue: OpQueue,
}

/// Result of appending an op to a var.
pub(crate) struct Appended {
    /// The op holds the var at once.
    pub(crate) granted: bool,
    /// The var had already been deleted by an earlier push.
    pub(crate) after_delete: bool,
}

impl VarInner {
    /// Starts fetching the line a push appends on. A hint only.
    ///
    /// The push reads the read-only line only for the deletion check, and
    /// only once the engine has deleted some var with a handle left over
    /// (`Core::check_var`), but asks for it always, with
    /// [`VarInner::prefetch_read_only`] (see `Core::push_to`).
    #[inline]
    pub(crate) fn prefetch(&self) {
        crate::engine::prefetch::line(&*self.hot);
    }

    /// Starts fetching the read-only line (the deletion flag), and with
    /// it, through the adjacent-line prefetcher, the line that shares its
    /// 128-byte pair: the completions' line when the var's allocation
    /// starts on a 128-byte boundary. A hint only.
    #[inline]
    pub(crate) fn prefetch_read_only(&self) {
        crate::engine::prefetch::line(&self.id);
    }

    /// Starts fetching the lock's line for writing, ahead of a completion
    /// that will lock the var. A hint only.
    #[inline]
    pub(crate) fn prefetch_lock_line(&self) {
        crate::engine::prefetch::line_for_write(&*self.hot);
    }

    /// Starts fetching the completions' own line (version, fast-read
    /// drain) for writing, ahead of a completion that writes it. A hint
    /// only.
    #[inline]
    pub(crate) fn prefetch_done_line(&self) {
        crate::engine::prefetch::line_for_write(&*self.done);
    }

    /// A new var: idle, holding its reference to itself (`slot.rs`), with
    /// the idle token in its `fast` word (`fast_write.rs`).
    ///
    /// Why born idle: that is the state a one-var write leaves behind, so
    /// the first one-var op on a fresh var (the output of an op, a var of
    /// its own) takes it with one CAS, as every later one does. Born
    /// empty, its first append took the lock, the self-reference (a locked
    /// increment on the `Arc`'s count line, one more line to fetch) and
    /// the unlock. Nothing else changes: a locked append takes the token
    /// back as from any idle var, and the last handle's drop releases the
    /// self-reference as it does for a var whose ops are done.
    ///
    /// `queues` is the engine's pool of queue buffers (none in unit tests
    /// of the protocol).
    pub(crate) fn new(
        id: VarId,
        name: Option<Box<str>>,
        queues: Option<Arc<QueuePool>>,
    ) -> Arc<VarInner> {
        let var = Arc::new(VarInner {
            hot: Line(VarHot {
                state: TryMutex::new(VarState {
                    deleted: false,
                    self_ref: true,
                    orphaned: false,
                    draining: false,
                    writer: None,
                    queue: OpQueue::new(),
                }),
                fast: AtomicU64::new(fast_write::IDLE),
            }),
            done: Line(VarDone {
                version: AtomicU64::new(0),
                failed: AtomicBool::new(false),
                deleted: AtomicBool::new(false),
                failure: Mutex::new(None),
                fast_done: AtomicU64::new(0),
                handles: AtomicUsize::new(1),
            }),
            id,
            name,
            deleted: AtomicBool::new(false),
            queues,
        });
        // The self-reference: a count that `orphan` (or the completion
        // that empties an orphaned var) drops.
        std::mem::forget(var.clone());
        var
    }

    pub(crate) fn describe(&self) -> String {
        match &self.name {
            Some(n) => format!("{} ({n})", self.id),
            None => self.id.to_string(),
        }
    }

    /// Records `f` unless the var already carries a failure. Called before
    /// the op after the failed one is granted, so that op sees it.
    fn record_failure(&self, f: &Arc<Failure>, failed_vars: &FailedVars) {
        let mut g = self.done.failure.lock();
        if g.is_none() {
            failed_vars.add();
            *g = Some(f.clone());
            self.done.failed.store(true, Ordering::Release);
        }
    }

    /// The var's failure, if any.
    pub(crate) fn failure(&self) -> Option<Arc<Failure>> {
        if !self.done.failed.load(Ordering::Acquire) {
            return None;
        }
        self.done.failure.lock().clone()
    }

    /// Takes the var's failure (it has been reported): the var is clean again.
    pub(crate) fn take_failure(&self, failed_vars: &FailedVars) -> Option<Arc<Failure>> {
        if !self.done.failed.load(Ordering::Acquire) {
            return None;
        }
        let mut g = self.done.failure.lock();
        self.done.failed.store(false, Ordering::Release);
        let taken = g.take();
        if taken.is_some() {
            failed_vars.remove();
        }
        taken
    }

    /// Clears the failure if it is `failure` (reported by `wait_for_all`).
    pub(crate) fn clear_failure_if(&self, failure: &Arc<Failure>, failed_vars: &FailedVars) {
        let mut g = self.done.failure.lock();
        if g.as_ref().is_some_and(|f| Arc::ptr_eq(f, failure)) {
            *g = None;
            self.done.failed.store(false, Ordering::Release);
            failed_vars.remove();
        }
    }
}

/// How many vars of one engine carry a failure (rule 5).
///
/// Before it runs an op, a worker must know whether a var of the op carries
/// a failure. Reading each var's flag costs a cache miss per var when the
/// op's vars were last touched elsewhere, and it comes before the body, so
/// nothing hides it. This count is written only when a var gains or loses
/// a failure, so it stays in every core's cache; while it is zero no var
/// needs to be read.
///
/// Why a zero read is the truth for the op that reads it: a var's failure
/// is counted (under the var's failure lock) before its flag is set, by the
/// same thread. Whatever makes the flag visible to an op granted later
/// (the var's lock, the op's wait counter, the queue that hands it to a
/// worker: release/acquire all along) makes the increment visible too: it
/// happens-before the op's load, which therefore reads that increment or
/// a later value. Each var's decrement follows its own increment (same
/// lock), so a later zero means that var's failure was cleared too, and
/// the op would have found its flag clear as well.
///
/// A var whose failure no wait will clear keeps the count above zero for
/// the engine's life: a skipped op can pass a failure on after
/// `wait_for_all` has taken that failure's log entry, and if nobody then
/// waits for the var, its flag stays set. Every op then reads its vars'
/// flags, as before the count existed, which costs time and never
/// correctness.
pub(crate) struct FailedVars(CachePadded<AtomicUsize>);

impl FailedVars {
    pub(crate) fn new() -> Self {
        FailedVars(CachePadded::new(AtomicUsize::new(0)))
    }

    /// True when no var of the engine carries a failure that the calling
    /// op could have been granted after (see the type's docs).
    #[inline]
    pub(crate) fn none(&self) -> bool {
        // Relaxed: the happens-before argument above needs only coherence.
        self.0.load(Ordering::Relaxed) == 0
    }

    fn add(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    fn remove(&self) {
        let before = self.0.fetch_sub(1, Ordering::Relaxed);
        debug_assert!(before > 0, "more failures cleared than recorded");
    }

    /// The count itself, for the unit test in `core/wait.rs` (not built under
    /// loom, whose build would otherwise warn that this is unused).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn count(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

/// Vars of one op that [`append_all`] orders and locks without a heap
/// allocation: MXNet's `randsum` ops name up to 20.
const APPEND_INLINE: usize = 24;

/// Appends an op to all its vars at once: every var's lock is taken
/// before the first append and released after the last.
///
/// Why: with several pushing threads, appending var by var could queue op X
/// before Y on one var and Y before X on another — a cycle, so neither would
/// ever run. Holding all the locks (two-phase locking) makes the appends of
/// any two ops that share vars happen in one order on every shared var.
/// The locking is deadlock-free because no thread ever waits for a lock
/// while holding one out of var-id order: the locks are first only tried,
/// in the op's own order, and when one is held elsewhere the tried ones are
/// released and all are taken in var-id order, waiting as needed.
/// One-var ops — the common case — take one lock, or none when the var is
/// idle (`fast_write.rs`).
///
/// An op that every var granted at once is ready: its writes become fast
/// writes (`fast_write.rs`) before the locks are released.
///
/// Returns how many vars granted the op at once, and whether any had been
/// deleted before.
#[inline]
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
    if n == 2 {
        return append_two(op, reads, writes, deletes);
    }
    if n == 3 {
        let all = |i| var_at(reads, writes, i);
        return append_three(op, [all(0), all(1), all(2)], deletes);
    }
    // The op's vars, writes first: the order in which the locks are tried.
    let all = |i| var_at(reads, writes, i);
    // The locks are held without guards (each guard is leaked once its
    // lock is taken, and reclaimed to reach the state or to unlock): a
    // vector of guards cost a capacity check per push and a look at where
    // its items are per pass (one-thread `random`, callgrind: 1,582 ->
    // 1,492 instructions per op without it).
    //
    // Optimistic: try every lock in the op's own order. Nothing waits while
    // holding a lock taken out of the global order, so this cannot deadlock;
    // a lock held elsewhere sends the op to the ordered path with nothing
    // held and nothing appended. Uncontended (one pushing thread, or vars
    // the workers are not completing) it spares the sort by id, which was
    // a fifth of a push of MXNet's `randsum` at one thread.
    let mut taken = 0;
    while taken < n {
        match all(taken).0.hot.state.try_lock() {
            Some(g) => g.leak(),
            None => break,
        }
        taken += 1;
    }
    if taken < n {
        for i in 0..taken {
            // SAFETY: this thread took the lock above and leaked its guard;
            // no other guard for it is alive. Dropping the guard unlocks.
            drop(unsafe { all(i).0.hot.state.reclaim() });
        }
        lock_in_id_order((0..n).map(|i| all(i).0));
    }
    // Every lock is held before the first append (two-phase locking); the
    // appends themselves may go in any order.
    let mut granted = 0;
    let mut after_delete = false;
    for i in 0..n {
        let (var, is_write) = all(i);
        // SAFETY: this thread holds every lock of the op, through leaked
        // guards.
        let a = unsafe { append_held(var, is_write, op, deletes) };
        granted += a.granted as usize;
        after_delete |= a.after_delete;
    }
    if granted == n {
        // Ready at its push: its writes become fast writes before the
        // locks are released (`fast_write.rs`).
        for var in writes {
            // SAFETY: as above.
            unsafe { make_fast_write_held(var, op) };
        }
    }
    for i in 0..n {
        // SAFETY: as above; dropping this guard releases the lock.
        drop(unsafe { all(i).0.hot.state.reclaim() });
    }
    (granted, after_delete)
}

/// The op's `i`-th var, counting the writes first, and whether it is
/// written.
#[inline(always)]
fn var_at<'v>(reads: &'v [VarSlot], writes: &'v [VarSlot], i: usize) -> (&'v VarSlot, bool) {
    match writes.get(i) {
        Some(v) => (v, true),
        None => (&reads[i - writes.len()], false),
    }
}

/// [`append_all`] for three vars (writes first): the same locking, over
/// an array whose loops the compiler unrolls.
///
/// Why: the general path's loops reach each var through the index of
/// the two lists, at every pass; an op of three vars (the `wavefront`
/// grid's) spent about 30 instructions a push on it (callgrind).
#[inline(always)]
fn append_three(op: OpPtr, vars: [(&VarSlot, bool); 3], deletes: bool) -> (usize, bool) {
    let mut taken = 0;
    while taken < vars.len() {
        match vars[taken].0.hot.state.try_lock() {
            Some(g) => g.leak(),
            None => break,
        }
        taken += 1;
    }
    if taken < vars.len() {
        for (var, _) in &vars[..taken] {
            // SAFETY: this thread took the lock above and leaked its guard;
            // no other guard for it is alive. Dropping the guard unlocks.
            drop(unsafe { var.hot.state.reclaim() });
        }
        lock_in_id_order(vars.iter().map(|v| v.0));
    }
    let mut granted = 0;
    let mut after_delete = false;
    for (var, is_write) in vars {
        // SAFETY: this thread holds every lock of the op (leaked guards).
        let a = unsafe { append_held(var, is_write, op, deletes) };
        granted += a.granted as usize;
        after_delete |= a.after_delete;
    }
    if granted == vars.len() {
        for (var, is_write) in vars {
            if is_write {
                // SAFETY: as above.
                unsafe { make_fast_write_held(var, op) };
            }
        }
    }
    for (var, _) in vars {
        // SAFETY: as above; dropping this guard releases the lock.
        drop(unsafe { var.hot.state.reclaim() });
    }
    (granted, after_delete)
}

/// Takes every lock of `vars` in var-id order, leaking the guards: the
/// way of [`append_all`] when a tried lock is held elsewhere.
///
/// Var ids are unique within an engine and all vars of an op belong to
/// one engine (checked at push), so they give a total lock order; unlike
/// addresses, the same in every run, which loom's replays rely on.
/// `fill_vars` already sorts the reads and the writes of an op with more
/// than 32 vars by id, so for those the sort only merges two sorted runs.
#[cold]
fn lock_in_id_order<'v>(vars: impl Iterator<Item = &'v VarSlot>) {
    let mut order: smallvec::SmallVec<[(u64, &VarSlot); APPEND_INLINE]> =
        vars.map(|v| (v.id.id, v)).collect();
    order.sort_unstable_by_key(|o| o.0);
    for (_, v) in order {
        v.hot.state.lock().leak();
    }
}

/// Appends the op to `var`, whose lock this thread holds through a
/// leaked guard, and leaks the guard again.
///
/// # Safety
///
/// The calling thread took `var`'s lock and leaked its guard; no other
/// guard for it is alive.
#[inline(always)]
unsafe fn append_held(var: &VarSlot, is_write: bool, op: OpPtr, deletes: bool) -> Appended {
    // SAFETY: per the contract, this is the only guard of a lock this
    // thread holds; it is leaked again below, so the lock stays held.
    let mut g = unsafe { var.hot.state.reclaim() };
    let a = if is_write {
        var.append_write_locked(&mut g, op, deletes)
    } else {
        var.append_read_locked(&mut g, op)
    };
    g.leak();
    a
}

/// Makes the op, granted every var at its push, the fast write of
/// `var` (`fast_write.rs`); the lock stays held.
///
/// # Safety
///
/// As [`append_held`].
#[inline(always)]
unsafe fn make_fast_write_held(var: &VarSlot, op: OpPtr) {
    // SAFETY: as in `append_held`.
    let mut g = unsafe { var.hot.state.reclaim() };
    var.make_fast_write_locked(&mut g, op, false);
    g.leak();
}

/// [`append_all`] for two vars (one read and one write, or two of a kind):
/// the same locking, without the general path's guard arrays.
fn append_two(op: OpPtr, reads: &[VarSlot], writes: &[VarSlot], deletes: bool) -> (usize, bool) {
    let all = |i: usize| -> (&VarSlot, bool) {
        if i < reads.len() {
            (&reads[i], false)
        } else {
            (&writes[i - reads.len()], true)
        }
    };
    let (a, b) = (all(0), all(1));
    // Optimistic as in `append_all`: the second lock is only tried. When it
    // is held elsewhere, a thread holding the first may wait for it only if
    // that is var-id order; otherwise it lets go and takes them in order.
    let (mut ga, mut gb) = {
        let ga = a.0.hot.state.lock();
        match b.0.hot.state.try_lock() {
            Some(gb) => (ga, gb),
            None if a.0.id.id < b.0.id.id => (ga, b.0.hot.state.lock()),
            None => {
                drop(ga);
                let gb = b.0.hot.state.lock();
                (a.0.hot.state.lock(), gb)
            }
        }
    };
    let append = |(v, is_write): (&VarSlot, bool), g: &mut VarState| {
        if is_write {
            v.append_write_locked(g, op, deletes)
        } else {
            v.append_read_locked(g, op)
        }
    };
    let ra = append(a, &mut ga);
    let rb = append(b, &mut gb);
    if ra.granted && rb.granted {
        // Ready at its push (see `make_fast_write_locked`).
        for ((v, is_write), g) in [(a, &mut ga), (b, &mut gb)] {
            if is_write {
                v.make_fast_write_locked(g, op, false);
            }
        }
    }
    drop(gb);
    drop(ga);
    (
        ra.granted as usize + rb.granted as usize,
        ra.after_delete || rb.after_delete,
    )
}

#[cfg(all(test, not(loom)))]
mod layout_tests {
    use super::*;

    #[test]
    fn pushers_and_completions_write_different_cache_lines() {
        let v = VarInner::new(VarId { engine: 1, id: 0 }, None, None);
        let base = Arc::as_ptr(&v) as usize;
        let line = |p: usize| (p - base) / 64;
        let state = &v.hot as *const Line<VarHot> as usize;
        let state_end = state + std::mem::size_of::<VarHot>() - 1;
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
        v.orphan();
    }
}

#[cfg(all(test, not(loom)))]
mod failure_count_tests {
    use super::*;
    use crate::engine::error::FailureKind;

    fn failure(message: &str) -> Arc<Failure> {
        Arc::new(Failure {
            op: "op".into(),
            op_seq: 0,
            kind: FailureKind::Error,
            message: message.into(),
        })
    }

    #[test]
    fn a_var_is_counted_once_while_it_carries_a_failure() {
        let count = FailedVars::new();
        let a = VarInner::new(VarId { engine: 1, id: 0 }, None, None);
        let b = VarInner::new(VarId { engine: 1, id: 1 }, None, None);
        let (f1, f2) = (failure("one"), failure("two"));
        assert!(count.none());
        a.record_failure(&f1, &count);
        assert_eq!(count.count(), 1);
        // A var keeps its first failure; a second one is not counted again.
        a.record_failure(&f2, &count);
        assert_eq!(count.count(), 1);
        b.record_failure(&f2, &count);
        assert_eq!(count.count(), 2);
        // Clearing another failure than the one the var carries changes nothing.
        a.clear_failure_if(&f2, &count);
        assert_eq!(count.count(), 2);
        a.clear_failure_if(&f1, &count);
        assert_eq!(count.count(), 1);
        assert!(a.failure().is_none());
        a.clear_failure_if(&f1, &count);
        assert_eq!(count.count(), 1);
        assert!(!count.none(), "b still carries its failure");
        assert!(Arc::ptr_eq(&b.take_failure(&count).unwrap(), &f2));
        assert!(count.none());
        assert!(b.take_failure(&count).is_none());
        assert!(count.none());
        a.orphan();
        b.orphan();
    }
}

#[cfg(all(test, not(loom)))]
mod lifetime_tests {
    use crate::sync::Arc;
    use crate::{Engine, EngineKind, OpDesc};

    /// The var's memory goes once its last handle and its last op are gone,
    /// whichever comes last — through every path that holds it.
    #[test]
    fn a_var_is_freed_after_its_last_handle_and_its_last_op() {
        for kind in [EngineKind::Naive, EngineKind::Pooled, EngineKind::PerDevice] {
            let engine = Engine::builder().kind(kind).cpu_workers(2).build().unwrap();
            // Fast reads (one var), queued reads and a run of writes.
            let v = engine.new_var();
            let w = engine.new_var();
            let weak_v = Arc::downgrade(&v.inner);
            let weak_w = Arc::downgrade(&w.inner);
            for i in 0..200 {
                engine.push(OpDesc::new("r").reads(&v), |_| Ok(())).unwrap();
                if i % 7 == 0 {
                    engine
                        .push(OpDesc::new("w").writes(&v), |_| Ok(()))
                        .unwrap();
                }
                engine
                    .push(OpDesc::new("rw").reads(&v).writes(&w), |_| Ok(()))
                    .unwrap();
            }
            let v2 = v.clone();
            drop(v);
            assert!(weak_v.upgrade().is_some(), "a handle is left");
            drop(v2);
            drop(w);
            engine.wait_for_all().unwrap();
            assert!(weak_v.upgrade().is_none(), "{kind:?}: read var leaked");
            assert!(weak_w.upgrade().is_none(), "{kind:?}: written var leaked");
            // A var used by nothing goes at once.
            let idle = engine.new_var();
            let weak_idle = Arc::downgrade(&idle.inner);
            drop(idle);
            assert!(weak_idle.upgrade().is_none());
        }
    }
}

#[cfg(all(test, not(loom)))]
mod append_tests {
    use std::ptr::NonNull;

    use super::*;
    use crate::engine::op::OpBlock;

    /// An op whose tried lock is held elsewhere lets go of what it tried and
    /// takes every lock in var-id order, waiting for the held one, then
    /// appends to every var (the two-phase locking of `append_all`).
    #[test]
    fn an_op_whose_tried_lock_is_held_takes_the_locks_in_id_order() {
        let vars: Vec<Arc<VarInner>> = (0..3)
            .map(|id| VarInner::new(VarId { engine: 1, id }, None, None))
            .collect();
        let (a, b, c) = (&vars[0], &vars[1], &vars[2]);
        let block = OpBlock::empty();
        block.wait.store(4, Ordering::Relaxed);
        let op = OpPtr(NonNull::from(&block));
        let held = b.hot.state.lock();
        let (granted, reads, writes) = std::thread::scope(|s| {
            let pusher = s.spawn(move || {
                // Tried in the op's order: b (the write) first, then c, a.
                let reads = [VarSlot::new(c), VarSlot::new(a)];
                let writes = [VarSlot::new(b)];
                let (granted, _) = append_all(op, &reads, &writes, false);
                (granted, reads, writes)
            });
            // b is held, so the pusher can only be waiting for it in id
            // order, holding a, the lowest id; the tried order never locks
            // a while b is held, since it tries b first.
            while !a.hot.state.is_locked() {
                std::thread::yield_now();
            }
            assert!(!c.hot.state.is_locked(), "c comes after b in id order");
            drop(held);
            pusher.join().unwrap()
        });
        assert_eq!(granted, 3, "every var granted the op");
        assert!(b.fast_write_running(), "ready at its push: a fast write");
        // Complete the op as `Core::complete` does; every var is then idle.
        let mut ready = crate::engine::ready::ReadyList::new();
        for v in &reads {
            assert!(!v.complete_read(&mut ready, None), "no var was orphaned");
        }
        let exit = WriteExit {
            op,
            one_var: false,
            run_next: None,
        };
        assert!(!writes[0].complete_write(exit, None, &FailedVars::new(), true, &mut ready));
        assert!(ready.is_empty());
        assert_eq!(b.done.version.load(Ordering::Relaxed), 1);
        for v in &vars {
            // A read granted on an idle var opened a fast-read epoch, which
            // stays open once its reads are done.
            assert!(v.is_idle(false), "{} still has the op", v.id);
            let s = v.hot.state.lock();
            assert_eq!(v.fast_reads_running(&s), 0, "{}", v.id);
            drop(s);
            v.orphan();
            assert_eq!(Arc::strong_count(v), 1);
        }
    }
}
