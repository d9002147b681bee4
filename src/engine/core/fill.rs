//! Copying a pushed op's vars into its block: writes first, then the reads
//! that are not also written, each part without duplicates (rule 2 of the
//! design notes), by the cheapest method for the list's length.

use crate::engine::op::{OpBlock, VarList, VarVec, INLINE_VARS};
use crate::engine::var::VarSlot;
use crate::engine::Var;
use crate::sync::Arc;

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

/// The vars of an op of at most [`INLINE_VARS`] vars, deduplicated as
/// they were picked: writes first, then the reads not written (rule 2).
///
/// Why: most ops name one to three vars, and for them the push's passes
/// over the two lists (the checks, then the copy into the block, then the
/// deduplication of what was copied) cost more than the work itself. Picked
/// once into a fixed array, the vars are checked and copied from there,
/// with no small-vector checks per var (the empty `wavefront`, whose ops
/// name three vars: about 70 instructions a push fewer, by callgrind).
pub(super) struct Picked<'a> {
    vars: [Option<&'a Var>; INLINE_VARS],
    len: usize,
    nwrites: usize,
    /// Whether [`Picked::pick`] took the op's vars (it names few enough).
    taken: bool,
}

impl<'a> Picked<'a> {
    /// Nothing picked yet.
    ///
    /// Why in two steps (`new`, then `pick` in place) instead of one
    /// constructor returning the array: a returned value was copied out
    /// with wide loads right after its fields were written one by one,
    /// and the loads waited for the stores (a tenth of the push's time in
    /// a profile of the empty `wavefront`).
    #[inline(always)]
    pub(super) fn new() -> Self {
        Picked {
            vars: [None; INLINE_VARS],
            len: 0,
            nwrites: 0,
            taken: false,
        }
    }

    /// Picks the op's vars, unless it names more than [`INLINE_VARS`]
    /// (duplicates counted): then `None`, and nothing is picked.
    /// `usable` is called on each var as it is picked, duplicates
    /// included (the push's checks, made in the same pass); the answer
    /// is whether it held for all.
    #[inline(always)]
    pub(super) fn pick(
        &mut self,
        reads: &VarList<'a>,
        writes: &VarList<'a>,
        mut usable: impl FnMut(&'a Var) -> bool,
    ) -> Option<bool> {
        if reads.len() + writes.len() > INLINE_VARS {
            return None;
        }
        self.taken = true;
        let ok = writes.all(|v| self.add(v) && usable(v));
        self.nwrites = self.len;
        Some(ok && reads.all(|v| self.add(v) && usable(v)))
    }

    /// Whether [`Picked::pick`] took the op's vars.
    #[inline(always)]
    pub(super) fn taken(&self) -> bool {
        self.taken
    }

    /// Adds `v` unless already picked; always true (for `VarList::all`).
    #[inline(always)]
    fn add(&mut self, v: &'a Var) -> bool {
        let seen = self.vars[..self.len]
            .iter()
            .any(|q| q.is_some_and(|q| Arc::ptr_eq(&q.inner, &v.inner)));
        if !seen {
            self.vars[self.len] = Some(v);
            self.len += 1;
        }
        true
    }

    /// Copies the picked vars into a reset block, as [`fill_vars`] would.
    #[inline(always)]
    pub(super) fn fill(&self, block: &mut OpBlock) {
        let vars = &mut block.vars;
        debug_assert!(vars.is_empty());
        if vars.spilled() {
            // A recycled block whose list went to the heap for an earlier
            // op keeps its capacity there: the ordinary push is as cheap.
            for v in self.vars.iter().take(self.len).flatten() {
                vars.push(VarSlot::new(&v.inner));
            }
        } else {
            let base = vars.as_mut_ptr();
            for (i, v) in self.vars.iter().take(self.len).flatten().enumerate() {
                // SAFETY: the list is inline and empty (a reset block) with
                // room for INLINE_VARS slots, and i < self.len <=
                // INLINE_VARS; the length is set only after the slots
                // below it are written, so nothing reads one unwritten.
                unsafe { base.add(i).write(VarSlot::new(&v.inner)) };
            }
            // SAFETY: slots 0..self.len were written just above.
            unsafe { vars.set_len(self.len) };
        }
        block.nwrites = self.nwrites as u32;
        block.vars_on_heap = block.vars.spilled();
    }
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
    use super::{fill_vars, Picked};
    use crate::engine::op::{OpBlock, VarList, INLINE_VARS};
    use crate::Engine;

    /// The one-pass path for ops of few vars leaves the block as the
    /// general one does (the same slots in the same order, the same count
    /// of writes), for every split of up to three vars drawn with
    /// repeats from three, into a fresh block and into a recycled one
    /// whose list is on the heap; and it declines ops of more vars.
    #[test]
    fn picking_few_vars_fills_the_block_as_the_general_path_does() {
        let engine = Engine::builder().cpu_workers(1).build().unwrap();
        let pool: Vec<_> = (0..3).map(|_| engine.new_var()).collect();
        let big: Vec<_> = (0..2 * INLINE_VARS).map(|_| engine.new_var()).collect();
        let addrs = |b: &OpBlock| b.vars.iter().map(|v| v.var.addr()).collect::<Vec<_>>();
        let mut cases = 0;
        for n in 0..=INLINE_VARS {
            for code in 0..3usize.pow(n as u32) {
                let names: Vec<_> = (0..n)
                    .map(|i| &pool[code / 3usize.pow(i as u32) % 3])
                    .collect();
                for nw in 0..=n {
                    let (writes, reads) = names.split_at(nw);
                    let (reads, writes) = (VarList::from(reads), VarList::from(writes));
                    for spilled in [false, true] {
                        let mut want = OpBlock::empty();
                        let mut got = OpBlock::empty();
                        if spilled {
                            for b in [&mut want, &mut got] {
                                fill_vars(b, &VarList::from(&big[..]), &VarList::EMPTY);
                                b.reset();
                            }
                        }
                        fill_vars(&mut want, &reads, &writes);
                        let mut picked = Picked::new();
                        assert_eq!(picked.pick(&reads, &writes, |_| true), Some(true));
                        picked.fill(&mut got);
                        assert_eq!(addrs(&got), addrs(&want), "n {n} code {code} writes {nw}");
                        assert_eq!(got.nwrites, want.nwrites);
                        assert_eq!(got.vars_on_heap, want.vars_on_heap);
                        assert_eq!(got.vars_on_heap, spilled);
                        want.reset();
                        got.reset();
                        cases += 1;
                    }
                }
            }
        }
        assert!(cases > 100);
        let mut picked = Picked::new();
        let four: Vec<_> = big.iter().take(INLINE_VARS + 1).collect();
        assert_eq!(
            picked.pick(&VarList::from(&four[..]), &VarList::EMPTY, |_| true),
            None
        );
        assert!(!picked.taken());
        // A var that fails the check stops the pick with a no.
        let mut picked = Picked::new();
        let seen = std::cell::Cell::new(0);
        let ok = picked.pick(&VarList::from(&pool[..2]), &VarList::EMPTY, |_| {
            seen.set(seen.get() + 1);
            false
        });
        assert_eq!((ok, seen.get()), (Some(false), 1));
    }

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
