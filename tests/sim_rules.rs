//! Hand-made profiles, one per rule of the simulator, with every figure
//! worked out by hand in the comments.

use std::path::PathBuf;

use depengine::sim::{simulate, AllocModel, Mode, Profile, SimConfig, SimResult, TensorKey};
use depengine::storage::rounding::Rounding;

fn fixture(name: &str) -> Profile {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/sim")
        .join(name);
    Profile::load_dir(&dir, None).unwrap_or_else(|e| panic!("{e}"))
}

fn oracle_config(bandwidth: f64) -> SimConfig {
    SimConfig {
        alloc: AllocModel::Oracle,
        rounding: Rounding::round_default(),
        bandwidth,
    }
}

fn ids(p: &Profile, ids: &[u64]) -> Vec<usize> {
    ids.iter()
        .map(|&i| p.tensor_index(TensorKey::Id(i)).unwrap())
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

fn assert_times(r: &SimResult, total: f64, stall: f64) {
    assert!(
        close(r.total_ms, total),
        "total {} != {total}: {r:?}",
        r.total_ms
    );
    assert!(
        close(r.stall_ms, stall),
        "stall {} != {stall}: {r:?}",
        r.stall_ms
    );
}

/// `order`: data (t0 = 100 B, 1 ms) -> conv (t1 = 200 B, workspaces 1:0 = 50 B
/// and 1:1 = 30 B, releases t0, 2 ms) -> conv_backward (t2 = 10 B, releases
/// t1, 0.5 ms).
///
/// Op 1: outputs first (100 + 200 = 300), then workspaces (+ 50 + 30 = 380),
/// compute, workspaces freed (300), release list (200). Op 2: 210, then 10.
/// Peak 380 at op 1. Any other order gives less (release before the
/// allocations: 280; workspaces freed before the outputs: 300).
#[test]
fn per_op_order_outputs_workspaces_compute_frees_release() {
    let p = fixture("order");
    assert_eq!(p.forward_ops, 2);
    let r = simulate(&p, Mode::Oracle, &oracle_config(1e6), &[]);
    assert_eq!(r.peak_bytes, 380);
    assert_eq!(r.peak_op, 1);
    assert_times(&r, 3.5, 0.0);
    assert_eq!(r.swapped_bytes, 0);
    // Pool (round default, 4 KiB pages): t0, t1, 1:0, 1:1 each take a
    // 4096-byte block (all four live at op 1); t2 reuses a freed one.
    let pool = simulate(&p, Mode::Pool, &SimConfig::default(), &[]);
    assert_eq!(pool.peak_bytes, 4 * 4096);
    assert_eq!(pool.live_peak_bytes, 380);
}

/// `pool`: a (t0 = 5000 B) -> b (t1 = 6000 B, releases t0) -> c (t2 = 7000 B,
/// workspace 2:0 = 3000 B, releases t1) -> c_backward (t3 = 100 B, releases t2).
///
/// Oracle: 5000; 11000 -> 6000; 13000 + 3000 = 16000 (peak) -> 7000; 7100.
/// Round pool (powers of two, 4096 minimum): t0 8192 (pool 8192); t1 8192 new
/// (16384), t0's block freed; t2 8192 reuses it; 2:0 4096 new (20480); t3 4096
/// reuses the workspace's block. Pool 20480.
/// Without rounding a block serves only its exact size: 5000, + 6000,
/// + 7000 (5000 is free but not 7000), + 3000, + 100 = 21100.
#[test]
fn pool_reuses_only_same_rounded_blocks_and_never_shrinks() {
    let p = fixture("pool");
    let oracle = simulate(&p, Mode::Oracle, &SimConfig::default(), &[]);
    assert_eq!(oracle.peak_bytes, 16000);
    let round = simulate(&p, Mode::Pool, &SimConfig::default(), &[]);
    assert_eq!(round.peak_bytes, 20480);
    let exact = SimConfig {
        rounding: Rounding::exact_default(),
        ..SimConfig::default()
    };
    assert_eq!(simulate(&p, Mode::Pool, &exact, &[]).peak_bytes, 20480);
    let none = SimConfig {
        rounding: Rounding::None,
        ..SimConfig::default()
    };
    assert_eq!(simulate(&p, Mode::Pool, &none, &[]).peak_bytes, 21100);
}

/// `semi_sync`, 1 ms per op, disk 500,000 B/s (t0 = 1000 B moves in 2 ms):
/// fwd0 (t0) -> fwd1 (reads t0; t1 = 100) -> fwd2 (reads t1; t2 = 500; releases
/// t1) -> head_backward (reads t2; t3 = 100; releases t2) -> fwd2_backward
/// (reads t3; t4 = 100; releases t3) -> fwd0_backward (reads t0, t4; t5 = 10).
///
/// Without swapping: 1000, 1100, 1600 (peak, op 2), ... 6 ms.
/// Semi-sync, t0 swapped:
/// - op 0 [0, 1]: 1000. Swap-out of t0 queued at 1, on disk 1..3.
/// - op 1 [1, 3]: 1100; compute ends at 2 but op 1 ends with the write at 3
///   (stall 1).
/// - op 2 starts at 3: t0 written and its last forward use (op 1) passed:
///   released (100). + t2 = 600, release t1: 500. Ends 4.
/// - op 3 [4, 5]: 600 -> 100.
/// - op 4 starts at 5: op 5 reads t0, so its swap-in starts now: + 1000 =
///   1100, on disk 5..7; + t4 = 1200 (peak); release t3: 1100. Ends 6.
/// - op 5: the swap-in cannot be hidden, op 5 waits from 6 to 7 (stall 1),
///   ends at 8.
///
/// Peak 1200, total 8 ms, stall 2 ms, 2000 bytes moved (1000 out, 1000 in).
#[test]
fn semi_sync_waits_for_writes_and_for_a_swap_in_it_cannot_hide() {
    let p = fixture("semi_sync");
    let cfg = oracle_config(500_000.0);
    let base = simulate(&p, Mode::Oracle, &cfg, &[]);
    assert_eq!(base.peak_bytes, 1600);
    assert_times(&base, 6.0, 0.0);
    let r = simulate(&p, Mode::SemiSync, &cfg, &ids(&p, &[0]));
    assert_eq!(r.peak_bytes, 1200);
    assert_eq!(r.peak_op, 4);
    assert_times(&r, 8.0, 2.0);
    assert_eq!(r.swapped_bytes, 2000);
    assert_eq!((r.swapped_out_bytes, r.swapped_in_bytes), (1000, 1000));
    assert_eq!(r.swapped_maps, 1);
}

/// `release_rule`, 1 ms per op, disk 2,000,000 B/s (t0 = 1000 B in 0.5 ms):
/// fwd0 (t0) -> fwd1 (reads t0; t1 = 100) -> fwd2 (reads t0, t1; t2 = 300;
/// releases t1) -> fwd3 (reads t2; t3 = 700; releases t2) -> fwd3_backward
/// (t4 = 100; releases t3) -> mid_backward (t5 = 100; releases t4) ->
/// fwd0_backward (reads t0, t5; t6 = 10).
///
/// Without swapping the peak is at op 3: t0 + t2 + t3 = 2000.
/// Async, t0 swapped: its swap-out ends at 1.5 ms, but fwd2 still reads it,
/// so it stays in memory through op 2: 1000 + 100 + 300 = 1400 (the peak).
/// At op 3's start (3 ms) its last forward use has passed: released, and op
/// 3 holds 300 + 700 = 1000 only. Its swap-in is issued at the latest op
/// start that hides it: needed at 6, 0.5 ms of IO, so op 5's start (5 ms)
/// and not op 4's (5 ms is still before 5.5): op 5 holds 1000 + 100 + 100 =
/// 1200. No stall; 7 ms; 2000 bytes moved.
/// (Releasing as soon as the write ends would give a peak of 1200.)
#[test]
fn swapped_map_is_released_only_after_its_last_forward_use() {
    let p = fixture("release_rule");
    let cfg = oracle_config(2_000_000.0);
    assert_eq!(simulate(&p, Mode::Oracle, &cfg, &[]).peak_bytes, 2000);
    let r = simulate(&p, Mode::Async, &cfg, &ids(&p, &[0]));
    assert_eq!(r.peak_bytes, 1400);
    assert_eq!(r.peak_op, 2);
    assert_times(&r, 7.0, 0.0);
    assert_eq!(r.swapped_bytes, 2000);
}

/// `async_stall`, 1 ms per op, disk 1,000,000 B/s (1000 B in 1 ms); forward
/// ops 0..4; t0 and t1 (1000 B each) both swapped, both first read by op 5.
/// - op 0 [0, 1]: t0; its write on disk 1..2. op 1 [1, 2]: + t1 = 2000; its
///   write 2..3. op 2 [2, 3]: t0 released at its start (written at 2, last
///   forward use op 1): 1000 + t2 = 1100.
/// - op 3 (the last forward op, the earliest swap-in point) starts at 3. The
///   swap-ins are decided before the releases, so only t0 is out: it must
///   end by op 5's start (5), latest start 4; waiting for op 4 (at 4) is in
///   time, so nothing is issued. Then t1 is released (written at 3, last
///   forward use op 2): 100 + t3 = 200.
/// - op 4 starts at 4: t0 and t1 are out; on the one queue t1's latest start
///   is 5 - 1 = 4 and t0's 4 - 1 = 3: both are due (waiting for op 5 would
///   start them at 5). t0 read 4..5, t1 read 5..6, memory allocated at issue:
///   100 + 2000 + t4 = 2200 (peak).
/// - op 5 starts at 5 but waits for t1 until 6 (stall 1 ms); ends at 7.
///
/// Two 1 ms reads cannot fit in op 4's 1 ms: one stalls. 4000 bytes moved.
#[test]
fn async_swap_in_that_the_queue_cannot_hide_stalls() {
    let p = fixture("async_stall");
    let cfg = oracle_config(1_000_000.0);
    let r = simulate(&p, Mode::Async, &cfg, &ids(&p, &[0, 1]));
    assert_eq!(r.peak_bytes, 2200);
    assert_eq!(r.peak_op, 4);
    assert_times(&r, 7.0, 1.0);
    assert_eq!(r.swapped_bytes, 4000);
    assert_eq!(r.swapped_maps, 2);
}

/// With nothing chosen every mode gives the oracle/pool figures and the sum
/// of op times.
#[test]
fn swap_modes_without_a_swap_set_change_nothing() {
    for name in ["order", "pool", "semi_sync", "release_rule", "async_stall"] {
        let p = fixture(name);
        let cfg = SimConfig::default();
        let pool = simulate(&p, Mode::Pool, &cfg, &[]);
        for mode in Mode::SWAP {
            let r = simulate(&p, mode, &cfg, &[]);
            assert_eq!(r.peak_bytes, pool.peak_bytes, "{name} {mode}");
            assert_eq!(r.total_ms, p.compute_ms(), "{name} {mode}");
            assert_eq!(r.swapped_bytes, 0);
        }
    }
}

/// The policy on `semi_sync` (oracle accounting, 500,000 B/s). Feature maps:
/// t0 (1000 B, last forward use op 1, first backward use op 5: 3 ms idle,
/// rank score 3000) and t2 (500 B, produced by op 2 and read by op 3 at
/// once: score 0). The unswapped peak, 1600, is at op 2, inside t0's idle
/// window: swapping t0 gives 1200 (worked out above).
/// - budget 1300: {t0}, peak 1200, fits; dropping t0 would not fit.
/// - budget 1000: t0 is the only map that can leave memory (t2 has no op
///   between its uses); the plan keeps the lowest peak, 1200, and says it
///   does not fit.
#[test]
fn policy_swaps_what_lowers_the_peak_and_says_when_it_cannot_fit() {
    use depengine::sim::policy::choose;
    let p = fixture("semi_sync");
    let cfg = oracle_config(500_000.0);
    let plan = choose(&p, Mode::SemiSync, &cfg, 1300);
    assert_eq!(plan.swap, ids(&p, &[0]));
    assert_eq!(plan.result.peak_bytes, 1200);
    assert_eq!(plan.result.fits, Some(true));
    assert_times(&plan.result, 8.0, 2.0);

    let plan = choose(&p, Mode::SemiSync, &cfg, 1000);
    assert_eq!(plan.swap, ids(&p, &[0]));
    assert_eq!(plan.result.peak_bytes, 1200);
    assert_eq!(plan.result.fits, Some(false));

    // Oracle and pool never swap; they only say whether they fit.
    let plan = choose(&p, Mode::Oracle, &cfg, 1000);
    assert!(plan.swap.is_empty());
    assert_eq!(plan.result.fits, Some(false));
}
