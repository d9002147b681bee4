//! Largest tensors first: TFLite's `GREEDY_BY_SIZE` for offsets, a plain
//! by-size object planner, and TFLite's object planner with positional
//! maximums and distance priority.

use std::collections::BTreeMap;

use super::conflicts::Conflicts;
use super::lower_bound::positional_maximums;
use super::object_pool::{free_over, ObjectPool};
use super::offsets::{place_in_order, Fit};
use super::records::UsageRecord;
use super::{order_by_size, ObjectsAssignment, OffsetsAssignment};

/// Offsets: tensors by non-increasing size, each in the smallest gap among
/// the placed tensors it may not share memory with, on top of them when no
/// gap fits. Offsets are multiples of `alignment`.
pub fn offsets_greedy_by_size(
    records: &[UsageRecord],
    conflicts: Option<&Conflicts>,
    alignment: u64,
) -> OffsetsAssignment {
    place_in_order(
        records,
        conflicts,
        &order_by_size(records),
        alignment,
        Fit::Best,
    )
}

/// Shared objects: tensors by non-increasing size, each into the smallest
/// existing object free over its whole interval (every existing object is at
/// least as large), or a new object.
pub fn greedy_by_size(records: &[UsageRecord]) -> ObjectsAssignment {
    let mut out = ObjectsAssignment {
        object_ids: vec![0; records.len()],
        object_sizes: Vec::new(),
    };
    let mut schedules: Vec<BTreeMap<usize, usize>> = Vec::new();
    for i in order_by_size(records) {
        let r = &records[i];
        // Objects are created in non-increasing size, so the last free one
        // is the smallest.
        let free = schedules.iter().rposition(|s| free_over(s, r));
        let obj = free.unwrap_or_else(|| {
            schedules.push(Default::default());
            out.object_sizes.push(r.size);
            schedules.len() - 1
        });
        schedules[obj].insert(r.first, r.last);
        out.object_ids[i] = obj;
    }
    out
}

const NONE: usize = usize::MAX;

struct Priority {
    position: usize,
    size: u64,
    best_dist: usize,
    best_object: usize,
}

impl Priority {
    fn beats(&self, other: &Priority) -> bool {
        self.position < other.position
            || (self.position == other.position
                && (self.best_dist < other.best_dist
                    || (self.best_dist == other.best_dist && self.size > other.size)))
    }

    /// The nearest object again, from tensor `i`'s distances to each.
    fn recalc(&mut self, dist: &[Vec<usize>], i: usize) {
        self.best_dist = NONE;
        for (obj, column) in dist.iter().enumerate() {
            if column[i] < self.best_dist {
                self.best_dist = column[i];
                self.best_object = obj;
            }
        }
    }
}

/// TFLite's `GREEDY_BY_SIZE` for shared objects. Each tensor's *position* is
/// the last positional maximum at least its size. Repeatedly take the
/// unassigned tensor with the smallest position, then the smallest positive
/// distance (in ops) to a tensor already in some object, then the largest
/// size; put it in that nearest object (which may grow) or a new one.
///
/// Each step looks at every tensor, so the whole is quadratic: about 2.3 s
/// at 20,000 records on the 2-core sandbox, minutes at 100,000. See
/// [`greedy_by_size_dist_until`] for a bounded run.
pub fn greedy_by_size_dist(records: &[UsageRecord]) -> ObjectsAssignment {
    greedy_by_size_dist_until(records, None)
}

/// [`greedy_by_size_dist`] that stops its steps at `deadline`: the tensors
/// not yet assigned then go, largest first, each into the object free over
/// its interval that it would grow least (the smallest such on a tie), or
/// a new one. The result is a valid assignment either way, and the same as
/// [`greedy_by_size_dist`]'s when the steps finish in time.
pub fn greedy_by_size_dist_until(
    records: &[UsageRecord],
    deadline: Option<std::time::Instant>,
) -> ObjectsAssignment {
    dist_steps(records, |step| {
        step % 64 == 0 && deadline.is_some_and(|d| std::time::Instant::now() >= d)
    })
}

/// [`greedy_by_size_dist`]'s steps until `stop(step)` says so, then the
/// finish of [`greedy_by_size_dist_until`].
fn dist_steps(records: &[UsageRecord], mut stop: impl FnMut(usize) -> bool) -> ObjectsAssignment {
    let n = records.len();
    let pos_max = positional_maximums(records);
    let mut info: Vec<Priority> = records
        .iter()
        .map(|r| {
            let pos = pos_max.iter().take_while(|&&m| m >= r.size).count();
            Priority {
                position: pos.saturating_sub(1),
                size: r.size,
                best_dist: NONE,
                best_object: NONE,
            }
        })
        .collect();
    let mut out = ObjectsAssignment {
        object_ids: vec![NONE; n],
        object_sizes: Vec::new(),
    };
    // `dist[obj][i]`: the smallest gap in ops between tensor `i` and the
    // tensors of object `obj`, NONE once one of them overlaps it. One
    // column per object, so that a step's update reads one array in order
    // (a list per tensor cost a cache miss per tensor and step).
    let mut dist: Vec<Vec<usize>> = Vec::new();
    // The unassigned tensors in index order (ties go to the lowest index),
    // compacted once half of the listed ones are assigned.
    let mut left: Vec<usize> = (0..n).collect();
    let mut dead = 0;
    for step in 0..n {
        if stop(step) {
            finish(records, &mut out);
            return out;
        }
        if 2 * dead > left.len() {
            left.retain(|&i| out.object_ids[i] == NONE);
            dead = 0;
        }
        let mut best = NONE;
        for &i in &left {
            if out.object_ids[i] == NONE && (best == NONE || info[i].beats(&info[best])) {
                best = i;
            }
        }
        let new_object = info[best].best_dist == NONE;
        let obj = if new_object {
            out.object_sizes.push(records[best].size);
            out.object_sizes.len() - 1
        } else {
            let o = info[best].best_object;
            out.object_sizes[o] = out.object_sizes[o].max(records[best].size);
            o
        };
        out.object_ids[best] = obj;
        dead += 1;
        let b = &records[best];
        if new_object {
            dist.push(vec![NONE; n]);
        }
        for &i in &left {
            if out.object_ids[i] != NONE {
                continue;
            }
            if !new_object && dist[obj][i] == NONE {
                continue;
            }
            let r = &records[i];
            let gap = if r.last < b.first {
                b.first - r.last
            } else if b.last < r.first {
                r.first - b.last
            } else {
                NONE
            };
            let p = &mut info[i];
            if new_object {
                dist[obj][i] = gap;
            } else if gap == NONE {
                dist[obj][i] = NONE;
                if p.best_object == obj {
                    p.recalc(&dist, i);
                }
            } else {
                dist[obj][i] = dist[obj][i].min(gap);
            }
            if gap < p.best_dist {
                p.best_dist = gap;
                p.best_object = obj;
            }
        }
    }
    out
}

/// Shared objects for tensors with no plan yet, as
/// [`greedy_by_size_dist_until`] finishes them: largest first, each into
/// the free object it grows least, else a new one. The fallback of planners
/// cut short before they have anything to finish from.
pub(crate) fn objects_least_growth(records: &[UsageRecord]) -> ObjectsAssignment {
    let mut out = ObjectsAssignment {
        object_ids: vec![UNASSIGNED; records.len()],
        object_sizes: Vec::new(),
    };
    finish(records, &mut out);
    out
}

/// The object id of a tensor no object holds yet, for [`finish`].
pub(crate) const UNASSIGNED: usize = NONE;

/// Assigns the tensors `out` leaves [`UNASSIGNED`], largest first, each into
/// the free object closest in size (the `object_pool` module), starting from
/// the objects of the tensors already assigned.
pub(crate) fn finish(records: &[UsageRecord], out: &mut ObjectsAssignment) {
    let mut pool = ObjectPool::from_assignment(records, out, UNASSIGNED);
    let left: Vec<usize> = order_by_size(records)
        .into_iter()
        .filter(|&i| out.object_ids[i] == UNASSIGNED)
        .collect();
    for i in left {
        pool.place(records, i, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::synthetic::random_records;
    use crate::plan::{lower_bound, validate_objects};
    use crate::util::rng::SplitMix64;

    /// Cut after any number of steps, the finish completes the objects the
    /// steps began into a valid assignment; never cut, it is the plain
    /// strategy's.
    #[test]
    fn a_cut_at_any_step_still_validates() {
        let mut rng = SplitMix64::new(0xD157);
        for case in 0..60 {
            let n = 1 + rng.below(40) as usize;
            let records = random_records(&mut rng, n, 20, 6, |r| r.below(5) * 16);
            let full = greedy_by_size_dist(&records);
            for cut in 0..=n {
                let out = dist_steps(&records, |step| step == cut);
                validate_objects(&records, None, &out)
                    .unwrap_or_else(|e| panic!("case {case}, cut at {cut}: {e}"));
                assert!(out.total() >= lower_bound(&records));
                if cut == n {
                    assert_eq!(out.object_ids, full.object_ids, "case {case}");
                    assert_eq!(out.object_sizes, full.object_sizes, "case {case}");
                }
            }
        }
    }
}
