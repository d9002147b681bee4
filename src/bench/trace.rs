//! The workloads as traces: the ops in push order, each with the vars it
//! reads and writes, its priority and its body time.
//!
//! A trace is built once, outside the timed region, and replayed by every
//! system: `depengine` here, and the peer drivers under `peers/` through the
//! file written by [`Trace::write_to`]. The same trace therefore reaches every
//! system, including the `random` ops drawn from the fixed seed.

use std::collections::TryReserveError;
use std::io::{self, Write};

/// One op of a trace; its vars are ranges of [`Trace::var_ids`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceOp {
    /// Start of the vars read in [`Trace::var_ids`].
    pub reads_start: u32,
    /// Number of vars read.
    pub n_reads: u16,
    /// Number of vars written (they follow the reads).
    pub n_writes: u16,
    /// Priority: higher runs first among ready ops.
    pub priority: i32,
    /// Busy time of the body in nanoseconds (0: empty body).
    pub body_ns: u32,
}

/// A workload as a list of ops in push order over `vars` vars.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    /// Number of distinct vars the ops use (ids `0..vars`).
    pub vars: usize,
    /// The ops in push order.
    pub ops: Vec<TraceOp>,
    /// Var ids of every op: reads then writes, op after op.
    pub var_ids: Vec<u32>,
}

/// First word of a trace file ("DEPT", little-endian).
pub const TRACE_MAGIC: u32 = u32::from_le_bytes(*b"DEPT");
/// Version of the trace file format.
pub const TRACE_VERSION: u32 = 1;

impl Trace {
    /// An empty trace over `vars` vars.
    pub fn new(vars: usize) -> Trace {
        Trace {
            vars,
            ops: Vec::new(),
            var_ids: Vec::new(),
        }
    }

    /// An empty trace over `vars` vars with room for `ops` ops and
    /// `var_ids` var references, asked of the allocator now.
    ///
    /// # Errors
    ///
    /// The allocator's refusal.
    pub fn try_with_capacity(
        vars: usize,
        ops: usize,
        var_ids: usize,
    ) -> Result<Trace, TryReserveError> {
        let mut t = Trace::new(vars);
        t.ops.try_reserve_exact(ops)?;
        t.var_ids.try_reserve_exact(var_ids)?;
        Ok(t)
    }

    /// Appends an op reading `reads` and writing `writes` (disjoint var ids
    /// below `self.vars`).
    ///
    /// # Panics
    ///
    /// When the trace's var references would pass 2^32, the most its 32-bit
    /// offsets reach ([`Spec::check`](super::Spec::check) refuses such
    /// workloads before they are built).
    pub fn push(&mut self, reads: &[u32], writes: &[u32], priority: i32, body_ns: u32) {
        debug_assert!(reads
            .iter()
            .chain(writes)
            .all(|&v| (v as usize) < self.vars));
        let reads_start = u32::try_from(self.var_ids.len())
            .ok()
            .filter(|&s| u64::from(s) + (reads.len() + writes.len()) as u64 <= u64::from(u32::MAX))
            .expect("a trace holds at most 2^32 - 1 var references");
        self.var_ids.extend_from_slice(reads);
        self.var_ids.extend_from_slice(writes);
        self.ops.push(TraceOp {
            reads_start,
            n_reads: reads.len() as u16,
            n_writes: writes.len() as u16,
            priority,
            body_ns,
        });
    }

    /// Vars read by `op`.
    pub fn reads(&self, op: &TraceOp) -> &[u32] {
        let s = op.reads_start as usize;
        &self.var_ids[s..s + op.n_reads as usize]
    }

    /// Vars written by `op`.
    pub fn writes(&self, op: &TraceOp) -> &[u32] {
        let s = op.reads_start as usize + op.n_reads as usize;
        &self.var_ids[s..s + op.n_writes as usize]
    }

    /// Total busy time of all bodies, in nanoseconds.
    pub fn total_body_ns(&self) -> u64 {
        self.ops.iter().map(|o| u64::from(o.body_ns)).sum()
    }

    /// Writes the trace in the format the peer drivers read: little-endian
    /// 32-bit words `MAGIC VERSION vars ops`, then per op `priority body_ns
    /// n_reads n_writes reads... writes...`.
    ///
    /// # Errors
    ///
    /// Any error of `out`.
    pub fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        let mut buf: Vec<u8> = Vec::with_capacity(16 + self.ops.len() * 24);
        let word = |buf: &mut Vec<u8>, w: u32| buf.extend_from_slice(&w.to_le_bytes());
        for w in [
            TRACE_MAGIC,
            TRACE_VERSION,
            self.vars as u32,
            self.ops.len() as u32,
        ] {
            word(&mut buf, w);
        }
        for op in &self.ops {
            word(&mut buf, op.priority as u32);
            word(&mut buf, op.body_ns);
            word(&mut buf, u32::from(op.n_reads));
            word(&mut buf, u32::from(op.n_writes));
            for &v in self.reads(op).iter().chain(self.writes(op)) {
                word(&mut buf, v);
            }
            if buf.len() > 1 << 20 {
                out.write_all(&buf)?;
                buf.clear();
            }
        }
        out.write_all(&buf)?;
        out.flush()
    }

    /// The graph our engine infers from the trace, as explicit edges: for
    /// each op, the earlier ops it must follow (the last writer of each var
    /// it reads; for each var it writes, the readers since the last write,
    /// or the last writer when there were none), less those another of
    /// them follows directly, as a [`Replay`](crate::Replay) keeps them.
    /// Used by the drivers of the peers that take a graph rather than infer
    /// one (rayon here; oneTBB's driver applies the same rules itself).
    pub fn inferred_edges(&self) -> Vec<Vec<u32>> {
        crate::engine::replay::graph::infer_preds(
            self.vars,
            self.ops.iter().map(|op| (self.reads(op), self.writes(op))),
        )
    }
}

/// A small deterministic generator (SplitMix64) for the `random` workloads.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u32, hi: u32) -> u32 {
        lo + (self.next_u64() % u64::from(hi - lo + 1)) as u32
    }

    /// `k` distinct numbers below `n`, appended to `out` (rejection sampling;
    /// `k` is small against `n`).
    pub fn distinct(&mut self, k: usize, n: u32, out: &mut Vec<u32>) {
        let start = out.len();
        while out.len() - start < k {
            let v = (self.next_u64() % u64::from(n)) as u32;
            if !out[start..].contains(&v) {
                out.push(v);
            }
        }
    }
}
