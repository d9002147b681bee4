//! Static mode: one buffer and one var per storage id.

use std::time::Instant;

use crate::engine::{Engine, OpDesc, Var};
use crate::storage::{Allocation, Storages};

use super::super::ir::Graph;
use super::super::planner::{AssignKind, MemoryPlan};
use super::setup::{self, buf, Meter, SendBufs};
use super::{Bodies, ExecError, RunOptions, RunReport};

pub(crate) fn run(
    graph: &Graph,
    plan: &MemoryPlan,
    engine: &Engine,
    bodies: &Bodies,
    options: &RunOptions,
) -> Result<RunReport, ExecError> {
    let activations = Storages::new(options.storage.clone());
    let externals = Storages::new(options.storage.clone());
    let mut buffers: Vec<Option<Allocation>> = setup::external_buffers(graph, plan, &externals)?;
    for (s, info) in plan.storages.iter().enumerate() {
        if info.external.is_some() {
            continue;
        }
        let mut a = activations
            .get(info.device)
            .allocate(info.size as usize)
            .map_err(|source| ExecError::Storage {
                what: format!("storage {s}"),
                bytes: info.size,
                source,
            })?;
        a.fill(0);
        buffers[s] = Some(a);
    }
    let vars: Vec<Var> = (0..plan.storages.len())
        .map(|s| engine.new_named_var(format!("storage {s}")))
        .collect();
    let view = |t: usize| {
        let a = buffers[plan.storage_of[t]]
            .as_ref()
            .expect("every storage has a buffer");
        buf(a, graph.tensor(t).size)
    };

    let shared = setup::shared_graph(graph);
    let meter = crate::sync::Arc::new(Meter::new(graph.ops().len(), options.progress.clone()));
    let start = Instant::now();
    let mut pushed = 0;
    let mut push_error = None;
    for (k, op) in graph.ops().iter().enumerate() {
        if plan.assign[k] == AssignKind::Simplified {
            // The value was produced in the target's storage: nothing to do.
            meter.finished(None);
            continue;
        }
        let inputs: Vec<_> = op
            .inputs
            .iter()
            .enumerate()
            .map(|(i, &t)| {
                if op.ignored[i] {
                    super::body::Buf::EMPTY
                } else {
                    view(t)
                }
            })
            .collect();
        let outputs: Vec<_> = op.outputs.iter().map(|&t| view(t)).collect();
        let reads: Vec<&Var> = op
            .used_inputs()
            .filter(|&(i, _)| !(op.is_assign() && i == 0))
            .map(|(_, t)| &vars[plan.storage_of[t]])
            .collect();
        let writes: Vec<&Var> = op
            .outputs
            .iter()
            .map(|&t| &vars[plan.storage_of[t]])
            .collect();
        let (ctx, prop) = setup::placement(graph, plan, k);
        let desc = OpDesc::new(op.name.clone())
            .reads(&reads)
            .writes(&writes)
            .context(ctx)
            .property(prop);
        let (g, body, m) = (
            shared.clone(),
            bodies.get(&op.op_type).clone(),
            meter.clone(),
        );
        let (ins, outs) = (SendBufs(inputs), SendBufs(outputs));
        let result = engine.push(desc, move |_| {
            let (ins, outs) = (&ins, &outs);
            setup::run_op(&g, k, &body, &ins.0, &outs.0, &m)
        });
        if let Err(e) = result {
            push_error = Some(e);
            break;
        }
        pushed += 1;
    }
    let (waited, makespan, buffers) = setup::wait_all(engine, start, buffers)?;
    let hashes = if options.hash_outputs && push_error.is_none() && waited.is_ok() {
        setup::output_hashes(graph, |t| {
            buffers[plan.storage_of[t]].as_ref().map(|a| {
                // SAFETY: every op has completed (wait_for_all returned), so
                // nothing writes the block; it was initialised at setup.
                let bytes = unsafe { a.as_slice() };
                bytes[..graph.tensor(t).size as usize].to_vec()
            })
        })
    } else {
        Vec::new()
    };
    let pools = setup::pool_figures(&activations, plan);
    for (s, a) in buffers.into_iter().enumerate() {
        if let Some(a) = a {
            let store = if plan.storages[s].external.is_some() {
                &externals
            } else {
                &activations
            };
            // A block always goes back to the manager that made it.
            let _ = store.free(a);
        }
    }
    drop(vars);
    if let Some(e) = push_error {
        return Err(e.into());
    }
    waited?;
    Ok(setup::report(
        graph, plan, options, pushed, makespan, &meter, pools, hashes,
    ))
}
