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

use std::collections::VecDeque;
use std::fmt;

use crate::sync::{Arc, AtomicBool, AtomicU64, Mutex, MutexGuard, Ordering};

use super::error::Failure;
use super::op::OpPtr;
use super::ready::ReadyList;

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
        self.inner.version.load(Ordering::Acquire)
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

pub(crate) struct VarInner {
    pub(crate) id: VarId,
    pub(crate) name: Option<Box<str>>,
    /// Set when `delete_var` is pushed; later pushes are refused.
    pub(crate) deleted: AtomicBool,
    /// Mirrors `state.failure.is_some()` for the lock-free skip check.
    pub(crate) failed: AtomicBool,
    pub(crate) version: AtomicU64,
    pub(crate) state: Mutex<VarState>,
}

pub(crate) struct VarState {
    pub(crate) readers: usize,
    pub(crate) writer: Option<OpPtr>,
    pub(crate) queue: VecDeque<(OpPtr, Access)>,
    pub(crate) failure: Option<Arc<Failure>>,
    /// Set under the lock by the deletion op's append: anything appended later
    /// is poisoned instead of touching a deleted var.
    pub(crate) deleted: bool,
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
            id,
            name,
            deleted: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            version: AtomicU64::new(0),
            state: Mutex::new(VarState {
                readers: 0,
                writer: None,
                queue: VecDeque::new(),
                failure: None,
                deleted: false,
            }),
        }
    }

    pub(crate) fn describe(&self) -> String {
        match &self.name {
            Some(n) => format!("{} ({n})", self.id),
            None => self.id.to_string(),
        }
    }

    pub(crate) fn append_read(&self, op: OpPtr) -> Appended {
        Self::append_read_locked(&mut self.state.lock(), op)
    }

    fn append_read_locked(s: &mut VarState, op: OpPtr) -> Appended {
        let after_delete = s.deleted;
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
        Self::append_write_locked(&mut self.state.lock(), op, deletes)
    }

    fn append_write_locked(s: &mut VarState, op: OpPtr, deletes: bool) -> Appended {
        let after_delete = s.deleted;
        s.deleted |= deletes;
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

    pub(crate) fn complete_read(&self, ready: &mut ReadyList) {
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
    }

    /// Completes the granted write. `failure` (if any) is recorded on the var
    /// before the next op is granted, so that op sees it (rule 5).
    pub(crate) fn complete_write(
        &self,
        failure: Option<&Arc<Failure>>,
        bump_version: bool,
        ready: &mut ReadyList,
    ) {
        let mut s = self.state.lock();
        debug_assert!(
            s.writer.is_some(),
            "write completed on {} with no writer",
            self.id
        );
        s.writer = None;
        if bump_version {
            self.version.fetch_add(1, Ordering::Release);
        }
        if let Some(f) = failure {
            if s.failure.is_none() {
                s.failure = Some(f.clone());
                self.failed.store(true, Ordering::Release);
            }
        }
        match s.queue.front() {
            Some(&(op, Access::Write)) => {
                s.queue.pop_front();
                s.writer = Some(op);
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
    }

    /// The var's failure, if any.
    pub(crate) fn failure(&self) -> Option<Arc<Failure>> {
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        self.state.lock().failure.clone()
    }

    /// Takes the var's failure (it has been reported): the var is clean again.
    pub(crate) fn take_failure(&self) -> Option<Arc<Failure>> {
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        let mut s = self.state.lock();
        self.failed.store(false, Ordering::Release);
        s.failure.take()
    }

    /// Clears the failure if it is `failure` (reported by `wait_for_all`).
    pub(crate) fn clear_failure_if(&self, failure: &Arc<Failure>) {
        let mut s = self.state.lock();
        if s.failure.as_ref().is_some_and(|f| Arc::ptr_eq(f, failure)) {
            s.failure = None;
            self.failed.store(false, Ordering::Release);
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
    reads: &[Arc<VarInner>],
    writes: &[Arc<VarInner>],
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
    let key = |v: &Arc<VarInner>| v.id.id as usize;
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
        let var = if is_write { &writes[i] } else { &reads[i] };
        let mut g = var.state.lock();
        let a = if is_write {
            VarInner::append_write_locked(&mut g, op, deletes)
        } else {
            VarInner::append_read_locked(&mut g, op)
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
