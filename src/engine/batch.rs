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
//!
//! For the same reason a push inside a batch never waits for the
//! pushing thread's lead (`EngineBuilder::max_lead`). The batch keeps it
//! when it closes instead: once its held ops are handed over, a batch
//! whose pushes passed a point where a plain push looks at the lead
//! (every 256 pushes) looks, and waits as that push would. A batch nested
//! in another of the same engine leaves the look to the outermost one.
//! Until this was so, a program that pushed in batches ran as far ahead
//! of the workers as it liked (100,000 ops of 10 µs at 2 workers: all
//! pushed in 23 ms of a run of 523), holding an op block and queue
//! entries for every op pushed.

use super::core::Core;
use super::error::EngineError;
use super::op::{Body, OpCtx, OpDesc, OpPtr, OpResult};
use super::{Completion, Engine};

/// Ops pushed inside [`Engine::batch`]; see there.
pub struct Batch<'a> {
    core: &'a Core,
    held: Vec<OpPtr>,
    /// Some push of the batch was one at which a push outside a batch
    /// looks at the lead: the batch looks when it closes.
    owes_look: bool,
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
        let seq = self
            .core
            .push_to(desc, Body::sync(body), None, false, Some(&mut self.held))?;
        self.owes_look |= looks_at(seq);
        Ok(())
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
        let seq = self.core.push_to(
            desc,
            Body::asynchronous(body),
            None,
            false,
            Some(&mut self.held),
        )?;
        self.owes_look |= looks_at(seq);
        Ok(())
    }

    /// Ops held back so far: pushed in this batch and ready, waiting for
    /// the batch to close.
    pub fn held(&self) -> usize {
        self.held.len()
    }
}

/// Closes the batch however [`Engine::batch`]'s closure ends (returned or
/// unwinding): clears the thread's batch mark, hands the held ops over,
/// then looks at the lead if it owes a look.
impl Drop for Batch<'_> {
    fn drop(&mut self) {
        let look = self.core.close_batch(self.owes_look);
        self.core.dispatch_batch(&self.held);
        #[cfg(not(loom))]
        if look {
            self.core.look_after_batch();
        }
        #[cfg(loom)]
        let _ = look;
    }
}

/// True for the push numbered `seq` when a push outside a batch would
/// look at the lead there (every [`CHECK_EVERY`](super::lead::CHECK_EVERY)
/// pushes). The engine's lead is not modelled under loom.
#[inline]
fn looks_at(seq: u64) -> bool {
    #[cfg(not(loom))]
    {
        seq % super::lead::CHECK_EVERY == 0
    }
    #[cfg(loom)]
    {
        let _ = seq;
        false
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
            owes_look: false,
        };
        f(&mut batch)
    }
}
