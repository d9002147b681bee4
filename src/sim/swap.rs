//! The op-by-op simulation shared by every mode: memory, the clock and the
//! disk's single FIFO IO queue. The swap modes differ only in when a
//! swap-in is issued ([`super::semi_sync`], [`super::async_swap`]) and in
//! whether an op waits for the swap-outs issued just before it.

use super::alloc_model::Memory;
use super::profile::{FeatureMap, Profile};
use super::{async_swap, semi_sync, AllocModel, Mode, SimConfig, SimResult};

/// Where a feature map chosen for swapping stands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum MapState {
    /// Not produced yet, or produced and not yet written.
    Waiting,
    /// Swap-out in the queue or on the disk; still in memory. Ends at `.0` ms.
    Writing(f64),
    /// Written and released from memory.
    Out,
    /// Swap-in in the queue or on the disk, memory allocated; ends at `.0` ms.
    Reading(f64),
    /// Back in memory for good (read back, or kept because its swap-in
    /// would have been due before it could leave memory).
    Back,
}

/// One chosen map and its state.
#[derive(Debug, Clone)]
pub(crate) struct Swapped {
    pub(crate) map: FeatureMap,
    pub(crate) state: MapState,
    /// IO time of one transfer of this map, in ms.
    pub(crate) io_ms: f64,
}

/// The disk: one FIFO queue shared by reads and writes.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct IoQueue {
    /// Time at which the last queued transfer ends.
    pub(crate) free_at: f64,
}

impl IoQueue {
    /// Queues a transfer of `ms` issued at `now`; returns its end time.
    pub(crate) fn push(&mut self, now: f64, ms: f64) -> f64 {
        let start = self.free_at.max(now);
        self.free_at = start + ms;
        self.free_at
    }
}

/// The state that the swap-in rules look at when an op starts.
pub(crate) struct OpStart<'a> {
    /// The op about to start.
    pub(crate) op: usize,
    /// Its start time (end of the previous op), ms.
    pub(crate) now: f64,
    /// Prefix sums of op times: `prefix[j]` = sum of times of ops `0..j`.
    pub(crate) prefix: &'a [f64],
    /// The IO queue as it stands.
    pub(crate) queue: IoQueue,
    /// Index of the first backward op.
    pub(crate) forward_ops: usize,
}

/// Runs one simulation. `swap` lists tensor indices to swap out; those that
/// are not feature maps of `profile` are ignored, and it is ignored for the
/// modes that do not swap.
pub(crate) fn run(profile: &Profile, mode: Mode, config: &SimConfig, swap: &[usize]) -> SimResult {
    let n = profile.tensors.len();
    let alloc = match mode {
        Mode::Oracle => AllocModel::Oracle,
        Mode::Pool => AllocModel::Pool,
        Mode::SemiSync | Mode::Async => config.alloc,
    };
    let swapping = matches!(mode, Mode::SemiSync | Mode::Async);
    let io_ms_per_byte = 1000.0 / config.bandwidth;

    // Chosen maps, in need order (first backward use, then tensor index).
    let mut chosen: Vec<Swapped> = Vec::new();
    if swapping && !swap.is_empty() {
        let mut wanted = vec![false; n];
        for &t in swap {
            if t < n {
                wanted[t] = true;
            }
        }
        chosen = profile
            .feature_maps()
            .into_iter()
            .filter(|m| wanted[m.tensor])
            .map(|map| Swapped {
                map,
                state: MapState::Waiting,
                io_ms: map.size as f64 * io_ms_per_byte,
            })
            .collect();
        chosen.sort_by_key(|s| (s.map.first_backward_use, s.map.tensor));
    }
    // Index into `chosen` by tensor.
    let mut slot = vec![usize::MAX; n];
    for (i, s) in chosen.iter().enumerate() {
        slot[s.map.tensor] = i;
    }

    let mut prefix = Vec::with_capacity(profile.ops.len() + 1);
    prefix.push(0.0);
    for op in &profile.ops {
        prefix.push(prefix.last().copied().unwrap_or(0.0) + op.time_ms);
    }

    let mut mem = Memory::new(n, config.rounding);
    let mut queue = IoQueue::default();
    let mut clock = 0.0_f64;
    let mut stall = 0.0_f64;
    let mut out_bytes = 0_u64;
    let mut in_bytes = 0_u64;
    let mut written_maps = 0_usize;
    let mut sync_writes_end: Option<f64> = None;
    let mut due: Vec<usize> = Vec::new();
    // Index of the first chosen map that is not yet resolved (Reading/Back).
    let mut first_open = 0_usize;

    for (k, op) in profile.ops.iter().enumerate() {
        mem.set_op(k);
        let now = clock;
        if !chosen.is_empty() {
            // 1. Which swap-ins are due at this op start.
            due.clear();
            while first_open < chosen.len()
                && matches!(
                    chosen[first_open].state,
                    MapState::Reading(_) | MapState::Back
                )
            {
                first_open += 1;
            }
            let start = OpStart {
                op: k,
                now,
                prefix: &prefix,
                queue,
                forward_ops: profile.forward_ops,
            };
            match mode {
                Mode::SemiSync => semi_sync::due(&start, &chosen[first_open..], &mut due),
                _ => async_swap::due(&start, &chosen[first_open..], &mut due),
            }
            for d in due.iter_mut() {
                *d += first_open;
            }
            // 2. Release written maps whose last forward use has passed.
            for (i, s) in chosen.iter_mut().enumerate() {
                if let MapState::Writing(end) = s.state {
                    if end <= now && s.map.last_forward_use < k && !due.contains(&i) {
                        mem.free(s.map.tensor);
                        s.state = MapState::Out;
                    }
                }
            }
            // 3. Issue the due swap-ins (memory first), or keep the map.
            for &i in &due {
                let s = &mut chosen[i];
                s.state = match s.state {
                    MapState::Out => {
                        mem.alloc(s.map.tensor, s.map.size);
                        in_bytes += s.map.size;
                        MapState::Reading(queue.push(now, s.io_ms))
                    }
                    MapState::Reading(end) => MapState::Reading(end),
                    _ => MapState::Back,
                };
            }
        }
        // 4. Wait for this op's inputs that are being read.
        let mut start = now;
        for &t in &op.inputs {
            if let Some(s) = chosen.get_mut(slot[t]) {
                if let MapState::Reading(end) = s.state {
                    start = start.max(end);
                    s.state = MapState::Back;
                }
            }
        }
        stall += start - now;
        // 5. Outputs, then workspaces.
        for &t in &op.outputs {
            mem.alloc(t, profile.tensors[t].size);
        }
        for &t in &op.temp_allocs {
            mem.alloc(t, profile.tensors[t].size);
        }
        // 6. Compute; semi-sync also waits for the swap-outs that overlap it.
        let compute_end = start + op.time_ms;
        let mut end = compute_end;
        if let Some(w) = sync_writes_end.take() {
            end = end.max(w);
        }
        stall += end - compute_end;
        // 7. Workspaces, then the release list.
        for &t in &op.temp_frees {
            mem.free(t);
        }
        for &t in &op.release {
            mem.free(t);
        }
        // 8. Swap out this op's chosen outputs.
        for &t in &op.outputs {
            if let Some(s) = chosen.get_mut(slot[t]) {
                if s.state == MapState::Waiting && mem.holds(t) {
                    let w = queue.push(end, s.io_ms);
                    out_bytes += s.map.size;
                    written_maps += 1;
                    s.state = MapState::Writing(w);
                    if mode == Mode::SemiSync {
                        sync_writes_end = Some(sync_writes_end.unwrap_or(w).max(w));
                    }
                }
            }
        }
        clock = end;
    }

    let (live_peak, live_op) = mem.live_peak();
    let (pool_bytes, pool_op) = mem.pool_peak();
    let (peak_bytes, peak_op) = match alloc {
        AllocModel::Oracle => (live_peak, live_op),
        AllocModel::Pool => (pool_bytes, pool_op),
    };
    SimResult {
        mode,
        alloc,
        peak_bytes,
        peak_op,
        live_peak_bytes: live_peak,
        live_peak_op: live_op,
        pool_bytes,
        total_ms: clock,
        compute_ms: prefix.last().copied().unwrap_or(0.0),
        stall_ms: stall,
        swapped_bytes: out_bytes + in_bytes,
        swapped_out_bytes: out_bytes,
        swapped_in_bytes: in_bytes,
        swapped_maps: written_maps,
        budget_bytes: None,
        fits: None,
    }
}
