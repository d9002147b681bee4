//! Validation of the graph IR: what [`Graph::from_file`] checks after
//! resolving ids, and the error type every graph check returns.

use super::format::{GraphFileError, TensorKind};
use super::ir::{Graph, OpId};

/// A graph that cannot be planned or run. Every variant names the op or
/// tensor at fault.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    /// The graph file could not be read or parsed.
    #[error(transparent)]
    File(#[from] GraphFileError),
    /// Two tensors share an id.
    #[error("tensor id {id} appears twice in \"tensors\"; ids must be unique")]
    DuplicateTensor {
        /// The repeated id.
        id: u64,
    },
    /// An op names a tensor id that is not in the file.
    #[error("{op}: {role} {id} is not a tensor of the graph")]
    UnknownTensor {
        /// The op.
        op: String,
        /// `input` or `output`.
        role: &'static str,
        /// The unknown id.
        id: u64,
    },
    /// Two ops write the same tensor.
    #[error("{tensor} is produced twice: by {first} and by {second}")]
    TwoProducers {
        /// The tensor.
        tensor: String,
        /// Its first producer.
        first: String,
        /// The second one.
        second: String,
    },
    /// An op writes a graph input or a parameter (only `assign` may, and it
    /// does so through its first input, not an output).
    #[error("{op} produces {tensor}, a graph {kind:?}; inputs and params are produced by no op")]
    ProducesExternal {
        /// The op.
        op: String,
        /// The tensor.
        tensor: String,
        /// Its kind.
        kind: TensorKind,
    },
    /// The ops depend on each other in a circle.
    #[error("the graph has a cycle through {op}")]
    Cycle {
        /// An op on the cycle.
        op: String,
    },
    /// An op reads a tensor that no earlier op has written.
    #[error("{op} reads {tensor} before it is written ({why})")]
    ReadBeforeWritten {
        /// The op.
        op: String,
        /// The tensor.
        tensor: String,
        /// `no op produces it` or `it is produced later by ...`.
        why: String,
    },
    /// An in-place pair that cannot hold.
    #[error("{op}: in-place pair [{input}, {output}] is invalid: {why}")]
    BadInplace {
        /// The op.
        op: String,
        /// Input position of the pair.
        input: usize,
        /// Output position of the pair.
        output: usize,
        /// What is wrong.
        why: String,
    },
    /// An `assign` op of the wrong shape.
    #[error("{op}: bad assign: {why}")]
    BadAssign {
        /// The op.
        op: String,
        /// What is wrong.
        why: String,
    },
    /// An annotation names an op that does not exist.
    #[error("no op {op}: the graph has {ops} ops")]
    NoSuchOp {
        /// The index asked for.
        op: OpId,
        /// Number of ops.
        ops: usize,
    },
    /// An annotation that does not fit the op.
    #[error("{op}: {why}")]
    BadAnnotation {
        /// The op.
        op: String,
        /// What is wrong.
        why: String,
    },
}

/// Every check on a linked graph (producers and readers filled).
pub(crate) fn validate(g: &Graph) -> Result<(), GraphError> {
    check_inplace(g)?;
    check_assign(g)?;
    check_cycle(g)?;
    check_order(g)
}

fn check_inplace(g: &Graph) -> Result<(), GraphError> {
    for (k, op) in g.ops().iter().enumerate() {
        for &(i, o) in &op.inplace {
            let bad = |why: String| GraphError::BadInplace {
                op: op.label(k),
                input: i,
                output: o,
                why,
            };
            if i >= op.inputs.len() {
                return Err(bad(format!("the op has {} inputs", op.inputs.len())));
            }
            if o >= op.outputs.len() {
                return Err(bad(format!("the op has {} outputs", op.outputs.len())));
            }
            let (ti, to) = (g.tensor(op.inputs[i]), g.tensor(op.outputs[o]));
            if ti.size != to.size {
                return Err(bad(format!(
                    "{} has {} bytes but {} has {}",
                    ti.label(),
                    ti.size,
                    to.label(),
                    to.size
                )));
            }
        }
    }
    Ok(())
}

fn check_assign(g: &Graph) -> Result<(), GraphError> {
    for (k, op) in g.ops().iter().enumerate() {
        if !op.is_assign() {
            continue;
        }
        let bad = |why: String| GraphError::BadAssign {
            op: op.label(k),
            why,
        };
        if op.inputs.len() != 2 || op.outputs.len() != 1 {
            return Err(bad(format!(
                "needs 2 inputs (target, value) and 1 output, has {} and {}",
                op.inputs.len(),
                op.outputs.len()
            )));
        }
        let (lhs, rhs, out) = (
            g.tensor(op.inputs[0]),
            g.tensor(op.inputs[1]),
            g.tensor(op.outputs[0]),
        );
        if !lhs.is_external() {
            return Err(bad(format!(
                "the target {} is {:?}; only a param or graph input can be assigned",
                lhs.label(),
                lhs.kind
            )));
        }
        if op.inputs[0] == op.inputs[1] {
            return Err(bad("assigns a tensor to itself".into()));
        }
        if rhs.size != lhs.size || out.size != lhs.size {
            return Err(bad(format!(
                "sizes differ: target {} B, value {} B, output {} B",
                lhs.size, rhs.size, out.size
            )));
        }
        if !op.inplace.is_empty() {
            return Err(bad("an assign takes no in-place pairs".into()));
        }
    }
    Ok(())
}

/// Kahn's algorithm over producer -> reader edges; on a cycle, names an op
/// that lies on it.
fn check_cycle(g: &Graph) -> Result<(), GraphError> {
    let n = g.ops().len();
    let mut preds: Vec<Vec<OpId>> = vec![Vec::new(); n];
    let mut succs: Vec<Vec<OpId>> = vec![Vec::new(); n];
    for (k, op) in g.ops().iter().enumerate() {
        for &t in &op.inputs {
            if let Some(p) = g.tensor(t).producer {
                if !preds[k].contains(&p) {
                    preds[k].push(p);
                    succs[p].push(k);
                }
            }
        }
    }
    let mut indeg: Vec<usize> = preds.iter().map(Vec::len).collect();
    let mut ready: Vec<OpId> = (0..n).filter(|&k| indeg[k] == 0).collect();
    let mut seen = 0;
    while let Some(k) = ready.pop() {
        seen += 1;
        for &s in &succs[k] {
            indeg[s] -= 1;
            if indeg[s] == 0 {
                ready.push(s);
            }
        }
    }
    if seen == n {
        return Ok(());
    }
    // Walk backwards among the ops left: every one has a predecessor left,
    // so the walk repeats an op, and that op is on a cycle.
    let mut k = (0..n).find(|&k| indeg[k] > 0).unwrap_or(0);
    let mut visited = vec![false; n];
    while !visited[k] {
        visited[k] = true;
        k = preds[k]
            .iter()
            .copied()
            .find(|&p| indeg[p] > 0)
            .unwrap_or(k);
    }
    Err(GraphError::Cycle {
        op: g.op(k).label(k),
    })
}

fn check_order(g: &Graph) -> Result<(), GraphError> {
    for (k, op) in g.ops().iter().enumerate() {
        for &t in &op.inputs {
            let tensor = g.tensor(t);
            if tensor.is_external() {
                continue;
            }
            let why = match tensor.producer {
                None => "no op produces it".to_string(),
                Some(p) if p >= k => format!("it is produced later, by {}", g.op(p).label(p)),
                Some(_) => continue,
            };
            return Err(GraphError::ReadBeforeWritten {
                op: op.label(k),
                tensor: tensor.label(),
                why,
            });
        }
    }
    Ok(())
}
