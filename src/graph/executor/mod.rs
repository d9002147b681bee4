//! The graph executor: runs a planned graph on the engine.
//!
//! **Static mode** (the plan): every storage id gets one buffer from a
//! pooled storage manager and one engine var. Each op is pushed in
//! execution order with its inputs' storage vars as reads and its outputs'
//! storage vars as writes. Two tensors that share storage share a var, so
//! reuse turns into ordinary engine ordering: the op that reuses a block
//! waits for the last reader of the block's previous tensor (pushed
//! earlier), and nothing else waits for it. Simplified assigns are not
//! pushed at all; plain assigns copy their value into the target.
//!
//! Why one var per storage is enough: the plan is made in execution order,
//! which is the push order, and a storage passes from tensor A to tensor B
//! only when every use of A comes before B's producer (or is B's producer
//! itself, in place). Every op that touches A is therefore pushed before
//! B's producer, which writes the storage's var: by the engine's per-var
//! ordering it runs after all of them, and B's readers, pushed after it,
//! run after it. Tensors in different storages have different vars, so
//! reuse adds exactly these write-after-read edges; with k colour groups a
//! block passes only between ops of one group, so the edges stay inside a
//! group.
//!
//! **Dynamic mode** (for comparison): every tensor gets its own var; its
//! buffer is allocated from the pool by its producer when that runs, and
//! freed by a deletion op ([`Engine::delete_var_with`]) pushed right after
//! its last reader. Graph inputs, params and graph outputs are held for the
//! whole run in both modes.
//!
//! Both modes report the makespan (first push to the end of
//! `wait_for_all`), the bytes the activation pool got from the system, the
//! bytes planned, and the parallelism achieved: the time op bodies ran,
//! summed over workers, divided by the makespan. Graph inputs and params
//! come from a pool of their own, outside these figures.
//!
//! # Examples
//!
//! ```
//! use depengine::graph::executor::{self, Bodies, ChecksumLog, Mode, RunOptions};
//! use depengine::graph::planner::{plan, PlanOptions};
//! use depengine::graph::Graph;
//! use depengine::Engine;
//! use std::sync::Arc;
//! let g = Graph::from_json_str(r#"{"model":"m","tensors":[
//!     {"id":0,"size":64,"kind":"input"},{"id":1,"size":64,"kind":"intermediate"},
//!     {"id":2,"size":64,"kind":"output"}],
//!   "ops":[{"name":"a","type":"Conv","inputs":[0],"outputs":[1]},
//!          {"name":"b","type":"ReLU","inputs":[1],"outputs":[2],"inplace":[[0,0]]}]}"#,
//!     "m".as_ref())?;
//! let p = plan(&g, &PlanOptions::default())?;
//! let engine = Engine::builder().cpu_workers(2).build()?;
//! let log = Arc::new(ChecksumLog::new(g.ops().len()));
//! let bodies = Bodies::new(executor::checksum_body(log.clone()));
//! let options = RunOptions { mode: Mode::Static, hash_outputs: true, ..RunOptions::default() };
//! let report = executor::run(&g, &p, &engine, &bodies, &options)?;
//! assert_eq!(report.checksums(&log), executor::reference(&g));
//! assert_eq!(report.planned_bytes, 64);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod body;
mod dynamic;
mod setup;
mod static_run;

use std::fmt;
use std::time::Duration;

use crate::engine::{Engine, EngineError};
use crate::storage::{StorageConfig, StorageError};

use super::ir::Graph;
use super::planner::{MemoryPlan, PlanError};

pub use body::{
    busy_body, checksum_body, fill_pattern, hash_bytes, hash_pattern, initial_seed, reference,
    Bodies, BusyCost, ChecksumLog, Checksums, OpBody, OpData,
};

/// How buffers are managed during a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// One buffer and one var per storage id of the plan.
    #[default]
    Static,
    /// One buffer and one var per tensor, allocated by the producer and
    /// freed by a deletion op after the last reader.
    Dynamic,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Static => "static",
            Mode::Dynamic => "dynamic",
        })
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "static" => Ok(Mode::Static),
            "dynamic" => Ok(Mode::Dynamic),
            _ => Err(format!("mode `{s}`: expected static or dynamic")),
        }
    }
}

/// Told `(ops done, ops in the graph)` as ops finish, from worker threads.
pub type Progress = crate::sync::Arc<dyn Fn(usize, usize) + Send + Sync>;

/// Options of a run.
#[derive(Clone, Default)]
pub struct RunOptions {
    /// Static plan or dynamic allocation.
    pub mode: Mode,
    /// The storage managers' configuration (a pool by default).
    pub storage: StorageConfig,
    /// Hash the final content of graph outputs and assigned params into
    /// [`RunReport::output_hashes`].
    pub hash_outputs: bool,
    /// Called after each op.
    pub progress: Option<Progress>,
}

impl fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunOptions")
            .field("mode", &self.mode)
            .field("storage", &self.storage)
            .field("hash_outputs", &self.hash_outputs)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

/// What a run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct RunReport {
    /// The model.
    pub model: String,
    /// The mode.
    pub mode: Mode,
    /// Ops in the graph.
    pub ops: usize,
    /// Ops pushed (simplified assigns are not).
    pub pushed: usize,
    /// From the first push to the end of `wait_for_all`.
    pub makespan: Duration,
    /// Time op bodies ran, summed over workers.
    pub busy: Duration,
    /// `busy / makespan`.
    pub parallelism: f64,
    /// Bytes of the plan's storages (graph inputs and params excluded).
    pub planned_bytes: u64,
    /// Bytes of graph inputs and params.
    pub external_bytes: u64,
    /// Bytes the activation pool obtained from the system: what it held at
    /// its peak (it returns nothing while it has no limit).
    pub peak_pool_bytes: u64,
    /// The largest number of activation bytes handed out at one time.
    pub peak_in_use_bytes: u64,
    /// `(tensor file id, hash)` of graph outputs and assigned params, when
    /// asked for.
    pub output_hashes: Vec<(u64, u64)>,
}

impl RunReport {
    /// This run's checksums, from the log its checksum body wrote.
    pub fn checksums(&self, log: &ChecksumLog) -> Checksums {
        Checksums {
            op_inputs: log.input_hashes(),
            outputs: self.output_hashes.clone(),
        }
    }
}

/// A run that could not be done.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The plan does not hold for the graph.
    #[error("invalid plan for this graph: {0}")]
    Plan(#[from] PlanError),
    /// A buffer could not be allocated before the run.
    #[error("cannot allocate {what} ({bytes} B): {source}")]
    Storage {
        /// The storage or tensor.
        what: String,
        /// Its size.
        bytes: u64,
        /// Why.
        #[source]
        source: StorageError,
    },
    /// The engine refused a push or reported a failed op.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// Runs `graph` as `plan` says on `engine`, each op with the body `bodies`
/// gives its type.
///
/// # Errors
///
/// [`ExecError::Plan`] when the plan does not validate for the graph;
/// [`ExecError::Storage`] when a buffer cannot be had; [`ExecError::Engine`]
/// when a push is refused (a GPU context the engine lacks) or an op failed.
pub fn run(
    graph: &Graph,
    plan: &MemoryPlan,
    engine: &Engine,
    bodies: &Bodies,
    options: &RunOptions,
) -> Result<RunReport, ExecError> {
    plan.validate(graph)?;
    match options.mode {
        Mode::Static => static_run::run(graph, plan, engine, bodies, options),
        Mode::Dynamic => dynamic::run(graph, plan, engine, bodies, options),
    }
}
