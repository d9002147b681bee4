//! The per-device executor (MXNet's `ThreadedEnginePerDevice`): a worker pool
//! for the CPU, a CPU priority pool served highest priority first, a CPU copy
//! pool, and for each simulated GPU its own compute and copy pools. Async and
//! deletion ops run inline on the thread that made them ready: their bodies
//! only start work elsewhere or hand memory back.

use crate::sync::Arc;

use super::super::core::Core;
use super::super::error::EngineError;
use super::super::op::{Context, OpBlock, Property};
use super::{Route, WorkerPool};

struct Device {
    compute: WorkerPool,
    copy: WorkerPool,
}

pub(crate) struct PerDevice {
    cpu: WorkerPool,
    cpu_priority: WorkerPool,
    cpu_copy: WorkerPool,
    gpus: Vec<Device>,
}

impl PerDevice {
    pub(crate) fn start(core: &Arc<Core>) -> Result<Self, EngineError> {
        let c = &core.config;
        let mut started: Vec<WorkerPool> = Vec::new();
        let result = (|| {
            started.push(WorkerPool::start(core, "cpu", c.cpu_workers, false)?);
            started.push(WorkerPool::start(
                core,
                "cpu-priority",
                c.cpu_priority_workers,
                true,
            )?);
            started.push(WorkerPool::start(core, "cpu-copy", c.copy_workers, false)?);
            for g in 0..c.gpus {
                started.push(WorkerPool::start(
                    core,
                    &format!("gpu{g}"),
                    c.gpu_workers,
                    false,
                )?);
                started.push(WorkerPool::start(
                    core,
                    &format!("gpu{g}-copy"),
                    c.copy_workers,
                    false,
                )?);
            }
            Ok::<(), EngineError>(())
        })();
        if let Err(e) = result {
            for p in &started {
                p.stop_and_join();
            }
            return Err(e);
        }
        let mut it = started.into_iter();
        let cpu = it.next().expect("cpu pool");
        let cpu_priority = it.next().expect("cpu priority pool");
        let cpu_copy = it.next().expect("cpu copy pool");
        let mut gpus = Vec::new();
        while let (Some(compute), Some(copy)) = (it.next(), it.next()) {
            gpus.push(Device { compute, copy });
        }
        Ok(PerDevice {
            cpu,
            cpu_priority,
            cpu_copy,
            gpus,
        })
    }

    pub(super) fn route(&self, b: &OpBlock) -> Route<'_> {
        let gpu = match b.context {
            Context::Gpu(id) => self.gpus.get(id as usize),
            _ => None,
        };
        match b.property {
            Property::Async | Property::DeleteVar => Route::Inline,
            Property::CpuPrioritized => Route::Pool(&self.cpu_priority),
            Property::CopyToDevice | Property::CopyFromDevice => match gpu {
                Some(d) => Route::Pool(&d.copy),
                None => Route::Pool(&self.cpu_copy),
            },
            Property::Normal | Property::NoSkip => match gpu {
                Some(d) => Route::Pool(&d.compute),
                None => Route::Pool(&self.cpu),
            },
        }
    }

    fn all(&self) -> impl Iterator<Item = &WorkerPool> {
        [&self.cpu, &self.cpu_priority, &self.cpu_copy]
            .into_iter()
            .chain(self.gpus.iter().flat_map(|d| [&d.compute, &d.copy]))
    }

    /// Only the CPU pool's ops: the others are bound to their pool's
    /// threads (priority order, copies, a simulated device).
    pub(super) fn helper_pool(&self) -> &super::pool::PoolShared {
        &self.cpu.shared
    }

    pub(super) fn stop_and_join(&self) {
        for p in self.all() {
            p.stop_and_join();
        }
    }

    /// Workers of every pool that do not sleep (a hint).
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
