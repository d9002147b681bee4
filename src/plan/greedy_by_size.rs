//! Largest tensors first: TFLite's `GREEDY_BY_SIZE` for offsets, a plain
//! by-size object planner, and TFLite's object planner with positional
//! maximums and distance priority.

use super::conflicts::Conflicts;
use super::lower_bound::positional_maximums;
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
    let mut schedules: Vec<std::collections::BTreeMap<usize, usize>> = Vec::new();
    for i in order_by_size(records) {
        let r = &records[i];
        // Objects are created in non-increasing size, so the last free one
        // is the smallest.
        let free = schedules.iter().rposition(|s| {
            s.range(r.first..).next().is_none_or(|(&f, _)| f > r.last)
                && s.range(..r.first)
                    .next_back()
                    .is_none_or(|(_, &l)| l < r.first)
        });
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
    dist: Vec<usize>,
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

    fn recalc(&mut self) {
        self.best_dist = NONE;
        for (obj, &d) in self.dist.iter().enumerate() {
            if d < self.best_dist {
                self.best_dist = d;
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
pub fn greedy_by_size_dist(records: &[UsageRecord]) -> ObjectsAssignment {
    let n = records.len();
    let pos_max = positional_maximums(records);
    let mut info: Vec<Priority> = records
        .iter()
        .map(|r| {
            let pos = pos_max.iter().take_while(|&&m| m >= r.size).count();
            Priority {
                position: pos.saturating_sub(1),
                size: r.size,
                dist: Vec::new(),
                best_dist: NONE,
                best_object: NONE,
            }
        })
        .collect();
    let mut out = ObjectsAssignment {
        object_ids: vec![NONE; n],
        object_sizes: Vec::new(),
    };
    for _ in 0..n {
        let mut best = NONE;
        for i in 0..n {
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
        let b = &records[best];
        for i in 0..n {
            if out.object_ids[i] != NONE {
                continue;
            }
            if !new_object && info[i].dist[obj] == NONE {
                continue;
            }
            let r = &records[i];
            let dist = if r.last < b.first {
                b.first - r.last
            } else if b.last < r.first {
                r.first - b.last
            } else {
                NONE
            };
            let p = &mut info[i];
            if new_object {
                p.dist.push(dist);
            } else if dist == NONE {
                p.dist[obj] = NONE;
                if p.best_object == obj {
                    p.recalc();
                }
            } else {
                p.dist[obj] = p.dist[obj].min(dist);
            }
            if dist < p.best_dist {
                p.best_dist = dist;
                p.best_object = obj;
            }
        }
    }
    out
}
