//! Best-of: run the fast strategies and keep the smallest result.

use super::conflicts::Conflicts;
use super::greedy_by_breadth::breadth_order;
use super::offsets::{Fit, Placer};
use super::records::UsageRecord;
use super::{
    greedy_by_breadth, greedy_by_size, greedy_by_size_dist_until, greedy_in_order, min_cost_flow,
    order_by_first, order_by_size, split_conflicting, ObjectsAssignment, OffsetsAssignment,
};

/// Best-of includes min-cost flow only up to this many records.
pub const MIN_COST_FLOW_LIMIT: usize = 1_200;

/// The smallest shared-objects plan among greedy by size with distance
/// priority (TFLite's `GREEDY_BEST` starts there and only switches on a
/// strictly smaller total), greedy by breadth, greedy by size, greedy in
/// order and min-cost flow (up to [`MIN_COST_FLOW_LIMIT`] records).
pub fn best_objects(records: &[UsageRecord], conflicts: Option<&Conflicts>) -> ObjectsAssignment {
    best_objects_until(records, conflicts, None)
}

/// [`best_objects`] with greedy by size with distance priority (quadratic:
/// minutes at 100,000 records) cut short at `deadline` (see
/// [`greedy_by_size_dist_until`](super::greedy_by_size_dist_until)); the
/// other strategies always run to the end.
pub fn best_objects_until(
    records: &[UsageRecord],
    conflicts: Option<&Conflicts>,
    deadline: Option<std::time::Instant>,
) -> ObjectsAssignment {
    let fix = |a| split_conflicting(records, conflicts, a);
    let mut best = fix(greedy_by_size_dist_until(records, deadline));
    let others: [&dyn Fn() -> ObjectsAssignment; 4] = [
        &|| greedy_by_breadth(records),
        &|| greedy_by_size(records),
        &|| greedy_in_order(records, conflicts),
        &|| min_cost_flow(records),
    ];
    // Min-cost flow grows much faster than the others; past the limit
    // best-of leaves it out (it stays available on its own).
    let count = if records.len() <= MIN_COST_FLOW_LIMIT {
        4
    } else {
        3
    };
    for make in &others[..count] {
        let cand = fix(make());
        if cand.total() < best.total() {
            best = cand;
        }
    }
    best
}

/// The smallest offsets plan among greedy by size, greedy in order and
/// greedy by breadth (ties go to the earlier one).
pub fn best_offsets(
    records: &[UsageRecord],
    conflicts: Option<&Conflicts>,
    alignment: u64,
) -> OffsetsAssignment {
    // One placer for the three orders: its neighbour lists are most of a
    // placement's cost on large traces.
    let mut placer = Placer::new(records, conflicts, alignment);
    let mut best = placer.place(&order_by_size(records), Fit::Best);
    for order in [order_by_first(records), breadth_order(records)] {
        let cand = placer.place(&order, Fit::Best);
        if cand.total_size < best.total_size {
            best = cand;
        }
    }
    best
}
