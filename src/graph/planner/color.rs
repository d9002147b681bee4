//! NNVM's `ColorNodeGroup`: split the ops into at most `k` groups by
//! repeatedly taking the heaviest remaining dependency chain.
//!
//! Each round finds the path through the op graph (producer to reader
//! edges) with the largest total importance (`FindBestPath`, a longest-path
//! pass in reverse execution order), gives its ops of non-zero importance
//! the next colour and sets their importance to zero. After `k - 1` rounds,
//! or when no path has any importance left, every op still uncoloured gets
//! the last colour. Ops of one chain cannot run at the same time anyway, so
//! letting them share storage costs no parallelism; the planner shares
//! storage only within a colour.

use super::super::ir::{Graph, OpId};

/// Colours of the ops (`0..count`) and the number of colours used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coloring {
    /// Colour of each op.
    pub colors: Vec<u32>,
    /// Number of colours used (at most the `k` asked for, at least 1).
    pub count: u32,
}

/// The heaviest path: its total importance and its ops in order.
fn best_path(preds: &[Vec<OpId>], importance: &[u64]) -> (u64, Vec<OpId>) {
    let n = importance.len();
    let mut best = vec![0_u64; n];
    let mut next = vec![n; n];
    let (mut best_total, mut start) = (0_u64, 0);
    for k in (0..n).rev() {
        best[k] += importance[k];
        if best[k] > best_total {
            best_total = best[k];
            start = k;
        }
        for &p in &preds[k] {
            if best[k] > best[p] {
                best[p] = best[k];
                next[p] = k;
            }
        }
    }
    let mut path = Vec::new();
    if best_total > 0 {
        let mut k = start;
        while k < n {
            path.push(k);
            k = next[k];
        }
    }
    (best_total, path)
}

/// Colours the ops of `graph` into at most `k` groups; `importance` weighs
/// each op (NNVM gives every op 1). `k` 0 counts as 1.
///
/// # Panics
///
/// When `importance` does not have one entry per op.
///
/// # Examples
///
/// ```
/// use depengine::graph::{planner::color_node_group, Graph};
/// // Two independent chains a -> b and c -> d.
/// let g = Graph::from_json_str(r#"{"model":"m","tensors":[
///   {"id":0,"size":4,"kind":"input"},{"id":1,"size":4,"kind":"intermediate"},
///   {"id":2,"size":4,"kind":"output"},{"id":3,"size":4,"kind":"intermediate"},
///   {"id":4,"size":4,"kind":"output"}],
///   "ops":[{"name":"a","type":"f","inputs":[0],"outputs":[1]},
///          {"name":"b","type":"f","inputs":[1],"outputs":[2]},
///          {"name":"c","type":"f","inputs":[0],"outputs":[3]},
///          {"name":"d","type":"f","inputs":[3],"outputs":[4]}]}"#, "m".as_ref())?;
/// let c = color_node_group(&g, &[1; 4], 2);
/// assert_eq!(c.count, 2);
/// assert_eq!(c.colors[0], c.colors[1]);
/// assert_eq!(c.colors[2], c.colors[3]);
/// assert_ne!(c.colors[0], c.colors[2]);
/// # Ok::<(), depengine::graph::GraphError>(())
/// ```
pub fn color_node_group(graph: &Graph, importance: &[u64], k: u32) -> Coloring {
    let n = graph.ops().len();
    assert_eq!(importance.len(), n, "one importance per op");
    let k = k.max(1);
    let mut preds: Vec<Vec<OpId>> = vec![Vec::new(); n];
    for (op_id, op) in graph.ops().iter().enumerate() {
        for &t in &op.inputs {
            if let Some(p) = graph.tensor(t).producer {
                if p != op_id && !preds[op_id].contains(&p) {
                    preds[op_id].push(p);
                }
            }
        }
    }
    let mut importance = importance.to_vec();
    let mut colors = vec![u32::MAX; n];
    let mut color = 0;
    while color + 1 < k {
        let (total, path) = best_path(&preds, &importance);
        if total == 0 {
            break;
        }
        for k in path {
            if importance[k] != 0 {
                colors[k] = color;
                importance[k] = 0;
            }
        }
        color += 1;
    }
    for c in &mut colors {
        if *c == u32::MAX {
            *c = color;
        }
    }
    Coloring {
        colors,
        count: color + 1,
    }
}
