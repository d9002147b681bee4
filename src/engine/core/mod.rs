//! The dependency core: pushing an op, running it, completing it.
//!
//! Executors only decide *where* a ready op runs; everything about *when* it
//! may run lives here and in `var/`.
//!
//! # Life of an op
//!
//! 1. `push` checks the op's vars (same engine, not deleted), takes a block
//!    from the pool, fills it, sets `wait = vars + 1`, counts the op as
//!    pending, and appends it to each var (`var/`). Then it drops its guard:
//!    `wait -= granted_at_once + 1`. Whoever brings `wait` to zero (the
//!    pusher, or a completing thread that granted the last var) dispatches it.
//! 2. `execute` skips the body if the op was poisoned (deleted var met at
//!    push) or a var it uses has failed and the op may be skipped; otherwise
//!    it runs the body, catching panics at the op boundary (rule 5).
//! 3. `complete` records a failure on the written vars before releasing them,
//!    releases every var (collecting ops that became ready), recycles the block,
//!    and counts the op completed, waking `wait_for_all` when nothing is left.
//!
//! Bookkeeping runs under [`AbortOnPanic`]: a panic there would leave var
//! queues half updated, so it aborts instead of unwinding into user code.
//!
//! # Files
//!
//! - `mod.rs`: the core's state, the push, `execute` and `complete`.
//! - `fill.rs`: copying a pushed op's vars into its block, duplicates
//!   removed (rule 2).
//! - `help.rs`: a pushing or waiting thread that runs queued ops itself
//!   (`help_while_pushing`, `help_while_waiting`).
//! - `wait.rs`: the blocking waits (`wait_for_all`, `wait_for_var`) and
//!   the no-lost-wake-up argument of `wait_for_all`.

use std::borrow::Cow;
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;

use crate::sync::{
    engine_thread_local, fence, unmodelled, Arc, AtomicBool, AtomicU64, AtomicUsize, CachePadded,
    Condvar, Mutex, Ordering, Weak,
};

use super::block_pool::BlockPool;
use super::completion::Completion;
use super::counter::ShardedCounter;
use super::error::{EngineError, Failure, FailureKind};
use super::executor::Executor;
use super::op::{
    AsyncResult, Body, Context, CtxOp, OpBlock, OpCtx, OpDesc, OpPtr, OpResult, Property,
    PHASE_BODY_RETURNED, PHASE_DONE_IN_BODY, PHASE_IN_BODY,
};
use super::push_count::PushCount;
use super::ready::{GrantWindow, ReadyList, WINDOW_MIN_VARS};
use super::signal::Signal;
use super::var::{append_all, FailedVars, QueuePool, Var, VarId, VarInner, WriteExit};
use super::EngineConfig;

mod fill;
mod help;
mod wait;

use fill::{fill_vars, Picked};

engine_thread_local! {
    /// Id of the engine whose op body runs on this thread right now (0: none).
    static CURRENT_ENGINE: Cell<u64> = const { Cell::new(0) };
}

engine_thread_local! {
    /// Id of the engine whose pool worker this thread is (0: none). Its
    /// completions leave the wake-up of `wait_for_all` to the worker's
    /// loop, which looks once it finds no op to run (`Core::wake_if_idle`).
    static WORKER_OF: Cell<u64> = const { Cell::new(0) };
}

engine_thread_local! {
    /// The engines on which this thread has a batch open, innermost last
    /// (batches nest, on one engine or several): each engine's id, and
    /// whether a batch nested in that one owes its engine a look at the
    /// lead (see [`Core::close_batch`]).
    static BATCH_ENGINES: std::cell::RefCell<Vec<(u64, bool)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Engine ids start at 1 so that 0 can mean "no engine".
static NEXT_ENGINE_ID: unmodelled::AtomicU64 = unmodelled::AtomicU64::new(1);

/// Stands, under loom, for the order that the wake-up of `wait_for_all`
/// takes from SeqCst operations on two locations: a completion's increment
/// comes before its look at `idle_waiters`, a waiter's registration before
/// its look at the counts, so one of the two looks sees the other's write
/// (see `Core::wait_idle`). Rust's SeqCst read-modify-writes and loads lie
/// in one total order, which gives that already, so the real build needs
/// nothing here; loom models SeqCst accesses as AcqRel, where both looks
/// could miss, and checks the protocol with this fence in their place.
#[inline(always)]
fn seqcst_order_for_loom() {
    #[cfg(loom)]
    fence(Ordering::SeqCst);
}

/// How an op ended.
pub(crate) enum Outcome {
    Ok,
    /// The op itself failed: a new failure.
    Failed(FailureKind, String),
    /// The op did not run because of an earlier failure, which it passes on.
    Skipped(Arc<Failure>),
}

/// A failure and the vars it has reached, kept until a wait reports it.
struct LogEntry {
    failure: Arc<Failure>,
    reported: bool,
    tainted: Vec<Arc<VarInner>>,
}

/// Aborts the process if bookkeeping panics (see the module docs).
///
/// Every normal exit of a guarded scope disarms the guard
/// ([`AbortOnPanic::disarm`]), so its drop runs only while a panic unwinds
/// through the scope, and aborts. Why not a drop that asks
/// `std::thread::panicking()`: that is a look at the process's panic count
/// at the guard's creation and another at its drop, on every push and
/// every completion. A guard made while already unwinding (a completion
/// dropped by a panicking body) needs no care either: a panic inside it
/// would be a panic during unwinding, which Rust aborts on anyway.
#[must_use = "a guard dropped at once guards nothing"]
struct AbortOnPanic;

impl AbortOnPanic {
    #[inline]
    fn new() -> Self {
        AbortOnPanic
    }

    /// Ends the guarded scope without a panic.
    #[inline]
    fn disarm(self) {
        std::mem::forget(self);
    }
}

impl Drop for AbortOnPanic {
    fn drop(&mut self) {
        eprintln!("depengine: internal panic during op bookkeeping; aborting");
        std::process::abort();
    }
}

/// The numbering of an engine's vars and the registry of the live ones.
struct VarRegistry {
    next: AtomicU64,
    live: Mutex<Vec<Weak<VarInner>>>,
}

/// The engine proper, shared by the user's handles, worker threads and
/// completion handles.
pub(crate) struct Core {
    pub(crate) id: u64,
    pub(crate) config: EngineConfig,
    self_ref: Weak<Core>,
    /// What creating a var writes: padded, so that a program creating
    /// vars while ops run does not write the line of what every push and
    /// every op reads (the engine's id, its executor, its settings).
    vars: CachePadded<VarRegistry>,
    /// Ops pushed, written by pushing threads only; its value before the
    /// increment is the op's sequence number. Owned by the first pushing
    /// thread, which adds without a locked instruction (`push_count.rs`).
    pushed: PushCount,
    /// Ops completed, written by completing threads only (sharded): split
    /// from `pushed` so that pushers and workers, and workers among
    /// themselves, do not share a counter's cache line.
    completed: ShardedCounter,
    /// Read by every completion: padded so that no field a pusher writes
    /// shares its line.
    idle_waiters: CachePadded<AtomicUsize>,
    idle_lock: Mutex<()>,
    idle_cv: Condvar,
    shut_down: AtomicBool,
    /// Set once `delete_var` has been pushed for some var of this engine
    /// that kept another handle (`mark_deleted`); until then no push reads
    /// a var's deletion flag (see `check_var`).
    any_deleted: AtomicBool,
    failures: Mutex<Vec<LogEntry>>,
    /// Read before every op: the skip check reads the op's vars only
    /// while some var carries a failure.
    failed_vars: FailedVars,
    /// Buffers of freed vars' queues (`var/queue_pool.rs`).
    queues: Arc<QueuePool>,
    blocks: BlockPool,
    /// How far pushing threads may get ahead of the completions
    /// (`lead.rs`).
    #[cfg(not(loom))]
    pub(crate) lead: super::lead::Lead,
    executor: once_cell::sync::OnceCell<Executor>,
}

impl Core {
    /// Builds the core and starts its executor's threads.
    pub(crate) fn start(config: EngineConfig) -> Result<Arc<Core>, EngineError> {
        let core = Arc::new_cyclic(|weak| Core {
            id: NEXT_ENGINE_ID.fetch_add(1, unmodelled::Ordering::Relaxed),
            config: config.clone(),
            self_ref: weak.clone(),
            vars: CachePadded::new(VarRegistry {
                next: AtomicU64::new(0),
                live: Mutex::new(Vec::new()),
            }),
            pushed: PushCount::new(),
            completed: ShardedCounter::new(),
            idle_waiters: CachePadded::new(AtomicUsize::new(0)),
            idle_lock: Mutex::new(()),
            idle_cv: Condvar::new(),
            shut_down: AtomicBool::new(false),
            any_deleted: AtomicBool::new(false),
            failures: Mutex::new(Vec::new()),
            failed_vars: FailedVars::new(),
            queues: Arc::new(QueuePool::new(config.pooled_queue_entries)),
            blocks: BlockPool::new(config.pooled_op_blocks),
            #[cfg(not(loom))]
            lead: super::lead::Lead::new(config.max_lead),
            executor: once_cell::sync::OnceCell::new(),
        });
        let executor = Executor::start(&core)?;
        if core.executor.set(executor).is_err() {
            unreachable!("executor set twice");
        }
        Ok(core)
    }

    pub(crate) fn arc(&self) -> Arc<Core> {
        self.self_ref
            .upgrade()
            .expect("engine core used after it was dropped")
    }

    fn executor(&self) -> &Executor {
        self.executor
            .get()
            .expect("executor started in Core::start")
    }

    /// Wakes a sleeping worker of each pool where a backlog waits beside
    /// it (`PoolShared::wake_for_backlog`).
    #[cfg(not(loom))]
    pub(crate) fn wake_for_backlog(&self) {
        self.executor().wake_for_backlog();
    }

    // ------------------------------------------------------------------
    // Vars
    // ------------------------------------------------------------------

    pub(crate) fn new_var(&self, name: Option<Box<str>>) -> Var {
        let id = VarId {
            engine: self.id,
            id: self.vars.next.fetch_add(1, Ordering::Relaxed),
        };
        let inner = VarInner::new(id, name, Some(self.queues.clone()));
        let mut vars = self.vars.live.lock();
        // Forget dropped vars now and then, so the registry stays as large as
        // the set of live vars (amortised O(1) per new var).
        if vars.len() >= 64 && vars.len().is_power_of_two() {
            vars.retain(|w| w.strong_count() > 0);
        }
        vars.push(Arc::downgrade(&inner));
        Var::new(inner)
    }

    /// The pool of queue buffers, for its tests.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn queue_pool(&self) -> &QueuePool {
        &self.queues
    }

    pub(crate) fn live_vars(&self) -> Vec<Arc<VarInner>> {
        self.vars
            .live
            .lock()
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    pub(crate) fn live_var_count(&self) -> usize {
        self.vars
            .live
            .lock()
            .iter()
            .filter(|w| w.strong_count() > 0)
            .count()
    }

    pub(crate) fn executor_pools(&self) -> Vec<(String, usize)> {
        self.executor().pools()
    }

    /// Threads that may run a replay's nodes at once: the workers of the
    /// pool that ordinary CPU ops go to (one under the naive executor,
    /// which runs everything on the thread that makes it ready).
    pub(crate) fn replay_helpers(&self) -> usize {
        self.executor().helper_pool().map_or(1, |p| p.workers())
    }

    pub(crate) fn check_var_pub(&self, var: &Var, op: &str) -> Result<(), EngineError> {
        self.check_var(var, op, self.any_deleted())
    }

    /// Some var of this engine has been deleted: pushes must check their
    /// vars' deletion flags.
    #[inline]
    pub(crate) fn any_deleted(&self) -> bool {
        self.any_deleted.load(Ordering::Acquire)
    }

    /// Marks `var` deleted for later pushes (after its deletion op was
    /// pushed). The engine's flag is set first: a push that would see
    /// the var's flag (ordered after this call) then sees the engine's
    /// too, so skipping the per-var check while the engine's flag is
    /// clear refuses nothing it should. A push racing the deletion may
    /// miss both; its op is appended after the deletion and poisoned
    /// there (`push_to`), as before.
    ///
    /// The engine's flag is left alone when `var` is the var's only
    /// handle (the common case: a deletion consumes the handle it names):
    /// a push names its vars by handle, so no push can name this var
    /// again, and the pushes of an engine whose deleted vars all went
    /// with their last handle keep skipping the read-only line.
    pub(crate) fn mark_deleted(&self, var: &mut Var) {
        if !var.is_only_handle() {
            self.any_deleted.store(true, Ordering::Release);
        }
        var.inner.deleted.store(true, Ordering::Release);
        var.inner.done.deleted.store(true, Ordering::Release);
    }

    /// [`Core::check_var`] without the error: true when the var passes.
    #[inline(always)]
    pub(crate) fn var_usable(&self, var: &Var, check_deleted: bool) -> bool {
        var.engine() == self.id && !(check_deleted && var.inner.deleted.load(Ordering::Acquire))
    }

    /// The push's checks of one var: made by this engine, and, when
    /// `check_deleted`, not deleted. The engine's id comes from the
    /// handle and the deletion flag is read only once some var has been
    /// deleted with a handle left over (`mark_deleted`), so that the
    /// pushes of an engine that deletes nothing that way wait for one
    /// line per var (the one they append on), not two: a var used once
    /// every few thousand ops has often lost both by its next push. (The
    /// push asks for the read-only line anyway, but does not wait for it:
    /// see `push_to`.)
    pub(crate) fn check_var(
        &self,
        var: &Var,
        op: &str,
        check_deleted: bool,
    ) -> Result<(), EngineError> {
        if self.var_usable(var, check_deleted) {
            return Ok(());
        }
        if var.engine() != self.id {
            let id = var.inner.id;
            return Err(EngineError::ForeignVar {
                var: id,
                var_engine: id.engine,
                engine: self.id,
            });
        }
        if check_deleted && var.inner.deleted.load(Ordering::Acquire) {
            return Err(EngineError::DeletedVar {
                var: var.inner.id,
                op: op.to_string(),
            });
        }
        Ok(())
    }

    // ------------------------------------------------------------------
    // Push
    // ------------------------------------------------------------------

    /// Pushes an op. `signal` (if any) is told the outcome. `internal` marks
    /// the engine's own bookkeeping ops (waits, operator deletion): they may
    /// name deleted vars, are never poisoned, run inline, and their writes do
    /// not count as versions.
    pub(crate) fn push(
        &self,
        desc: OpDesc<'_>,
        body: Body,
        signal: Option<Arc<Signal>>,
        internal: bool,
    ) -> Result<(), EngineError> {
        let seq = self.push_to(desc, body, signal, internal, None)?;
        if self.config.push_helps
            && seq % help::HELP_PUSH_EVERY == 0
            && !internal
            && !self.on_own_thread()
        {
            self.help_with_backlog(seq);
        }
        #[cfg(not(loom))]
        if seq % super::lead::CHECK_EVERY == 0 && !internal {
            self.look_every_check();
        }
        Ok(())
    }

    /// Asks for the lines of the vars `desc` writes that its push will
    /// read and write, ahead of that push (`Engine::push_all`): the ones
    /// the push itself asks for just before it reads them
    /// (`Core::push_to`). A hint only: a var the push will refuse harms
    /// nothing.
    ///
    /// Why not the vars it reads: a var an op reads is usually the output
    /// of an op pushed shortly before, which a worker may be completing
    /// right then; asked for several pushes early, its line left that
    /// worker before the worker was done with it (the empty
    /// `wavefront`-1000 at 2 workers, 4-10% slower than single pushes;
    /// BENCHMARKS-HISTORY.md, "The engine's stream"). A var an op writes is often
    /// one no op has used for long (a fresh output), which is where the
    /// misses were.
    #[inline]
    pub(crate) fn ask_for_push_lines(&self, desc: &OpDesc<'_>) {
        desc.writes.all(|v| {
            v.inner.prefetch();
            v.inner.prefetch_read_only();
            true
        });
    }

    /// [`Core::push`] without its help (a batch never helps); an op ready
    /// at once goes to `held` when given (a batch, see `batch.rs`) instead
    /// of to the executor. Returns the op's sequence number.
    pub(crate) fn push_to(
        &self,
        desc: OpDesc<'_>,
        body: Body,
        signal: Option<Arc<Signal>>,
        internal: bool,
        held: Option<&mut Vec<OpPtr>>,
    ) -> Result<u64, EngineError> {
        if self.shut_down.load(Ordering::Acquire) {
            return Err(EngineError::ShutDown {
                op: desc.name.into_owned(),
            });
        }
        self.check_context(desc.context, &desc.name)?;
        // The append reads each var's first line: ask for it now, so that
        // with many vars (out of this core's caches) their misses overlap
        // instead of coming one after another. Once the engine has deleted
        // a var, the check reads each var's read-only line too: then both
        // lines of every var are asked for before the first check (the
        // second request for the first line is a no-op). (`try_each`
        // inlines its closure: closures handed a var at a time through a
        // function that was not inlined compiled to a call per var.)
        let check_deleted = !internal && self.any_deleted();
        if check_deleted {
            let ask = |v: &Var| -> Result<(), EngineError> {
                v.inner.prefetch();
                v.inner.prefetch_read_only();
                Ok(())
            };
            desc.reads.try_each(ask)?;
            desc.writes.try_each(ask)?;
        }
        // A yes or no per var, and the error (which var, and why) only
        // when some var fails: a `Result` carrying an `EngineError` is
        // written to and read back from memory for every var.
        //
        // The read-only line is asked for even when the check does not
        // read it. The op's completion writes the var's completions' line
        // (version, failure), which shares a 128-byte pair with either
        // the append's line or the read-only one (the var's allocation is
        // aligned to 64 bytes, not 128), and asking for one line of a
        // pair has the core's adjacent-line prefetcher fetch the other:
        // asking for both brings the completions' line whatever the
        // alignment. Without it, the completion of an op on a var
        // out of cache waited for that line (one thread, `indep` and
        // `wavefront` 10-20% slower; BENCHMARKS-HISTORY.md, "Deleting a var's
        // only handle"). Asking for the completions' line itself
        // (for writing) did less well.
        let usable = |v: &Var| {
            v.inner.prefetch();
            v.inner.prefetch_read_only();
            self.var_usable(v, check_deleted)
        };
        let mut picked = Picked::new();
        let all_usable = match picked.pick(&desc.reads, &desc.writes, usable) {
            Some(ok) => ok,
            None => desc.reads.all(usable) && desc.writes.all(usable),
        };
        if !all_usable {
            desc.reads
                .try_each(|v| self.check_var(v, &desc.name, check_deleted))?;
            desc.writes
                .try_each(|v| self.check_var(v, &desc.name, check_deleted))?;
        }

        let guard = AbortOnPanic::new();
        let mut block = self.blocks.take();
        // The pool hands out reset blocks (`OpBlock::reset`), whose name,
        // body and signal hold nothing: forgetting the old values instead
        // of dropping them spares an out-of-line drop call per field on
        // every push (one-thread `indep-novars` 58 -> 54 ns per op).
        debug_assert!(block.is_reset());
        block.cold_owned = signal.is_some() || matches!(desc.name, Cow::Owned(_));
        std::mem::forget(std::mem::replace(&mut block.name, desc.name));
        std::mem::forget(std::mem::replace(block.body.get_mut(), body));
        std::mem::forget(std::mem::replace(&mut block.signal, signal));
        block.context = desc.context;
        block.property = desc.property;
        block.priority = desc.priority;
        block.bump_version = !internal;
        *block.poisoned.get_mut() = false;
        if picked.taken() {
            picked.fill(&mut block);
        } else {
            fill_vars(&mut block, &desc.reads, &desc.writes);
        }
        let nvars = block.vars.len();
        block.wait.store(nvars + 1, Ordering::Relaxed);
        let deletes = block.property == Property::DeleteVar;

        // Counted before it can complete (see `idle`); the count also
        // numbers the op.
        block.seq = self.pushed.add(1);
        // From here on the block is shared with other threads through var
        // queues: only `&OpBlock` (plus the guard-protected cells) is used.
        let op = OpPtr(NonNull::from(Box::leak(block)));
        // SAFETY: just leaked, live until `complete` recycles it, which cannot
        // happen before the guard below is dropped.
        let b = unsafe { op.get() };
        let (granted, after_delete) = if nvars == 0 {
            (0, false)
        } else {
            let (writes, reads) = b.split_vars();
            append_all(op, reads, writes, deletes)
        };
        if after_delete && !internal {
            // A concurrent `delete_var` got there first: the op must not touch
            // the var. It still goes through the queues so ordering holds.
            // SAFETY: the pusher's guard (wait >= 1) is still held, so no other
            // thread can own the op yet; the cell is ours.
            unsafe { *b.poisoned.get() = true };
        }
        let seq = b.seq;
        // Each var grants the op once. When every var granted it during
        // the append, no other thread will ever touch `wait`, so the op is
        // ready without the read-modify-write (a locked instruction) that
        // races with the grants of completing ops otherwise.
        if granted == nvars || b.wait.fetch_sub(granted + 1, Ordering::AcqRel) == granted + 1 {
            match held {
                Some(held) => held.push(op),
                None => self.executor().dispatch(self, op, None),
            }
        }
        guard.disarm();
        Ok(seq)
    }

    /// Sends the ops a batch held back where they run (see `batch.rs`).
    pub(crate) fn dispatch_batch(&self, ops: &[OpPtr]) {
        let guard = AbortOnPanic::new();
        self.executor().dispatch_batch(self, ops);
        guard.disarm();
    }

    /// Marks this thread as having a batch open on this engine, until
    /// [`Core::close_batch`].
    pub(crate) fn open_batch(&self) {
        BATCH_ENGINES.with(|b| b.borrow_mut().push((self.id, false)));
    }

    /// Ends one batch's mark for this engine (see [`Core::open_batch`]);
    /// `owes_look` when the batch's pushes (or those of a batch nested in
    /// it) passed a multiple of [`super::lead::CHECK_EVERY`], where a
    /// push outside a batch looks at the lead. Returns true when the
    /// caller is to look now: it owes a look and no other batch of this
    /// engine is open on the thread. Otherwise the look passes to this
    /// engine's next batch out, which looks when it closes: a thread
    /// with a batch open cannot wait (its held ops cannot complete).
    ///
    /// Batches close innermost first, unless a closure swapped two of
    /// them (`std::mem::swap` through their `&mut`): the mark to drop is
    /// then this engine's last, not necessarily the top.
    pub(crate) fn close_batch(&self, owes_look: bool) -> bool {
        BATCH_ENGINES.with(|b| {
            let mut b = b.borrow_mut();
            let owes = match b.iter().rposition(|&(id, _)| id == self.id) {
                Some(at) => b.remove(at).1 || owes_look,
                None => owes_look,
            };
            match b.iter_mut().rev().find(|(id, _)| *id == self.id) {
                Some(outer) => {
                    outer.1 |= owes;
                    false
                }
                None => owes,
            }
        })
    }

    pub(crate) fn in_batch(&self) -> bool {
        BATCH_ENGINES.with(|b| b.borrow().iter().any(|&(id, _)| id == self.id))
    }

    pub(crate) fn check_context(&self, ctx: Context, op: &str) -> Result<(), EngineError> {
        if let Some(id) = ctx.gpu_id() {
            if id >= self.config.gpus {
                return Err(EngineError::UnknownContext {
                    op: op.to_string(),
                    context: ctx,
                    gpus: self.config.gpus,
                });
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------------
    // Execute and complete
    // ------------------------------------------------------------------

    /// Runs a ready op on the calling thread; returns the ops its completion
    /// made ready (for the caller to dispatch), unless it is async and still
    /// running.
    pub(crate) fn execute(&self, op: OpPtr, worker: Option<usize>) -> ReadyList {
        // SAFETY: the caller owns the op (it brought `wait` to zero); it stays
        // live until this function or its completion handle completes it.
        let b = unsafe { op.get() };
        // SAFETY: the caller owns the op; no other thread touches its cells.
        if unsafe { *b.poisoned.get() } {
            let outcome = Outcome::Failed(
                FailureKind::DeletedVar,
                "a var it uses was deleted by an op pushed before it".into(),
            );
            return self.complete(op, outcome);
        }
        // The completion after the body locks vars and writes versions.
        // When the pusher runs far ahead it appended the op long ago, and
        // those lines have often left this core's caches: ask for them
        // now, so that the misses overlap the body instead of following
        // it. (The skip check below reads the vars' lines only while some
        // var carries a failure, which is what leaves the body room to
        // hide them.) A completion that will not lock a var (a write
        // inside a run, a read) leaves that var's lock line alone:
        // in a chain the pusher is appending there, and taking the line
        // early would only make it cross between the two cores once more.
        let (writes, reads) = b.split_vars();
        for v in writes {
            // SAFETY: this thread owns the op: its slots' words were
            // written before it was granted and do not change until it
            // completes.
            if unsafe { v.run_next() }.is_none() {
                v.prefetch_lock_line();
            }
            v.prefetch_done_line();
        }
        for v in reads {
            v.prefetch_done_line();
        }
        let mut skip = None;
        if !b.property.never_skipped() && !self.failed_vars.none() {
            skip = writes.iter().chain(reads).find_map(|v| v.failure());
        }
        if let Some(f) = skip {
            return self.complete(op, Outcome::Skipped(f));
        }
        // SAFETY: as above, the owning thread takes the body exactly once.
        let body = unsafe { std::mem::replace(&mut *b.body.get(), Body::Empty) };
        let ctx = OpCtx {
            op: CtxOp::Block(b),
            worker,
        };
        let prev = CURRENT_ENGINE.with(|c| c.replace(self.id));
        let outcome = match body {
            Body::Empty => Outcome::Ok,
            Body::Sync(f) => run_caught(|| f(&ctx)),
            Body::Shared(f) => run_caught(|| f(&ctx)),
            Body::InlineSync(f) => run_caught(|| f.call(&ctx)),
            Body::Async(f) => return self.run_async(op, b, &ctx, prev, |c, done| f(c, done)),
            Body::InlineAsync(f) => {
                return self.run_async(op, b, &ctx, prev, |c, done| f.call(c, done))
            }
        };
        CURRENT_ENGINE.with(|c| c.set(prev));
        self.complete(op, outcome)
    }

    /// Runs an async body (`call`) on the executing thread; completes the op
    /// unless the body left that to its completion handle.
    fn run_async(
        &self,
        op: OpPtr,
        b: &OpBlock,
        ctx: &OpCtx<'_>,
        prev: u64,
        call: impl FnOnce(&OpCtx<'_>, Completion),
    ) -> ReadyList {
        b.async_phase.store(PHASE_IN_BODY, Ordering::Relaxed);
        let completion = Completion::new(self.arc(), op);
        // A panic drops the completion during unwinding, which fails
        // the op (unless the body already handed it elsewhere).
        let caught = catch_unwind(AssertUnwindSafe(|| call(ctx, completion)));
        CURRENT_ENGINE.with(|c| c.set(prev));
        // The block must outlive the body (it holds `ctx`): a completion
        // that arrived meanwhile left the op to us.
        if b.async_phase
            .compare_exchange(
                PHASE_IN_BODY,
                PHASE_BODY_RETURNED,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
        {
            return ReadyList::new();
        }
        // SAFETY: the completion stored the result before its release CAS,
        // which our acquire CAS saw; the handle is consumed, so nobody else
        // touches it.
        let result = unsafe { (*b.async_result.get()).take() }.map(|r| *r);
        let outcome = match (result, caught) {
            (Some(Err((FailureKind::CompletionDropped, _))), Err(payload)) => {
                Outcome::Failed(FailureKind::Panic, panic_message(&*payload))
            }
            (Some(Ok(())), _) => Outcome::Ok,
            (Some(Err((kind, msg))), _) => Outcome::Failed(kind, msg),
            (None, _) => unreachable!("deferred completion without a result"),
        };
        self.complete(op, outcome)
    }

    /// Completes an op: records its failure, releases its vars, recycles it.
    pub(crate) fn complete(&self, op: OpPtr, outcome: Outcome) -> ReadyList {
        let guard = AbortOnPanic::new();
        // SAFETY: the completing thread owns the op until it recycles it below.
        let b = unsafe { op.get() };
        let failure = match outcome {
            Outcome::Ok => None,
            Outcome::Failed(kind, message) => {
                let f = Arc::new(Failure {
                    op: b.name.to_string(),
                    op_seq: b.seq,
                    kind,
                    message,
                });
                self.failures.lock().push(LogEntry {
                    failure: f.clone(),
                    reported: false,
                    tainted: b.writes().iter().map(|v| v.var.to_arc()).collect(),
                });
                Some(f)
            }
            Outcome::Skipped(f) => {
                if !b.writes().is_empty() {
                    let mut log = self.failures.lock();
                    if let Some(e) = log.iter_mut().find(|e| Arc::ptr_eq(&e.failure, &f)) {
                        e.tainted.extend(b.writes().iter().map(|v| v.var.to_arc()));
                    }
                }
                Some(f)
            }
        };
        let mut ready = ReadyList::new();
        let (writes, reads) = b.split_vars();
        // See `GrantWindow` for why an op of many vars grants through one.
        let mut window = (writes.len() + reads.len() >= WINDOW_MIN_VARS).then(GrantWindow::new);
        for v in reads {
            if v.complete_read(&mut ready, window.as_mut()) {
                // SAFETY: the completion handed us the var's self-reference;
                // `v` is not used again.
                unsafe { v.var.release_self_ref() };
            }
        }
        let one_var = writes.len() + reads.len() == 1;
        for v in writes {
            // SAFETY: as above.
            let run_next = unsafe { v.run_next() };
            let exit = WriteExit {
                op,
                one_var,
                run_next,
            };
            if v.complete_write(
                exit,
                failure.as_ref(),
                &self.failed_vars,
                b.bump_version,
                &mut ready,
            ) {
                // SAFETY: as above.
                unsafe { v.var.release_self_ref() };
            }
        }
        if let Some(w) = &mut window {
            w.flush(&mut ready);
        }
        // Only a block that owns something there has its cold line read
        // (see `OpBlock::cold_owned`).
        if b.cold_owned {
            if let Some(signal) = &b.signal {
                signal.set(match &failure {
                    None => Ok(()),
                    Some(f) => Err(f.clone()),
                });
            }
        }
        // SAFETY: every var has released the op and no queue names it any
        // more, so this thread holds the only pointer: rebuild the box.
        let mut block = unsafe { Box::from_raw(op.0.as_ptr()) };
        block.reset();
        self.blocks.give(block);
        // Wake idle waiters when this completion may have emptied the engine
        // (see `wait_idle` for why this loses no wake-up). One that made ops
        // ready cannot have: they stay pending until their own completions,
        // which look then. A pool worker looks once it runs out of ops
        // instead (`wake_if_idle`): each look sums every shard of the
        // completion counter, and a sum on every completion pulled the other
        // workers' shard lines from their cores while they kept writing
        // them (100 readers of one var at 2 workers with a waiter parked:
        // 37% of `complete`'s samples on the increment that followed).
        self.completed.add_one();
        if ready.is_empty() && !self.is_own_worker() {
            self.wake_if_idle();
        }
        guard.disarm();
        ready
    }

    /// Marks the calling thread as one of this engine's pool workers,
    /// which call [`Core::wake_if_idle`] whenever they find no op to run.
    pub(crate) fn mark_own_worker(&self) {
        WORKER_OF.with(|w| w.set(self.id));
    }

    fn is_own_worker(&self) -> bool {
        WORKER_OF.with(|w| w.get()) == self.id
    }

    /// Wakes the idle waiters if the engine is idle and someone waits.
    ///
    /// Every completion is followed, on its thread, by a call: at once
    /// (`complete`), or for a pool worker's completions once the worker
    /// finds no op to run, before it searches or sleeps. A worker that
    /// finds one instead holds a pending op, so the engine is not idle
    /// then, and that op's completion is followed by a call in turn. So
    /// the argument of `wait_idle` holds: the completion whose increment
    /// comes last is followed by a look that sees every increment.
    pub(crate) fn wake_if_idle(&self) {
        seqcst_order_for_loom();
        if self.idle_waiters.load(Ordering::SeqCst) > 0 && self.idle() {
            let _g = self.idle_lock.lock();
            self.idle_cv.notify_all();
        }
    }

    /// Completion of an async op from its handle, on any thread.
    ///
    /// If the body is still running (it completed its own handle, or handed
    /// it to a thread that was quick), the result is left in the block and
    /// the executing thread completes the op once the body returns: the body
    /// may still be using its `OpCtx`, which borrows the block.
    pub(crate) fn finish_async(&self, op: OpPtr, result: AsyncResult) {
        // SAFETY: the completion handle owns the running op until it hands it
        // over below; the executing thread reads the result only after
        // seeing `PHASE_DONE_IN_BODY`.
        let b = unsafe { op.get() };
        // SAFETY: as above: only this handle writes the result.
        unsafe { *b.async_result.get() = Some(Box::new(result)) };
        if b.async_phase
            .compare_exchange(
                PHASE_IN_BODY,
                PHASE_DONE_IN_BODY,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
        {
            return;
        }
        // SAFETY: the body has returned; the result is ours to take back.
        let result = *unsafe { (*b.async_result.get()).take() }.expect("stored above");
        let outcome = match result {
            Ok(()) => Outcome::Ok,
            Err((kind, msg)) => Outcome::Failed(kind, msg),
        };
        let ready = self.complete(op, outcome);
        self.executor().dispatch_all(self, ready, None);
    }

    pub(crate) fn dispatch_all(
        &self,
        ready: ReadyList,
        local: Option<super::executor::LocalSlot<'_>>,
    ) {
        self.executor().dispatch_all(self, ready, local);
    }

    // ------------------------------------------------------------------
    // Serial scopes (`serial.rs`)
    // ------------------------------------------------------------------

    /// Blocks until no op is pending, as `wait_for_all` does, but leaves
    /// the failures for a later wait to report.
    pub(crate) fn wait_quiet(&self, call: &'static str) -> Result<(), EngineError> {
        self.check_blocking(call)?;
        self.wait_idle(self.config.wait_helps)
    }

    /// The sequence number the next pushed op gets.
    pub(crate) fn next_seq(&self) -> u64 {
        self.pushed.load()
    }

    /// Counts `n` ops that a serial scope ran outside the protocol as
    /// pushed and completed. Completed first, so that `pending` never
    /// shows them as pending.
    pub(crate) fn count_serial(&self, n: u64) {
        self.completed.add(n);
        self.pushed.add(n);
    }

    /// True while some var carries a failure no wait has cleared.
    pub(crate) fn some_var_failed(&self) -> bool {
        !self.failed_vars.none()
    }

    /// Ops pushed and ops completed so far. The completions are read
    /// first: an op counts as pushed before it can complete, so the
    /// difference is never below what was pending when they were read.
    pub(crate) fn counts(&self) -> (u64, u64) {
        let c = self.completed.sum();
        (self.pushed.load(), c)
    }

    pub(crate) fn pending(&self) -> usize {
        let (p, c) = self.counts();
        p.saturating_sub(c) as usize
    }

    // ------------------------------------------------------------------
    // Shutdown
    // ------------------------------------------------------------------

    pub(crate) fn is_shut_down(&self) -> bool {
        self.shut_down.load(Ordering::Acquire)
    }

    /// Waits for all pushed work, refuses new pushes, stops and joins every
    /// worker thread. Idempotent.
    pub(crate) fn shutdown(&self) {
        // Work pushed before (and by ops running during) the wait still runs.
        let _ = self.wait_idle(false);
        self.shut_down.store(true, Ordering::Release);
        fence(Ordering::SeqCst);
        // Ops pushed by other threads between the wait and the flag.
        let _ = self.wait_idle(false);
        self.executor().stop_and_join();
    }
}

/// Runs a body, turning an error or a panic into an outcome.
fn run_caught(f: impl FnOnce() -> OpResult) -> Outcome {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => Outcome::Ok,
        Ok(Err(e)) => Outcome::Failed(FailureKind::Error, e.message().to_string()),
        Err(payload) => Outcome::Failed(FailureKind::Panic, panic_message(&*payload)),
    }
}

pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::engine::Engine;
    use crate::util::cache_lines::share_a_line;

    #[test]
    fn what_creating_vars_and_exchanging_blocks_writes_shares_no_line_with_what_every_op_reads() {
        let engine = Engine::builder().cpu_workers(1).build().unwrap();
        let core = engine.core();
        let list = core.blocks.shared_list();
        let registry = &*core.vars;
        // Read by every push (the id, to check a var's engine; the flags)
        // or by every op (the id, the executor that dispatches it).
        macro_rules! off_the_written_lines {
            ($($field:expr),*) => {$(
                assert!(!share_a_line(&$field, registry), "{} beside the var registry", stringify!($field));
                assert!(!share_a_line(&$field, list), "{} beside the blocks' shared list", stringify!($field));
            )*};
        }
        off_the_written_lines!(
            core.id,
            core.config,
            core.executor,
            core.shut_down,
            core.any_deleted,
            core.lead
        );
    }
}
