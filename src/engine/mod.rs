//! The dependency engine.
//!
//! # Quickstart
//!
//! ```
//! use depengine::{Engine, OpDesc};
//! use std::sync::{Arc, Mutex};
//!
//! let engine = Engine::builder().build()?;
//! let (a, b) = (engine.new_var(), engine.new_var());
//! let data = Arc::new(Mutex::new(vec![0u64; 2]));
//!
//! // Write a, then read a and write b: the engine orders the two.
//! let d = data.clone();
//! engine.push(OpDesc::new("fill a").writes(&a), move |_| {
//!     d.lock().unwrap()[0] = 21;
//!     Ok(())
//! })?;
//! let d = data.clone();
//! engine.push(OpDesc::new("b = 2a").reads(&a).writes(&b), move |_| {
//!     let mut v = d.lock().unwrap();
//!     v[1] = v[0] * 2;
//!     Ok(())
//! })?;
//!
//! engine.wait_for_var(&b)?;
//! assert_eq!(data.lock().unwrap()[1], 42);
//! assert_eq!((a.version(), b.version()), (1, 1));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The same graph, pushed many times
//!
//! A training step or a stencil sweep pushes the same ops every time.
//! Capture them once as a [`Replay`]: its edges are inferred when it is
//! built, and [`Engine::push_replay`] pushes the whole graph as one op,
//! ordered with other ops by the vars its nodes use.
//!
//! ```
//! use depengine::{Engine, OpDesc};
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use std::sync::Arc;
//!
//! let engine = Engine::builder().build()?;
//! let (a, b) = (engine.new_var(), engine.new_var());
//! let (x, y) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
//! let mut step = engine.replay_builder("step");
//! let xs = x.clone();
//! step.push(OpDesc::new("a += 1").writes(&a), move || {
//!     xs.fetch_add(1, Ordering::SeqCst);
//!     Ok(())
//! })?;
//! let (xs, ys) = (x.clone(), y.clone());
//! step.push(OpDesc::new("b = a").reads(&a).writes(&b), move || {
//!     ys.store(xs.load(Ordering::SeqCst), Ordering::SeqCst);
//!     Ok(())
//! })?;
//! let step = step.build();
//! for _ in 0..3 {
//!     engine.push_replay(&step)?;
//! }
//! engine.wait_for_var(&b)?;
//! assert_eq!(y.load(Ordering::SeqCst), 3);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Choosing how to push
//!
//! Every way of pushing keeps the same order (per var, effects happen in
//! push order); they differ in when the graph is inferred and which
//! threads run the ops. What each one gained or cost against
//! [`Engine::push`] on 2 workers of a 2-core machine, on the benchmark
//! workloads with empty and 1 µs bodies, is in the repository's
//! `BENCHMARKS.md` ("Ways of pushing the same ops"):
//!
//! - [`Engine::push`], op by op: the general case. Each push infers the
//!   op's dependencies and hands it to a worker when it is ready.
//! - A [`Replay`] ([`Engine::replay_builder`], [`Engine::push_replay`]),
//!   for a graph pushed again and again: the fastest way on every
//!   workload measured (0.07–0.37 of `push`'s time with empty ops,
//!   0.61–0.95 with 1 µs bodies). Its capture costs a few pushes' worth
//!   per node (0.2–1.9 µs there), repaid within 2 to 8 pushes.
//! - [`Engine::serial`], for ops too small to hand to another thread:
//!   each runs at its push on the calling thread, without the var
//!   protocol. 3–12× faster than `push` with empty ops there; with 1 µs
//!   bodies one thread does the work of the workers, so it is slower
//!   wherever they could run ops in parallel.
//! - [`Engine::push_all`], a stream: asks for the next ops' vars ahead
//!   while it pushes, which pays where those vars are out of the caches;
//!   otherwise level with `push`.
//! - [`Engine::batch`]: hands the ops that are ready at their push over
//!   together when the batch closes, for one thread feeding many
//!   workers. The held ops wait for the batch to close, so where every
//!   op is ready at once and the workers keep up (independent ops on 2
//!   workers) batches are slower than `push`.
//! - [`EngineBuilder::help_while_waiting`] and
//!   [`EngineBuilder::help_while_pushing`]: the calling thread runs
//!   queued ops while it waits (and pushes), for a program that gives the
//!   engine one worker fewer than it has CPUs. Beside a full set of
//!   workers they were level or slower on most workloads there.
//!
//! The contract every executor keeps is in the repository's design notes
//! (rules 1–8): per-var push order is effect order, failures propagate to
//! what depends on them and are reported by waits, misuse is an `Err`.
//! `PROTOCOL.md` beside this file explains how the code keeps it.

mod batch;
mod block_pool;
mod builder;
mod completion;
mod core;
mod counter;
mod diagnostics;
mod error;
mod executor;
mod inline_body;
#[cfg(not(loom))]
mod lead;
mod op;
mod operator;
mod prefetch;
mod push_count;
mod ready;
pub(crate) mod replay;
mod serial;
mod signal;
mod stream;
mod var;
#[cfg(not(loom))]
mod wait_spin;

use std::borrow::Cow;
use std::fmt;

/// The bytes one var's own allocation takes (its lines for appends, for
/// completions and the read-only fields), not counting a queue grown
/// past its inline head: what a caller sizing a workload's vars can count
/// on at least.
pub(crate) const VAR_BYTES: usize = std::mem::size_of::<var::VarInner>();

use crate::sync::{thread, Arc, Mutex};

pub use batch::Batch;
pub(crate) use builder::EngineConfig;
pub use builder::{
    EngineBuilder, EngineKind, DEFAULT_LEAD_PER_WORKER, DEFAULT_POOLED_OP_BLOCKS,
    DEFAULT_POOLED_QUEUE_ENTRIES, DEFAULT_THREAD_NAME_PREFIX, ENV_COPY_WORKERS,
    ENV_CPU_PRIORITY_WORKERS, ENV_CPU_WORKERS, ENV_ENGINE_TYPE,
};
pub use completion::Completion;
pub use diagnostics::{PendingOp, PendingReport, VarReport};
pub use error::{BuildError, EngineError, Failure, FailureKind, OpError};
pub use executor::search_config::DEFAULT_LINGER;
pub(crate) use executor::woken_by_this_thread;
pub use op::{Context, OpCtx, OpDesc, OpResult, Property, VarList};
pub use operator::Operator;
pub use replay::{PrivateAccess, PrivateVar, Replay, ReplayBuilder, ReplayHelpers};
pub use serial::Serial;
pub use var::{Var, VarId};

use self::core::Core;
use self::signal::Signal;
use op::Body;

/// A dependency engine. Cheap to clone (clones share the engine), `Send +
/// Sync`, usable from many threads at once.
///
/// Dropping the last clone waits for every pushed op, then joins every worker
/// thread; [`Engine::shutdown`] does the same explicitly.
#[derive(Clone)]
pub struct Engine {
    handle: Arc<Handle>,
}

/// Owns the core on behalf of the user's clones; its drop shuts down.
struct Handle {
    core: Arc<Core>,
    /// Serialises explicit shutdowns.
    shutdown_lock: Mutex<()>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        if self.core.is_shut_down() {
            return;
        }
        if self.core.on_own_thread() {
            // The last handle was dropped inside one of this engine's ops: a
            // worker cannot join itself, so a helper thread finishes the
            // shutdown once this op (and everything else) has completed.
            let core = self.core.clone();
            if thread::spawn_named("depengine-shutdown".into(), move || core.shutdown()).is_err() {
                eprintln!("depengine: could not start the shutdown thread; workers left running");
            }
            return;
        }
        self.core.shutdown();
    }
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("id", &self.core().id)
            .field("kind", &self.kind())
            .field("pending", &self.core().pending())
            .finish()
    }
}

impl Engine {
    /// A builder with default settings.
    pub fn builder() -> EngineBuilder {
        EngineBuilder::new()
    }

    /// An engine configured from `DEPENGINE_ENGINE_TYPE`,
    /// `DEPENGINE_CPU_WORKERS`, `DEPENGINE_CPU_PRIORITY_WORKERS` and
    /// `DEPENGINE_COPY_WORKERS`, defaults for what they leave unset.
    ///
    /// # Errors
    ///
    /// [`BuildError::BadEnv`] naming the variable with a bad value.
    pub fn from_env() -> Result<Engine, BuildError> {
        EngineBuilder::new().env()?.build()
    }

    pub(crate) fn start(config: EngineConfig) -> Result<Engine, BuildError> {
        let core = Core::start(config).map_err(|e| match e {
            EngineError::Spawn { thread, message } => BuildError::Spawn { thread, message },
            other => BuildError::Spawn {
                thread: "engine".into(),
                message: other.to_string(),
            },
        })?;
        Ok(Engine {
            handle: Arc::new(Handle {
                core,
                shutdown_lock: Mutex::new(()),
            }),
        })
    }

    fn core(&self) -> &Core {
        &self.handle.core
    }

    /// This engine's id (vars record it; see [`VarId::engine`]).
    pub fn id(&self) -> u64 {
        self.core().id
    }

    /// The executor kind.
    pub fn kind(&self) -> EngineKind {
        self.core().config.kind
    }

    /// What this engine's worker threads' names start with: a worker is
    /// named `<prefix>-<pool>-<index>`
    /// ([`EngineBuilder::thread_name_prefix`]).
    pub fn thread_name_prefix(&self) -> &str {
        &self.core().config.thread_name_prefix
    }

    /// Worker pools and their thread counts, e.g. `[("cpu", 2), ...]`.
    pub fn pools(&self) -> Vec<(String, usize)> {
        self.core().executor_pools()
    }

    /// Ops pushed and not yet completed.
    pub fn pending(&self) -> usize {
        self.core().pending()
    }

    /// A new var of this engine.
    pub fn new_var(&self) -> Var {
        self.core().new_var(None)
    }

    /// A new var with a name, shown in errors and diagnostics.
    pub fn new_named_var(&self, name: impl Into<String>) -> Var {
        self.core().new_var(Some(name.into().into_boxed_str()))
    }

    /// Pushes an op whose body returns its result. Never blocks on other ops.
    ///
    /// A body whose captures take at most three words (24 bytes on 64-bit
    /// targets), aligned to at most a word, is stored in the engine's own
    /// op block, which is recycled: in the steady state such a push
    /// allocates nothing. A bigger body is boxed.
    ///
    /// # Errors
    ///
    /// A var of another engine or a deleted var, a GPU context the engine
    /// does not have, or an engine already shut down. The op is not pushed.
    pub fn push<F>(&self, desc: OpDesc<'_>, body: F) -> Result<(), EngineError>
    where
        F: FnOnce(&OpCtx<'_>) -> OpResult + Send + 'static,
    {
        self.core().push(desc, Body::sync(body), None, false)
    }

    /// Pushes the ops `ops` yields, in order, each as [`Engine::push`]
    /// pushes it; stops at the first op that `push` refuses.
    ///
    /// What it adds to a loop of pushes: while it pushes one op it has
    /// already taken the next few (up to seven) from the iterator and
    /// asked the CPU for the cache lines that their pushes read and
    /// write in the vars they write. When the ops write vars out of this
    /// core's caches (a fresh output per op, or many vars used once in a
    /// while), a loop of pushes waits for those misses one op after
    /// another, while here they overlap with the pushes before
    /// (BENCHMARKS-HISTORY.md, "The engine's stream"). Nothing else changes: the
    /// ops depend on each other as the same pushes would make them, and
    /// may start as soon as they are pushed; only the iterator is
    /// advanced earlier, so an iterator that depends on what was pushed
    /// before it yields is better served by `push`.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::sync::Arc;
    ///
    /// use depengine::{Engine, OpCtx, OpDesc};
    ///
    /// let engine = Engine::builder().build()?;
    /// let vars: Vec<_> = (0..100).map(|_| engine.new_var()).collect();
    /// let total = Arc::new(AtomicU64::new(0));
    /// engine.push_all(vars.iter().enumerate().map(|(i, v)| {
    ///     let total = total.clone();
    ///     let body = move |_: &OpCtx<'_>| {
    ///         total.fetch_add(i as u64, Ordering::Relaxed);
    ///         Ok(())
    ///     };
    ///     (OpDesc::new("add").writes(v), body)
    /// }))?;
    /// engine.wait_for_all()?;
    /// assert_eq!(total.load(Ordering::Relaxed), 4950);
    /// assert!(vars.iter().all(|v| v.version() == 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// The first error of [`Engine::push`]: the ops before the refused one
    /// are pushed; it and those after it are not, and the ones already
    /// taken from the iterator are dropped.
    pub fn push_all<'v, F, I>(&self, ops: I) -> Result<(), EngineError>
    where
        I: IntoIterator<Item = (OpDesc<'v>, F)>,
        F: FnOnce(&OpCtx<'_>) -> OpResult + Send + 'static,
    {
        let core = self.core();
        stream::each_ahead(
            ops,
            |(desc, _)| core.ask_for_push_lines(desc),
            |(desc, body)| core.push(desc, Body::sync(body), None, false),
        )
    }

    /// Pushes an op whose body completes it through a [`Completion`], from
    /// any thread. Dropping the completion unconsumed fails the op. Small
    /// bodies are stored as in [`Engine::push`].
    ///
    /// A body that only hands its completion over (to an I/O thread, a
    /// device, another engine) is best pushed with [`Property::Async`]:
    /// the per-device executor then runs it on the thread that makes it
    /// ready, with no worker woken for a body that takes no time
    /// (`BENCHMARKS-HISTORY.md`, "`roundtrip` with the op pushed as
    /// `Property::Async`").
    ///
    /// # Errors
    ///
    /// As [`Engine::push`].
    pub fn push_async<F>(&self, desc: OpDesc<'_>, body: F) -> Result<(), EngineError>
    where
        F: FnOnce(&OpCtx<'_>, Completion) + Send + 'static,
    {
        self.core()
            .push(desc, Body::asynchronous(body), None, false)
    }

    /// Pushes an op and blocks until it has run; returns what its body
    /// returned.
    ///
    /// # Errors
    ///
    /// As [`Engine::push`]; [`EngineError::OpFailed`] when the body failed or
    /// the op was skipped because a var it uses had failed (that failure is
    /// then reported, here, once); [`EngineError::WaitFromWorker`] when called
    /// from inside an op of this engine.
    ///
    /// # Examples
    ///
    /// ```
    /// use depengine::{Engine, OpDesc};
    /// let engine = Engine::builder().build().unwrap();
    /// let v = engine.new_var();
    /// let n = engine.push_sync(OpDesc::new("answer").reads(&v), |_| Ok(42)).unwrap();
    /// assert_eq!(n, 42);
    /// ```
    pub fn push_sync<R, F>(&self, desc: OpDesc<'_>, body: F) -> Result<R, EngineError>
    where
        R: Send + 'static,
        F: FnOnce(&OpCtx<'_>) -> Result<R, OpError> + Send + 'static,
    {
        self.core().check_blocking("push_sync")?;
        let slot: Arc<Mutex<Option<R>>> = Arc::new(Mutex::new(None));
        let out = slot.clone();
        let signal = Arc::new(Signal::new());
        let wrapped = move |ctx: &OpCtx<'_>| -> OpResult {
            let r = body(ctx)?;
            *out.lock() = Some(r);
            Ok(())
        };
        self.core()
            .push(desc, Body::sync(wrapped), Some(signal.clone()), false)?;
        match signal.wait(|| self.core().cpu_to_spare()) {
            Ok(()) => Ok(slot
                .lock()
                .take()
                .expect("a successful push_sync body stored its result")),
            Err(f) => {
                self.core().mark_reported(&f);
                Err(EngineError::OpFailed(f))
            }
        }
    }

    /// Keeps an op description and body for repeated pushes.
    ///
    /// # Errors
    ///
    /// A var of another engine or a deleted var.
    pub fn new_operator<F>(&self, desc: OpDesc<'_>, body: F) -> Result<Operator, EngineError>
    where
        F: Fn(&OpCtx<'_>) -> OpResult + Send + Sync + 'static,
    {
        let reads: Vec<Var> = desc.reads.iter().cloned().collect();
        let writes: Vec<Var> = desc.writes.iter().cloned().collect();
        for v in reads.iter().chain(writes.iter()) {
            self.core().check_var_pub(v, &desc.name)?;
        }
        Ok(Operator {
            engine: self.id(),
            name: desc.name,
            reads,
            writes,
            context: desc.context,
            property: desc.property,
            body: Arc::new(body),
        })
    }

    /// Pushes a reusable operator with the given priority.
    ///
    /// # Errors
    ///
    /// As [`Engine::push`]; an operator made by another engine is a
    /// [`EngineError::ForeignVar`] on its first var.
    pub fn push_operator(&self, op: &Operator, priority: i32) -> Result<(), EngineError> {
        self.check_operator(op)?;
        self.core().push(
            op.desc(priority),
            Body::Shared(op.body.clone()),
            None,
            false,
        )
    }

    /// Deletes an operator once every push of it so far has run: the
    /// deletion is an op that writes all the operator's vars.
    ///
    /// # Errors
    ///
    /// As [`Engine::push`].
    pub fn delete_operator(&self, op: Operator) -> Result<(), EngineError> {
        self.check_operator(&op)?;
        let mut vars = op.reads.clone();
        vars.extend(op.writes.iter().cloned());
        let desc = OpDesc::new(Cow::Owned(format!("delete operator {}", op.name)))
            .writes(&vars)
            .property(Property::NoSkip);
        let body = op.body;
        // The deletion only drops the body: bookkeeping, not a write.
        self.core().push(
            desc,
            Body::sync(move |_| {
                drop(body);
                Ok(())
            }),
            None,
            true,
        )
    }

    fn check_operator(&self, op: &Operator) -> Result<(), EngineError> {
        if op.engine != self.id() {
            let var = op
                .reads
                .iter()
                .chain(op.writes.iter())
                .next()
                .map(|v| v.id())
                .unwrap_or(VarId {
                    engine: op.engine,
                    id: 0,
                });
            return Err(EngineError::ForeignVar {
                var,
                var_engine: op.engine,
                engine: self.id(),
            });
        }
        Ok(())
    }

    /// Deletes a var: pushes an op that writes it, so the var is gone only
    /// after every earlier op on it has finished (rule 6). Later uses of the
    /// var are errors.
    ///
    /// # Errors
    ///
    /// As [`Engine::push`] (deleting a var twice is a [`EngineError::DeletedVar`]).
    pub fn delete_var(&self, var: Var) -> Result<(), EngineError> {
        self.delete_var_with(var, || {})
    }

    /// Deletes a var and runs `on_deleted` after the last op on it — the hook
    /// that hands a buffer's memory back to its pool.
    ///
    /// # Errors
    ///
    /// As [`Engine::delete_var`].
    pub fn delete_var_with<F>(&self, mut var: Var, on_deleted: F) -> Result<(), EngineError>
    where
        F: FnOnce() + Send + 'static,
    {
        let desc = OpDesc::new("delete_var")
            .writes(&var)
            .property(Property::DeleteVar);
        self.core().push(
            desc,
            Body::sync(move |_| {
                on_deleted();
                Ok(())
            }),
            None,
            false,
        )?;
        self.core().mark_deleted(&mut var);
        Ok(())
    }

    /// Blocks until every op pushed so far that writes `var` has completed.
    ///
    /// # Errors
    ///
    /// [`EngineError::OpFailed`] with the failure the var carries (then the
    /// var is clean again); [`EngineError::WaitFromWorker`] from inside an op
    /// of this engine; [`EngineError::ForeignVar`].
    pub fn wait_for_var(&self, var: &Var) -> Result<(), EngineError> {
        self.core().wait_var(var, false)
    }

    /// Blocks until every op pushed so far that reads or writes `var` has
    /// completed.
    ///
    /// # Errors
    ///
    /// As [`Engine::wait_for_var`].
    pub fn wait_to_write(&self, var: &Var) -> Result<(), EngineError> {
        self.core().wait_var(var, true)
    }

    /// Blocks until every op pushed so far has completed.
    ///
    /// # Errors
    ///
    /// [`EngineError::OpFailed`] with the failure that no wait has reported
    /// yet, or [`EngineError::OpsFailed`] with the first of several and their
    /// count; afterwards every var is clean.
    /// [`EngineError::WaitFromWorker`] from inside an op of this engine.
    pub fn wait_for_all(&self) -> Result<(), EngineError> {
        self.core().wait_all()
    }

    /// Every var with queued, running or failed work: who holds it, who waits
    /// behind, and on what.
    pub fn pending_ops(&self) -> PendingReport {
        PendingReport::collect(self.core().pending(), &self.core().live_vars())
    }

    /// How many of this engine's vars are alive: held by a [`Var`] handle
    /// or by an op pushed on them that has not completed.
    ///
    /// A var is freed when its last handle is gone and its last op has
    /// completed, so once no handle is left and [`Engine::wait_for_all`]
    /// has returned, this is 0: anything more is a var the engine leaked.
    ///
    /// ```
    /// use depengine::{Engine, OpDesc};
    ///
    /// let engine = Engine::builder().build()?;
    /// let v = engine.new_var();
    /// engine.push(OpDesc::new("fill").writes(&v), |_| Ok(()))?;
    /// assert_eq!(engine.live_vars(), 1);
    /// drop(v); // the op may still be running: it keeps the var alive
    /// engine.wait_for_all()?;
    /// assert_eq!(engine.live_vars(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn live_vars(&self) -> usize {
        self.core().live_var_count()
    }

    /// Waits for every pushed op, refuses further pushes, and joins every
    /// worker thread. Dropping the last clone does the same.
    ///
    /// # Errors
    ///
    /// [`EngineError::WaitFromWorker`] from inside an op of this engine.
    pub fn shutdown(&self) -> Result<(), EngineError> {
        self.core().check_blocking("shutdown")?;
        let _g = self.handle.shutdown_lock.lock();
        self.core().shutdown();
        Ok(())
    }
}

#[cfg(test)]
mod send_sync {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send>() {}

    #[test]
    fn public_handles_are_thread_safe() {
        assert_send_sync::<Engine>();
        assert_send_sync::<Var>();
        assert_send::<Completion>();
        assert_send_sync::<Operator>();
        assert_send_sync::<EngineError>();
        assert_send_sync::<Replay>();
        assert_send_sync::<PrivateVar>();
        assert_send::<ReplayBuilder>();
    }
}

/// When a deletion makes later pushes read every var's deletion flag
/// (`Core::mark_deleted`): only while some handle of a deleted var
/// survives the deletion, since pushes name their vars by handle.
#[cfg(test)]
mod deletion_flag {
    use super::*;
    use crate::storage::{DeviceId, StorageConfig, Tensor};

    #[test]
    fn deleting_a_vars_only_handle_leaves_pushes_unchecked() {
        let engine = Engine::builder().build().unwrap();
        for _ in 0..3 {
            let v = engine.new_var();
            engine
                .push(OpDesc::new("w").writes(&v), |_| Ok(()))
                .unwrap();
            engine.delete_var(v).unwrap();
        }
        engine.wait_for_all().unwrap();
        assert!(!engine.core().any_deleted());
    }

    #[test]
    fn a_dropped_tensor_hands_its_deletion_the_only_handle() {
        let engine = Engine::builder().build().unwrap();
        let storage = StorageConfig::default().create(DeviceId::cpu(0));
        let t = Tensor::from_slice(&engine, &storage, &[1u32, 2, 3]).unwrap();
        let copy = t.clone();
        drop(t);
        assert_eq!(copy.to_vec().unwrap(), [1, 2, 3]);
        drop(copy);
        engine.wait_for_all().unwrap();
        assert!(!engine.core().any_deleted());
        // A handle taken out of a tensor outlives it: its pushes are refused.
        let t = Tensor::from_slice(&engine, &storage, &[4u32]).unwrap();
        let var = t.var().clone();
        drop(t);
        assert!(engine.core().any_deleted());
        let err = engine
            .push(OpDesc::new("late").reads(&var), |_| Ok(()))
            .unwrap_err();
        assert!(matches!(err, EngineError::DeletedVar { .. }), "{err:?}");
    }

    #[test]
    fn a_surviving_clone_makes_pushes_check() {
        let engine = Engine::builder().build().unwrap();
        let v = engine.new_var();
        let clone = v.clone();
        engine.delete_var(v).unwrap();
        assert!(engine.core().any_deleted());
        let err = engine
            .push(OpDesc::new("late").writes(&clone), |_| Ok(()))
            .unwrap_err();
        assert!(matches!(err, EngineError::DeletedVar { .. }), "{err:?}");
    }
}
