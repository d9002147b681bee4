//! The workloads and the traces they generate.

use std::fmt;
use std::str::FromStr;

use super::trace::{SplitMix64, Trace};

/// A benchmark workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// Op i writes its own var (or var i mod V, see [`Spec::vars`]).
    Indep,
    /// Ops that read and write no var at all.
    IndepNoVars,
    /// Every op writes the same var.
    Chain,
    /// Op i reads one shared var and writes var i mod V.
    Readers,
    /// n × n grid: op (i, j) reads (i−1, j) and (i, j−1) and writes (i, j),
    /// pushed row by row.
    Wavefront,
    /// Rounds of one writer of x (reading every y_k), then 100 readers of x
    /// each writing its own y_k.
    Fan,
    /// Ops on one var: every 64th writes, the rest read.
    Rwmix,
    /// Ops over 10,000 vars, 0–3 reads and 1–2 writes each, seed 42.
    Random,
    /// MXNet's `randsum`: 100 vars, 2–19 reads and one write each, seed 42.
    Randsum,
    /// Low-priority 10 µs independent ops pushed first, then 1,000
    /// high-priority ops chained on one var.
    Priority,
    /// Push an async op on x completed from another thread, then wait for x;
    /// not a trace (see `run::roundtrip`).
    Roundtrip,
}

/// Every workload, in the order of the tables.
pub const ALL_WORKLOADS: [Workload; 11] = [
    Workload::Indep,
    Workload::IndepNoVars,
    Workload::Chain,
    Workload::Readers,
    Workload::Wavefront,
    Workload::Fan,
    Workload::Rwmix,
    Workload::Random,
    Workload::Randsum,
    Workload::Priority,
    Workload::Roundtrip,
];

const NAMES: [&str; 11] = [
    "indep",
    "indep-novars",
    "chain",
    "readers",
    "wavefront",
    "fan",
    "rwmix",
    "random",
    "randsum",
    "priority",
    "roundtrip",
];

impl FromStr for Workload {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        NAMES
            .iter()
            .position(|n| *n == s)
            .map(|i| ALL_WORKLOADS[i])
            .ok_or_else(|| {
                format!(
                    "unknown workload `{s}`: expected one of {}",
                    NAMES.join(", ")
                )
            })
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = ALL_WORKLOADS.iter().position(|w| w == self).unwrap_or(0);
        f.write_str(NAMES[i])
    }
}

/// Seed of the `random` and `randsum` workloads.
pub const SEED: u64 = 42;
/// Busy time of the low-priority ops of `priority`, in nanoseconds.
pub const PRIORITY_LOW_BODY_NS: u32 = 10_000;
/// Number of high-priority ops of `priority`.
pub const PRIORITY_HIGH_OPS: usize = 1_000;
/// Readers per round of `fan`.
pub const FAN_READERS: usize = 100;

/// The size of a workload; what each field means depends on the workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// The workload.
    pub workload: Workload,
    /// Ops (indep, indep-novars, chain, readers, rwmix, random, randsum,
    /// roundtrip), rounds (fan: 101 ops each) or low-priority ops
    /// (priority). Ignored by wavefront.
    pub ops: usize,
    /// Grid side of wavefront (n × n ops).
    pub n: usize,
    /// Distinct vars of indep and readers (0: one per op for indep, 1024 for
    /// readers).
    pub vars: usize,
    /// Busy time of each body in nanoseconds (0: empty; the low-priority
    /// ops of `priority` always take 10 µs).
    pub body_ns: u32,
}

impl Spec {
    /// `workload` with `ops` ops (or rounds, see [`Spec::ops`]), a 1000 × 1000
    /// wavefront, the default vars and empty bodies.
    pub fn new(workload: Workload, ops: usize) -> Spec {
        Spec {
            workload,
            ops,
            n: 1000,
            vars: 0,
            body_ns: 0,
        }
    }

    /// The trace of this workload (empty for `roundtrip`).
    pub fn trace(&self) -> Trace {
        let b = self.body_ns;
        match self.workload {
            Workload::Indep => {
                let vars = if self.vars == 0 { self.ops } else { self.vars };
                let mut t = Trace::new(vars.max(1));
                for i in 0..self.ops {
                    t.push(&[], &[(i % t.vars) as u32], 0, b);
                }
                t
            }
            Workload::IndepNoVars => {
                let mut t = Trace::new(0);
                for _ in 0..self.ops {
                    t.push(&[], &[], 0, b);
                }
                t
            }
            Workload::Chain => {
                let mut t = Trace::new(1);
                for _ in 0..self.ops {
                    t.push(&[], &[0], 0, b);
                }
                t
            }
            Workload::Readers => {
                let vars = if self.vars == 0 { 1024 } else { self.vars };
                let mut t = Trace::new(vars + 1);
                for i in 0..self.ops {
                    t.push(&[vars as u32], &[(i % vars) as u32], 0, b);
                }
                t
            }
            Workload::Wavefront => {
                let n = self.n.max(1);
                let mut t = Trace::new(n * n);
                let mut reads: Vec<u32> = Vec::with_capacity(2);
                for i in 0..n {
                    for j in 0..n {
                        reads.clear();
                        if i > 0 {
                            reads.push(((i - 1) * n + j) as u32);
                        }
                        if j > 0 {
                            reads.push((i * n + j - 1) as u32);
                        }
                        t.push(&reads, &[(i * n + j) as u32], 0, b);
                    }
                }
                t
            }
            Workload::Fan => {
                // var 0 is x, vars 1..=100 the y_k.
                let mut t = Trace::new(FAN_READERS + 1);
                let ys: Vec<u32> = (1..=FAN_READERS as u32).collect();
                for round in 0..self.ops {
                    let reads: &[u32] = if round == 0 { &[] } else { &ys };
                    t.push(reads, &[0], 0, b);
                    for &y in &ys {
                        t.push(&[0], &[y], 0, b);
                    }
                }
                t
            }
            Workload::Rwmix => {
                let mut t = Trace::new(1);
                for i in 0..self.ops {
                    if i % 64 == 0 {
                        t.push(&[], &[0], 0, b);
                    } else {
                        t.push(&[0], &[], 0, b);
                    }
                }
                t
            }
            Workload::Random => self.random(10_000, 0, 3, 1, 2),
            Workload::Randsum => self.random(100, 2, 19, 1, 1),
            Workload::Priority => {
                let mut t = Trace::new(1);
                for _ in 0..self.ops {
                    t.push(&[], &[], 0, PRIORITY_LOW_BODY_NS);
                }
                for _ in 0..PRIORITY_HIGH_OPS {
                    t.push(&[], &[0], 1, b);
                }
                t
            }
            Workload::Roundtrip => Trace::new(1),
        }
    }

    fn random(&self, vars: u32, r_lo: u32, r_hi: u32, w_lo: u32, w_hi: u32) -> Trace {
        let mut rng = SplitMix64::new(SEED);
        let mut t = Trace::new(vars as usize);
        let mut ids: Vec<u32> = Vec::with_capacity(32);
        for _ in 0..self.ops {
            let nr = rng.range(r_lo, r_hi) as usize;
            let nw = rng.range(w_lo, w_hi) as usize;
            ids.clear();
            rng.distinct(nr + nw, vars, &mut ids);
            t.push(&ids[..nr], &ids[nr..], 0, self.body_ns);
        }
        t
    }
}
