//! Synthetic hard instances with a known optimum, for tests, examples and
//! benches.

use crate::util::rng::SplitMix64;

use super::UsageRecord;

/// A random guillotine cut of the `capacity` × `ops` rectangle into `n`
/// tensors (sizes multiples of 1 KiB, `ops = max(n, 64)`), listed in a
/// random order. The tensors tile the rectangle exactly, so the optimal
/// arena is `capacity` bytes, which is also the lower bound — yet greedy
/// planners typically land well above it.
///
/// # Examples
///
/// ```
/// use depengine::plan::{lower_bound, synthetic::perfect_packing};
/// let records = perfect_packing(100, 7, 1 << 20);
/// assert_eq!(records.len(), 100);
/// assert_eq!(lower_bound(&records), 1 << 20);
/// ```
pub fn perfect_packing(n: usize, seed: u64, capacity: u64) -> Vec<UsageRecord> {
    let mut rng = SplitMix64::new(seed);
    let ops = n.max(64) as u64;
    // (bottom, top, first op, one past the last op)
    let mut rects: Vec<(u64, u64, u64, u64)> = vec![(0, capacity, 0, ops)];
    let mut stuck = 0;
    while rects.len() < n && stuck < 1000 * n.max(1) {
        let k = rng.below(rects.len() as u64) as usize;
        let (a, b, t0, t1) = rects[k];
        if rng.below(2) == 0 && b - a >= 2048 {
            let m = a + 1024 * rng.range_inclusive(1, (b - a) / 1024 - 1);
            rects[k] = (a, m, t0, t1);
            rects.push((m, b, t0, t1));
        } else if t1 - t0 >= 2 {
            let m = rng.range_inclusive(t0 + 1, t1 - 1);
            rects[k] = (a, b, t0, m);
            rects.push((a, b, m, t1));
        } else {
            stuck += 1;
        }
    }
    for i in (1..rects.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        rects.swap(i, j);
    }
    rects
        .iter()
        .enumerate()
        .map(|(i, &(a, b, t0, t1))| UsageRecord::new(i as u64, b - a, t0 as usize, t1 as usize - 1))
        .collect()
}

/// `n` tensors with first ops below `ops`, each alive for 1 to
/// `max_life` ops, sized by `size`: the random traces of the unit tests.
#[cfg(test)]
pub(crate) fn random_records(
    rng: &mut SplitMix64,
    n: usize,
    ops: u64,
    max_life: u64,
    mut size: impl FnMut(&mut SplitMix64) -> u64,
) -> Vec<UsageRecord> {
    (0..n)
        .map(|i| {
            let first = rng.below(ops) as usize;
            let last = first + rng.below(max_life) as usize;
            UsageRecord::new(i as u64, size(rng), first, last)
        })
        .collect()
}
