//! Executors: where a ready op runs. One file per executor behind one enum.
//!
//! * [`naive`]: every op runs inline on the thread that made it ready (the
//!   pushing thread, or the thread that completed an async op) — for debugging.
//! * [`pooled`]: one shared worker pool plus an IO pool for copies.
//! * [`per_device`]: per-device pools (CPU, each simulated GPU), a CPU
//!   priority pool served highest priority first, copy pools; async and
//!   deletion ops run inline.
//!
//! The engine's own wait ops (empty bodies that only signal a blocked caller)
//! run inline under every executor: a worker hop would only add latency.

mod ahead;
mod inline;
#[cfg(not(loom))]
mod linger;
pub(crate) mod naive;
pub(crate) mod per_device;
mod pool;
pub(crate) mod pooled;
mod push_ring;
mod pusher_queues;
pub(crate) mod search_config;
mod sleep;

use pool::WorkerPool;
pub(crate) use pool::{LocalSlot, PoolShared};
pub(crate) use sleep::woken_by_this_thread;

use crate::sync::Arc;

use super::core::Core;
use super::error::EngineError;
use super::op::{OpBlock, OpPtr};
use super::ready::ReadyList;
use super::EngineKind;

/// Where one op goes.
pub(crate) enum Route<'a> {
    Inline,
    Pool(&'a WorkerPool),
}

pub(crate) enum Executor {
    Naive,
    Pooled(pooled::Pooled),
    PerDevice(per_device::PerDevice),
}

impl Executor {
    pub(crate) fn start(core: &Arc<Core>) -> Result<Executor, EngineError> {
        Ok(match core.config.kind {
            EngineKind::Naive => Executor::Naive,
            EngineKind::Pooled => Executor::Pooled(pooled::Pooled::start(core)?),
            EngineKind::PerDevice => Executor::PerDevice(per_device::PerDevice::start(core)?),
        })
    }

    fn route(&self, b: &OpBlock) -> Route<'_> {
        if !b.bump_version {
            return Route::Inline;
        }
        match self {
            Executor::Naive => Route::Inline,
            Executor::Pooled(p) => p.route(b),
            Executor::PerDevice(p) => p.route(b),
        }
    }

    /// Sends a ready op where it runs.
    pub(crate) fn dispatch(&self, core: &Core, op: OpPtr, local: Option<&mut LocalSlot<'_>>) {
        // SAFETY: the caller owns the ready op; it is live until it completes.
        let b = unsafe { op.get() };
        match self.route(b) {
            Route::Inline => inline::run(core, op),
            Route::Pool(pool) => match local {
                Some(slot)
                    if slot.next.is_none()
                        && std::ptr::eq(slot.pool, &*pool.shared)
                        && slot.pool.slot_allowed() =>
                {
                    *slot.next = Some(op);
                }
                _ => pool.shared.push(op),
            },
        }
    }

    pub(crate) fn dispatch_all(
        &self,
        core: &Core,
        mut ready: ReadyList,
        mut local: Option<LocalSlot<'_>>,
    ) {
        while let Some(op) = ready.pop() {
            self.dispatch(core, op, local.as_mut());
        }
    }

    /// Sends the ops a batch held back where they run, in push order: each
    /// pool's queue gets them one after another, and its sleepers one
    /// wake-up call for as many of them as there are ops, not one per op.
    pub(crate) fn dispatch_batch(&self, core: &Core, ops: &[OpPtr]) {
        let mut touched: Vec<(&WorkerPool, usize)> = Vec::new();
        for &op in ops {
            // SAFETY: the batch owns the ready op; it is live until it completes.
            let b = unsafe { op.get() };
            match self.route(b) {
                Route::Inline => inline::run(core, op),
                Route::Pool(pool) => {
                    pool.shared.enqueue(op);
                    match touched.iter_mut().find(|(p, _)| std::ptr::eq(*p, pool)) {
                        Some((_, n)) => *n += 1,
                        None => touched.push((pool, 1)),
                    }
                }
            }
        }
        for (pool, n) in touched {
            pool.shared.notify_many(n);
        }
    }

    /// The pool whose ordinary queued ops a thread that is not a worker
    /// may run (`EngineBuilder::help_while_waiting`,
    /// `help_while_pushing`): the CPU pool, or the shared pool of the
    /// pooled executor; none under the naive executor.
    pub(crate) fn helper_pool(&self) -> Option<&PoolShared> {
        match self {
            Executor::Naive => None,
            Executor::Pooled(p) => Some(p.helper_pool()),
            Executor::PerDevice(p) => Some(p.helper_pool()),
        }
    }

    pub(crate) fn stop_and_join(&self) {
        match self {
            Executor::Naive => {}
            Executor::Pooled(p) => p.stop_and_join(),
            Executor::PerDevice(p) => p.stop_and_join(),
        }
    }

    /// Worker threads that do not sleep, over every pool: each holds a
    /// CPU, running ops or looking for them. A hint, read without ordering
    /// (`wait_spin.rs`).
    #[cfg(not(loom))]
    pub(crate) fn awake_workers(&self) -> usize {
        match self {
            Executor::Naive => 0,
            Executor::Pooled(p) => p.awake_workers(),
            Executor::PerDevice(p) => p.awake_workers(),
        }
    }

    /// Wakes a sleeper of each pool where a backlog waits beside it
    /// (`PoolShared::wake_for_backlog`); a pushing thread's look now and
    /// then.
    #[cfg(not(loom))]
    pub(crate) fn wake_for_backlog(&self) {
        match self {
            Executor::Naive => {}
            Executor::Pooled(p) => p.wake_for_backlog(),
            Executor::PerDevice(p) => p.wake_for_backlog(),
        }
    }

    /// Worker threads per pool, for reports: `(pool name, threads)`.
    pub(crate) fn pools(&self) -> Vec<(String, usize)> {
        match self {
            Executor::Naive => Vec::new(),
            Executor::Pooled(p) => p.pools(),
            Executor::PerDevice(p) => p.pools(),
        }
    }
}
