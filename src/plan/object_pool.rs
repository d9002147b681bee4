//! Shared objects filled one tensor at a time, each tensor into the free
//! object closest in size: the smallest at least as large, failing that the
//! largest smaller one (which grows to it), the lowest object id among equal
//! sizes, else a new object. Greedy by breadth places every tensor so, and
//! the planners cut short by a time limit finish so.
//!
//! The objects are kept sorted by size, so that the search starts at the
//! smallest one the tensor fits and stops at the first free one: a scan
//! over every object per tensor took seconds at 100,000 records.

use std::collections::BTreeMap;

use super::records::UsageRecord;
use super::ObjectsAssignment;

/// Whether an object's `schedule` (first op to last op of its tensors) is
/// free over `r`'s interval.
pub(crate) fn free_over(schedule: &BTreeMap<usize, usize>, r: &UsageRecord) -> bool {
    schedule
        .range(r.first..)
        .next()
        .is_none_or(|(&f, _)| f > r.last)
        && schedule
            .range(..r.first)
            .next_back()
            .is_none_or(|(_, &l)| l < r.first)
}

/// The objects of an assignment being built, with their tensors' intervals.
#[derive(Default)]
pub(crate) struct ObjectPool {
    /// Per object, its tensors' intervals keyed by first op.
    schedules: Vec<BTreeMap<usize, usize>>,
    /// (size, object id), ascending.
    by_size: Vec<(u64, usize)>,
}

impl ObjectPool {
    /// The objects of `out`, holding the tensors whose id is not
    /// `unassigned`, at the sizes `out` gives them.
    pub(crate) fn from_assignment(
        records: &[UsageRecord],
        out: &ObjectsAssignment,
        unassigned: usize,
    ) -> Self {
        let mut schedules = vec![BTreeMap::new(); out.object_sizes.len()];
        for (i, &o) in out.object_ids.iter().enumerate() {
            if o != unassigned {
                schedules[o].insert(records[i].first, records[i].last);
            }
        }
        let mut by_size: Vec<(u64, usize)> = out
            .object_sizes
            .iter()
            .enumerate()
            .map(|(o, &size)| (size, o))
            .collect();
        by_size.sort_unstable();
        Self { schedules, by_size }
    }

    /// Puts tensor `i` into the free object closest in size (see the module
    /// docs), or a new one, and says so in `out`.
    pub(crate) fn place(&mut self, records: &[UsageRecord], i: usize, out: &mut ObjectsAssignment) {
        let r = &records[i];
        let free = |k: usize, pool: &Self| free_over(&pool.schedules[pool.by_size[k].1], r);
        let at = self.by_size.partition_point(|&(size, _)| size < r.size);
        let obj = match (at..self.by_size.len()).find(|&k| free(k, self)) {
            Some(k) => self.by_size[k].1,
            None => {
                // The largest free object below the size, the lowest id
                // among equal sizes; else a new one.
                let mut pick: Option<usize> = None;
                for k in (0..at).rev() {
                    if pick.is_some_and(|p| self.by_size[k].0 < self.by_size[p].0) {
                        break;
                    }
                    if free(k, self) {
                        pick = Some(k);
                    }
                }
                let obj = match pick {
                    Some(k) => self.by_size.remove(k).1,
                    None => {
                        self.schedules.push(BTreeMap::new());
                        out.object_sizes.push(0);
                        self.schedules.len() - 1
                    }
                };
                out.object_sizes[obj] = r.size;
                let pos = self.by_size.partition_point(|&e| e < (r.size, obj));
                self.by_size.insert(pos, (r.size, obj));
                obj
            }
        };
        self.schedules[obj].insert(r.first, r.last);
        out.object_ids[i] = obj;
    }
}
