//! Tensors in order of first use, each taking the free object that wastes
//! least (TFLite's `GREEDY_IN_ORDER`), for objects and for offsets.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use super::conflicts::Conflicts;
use super::offsets::{place_in_order, Fit};
use super::records::UsageRecord;
use super::{order_by_first, ObjectsAssignment, OffsetsAssignment};

/// Walks tensors in order of first use. Objects whose tensors have all died
/// return to a pool; a tensor takes the pooled object closest to its size
/// (the smallest at least as large, unless the largest smaller one is
/// closer, in which case that object grows), or a new object.
///
/// With conflicts, a pooled object is only taken when none of its tensors
/// conflicts with the new one (TFLite consults its reallocation graph the
/// same way, though only for the object's latest tensor).
pub fn greedy_in_order(
    records: &[UsageRecord],
    conflicts: Option<&Conflicts>,
) -> ObjectsAssignment {
    let mut out = ObjectsAssignment {
        object_ids: vec![0; records.len()],
        object_sizes: Vec::new(),
    };
    let mut members: Vec<Vec<usize>> = Vec::new();
    let mut pool: BTreeSet<(u64, usize)> = BTreeSet::new();
    let mut in_use: BinaryHeap<Reverse<(usize, usize)>> = BinaryHeap::new();
    for i in order_by_first(records) {
        let r = &records[i];
        while let Some(&Reverse((last, obj))) = in_use.peek() {
            if last >= r.first {
                break;
            }
            in_use.pop();
            pool.insert((out.object_sizes[obj], obj));
        }
        let best = match conflicts {
            Some(c) => {
                // Scan in pool order for the smallest size difference among
                // objects free of conflicts with this tensor.
                let mut best: Option<((u64, usize), u64)> = None;
                for &(size, obj) in &pool {
                    let diff = size.abs_diff(r.size);
                    if best.is_some_and(|(_, d)| diff >= d) {
                        continue;
                    }
                    if members[obj].iter().all(|&j| !c.contains(i, j)) {
                        best = Some(((size, obj), diff));
                    }
                }
                best.map(|(k, _)| k)
            }
            None => {
                let above = pool.range((r.size, 0)..).next().copied();
                let below = pool.range(..(r.size, 0)).next_back().copied();
                match (above, below) {
                    (Some(a), Some(b)) if r.size - b.0 < a.0 - r.size => Some(b),
                    (Some(a), _) => Some(a),
                    (None, b) => b,
                }
            }
        };
        let obj = match best {
            Some(key) => {
                pool.remove(&key);
                let obj = key.1;
                out.object_sizes[obj] = out.object_sizes[obj].max(r.size);
                obj
            }
            None => {
                out.object_sizes.push(r.size);
                members.push(Vec::new());
                out.object_sizes.len() - 1
            }
        };
        if conflicts.is_some() {
            members[obj].push(i);
        }
        out.object_ids[i] = obj;
        in_use.push(Reverse((r.last, obj)));
    }
    out
}

/// Offsets: tensors in order of first use, each in the smallest gap that
/// fits among the tensors it may not share memory with (on top if none).
pub fn offsets_greedy_in_order(
    records: &[UsageRecord],
    conflicts: Option<&Conflicts>,
    alignment: u64,
) -> OffsetsAssignment {
    place_in_order(
        records,
        conflicts,
        &order_by_first(records),
        alignment,
        Fit::Best,
    )
}
