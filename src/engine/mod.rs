//! The dependency engine.
