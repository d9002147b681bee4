//! TVM's device planning: which device each op runs on and each tensor
//! lives on, from the annotations on some ops and the copy ops.
//!
//! 1. Annotated ops keep their device; a copy op runs on its destination.
//! 2. Backwards (TVM's bottom-up pass): from every copy op, its source
//!    device goes to the producers of its inputs, and on to their
//!    producers, until another copy op or an annotated op is met.
//! 3. Forwards (TVM's fill pass): in execution order, an op still without
//!    a device takes the device its first produced input lives on (a copy's
//!    output lives on the copy's destination); an op with none takes the
//!    default device.
//! 4. A produced tensor lives where its producer puts it; a graph input or
//!    param lives on the device of its first use (the source device when
//!    that use is a copy).
//!
//! An op reading a tensor that lives on another device, without being a
//! copy from that device, is an error: a copy op is missing (for a graph
//! input or param: its readers disagree on its device).

use crate::storage::DeviceId;

use super::super::ir::{Graph, OpId, OpKind, TensorId};
use super::PlanError;

/// Where every op runs and every tensor lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevicePlan {
    /// Device of each op (a copy op: its destination).
    pub op_device: Vec<DeviceId>,
    /// Device of each tensor.
    pub tensor_device: Vec<DeviceId>,
}

/// The device an op's outputs live on once known.
fn output_device(graph: &Graph, op: OpId, op_device: &[Option<DeviceId>]) -> Option<DeviceId> {
    match graph.op(op).kind {
        OpKind::Copy { to, .. } => Some(to),
        _ => op_device[op],
    }
}

/// The device each input of `op` must be on.
fn input_device(graph: &Graph, op: OpId, op_device: &[Option<DeviceId>]) -> Option<DeviceId> {
    match graph.op(op).kind {
        OpKind::Copy { from, .. } => Some(from),
        _ => op_device[op],
    }
}

/// Plans the devices of `graph`; ops nothing reaches run on `default`.
///
/// # Errors
///
/// [`PlanError::DeviceConflict`] naming the op that two copies or an
/// annotation and a copy put on different devices, or that reads a tensor
/// of another device without a copy.
pub fn plan_devices(graph: &Graph, default: DeviceId) -> Result<DevicePlan, PlanError> {
    let n = graph.ops().len();
    let mut dev: Vec<Option<DeviceId>> = graph.ops().iter().map(|o| o.device).collect();

    // Pass 1: backwards from every copy op.
    for (c, op) in graph.ops().iter().enumerate() {
        let OpKind::Copy { from, .. } = op.kind else {
            continue;
        };
        let mut stack: Vec<(TensorId, OpId)> = op.used_inputs().map(|(_, t)| (t, c)).collect();
        while let Some((t, reader)) = stack.pop() {
            let Some(p) = graph.tensor(t).producer else {
                continue;
            };
            // A device already set (a copy's destination, an annotation or an
            // earlier copy's source) must agree.
            match output_device(graph, p, &dev) {
                Some(d) if d == from => continue,
                Some(d) => {
                    return Err(PlanError::DeviceConflict {
                        op: graph.op(p).label(p),
                        why: format!(
                            "it is on {d} but {} needs its output on {from}",
                            graph.op(reader).label(reader)
                        ),
                    })
                }
                None => {}
            }
            dev[p] = Some(from);
            stack.extend(graph.op(p).used_inputs().map(|(_, t)| (t, p)));
        }
    }

    // Pass 2: forwards, in execution order.
    for k in 0..n {
        if dev[k].is_some() {
            continue;
        }
        let from_input = graph.op(k).used_inputs().find_map(|(_, t)| {
            graph
                .tensor(t)
                .producer
                .and_then(|p| output_device(graph, p, &dev))
        });
        dev[k] = Some(from_input.unwrap_or(default));
    }
    let op_device: Vec<DeviceId> = dev.iter().map(|d| d.unwrap_or(default)).collect();

    // Tensors, and the check that every read stays on one device.
    let mut tensor_device = vec![default; graph.tensors().len()];
    for (t, tensor) in graph.tensors().iter().enumerate() {
        tensor_device[t] = match tensor.producer {
            Some(p) => output_device(graph, p, &dev).unwrap_or(default),
            None => tensor
                .readers
                .first()
                .and_then(|&r| input_device(graph, r, &dev))
                .unwrap_or(default),
        };
    }
    for (k, op) in graph.ops().iter().enumerate() {
        let need = input_device(graph, k, &dev).unwrap_or(default);
        for (_, t) in op.used_inputs() {
            let tensor = graph.tensor(t);
            if tensor_device[t] != need {
                return Err(PlanError::DeviceConflict {
                    op: op.label(k),
                    why: format!(
                        "it runs on {need} but reads {} on {}; a copy op is missing",
                        tensor.label(),
                        tensor_device[t]
                    ),
                });
            }
        }
    }
    Ok(DevicePlan {
        op_device,
        tensor_device,
    })
}
