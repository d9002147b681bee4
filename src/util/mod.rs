//! Small helpers shared by the library, its tests, benches and command line.

pub mod rng;
