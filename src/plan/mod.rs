//! Memory planners over tensor usage records.
//!
//! Given tensors with sizes and usage intervals `[first, last]` (TFLite's
//! usage records), choose where each lives so that total memory is small.
//! Two kinds of result:
//! - *shared objects* ([`ObjectsAssignment`]): each tensor gets an object;
//!   tensors whose intervals overlap never share one; the cost is the sum of
//!   object sizes;
//! - *offsets* in one arena ([`OffsetsAssignment`]): tensors alive together
//!   occupy disjoint byte ranges; the cost is the arena size.
//!
//! Every strategy is a sibling file behind [`Strategy`]; [`plan`] runs one.
//! [`lower_bound`] is what no plan can beat and [`validate_objects`] /
//! [`validate_offsets`] check any result. An optional [`Conflicts`] set (from
//! TFLite's reallocation graph, for concurrent execution) names further
//! pairs that must be kept apart.
//!
//! # Examples
//!
//! ```
//! use depengine::plan::{lower_bound, plan, validate_offsets, PlanOptions, Strategy, UsageRecord};
//! let records = vec![
//!     UsageRecord::new(0, 32, 0, 1),
//!     UsageRecord::new(1, 16, 1, 2),
//!     UsageRecord::new(2, 32, 2, 3),
//! ];
//! let result = plan(&records, Strategy::OffsetsGreedyBySize, &PlanOptions::default());
//! let offsets = result.plan.as_offsets().unwrap();
//! validate_offsets(&records, None, offsets, 1).unwrap();
//! assert_eq!(offsets.total_size, lower_bound(&records));
//! ```

use std::time::Duration;

mod adjacency;
mod best;
mod coalesce;
mod conflicts;
mod equality;
mod exact;
mod greedy_by_breadth;
mod greedy_by_size;
mod greedy_in_order;
mod improve;
mod lower_bound;
mod min_cost_flow;
pub mod multidim;
mod naive;
mod object_pool;
mod offsets;
mod perturb;
mod records;
mod ruin;
mod search;
mod skyline;
mod split;
mod squeeze;
mod svg;
pub mod synthetic;
mod validate;

pub use best::{best_objects, best_objects_until, best_offsets, MIN_COST_FLOW_LIMIT};
pub use conflicts::{apart, neighbors, reallocation_graph, ConflictError, Conflicts};
pub use equality::equality;
pub use exact::{exact, ExactOptions, ExactOutcome, Fits, MAX_DEPTH};
pub use greedy_by_breadth::{greedy_by_breadth, offsets_greedy_by_breadth};
pub use greedy_by_size::{
    greedy_by_size, greedy_by_size_dist, greedy_by_size_dist_until, offsets_greedy_by_size,
};
pub use greedy_in_order::{greedy_in_order, offsets_greedy_in_order};
pub use improve::{improve, ImproveOptions};
pub use lower_bound::{lower_bound, positional_maximums, task_breadths, task_profiles};
pub use min_cost_flow::{min_cost_flow, min_cost_flow_until, REUSE_WINDOW};
pub use naive::naive;
pub use offsets::{place_in_order, Fit};
pub use records::{Records, RecordsError, UsageRecord};
pub use svg::render_svg;
pub use validate::{validate_objects, validate_offsets, ValidationError};

/// Tensors assigned to shared objects (TFLite's `ObjectsAssignment`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObjectsAssignment {
    /// `object_ids[i]` is the object that record `i` lives in.
    pub object_ids: Vec<usize>,
    /// `object_sizes[k]` is the size of object `k` in bytes.
    pub object_sizes: Vec<u64>,
}

impl ObjectsAssignment {
    /// The memory all objects take together.
    pub fn total(&self) -> u64 {
        self.object_sizes.iter().sum()
    }

    /// Lays the objects out one after another in id order (TFLite's
    /// `ObjectsToOffsets`): every tensor gets its object's offset.
    pub fn to_offsets(&self) -> OffsetsAssignment {
        let mut start = Vec::with_capacity(self.object_sizes.len());
        let mut total = 0u64;
        for &s in &self.object_sizes {
            start.push(total);
            total += s;
        }
        OffsetsAssignment {
            offsets: self.object_ids.iter().map(|&o| start[o]).collect(),
            total_size: total,
        }
    }
}

/// Tensors placed at byte offsets in one arena (TFLite's `OffsetsAssignment`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OffsetsAssignment {
    /// `offsets[i]` is where record `i` starts.
    pub offsets: Vec<u64>,
    /// The arena size.
    pub total_size: u64,
}

impl OffsetsAssignment {
    /// Offsets for `records` with the total set to the largest end.
    pub fn from_offsets(records: &[UsageRecord], offsets: Vec<u64>) -> Self {
        let total_size = records
            .iter()
            .zip(&offsets)
            .map(|(r, &o)| o + r.size)
            .max()
            .unwrap_or(0);
        Self {
            offsets,
            total_size,
        }
    }
}

/// Either kind of plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Shared objects.
    Objects(ObjectsAssignment),
    /// Offsets in one arena.
    Offsets(OffsetsAssignment),
}

impl Plan {
    /// Total bytes the plan needs.
    pub fn total(&self) -> u64 {
        match self {
            Plan::Objects(o) => o.total(),
            Plan::Offsets(o) => o.total_size,
        }
    }

    /// The offsets plan, if this is one.
    pub fn as_offsets(&self) -> Option<&OffsetsAssignment> {
        match self {
            Plan::Offsets(o) => Some(o),
            Plan::Objects(_) => None,
        }
    }

    /// The plan as offsets (objects laid out one after another).
    pub fn to_offsets(&self) -> OffsetsAssignment {
        match self {
            Plan::Offsets(o) => o.clone(),
            Plan::Objects(o) => o.to_offsets(),
        }
    }

    /// `"objects"` or `"offsets"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Plan::Objects(_) => "objects",
            Plan::Offsets(_) => "offsets",
        }
    }

    /// Checks the plan with [`validate_objects`] or [`validate_offsets`].
    ///
    /// # Errors
    ///
    /// The first [`ValidationError`] found.
    pub fn validate(
        &self,
        records: &[UsageRecord],
        conflicts: Option<&Conflicts>,
        alignment: u64,
    ) -> Result<(), ValidationError> {
        match self {
            Plan::Objects(o) => validate_objects(records, conflicts, o),
            Plan::Offsets(o) => validate_offsets(records, conflicts, o, alignment),
        }
    }
}

/// Every planning strategy, by the name the command line uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// One object per tensor.
    Naive,
    /// Reuse only objects of exactly the same size.
    Equality,
    /// Tensors in order of first use; best-fitting free object.
    GreedyInOrder,
    /// Ops by breadth, their tensors by size; best-fitting free object.
    GreedyByBreadth,
    /// Tensors by size; smallest object free over the whole interval.
    GreedyBySize,
    /// TFLite's `GREEDY_BY_SIZE` for objects: positional maximums and
    /// distance priority.
    GreedyBySizeDist,
    /// Minimum-cost flow over reuse edges.
    MinCostFlow,
    /// The smallest of the object strategies.
    BestObjects,
    /// Offsets: tensors by size, smallest fitting gap.
    OffsetsGreedyBySize,
    /// Offsets: tensors in order of first use, smallest fitting gap.
    OffsetsGreedyInOrder,
    /// Offsets: ops by breadth, their tensors by size, smallest fitting gap.
    OffsetsGreedyByBreadth,
    /// Offsets: the smallest of the offset strategies.
    OffsetsBest,
    /// Offsets: fixed and skyline placement orders, a bounded canonical
    /// search and local search, over coalesced records first when that
    /// halves them; never worse than greedy by size.
    Improve,
    /// Offsets: exact depth-first search (MiniMalloc style).
    Exact,
}

impl Strategy {
    /// Every strategy, objects first.
    pub const ALL: [Strategy; 14] = [
        Strategy::Naive,
        Strategy::Equality,
        Strategy::GreedyInOrder,
        Strategy::GreedyByBreadth,
        Strategy::GreedyBySize,
        Strategy::GreedyBySizeDist,
        Strategy::MinCostFlow,
        Strategy::BestObjects,
        Strategy::OffsetsGreedyBySize,
        Strategy::OffsetsGreedyInOrder,
        Strategy::OffsetsGreedyByBreadth,
        Strategy::OffsetsBest,
        Strategy::Improve,
        Strategy::Exact,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Naive => "naive",
            Strategy::Equality => "equality",
            Strategy::GreedyInOrder => "greedy_in_order",
            Strategy::GreedyByBreadth => "greedy_by_breadth",
            Strategy::GreedyBySize => "greedy_by_size",
            Strategy::GreedyBySizeDist => "greedy_by_size_dist",
            Strategy::MinCostFlow => "min_cost_flow",
            Strategy::BestObjects => "best_objects",
            Strategy::OffsetsGreedyBySize => "offsets_greedy_by_size",
            Strategy::OffsetsGreedyInOrder => "offsets_greedy_in_order",
            Strategy::OffsetsGreedyByBreadth => "offsets_greedy_by_breadth",
            Strategy::OffsetsBest => "offsets_best",
            Strategy::Improve => "improve",
            Strategy::Exact => "exact",
        }
    }

    /// The strategy with this command-line name.
    pub fn from_name(name: &str) -> Option<Strategy> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// `"objects"` or `"offsets"`.
    pub fn kind(self) -> &'static str {
        match self {
            Strategy::Naive
            | Strategy::Equality
            | Strategy::GreedyInOrder
            | Strategy::GreedyByBreadth
            | Strategy::GreedyBySize
            | Strategy::GreedyBySizeDist
            | Strategy::MinCostFlow
            | Strategy::BestObjects => "objects",
            _ => "offsets",
        }
    }
}

/// Settings shared by every strategy.
#[derive(Debug, Clone, Default)]
pub struct PlanOptions {
    /// Pairs that must be kept apart besides those alive at the same op.
    pub conflicts: Option<Conflicts>,
    /// Offsets are multiples of this (0 or 1: no alignment).
    pub alignment: u64,
    /// Exact mode: the arena size to fit into (None: find the smallest).
    pub capacity: Option<u64>,
    /// Time limit for the searching strategies (improve searches until it,
    /// exact stops at it), for min-cost flow and for greedy by size with
    /// distance priority and the best-of objects that run it (cut short,
    /// they still return a valid assignment); None: no clock
    /// (deterministic iteration and node counts).
    pub time_limit: Option<Duration>,
}

/// What one strategy produced.
#[derive(Debug, Clone)]
pub struct PlanOutcome {
    /// The strategy.
    pub strategy: Strategy,
    /// The plan.
    pub plan: Plan,
    /// Exact mode with a capacity: whether the records fit (None: unknown
    /// within the time limit). None for every other strategy.
    pub fits: Option<Fits>,
}

/// Runs one strategy.
///
/// With conflicts, shared-object strategies that cannot honour them natively
/// have their objects split afterwards so that the result still validates.
///
/// # Panics
///
/// When `options.conflicts` pairs a tensor with an index past `records`
/// (a set made for another trace); build it with
/// [`Conflicts::from_pairs`] over `records.len()` tensors, which refuses
/// such pairs with an error.
pub fn plan(records: &[UsageRecord], strategy: Strategy, options: &PlanOptions) -> PlanOutcome {
    let c = options.conflicts.as_ref();
    let align = options.alignment.max(1);
    let deadline = || options.time_limit.map(|t| std::time::Instant::now() + t);
    let objects = |a: ObjectsAssignment| Plan::Objects(split_conflicting(records, c, a));
    let mut fits = None;
    let plan = match strategy {
        Strategy::Naive => Plan::Objects(naive(records)),
        Strategy::Equality => objects(equality(records)),
        Strategy::GreedyInOrder => objects(greedy_in_order(records, c)),
        Strategy::GreedyByBreadth => objects(greedy_by_breadth(records)),
        Strategy::GreedyBySize => objects(greedy_by_size(records)),
        Strategy::GreedyBySizeDist => objects(greedy_by_size_dist_until(records, deadline())),
        Strategy::MinCostFlow => objects(min_cost_flow_until(records, deadline())),
        Strategy::BestObjects => Plan::Objects(best_objects_until(records, c, deadline())),
        Strategy::OffsetsGreedyBySize => Plan::Offsets(offsets_greedy_by_size(records, c, align)),
        Strategy::OffsetsGreedyInOrder => Plan::Offsets(offsets_greedy_in_order(records, c, align)),
        Strategy::OffsetsGreedyByBreadth => {
            Plan::Offsets(offsets_greedy_by_breadth(records, c, align))
        }
        Strategy::OffsetsBest => Plan::Offsets(best_offsets(records, c, align)),
        Strategy::Improve => {
            let mut o = ImproveOptions {
                alignment: align,
                ..ImproveOptions::default()
            };
            if let Some(t) = options.time_limit {
                // With a clock, the local search runs until the limit (or
                // the lower bound) rather than for a fixed step count.
                o.time_limit = Some(t);
                o.iterations = usize::MAX;
                o.ruin_steps = usize::MAX;
                o.squeeze_moves = usize::MAX;
            }
            Plan::Offsets(improve(records, c, &o))
        }
        Strategy::Exact => {
            let mut o = ExactOptions {
                alignment: align,
                capacity: options.capacity,
                ..ExactOptions::default()
            };
            if let Some(t) = options.time_limit {
                o.time_limit = Some(t);
            }
            let out = exact(records, c, &o);
            if options.capacity.is_some() {
                fits = Some(out.fits);
            }
            Plan::Offsets(out.plan)
        }
    };
    PlanOutcome {
        strategy,
        plan,
        fits,
    }
}

/// Splits any object whose tensors conflict into several, so that a plan
/// made without regard to the conflict set honours it. Without conflicts the
/// assignment is returned unchanged.
pub fn split_conflicting(
    records: &[UsageRecord],
    conflicts: Option<&Conflicts>,
    a: ObjectsAssignment,
) -> ObjectsAssignment {
    let Some(c) = conflicts else { return a };
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); a.object_sizes.len()];
    for (i, &o) in a.object_ids.iter().enumerate() {
        members[o].push(i);
    }
    let mut out = ObjectsAssignment {
        object_ids: vec![0; records.len()],
        object_sizes: Vec::new(),
    };
    for m in members {
        // Greedy colouring of the object's members in order of first use.
        let mut groups: Vec<Vec<usize>> = Vec::new();
        let mut sorted = m;
        sorted.sort_by_key(|&i| records[i].first);
        for i in sorted {
            match groups
                .iter_mut()
                .find(|g| g.iter().all(|&j| !apart(records, Some(c), i, j)))
            {
                Some(g) => g.push(i),
                None => groups.push(vec![i]),
            }
        }
        for g in groups {
            let id = out.object_sizes.len();
            let size = g.iter().map(|&i| records[i].size).max().unwrap_or(0);
            for &i in &g {
                out.object_ids[i] = id;
            }
            out.object_sizes.push(size);
        }
    }
    out
}

/// Record indices sorted by first op, ties in record order: the order the
/// in-order strategies walk.
pub(crate) fn order_by_first(records: &[UsageRecord]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..records.len()).collect();
    order.sort_by_key(|&i| records[i].first);
    order
}

/// Record indices by non-increasing size, ties in record order.
pub(crate) fn order_by_size(records: &[UsageRecord]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..records.len()).collect();
    order.sort_by(|&a, &b| records[b].size.cmp(&records[a].size));
    order
}
