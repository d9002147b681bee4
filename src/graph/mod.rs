//! Computation graphs: the shared graph file format (and, later, the graph IR,
//! planner, coloring and executor).

pub mod format;
