//! One planning run: NNVM's `AllocMemory` over the ops in execution order.
//!
//! Reference counts first: every use of a tensor as a (not ignored) input
//! counts one, a graph output one more (it is never released). Then per op:
//!
//! 1. in-place: for each `(input, output)` pair of the op, the output takes
//!    the input's storage when the input's storage has exactly one use left
//!    (this op's), the output is used later, sizes and devices agree, and the
//!    input is not already taken by another pair; the storage's count grows
//!    by the output's count;
//! 2. every output still without storage requests a block, largest first;
//!    the block's count is the output's count;
//! 3. every input use decrements its storage's count; a storage at zero is
//!    released (ignored inputs are skipped);
//! 4. an output whose storage count is zero (nothing reads it) is released
//!    at once.
//!
//! Graph inputs and params are not planned here, nor are assign outputs and
//! simplified assign values: they live in an external storage.

use super::super::ir::{Graph, TensorId};
use super::allocator::GraphAllocator;
use super::assign::AssignKind;
use super::device::DevicePlan;
use super::Placement;

/// Where a tensor's storage comes from during a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sid {
    /// Not placed yet.
    Unset,
    /// The external storage of that (input or param) tensor.
    External(TensorId),
    /// A planned block.
    Block(usize),
}

/// The outcome of one run.
#[derive(Debug)]
pub(crate) struct RunResult {
    pub(crate) sid: Vec<Sid>,
    pub(crate) placement: Vec<Placement>,
    pub(crate) blocks: Vec<super::allocator::Block>,
    pub(crate) total: u64,
}

/// Reference count of every tensor.
pub(crate) fn ref_counts(graph: &Graph) -> Vec<u64> {
    let mut count: Vec<u64> = graph
        .tensors()
        .iter()
        .map(|t| u64::from(t.kind == crate::graph::format::TensorKind::Output))
        .collect();
    for op in graph.ops() {
        for (_, t) in op.used_inputs() {
            count[t] += 1;
        }
    }
    count
}

/// Runs `AllocMemory` once.
pub(crate) fn alloc_memory(
    graph: &Graph,
    devices: &DevicePlan,
    assign: &[AssignKind],
    colors: &[u32],
    inplace: bool,
    match_range: u64,
) -> RunResult {
    let n_t = graph.tensors().len();
    let entry_ref = ref_counts(graph);
    let mut sid = vec![Sid::Unset; n_t];
    let mut placement = vec![Placement::Fresh; n_t];
    for (t, tensor) in graph.tensors().iter().enumerate() {
        if tensor.is_external() {
            sid[t] = Sid::External(t);
            placement[t] = Placement::External;
        }
    }
    for (k, op) in graph.ops().iter().enumerate() {
        match assign[k] {
            AssignKind::None => {}
            AssignKind::Plain => {
                sid[op.outputs[0]] = Sid::External(op.inputs[0]);
                placement[op.outputs[0]] = Placement::AssignOutput { op: k };
            }
            AssignKind::Simplified => {
                sid[op.outputs[0]] = Sid::External(op.inputs[0]);
                placement[op.outputs[0]] = Placement::AssignOutput { op: k };
                sid[op.inputs[1]] = Sid::External(op.inputs[0]);
                placement[op.inputs[1]] = Placement::AssignValue { op: k };
            }
        }
    }

    let mut alloc = GraphAllocator::new(match_range, colors);
    let mut storage_ref: Vec<u64> = Vec::new();
    let mut outs: Vec<TensorId> = Vec::new();
    for (k, op) in graph.ops().iter().enumerate() {
        // 1. In-place.
        if inplace {
            let mut taken = vec![false; op.inputs.len()];
            for &(i, o) in &op.inplace {
                let (t_in, t_out) = (op.inputs[i], op.outputs[o]);
                let Sid::Block(b) = sid[t_in] else { continue };
                if !taken[i]
                    && !op.ignored[i]
                    && sid[t_out] == Sid::Unset
                    && storage_ref[b] == 1
                    && entry_ref[t_out] > 0
                    && graph.tensor(t_in).size == graph.tensor(t_out).size
                    && devices.tensor_device[t_in] == devices.tensor_device[t_out]
                {
                    taken[i] = true;
                    sid[t_out] = Sid::Block(b);
                    storage_ref[b] += entry_ref[t_out];
                    placement[t_out] = Placement::InPlace { input: t_in };
                }
            }
        }
        // 2. Fresh or reused blocks for the other outputs, largest first.
        outs.clear();
        outs.extend(op.outputs.iter().copied().filter(|&t| sid[t] == Sid::Unset));
        outs.sort_by(|&a, &b| {
            graph
                .tensor(b)
                .size
                .cmp(&graph.tensor(a).size)
                .then(b.cmp(&a))
        });
        for &t in &outs {
            let before = alloc.blocks.len();
            let b = alloc.request(graph.tensor(t).size, devices.tensor_device[t], k);
            if b == before {
                storage_ref.push(0);
            } else {
                placement[t] = Placement::Reused;
            }
            storage_ref[b] = entry_ref[t];
            sid[t] = Sid::Block(b);
        }
        // 3. Inputs used by this op.
        for (_, t) in op.used_inputs() {
            if let Sid::Block(b) = sid[t] {
                storage_ref[b] -= 1;
                if storage_ref[b] == 0 {
                    alloc.release(b, k);
                }
            }
        }
        // 4. Outputs nothing reads.
        for &t in &op.outputs {
            if let Sid::Block(b) = sid[t] {
                if storage_ref[b] == 0 && entry_ref[t] == 0 {
                    alloc.release(b, k);
                }
            }
        }
    }
    // Tensors that no op produces and that are not external (never read,
    // or the graph would not have validated): a new block each.
    for (t, s) in sid.iter_mut().enumerate() {
        if *s == Sid::Unset {
            let b = alloc.alloc(graph.tensor(t).size, devices.tensor_device[t]);
            *s = Sid::Block(b);
        }
    }
    RunResult {
        total: alloc.total_bytes(),
        blocks: alloc.blocks,
        sid,
        placement,
    }
}
