//! The workloads and the traces they generate.

use std::fmt;
use std::str::FromStr;

use super::trace::{SplitMix64, Trace, TraceOp};

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
    ///
    /// # Panics
    ///
    /// When [`Spec::try_trace`] fails: the workload is too large for a
    /// trace, or its memory cannot be had.
    pub fn trace(&self) -> Trace {
        self.try_trace().unwrap_or_else(|e| panic!("{e}"))
    }

    /// The trace of this workload, with its memory asked for up front, so
    /// that a workload too large for the machine is an error, not an abort
    /// halfway through.
    ///
    /// # Errors
    ///
    /// [`SpecError::TooLarge`] when [`Spec::check`] refuses the size,
    /// [`SpecError::OutOfMemory`] when the allocator refuses the memory.
    pub fn try_trace(&self) -> Result<Trace, SpecError> {
        let size = self.check()?;
        let t =
            Trace::try_with_capacity(size.vars as usize, size.ops as usize, size.var_ids as usize)
                .map_err(|_| SpecError::OutOfMemory {
                    workload: self.workload,
                    bytes: size.bytes(),
                })?;
        Ok(self.fill(t))
    }

    /// The sizes this workload's trace reaches (at most, for the var
    /// references of `random`, `randsum`, `wavefront` and `fan`), worked
    /// out without building it.
    pub fn size(&self) -> TraceSize {
        let ops = self.ops as u128;
        let (ops, vars, var_ids) = match self.workload {
            Workload::Indep => {
                let vars = if self.vars == 0 {
                    ops
                } else {
                    self.vars as u128
                };
                (ops, vars.max(1), ops)
            }
            Workload::IndepNoVars => (ops, 0, 0),
            Workload::Chain | Workload::Rwmix => (ops, 1, ops),
            Workload::Readers => {
                let vars = if self.vars == 0 {
                    1024
                } else {
                    self.vars as u128
                };
                (ops, vars + 1, 2 * ops)
            }
            Workload::Wavefront => {
                let cells = (self.n.max(1) as u128).pow(2);
                (cells, cells, 3 * cells)
            }
            Workload::Fan => {
                let per_round = FAN_READERS as u128 + 1;
                // The writer reads every y_k (not in round 0); each reader
                // reads x and writes its y_k.
                (ops * per_round, per_round, ops * (3 * per_round - 2))
            }
            Workload::Random => (ops, 10_000, 5 * ops),
            Workload::Randsum => (ops, 100, 20 * ops),
            Workload::Priority => (
                ops + PRIORITY_HIGH_OPS as u128,
                1,
                PRIORITY_HIGH_OPS as u128,
            ),
            Workload::Roundtrip => (0, 1, 0),
        };
        TraceSize { ops, vars, var_ids }
    }

    /// Checks that the trace fits what a trace holds: at most
    /// [`TRACE_LIMIT`] ops, vars and var references (its ids, offsets and
    /// file fields are 32-bit words). Past it, ids would wrap around and
    /// the ops would name the wrong vars.
    ///
    /// # Errors
    ///
    /// [`SpecError::TooLarge`], naming what is past the limit.
    pub fn check(&self) -> Result<TraceSize, SpecError> {
        let size = self.size();
        for (what, count) in [
            ("ops", size.ops),
            ("vars", size.vars),
            ("var references", size.var_ids),
        ] {
            if count > u128::from(TRACE_LIMIT) {
                return Err(SpecError::TooLarge {
                    workload: self.workload,
                    what,
                    count,
                });
            }
        }
        Ok(size)
    }

    /// Checks that a run of the trace ([`TraceSize::run_bytes`]: its
    /// lists and its vars) fits in `available` bytes, such as the memory
    /// the system says is available: an allocator that overcommits grants
    /// what it cannot back, and the run then ends in the kernel's
    /// out-of-memory killer, not an error.
    ///
    /// # Errors
    ///
    /// [`SpecError::PastMemory`].
    pub fn check_run_memory(&self, available: u64) -> Result<(), SpecError> {
        self.fits("a run", self.size().run_bytes(), available)
    }

    /// [`Spec::check_run_memory`] for the trace alone
    /// ([`TraceSize::bytes`]), as writing it to a file or scheduling it
    /// ideally needs.
    ///
    /// # Errors
    ///
    /// [`SpecError::PastMemory`].
    pub fn check_trace_memory(&self, available: u64) -> Result<(), SpecError> {
        self.fits("the trace", self.size().bytes(), available)
    }

    fn fits(&self, needs: &'static str, bytes: u128, available: u64) -> Result<(), SpecError> {
        if bytes > u128::from(available) {
            return Err(SpecError::PastMemory {
                workload: self.workload,
                needs,
                bytes,
                available,
            });
        }
        Ok(())
    }

    /// Fills `t`, made with this workload's var count and room for its ops
    /// ([`Spec::size`]).
    fn fill(&self, mut t: Trace) -> Trace {
        let b = self.body_ns;
        match self.workload {
            Workload::Indep => {
                for i in 0..self.ops {
                    t.push(&[], &[(i % t.vars) as u32], 0, b);
                }
                t
            }
            Workload::IndepNoVars => {
                for _ in 0..self.ops {
                    t.push(&[], &[], 0, b);
                }
                t
            }
            Workload::Chain => {
                for _ in 0..self.ops {
                    t.push(&[], &[0], 0, b);
                }
                t
            }
            Workload::Readers => {
                let vars = t.vars - 1;
                for i in 0..self.ops {
                    t.push(&[vars as u32], &[(i % vars) as u32], 0, b);
                }
                t
            }
            Workload::Wavefront => {
                let n = self.n.max(1);
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
                for i in 0..self.ops {
                    if i % 64 == 0 {
                        t.push(&[], &[0], 0, b);
                    } else {
                        t.push(&[0], &[], 0, b);
                    }
                }
                t
            }
            Workload::Random => self.random(t, 0, 3, 1, 2),
            Workload::Randsum => self.random(t, 2, 19, 1, 1),
            Workload::Priority => {
                for _ in 0..self.ops {
                    t.push(&[], &[], 0, PRIORITY_LOW_BODY_NS);
                }
                for _ in 0..PRIORITY_HIGH_OPS {
                    t.push(&[], &[0], 1, b);
                }
                t
            }
            Workload::Roundtrip => t,
        }
    }

    fn random(&self, mut t: Trace, r_lo: u32, r_hi: u32, w_lo: u32, w_hi: u32) -> Trace {
        let mut rng = SplitMix64::new(SEED);
        // At most 10,000 (`Spec::size`).
        let vars = t.vars as u32;
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

/// Most ops, vars and var references a trace holds: its var ids, its
/// offsets into the var list and the counts of its file are 32-bit words.
pub const TRACE_LIMIT: u32 = u32::MAX;

/// What a workload's trace holds, from [`Spec::size`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceSize {
    /// Ops.
    pub ops: u128,
    /// Distinct vars.
    pub vars: u128,
    /// Var references (reads and writes of all ops): exact, or an upper
    /// bound where the workload draws them at random or the grid's edges
    /// read fewer.
    pub var_ids: u128,
}

impl TraceSize {
    /// The bytes the trace's two lists take at these sizes.
    pub fn bytes(&self) -> u128 {
        self.ops * std::mem::size_of::<TraceOp>() as u128 + self.var_ids * 4
    }

    /// The bytes a run of the trace takes at least: the trace's lists and
    /// one engine var for each of its vars (a run makes them all before
    /// the clock starts; their queues, when they grow, come on top).
    pub fn run_bytes(&self) -> u128 {
        self.bytes() + self.vars * crate::engine::VAR_BYTES as u128
    }
}

/// Why a workload's trace cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// The workload makes more ops, vars or var references than a trace
    /// holds ([`TRACE_LIMIT`]).
    #[error("{workload} of this size makes {count} {what}, past the {} a trace holds (its ids and counts are 32-bit): ask for {}", TRACE_LIMIT, fewer(*.workload))]
    TooLarge {
        /// The workload.
        workload: Workload,
        /// What is past the limit: `ops`, `vars` or `var references`.
        what: &'static str,
        /// How many the workload would make.
        count: u128,
    },
    /// The trace, or a run of it, would take more memory than the machine
    /// has available ([`Spec::check_run_memory`],
    /// [`Spec::check_trace_memory`]).
    #[error("{needs} of {workload} needs at least {bytes} bytes, more than the {available} bytes this machine has available: ask for {}", fewer(*.workload))]
    PastMemory {
        /// The workload.
        workload: Workload,
        /// What needs the memory: `a run` (the trace and its vars) or
        /// `the trace`.
        needs: &'static str,
        /// The bytes needed at least ([`TraceSize::run_bytes`] or
        /// [`TraceSize::bytes`]).
        bytes: u128,
        /// The bytes available.
        available: u64,
    },
    /// The allocator refused the trace's memory.
    #[error("the trace of {workload} needs {bytes} bytes, which this machine would not allocate: ask for {}", fewer(*.workload))]
    OutOfMemory {
        /// The workload.
        workload: Workload,
        /// The bytes asked for.
        bytes: u128,
    },
}

/// What to ask for instead of a workload too large, in the words of
/// `depengine bench`'s flags.
pub(crate) fn fewer(workload: Workload) -> &'static str {
    match workload {
        Workload::Wavefront => "a smaller grid (--n)",
        Workload::Fan => "fewer rounds (--ops)",
        Workload::Priority => "fewer low-priority ops (--ops)",
        _ => "fewer ops (--ops)",
    }
}
