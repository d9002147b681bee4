//! Shared objects from a minimum-cost flow (TFLite's `MINCOSTFLOW`).
//!
//! Left vertex `i` stands for "tensor `i` has died, its object is free";
//! right vertex `i'` for "tensor `i` needs an object". Every right vertex is
//! fed either from the source at the cost of a new object (its size) or from
//! a left vertex `j` whose tensor died before `i` starts, at the cost of
//! growing `j`'s object (`max(0, size_i - size_j)`). Saturated reuse edges
//! then chain tensors into objects.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use super::records::UsageRecord;
use super::{order_by_first, ObjectsAssignment};

struct Edge {
    to: usize,
    cap: i32,
    cost: i64,
}

struct Graph {
    edges: Vec<Edge>,
    from: Vec<Vec<usize>>,
}

impl Graph {
    fn add(&mut self, a: usize, b: usize, cost: i64) {
        // An edge and its reverse sit at indices e and e ^ 1.
        self.from[a].push(self.edges.len());
        self.edges.push(Edge { to: b, cap: 1, cost });
        self.from[b].push(self.edges.len());
        self.edges.push(Edge { to: a, cap: 0, cost: -cost });
    }
}

/// Assigns objects by a minimum-cost flow, solved with successive shortest
/// paths found by the queue-based Bellman-Ford (SPFA) that TFLite uses, so
/// ties resolve the same way.
pub fn min_cost_flow(records: &[UsageRecord]) -> ObjectsAssignment {
    let order = order_by_first(records);
    let n = records.len();
    let rec = |k: usize| &records[order[k]];
    let (source, sink) = (2 * n, 2 * n + 1);
    let mut g = Graph {
        edges: Vec::new(),
        from: vec![Vec::new(); 2 * n + 2],
    };
    let mut dead: Vec<usize> = Vec::new();
    let mut in_use: BinaryHeap<Reverse<(usize, usize)>> = BinaryHeap::new();
    for k in 0..n {
        while let Some(&Reverse((last, j))) = in_use.peek() {
            if last >= rec(k).first {
                break;
            }
            in_use.pop();
            dead.push(j);
        }
        in_use.push(Reverse((rec(k).last, k)));
        g.add(source, k, 0);
        g.add(n + k, sink, 0);
        g.add(source, n + k, rec(k).size as i64);
        for &j in &dead {
            let cost = rec(k).size.saturating_sub(rec(j).size) as i64;
            g.add(j, n + k, cost);
        }
    }
    let vertices = 2 * n + 2;
    let mut prev_edge = vec![0usize; vertices];
    loop {
        let mut dist = vec![i64::MAX; vertices];
        let mut stamp = vec![0usize; vertices];
        let mut cur = VecDeque::from([source]);
        let mut next = VecDeque::new();
        let mut round = 1usize;
        stamp[source] = round;
        dist[source] = 0;
        while !cur.is_empty() {
            round += 1;
            while let Some(v) = cur.pop_front() {
                for &e in &g.from[v] {
                    let edge = &g.edges[e];
                    if edge.cap > 0 {
                        let nd = dist[v] + edge.cost;
                        if nd < dist[edge.to] {
                            dist[edge.to] = nd;
                            prev_edge[edge.to] = e;
                            if stamp[edge.to] != round {
                                stamp[edge.to] = round;
                                next.push_back(edge.to);
                            }
                        }
                    }
                }
            }
            std::mem::swap(&mut cur, &mut next);
        }
        if dist[sink] == i64::MAX {
            break;
        }
        let mut v = sink;
        while v != source {
            let e = prev_edge[v];
            g.edges[e].cap -= 1;
            g.edges[e ^ 1].cap += 1;
            v = g.edges[e ^ 1].to;
        }
    }
    let mut out = ObjectsAssignment {
        object_ids: vec![0; n],
        object_sizes: Vec::new(),
    };
    let mut assigned = vec![false; n];
    for &e in &g.from[source] {
        let edge = &g.edges[e];
        if edge.cap == 0 && (n..2 * n).contains(&edge.to) {
            // Follow the chain of saturated reuse edges from this new object.
            let obj = out.object_sizes.len();
            let mut size = 0u64;
            let mut stack = vec![edge.to - n];
            while let Some(k) = stack.pop() {
                if assigned[k] {
                    continue;
                }
                assigned[k] = true;
                out.object_ids[order[k]] = obj;
                size = size.max(rec(k).size);
                for &e2 in g.from[k].iter().rev() {
                    let ed = &g.edges[e2];
                    if ed.cap == 0 && (n..2 * n).contains(&ed.to) && !assigned[ed.to - n] {
                        stack.push(ed.to - n);
                    }
                }
            }
            out.object_sizes.push(size);
        }
    }
    out
}
