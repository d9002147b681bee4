//! Reuse only objects of exactly the tensor's size (TFLite's `EQUALITY`).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::records::UsageRecord;
use super::{order_by_first, ObjectsAssignment};

/// Walks tensors in order of first use; a tensor takes the most recently
/// freed object of exactly its size, or a new one.
pub fn equality(records: &[UsageRecord]) -> ObjectsAssignment {
    let mut out = ObjectsAssignment {
        object_ids: vec![0; records.len()],
        object_sizes: Vec::new(),
    };
    // Free objects by size; the last one freed is reused first, as in TFLite.
    let mut pool: HashMap<u64, Vec<usize>> = HashMap::new();
    // Objects in use, earliest last op (then lowest id) on top.
    let mut in_use: BinaryHeap<Reverse<(usize, usize)>> = BinaryHeap::new();
    for i in order_by_first(records) {
        let r = &records[i];
        while let Some(&Reverse((last, obj))) = in_use.peek() {
            if last >= r.first {
                break;
            }
            in_use.pop();
            pool.entry(out.object_sizes[obj]).or_default().push(obj);
        }
        let obj = match pool.get_mut(&r.size).and_then(Vec::pop) {
            Some(obj) => obj,
            None => {
                out.object_sizes.push(r.size);
                out.object_sizes.len() - 1
            }
        };
        out.object_ids[i] = obj;
        in_use.push(Reverse((r.last, obj)));
    }
    out
}
