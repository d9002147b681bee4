//! Deriving a training profile from a training graph in the shared graph
//! format (`*_train_*` graphs: forward ops, then backward ops, with
//! `forward_ops` = index of the first backward op).
//!
//! The mapping:
//!
//! - ops keep their order and names; op inputs keep only activations
//!   (`param` tensors — weights, biases, statistics — are outside the
//!   simulation, as in the usage records);
//! - every op output is its own buffer of the tensor's size (in-place pairs
//!   are not applied, as in the usage records); graph inputs are allocated
//!   by op 0;
//! - a tensor is released after its last reader; one never read is released
//!   by its producer; graph outputs (the loss, the parameter gradients) are
//!   never released;
//! - no workspaces (the graphs have none);
//! - op times come from [`CostModel`], since graphs carry none.
//!
//! With this mapping the oracle peak without swapping equals the usage
//! records' `lower_bound_bytes` for the same model.

use std::collections::HashMap;
use std::path::Path;

use crate::graph::format::{GraphFile, TensorKind};

use super::profile::{check_releases, Op, Profile, ProfileError, Tensor, TensorKey};

/// Op time from bytes touched: `per_op_ms + (bytes read + bytes written) /
/// bytes_per_ms`, counting parameters among the bytes read.
///
/// The default, 10^6 bytes per ms (1 GB/s) plus 0.01 ms per op, is the
/// order of a CPU running a convolutional network's training step; it only
/// sets the scale of compute against the disk.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostModel {
    /// Bytes moved per millisecond.
    pub bytes_per_ms: f64,
    /// Fixed cost of an op, ms.
    pub per_op_ms: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        Self {
            bytes_per_ms: 1.0e6,
            per_op_ms: 0.01,
        }
    }
}

/// Reads a training graph and derives its profile.
///
/// `forward_ops` overrides the graph's own `forward_ops` field.
///
/// # Errors
///
/// [`ProfileError::Graph`] when the file cannot be read or parsed;
/// [`ProfileError::Inconsistent`] naming the op when the graph is not a
/// consistent training graph.
pub fn load(
    path: impl AsRef<Path>,
    cost: &CostModel,
    forward_ops: Option<usize>,
) -> Result<Profile, ProfileError> {
    let path = path.as_ref();
    let graph = GraphFile::load(path)?;
    from_graph(&graph, path, cost, forward_ops)
}

/// Derives the profile of a parsed training graph; `path` names it in errors.
///
/// # Errors
///
/// [`ProfileError::Inconsistent`] naming the op or tensor at fault.
pub fn from_graph(
    graph: &GraphFile,
    path: &Path,
    cost: &CostModel,
    forward_ops: Option<usize>,
) -> Result<Profile, ProfileError> {
    let bad = |entry: String, problem: String| ProfileError::Inconsistent {
        path: path.to_path_buf(),
        entry,
        problem,
    };
    let n_ops = graph.ops.len();
    let forward_ops = forward_ops.or(graph.forward_ops).ok_or_else(|| {
        bad(
            "field \"forward_ops\"".into(),
            "missing: not a training graph; use a *_train_* graph or give --forward-ops N".into(),
        )
    })?;
    if forward_ops == 0 || forward_ops > n_ops {
        return Err(bad(
            "field \"forward_ops\"".into(),
            format!("first backward op {forward_ops} is not in 1..={n_ops}"),
        ));
    }
    let mut index: HashMap<u64, usize> = HashMap::with_capacity(graph.tensors.len());
    let mut param_size: HashMap<u64, u64> = HashMap::new();
    let mut tensors = Vec::new();
    let mut kinds = Vec::new();
    for (i, t) in graph.tensors.iter().enumerate() {
        if index.contains_key(&t.id) || param_size.contains_key(&t.id) {
            return Err(bad(
                format!("tensor entry {i} (id {})", t.id),
                "the id appears twice; tensor ids must be unique".into(),
            ));
        }
        if t.kind == TensorKind::Param {
            param_size.insert(t.id, t.size);
            continue;
        }
        index.insert(t.id, tensors.len());
        tensors.push(Tensor {
            key: TensorKey::Id(t.id),
            size: t.size,
            producer: None,
        });
        kinds.push(t.kind);
    }

    let mut ops = Vec::with_capacity(n_ops);
    let mut last_reader: Vec<Option<usize>> = vec![None; tensors.len()];
    for (k, g) in graph.ops.iter().enumerate() {
        let entry = || format!("op {k} (\"{}\")", g.name);
        let mut bytes = 0_u64;
        let mut inputs = Vec::with_capacity(g.inputs.len());
        for id in &g.inputs {
            if let Some(size) = param_size.get(id) {
                bytes = bytes.saturating_add(*size);
            } else if let Some(&t) = index.get(id) {
                bytes = bytes.saturating_add(tensors[t].size);
                if !inputs.contains(&t) {
                    inputs.push(t);
                }
                last_reader[t] = Some(k);
            } else {
                return Err(bad(
                    entry(),
                    format!("input {id} is not a tensor of the graph"),
                ));
            }
        }
        let mut outputs = Vec::with_capacity(g.outputs.len());
        for id in &g.outputs {
            let Some(&t) = index.get(id) else {
                return Err(bad(
                    entry(),
                    format!("output {id} is not an activation tensor of the graph"),
                ));
            };
            if kinds[t] == TensorKind::Input {
                return Err(bad(entry(), format!("output {id} is a graph input")));
            }
            if let Some(p) = tensors[t].producer {
                return Err(bad(
                    entry(),
                    format!("output {id} is already produced by op {p}"),
                ));
            }
            tensors[t].producer = Some(k);
            bytes = bytes.saturating_add(tensors[t].size);
            outputs.push(t);
        }
        ops.push(Op {
            name: g.name.clone(),
            inputs,
            outputs,
            temp_allocs: Vec::new(),
            temp_frees: Vec::new(),
            release: Vec::new(),
            time_ms: cost.per_op_ms + bytes as f64 / cost.bytes_per_ms,
        });
    }
    if n_ops == 0 {
        return Err(bad("field \"ops\"".into(), "the graph has no ops".into()));
    }
    // Graph inputs: allocated by op 0.
    let mut graph_inputs = Vec::new();
    for (t, kind) in kinds.iter().enumerate() {
        if *kind == TensorKind::Input {
            tensors[t].producer = Some(0);
            graph_inputs.push(t);
        }
    }
    graph_inputs.append(&mut ops[0].outputs);
    ops[0].outputs = graph_inputs;
    // Release after the last reader (or the producer); never for outputs.
    for (t, info) in tensors.iter().enumerate() {
        let Some(p) = info.producer else { continue };
        if kinds[t] == TensorKind::Output {
            continue;
        }
        let at = last_reader[t].unwrap_or(p).max(p);
        ops[at].release.push(t);
    }
    check_releases(&tensors, &ops, path)?;
    Ok(Profile {
        name: graph.model.clone(),
        tensors,
        ops,
        forward_ops,
    })
}
