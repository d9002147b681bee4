//! Checks any plan against its records: every tensor placed, no two tensors
//! that may be alive together share bytes, sizes and totals consistent.

use super::adjacency::Adjacency;
use super::conflicts::{apart, Conflicts};
use super::records::UsageRecord;
use super::{ObjectsAssignment, OffsetsAssignment};

/// Why a plan is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    /// The plan has a different number of entries than there are records.
    #[error("plan has {got} entries for {want} records")]
    Length {
        /// Entries in the plan.
        got: usize,
        /// Records.
        want: usize,
    },
    /// A tensor names an object that does not exist.
    #[error("tensor {tensor} (index {index}) uses object {object}, but there are only {objects} objects")]
    NoSuchObject {
        /// Tensor id.
        tensor: u64,
        /// Record index.
        index: usize,
        /// The object id.
        object: usize,
        /// Number of objects.
        objects: usize,
    },
    /// A tensor is larger than the object holding it.
    #[error("tensor {tensor} ({size} bytes) does not fit object {object} ({object_size} bytes)")]
    ObjectTooSmall {
        /// Tensor id.
        tensor: u64,
        /// Tensor size.
        size: u64,
        /// The object id.
        object: usize,
        /// The object's size.
        object_size: u64,
    },
    /// Two tensors that may be alive at once share memory.
    #[error("tensors {a} and {b} may be alive at once but share memory")]
    Clash {
        /// One tensor id.
        a: u64,
        /// The other tensor id.
        b: u64,
    },
    /// An offset breaks the alignment.
    #[error("tensor {tensor} is at offset {offset}, not a multiple of {alignment}")]
    Misaligned {
        /// Tensor id.
        tensor: u64,
        /// Its offset.
        offset: u64,
        /// Required alignment.
        alignment: u64,
    },
    /// The stated total is below what the placement uses.
    #[error("total {total} is below the end {end} of tensor {tensor}")]
    TotalTooSmall {
        /// Stated total.
        total: u64,
        /// End of the tensor that sticks out.
        end: u64,
        /// Tensor id.
        tensor: u64,
    },
}

/// Checks a shared-objects plan: every tensor has an existing object at
/// least its size, and tensors sharing an object are never alive at once
/// (nor in conflict).
///
/// # Errors
///
/// The first [`ValidationError`] found.
pub fn validate_objects(
    records: &[UsageRecord],
    conflicts: Option<&Conflicts>,
    plan: &ObjectsAssignment,
) -> Result<(), ValidationError> {
    if plan.object_ids.len() != records.len() {
        return Err(ValidationError::Length {
            got: plan.object_ids.len(),
            want: records.len(),
        });
    }
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); plan.object_sizes.len()];
    for (i, (&obj, r)) in plan.object_ids.iter().zip(records).enumerate() {
        let Some(&object_size) = plan.object_sizes.get(obj) else {
            return Err(ValidationError::NoSuchObject {
                tensor: r.id,
                index: i,
                object: obj,
                objects: plan.object_sizes.len(),
            });
        };
        if r.size > object_size {
            return Err(ValidationError::ObjectTooSmall {
                tensor: r.id,
                size: r.size,
                object: obj,
                object_size,
            });
        }
        members[obj].push(i);
    }
    for m in &mut members {
        m.sort_by_key(|&i| records[i].first);
        // Sorted by first op, intervals are disjoint iff consecutive ones are.
        for w in m.windows(2) {
            if records[w[0]].last >= records[w[1]].first {
                return Err(clash(records, w[0], w[1]));
            }
        }
        if let Some(c) = conflicts {
            for (k, &a) in m.iter().enumerate() {
                for &b in &m[k + 1..] {
                    if c.contains(a, b) {
                        return Err(clash(records, a, b));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Checks an offsets plan: tensors that may be alive together occupy
/// disjoint byte ranges, offsets are multiples of `alignment` (0 or 1: any),
/// and the total covers every tensor.
///
/// # Errors
///
/// The first [`ValidationError`] found.
pub fn validate_offsets(
    records: &[UsageRecord],
    conflicts: Option<&Conflicts>,
    plan: &OffsetsAssignment,
    alignment: u64,
) -> Result<(), ValidationError> {
    if plan.offsets.len() != records.len() {
        return Err(ValidationError::Length {
            got: plan.offsets.len(),
            want: records.len(),
        });
    }
    for (r, &o) in records.iter().zip(&plan.offsets) {
        if alignment > 1 && o % alignment != 0 {
            return Err(ValidationError::Misaligned {
                tensor: r.id,
                offset: o,
                alignment,
            });
        }
        let end = o.saturating_add(r.size);
        if end > plan.total_size {
            return Err(ValidationError::TotalTooSmall {
                total: plan.total_size,
                end,
                tensor: r.id,
            });
        }
    }
    let adj = Adjacency::new(records, conflicts);
    for a in 0..records.len() {
        for b in adj.of(a).iter().map(|&b| b as usize).filter(|&b| b > a) {
            debug_assert!(apart(records, conflicts, a, b));
            let (oa, ob) = (plan.offsets[a], plan.offsets[b]);
            let (ea, eb) = (oa + records[a].size, ob + records[b].size);
            // Empty tensors occupy no bytes, so they never clash.
            if records[a].size > 0 && records[b].size > 0 && oa < eb && ob < ea {
                return Err(clash(records, a, b));
            }
        }
    }
    Ok(())
}

fn clash(records: &[UsageRecord], a: usize, b: usize) -> ValidationError {
    ValidationError::Clash {
        a: records[a].id,
        b: records[b].id,
    }
}
