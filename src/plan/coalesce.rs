//! Coalescing: fewer, larger records that any plan of can be unfolded into a
//! plan of the originals, for [`improve`](super::improve) to search over.
//!
//! Two merges, repeated until neither applies:
//! - *stack*: records with the same lifetime become one record as tall as
//!   their sizes together; its members sit one on top of the other;
//! - *chain*: two records of the same size whose lifetimes abut (one ends
//!   the op before the other starts) become one record over both
//!   lifetimes; its members share its offset. Only unambiguous pairs are
//!   chained: the first is the only record of that size ending there and
//!   the second the only one starting there; optionally (*matched*), an
//!   ambiguous pair too when the chained lifetime is one another record
//!   has, so that the two stack next, and, when that settles, a run of
//!   equal records that tiles another record's lifetime (a *bridge*).
//!
//! Both are restrictions (the members could have been apart), so the
//! coalesced optimum may exceed the original one; but they are the shapes a
//! tight packing is built from: on the perfect packings (a rectangle cut at
//! random, again and again, across memory or across time) stacks undo the
//! cuts across memory and chains those across time, and 10,000 records
//! shrink to about 3,000 that the planners pack within 20% of the bound.
//! Without conflicts only: a conflict pair would have to be honoured by
//! whole groups.

use std::collections::HashMap;

use super::records::UsageRecord;
use super::OffsetsAssignment;

/// Records merged into groups, and where each original sits in its group.
pub(crate) struct Coalesced {
    /// One record per group.
    pub(crate) records: Vec<UsageRecord>,
    /// `members[g]`: (original record, offset from the group's offset).
    members: Vec<Vec<(usize, u64)>>,
    /// How many originals there are.
    n: usize,
}

/// A group being built: lifetime, size, members.
struct Group {
    first: usize,
    last: usize,
    size: u64,
    members: Vec<(usize, u64)>,
}

/// At most this many rounds of merging; each round shrinks the set, and the
/// perfect packings settle within about ten.
const MAX_ROUNDS: usize = 64;

impl Coalesced {
    /// Merges `records` (offsets multiples of `align`); None when nothing
    /// merges. Empty records stay alone.
    ///
    /// With `matched`, a pair that is ambiguous only because other groups
    /// of that size end or start at the same op is chained anyway when the
    /// chained lifetime is one some group already has, so that the two
    /// stack next (see `chain`), and so are runs of equal groups that tile
    /// another group's lifetime (see `bridge`).
    pub(crate) fn new(records: &[UsageRecord], align: u64, matched: bool) -> Option<Coalesced> {
        let align = align.max(1);
        let up = |v: u64| v.div_ceil(align) * align;
        let mut groups: Vec<Group> = records
            .iter()
            .enumerate()
            .map(|(i, r)| Group {
                first: r.first,
                last: r.last,
                size: r.size,
                members: vec![(i, 0)],
            })
            .collect();
        let start = groups.len();
        // Ambiguous pairs are matched only once the unambiguous merges have
        // settled, and bridges only once the matches have; unambiguous
        // merges come first again after each match or bridge.
        let mut loose = false;
        for _ in 0..MAX_ROUNDS {
            let before = groups.len();
            groups = stack(groups, &up);
            groups = chain(groups, loose);
            if groups.len() < before {
                loose = false;
            } else if !loose && matched {
                loose = true;
            } else if matched {
                let settled = groups.len();
                groups = bridge(groups);
                if groups.len() == settled {
                    break;
                }
                loose = false;
            } else {
                break;
            }
        }
        if groups.len() == start {
            return None;
        }
        Some(Coalesced {
            records: groups
                .iter()
                .enumerate()
                .map(|(k, g)| UsageRecord::new(k as u64, g.size, g.first, g.last))
                .collect(),
            members: groups.into_iter().map(|g| g.members).collect(),
            n: records.len(),
        })
    }

    /// The plan of the originals that `plan` (of the groups) unfolds into;
    /// its total is the same.
    pub(crate) fn expand(&self, plan: &OffsetsAssignment) -> OffsetsAssignment {
        let mut offsets = vec![0u64; self.n];
        for (g, members) in self.members.iter().enumerate() {
            for &(i, rel) in members {
                offsets[i] = plan.offsets[g] + rel;
            }
        }
        OffsetsAssignment {
            offsets,
            total_size: plan.total_size,
        }
    }
}

/// Stacks the non-empty groups that share a lifetime, in index order; each
/// member starts at an aligned offset above the one before.
fn stack(groups: Vec<Group>, up: &impl Fn(u64) -> u64) -> Vec<Group> {
    let mut at: HashMap<(usize, usize), usize> = HashMap::new();
    let mut out: Vec<Group> = Vec::with_capacity(groups.len());
    for g in groups {
        if g.size == 0 {
            out.push(g);
            continue;
        }
        match at.get(&(g.first, g.last)) {
            Some(&k) => {
                let base = up(out[k].size);
                let s = &mut out[k];
                s.members
                    .extend(g.members.into_iter().map(|(i, rel)| (i, base + rel)));
                s.size = base + g.size;
            }
            None => {
                at.insert((g.first, g.last), out.len());
                out.push(g);
            }
        }
    }
    out
}

/// Chains unambiguous pairs of non-empty, equally sized groups whose
/// lifetimes abut; with `loose`, also ambiguous pairs whose chained
/// lifetime some group already has.
///
/// Why that match: in a cut rectangle, the two halves of a time cut that
/// other cuts made ambiguous usually make up a piece whose neighbour across
/// a memory cut has that same lifetime; any other match is a guess that
/// later merges cannot undo (matching them by length instead made as many
/// traces worse as better).
fn chain(groups: Vec<Group>, loose: bool) -> Vec<Group> {
    // (op, size) -> how many groups of that size start (end) there, and one.
    let mut starts: HashMap<(usize, u64), (u32, usize)> = HashMap::new();
    let mut ends: HashMap<(usize, u64), (u32, usize)> = HashMap::new();
    for (k, g) in groups.iter().enumerate().filter(|(_, g)| g.size > 0) {
        let e = starts.entry((g.first, g.size)).or_insert((0, k));
        e.0 += 1;
        let e = ends.entry((g.last, g.size)).or_insert((0, k));
        e.0 += 1;
    }
    let mut next: Vec<Option<usize>> = vec![None; groups.len()];
    let mut has_prev = vec![false; groups.len()];
    for (k, g) in groups.iter().enumerate().filter(|(_, g)| g.size > 0) {
        if let Some(&(1, j)) = starts.get(&(g.last + 1, g.size)) {
            if ends.get(&(g.last, g.size)).is_some_and(|&(c, _)| c == 1) {
                next[k] = Some(j);
                has_prev[j] = true;
            }
        }
    }
    if loose {
        // (op, size) -> the groups of that size ending just before (starting
        // at) that op; each is matched once, first come first served.
        let lifetimes: std::collections::HashSet<(usize, usize)> = groups
            .iter()
            .filter(|g| g.size > 0)
            .map(|g| (g.first, g.last))
            .collect();
        let mut e: HashMap<(usize, u64), Vec<usize>> = HashMap::new();
        let mut s: HashMap<(usize, u64), Vec<usize>> = HashMap::new();
        for (k, g) in groups.iter().enumerate().filter(|(_, g)| g.size > 0) {
            e.entry((g.last + 1, g.size)).or_default().push(k);
            s.entry((g.first, g.size)).or_default().push(k);
        }
        for (key, ek) in e {
            let Some(mut sk) = s.remove(&key) else {
                continue;
            };
            if ek.len() < 2 && sk.len() < 2 {
                continue;
            }
            for a in ek {
                if let Some(p) = sk
                    .iter()
                    .position(|&b| lifetimes.contains(&(groups[a].first, groups[b].last)))
                {
                    let b = sk.swap_remove(p);
                    next[a] = Some(b);
                    has_prev[b] = true;
                }
            }
        }
    }
    link(groups, &next, &has_prev)
}

/// Chains, for a group, pieces of one size that tile its lifetime end to
/// end (the first piece that starts where the previous one ends, at each
/// step), so that they stack with it next; each group takes part in at
/// most one such bridge per call.
///
/// Why: the ambiguous junctions a matched pair cannot settle (neither half
/// of any candidate pair has a partner lifetime yet) often sit on a run of
/// slivers beside one piece, which a whole run reveals: at 10,000 tensors,
/// seed 3, it takes 2,200 matched records to 2,000 and 1.17 to 1.16 of the
/// bound.
fn bridge(groups: Vec<Group>) -> Vec<Group> {
    let mut starts: HashMap<(usize, u64), Vec<usize>> = HashMap::new();
    for (k, g) in groups.iter().enumerate().filter(|(_, g)| g.size > 0) {
        starts.entry((g.first, g.size)).or_default().push(k);
    }
    let mut used = vec![false; groups.len()];
    let mut next: Vec<Option<usize>> = vec![None; groups.len()];
    let mut has_prev = vec![false; groups.len()];
    let mut firsts: HashMap<usize, Vec<usize>> = HashMap::new();
    for (k, g) in groups.iter().enumerate().filter(|(_, g)| g.size > 0) {
        firsts.entry(g.first).or_default().push(k);
    }
    for a in 0..groups.len() {
        let ga = &groups[a];
        if ga.size == 0 || used[a] {
            continue;
        }
        for &p in &firsts[&ga.first] {
            if p == a || used[p] || groups[p].last >= ga.last {
                continue;
            }
            let size = groups[p].size;
            let mut path = vec![p];
            let mut cur = p;
            while groups[cur].last < ga.last {
                let step = starts.get(&(groups[cur].last + 1, size)).and_then(|qs| {
                    qs.iter()
                        .copied()
                        .find(|&q| q != a && !used[q] && groups[q].last <= ga.last)
                });
                let Some(q) = step else { break };
                path.push(q);
                cur = q;
            }
            if groups[cur].last == ga.last {
                used[a] = true;
                for w in path.windows(2) {
                    next[w[0]] = Some(w[1]);
                    has_prev[w[1]] = true;
                }
                for &q in &path {
                    used[q] = true;
                }
                break;
            }
        }
    }
    link(groups, &next, &has_prev)
}

/// Merges the groups along `next` links into one group per chain.
fn link(groups: Vec<Group>, next: &[Option<usize>], has_prev: &[bool]) -> Vec<Group> {
    // Follow each chain from its head; every group is in exactly one.
    let mut slots: Vec<Option<Group>> = groups.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(slots.len());
    for head in 0..slots.len() {
        if has_prev[head] {
            continue;
        }
        let Some(mut g) = slots[head].take() else {
            continue;
        };
        let mut k = head;
        while let Some(j) = next[k] {
            let h = slots[j].take().expect("a group has one predecessor");
            g.last = h.last;
            g.members.extend(h.members);
            k = j;
        }
        out.push(g);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{lower_bound, validate_offsets};

    /// A 2 × 2 guillotine cut collapses into one record, and its plan
    /// unfolds into a valid plan of the four.
    #[test]
    fn a_cut_rectangle_collapses_and_unfolds() {
        let records = vec![
            UsageRecord::new(0, 8, 0, 4),
            UsageRecord::new(1, 8, 5, 9),
            UsageRecord::new(2, 8, 0, 4),
            UsageRecord::new(3, 8, 5, 9),
            UsageRecord::new(4, 0, 3, 6),
        ];
        let c = Coalesced::new(&records, 1, false).unwrap();
        // The two stacks chain into one record; the empty one stays apart.
        assert_eq!(c.records.len(), 2);
        assert_eq!(lower_bound(&c.records), lower_bound(&records));
        let plan = OffsetsAssignment::from_offsets(&c.records, vec![0; c.records.len()]);
        let out = c.expand(&plan);
        validate_offsets(&records, None, &out, 1).unwrap();
        assert_eq!(out.total_size, 16);
    }

    /// Ambiguous pairs are left alone, and aligned members stay aligned.
    #[test]
    fn ambiguous_chains_are_skipped_and_alignment_kept() {
        let records = vec![
            UsageRecord::new(0, 4, 0, 1),
            UsageRecord::new(1, 4, 2, 3),
            UsageRecord::new(2, 4, 2, 5),
            UsageRecord::new(3, 3, 6, 7),
            UsageRecord::new(4, 5, 6, 7),
        ];
        let c = Coalesced::new(&records, 8, false).unwrap();
        // 0 could chain with 1 or 2: neither; 3 and 4 stack, 4 at offset 8.
        assert_eq!(c.records.len(), 4);
        let plan = OffsetsAssignment::from_offsets(&c.records, vec![0, 8, 16, 0]);
        let out = c.expand(&plan);
        validate_offsets(&records, None, &out, 8).unwrap();
        assert!(out.offsets.iter().all(|o| o % 8 == 0));
    }

    /// An ambiguous pair is matched when its chained lifetime is one another
    /// record has, and what that frees up chains in the next round.
    #[test]
    fn matched_chains_resolve_an_ambiguity() {
        let records = vec![
            UsageRecord::new(0, 4, 0, 1),
            UsageRecord::new(1, 4, 2, 3),
            UsageRecord::new(2, 4, 1, 1),
            UsageRecord::new(3, 4, 2, 5),
            UsageRecord::new(4, 3, 0, 3),
        ];
        // 0 and 2 both end before op 2, where 1 and 3 start: no strict merge.
        assert!(Coalesced::new(&records, 1, false).is_none());
        let c = Coalesced::new(&records, 1, true).unwrap();
        // 0 + 1 is 4's lifetime, so they chain and stack with 4; then 2 + 3
        // is unambiguous.
        assert_eq!(c.records.len(), 2);
        assert_eq!(lower_bound(&c.records), lower_bound(&records));
        let plan = OffsetsAssignment::from_offsets(&c.records, vec![0, 7]);
        let out = c.expand(&plan);
        validate_offsets(&records, None, &out, 1).unwrap();
        assert_eq!(out.total_size, 11);
    }

    /// On cut rectangles the matched coalescing merges more than the strict
    /// one, keeps the bound, and any plan of it unfolds into a valid one.
    #[test]
    fn matched_coalescing_merges_more_of_a_cut_rectangle() {
        for seed in 1..=3 {
            let records = crate::plan::synthetic::perfect_packing(2000, seed, 1 << 20);
            let strict = Coalesced::new(&records, 1, false).unwrap();
            let matched = Coalesced::new(&records, 1, true).unwrap();
            assert!(
                matched.records.len() < strict.records.len(),
                "seed {seed}: {} matched vs {} strict",
                matched.records.len(),
                strict.records.len()
            );
            assert_eq!(lower_bound(&matched.records), lower_bound(&records));
            let plan = crate::plan::offsets_greedy_by_size(&matched.records, None, 1);
            let out = matched.expand(&plan);
            validate_offsets(&records, None, &out, 1).unwrap();
        }
    }

    /// A run of equal records that tiles another record's lifetime is
    /// bridged and stacked on it, though every junction is ambiguous and no
    /// matched pair has a partner lifetime.
    #[test]
    fn bridges_stack_a_run_of_slivers_on_its_neighbour() {
        let records = vec![
            UsageRecord::new(0, 3, 0, 5),
            UsageRecord::new(1, 4, 0, 1),
            UsageRecord::new(2, 4, 2, 3),
            UsageRecord::new(3, 4, 4, 5),
            // Decoys that end or start at the junctions.
            UsageRecord::new(4, 4, 1, 1),
            UsageRecord::new(5, 4, 2, 8),
            UsageRecord::new(6, 4, 3, 3),
            UsageRecord::new(7, 4, 4, 9),
        ];
        assert!(Coalesced::new(&records, 1, false).is_none());
        let c = Coalesced::new(&records, 1, true).unwrap();
        // The bridge settles the junctions, so the decoys chain in pairs.
        assert_eq!(c.records.len(), 3);
        assert!(c
            .records
            .iter()
            .any(|r| (r.size, r.first, r.last) == (7, 0, 5)));
        let plan = crate::plan::offsets_greedy_by_size(&c.records, None, 1);
        validate_offsets(&records, None, &c.expand(&plan), 1).unwrap();
    }
}
