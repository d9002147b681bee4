//! What no plan can beat, and the per-op views the TFLite strategies are built on.

use super::records::UsageRecord;

/// The largest sum of sizes of tensors alive at one op: every plan, shared
/// objects or offsets, needs at least this many bytes.
///
/// # Examples
///
/// ```
/// use depengine::plan::{lower_bound, UsageRecord};
/// let r = [UsageRecord::new(0, 16, 0, 1), UsageRecord::new(1, 8, 1, 2), UsageRecord::new(2, 64, 2, 3)];
/// assert_eq!(lower_bound(&r), 72);
/// ```
pub fn lower_bound(records: &[UsageRecord]) -> u64 {
    // Sweep: +size at first, -size after last. Ends sort before starts at the
    // same coordinate because an end event sits at last + 1.
    let mut events: Vec<(usize, i128)> = Vec::with_capacity(records.len() * 2);
    for r in records {
        events.push((r.first, r.size as i128));
        events.push((r.last + 1, -(r.size as i128)));
    }
    events.sort_unstable_by_key(|&(t, d)| (t, d));
    let (mut cur, mut best) = (0i128, 0i128);
    for (_, d) in events {
        cur += d;
        best = best.max(cur);
    }
    best as u64
}

/// For every op, the indices of the records alive at it, in non-increasing
/// size order (ties in record order): TFLite's `TaskProfile`.
pub fn task_profiles(records: &[UsageRecord]) -> Vec<Vec<usize>> {
    let tasks = records.iter().map(|r| r.last + 1).max().unwrap_or(0);
    let mut profiles = vec![Vec::new(); tasks];
    for (i, r) in records.iter().enumerate() {
        for p in &mut profiles[r.first..=r.last] {
            p.push(i);
        }
    }
    for p in &mut profiles {
        p.sort_by(|&a, &b| records[b].size.cmp(&records[a].size));
    }
    profiles
}

/// For each position k, the largest k-th biggest tensor alive at any op: a
/// lower bound on the size of the k-th largest shared object.
pub fn positional_maximums(records: &[UsageRecord]) -> Vec<u64> {
    let mut max: Vec<u64> = Vec::new();
    for profile in task_profiles(records) {
        for (k, &i) in profile.iter().enumerate() {
            let s = records[i].size;
            if k < max.len() {
                max[k] = max[k].max(s);
            } else {
                max.push(s);
            }
        }
    }
    max
}

/// The sum of sizes alive at each op (a task's *breadth*).
pub fn task_breadths(records: &[UsageRecord]) -> Vec<u64> {
    let tasks = records.iter().map(|r| r.last + 1).max().unwrap_or(0);
    let mut diff = vec![0i128; tasks + 1];
    for r in records {
        diff[r.first] += r.size as i128;
        diff[r.last + 1] -= r.size as i128;
    }
    let mut cur = 0i128;
    diff[..tasks]
        .iter()
        .map(|d| {
            cur += d;
            cur as u64
        })
        .collect()
}
