//! The graph a replay runs: the edges the engine would infer from its
//! nodes' reads and writes in push order, as successor lists.

/// For each op, in push order, the earlier ops it must follow: the last
/// writer of each var it reads; for each var it writes, the readers since
/// the last write, or the last writer when there were none; less each of
/// those that another of them follows directly ([`prune_implied`]). `ops`
/// yields each op's reads and writes as dense var indices below `vars`.
///
/// These are the orderings the engine's var queues enforce (an edge left
/// out is kept through the two it is implied by), so running the ops in
/// any order that keeps these edges has the effects of pushing them one by
/// one.
pub(crate) fn infer_preds<'a>(
    vars: usize,
    ops: impl Iterator<Item = (&'a [u32], &'a [u32])>,
) -> Vec<Vec<u32>> {
    let mut preds = infer_var_preds(vars, ops);
    prune_implied(&mut preds);
    preds
}

/// The predecessors the var queues give each op, before pruning.
fn infer_var_preds<'a>(
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

/// Most predecessor entries [`prune_implied`] reads for one node: it
/// reads the lists of the node's predecessors, so a node behind many
/// nodes that are each behind many would cost their product. Past this,
/// the node keeps the edges not yet found implied.
const PRUNE_BUDGET: usize = 4096;

/// Drops from each node's predecessors (sorted, in push order) each one
/// that another of them lists among its own predecessors.
///
/// Why: an op that writes a var follows every read of it since the last
/// write, and an op that reads many vars follows each var's last writer;
/// when those readers read the same vars, most of the edges repeat what a
/// path of two already says. In the `randsum` workload (100 vars, ops
/// reading 2–19 and writing one) about 70% of the edges are such, and
/// every edge is a read-modify-write of a shared countdown per run.
///
/// Sound: a dropped `x -> n` has `x -> y` and `y -> n` for some other
/// predecessor `y` of `n`, with `x < y`. If `y -> n` was dropped too, it
/// is for some `z > y`, and so on up to the last predecessor of `n`,
/// which nothing can drop (no other predecessor comes after it). By
/// induction over the nodes in push order, every original edge into an
/// earlier node is a path of kept edges, so `x` still reaches `n`: the
/// same nodes wait for the same nodes, and through the chain of
/// countdowns each still happens after all it followed.
fn prune_implied(preds: &mut [Vec<u32>]) {
    // `state[x] == 2n`: x is a predecessor of node n; `2n + 1`: and
    // another predecessor of n lists it (n counted from 1, so that the
    // zeros it starts with name nobody).
    let mut state = vec![0u64; preds.len()];
    // Last node first: a node reads only the lists of earlier nodes,
    // which are then still whole, so each list is pruned in place.
    for n in (0..preds.len()).rev() {
        let (earlier, rest) = preds.split_at_mut(n);
        let p = &mut rest[0];
        if p.len() < 2 {
            continue;
        }
        let direct = 2 * (n as u64 + 1);
        for &x in p.iter() {
            state[x as usize] = direct;
        }
        let mut read = 0;
        let mut any = false;
        for &y in p.iter() {
            let theirs = &earlier[y as usize];
            read += theirs.len();
            if read > PRUNE_BUDGET {
                break;
            }
            for &x in theirs {
                // Without a branch: most checks find nothing, and which
                // do is not predictable.
                let s = &mut state[x as usize];
                let hit = *s == direct;
                *s |= u64::from(hit);
                any |= hit;
            }
        }
        if any {
            p.retain(|&x| state[x as usize] == direct);
        }
    }
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
    fn an_edge_implied_by_two_others_is_dropped() {
        // 0 writes a; 1 reads a, writes b; 2 reads a and b: 2 follows 0
        // through 1, so only 1 -> 2 stays. 3 writes a after the reads of
        // 1 and 2: 2 follows 1, so only 2 -> 3 stays.
        let p = preds(2, &[(&[], &[0]), (&[0], &[1]), (&[0, 1], &[]), (&[], &[0])]);
        assert_eq!(p, vec![vec![], vec![0], vec![1], vec![2]]);
        assert_eq!(
            infer_var_preds(
                2,
                [
                    (&[][..], &[0][..]),
                    (&[0], &[1]),
                    (&[0, 1], &[]),
                    (&[], &[0])
                ]
                .into_iter()
            ),
            vec![vec![], vec![0], vec![0, 1], vec![1, 2]]
        );
    }

    /// Each node's transitive predecessors, as bit sets.
    fn reach(preds: &[Vec<u32>]) -> Vec<Vec<u64>> {
        let words = preds.len().div_ceil(64);
        let mut r: Vec<Vec<u64>> = Vec::with_capacity(preds.len());
        for p in preds {
            let mut mine = vec![0u64; words];
            for &x in p {
                let x = x as usize;
                mine[x / 64] |= 1 << (x % 64);
                for (m, t) in mine.iter_mut().zip(&r[x]) {
                    *m |= t;
                }
            }
            r.push(mine);
        }
        r
    }

    /// `n` random ops over `vars` vars: `reads` reads and one or two
    /// writes each (seeded).
    fn random_ops(seed: u64, n: usize, vars: u32, reads: (u32, u32)) -> Vec<(Vec<u32>, Vec<u32>)> {
        let mut rng = crate::bench::SplitMix64::new(seed);
        (0..n)
            .map(|_| {
                let (nr, nw) = (rng.range(reads.0, reads.1), rng.range(1, 2));
                let mut v = Vec::new();
                rng.distinct((nr + nw) as usize, vars, &mut v);
                let w = v.split_off(nr as usize);
                (v, w)
            })
            .collect()
    }

    #[test]
    fn pruning_keeps_every_ordering_and_drops_most_of_a_dense_graph() {
        for (seed, vars, reads) in [(1, 20, (2, 12)), (2, 200, (0, 3)), (3, 8, (0, 6))] {
            let ops = random_ops(seed, 400, vars, reads);
            let it = || ops.iter().map(|(r, w)| (&r[..], &w[..]));
            let all = infer_var_preds(vars as usize, it());
            let kept = infer_preds(vars as usize, it());
            for (k, a) in kept.iter().zip(&all) {
                assert!(k.iter().all(|x| a.contains(x)), "an edge was added");
            }
            assert_eq!(
                reach(&kept),
                reach(&all),
                "seed {seed}: an ordering was lost"
            );
            let count = |p: &[Vec<u32>]| p.iter().map(Vec::len).sum::<usize>();
            if seed == 1 {
                // Many reads per op over few vars, as in `randsum`.
                assert!(
                    2 * count(&kept) < count(&all),
                    "{} of {} edges kept",
                    count(&kept),
                    count(&all)
                );
            }
        }
    }

    #[test]
    fn past_its_budget_a_node_keeps_the_edges_it_did_not_check() {
        // Node y follows nodes 0..=PRUNE_BUDGET; node n follows 0 and y.
        // Reading y's list would pass the budget, so 0 -> n stays.
        let y = PRUNE_BUDGET as u32 + 1;
        let mut p: Vec<Vec<u32>> = (0..y).map(|_| Vec::new()).collect();
        p.push((0..y).collect());
        p.push(vec![0, y]);
        prune_implied(&mut p);
        assert_eq!(p[y as usize + 1], vec![0, y]);
        // Within the budget the same shape is pruned.
        let mut small: Vec<Vec<u32>> = (0..3).map(|_| Vec::new()).collect();
        small.push(vec![0, 1, 2]);
        small.push(vec![0, 3]);
        prune_implied(&mut small);
        assert_eq!(small[4], vec![3]);
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
