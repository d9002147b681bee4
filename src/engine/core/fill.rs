//! Copying a pushed op's vars into its block: writes first, then the reads
//! that are not also written, each part without duplicates (rule 2 of the
//! design notes), by the cheapest method for the list's length.

use crate::engine::op::{OpBlock, VarList, VarVec};
use crate::engine::var::VarSlot;

/// Most vars of an op that [`fill_vars`] deduplicates by comparing every
/// pair instead of sorting.
const PAIRWISE_DEDUP_MAX: usize = 32;

/// Copies the op's vars into the block: writes first (deduplicated), then
/// reads that are not written (deduplicated) — rule 2. An op with many vars
/// has each part sorted by var id, the order in which `append_all` takes the
/// locks when trying them in the op's order fails.
#[inline]
pub(super) fn fill_vars(block: &mut OpBlock, reads: &VarList<'_>, writes: &VarList<'_>) {
    // A many-var op is sorted by id (a load from each var's line per
    // comparison); fewer vars are only compared by address, which needs no
    // load: pairwise up to 8, through a filter from 9 to 32 (see
    // `dedup_filtered`). Without sorting up to 32: with 16, MXNet's
    // `randsum` (up to 20 vars) spent a tenth of a one-thread push
    // sorting, and a bound of 32 made it 380 -> 342 ns per op.
    let key = |v: &VarSlot| v.id.id;
    let addr = |v: &VarSlot| v.var.addr();
    let vars = &mut block.vars;
    writes.push_slots(vars);
    let n = reads.len() + writes.len();
    let large = n > PAIRWISE_DEDUP_MAX;
    let filtered = n > DEDUP_FILTER_MIN;
    if large {
        vars.sort_unstable_by_key(key);
        vars.dedup_by_key(|v| key(v));
    } else if filtered {
        dedup_filtered(vars, 0, addr);
    } else {
        dedup_small(vars, 0, addr);
    }
    let nwrites = vars.len();
    reads.push_slots(vars);
    if large {
        vars[nwrites..].sort_unstable_by_key(key);
        dedup_from(vars, nwrites, |a, b| key(a) == key(b));
        let mut i = nwrites;
        while i < vars.len() {
            if vars[..nwrites]
                .binary_search_by_key(&key(&vars[i]), key)
                .is_ok()
            {
                vars.remove(i);
            } else {
                i += 1;
            }
        }
    } else if filtered {
        dedup_filtered(vars, nwrites, addr);
    } else {
        dedup_small(vars, nwrites, addr);
    }
    block.nwrites = u32::try_from(nwrites).expect("an op writes fewer than 2^32 vars");
    block.vars_on_heap = block.vars.spilled();
}

/// Up to this many vars an op's list is deduplicated by [`dedup_small`],
/// which compares every pair: the few comparisons cost less than hashing
/// each var for the filter of [`dedup_filtered`].
const DEDUP_FILTER_MIN: usize = 8;

/// Removes later duplicates from `v[start..]` of anything already in `v[..i]`
/// (so reads that are also written go too).
#[inline]
fn dedup_small<A: smallvec::Array>(
    v: &mut smallvec::SmallVec<A>,
    start: usize,
    key: impl Fn(&A::Item) -> usize,
) {
    // Each look at a small vector's items checks where they are (inline or
    // on the heap): scan a slice taken once, and go back to the vector only
    // to remove a duplicate, which is rare.
    let mut i = start.max(1);
    loop {
        let s: &[A::Item] = v;
        let dup = (i..s.len()).find(|&j| {
            let k = key(&s[j]);
            s[..j].iter().any(|x| key(x) == k)
        });
        let Some(d) = dup else { return };
        v.remove(d);
        i = d;
    }
}

/// [`dedup_small`] for lists of more than [`DEDUP_FILTER_MIN`] vars: a
/// 256-bit filter of the keys seen so far (one bit per key, from a
/// multiplicative hash) answers "not seen" for most vars without a scan;
/// only a var whose bit is already set is compared with those before it
/// (with 20 vars, one false hit an op on average; a 64-bit filter had
/// about three, each a mispredicted branch and a scan). Scanning for
/// every var (a `randsum` op lists up to 20) took a quarter of a
/// one-thread push there.
#[inline(never)]
fn dedup_filtered<A: smallvec::Array>(
    v: &mut smallvec::SmallVec<A>,
    start: usize,
    key: impl Fn(&A::Item) -> usize,
) {
    // The filter's 256 bits: the top 8 bits of the key's hash pick one.
    let slot = |k: usize| {
        let h = ((k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize;
        (h >> 6, 1u64 << (h & 63))
    };
    let mut seen = [0u64; 4];
    let mut i = start.max(1);
    for x in &v[..i.min(v.len())] {
        let (w, b) = slot(key(x));
        seen[w] |= b;
    }
    // As in `dedup_small`: one look at the items per duplicate removed.
    loop {
        let s: &[A::Item] = v;
        let dup = (i..s.len()).find(|&j| {
            let k = key(&s[j]);
            let (w, b) = slot(k);
            if seen[w] & b != 0 && s[..j].iter().any(|x| key(x) == k) {
                return true;
            }
            seen[w] |= b;
            false
        });
        let Some(d) = dup else { return };
        v.remove(d);
        i = d;
    }
}

/// Removes consecutive duplicates from the sorted tail `v[start..]`.
#[inline]
fn dedup_from(v: &mut VarVec, start: usize, same: impl Fn(&VarSlot, &VarSlot) -> bool) {
    let mut i = start + 1;
    while i < v.len() {
        if same(&v[i - 1], &v[i]) {
            v.remove(i);
        } else {
            i += 1;
        }
    }
}

#[cfg(all(test, not(loom)))]
mod dedup_tests {
    use smallvec::SmallVec;

    use super::{dedup_filtered, dedup_small, DEDUP_FILTER_MIN};
    use crate::bench::SplitMix64;

    /// What `dedup_small` and `dedup_filtered` must leave: `v[..start]`
    /// deduplicated among itself (when `start` is 0, the whole list is),
    /// then each later entry not seen before, in order.
    fn reference(v: &[usize], start: usize) -> Vec<usize> {
        let mut out: Vec<usize> = Vec::new();
        for (i, &x) in v.iter().enumerate() {
            if i < start.max(1) || !out.contains(&x) {
                out.push(x);
            }
        }
        out
    }

    /// Lists shorter and longer than the filter's bound, with few distinct
    /// keys (many duplicates) and with many (the filter's bits collide
    /// without duplicates), with keys spaced like var addresses.
    #[test]
    fn both_dedups_match_a_plain_scan() {
        let mut rng = SplitMix64::new(7);
        for round in 0..4000 {
            let len = rng.range(1, 3 * DEDUP_FILTER_MIN as u32 + 40) as usize;
            let distinct = rng.range(1, 2 * len as u32 + 2);
            let v: Vec<usize> = (0..len)
                .map(|_| 0x7f00_0000 + 192 * rng.range(0, distinct) as usize)
                .collect();
            // Writes are deduplicated from 0, reads from the end of the
            // (deduplicated) writes.
            let start = if round % 2 == 0 {
                0
            } else {
                rng.range(0, len as u32) as usize
            };
            let mut head: Vec<usize> = v[..start].to_vec();
            if start > 0 {
                head = reference(&head, 0);
            }
            let input: Vec<usize> = head.iter().chain(&v[start..]).copied().collect();
            let start = head.len();
            let want = reference(&input, start);
            type Dedup = fn(&mut SmallVec<[usize; 4]>, usize);
            let dedups: [(&str, Dedup); 2] = [
                ("dedup_small", |v, s| dedup_small(v, s, |&k| k)),
                ("dedup_filtered", |v, s| dedup_filtered(v, s, |&k| k)),
            ];
            for (name, dedup) in dedups {
                let mut got: SmallVec<[usize; 4]> = input.iter().copied().collect();
                dedup(&mut got, start);
                assert_eq!(
                    got.as_slice(),
                    want.as_slice(),
                    "{name}, round {round}, start {start}, input {input:?}"
                );
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod fill_tests {
    use super::fill_vars;
    use crate::engine::op::{OpBlock, VarList, INLINE_VARS};
    use crate::Engine;

    /// The flag a grant reads on the first line must say where the list
    /// is, for a fresh block and for a recycled one whose list went to
    /// the heap for an earlier op (the capacity stays there), whatever
    /// the duplicates the push removes.
    #[test]
    fn the_heap_flag_follows_where_the_var_list_lives() {
        let engine = Engine::builder().cpu_workers(1).build().unwrap();
        let vars: Vec<_> = (0..2 * INLINE_VARS).map(|_| engine.new_var()).collect();
        let mut block = OpBlock::empty();
        assert!(!block.vars_on_heap);
        // Few vars, some named twice: inline.
        let few = [&vars[0], &vars[1], &vars[0]];
        fill_vars(&mut block, &VarList::from(&few[..]), &VarList::EMPTY);
        assert_eq!(block.vars.len(), 2);
        assert!(!block.vars_on_heap && !block.vars.spilled());
        block.reset();
        // More than fit inline.
        fill_vars(
            &mut block,
            &VarList::from(&vars[1..]),
            &VarList::from(&vars[..1]),
        );
        assert_eq!(block.vars.len(), vars.len());
        assert!(block.vars_on_heap && block.vars.spilled());
        block.reset();
        // Few again in the recycled block: still on the heap.
        fill_vars(&mut block, &VarList::EMPTY, &VarList::from(&vars[..1]));
        assert_eq!(block.vars.len(), 1);
        assert_eq!(block.vars_on_heap, block.vars.spilled());
        assert!(block.vars_on_heap);
        block.reset();
    }
}
