//! Pushing many ops with one hand-over to the workers.
//!
//! # Why
//!
//! Every op that is ready at its push is handed to the workers at once: a
//! write to the pool's queue, whose line the idle workers keep reading, and
//! a look at the sleepers, which a wake-up call follows when one sleeps.
//! With one pushing thread and many workers that per-op hand-over is what
//! caps the rate at which ops reach them (BENCHMARKS.md, 16 workers). A
//! batch appends each op to its vars as `push` does, so dependencies are
//! exactly those of the same pushes one by one, but holds back the ops that
//! are ready at once and hands them over together when the batch closes:
//! one run of queue writes, one look at the sleepers, one wake-up call.
//!
//! # Rules
//!
//! Held-back ops start only when the batch closes, so a wait on the same
//! engine from inside the batch would wait for itself: it is refused with
//! [`EngineError::WaitInBatch`]. The batch closes when its closure returns,
//! with an error or by panicking too: whatever was pushed runs.

use super::core::Core;
use super::error::EngineError;
use super::op::{Body, OpCtx, OpDesc, OpPtr, OpResult};
use super::{Completion, Engine};

/// Ops pushed inside [`Engine::batch`]; see there.
pub struct Batch<'a> {
    core: &'a Core,
    held: Vec<OpPtr>,
}

impl Batch<'_> {
    /// As [`Engine::push`]; the op starts when the batch closes at the
    /// earliest.
    ///
    /// # Errors
    ///
    /// As [`Engine::push`].
    pub fn push<F>(&mut self, desc: OpDesc<'_>, body: F) -> Result<(), EngineError>
    where
        F: FnOnce(&OpCtx<'_>) -> OpResult + Send + 'static,
    {
        self.core
            .push_to(desc, Body::sync(body), None, false, Some(&mut self.held))
            .map(drop)
    }

    /// As [`Engine::push_async`]; the op starts when the batch closes at
    /// the earliest.
    ///
    /// # Errors
    ///
    /// As [`Engine::push`].
    pub fn push_async<F>(&mut self, desc: OpDesc<'_>, body: F) -> Result<(), EngineError>
    where
        F: FnOnce(&OpCtx<'_>, Completion) + Send + 'static,
    {
        self.core
            .push_to(
                desc,
                Body::asynchronous(body),
                None,
                false,
                Some(&mut self.held),
            )
            .map(drop)
    }

    /// Ops held back so far: pushed in this batch and ready, waiting for
    /// the batch to close.
    pub fn held(&self) -> usize {
        self.held.len()
    }
}

/// Closes the batch however [`Engine::batch`]'s closure ends (returned or
/// unwinding): clears the thread's batch mark and hands the held ops over.
impl Drop for Batch<'_> {
    fn drop(&mut self) {
        self.core.close_batch();
        self.core.dispatch_batch(&self.held);
    }
}

impl Engine {
    /// Runs `f` with a [`Batch`] to push ops through, then hands every op
    /// that was ready at its push to the workers at once (see the `batch`
    /// module docs: one hand-over instead of one per op). Dependencies are
    /// those of the same pushes made one by one. Ops that become ready
    /// later, when an op they wait for completes, start as usual.
    ///
    /// Returns what `f` returns. The held ops are handed over whether `f`
    /// returns `Ok`, returns an error or panics.
    ///
    /// # Errors
    ///
    /// Whatever `f` returns; inside `f`, waits on this engine (`wait_*`,
    /// `push_sync`, `shutdown`) fail with [`EngineError::WaitInBatch`].
    ///
    /// # Examples
    ///
    /// ```
    /// use depengine::{Engine, OpDesc};
    /// let engine = Engine::builder().build().unwrap();
    /// let v = engine.new_var();
    /// engine
    ///     .batch(|b| {
    ///         for _ in 0..100 {
    ///             b.push(OpDesc::new("step").writes(&v), |_| Ok(()))?;
    ///         }
    ///         Ok(())
    ///     })
    ///     .unwrap();
    /// engine.wait_for_var(&v).unwrap();
    /// assert_eq!(v.version(), 100);
    /// ```
    pub fn batch<R>(
        &self,
        f: impl FnOnce(&mut Batch<'_>) -> Result<R, EngineError>,
    ) -> Result<R, EngineError> {
        let core = self.core();
        core.open_batch();
        let mut batch = Batch {
            core,
            held: Vec::new(),
        };
        f(&mut batch)
    }
}
