//! depengine: a dependency engine for operations that read and write shared state.
//!
//! Users create *vars* and push *ops* that declare which vars they read and which
//! they write. The engine infers the dependency graph at push time and runs each
//! op on a worker thread as soon as every earlier conflicting op has finished.
//!
//! Quickstart, crate docs and the executors live in [`engine`].

#![warn(missing_docs)]

pub mod bench;
pub mod engine;
pub mod graph;
pub mod plan;
pub mod sim;
pub mod storage;
pub(crate) mod sync;
pub mod util;

pub use engine::*;
