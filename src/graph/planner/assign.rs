//! `assign` ops (NNVM's `assign_flag`): which are plain and which can be
//! simplified away.
//!
//! A plain assign writes its value into the target's storage: its output
//! lives in the target's storage. An assign whose value (right-hand side)
//! is an intermediate tensor read by nothing else can do without the copy:
//! the value is produced straight into the target's storage and the assign
//! becomes a no-op. This crate adds the conditions that make that safe when
//! ops run concurrently in push order: the value and the target are on the
//! same device, and between the value's producer and the assign no op reads
//! the target's storage and no other assign writes it (they would see or
//! clobber the new value early).

use super::super::ir::{Graph, OpId};
use super::device::DevicePlan;

/// How the planner treats an op, as far as `assign` goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AssignKind {
    /// Not an assign.
    None,
    /// An assign that copies its value into the target's storage.
    Plain,
    /// An assign whose value is produced in the target's storage; the op
    /// itself does nothing.
    Simplified,
}

/// Classifies every op.
pub(crate) fn classify(graph: &Graph, devices: &DevicePlan) -> Vec<AssignKind> {
    let mut kinds = vec![AssignKind::None; graph.ops().len()];
    for (k, op) in graph.ops().iter().enumerate() {
        if !op.is_assign() {
            continue;
        }
        kinds[k] = if simplifiable(graph, devices, &kinds, k) {
            AssignKind::Simplified
        } else {
            AssignKind::Plain
        };
    }
    kinds
}

fn simplifiable(graph: &Graph, devices: &DevicePlan, kinds: &[AssignKind], k: OpId) -> bool {
    let op = graph.op(k);
    let (lhs, rhs) = (op.inputs[0], op.inputs[1]);
    let value = graph.tensor(rhs);
    let Some(p) = value.producer else {
        return false;
    };
    if value.kind != crate::graph::format::TensorKind::Intermediate
        || value.readers != [k]
        || graph.op(p).is_assign()
        || devices.tensor_device[rhs] != devices.tensor_device[lhs]
    {
        return false;
    }
    // The tensors that live in the target's storage before op k.
    let mut in_target = vec![lhs];
    for (j, o) in graph.ops()[..k].iter().enumerate() {
        if o.is_assign() && o.inputs[0] == lhs {
            in_target.push(o.outputs[0]);
            if kinds[j] == AssignKind::Simplified {
                in_target.push(o.inputs[1]);
            }
        }
    }
    // Nothing between the producer and the assign may touch that storage,
    // and the value's producer must not write it through another output.
    let clash = graph.ops()[p + 1..k].iter().any(|o| {
        o.used_inputs().any(|(_, t)| in_target.contains(&t))
            || (o.is_assign() && o.inputs[0] == lhs)
    });
    let producer_clash = graph.op(p).outputs.iter().any(|t| in_target.contains(t));
    !clash && !producer_clash
}
