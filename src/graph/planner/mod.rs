//! The NNVM graph memory planner, with TVM's device planning and NNVM's
//! ColorNodeGroup.
//!
//! [`plan`] follows NNVM's `PlanMemory` step for step:
//!
//! 1. devices ([`plan_devices`]): annotations and copy ops decide where each
//!    op runs and each tensor lives; storage is never shared across devices;
//! 2. `assign` ops are classified ([`AssignKind`]): a plain assign's output
//!    lives in its target's storage; a simplified one's value does too, and
//!    the op does nothing;
//! 3. with `colors > 1`, [`color_node_group`] splits the ops into groups and
//!    a freed block is reused only by an op of the group that freed it;
//! 4. `AllocMemory` (reference counts, in-place reuse, `request`/`release`
//!    on a size-ordered free list searched within `match_range`) runs once
//!    per `match_range` value — 1, 2, 4, 8, 16 with [`MatchRange::Auto`] —
//!    and the run with the smallest total is kept;
//! 5. graph inputs and params get their own storage afterwards (NNVM's
//!    `DecorateMemoryPlan`), after the planned ones.
//!
//! The result, a [`MemoryPlan`], gives a storage id per tensor and a size
//! per storage id; [`MemoryPlan::validate`] checks it against the graph.
//!
//! # Examples
//!
//! ```
//! use depengine::graph::planner::{plan, PlanOptions};
//! use depengine::graph::Graph;
//! let g = Graph::from_json_str(r#"{"model":"m","tensors":[
//!     {"id":0,"size":64,"kind":"input"},{"id":1,"size":64,"kind":"intermediate"},
//!     {"id":2,"size":64,"kind":"intermediate"},{"id":3,"size":64,"kind":"output"}],
//!   "ops":[{"name":"a","type":"Conv","inputs":[0],"outputs":[1]},
//!          {"name":"b","type":"ReLU","inputs":[1],"outputs":[2],"inplace":[[0,0]]},
//!          {"name":"c","type":"Conv","inputs":[2],"outputs":[3]}]}"#, "m".as_ref())?;
//! let p = plan(&g, &PlanOptions::default())?;
//! p.validate(&g)?;
//! // b works in place on a's output; c's output cannot reuse it (c reads it).
//! assert_eq!(p.storage_of[1], p.storage_of[2]);
//! assert_eq!(p.planned_bytes(), 128);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod alloc_memory;
mod allocator;
mod assign;
mod check;
mod color;
mod device;

use crate::storage::DeviceId;

use super::ir::{Graph, OpId, TensorId};

pub use assign::AssignKind;
pub use color::{color_node_group, Coloring};
pub use device::{plan_devices, DevicePlan};

/// Index of a storage in [`MemoryPlan::storages`].
pub type StorageId = usize;

/// Which `match_range` values the planner tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatchRange {
    /// One value; 0 turns reuse of freed blocks off.
    Fixed(u64),
    /// 1, 2, 4, 8 and 16, keeping the smallest total (NNVM's
    /// `NNVM_AUTO_SEARCH_MATCH_RANGE`).
    Auto,
}

impl std::str::FromStr for MatchRange {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.eq_ignore_ascii_case("auto") {
            return Ok(MatchRange::Auto);
        }
        s.parse::<u64>()
            .map(MatchRange::Fixed)
            .map_err(|_| format!("match range `{s}`: expected a whole number or `auto`"))
    }
}

/// How to plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanOptions {
    /// The `match_range` values to try.
    pub match_range: MatchRange,
    /// Whether outputs may take their input's storage in place.
    pub inplace: bool,
    /// Number of ColorNodeGroup groups (1: no colouring; 0 counts as 1).
    pub colors: u32,
    /// The device of ops that nothing puts elsewhere.
    pub default_device: DeviceId,
}

impl Default for PlanOptions {
    fn default() -> Self {
        Self {
            match_range: MatchRange::Auto,
            inplace: true,
            colors: 1,
            default_device: DeviceId::cpu(0),
        }
    }
}

/// How a tensor got its storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Placement {
    /// A graph input or param: its own external storage.
    External,
    /// A block made for it.
    Fresh,
    /// A block another tensor released.
    Reused,
    /// The storage of `input`, taken in place by its producer.
    InPlace {
        /// The input whose storage it took.
        input: TensorId,
    },
    /// The output of assign `op`: the target's storage.
    AssignOutput {
        /// The assign op.
        op: OpId,
    },
    /// The value of simplified assign `op`: produced in the target's storage.
    AssignValue {
        /// The assign op.
        op: OpId,
    },
}

/// One storage of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageInfo {
    /// Bytes: the largest tensor placed in it.
    pub size: u64,
    /// The device it is on.
    pub device: DeviceId,
    /// For the storage of a graph input or param, that tensor.
    pub external: Option<TensorId>,
}

/// A memory plan: a storage id per tensor and a size per storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryPlan {
    /// Storage of each tensor.
    pub storage_of: Vec<StorageId>,
    /// Every storage: the planned ones first, then one per graph input and
    /// param.
    pub storages: Vec<StorageInfo>,
    /// How each tensor got its storage.
    pub placement: Vec<Placement>,
    /// Devices of ops and tensors.
    pub devices: DevicePlan,
    /// The ColorNodeGroup groups (all 0 when not coloured).
    pub coloring: Coloring,
    /// How each op is treated as an assign.
    pub assign: Vec<AssignKind>,
    /// The `match_range` of the kept run.
    pub match_range: u64,
    /// Total planned bytes of every `match_range` tried, in order.
    pub tried: Vec<(u64, u64)>,
    /// Whether in-place reuse was on.
    pub inplace: bool,
}

/// Planning failed, or a plan does not hold for its graph.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// Devices cannot be assigned consistently.
    #[error("device planning: {op}: {why}")]
    DeviceConflict {
        /// The op at fault.
        op: String,
        /// What is wrong.
        why: String,
    },
    /// The plan is not one of this graph (wrong lengths or ids).
    #[error("the plan does not fit the graph: {0}")]
    Mismatch(String),
    /// A storage breaks a rule of the plan.
    #[error("storage {storage}: {why}")]
    Invalid {
        /// The storage.
        storage: StorageId,
        /// What is wrong.
        why: String,
    },
}

const AUTO_RANGES: [u64; 5] = [1, 2, 4, 8, 16];

/// Plans the memory of `graph`.
///
/// # Errors
///
/// [`PlanError::DeviceConflict`] when the annotations and copy ops put an op
/// on two devices or an op reads another device's tensor without a copy.
pub fn plan(graph: &Graph, options: &PlanOptions) -> Result<MemoryPlan, PlanError> {
    let devices = plan_devices(graph, options.default_device)?;
    let assign = assign::classify(graph, &devices);
    let n_ops = graph.ops().len();
    let coloring = if options.colors > 1 {
        color_node_group(graph, &vec![1; n_ops], options.colors)
    } else {
        Coloring {
            colors: vec![0; n_ops],
            count: 1,
        }
    };
    let colors: &[u32] = if coloring.count > 1 {
        &coloring.colors
    } else {
        &[]
    };
    let ranges: Vec<u64> = match options.match_range {
        MatchRange::Fixed(r) => vec![r],
        MatchRange::Auto => AUTO_RANGES.to_vec(),
    };
    let mut tried = Vec::with_capacity(ranges.len());
    let mut best: Option<(u64, alloc_memory::RunResult)> = None;
    for r in ranges {
        let run = alloc_memory::alloc_memory(graph, &devices, &assign, colors, options.inplace, r);
        tried.push((r, run.total));
        if best.as_ref().is_none_or(|(_, b)| run.total < b.total) {
            best = Some((r, run));
        }
    }
    let (match_range, run) = best.expect("at least one match_range is tried");

    // Planned blocks first, then one storage per graph input and param.
    let mut storages: Vec<StorageInfo> = run
        .blocks
        .iter()
        .map(|b| StorageInfo {
            size: b.size,
            device: b.device,
            external: None,
        })
        .collect();
    let mut external_sid = vec![usize::MAX; graph.tensors().len()];
    for (t, tensor) in graph.tensors().iter().enumerate() {
        if tensor.is_external() {
            external_sid[t] = storages.len();
            storages.push(StorageInfo {
                size: tensor.size,
                device: devices.tensor_device[t],
                external: Some(t),
            });
        }
    }
    let storage_of = run
        .sid
        .iter()
        .map(|s| match *s {
            alloc_memory::Sid::Block(b) => b,
            alloc_memory::Sid::External(x) => external_sid[x],
            alloc_memory::Sid::Unset => unreachable!("every tensor is placed"),
        })
        .collect();
    Ok(MemoryPlan {
        storage_of,
        storages,
        placement: run.placement,
        devices,
        coloring,
        assign,
        match_range,
        tried,
        inplace: options.inplace,
    })
}

impl MemoryPlan {
    /// Bytes of the planned storages (graph inputs and params excluded):
    /// NNVM's total.
    pub fn planned_bytes(&self) -> u64 {
        self.storages
            .iter()
            .filter(|s| s.external.is_none())
            .map(|s| s.size)
            .sum()
    }

    /// Bytes of the storages of graph inputs and params.
    pub fn external_bytes(&self) -> u64 {
        self.storages
            .iter()
            .filter(|s| s.external.is_some())
            .map(|s| s.size)
            .sum()
    }

    /// Number of planned storages.
    pub fn planned_storages(&self) -> usize {
        self.storages
            .iter()
            .filter(|s| s.external.is_none())
            .count()
    }

    /// Number of tensors placed in place on an input.
    pub fn inplace_count(&self) -> usize {
        self.placement
            .iter()
            .filter(|p| matches!(p, Placement::InPlace { .. }))
            .count()
    }
}
