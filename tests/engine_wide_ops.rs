//! Ops of many vars, whose completions release many ops at once: the
//! `fan` shape (a writer of `x`, readers of `x` each writing its own `y_k`,
//! then the next round's writer reading every `y_k`), with values, checked
//! against the same rounds run serially on every executor.
//!
//! The completion of an op of eight vars or more grants the writes its
//! reads' completions start through a window (`GrantWindow`, `ready.rs`); with
//! 40 `y_k` each such completion keeps the window full, so grants are held
//! back and made late. A grant lost would hang the run, one made twice
//! trips the engine's check on the op's count (a panic in a completion
//! aborts the process), and an op let in before its vars would break the
//! values.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use depengine::util::rng::SplitMix64;
use depengine::{Engine, EngineKind, OpDesc, Var};

const READERS: usize = 40;
const ROUNDS: u64 = 150;

/// What the round's writer makes of `x` and the `y_k`.
fn next_x(x: u64, ys: impl Iterator<Item = u64>, round: u64) -> u64 {
    ys.fold(x.wrapping_mul(31).wrapping_add(round), |acc, y| {
        acc.rotate_left(5) ^ y
    })
}

/// What reader `k` makes of its `y_k` from `x`.
fn next_y(y: u64, x: u64, k: usize) -> u64 {
    y.wrapping_mul(7).wrapping_add(x).wrapping_add(k as u64)
}

fn serial() -> (u64, Vec<u64>) {
    let (mut x, mut ys) = (1u64, vec![0u64; READERS]);
    for round in 0..ROUNDS {
        x = next_x(x, ys.iter().copied(), round);
        for (k, y) in ys.iter_mut().enumerate() {
            *y = next_y(*y, x, k);
        }
    }
    (x, ys)
}

/// A short busy wait of a random length, so that ops finish out of the
/// order they were made ready in.
fn jitter(rng: &mut SplitMix64) -> u32 {
    rng.below(64) as u32
}

fn spin(n: u32) {
    for i in 0..n {
        std::hint::black_box(i);
    }
}

fn check(kind: EngineKind, workers: usize) {
    // With workers, each round's writer waits in its body until the
    // round's readers are pushed, so that their writes queue behind its
    // reads and its completion starts them (the windowed grants). The
    // naive executor runs the writer at its push: it must not wait.
    let hold_writer = kind != EngineKind::Naive;
    let pushed_rounds = Arc::new(AtomicU64::new(0));
    let engine = Engine::builder()
        .kind(kind)
        .cpu_workers(workers)
        .build()
        .unwrap();
    // One cell per var, written only by the ops that write the var: the
    // engine's ordering is what makes each op see the values before it.
    let cells: Arc<Vec<AtomicU64>> = Arc::new((0..=READERS).map(|_| AtomicU64::new(0)).collect());
    cells[0].store(1, Ordering::Relaxed);
    let x: Var = engine.new_var();
    let ys: Vec<Var> = (0..READERS).map(|_| engine.new_var()).collect();
    let y_refs: Vec<&Var> = ys.iter().collect();
    let mut rng = SplitMix64::new(0xFA11 ^ workers as u64);
    for round in 0..ROUNDS {
        let (c, n) = (cells.clone(), jitter(&mut rng));
        let pushed = pushed_rounds.clone();
        engine
            .push(OpDesc::new("writer").reads(&y_refs).writes(&x), move |_| {
                while hold_writer && pushed.load(Ordering::Acquire) <= round {
                    std::thread::yield_now();
                }
                spin(n);
                let ys = (1..=READERS).map(|k| c[k].load(Ordering::Relaxed));
                let x = next_x(c[0].load(Ordering::Relaxed), ys, round);
                c[0].store(x, Ordering::Relaxed);
                Ok(())
            })
            .unwrap();
        for (k, y) in ys.iter().enumerate() {
            let (c, n) = (cells.clone(), jitter(&mut rng));
            engine
                .push(OpDesc::new("reader").reads(&x).writes(y), move |_| {
                    spin(n);
                    let x = c[0].load(Ordering::Relaxed);
                    let y = next_y(c[k + 1].load(Ordering::Relaxed), x, k);
                    c[k + 1].store(y, Ordering::Relaxed);
                    Ok(())
                })
                .unwrap();
        }
        pushed_rounds.store(round + 1, Ordering::Release);
    }
    engine.wait_for_all().unwrap();
    let (want_x, want_ys) = serial();
    assert_eq!(
        cells[0].load(Ordering::Relaxed),
        want_x,
        "{kind:?} x{workers}: x differs from the serial run"
    );
    for (k, want) in want_ys.iter().enumerate() {
        assert_eq!(
            cells[k + 1].load(Ordering::Relaxed),
            *want,
            "{kind:?} x{workers}: y_{k} differs from the serial run"
        );
    }
    assert_eq!(x.version(), ROUNDS);
    assert!(ys.iter().all(|y| y.version() == ROUNDS));
}

#[test]
fn fan_rounds_naive() {
    check(EngineKind::Naive, 1);
}

#[test]
fn fan_rounds_pooled_2() {
    check(EngineKind::Pooled, 2);
}

#[test]
fn fan_rounds_per_device_1() {
    check(EngineKind::PerDevice, 1);
}

#[test]
fn fan_rounds_per_device_2() {
    check(EngineKind::PerDevice, 2);
}

#[test]
fn fan_rounds_per_device_4() {
    check(EngineKind::PerDevice, 4);
}
