//! The pooled executor: one pool of workers shared by every context, plus an
//! IO pool for copy ops (MXNet's `ThreadedEnginePooled`).

use crate::sync::Arc;

use super::super::core::Core;
use super::super::error::EngineError;
use super::super::op::{OpBlock, Property};
use super::{Route, WorkerPool};

pub(crate) struct Pooled {
    workers: WorkerPool,
    io: WorkerPool,
}

impl Pooled {
    pub(crate) fn start(core: &Arc<Core>) -> Result<Self, EngineError> {
        let c = &core.config;
        let workers = WorkerPool::start(core, "worker", c.cpu_workers, false)?;
        let io = match WorkerPool::start(core, "io", c.copy_workers, false) {
            Ok(io) => io,
            Err(e) => {
                workers.stop_and_join();
                return Err(e);
            }
        };
        Ok(Pooled { workers, io })
    }

    pub(super) fn route(&self, b: &OpBlock) -> Route<'_> {
        match b.property {
            Property::CopyToDevice | Property::CopyFromDevice => Route::Pool(&self.io),
            _ => Route::Pool(&self.workers),
        }
    }

    pub(super) fn helper_pool(&self) -> &super::pool::PoolShared {
        &self.workers.shared
    }

    pub(super) fn stop_and_join(&self) {
        self.workers.stop_and_join();
        self.io.stop_and_join();
    }

    fn all(&self) -> impl Iterator<Item = &WorkerPool> {
        [&self.workers, &self.io].into_iter()
    }

    /// Workers of both pools that do not sleep (a hint).
    #[cfg(not(loom))]
    pub(super) fn awake_workers(&self) -> usize {
        self.all().map(|p| p.shared.awake_workers()).sum()
    }

    /// [`PoolShared::wake_for_backlog`](super::PoolShared::wake_for_backlog)
    /// on every pool.
    #[cfg(not(loom))]
    pub(super) fn wake_for_backlog(&self) {
        for p in self.all() {
            p.shared.wake_for_backlog();
        }
    }

    pub(super) fn pools(&self) -> Vec<(String, usize)> {
        self.all()
            .map(|p| (p.shared.name.clone(), p.len()))
            .collect()
    }
}
