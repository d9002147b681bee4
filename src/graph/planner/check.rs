//! [`MemoryPlan::validate`]: the rules a plan keeps, checked against its
//! graph.
//!
//! A tensor is live from its producer to its last use (a graph output to
//! the end of the graph). In a planned storage no two tensors are live at
//! once, except that an op's in-place output may start at the op that last
//! uses the input it took, when the op allows that pair and uses the input
//! once. A freed block goes to another tensor only within one device and,
//! when coloured, one group. External storages hold their input or param,
//! the outputs of assigns to it, and the values of simplified assigns to it.

use std::collections::HashMap;

use crate::graph::format::TensorKind;

use super::super::ir::{Graph, OpId, TensorId};
use super::{AssignKind, MemoryPlan, Placement, PlanError};

struct Live {
    t: TensorId,
    start: OpId,
    end: OpId,
}

impl MemoryPlan {
    /// Checks the plan against `graph`.
    ///
    /// # Errors
    ///
    /// [`PlanError::Mismatch`] when the plan is of another graph;
    /// [`PlanError::Invalid`] naming the storage and the tensors that break
    /// a rule.
    pub fn validate(&self, graph: &Graph) -> Result<(), PlanError> {
        let n_t = graph.tensors().len();
        let n_ops = graph.ops().len();
        if self.storage_of.len() != n_t || self.placement.len() != n_t || self.assign.len() != n_ops
        {
            return Err(PlanError::Mismatch(format!(
                "{} tensors and {} ops in the graph, {} storage ids, {} placements and {} assign kinds in the plan",
                n_t,
                n_ops,
                self.storage_of.len(),
                self.placement.len(),
                self.assign.len()
            )));
        }
        let mut members: HashMap<usize, Vec<TensorId>> = HashMap::new();
        for (t, &s) in self.storage_of.iter().enumerate() {
            let tensor = graph.tensor(t);
            let Some(info) = self.storages.get(s) else {
                return Err(PlanError::Mismatch(format!(
                    "{} has storage {s} of {}",
                    tensor.label(),
                    self.storages.len()
                )));
            };
            let invalid = |why: String| PlanError::Invalid { storage: s, why };
            if info.size < tensor.size {
                return Err(invalid(format!(
                    "{} B is smaller than {} ({} B)",
                    info.size,
                    tensor.label(),
                    tensor.size
                )));
            }
            if info.device != self.devices.tensor_device[t] {
                return Err(invalid(format!(
                    "is on {} but holds {} of {}",
                    info.device,
                    tensor.label(),
                    self.devices.tensor_device[t]
                )));
            }
            members.entry(s).or_default().push(t);
        }
        let mut ids: Vec<usize> = members.keys().copied().collect();
        ids.sort_unstable();
        for s in ids {
            let m = &members[&s];
            match self.storages[s].external {
                Some(x) => self.check_external(graph, s, x, m)?,
                None => self.check_planned(graph, s, m)?,
            }
        }
        Ok(())
    }

    fn check_external(
        &self,
        graph: &Graph,
        s: usize,
        x: TensorId,
        members: &[TensorId],
    ) -> Result<(), PlanError> {
        let invalid = |why: String| PlanError::Invalid { storage: s, why };
        for &t in members {
            let ok = match self.placement[t] {
                Placement::External => t == x,
                Placement::AssignOutput { op } => {
                    self.assign[op] != AssignKind::None
                        && graph.op(op).inputs[0] == x
                        && graph.op(op).outputs[0] == t
                }
                Placement::AssignValue { op } => {
                    self.assign[op] == AssignKind::Simplified
                        && graph.op(op).inputs[0] == x
                        && graph.op(op).inputs[1] == t
                }
                _ => false,
            };
            if !ok {
                return Err(invalid(format!(
                    "is the storage of {} but also holds {} ({:?})",
                    graph.tensor(x).label(),
                    graph.tensor(t).label(),
                    self.placement[t]
                )));
            }
        }
        Ok(())
    }

    fn check_planned(
        &self,
        graph: &Graph,
        s: usize,
        members: &[TensorId],
    ) -> Result<(), PlanError> {
        let invalid = |why: String| PlanError::Invalid { storage: s, why };
        let n_ops = graph.ops().len();
        let mut live: Vec<Live> = Vec::with_capacity(members.len());
        for &t in members {
            let tensor = graph.tensor(t);
            if tensor.is_external()
                || matches!(
                    self.placement[t],
                    Placement::External
                        | Placement::AssignOutput { .. }
                        | Placement::AssignValue { .. }
                )
            {
                return Err(invalid(format!(
                    "is a planned storage but holds {} ({:?})",
                    tensor.label(),
                    self.placement[t]
                )));
            }
            let start = tensor.producer.unwrap_or(0);
            let end = if tensor.kind == TensorKind::Output {
                n_ops
            } else {
                graph.last_use(t).unwrap_or(start)
            };
            live.push(Live { t, start, end });
        }
        live.sort_by_key(|l| (l.start, l.end));
        for w in live.windows(2) {
            let (a, b) = (&w[0], &w[1]);
            let (ta, tb) = (graph.tensor(a.t), graph.tensor(b.t));
            if a.end < b.start {
                if self.placement[b.t] == Placement::Reused && self.coloring.count > 1 {
                    let (freed_by, taken_by) = (a.end, b.start);
                    let (ca, cb) = (
                        self.coloring.colors[freed_by],
                        self.coloring.colors[taken_by],
                    );
                    if ca != cb {
                        return Err(invalid(format!(
                            "{} is freed by {} of group {ca} and reused for {} by {} of group {cb}",
                            ta.label(),
                            graph.op(freed_by).label(freed_by),
                            tb.label(),
                            graph.op(taken_by).label(taken_by)
                        )));
                    }
                }
                continue;
            }
            let op = b.start;
            let o = graph.op(op);
            let inplace_ok = a.end == b.start
                && self.placement[b.t] == (Placement::InPlace { input: a.t })
                && o.inplace
                    .iter()
                    .any(|&(i, out)| o.inputs[i] == a.t && o.outputs[out] == b.t && !o.ignored[i])
                && o.used_inputs().filter(|&(_, t)| t == a.t).count() == 1
                && ta.size == tb.size;
            if !inplace_ok {
                return Err(invalid(format!(
                    "holds {} (live over ops {}..={}) and {} (live over ops {}..={}) at once{}",
                    ta.label(),
                    a.start,
                    a.end,
                    tb.label(),
                    b.start,
                    b.end,
                    if a.end == b.start {
                        format!("; {} may not work in place here", o.label(op))
                    } else {
                        String::new()
                    }
                )));
            }
        }
        Ok(())
    }
}
