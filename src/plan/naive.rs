//! One object per tensor: the baseline every other plan is measured against.

use super::records::UsageRecord;
use super::ObjectsAssignment;

/// Gives every tensor its own object of its own size.
pub fn naive(records: &[UsageRecord]) -> ObjectsAssignment {
    ObjectsAssignment {
        object_ids: (0..records.len()).collect(),
        object_sizes: records.iter().map(|r| r.size).collect(),
    }
}
