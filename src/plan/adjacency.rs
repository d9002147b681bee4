//! Which tensors may not share memory with which, as one flat array.
//!
//! Why: the planners that try many placements (`improve`'s searches, the
//! ruin steps, the exact search, `validate`) build these lists once per
//! call, and one `Vec` per tensor, each sorted, cost about a tenth of
//! `improve`'s time limit on large traces (the 7,133 tensors before op 992
//! of the 10,000-tensor perfect packing seed 5 have 1.4 million entries:
//! 23–31 ms). None of these callers needs a list in order, so here two
//! sweeps over the first ops count, then fill, one flat array. Greedy by
//! size over those 10,000 tensors went from 67–82 ms to 38–45 ms.

use super::conflicts::Conflicts;
use super::records::UsageRecord;

/// For every tensor, the tensors it may not share memory with: those alive
/// at a common op, plus its conflict pairs. Each neighbour is listed once;
/// the order within a list is unspecified.
pub(crate) struct Adjacency {
    /// `list[start[i]..start[i + 1]]` are tensor `i`'s neighbours.
    start: Vec<usize>,
    list: Vec<u32>,
}

impl Adjacency {
    /// The lists of `records` under `conflicts`.
    ///
    /// # Panics
    ///
    /// With 2^32 tensors or more (indices are stored as `u32`), and when
    /// `conflicts` pairs a tensor with an index past the records (a set
    /// made for another trace).
    pub(crate) fn new(records: &[UsageRecord], conflicts: Option<&Conflicts>) -> Self {
        let n = records.len();
        assert!(
            u32::try_from(n).is_ok(),
            "{n} tensors: the planners take fewer than 2^32"
        );
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| (records[i].first, i));
        // Conflict pairs that time does not already keep apart; time-overlap
        // pairs are all found by the sweep, so this keeps each pair once.
        let extra = |i: usize| {
            conflicts
                .map_or(&[][..], |c| c.of(i))
                .iter()
                .filter(move |&&j| {
                    assert!(
                        j < n,
                        "conflict pair ({i}, {j}) names a tensor past the {n} records: \
                         the conflict set was made for another trace"
                    );
                    j != i && !records[i].overlaps(&records[j])
                })
        };
        let mut degree = vec![0usize; n];
        sweep(records, &order, |i, j| {
            degree[i] += 1;
            degree[j] += 1;
        });
        for (i, d) in degree.iter_mut().enumerate() {
            *d += extra(i).count();
        }
        let mut start = Vec::with_capacity(n + 1);
        let mut at = 0;
        for &d in &degree {
            start.push(at);
            at += d;
        }
        start.push(at);
        let mut list = vec![0u32; at];
        // Where each list's next entry goes.
        let mut next = start[..n].to_vec();
        sweep(records, &order, |i, j| {
            list[next[i]] = j as u32;
            next[i] += 1;
            list[next[j]] = i as u32;
            next[j] += 1;
        });
        for i in 0..n {
            for &j in extra(i) {
                list[next[i]] = j as u32;
                next[i] += 1;
            }
        }
        debug_assert!((0..n).all(|i| next[i] == start[i + 1]));
        Self { start, list }
    }

    /// Tensor `i`'s neighbours.
    #[inline]
    pub(crate) fn of(&self, i: usize) -> &[u32] {
        &self.list[self.start[i]..self.start[i + 1]]
    }

    /// How many neighbours tensor `i` has.
    #[inline]
    pub(crate) fn degree(&self, i: usize) -> usize {
        self.start[i + 1] - self.start[i]
    }
}

/// Calls `pair(i, j)` once for every two tensors alive at a common op,
/// sweeping `order` (the tensors by first op).
fn sweep(records: &[UsageRecord], order: &[usize], mut pair: impl FnMut(usize, usize)) {
    // The tensors whose interval has begun and may still be alive.
    let mut active: Vec<usize> = Vec::new();
    for &i in order {
        let f = records[i].first;
        active.retain(|&j| records[j].last >= f);
        for &j in &active {
            pair(i, j);
        }
        active.push(i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::synthetic::random_records;
    use crate::util::rng::SplitMix64;

    /// Every pair of tensors that overlap in time or conflict, by brute
    /// force, against the lists: each neighbour once, nothing else.
    #[test]
    fn lists_every_pair_once() {
        let mut rng = SplitMix64::new(11);
        for case in 0..40 {
            let n = 1 + rng.below(60) as usize;
            let records = random_records(&mut rng, n, 30, 8, |r| 1 + r.below(100));
            let pairs: Vec<(usize, usize)> = (0..rng.below(20))
                .map(|_| (rng.below(n as u64) as usize, rng.below(n as u64) as usize))
                .collect();
            let conflicts = Conflicts::from_pairs(n, &pairs).unwrap();
            for c in [None, Some(&conflicts)] {
                let adj = Adjacency::new(&records, c);
                for i in 0..n {
                    let mut got: Vec<usize> = adj.of(i).iter().map(|&j| j as usize).collect();
                    got.sort_unstable();
                    let want: Vec<usize> = (0..n)
                        .filter(|&j| {
                            j != i
                                && (records[i].overlaps(&records[j])
                                    || c.is_some_and(|c| c.contains(i, j)))
                        })
                        .collect();
                    assert_eq!(got, want, "case {case}, tensor {i}");
                    assert_eq!(adj.degree(i), want.len());
                }
            }
        }
    }

    /// A conflict set made for more tensors than the records, pairing one
    /// with a tensor that is not there, is refused with a message that
    /// says so, not an index out of bounds.
    #[test]
    #[should_panic(expected = "names a tensor past the 3 records")]
    fn a_conflict_past_the_records_is_named() {
        let records = random_records(&mut SplitMix64::new(1), 3, 10, 2, |_| 8);
        let conflicts = Conflicts::from_pairs(5, &[(0, 4)]).unwrap();
        let _ = Adjacency::new(&records, Some(&conflicts));
    }
}
