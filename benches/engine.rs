//! Engine benchmarks (filled in with the engine).
fn main() {}
