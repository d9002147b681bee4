//! The graph a replay runs: the edges the engine would infer from its
//! nodes' reads and writes in push order, as successor lists.

/// For each op, in push order, the earlier ops it must follow: the last
/// writer of each var it reads; for each var it writes, the readers since
/// the last write, or the last writer when there were none. `ops` yields
/// each op's reads and writes as dense var indices below `vars`.
///
/// These are exactly the orderings the engine's var queues enforce, so
/// running the ops in any order that keeps these edges has the effects of
/// pushing them one by one.
pub(crate) fn infer_preds<'a>(
    vars: usize,
    ops: impl Iterator<Item = (&'a [u32], &'a [u32])>,
) -> Vec<Vec<u32>> {
    const NONE: u32 = u32::MAX;
    let mut last_writer = vec![NONE; vars];
    let mut readers: Vec<Vec<u32>> = vec![Vec::new(); vars];
    let mut preds: Vec<Vec<u32>> = Vec::new();
    for (i, (reads, writes)) in ops.enumerate() {
        let mut p: Vec<u32> = Vec::new();
        for &v in reads {
            let w = last_writer[v as usize];
            if w != NONE {
                p.push(w);
            }
        }
        for &v in writes {
            let r = &readers[v as usize];
            if r.is_empty() {
                let w = last_writer[v as usize];
                if w != NONE {
                    p.push(w);
                }
            } else {
                p.extend_from_slice(r);
            }
        }
        p.sort_unstable();
        p.dedup();
        for &v in reads {
            readers[v as usize].push(i as u32);
        }
        for &v in writes {
            readers[v as usize].clear();
            last_writer[v as usize] = i as u32;
        }
        preds.push(p);
    }
    preds
}

/// The most nodes a graph holds: a successor's index keeps its top bit
/// for [`Succ::sole`].
pub(crate) const MAX_NODES: usize = 1 << 31;

/// One successor of a node: its index, and whether it follows that node
/// alone.
///
/// The flag travels in the index's top bit, so that releasing a successor
/// with a single predecessor (every node of a chain) reads nothing but
/// the successor list: its predecessor count, at a scattered address in a
/// random graph, would cost a cache miss per edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(transparent)]
pub(crate) struct Succ(u32);

impl Succ {
    const SOLE: u32 = 1 << 31;

    /// The successor's index.
    #[inline]
    pub(crate) fn node(self) -> u32 {
        self.0 & !Self::SOLE
    }

    /// True when the node that lists it is its only predecessor: nothing
    /// else counts it down, so it needs no countdown.
    #[inline]
    pub(crate) fn sole(self) -> bool {
        self.0 & Self::SOLE != 0
    }
}

/// Predecessor counts, successor lists and roots of a graph, flat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Edges {
    /// How many nodes each node waits for.
    pub(crate) preds: Box<[u32]>,
    /// `succs[offsets[i]..offsets[i + 1]]` follow node `i`.
    offsets: Box<[u32]>,
    succs: Box<[Succ]>,
    /// The nodes that wait for nothing, in push order.
    pub(crate) roots: Box<[u32]>,
}

impl Edges {
    /// Turns per-node predecessor lists (each naming earlier nodes only)
    /// into successor lists. At most [`MAX_NODES`] nodes.
    pub(crate) fn from_preds(preds: &[Vec<u32>]) -> Edges {
        let n = preds.len();
        assert!(n <= MAX_NODES, "a graph holds at most 2^31 nodes");
        let mut count = vec![0u32; n + 1];
        for p in preds {
            for &j in p {
                count[j as usize + 1] += 1;
            }
        }
        for i in 0..n {
            count[i + 1] += count[i];
        }
        let offsets = count.clone().into_boxed_slice();
        let mut succs = vec![Succ(0); count[n] as usize];
        // Nodes visited in push order: each successor list comes out in
        // push order too.
        for (i, p) in preds.iter().enumerate() {
            let sole = if p.len() == 1 { Succ::SOLE } else { 0 };
            for &j in p {
                let at = &mut count[j as usize];
                succs[*at as usize] = Succ(i as u32 | sole);
                *at += 1;
            }
        }
        Edges {
            preds: preds.iter().map(|p| p.len() as u32).collect(),
            offsets,
            succs: succs.into_boxed_slice(),
            roots: (0..n as u32)
                .filter(|&i| preds[i as usize].is_empty())
                .collect(),
        }
    }

    /// The nodes that follow node `i`, in push order.
    ///
    /// # Panics
    ///
    /// When `i` is not a node of the graph.
    #[inline]
    pub(crate) fn succs(&self, i: u32) -> &[Succ] {
        let i = i as usize;
        assert!(i < self.len(), "node {i} of a graph of {}", self.len());
        // SAFETY: `from_preds` makes `offsets` one longer than the nodes,
        // never decreasing from 0 to `succs.len()`, so for a node `i`
        // (checked above) both offsets exist and bound a range of `succs`.
        // Unchecked, a chain of empty nodes runs 9 instructions a node
        // fewer (of 69).
        unsafe {
            let start = *self.offsets.get_unchecked(i) as usize;
            let end = *self.offsets.get_unchecked(i + 1) as usize;
            self.succs.get_unchecked(start..end)
        }
    }

    /// Number of nodes.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.preds.len()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn preds(vars: usize, ops: &[(&[u32], &[u32])]) -> Vec<Vec<u32>> {
        infer_preds(vars, ops.iter().copied())
    }

    #[test]
    fn reads_follow_the_last_write_and_writes_the_reads_since() {
        // 0 writes v; 1 and 2 read it; 3 writes it; 4 writes it again.
        let p = preds(
            1,
            &[
                (&[], &[0]),
                (&[0], &[]),
                (&[0], &[]),
                (&[], &[0]),
                (&[], &[0]),
            ],
        );
        assert_eq!(p, vec![vec![], vec![0], vec![0], vec![1, 2], vec![3]]);
    }

    #[test]
    fn ops_on_different_vars_are_unordered() {
        let p = preds(2, &[(&[], &[0]), (&[], &[1]), (&[0], &[1])]);
        assert_eq!(p, vec![vec![], vec![], vec![0, 1]]);
    }

    #[test]
    fn successor_lists_invert_the_predecessors() {
        let p = vec![vec![], vec![0], vec![0], vec![1, 2], vec![]];
        let e = Edges::from_preds(&p);
        let succs = |i| {
            e.succs(i)
                .iter()
                .map(|s| (s.node(), s.sole()))
                .collect::<Vec<_>>()
        };
        assert_eq!(&*e.preds, &[0, 1, 1, 2, 0]);
        // 1 and 2 follow 0 alone; 3 follows both 1 and 2.
        assert_eq!(succs(0), [(1, true), (2, true)]);
        assert_eq!(succs(1), [(3, false)]);
        assert_eq!(succs(2), [(3, false)]);
        assert!(succs(3).is_empty());
        assert_eq!(&*e.roots, &[0, 4]);
    }

    #[test]
    #[should_panic(expected = "node 5 of a graph of 5")]
    fn successors_of_a_node_past_the_last_are_refused() {
        let e = Edges::from_preds(&[vec![], vec![0], vec![0], vec![1, 2], vec![]]);
        e.succs(5);
    }
}
