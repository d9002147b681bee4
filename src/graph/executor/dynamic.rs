//! Dynamic mode: one var per tensor; buffers allocated by their producer
//! and freed by a deletion op after their last reader.

use std::time::Instant;

use crate::engine::{Engine, OpDesc, OpError, Var};
use crate::storage::{Allocation, Storage, Storages};
use crate::sync::{Arc, Mutex};

use super::super::format::TensorKind;
use super::super::ir::Graph;
use super::super::planner::{MemoryPlan, Placement};
use super::body::Buf;
use super::setup::{self, buf, Meter, SendBufs};
use super::{Bodies, ExecError, RunOptions, RunReport};

/// The buffer of one tensor, allocated when its producer runs.
struct Slot {
    block: Mutex<Option<Allocation>>,
    storage: Arc<dyn Storage>,
    size: u64,
}

impl Slot {
    /// The block, allocated (and zeroed) on first use by the producer.
    fn produce(&self) -> Result<Buf, OpError> {
        let mut guard = self.block.lock();
        if guard.is_none() {
            let mut a = self
                .storage
                .allocate(self.size as usize)
                .map_err(|e| OpError::msg(format!("cannot allocate {} B: {e}", self.size)))?;
            a.fill(0);
            *guard = Some(a);
        }
        Ok(buf(guard.as_ref().expect("allocated above"), self.size))
    }

    /// The block of a tensor already produced.
    fn read(&self) -> Result<Buf, OpError> {
        self.block
            .lock()
            .as_ref()
            .map(|a| buf(a, self.size))
            .ok_or_else(|| OpError::msg("an input has no buffer (freed or never produced)"))
    }

    fn free(&self) {
        if let Some(a) = self.block.lock().take() {
            let _ = self.storage.free(a);
        }
    }
}

/// Where a tensor's bytes are in dynamic mode.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Home {
    /// The buffer of an external storage (inputs, params, assign outputs).
    External(usize),
    /// A slot of its own.
    Own,
}

pub(crate) fn run(
    graph: &Graph,
    plan: &MemoryPlan,
    engine: &Engine,
    bodies: &Bodies,
    options: &RunOptions,
) -> Result<RunReport, ExecError> {
    let n_t = graph.tensors().len();
    let activations = Storages::new(options.storage.clone());
    let externals = Storages::new(options.storage.clone());
    let ext = setup::external_buffers(graph, plan, &externals)?;
    let home: Vec<Home> = (0..n_t)
        .map(|t| match plan.placement[t] {
            Placement::External | Placement::AssignOutput { .. } => {
                Home::External(plan.storage_of[t])
            }
            _ => Home::Own,
        })
        .collect();
    let slots: Arc<Vec<Slot>> = Arc::new(
        (0..n_t)
            .map(|t| Slot {
                block: Mutex::new(None),
                storage: activations.get(plan.devices.tensor_device[t]),
                size: graph.tensor(t).size,
            })
            .collect(),
    );
    let ext_vars: Vec<Option<Var>> = plan
        .storages
        .iter()
        .enumerate()
        .map(|(s, info)| {
            info.external
                .map(|_| engine.new_named_var(format!("storage {s}")))
        })
        .collect();
    let mut own_vars: Vec<Option<Var>> = (0..n_t)
        .map(|t| (home[t] == Home::Own).then(|| engine.new_named_var(graph.tensor(t).label())))
        .collect();
    // Deletions after the last use (never for graph outputs).
    let mut deletes_at: Vec<Vec<usize>> = vec![Vec::new(); graph.ops().len()];
    for (t, tensor) in graph.tensors().iter().enumerate() {
        if home[t] == Home::Own && tensor.kind != TensorKind::Output {
            if let (Some(_), Some(last)) = (tensor.producer, graph.last_use(t)) {
                deletes_at[last].push(t);
            }
        }
    }

    let shared = setup::shared_graph(graph);
    let meter = Arc::new(Meter::new(graph.ops().len(), options.progress.clone()));
    let start = Instant::now();
    let mut pushed = 0;
    let mut push_error = None;
    'ops: for (k, op) in graph.ops().iter().enumerate() {
        let var_of = |t: usize| match home[t] {
            Home::External(s) => ext_vars[s].as_ref(),
            Home::Own => own_vars[t].as_ref(),
        };
        let ext_buf = |t: usize| match home[t] {
            Home::External(s) => ext[s].as_ref().map(|a| buf(a, graph.tensor(t).size)),
            Home::Own => None,
        };
        let inputs: Vec<(bool, Option<Buf>)> = op
            .inputs
            .iter()
            .enumerate()
            .map(|(i, &t)| (op.ignored[i], ext_buf(t)))
            .collect();
        let outputs: Vec<Option<Buf>> = op.outputs.iter().map(|&t| ext_buf(t)).collect();
        let reads: Vec<&Var> = op
            .used_inputs()
            .filter(|&(i, _)| !(op.is_assign() && i == 0))
            .filter_map(|(_, t)| var_of(t))
            .collect();
        let writes: Vec<&Var> = op.outputs.iter().filter_map(|&t| var_of(t)).collect();
        let (ctx, prop) = setup::placement(graph, plan, k);
        let desc = OpDesc::new(op.name.clone())
            .reads(&reads)
            .writes(&writes)
            .context(ctx)
            .property(prop);
        let (g, body, m, sl) = (
            shared.clone(),
            bodies.get(&op.op_type).clone(),
            meter.clone(),
            slots.clone(),
        );
        let fixed = (
            SendBufs(inputs.iter().map(|x| x.1.unwrap_or(Buf::EMPTY)).collect()),
            SendBufs(outputs.iter().map(|x| x.unwrap_or(Buf::EMPTY)).collect()),
        );
        let in_own: Vec<bool> = inputs.iter().map(|x| !x.0 && x.1.is_none()).collect();
        let out_own: Vec<bool> = outputs.iter().map(Option::is_none).collect();
        let result = engine.push(desc, move |_| {
            let fixed = &fixed;
            let o = g.op(k);
            let mut ins = fixed.0 .0.clone();
            for (i, &t) in o.inputs.iter().enumerate() {
                if in_own[i] {
                    ins[i] = sl[t].read()?;
                }
            }
            let mut outs = fixed.1 .0.clone();
            for (j, &t) in o.outputs.iter().enumerate() {
                if out_own[j] {
                    outs[j] = sl[t].produce()?;
                }
            }
            setup::run_op(&g, k, &body, &ins, &outs, &m)
        });
        if let Err(e) = result {
            push_error = Some(e);
            break;
        }
        pushed += 1;
        for &t in &deletes_at[k] {
            let Some(var) = own_vars[t].take() else {
                continue;
            };
            let sl = slots.clone();
            if let Err(e) = engine.delete_var_with(var, move || sl[t].free()) {
                push_error = Some(e);
                break 'ops;
            }
        }
    }
    let (waited, makespan, ext) = setup::wait_all(engine, start, ext)?;
    let hashes = if options.hash_outputs && push_error.is_none() && waited.is_ok() {
        setup::output_hashes(graph, |t| {
            let take = |a: &Allocation| {
                // SAFETY: every op has completed, so nothing writes the
                // block; it was initialised when allocated.
                let bytes = unsafe { a.as_slice() };
                bytes[..graph.tensor(t).size as usize].to_vec()
            };
            match home[t] {
                Home::External(s) => ext[s].as_ref().map(take),
                Home::Own => slots[t].block.lock().as_ref().map(take),
            }
        })
    } else {
        Vec::new()
    };
    let pools = setup::pool_figures(&activations, plan);
    for slot in slots.iter() {
        slot.free();
    }
    for a in ext.into_iter().flatten() {
        let _ = externals.free(a);
    }
    drop(own_vars);
    drop(ext_vars);
    if let Some(e) = push_error {
        return Err(e.into());
    }
    waited?;
    Ok(setup::report(
        graph, plan, options, pushed, makespan, &meter, pools, hashes,
    ))
}
