//! Serial scopes: ops that run at their push, on the pushing thread,
//! without the var protocol.
//!
//! The protocol exists to order ops that other threads push, run or wait
//! for. A thread that holds the only handle to an engine with nothing
//! pending has none of that to fear: no other thread can push (it has no
//! handle to push with), nothing is queued on any var, and an op run to its
//! end before the next one is pushed runs after everything pushed before it.
//! Rule 1 then holds by construction, and what is left of an op's
//! bookkeeping is what another thread could observe afterwards: each
//! written var's version and, when the op fails, its failure.
//!
//! Why each condition holds for the scope's whole life:
//! - *Only handle.* [`Engine::serial`] takes `&mut Engine` and checks with
//!   `Arc::get_mut` that no other clone exists (which synchronizes with
//!   the drops of the clones that did). New clones are made from a handle,
//!   and the one there is stays borrowed by the [`Serial`] until it drops.
//!   Worker threads, completion handles and replay builders hold the
//!   core, not a handle: the first two only run and complete ops pushed
//!   before the entry, and a replay builder only checks and creates vars.
//! - *Nothing pending.* The entry waits until every op pushed before it has
//!   completed; only this thread can push after that, and every op that
//!   goes through the protocol from the scope (below) is waited for before
//!   the next op runs.
//! - *No op inside an op.* [`Serial::push`] takes `&mut self`, so a body
//!   (which may borrow, since it runs before `push` returns) cannot reach
//!   the scope to push from inside itself.
//!
//! What the scope does not run itself goes through the protocol, pushed
//! and then waited for: an op on a var that carries a failure (the
//! protocol skips it and passes the failure on), an op whose body failed
//! (its outcome is pushed again as an op that fails the same way, so the
//! failure is recorded on its vars and reported by the waits exactly as
//! for a pushed op), and deletions. These are rare, and slow only for
//! themselves.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use super::op::{Body, CtxOp};
use super::stream;
use super::{Engine, EngineError, OpCtx, OpDesc, OpResult, Property, Var};
use crate::sync::{Arc, Ordering};

/// The most written vars of an op deduplicated by comparing every pair;
/// more are sorted by address.
const PAIRWISE_MAX: usize = 32;

/// A scope in which ops run at their push, on the calling thread, without
/// the var protocol: the one-thread form of the engine, for the sections
/// of a program that push from one thread and need nothing to run beside
/// them. Made by [`Engine::serial`].
///
/// Every op runs before [`Serial::push`] returns, in push order, which
/// keeps the engine's contract: the vars' versions, failures, deletions
/// and the waits' reports are those the same pushes to the engine would
/// give. Bodies need be neither `Send` nor `'static`: they may borrow from
/// the caller.
///
/// ```
/// use depengine::{Engine, OpDesc};
///
/// let mut engine = Engine::builder().build()?;
/// let mut total = 0u64;
/// {
///     let mut serial = engine.serial()?;
///     let x = serial.new_var();
///     for i in 1..=4 {
///         // The body borrows `total`: it runs before `push` returns.
///         serial.push(OpDesc::new("add").writes(&x), |_| {
///             total += i;
///             Ok(())
///         })?;
///     }
///     assert_eq!(x.version(), 4);
/// }
/// assert_eq!(total, 10);
/// engine.wait_for_all()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A body cannot push into the scope that runs it:
///
/// ```compile_fail,E0499
/// use depengine::{Engine, OpDesc};
///
/// let mut engine = Engine::builder().build().unwrap();
/// let mut serial = engine.serial().unwrap();
/// let x = serial.new_var();
/// let s = &mut serial;
/// s.push(OpDesc::new("outer").writes(&x), |_| {
///     s.push(OpDesc::new("inner").writes(&x), |_| Ok(()))
/// })
/// .unwrap();
/// ```
pub struct Serial<'e> {
    /// Borrowed from the `&mut Engine` of [`Engine::serial`] for the
    /// scope's life, and never handed out: a clone made from it could
    /// push from another thread.
    engine: &'e Engine,
    /// The sequence number the engine's counter gives the next op, as of
    /// the last time the scope's ops were counted.
    next_seq: u64,
    /// Ops run by the scope since then (counted in batches: one locked
    /// increment per batch instead of two per op).
    uncounted: u64,
}

impl Engine {
    /// Opens a [`Serial`] scope: until it drops, ops pushed through it run
    /// at their push, on this thread, without the var protocol (the cost of
    /// an op is then its checks and its body).
    ///
    /// It first waits, as [`Engine::wait_for_all`] does, for every op
    /// pushed before, but reports no failure: those stay for a later wait.
    ///
    /// # Errors
    ///
    /// [`EngineError::SharedEngine`] while other clones of this engine
    /// exist; [`EngineError::ShutDown`] after a shutdown;
    /// [`EngineError::WaitFromWorker`] from inside an op of this engine.
    pub fn serial(&mut self) -> Result<Serial<'_>, EngineError> {
        let handles = Arc::strong_count(&self.handle);
        if Arc::get_mut(&mut self.handle).is_none() {
            return Err(EngineError::SharedEngine {
                engine: self.id(),
                handles,
            });
        }
        let core = self.core();
        if core.is_shut_down() {
            return Err(EngineError::ShutDown {
                op: "Engine::serial".into(),
            });
        }
        core.wait_quiet("Engine::serial")?;
        Ok(Serial {
            engine: self,
            next_seq: core.next_seq(),
            uncounted: 0,
        })
    }
}

impl Serial<'_> {
    /// A new var of the scope's engine (it outlives the scope).
    pub fn new_var(&self) -> Var {
        self.engine.new_var()
    }

    /// A new var with a name, shown in errors and diagnostics.
    pub fn new_named_var(&self, name: impl Into<String>) -> Var {
        self.engine.new_named_var(name)
    }

    /// Runs an op now, on this thread: as [`Engine::push`] followed by its
    /// completion. An op whose body fails returns `Ok` here, as a push
    /// does; the failure is recorded on the vars it writes and reported by
    /// the next wait ([`Serial::wait_for_var`], [`Serial::wait_for_all`],
    /// or the engine's after the scope). An op on a var that carries a
    /// failure does not run (unless its property is
    /// [`Property::NoSkip`]).
    ///
    /// The op's context and priority are checked and shown to the body,
    /// but every op runs here, whatever its context.
    ///
    /// # Errors
    ///
    /// As [`Engine::push`]: a var of another engine or a deleted var, a GPU
    /// context the engine does not have. The op does not run.
    #[inline]
    pub fn push<F>(&mut self, desc: OpDesc<'_>, body: F) -> Result<(), EngineError>
    where
        F: FnOnce(&OpCtx<'_>) -> OpResult,
    {
        let core = self.engine.core();
        core.check_context(desc.context, &desc.name)?;
        let check_deleted = core.any_deleted();
        // The deletion flag's copy on the line the op writes anyway (the
        // version's), not the read-only line `Engine::push` reads.
        let usable = |v: &Var| {
            v.engine() == core.id
                && !(check_deleted && v.inner.done.deleted.load(Ordering::Acquire))
        };
        if !(desc.reads.all(usable) && desc.writes.all(usable)) {
            desc.reads
                .try_each(|v| core.check_var(v, &desc.name, check_deleted))?;
            desc.writes
                .try_each(|v| core.check_var(v, &desc.name, check_deleted))?;
        }
        let failed = core.some_var_failed()
            && !(desc.reads.all(|v| v.inner.failure().is_none())
                && desc.writes.all(|v| v.inner.failure().is_none()));
        if failed && !desc.property.never_skipped() {
            // Skipped by the protocol, which passes the failure on to the
            // vars it writes: the body is never called.
            return self.through_protocol(desc, Body::sync(|_| Ok(())));
        }
        let seq = self.next_seq + self.uncounted;
        let ran = {
            let ctx = OpCtx {
                op: CtxOp::Serial { desc: &desc, seq },
                worker: None,
            };
            catch_unwind(AssertUnwindSafe(|| body(&ctx)))
        };
        match ran {
            Ok(Ok(())) if !failed && desc.property != Property::DeleteVar => {
                self.uncounted += 1;
                bump_written(&desc);
                Ok(())
            }
            // The protocol records what the op did, as it would have had
            // it run the body itself; it runs this body in its place.
            Ok(Ok(())) => self.through_protocol(desc, Body::sync(|_| Ok(()))),
            Ok(Err(e)) => self.through_protocol(desc, Body::sync(move |_| Err(e))),
            Err(panic) => self.through_protocol(desc, Body::sync(move |_| resume_unwind(panic))),
        }
    }

    /// Runs the ops `ops` yields, in order, each as [`Serial::push`] runs
    /// it; stops at the first op that `push` refuses.
    ///
    /// What it adds to a loop of pushes: while it runs one op it has
    /// already taken the next few (up to seven) from the iterator and
    /// asked the CPU for the cache line that holds the version of each
    /// var they write. An op of a scope touches no other line of its
    /// vars, so when each op writes a var out of this core's caches (a
    /// fresh var per op, over many vars), a loop of pushes waits for one
    /// miss per op, while here the misses overlap with the ops before
    /// (BENCHMARKS-HISTORY.md, "A serial scope's stream"). Nothing else changes:
    /// every op runs in its turn, after the ops before it and before the
    /// next, and sees what they wrote; only the iterator is advanced
    /// earlier, so an iterator that observes the ops' effects as it
    /// yields is better served by `push`.
    ///
    /// ```
    /// use std::cell::Cell;
    ///
    /// use depengine::{Engine, OpCtx, OpDesc};
    ///
    /// let mut engine = Engine::builder().build()?;
    /// let mut serial = engine.serial()?;
    /// let vars: Vec<_> = (0..100).map(|_| serial.new_var()).collect();
    /// serial.push_all(vars.iter().map(|v| {
    ///     (OpDesc::new("fill").writes(v), |_: &OpCtx<'_>| Ok(()))
    /// }))?;
    /// // Bodies may borrow: each runs before `push_all` returns, and sees
    /// // what the ops before it wrote.
    /// let sum = Cell::new(0);
    /// let sum = &sum;
    /// serial.push_all(vars.iter().map(|v| {
    ///     let body = move |_: &OpCtx<'_>| {
    ///         sum.set(sum.get() + v.version());
    ///         Ok(())
    ///     };
    ///     (OpDesc::new("sum").reads(v), body)
    /// }))?;
    /// assert_eq!(sum.get(), 100);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// The first error of [`Serial::push`] (a var of another engine, a
    /// deleted var, a GPU context the engine does not have): the ops
    /// before the refused one have run; it and those after it have not,
    /// and the ones already taken from the iterator are dropped.
    pub fn push_all<'v, F, I>(&mut self, ops: I) -> Result<(), EngineError>
    where
        I: IntoIterator<Item = (OpDesc<'v>, F)>,
        F: FnOnce(&OpCtx<'_>) -> OpResult,
    {
        stream::each_ahead(
            ops,
            |(desc, _)| ask_for_versions(desc),
            |(desc, body)| self.push(desc, body),
        )
    }

    /// Deletes a var, as [`Engine::delete_var`]; it is gone when this
    /// returns.
    ///
    /// # Errors
    ///
    /// As [`Engine::delete_var`].
    pub fn delete_var(&mut self, var: Var) -> Result<(), EngineError> {
        self.count();
        let deleted = self.engine.delete_var(var);
        self.settle()?;
        deleted
    }

    /// Reports and clears the failure `var` carries, as
    /// [`Engine::wait_for_var`] (nothing is left to wait for).
    ///
    /// # Errors
    ///
    /// As [`Engine::wait_for_var`].
    pub fn wait_for_var(&mut self, var: &Var) -> Result<(), EngineError> {
        self.engine.wait_for_var(var)
    }

    /// Reports and clears the failures no wait has reported, as
    /// [`Engine::wait_for_all`].
    ///
    /// # Errors
    ///
    /// As [`Engine::wait_for_all`].
    pub fn wait_for_all(&mut self) -> Result<(), EngineError> {
        self.engine.wait_for_all()
    }

    /// Pushes an op through the var protocol and waits until it (and so
    /// everything) has completed: the engine is idle again before the
    /// scope runs its next op outside the protocol.
    fn through_protocol(&mut self, desc: OpDesc<'_>, body: Body) -> Result<(), EngineError> {
        self.count();
        let pushed = self.engine.core().push(desc, body, None, false);
        self.settle()?;
        pushed
    }

    /// Waits until the ops pushed through the protocol have completed.
    fn settle(&mut self) -> Result<(), EngineError> {
        let core = self.engine.core();
        let settled = core.wait_quiet("Serial");
        self.next_seq = core.next_seq();
        settled
    }

    /// Counts the ops the scope ran itself in the engine's counters, which
    /// number the ops and tell the waits what is pending.
    fn count(&mut self) {
        if self.uncounted > 0 {
            self.engine.core().count_serial(self.uncounted);
            self.next_seq += self.uncounted;
            self.uncounted = 0;
        }
    }
}

impl Drop for Serial<'_> {
    fn drop(&mut self) {
        self.count();
    }
}

impl std::fmt::Debug for Serial<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Serial")
            .field("engine", &self.engine.id())
            .field("next_seq", &(self.next_seq + self.uncounted))
            .finish()
    }
}

/// Asks the CPU for the line of each var `desc` writes that the op's run
/// bumps (the version's), for [`Serial::push_all`]. A hint only: a var of
/// another engine is refused at its turn, and asking for its line harms
/// nothing.
#[inline(always)]
fn ask_for_versions(desc: &OpDesc<'_>) {
    desc.writes.all(|v| {
        v.inner.prefetch_done_line();
        true
    });
}

/// Bumps the version of each var the op writes, once per var (rule 2: a
/// var listed twice is listed once).
fn bump_written(desc: &OpDesc<'_>) {
    let writes = &desc.writes;
    if writes.len() <= PAIRWISE_MAX {
        for (i, v) in writes.iter().enumerate() {
            if !writes.iter().take(i).any(|w| w == v) {
                v.inner.bump_version();
            }
        }
    } else {
        let mut vars: Vec<&Var> = writes.iter().collect();
        vars.sort_by_key(|v| Arc::as_ptr(&v.inner) as usize);
        vars.dedup_by(|a, b| a == b);
        for v in vars {
            v.inner.bump_version();
        }
    }
}
