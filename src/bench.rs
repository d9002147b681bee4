//! The empty-op micro-benchmark workloads of the design notes, shared by the
//! `depengine bench` command and the criterion benches so both measure the
//! same thing.
//!
//! Cost per op = time from the first push to the return of `wait_for_all`,
//! divided by the number of ops; one pushing thread; empty bodies.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

use crate::{Engine, EngineError, OpDesc, Var};

/// A micro-benchmark workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// Op i writes var i mod V and reads nothing.
    Indep,
    /// Every op writes the same var.
    Chain,
    /// Op i reads one shared var and writes var i mod V.
    Readers,
}

impl FromStr for Workload {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "indep" => Ok(Workload::Indep),
            "chain" => Ok(Workload::Chain),
            "readers" => Ok(Workload::Readers),
            other => Err(format!(
                "unknown workload `{other}`: expected indep, chain or readers"
            )),
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Workload::Indep => "indep",
            Workload::Chain => "chain",
            Workload::Readers => "readers",
        })
    }
}

/// Default number of distinct vars written by `indep` and `readers`.
pub const DEFAULT_VARS: usize = 1024;

/// Runs `ops` empty ops of `workload` on `engine` over `vars` vars; returns the
/// time from the first push to the return of `wait_for_all`.
///
/// # Errors
///
/// Any error of the engine (none is expected for these workloads).
pub fn run_workload(
    engine: &Engine,
    workload: Workload,
    ops: usize,
    vars: usize,
) -> Result<Duration, EngineError> {
    let vars: Vec<Var> = (0..vars.max(1)).map(|_| engine.new_var()).collect();
    let shared = engine.new_var();
    engine.wait_for_all()?;
    let start = Instant::now();
    match workload {
        Workload::Indep => {
            for i in 0..ops {
                engine.push(OpDesc::new("indep").writes(&vars[i % vars.len()]), |_| {
                    Ok(())
                })?;
            }
        }
        Workload::Chain => {
            for _ in 0..ops {
                engine.push(OpDesc::new("chain").writes(&shared), |_| Ok(()))?;
            }
        }
        Workload::Readers => {
            for i in 0..ops {
                engine.push(
                    OpDesc::new("readers")
                        .reads(&shared)
                        .writes(&vars[i % vars.len()]),
                    |_| Ok(()),
                )?;
            }
        }
    }
    engine.wait_for_all()?;
    let elapsed = start.elapsed();
    for v in vars {
        engine.delete_var(v)?;
    }
    engine.delete_var(shared)?;
    engine.wait_for_all()?;
    Ok(elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EngineKind;

    #[test]
    fn every_workload_runs_every_op() {
        for kind in [EngineKind::Naive, EngineKind::Pooled, EngineKind::PerDevice] {
            let engine = Engine::builder().kind(kind).cpu_workers(2).build().unwrap();
            for w in [Workload::Indep, Workload::Chain, Workload::Readers] {
                run_workload(&engine, w, 2000, 16).unwrap();
                assert_eq!(engine.pending(), 0);
            }
        }
        assert!("bogus".parse::<Workload>().is_err());
        assert_eq!("chain".parse::<Workload>(), Ok(Workload::Chain));
    }
}
