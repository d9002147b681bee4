//! The graph IR: ops and tensors indexed by position, built from a
//! [`GraphFile`] and validated (see [`GraphError`]).
//!
//! Tensors are referred to by their index in [`Graph::tensors`] (a
//! [`TensorId`]); the id from the file is kept in [`Tensor::file_id`]. Ops
//! are referred to by their index in [`Graph::ops`] (an [`OpId`]), which is
//! also their execution order.
//!
//! Beyond what the file says, an op may carry three annotations used by the
//! planner: a device ([`Graph::annotate_device`]), a copy between devices
//! ([`Graph::mark_copy`]) and inputs ignored for reference counting
//! ([`Graph::ignore_inputs`]). An op whose type is `assign` (any case, also
//! `_assign`) writes its first input, a parameter or graph input, with its
//! second.
//!
//! # Examples
//!
//! ```
//! use depengine::graph::format::GraphFile;
//! use depengine::graph::Graph;
//! let text = r#"{"model":"m","tensors":[
//!     {"id":1,"size":8,"kind":"input"},{"id":2,"size":8,"kind":"intermediate"},
//!     {"id":3,"size":8,"kind":"output"}],
//!   "ops":[{"name":"a","type":"ReLU","inputs":[1],"outputs":[2]},
//!          {"name":"b","type":"ReLU","inputs":[2],"outputs":[3],"inplace":[[0,0]]}]}"#;
//! let file = GraphFile::from_json_str(text, "m.json".as_ref())?;
//! let graph = Graph::from_file(&file)?;
//! assert_eq!(graph.ops().len(), 2);
//! assert_eq!(graph.tensor(1).readers, vec![1]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashMap;
use std::path::Path;

use crate::storage::DeviceId;

use super::format::{GraphFile, TensorKind};
use super::validate::{self, GraphError};

/// Index of a tensor in [`Graph::tensors`].
pub type TensorId = usize;
/// Index of an op in [`Graph::ops`]: its position in execution order.
pub type OpId = usize;

/// A tensor of the IR.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    /// The id the graph file gave it.
    pub file_id: u64,
    /// Size in bytes.
    pub size: u64,
    /// Role in the graph.
    pub kind: TensorKind,
    /// Name in the source model (may be empty).
    pub name: String,
    /// The op that writes it; `None` for graph inputs and params.
    pub producer: Option<OpId>,
    /// Ops that list it among their inputs, ascending, each once.
    pub readers: Vec<OpId>,
}

impl Tensor {
    /// True for graph inputs and params: tensors the plan leaves out and
    /// gives their own storage.
    pub fn is_external(&self) -> bool {
        matches!(self.kind, TensorKind::Input | TensorKind::Param)
    }

    /// A label for messages: `tensor 12 ("conv1.out")`.
    pub fn label(&self) -> String {
        if self.name.is_empty() {
            format!("tensor {}", self.file_id)
        } else {
            format!("tensor {} (\"{}\")", self.file_id, self.name)
        }
    }
}

/// What kind of op this is, as far as planning cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// An ordinary computation.
    Compute,
    /// `assign`: writes input 0 (a param or graph input) with input 1.
    Assign,
    /// A copy of its inputs from one device to another.
    Copy {
        /// The device the inputs are on.
        from: DeviceId,
        /// The device the outputs are on.
        to: DeviceId,
    },
}

/// An op of the IR.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    /// Name in the source model.
    pub name: String,
    /// Op type, as in the file.
    pub op_type: String,
    /// Input tensors, in the op's order (a tensor may appear twice).
    pub inputs: Vec<TensorId>,
    /// Output tensors, in the op's order.
    pub outputs: Vec<TensorId>,
    /// `(input position, output position)` pairs: that output may reuse that
    /// input's storage when the input has no other reader left.
    pub inplace: Vec<(usize, usize)>,
    /// Per input position: true when the op does not read the data (only
    /// its shape), so the input does not count as a use.
    pub ignored: Vec<bool>,
    /// What kind of op it is.
    pub kind: OpKind,
    /// The device an annotation put it on, if any.
    pub device: Option<DeviceId>,
}

impl Op {
    /// A label for messages: `op 4 ("conv1")`.
    pub fn label(&self, index: OpId) -> String {
        format!("op {index} (\"{}\")", self.name)
    }

    /// Input positions that count as uses (not ignored), with their tensors.
    pub fn used_inputs(&self) -> impl Iterator<Item = (usize, TensorId)> + '_ {
        self.inputs
            .iter()
            .copied()
            .enumerate()
            .filter(|(i, _)| !self.ignored[*i])
    }

    /// True for `assign` ops.
    pub fn is_assign(&self) -> bool {
        self.kind == OpKind::Assign
    }
}

/// A validated computation graph.
#[derive(Debug, Clone)]
pub struct Graph {
    model: String,
    tensors: Vec<Tensor>,
    ops: Vec<Op>,
    by_file_id: HashMap<u64, TensorId>,
}

fn is_assign_type(t: &str) -> bool {
    t.eq_ignore_ascii_case("assign") || t.eq_ignore_ascii_case("_assign")
}

impl Graph {
    /// Builds and validates the IR of a graph file.
    ///
    /// # Errors
    ///
    /// [`GraphError`] naming the op or tensor at fault: an unknown or
    /// duplicate tensor id, a tensor with two producers or a produced graph
    /// input, a cycle, a tensor read before it is written, a bad in-place
    /// pair, a malformed `assign`.
    pub fn from_file(file: &GraphFile) -> Result<Self, GraphError> {
        let mut tensors = Vec::with_capacity(file.tensors.len());
        let mut by_file_id = HashMap::with_capacity(file.tensors.len());
        for t in &file.tensors {
            if by_file_id.insert(t.id, tensors.len()).is_some() {
                return Err(GraphError::DuplicateTensor { id: t.id });
            }
            tensors.push(Tensor {
                file_id: t.id,
                size: t.size,
                kind: t.kind,
                name: t.name.clone(),
                producer: None,
                readers: Vec::new(),
            });
        }
        let mut ops = Vec::with_capacity(file.ops.len());
        for (k, o) in file.ops.iter().enumerate() {
            let resolve = |id: &u64, role: &'static str| {
                by_file_id
                    .get(id)
                    .copied()
                    .ok_or_else(|| GraphError::UnknownTensor {
                        op: format!("op {k} (\"{}\")", o.name),
                        role,
                        id: *id,
                    })
            };
            let inputs = o
                .inputs
                .iter()
                .map(|id| resolve(id, "input"))
                .collect::<Result<Vec<_>, _>>()?;
            let outputs = o
                .outputs
                .iter()
                .map(|id| resolve(id, "output"))
                .collect::<Result<Vec<_>, _>>()?;
            let kind = if is_assign_type(&o.op_type) {
                OpKind::Assign
            } else {
                OpKind::Compute
            };
            ops.push(Op {
                name: o.name.clone(),
                op_type: o.op_type.clone(),
                ignored: vec![false; inputs.len()],
                inputs,
                outputs,
                inplace: o.inplace.iter().map(|p| (p[0], p[1])).collect(),
                kind,
                device: None,
            });
        }
        let mut graph = Graph {
            model: file.model.clone(),
            tensors,
            ops,
            by_file_id,
        };
        graph.link()?;
        validate::validate(&graph)?;
        Ok(graph)
    }

    /// Reads a graph file and builds its IR.
    ///
    /// # Errors
    ///
    /// [`GraphError::File`] when the file cannot be read or parsed; the
    /// errors of [`Graph::from_file`].
    pub fn load(path: impl AsRef<Path>) -> Result<Self, GraphError> {
        let file = GraphFile::load(path)?;
        Self::from_file(&file)
    }

    /// Parses JSON text in the graph format and builds its IR; `path` only
    /// names the source in errors.
    ///
    /// # Errors
    ///
    /// As [`Graph::load`].
    pub fn from_json_str(text: &str, path: &Path) -> Result<Self, GraphError> {
        let file = GraphFile::from_json_str(text, path)?;
        Self::from_file(&file)
    }

    /// Fills producers and readers; rejects two producers and produced
    /// external tensors.
    fn link(&mut self) -> Result<(), GraphError> {
        for (k, op) in self.ops.iter().enumerate() {
            for &t in &op.outputs {
                let tensor = &mut self.tensors[t];
                if tensor.is_external() {
                    return Err(GraphError::ProducesExternal {
                        op: op.label(k),
                        tensor: tensor.label(),
                        kind: tensor.kind,
                    });
                }
                if let Some(first) = tensor.producer {
                    return Err(GraphError::TwoProducers {
                        tensor: tensor.label(),
                        first: self.ops[first].label(first),
                        second: op.label(k),
                    });
                }
                tensor.producer = Some(k);
            }
            for &t in &op.inputs {
                let readers = &mut self.tensors[t].readers;
                if readers.last() != Some(&k) {
                    readers.push(k);
                }
            }
        }
        Ok(())
    }

    /// The model's name.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// Every tensor, indexed by [`TensorId`].
    pub fn tensors(&self) -> &[Tensor] {
        &self.tensors
    }

    /// Every op, in execution order.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// One tensor.
    ///
    /// # Panics
    ///
    /// When `id` is not below `tensors().len()`.
    pub fn tensor(&self, id: TensorId) -> &Tensor {
        &self.tensors[id]
    }

    /// One op.
    ///
    /// # Panics
    ///
    /// When `id` is not below `ops().len()`.
    pub fn op(&self, id: OpId) -> &Op {
        &self.ops[id]
    }

    /// The tensor the file calls `file_id`.
    pub fn tensor_by_file_id(&self, file_id: u64) -> Option<TensorId> {
        self.by_file_id.get(&file_id).copied()
    }

    /// The op named `name` (the first one, if names repeat).
    pub fn op_by_name(&self, name: &str) -> Option<OpId> {
        self.ops.iter().position(|o| o.name == name)
    }

    fn check_op(&self, op: OpId) -> Result<(), GraphError> {
        if op >= self.ops.len() {
            return Err(GraphError::NoSuchOp {
                op,
                ops: self.ops.len(),
            });
        }
        Ok(())
    }

    /// Puts `op` on `device` (TVM's device annotation). Copy ops keep the
    /// devices [`Graph::mark_copy`] gave them.
    ///
    /// # Errors
    ///
    /// [`GraphError::NoSuchOp`]; [`GraphError::BadAnnotation`] for a copy op.
    pub fn annotate_device(&mut self, op: OpId, device: DeviceId) -> Result<(), GraphError> {
        self.check_op(op)?;
        if matches!(self.ops[op].kind, OpKind::Copy { .. }) {
            return Err(GraphError::BadAnnotation {
                op: self.ops[op].label(op),
                why: "a copy op's devices come from mark_copy".into(),
            });
        }
        self.ops[op].device = Some(device);
        Ok(())
    }

    /// Makes `op` a copy from device `from` to device `to`: its inputs are
    /// on `from`, its outputs on `to`.
    ///
    /// # Errors
    ///
    /// [`GraphError::NoSuchOp`]; [`GraphError::BadAnnotation`] for an
    /// `assign` op.
    pub fn mark_copy(&mut self, op: OpId, from: DeviceId, to: DeviceId) -> Result<(), GraphError> {
        self.check_op(op)?;
        if self.ops[op].is_assign() {
            return Err(GraphError::BadAnnotation {
                op: self.ops[op].label(op),
                why: "an assign op cannot be a copy".into(),
            });
        }
        self.ops[op].kind = OpKind::Copy { from, to };
        self.ops[op].device = Some(to);
        Ok(())
    }

    /// Marks input positions of `op` as ignored for reference counting
    /// (NNVM's `FIgnoreInputs`): the op does not read their data.
    ///
    /// # Errors
    ///
    /// [`GraphError::NoSuchOp`]; [`GraphError::BadAnnotation`] for a
    /// position out of range, an input of an in-place pair, or an `assign`.
    pub fn ignore_inputs(&mut self, op: OpId, positions: &[usize]) -> Result<(), GraphError> {
        self.check_op(op)?;
        let o = &self.ops[op];
        for &p in positions {
            let why = if p >= o.inputs.len() {
                Some(format!(
                    "input position {p} but the op has {}",
                    o.inputs.len()
                ))
            } else if o.inplace.iter().any(|&(i, _)| i == p) {
                Some(format!("input position {p} is in an in-place pair"))
            } else if o.is_assign() {
                Some("an assign reads both its inputs".into())
            } else {
                None
            };
            if let Some(why) = why {
                return Err(GraphError::BadAnnotation {
                    op: o.label(op),
                    why,
                });
            }
        }
        for &p in positions {
            self.ops[op].ignored[p] = true;
        }
        Ok(())
    }

    /// The last op that uses `t` (ignored inputs do not count), or its
    /// producer when nothing uses it; `None` for an unused external tensor.
    pub fn last_use(&self, t: TensorId) -> Option<OpId> {
        let tensor = &self.tensors[t];
        let last_read = tensor
            .readers
            .iter()
            .rev()
            .copied()
            .find(|&r| self.ops[r].used_inputs().any(|(_, input)| input == t));
        match (last_read, tensor.producer) {
            (Some(r), Some(p)) => Some(r.max(p)),
            (r, p) => r.or(p),
        }
    }

    /// Sum of the sizes of the tensors of `kind`.
    pub fn bytes_of(&self, kind: TensorKind) -> u64 {
        self.tensors
            .iter()
            .filter(|t| t.kind == kind)
            .map(|t| t.size)
            .sum()
    }
}
