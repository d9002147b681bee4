//! What both modes share: buffers, the op descriptions, the meter that
//! times bodies, and the final figures.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::engine::{Context, Engine, EngineError, OpError, Property};
use crate::storage::{Allocation, DeviceId, DeviceKind, Storages};
use crate::sync::{Arc, AtomicU64, AtomicUsize, Ordering};

use super::super::ir::{Graph, OpId, OpKind};
use super::super::planner::MemoryPlan;
use super::body::{fill_pattern, hash_bytes, initial_seed, reported_tensors, Buf, OpBody, OpData};
use super::{ExecError, Progress, RunOptions, RunReport};

/// Buffers handed to a body on another thread.
pub(crate) struct SendBufs(pub(crate) Vec<Buf>);

// SAFETY: a `Buf` names a block that the run keeps alive until every op has
// completed (it waits for all ops before freeing, and leaks the blocks when
// it cannot wait). Who touches the bytes when is decided by the engine: the
// op holds a read of every input's var and the write of every output's var
// while its body runs, so moving the pointers to the worker that runs the
// op creates no data race.
unsafe impl Send for SendBufs {}

/// A view of the first `len` bytes of `a`.
pub(crate) fn buf(a: &Allocation, len: u64) -> Buf {
    debug_assert!(len as usize <= a.size());
    Buf {
        ptr: a.as_non_null(),
        len: len as usize,
    }
}

/// The engine context and property of op `k`.
pub(crate) fn placement(graph: &Graph, plan: &MemoryPlan, k: OpId) -> (Context, Property) {
    let ctx = |d: DeviceId| match d.kind {
        DeviceKind::Cpu => Context::Cpu(d.id),
        DeviceKind::Gpu => Context::Gpu(d.id),
    };
    match graph.op(k).kind {
        OpKind::Copy { from, to } => match (from.kind, to.kind) {
            (_, DeviceKind::Gpu) => (ctx(to), Property::CopyToDevice),
            (DeviceKind::Gpu, _) => (ctx(from), Property::CopyFromDevice),
            _ => (ctx(to), Property::Normal),
        },
        _ => (ctx(plan.devices.op_device[k]), Property::Normal),
    }
}

/// Times bodies and counts finished ops.
pub(crate) struct Meter {
    busy_ns: AtomicU64,
    done: AtomicUsize,
    total: usize,
    progress: Option<Progress>,
}

impl Meter {
    pub(crate) fn new(total: usize, progress: Option<Progress>) -> Self {
        Self {
            busy_ns: AtomicU64::new(0),
            done: AtomicUsize::new(0),
            total,
            progress,
        }
    }

    /// An op that ran from `start` until now is done.
    pub(crate) fn finished(&self, start: Option<Instant>) {
        if let Some(start) = start {
            let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.busy_ns.fetch_add(ns, Ordering::Relaxed);
        }
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(p) = &self.progress {
            p(done, self.total);
        }
    }

    pub(crate) fn busy(&self) -> Duration {
        Duration::from_nanos(self.busy_ns.load(Ordering::Relaxed))
    }
}

/// Runs `body` (or, for a plain assign, the copy of the value into the
/// target) on the buffers, timing it.
pub(crate) fn run_op(
    graph: &Graph,
    k: OpId,
    body: &OpBody,
    inputs: &[Buf],
    outputs: &[Buf],
    meter: &Meter,
) -> Result<(), OpError> {
    let op = graph.op(k);
    let start = Instant::now();
    let mut data = OpData {
        index: k,
        op,
        inputs,
        outputs,
    };
    let result = if op.is_assign() {
        let value = data.input(1).to_vec();
        data.output_mut(0).copy_from_slice(&value);
        Ok(())
    } else {
        body(&mut data)
    };
    meter.finished(Some(start));
    result
}

/// One allocation per graph input and param storage, filled with its
/// tensor's initial pattern.
pub(crate) fn external_buffers(
    graph: &Graph,
    plan: &MemoryPlan,
    storages: &Storages,
) -> Result<Vec<Option<Allocation>>, ExecError> {
    let mut out = Vec::with_capacity(plan.storages.len());
    for info in &plan.storages {
        let Some(t) = info.external else {
            out.push(None);
            continue;
        };
        let tensor = graph.tensor(t);
        let mut a = storages
            .get(info.device)
            .allocate(info.size as usize)
            .map_err(|source| ExecError::Storage {
                what: tensor.label(),
                bytes: info.size,
                source,
            })?;
        a.fill(0);
        // SAFETY: `fill` initialised all `size` bytes; `a` is not shared yet.
        fill_pattern(unsafe { a.as_mut_slice() }, initial_seed(tensor.file_id));
        out.push(Some(a));
    }
    Ok(out)
}

/// The devices whose activation pools a run used.
pub(crate) fn devices(plan: &MemoryPlan) -> BTreeSet<DeviceId> {
    plan.storages.iter().map(|s| s.device).collect()
}

/// Peak figures of the activation pools, summed over devices.
/// Waits for every op pushed since `start`; returns the wait's result, the
/// makespan and `buffers` back. A wait refused because it was called from
/// inside an op of the same engine, or inside a batch on it, means ops may
/// still use the buffers: they are leaked rather than freed, and the error
/// is returned.
pub(crate) fn wait_all<B>(
    engine: &Engine,
    start: Instant,
    buffers: B,
) -> Result<(Result<(), EngineError>, Duration, B), ExecError> {
    let waited = engine.wait_for_all();
    let makespan = start.elapsed();
    if let Err(e @ (EngineError::WaitFromWorker { .. } | EngineError::WaitInBatch { .. })) = waited
    {
        std::mem::forget(buffers);
        return Err(e.into());
    }
    Ok((waited, makespan, buffers))
}

pub(crate) fn pool_figures(storages: &Storages, plan: &MemoryPlan) -> (u64, u64) {
    let (mut held, mut peak) = (0, 0);
    for d in devices(plan) {
        if let Some(s) = storages.stats(d) {
            held += s.allocated_bytes - s.released_bytes;
            peak += s.peak_in_use as u64;
        }
    }
    (held, peak)
}

/// Hashes of the reported tensors, reading each through `view`.
pub(crate) fn output_hashes(
    graph: &Graph,
    view: impl Fn(usize) -> Option<Vec<u8>>,
) -> Vec<(u64, u64)> {
    reported_tensors(graph)
        .into_iter()
        .map(|t| {
            (
                graph.tensor(t).file_id,
                view(t).map_or(0, |b| hash_bytes(&b)),
            )
        })
        .collect()
}

/// The report, from what both modes measured.
#[allow(clippy::too_many_arguments)]
pub(crate) fn report(
    graph: &Graph,
    plan: &MemoryPlan,
    options: &RunOptions,
    pushed: usize,
    makespan: Duration,
    meter: &Meter,
    pools: (u64, u64),
    output_hashes: Vec<(u64, u64)>,
) -> RunReport {
    let busy = meter.busy();
    let parallelism = if makespan.is_zero() {
        0.0
    } else {
        busy.as_secs_f64() / makespan.as_secs_f64()
    };
    RunReport {
        model: graph.model().to_string(),
        mode: options.mode,
        ops: graph.ops().len(),
        pushed,
        makespan,
        busy,
        parallelism,
        planned_bytes: plan.planned_bytes(),
        external_bytes: plan.external_bytes(),
        peak_pool_bytes: pools.0,
        peak_in_use_bytes: pools.1,
        output_hashes,
    }
}

/// Shares the graph with op bodies.
pub(crate) fn shared_graph(graph: &Graph) -> Arc<Graph> {
    Arc::new(graph.clone())
}
