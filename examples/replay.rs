//! A graph captured once and pushed many times: a 1-D smoothing stencil
//! over blocks of a vector, a few sweeps per replay. Block `k` of a sweep
//! reads blocks `k - 1`, `k` and `k + 1` of the previous one, so sweeps
//! overlap as a wavefront instead of waiting for each other whole.
//!
//! The blocks' order lives in private vars of the replay (two generations
//! of blocks, written in turn), so the engine infers the edges once, when
//! the replay is built, instead of at every push. The example checks the
//! result against a serial run and prints the time per node of the replay
//! and of the same ops pushed one by one.
//!
//! Run with `cargo run --release --example replay`.

use std::error::Error;
use std::sync::Arc;
use std::time::Instant;

use depengine::{Engine, OpDesc, PrivateAccess, Var};
use parking_lot::Mutex;

const BLOCKS: usize = 16;
const LEN: usize = 1024;
/// Sweeps per replay; even, so each replay ends in generation 0.
const SWEEPS: usize = 8;
const PUSHES: usize = 200;

/// Two generations of blocks: sweep `s` reads generation `s % 2` and
/// writes the other.
type Gens = Arc<[Vec<Mutex<Vec<f64>>>; 2]>;

/// One block of one sweep: the mean of each value and its two neighbours,
/// the ends of the vector held fixed.
fn sweep_block(gens: &Gens, sweep: usize, k: usize) {
    let (src, dst) = (&gens[sweep % 2], &gens[(sweep + 1) % 2]);
    let left = (k > 0).then(|| *src[k - 1].lock().last().unwrap());
    let right = (k + 1 < BLOCKS).then(|| src[k + 1].lock()[0]);
    let mid = src[k].lock();
    let mut out = dst[k].lock();
    for i in 0..LEN {
        let l = if i > 0 { Some(mid[i - 1]) } else { left };
        let r = if i + 1 < LEN { Some(mid[i + 1]) } else { right };
        out[i] = match (l, r) {
            (Some(l), Some(r)) => (l + mid[i] + r) / 3.0,
            _ => mid[i],
        };
    }
}

fn fresh() -> Gens {
    let block = |k: usize| Mutex::new((0..LEN).map(|i| ((k * LEN + i) % 97) as f64).collect());
    Arc::new([
        (0..BLOCKS).map(block).collect(),
        (0..BLOCKS).map(block).collect(),
    ])
}

fn snapshot(gens: &Gens) -> Vec<f64> {
    gens[0].iter().flat_map(|b| b.lock().clone()).collect()
}

fn main() -> Result<(), Box<dyn Error>> {
    let engine = Engine::builder().build()?;

    // Capture: one node per block per sweep.
    let gens = fresh();
    let mut builder = engine.replay_builder("smooth");
    let vars: [Vec<_>; 2] = [
        (0..BLOCKS).map(|_| builder.private_var()).collect(),
        (0..BLOCKS).map(|_| builder.private_var()).collect(),
    ];
    for sweep in 0..SWEEPS {
        let (src, dst) = (&vars[sweep % 2], &vars[(sweep + 1) % 2]);
        for (k, &out) in dst.iter().enumerate() {
            let reads: Vec<_> = (k.saturating_sub(1)..(k + 2).min(BLOCKS))
                .map(|j| src[j])
                .collect();
            let writes = [out];
            let g = gens.clone();
            builder.push_with(
                OpDesc::new("sweep block"),
                PrivateAccess::new().reads(&reads).writes(&writes),
                move || {
                    sweep_block(&g, sweep, k);
                    Ok(())
                },
            )?;
        }
    }
    let replay = builder.build();
    println!(
        "captured {} nodes and {} edges: {} sweeps of {} blocks",
        replay.len(),
        replay.edges(),
        SWEEPS,
        BLOCKS
    );

    let start = Instant::now();
    for _ in 0..PUSHES {
        engine.push_replay(&replay)?;
    }
    engine.wait_for_all()?;
    let replayed = start.elapsed();
    let result = snapshot(&gens);

    // The same ops pushed one by one, on engine vars.
    let pushed_gens = fresh();
    let evars: [Vec<Var>; 2] = [
        (0..BLOCKS).map(|_| engine.new_var()).collect(),
        (0..BLOCKS).map(|_| engine.new_var()).collect(),
    ];
    let start = Instant::now();
    for _ in 0..PUSHES {
        for sweep in 0..SWEEPS {
            let (src, dst) = (&evars[sweep % 2], &evars[(sweep + 1) % 2]);
            for (k, out) in dst.iter().enumerate() {
                let reads: Vec<&Var> = (k.saturating_sub(1)..(k + 2).min(BLOCKS))
                    .map(|j| &src[j])
                    .collect();
                let g = pushed_gens.clone();
                engine.push(
                    OpDesc::new("sweep block").reads(&reads).writes(&[out]),
                    move |_| {
                        sweep_block(&g, sweep, k);
                        Ok(())
                    },
                )?;
            }
        }
    }
    engine.wait_for_all()?;
    let pushed = start.elapsed();

    // Serial, for the check.
    let serial = fresh();
    for _ in 0..PUSHES {
        for sweep in 0..SWEEPS {
            for k in 0..BLOCKS {
                sweep_block(&serial, sweep, k);
            }
        }
    }
    let expected = snapshot(&serial);
    assert_eq!(result, expected, "the replay differs from the serial run");
    assert_eq!(snapshot(&pushed_gens), expected, "the pushes differ");

    let nodes = (PUSHES * replay.len()) as f64;
    println!(
        "{PUSHES} pushes of the replay: {:.0} ns per node; the same ops pushed one by one: {:.0} ns per op; both match the serial run",
        replayed.as_nanos() as f64 / nodes,
        pushed.as_nanos() as f64 / nodes
    );
    Ok(())
}
