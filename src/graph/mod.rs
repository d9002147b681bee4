//! Computation graphs: the shared graph file format, the graph IR, the
//! NNVM/TVM-style memory planner with ColorNodeGroup, and a graph executor
//! that runs a planned graph on the engine.
//!
//! The path from a file to a run:
//!
//! 1. [`Graph::load`] reads a graph file ([`format`](mod@format)) and validates it
//!    ([`GraphError`] names the op or tensor at fault);
//! 2. [`planner::plan`] gives every tensor a storage id and every storage a
//!    size ([`MemoryPlan`]), which [`MemoryPlan::validate`] checks;
//! 3. [`executor::run`] allocates one buffer and one engine var per storage
//!    and pushes every op with its inputs' vars as reads and its outputs'
//!    vars as writes (or, in dynamic mode, allocates each tensor when it is
//!    produced and frees it by a deletion op after its last reader).

pub mod executor;
pub mod format;
mod ir;
pub mod planner;
mod validate;

pub use ir::{Graph, Op, OpId, OpKind, Tensor, TensorId};
pub use planner::MemoryPlan;
pub use validate::GraphError;
