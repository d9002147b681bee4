//! Pairs of tensors that must be kept apart although their intervals may not
//! overlap: under concurrent execution, ops that a sequential order places far
//! apart may run at the same time.
//!
//! TFLite expresses this the other way round, as a *reallocation graph*: for
//! each tensor, the tensors that may reuse its memory whatever the execution
//! order (those that every consumer of it must finish before).
//! [`reallocation_graph`] computes it from the dependency graph exactly as
//! TFLite does, and [`Conflicts::from_reallocation_graph`] turns it into the
//! pairs a planner must keep apart.

use super::adjacency::Adjacency;
use super::records::UsageRecord;

/// A conflict pair names a tensor that does not exist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("conflict pair ({a}, {b}) names a tensor index not below {n}, the number of records")]
pub struct ConflictError {
    /// First index of the pair.
    pub a: usize,
    /// Second index of the pair.
    pub b: usize,
    /// Number of records.
    pub n: usize,
}

/// A symmetric set of index pairs (indices into the records slice) that must
/// not share memory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Conflicts {
    adj: Vec<Vec<usize>>,
}

impl Conflicts {
    /// No pairs among `n` tensors.
    pub fn new(n: usize) -> Self {
        Self {
            adj: vec![Vec::new(); n],
        }
    }

    /// The given pairs among `n` tensors.
    ///
    /// # Errors
    ///
    /// [`ConflictError`] naming the pair when an index is not below `n`.
    pub fn from_pairs(n: usize, pairs: &[(usize, usize)]) -> Result<Self, ConflictError> {
        let mut c = Self::new(n);
        for &(a, b) in pairs {
            if a >= n || b >= n {
                return Err(ConflictError { a, b, n });
            }
            c.adj[a].push(b);
            c.adj[b].push(a);
        }
        c.normalize();
        Ok(c)
    }

    /// Every pair of distinct tensors that the reallocation graph does not
    /// allow to reuse each other's memory.
    pub fn from_reallocation_graph(realloc: &[Vec<usize>]) -> Self {
        let n = realloc.len();
        let mut c = Self::new(n);
        for (i, may_reuse) in realloc.iter().enumerate() {
            let mut allowed = vec![false; n];
            for &j in may_reuse {
                if j < n {
                    allowed[j] = true;
                }
            }
            for (j, &ok) in allowed.iter().enumerate() {
                if j != i && !ok {
                    c.adj[i].push(j);
                }
            }
        }
        c.normalize();
        c
    }

    fn normalize(&mut self) {
        // Symmetric closure, then sorted and unique so lookups can bisect.
        let n = self.adj.len();
        for i in 0..n {
            for k in 0..self.adj[i].len() {
                let j = self.adj[i][k];
                self.adj[j].push(i);
            }
        }
        for (i, a) in self.adj.iter_mut().enumerate() {
            a.sort_unstable();
            a.dedup();
            a.retain(|&j| j != i);
        }
    }

    /// Number of tensors the set is over.
    pub fn len(&self) -> usize {
        self.adj.len()
    }

    /// Whether the set is over no tensors.
    pub fn is_empty(&self) -> bool {
        self.adj.is_empty()
    }

    /// Whether any pair is in the set (a set over tensors may hold none).
    pub fn has_pairs(&self) -> bool {
        self.adj.iter().any(|l| !l.is_empty())
    }

    /// Whether tensors `a` and `b` must be kept apart.
    pub fn contains(&self, a: usize, b: usize) -> bool {
        self.adj.get(a).is_some_and(|l| l.binary_search(&b).is_ok())
    }

    /// The tensors that must be kept apart from `a`, ascending.
    pub fn of(&self, a: usize) -> &[usize] {
        self.adj.get(a).map_or(&[], Vec::as_slice)
    }
}

/// Whether nothing but time overlap keeps tensors apart: no set, or one
/// without pairs.
pub(crate) fn time_only(conflicts: Option<&Conflicts>) -> bool {
    !conflicts.is_some_and(Conflicts::has_pairs)
}

/// Whether tensors `a` and `b` may not share memory: their intervals overlap,
/// or the conflict set says so.
pub fn apart(records: &[UsageRecord], conflicts: Option<&Conflicts>, a: usize, b: usize) -> bool {
    records[a].overlaps(&records[b]) || conflicts.is_some_and(|c| c.contains(a, b))
}

/// For every tensor, the tensors it may not share memory with (ascending):
/// those alive at a common op, plus its conflicts.
pub fn neighbors(records: &[UsageRecord], conflicts: Option<&Conflicts>) -> Vec<Vec<usize>> {
    let adj = Adjacency::new(records, conflicts);
    (0..records.len())
        .map(|i| {
            let mut l: Vec<usize> = adj.of(i).iter().map(|&j| j as usize).collect();
            l.sort_unstable();
            l
        })
        .collect()
}

/// TFLite's reallocation graph of a dependency graph over tensors
/// (`deps[i]` lists the tensors computed from tensor `i`): tensor `j` may
/// reuse the memory of `i` (and the other way round) when `j` is reachable
/// from every direct successor of `i`, so every reader of `i` has finished
/// before `j` exists in any execution order. Lists are ascending.
pub fn reallocation_graph(deps: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = deps.len();
    let mut out = vec![Vec::new(); n];
    let mut visits = vec![0usize; n];
    let mut seen = vec![false; n];
    let mut queue = std::collections::VecDeque::new();
    for (root, children) in deps.iter().enumerate() {
        if children.is_empty() {
            continue;
        }
        visits.iter_mut().for_each(|v| *v = 0);
        for &child in children {
            // Vertices strictly reachable from `child` (not `child` itself,
            // unless a cycle leads back to it).
            seen.iter_mut().for_each(|s| *s = false);
            queue.clear();
            if child >= n {
                continue;
            }
            queue.push_back(child);
            seen[child] = true;
            while let Some(v) = queue.pop_front() {
                for &u in &deps[v] {
                    if u < n && !seen[u] {
                        seen[u] = true;
                        visits[u] += 1;
                        queue.push_back(u);
                    }
                }
            }
        }
        for (v, &count) in visits.iter().enumerate() {
            if count == children.len() {
                out[root].push(v);
                out[v].push(root);
            }
        }
    }
    for l in &mut out {
        l.sort_unstable();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_symmetric_and_checked() {
        let c = Conflicts::from_pairs(3, &[(0, 2), (2, 0), (1, 1)]).unwrap();
        assert!(c.contains(0, 2) && c.contains(2, 0));
        assert!(!c.contains(1, 1) && !c.contains(0, 1));
        let err = Conflicts::from_pairs(3, &[(0, 3)]).unwrap_err();
        assert!(err.to_string().contains("(0, 3)"), "{err}");
    }

    #[test]
    fn reallocation_graph_complement_keeps_unrelated_tensors_apart() {
        // 0 -> 1 -> 2 and a side branch 0 -> 3: tensor 2 may reuse 0's
        // memory only if it comes after every reader of 0, which 3 is not.
        let deps = vec![vec![1, 3], vec![2], vec![], vec![]];
        let realloc = reallocation_graph(&deps);
        let c = Conflicts::from_reallocation_graph(&realloc);
        for (i, may) in realloc.iter().enumerate() {
            for j in 0..deps.len() {
                if j != i {
                    assert_eq!(c.contains(i, j), !may.contains(&j), "{i} {j}");
                }
            }
        }
    }
}
