//! Running ready ops inline on the current thread, without recursion.
//!
//! Completing an op can make others ready, whose completion makes more ready:
//! running them recursively would grow the stack with the length of a chain.
//! The first inline run on a thread becomes the *drainer*: ops made ready
//! while it runs are queued in a thread-local list and run by its loop.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

use crate::sync::engine_thread_local;

use super::super::core::Core;
use super::super::op::OpPtr;

engine_thread_local! {
    static DRAINING: Cell<bool> = const { Cell::new(false) };
}
engine_thread_local! {
    static QUEUE: RefCell<VecDeque<(OpPtr, *const Core)>> = const { RefCell::new(VecDeque::new()) };
}

/// Runs `op` (and whatever it makes ready inline) on this thread.
pub(super) fn run(core: &Core, op: OpPtr) {
    if DRAINING.with(|d| d.replace(true)) {
        QUEUE.with(|q| q.borrow_mut().push_back((op, core as *const Core)));
        return;
    }
    run_one(core, op);
    while let Some((op, core)) = QUEUE.with(|q| q.borrow_mut().pop_front()) {
        // SAFETY: a core outlives its pending ops (shutdown waits for them),
        // and this op is pending until `run_one` completes it.
        run_one(unsafe { &*core }, op);
    }
    DRAINING.with(|d| d.set(false));
}

fn run_one(core: &Core, op: OpPtr) {
    let ready = core.execute(op, None);
    if !ready.is_empty() {
        core.dispatch_all(ready, None);
    }
}
