//! Helpers shared by the integration tests (each test file is its own
//! crate and includes this module with `mod common;`).

use depengine::{Engine, EngineKind};

/// One engine of every executor at 1, 2 and 4 CPU workers (the naive
/// executor, which runs ops on the pushing thread, once), each with one
/// simulated GPU.
pub(crate) fn every_executor() -> Vec<Engine> {
    let mut v = Vec::new();
    for kind in [EngineKind::Naive, EngineKind::Pooled, EngineKind::PerDevice] {
        for workers in [1, 2, 4] {
            if kind == EngineKind::Naive && workers > 1 {
                continue;
            }
            v.push(
                Engine::builder()
                    .kind(kind)
                    .cpu_workers(workers)
                    .gpus(1)
                    .build()
                    .unwrap(),
            );
        }
    }
    v
}
