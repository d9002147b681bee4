//! Small helpers shared by the library, its tests, benches and command line.

#[cfg(test)]
pub(crate) mod cache_lines;
pub mod rng;
