//! The completion handle of an async op.
//!
//! # Protocol
//!
//! An async op's body receives a [`Completion`] and must consume it exactly
//! once, from any thread: [`Completion::done`], [`Completion::fail`] or
//! [`Completion::complete`]. Consuming it completes the op (releases its vars
//! and dispatches what became ready on the calling thread's executor path).
//! The type system enforces "at most once" (the methods take `self`);
//! "at least once" is enforced at run time: dropping the handle unconsumed —
//! including while the body unwinds from a panic — completes the op as failed
//! with [`FailureKind::CompletionDropped`], so a forgotten handle is an error a
//! wait reports, never a hang.
//!
//! # Completion during the body
//!
//! The body's `OpCtx` borrows the op block, so the block must not be
//! recycled before the body returns — even when the body completes its own
//! handle, or hands it to a thread that completes it at once. The block's
//! `async_phase` decides who completes the op:
//!
//! | phase           | set by                                | then            |
//! |-----------------|---------------------------------------|-----------------|
//! | `IN_BODY`       | executing thread, before the body     |                 |
//! | `DONE_IN_BODY`  | completion, CAS from `IN_BODY`        | executing thread completes after the body returns |
//! | `BODY_RETURNED` | executing thread, CAS from `IN_BODY`  | the completion completes when it comes |
//!
//! Exactly one of the two CASes from `IN_BODY` succeeds, so the op is
//! completed exactly once, and never while its body runs. The completion
//! stores its result in the block before its CAS (AcqRel); the executing
//! thread reads it after failing its own (Acquire). A handle dropped while
//! the body unwinds from a panic reports the panic's message.

use std::fmt;

use crate::sync::Arc;

use super::core::Core;
use super::error::{FailureKind, OpError};
use super::op::{OpPtr, OpResult};

/// Completes an async op; see the module docs. Must be consumed.
///
/// # Examples
///
/// ```
/// use depengine::{Engine, OpDesc};
/// let engine = Engine::builder().build().unwrap();
/// let v = engine.new_var();
/// engine
///     .push_async(OpDesc::new("io").writes(&v), |_, done| {
///         std::thread::spawn(move || done.done());
///     })
///     .unwrap();
/// engine.wait_for_var(&v).unwrap();
/// assert_eq!(v.version(), 1);
/// ```
///
/// A handle completes its op at most once: consuming it twice does not
/// compile.
///
/// ```compile_fail,E0382
/// use depengine::{Engine, OpDesc};
/// let engine = Engine::builder().build().unwrap();
/// engine
///     .push_async(OpDesc::new("twice"), |_, done| {
///         done.done();
///         done.done();
///     })
///     .unwrap();
/// ```
#[must_use = "an async op completes only when its Completion is consumed; dropping it fails the op"]
pub struct Completion {
    core: Arc<Core>,
    op: Option<OpPtr>,
}

// SAFETY: the handle is the sole owner of the running async op (see `OpPtr`);
// completing it from another thread is the point of the handle, and `Core` is
// `Sync`.
unsafe impl Send for Completion {}

impl Completion {
    pub(crate) fn new(core: Arc<Core>, op: OpPtr) -> Self {
        Completion { core, op: Some(op) }
    }

    /// Completes the op successfully.
    pub fn done(mut self) {
        self.finish(Ok(()));
    }

    /// Completes the op as failed with `err`: the vars it writes become failed.
    pub fn fail(mut self, err: impl Into<OpError>) {
        let err = err.into();
        self.finish(Err((FailureKind::Error, err.message().to_string())));
    }

    /// Completes the op with `result`.
    pub fn complete(self, result: OpResult) {
        match result {
            Ok(()) => self.done(),
            Err(e) => self.fail(e),
        }
    }

    fn finish(&mut self, result: Result<(), (FailureKind, String)>) {
        if let Some(op) = self.op.take() {
            self.core.finish_async(op, result);
        }
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        if self.op.is_some() {
            let message = if std::thread::panicking() {
                "the op panicked before completing its handle".to_string()
            } else {
                "the completion handle was dropped without being called".to_string()
            };
            self.finish(Err((FailureKind::CompletionDropped, message)));
        }
    }
}

impl fmt::Debug for Completion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completion")
            .field("pending", &self.op.is_some())
            .finish()
    }
}

/// Pushes an async op that writes `var` and returns its completion: the
/// op, and every op queued behind it on `var`, waits until the caller
/// consumes it. For tests that need ops which cannot complete yet.
#[cfg(all(test, not(loom)))]
pub(crate) fn held_op(engine: &super::Engine, var: &super::Var) -> Completion {
    let (tx, rx) = std::sync::mpsc::channel();
    engine
        .push_async(super::OpDesc::new("held").writes(var), move |_, done| {
            tx.send(done).expect("the test waits for the completion");
        })
        .expect("a held op is pushed");
    rx.recv().expect("the held op runs")
}
