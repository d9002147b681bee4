//! Op bodies: what the executor runs for each op, chosen by op type.
//!
//! A body sees its op's buffers through [`OpData`]: inputs as shared
//! slices, outputs as mutable ones. An output may be the very buffer of an
//! input (in-place reuse, or an assign's value produced in its target), so
//! [`OpData::output_mut`] borrows the whole `OpData` mutably: no input slice
//! can be held while an output is written. A body that works in place reads
//! what it needs first, then writes.
//!
//! Two built-in bodies: [`busy_body`] keeps the worker busy for a time
//! derived from the bytes the op touches (so a graph runs without kernels),
//! and [`checksum_body`] hashes the inputs, records the hash, and fills the
//! outputs with a pattern seeded by it (so any clobbered buffer shows up in
//! the hashes of the ops that read after it; [`reference`] computes the
//! same hashes serially, without any sharing of buffers).

use std::collections::HashMap;
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use crate::engine::OpError;
use crate::sim::from_graph::CostModel;
use crate::sync::{Arc, AtomicU64, Ordering};

use super::super::format::TensorKind;
use super::super::ir::{Graph, Op, OpId};

/// A buffer of one tensor as a body sees it: a pointer and the tensor's
/// length (the storage may be larger).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Buf {
    pub(crate) ptr: NonNull<u8>,
    pub(crate) len: usize,
}

impl Buf {
    /// No buffer: what an ignored input shows.
    pub(crate) const EMPTY: Buf = Buf {
        ptr: NonNull::dangling(),
        len: 0,
    };
}

/// The buffers of a running op.
///
/// # Examples
///
/// A body that copies input 0 into output 0:
///
/// ```
/// use depengine::graph::executor::{OpBody, OpData};
/// use std::sync::Arc;
/// let copy: OpBody = Arc::new(|data: &mut OpData<'_>| {
///     let bytes = data.input(0).to_vec();
///     data.output_mut(0).copy_from_slice(&bytes);
///     Ok(())
/// });
/// # let _ = copy;
/// ```
pub struct OpData<'a> {
    pub(crate) index: OpId,
    pub(crate) op: &'a Op,
    pub(crate) inputs: &'a [Buf],
    pub(crate) outputs: &'a [Buf],
}

impl OpData<'_> {
    /// The op's index in execution order.
    pub fn index(&self) -> OpId {
        self.index
    }

    /// The op.
    pub fn op(&self) -> &Op {
        self.op
    }

    /// Number of inputs (ignored ones included).
    pub fn num_inputs(&self) -> usize {
        self.inputs.len()
    }

    /// Number of outputs.
    pub fn num_outputs(&self) -> usize {
        self.outputs.len()
    }

    /// The bytes of input `i`; empty for an ignored input.
    ///
    /// # Panics
    ///
    /// When `i` is not below [`num_inputs`](Self::num_inputs).
    pub fn input(&self, i: usize) -> &[u8] {
        let b = self.inputs[i];
        // SAFETY: `b` points to a live buffer of at least `b.len` bytes that
        // the executor initialised before the run (or is EMPTY: dangling,
        // aligned, length 0). The executor keeps every buffer alive until
        // all ops have completed, and the engine runs this op while it holds
        // a read of the buffer's var, so no other op writes these bytes
        // meanwhile. Within the op, writes go through `output_mut`, which
        // needs `&mut self` and so cannot overlap this borrow.
        unsafe { std::slice::from_raw_parts(b.ptr.as_ptr(), b.len) }
    }

    /// The bytes of output `i`, to write.
    ///
    /// # Panics
    ///
    /// When `i` is not below [`num_outputs`](Self::num_outputs).
    pub fn output_mut(&mut self, i: usize) -> &mut [u8] {
        let b = self.outputs[i];
        // SAFETY: as in `input`; the engine runs this op while it holds the
        // write of the buffer's var, so no other op reads or writes these
        // bytes. Two outputs of one op never share a buffer (a valid plan
        // keeps tensors live at once apart), and `&mut self` keeps every
        // other slice of this op out of the way for the borrow.
        unsafe { std::slice::from_raw_parts_mut(b.ptr.as_ptr(), b.len) }
    }

    /// Bytes the op touches: its inputs (not ignored) and outputs.
    pub fn bytes(&self) -> u64 {
        self.inputs
            .iter()
            .chain(self.outputs.iter())
            .map(|b| b.len as u64)
            .sum()
    }
}

/// A body: runs an op on its buffers. Shared by every op of its type.
pub type OpBody = Arc<dyn Fn(&mut OpData<'_>) -> Result<(), OpError> + Send + Sync>;

/// The bodies of a run: one per op type, and a fallback for the rest.
///
/// # Examples
///
/// ```
/// use depengine::graph::executor::{busy_body, Bodies, BusyCost};
/// use std::sync::Arc;
/// let bodies = Bodies::new(busy_body(BusyCost::scaled(0.0)))
///     .with("ReLU", Arc::new(|_| Ok(())));
/// # let _ = bodies;
/// ```
#[derive(Clone)]
pub struct Bodies {
    by_type: HashMap<String, OpBody>,
    fallback: OpBody,
}

impl std::fmt::Debug for Bodies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut types: Vec<&String> = self.by_type.keys().collect();
        types.sort();
        f.debug_struct("Bodies").field("types", &types).finish()
    }
}

impl Bodies {
    /// `fallback` for every op type.
    pub fn new(fallback: OpBody) -> Self {
        Self {
            by_type: HashMap::new(),
            fallback,
        }
    }

    /// `body` for ops of type `op_type` (exact match).
    pub fn with(mut self, op_type: impl Into<String>, body: OpBody) -> Self {
        self.by_type.insert(op_type.into(), body);
        self
    }

    /// The body for `op_type`.
    pub fn get(&self, op_type: &str) -> &OpBody {
        self.by_type.get(op_type).unwrap_or(&self.fallback)
    }
}

/// How long [`busy_body`] keeps a worker busy: the cost model's time for the
/// bytes the op touches, times `scale`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BusyCost {
    /// Time from bytes (the training simulator's model).
    pub model: CostModel,
    /// Multiplies every time: 1.0 is the model, 0.0 busies not at all.
    pub scale: f64,
}

impl Default for BusyCost {
    fn default() -> Self {
        Self::scaled(1.0)
    }
}

impl BusyCost {
    /// The default cost model, times `scale`.
    pub fn scaled(scale: f64) -> Self {
        Self {
            model: CostModel::default(),
            scale,
        }
    }

    /// The time an op touching `bytes` bytes takes.
    pub fn time(&self, bytes: u64) -> Duration {
        let ms = (self.model.per_op_ms + bytes as f64 / self.model.bytes_per_ms) * self.scale;
        Duration::from_secs_f64((ms / 1000.0).max(0.0))
    }
}

/// A body that spins for [`BusyCost::time`] of the op's bytes.
pub fn busy_body(cost: BusyCost) -> OpBody {
    Arc::new(move |data: &mut OpData<'_>| {
        let until = Instant::now() + cost.time(data.bytes());
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        Ok(())
    })
}

// ------------------------------------------------------------------ checksums

const PRIME: u64 = 0x0000_0100_0000_01b3;
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn step(h: u64, w: u64) -> u64 {
    (h ^ w).wrapping_mul(PRIME).rotate_left(5)
}

fn pattern_word(seed: u64, i: u64) -> u64 {
    mix(seed ^ i.wrapping_mul(GOLDEN))
}

/// Hash of a byte string (length included).
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325 ^ bytes.len() as u64;
    let mut words = bytes.chunks_exact(8);
    for c in &mut words {
        let mut w = [0; 8];
        w.copy_from_slice(c);
        h = step(h, u64::from_le_bytes(w));
    }
    for &b in words.remainder() {
        h = step(h, u64::from(b));
    }
    mix(h)
}

/// Fills `bytes` with the pattern of `seed`.
pub fn fill_pattern(bytes: &mut [u8], seed: u64) {
    let mut words = bytes.chunks_exact_mut(8);
    let mut i = 0;
    for c in &mut words {
        c.copy_from_slice(&pattern_word(seed, i).to_le_bytes());
        i += 1;
    }
    let tail = pattern_word(seed, i).to_le_bytes();
    let rest = words.into_remainder();
    let n = rest.len();
    rest.copy_from_slice(&tail[..n]);
}

/// `hash_bytes` of a buffer of `len` bytes filled with the pattern of
/// `seed`, without the buffer.
pub fn hash_pattern(len: usize, seed: u64) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325 ^ len as u64;
    let words = (len / 8) as u64;
    for i in 0..words {
        h = step(h, pattern_word(seed, i));
    }
    let tail = pattern_word(seed, words).to_le_bytes();
    for &b in &tail[..len % 8] {
        h = step(h, u64::from(b));
    }
    mix(h)
}

/// The seed of a graph input's or param's initial content.
pub fn initial_seed(file_id: u64) -> u64 {
    mix(file_id ^ 0x5eed)
}

fn output_seed(op: OpId, output: usize, input_hash: u64) -> u64 {
    mix(input_hash ^ mix(op as u64) ^ (output as u64).wrapping_mul(GOLDEN))
}

fn combine(h: u64, x: u64) -> u64 {
    mix(h.rotate_left(7) ^ x)
}

/// The input hash of every op a checksum run executed (0 for ops that ran
/// no body: assigns, and ops not run yet).
#[derive(Debug)]
pub struct ChecksumLog {
    input_hash: Vec<AtomicU64>,
}

impl ChecksumLog {
    /// A log for a graph of `ops` ops.
    pub fn new(ops: usize) -> Self {
        Self {
            input_hash: (0..ops).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// The input hash of each op.
    pub fn input_hashes(&self) -> Vec<u64> {
        self.input_hash
            .iter()
            .map(|h| h.load(Ordering::Relaxed))
            .collect()
    }
}

/// The checksum body: hashes the inputs (ignored ones skipped), records the
/// hash in `log`, and fills every output with a pattern seeded by the hash,
/// the op index and the output position.
pub fn checksum_body(log: Arc<ChecksumLog>) -> OpBody {
    Arc::new(move |data: &mut OpData<'_>| {
        let mut h = 0;
        for i in 0..data.num_inputs() {
            if !data.op().ignored[i] {
                h = combine(h, hash_bytes(data.input(i)));
            }
        }
        if let Some(slot) = log.input_hash.get(data.index()) {
            slot.store(h, Ordering::Relaxed);
        }
        let k = data.index();
        for j in 0..data.num_outputs() {
            fill_pattern(data.output_mut(j), output_seed(k, j, h));
        }
        Ok(())
    })
}

/// What a checksum run computed: comparable between runs of one graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checksums {
    /// Input hash of each op (0 for assigns).
    pub op_inputs: Vec<u64>,
    /// `(tensor file id, hash)` of every graph output and every assigned
    /// input or param, in tensor order.
    pub outputs: Vec<(u64, u64)>,
}

/// Tensors whose final content a run reports: graph outputs, and inputs
/// or params that an assign writes. Assign outputs are left out (a later
/// assign to the same target overwrites them).
pub(crate) fn reported_tensors(graph: &Graph) -> Vec<usize> {
    let mut assigned = vec![false; graph.tensors().len()];
    let mut assign_out = vec![false; graph.tensors().len()];
    for op in graph.ops() {
        if op.is_assign() {
            assigned[op.inputs[0]] = true;
            assign_out[op.outputs[0]] = true;
        }
    }
    (0..graph.tensors().len())
        .filter(|&t| (graph.tensor(t).kind == TensorKind::Output && !assign_out[t]) || assigned[t])
        .collect()
}

/// The checksums of a serial run of `graph` with the checksum body, every
/// tensor in a buffer of its own: what every executor must reproduce.
pub fn reference(graph: &Graph) -> Checksums {
    let n_t = graph.tensors().len();
    let mut value = vec![0_u64; n_t];
    for (t, tensor) in graph.tensors().iter().enumerate() {
        if tensor.is_external() {
            value[t] = hash_pattern(tensor.size as usize, initial_seed(tensor.file_id));
        }
    }
    let mut op_inputs = vec![0; graph.ops().len()];
    for (k, op) in graph.ops().iter().enumerate() {
        if op.is_assign() {
            let v = value[op.inputs[1]];
            value[op.inputs[0]] = v;
            value[op.outputs[0]] = v;
            continue;
        }
        let mut h = 0;
        for (_, t) in op.used_inputs() {
            h = combine(h, value[t]);
        }
        op_inputs[k] = h;
        for (j, &t) in op.outputs.iter().enumerate() {
            value[t] = hash_pattern(graph.tensor(t).size as usize, output_seed(k, j, h));
        }
    }
    Checksums {
        op_inputs,
        outputs: reported_tensors(graph)
            .into_iter()
            .map(|t| (graph.tensor(t).file_id, value[t]))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_hash_matches_a_filled_buffer() {
        for len in [0, 1, 7, 8, 9, 64, 1001] {
            let mut b = vec![0; len];
            fill_pattern(&mut b, 42);
            assert_eq!(hash_bytes(&b), hash_pattern(len, 42), "len {len}");
        }
        let mut a = vec![0; 16];
        fill_pattern(&mut a, 1);
        let mut b = a.clone();
        b[15] ^= 1;
        assert_ne!(hash_bytes(&a), hash_bytes(&b));
    }
}
