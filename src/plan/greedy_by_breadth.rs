//! Ops in non-increasing order of breadth (the bytes alive at them), and at
//! each op its tensors by size (TFLite's `GREEDY_BY_BREADTH`).

use super::conflicts::Conflicts;
use super::lower_bound::{task_breadths, task_profiles};
use super::object_pool::ObjectPool;
use super::offsets::{place_in_order, Fit};
use super::records::UsageRecord;
use super::{ObjectsAssignment, OffsetsAssignment};

/// The order both breadth strategies place tensors in: widest op first (ties
/// by op index), and within an op, largest tensor first.
pub(crate) fn breadth_order(records: &[UsageRecord]) -> Vec<usize> {
    let profiles = task_profiles(records);
    let breadths = task_breadths(records);
    let mut tasks: Vec<usize> = (0..profiles.len()).collect();
    tasks.sort_by(|&a, &b| breadths[b].cmp(&breadths[a]));
    let mut seen = vec![false; records.len()];
    let mut order = Vec::with_capacity(records.len());
    for t in tasks {
        for &i in &profiles[t] {
            if !seen[i] {
                seen[i] = true;
                order.push(i);
            }
        }
    }
    order
}

/// Shared objects: each tensor, in breadth order, goes to the object that is
/// free over its whole interval and closest in size (preferring the smallest
/// object at least as large; failing that the largest smaller one, which
/// grows), or to a new object.
pub fn greedy_by_breadth(records: &[UsageRecord]) -> ObjectsAssignment {
    let mut out = ObjectsAssignment {
        object_ids: vec![0; records.len()],
        object_sizes: Vec::new(),
    };
    let mut pool = ObjectPool::default();
    for i in breadth_order(records) {
        pool.place(records, i, &mut out);
    }
    out
}

/// Offsets: tensors in breadth order, each in the smallest gap that fits.
pub fn offsets_greedy_by_breadth(
    records: &[UsageRecord],
    conflicts: Option<&Conflicts>,
    alignment: u64,
) -> OffsetsAssignment {
    place_in_order(
        records,
        conflicts,
        &breadth_order(records),
        alignment,
        Fit::Best,
    )
}
