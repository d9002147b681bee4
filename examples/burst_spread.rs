//! How fast a burst of ready ops reaches every worker of a pool.
//!
//! Each round pushes one write of `x` (a busy body of `GAP_US`, long
//! enough for the idle workers to stop searching and sleep), then `READERS`
//! reads of `x`: the write's completion makes them all ready at once, as
//! in the `fan` and `rwmix` workloads. The reads sleep instead of spinning,
//! so a pool of more workers than the machine has cores still runs them
//! all at once; what the example times is the wake-up path alone: from the
//! end of the write to the start of the read that brings the count of
//! reads started to half the pool, and to the whole pool. It prints the
//! median over the rounds, and the 90th percentile of the latter.
//!
//! Run with `cargo run --release --example burst_spread -- [WORKERS
//! [READERS [ROUNDS [GAP_US]]]]` (defaults 16, 100, 40, 10).

use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use depengine::{Engine, EngineKind, OpDesc};
use parking_lot::Mutex;

/// How long each read holds its worker (asleep, not on a core).
const READ_HOLD: Duration = Duration::from_millis(2);

/// The `i`-th command-line argument as a number, or `default`.
fn arg(i: usize, default: u64) -> Result<u64, Box<dyn Error>> {
    match std::env::args().nth(i) {
        None => Ok(default),
        Some(a) => a
            .parse()
            .map_err(|e| format!("argument {i} ({a:?}) is not a whole number: {e}").into()),
    }
}

/// The `q`-quantile of sorted nanoseconds, in microseconds.
fn quantile_us(sorted: &[u64], q: f64) -> f64 {
    let at = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[at] as f64 / 1e3
}

fn main() -> Result<(), Box<dyn Error>> {
    let workers = usize::try_from(arg(1, 16)?)?;
    let readers = usize::try_from(arg(2, 100)?)?;
    let rounds = usize::try_from(arg(3, 40)?)?;
    let gap = Duration::from_micros(arg(4, 10)?);
    if workers < 2 || readers < workers || rounds == 0 {
        return Err("needs at least 2 workers, as many readers as workers, and a round".into());
    }
    let engine = Engine::builder()
        .kind(EngineKind::PerDevice)
        .cpu_workers(workers)
        .build()?;
    let x = engine.new_var();
    let t0 = Instant::now();
    let (mut half, mut full) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for _ in 0..rounds {
        let write_end = Arc::new(Mutex::new(0u64));
        let starts = Arc::new(Mutex::new(Vec::with_capacity(readers)));
        let end = write_end.clone();
        engine.push(OpDesc::new("write").writes(&x), move |_| {
            let until = Instant::now() + gap;
            while Instant::now() < until {}
            *end.lock() = t0.elapsed().as_nanos() as u64;
            Ok(())
        })?;
        for _ in 0..readers {
            let starts = starts.clone();
            engine.push(OpDesc::new("read").reads(&x), move |_| {
                starts.lock().push(t0.elapsed().as_nanos() as u64);
                std::thread::sleep(READ_HOLD);
                Ok(())
            })?;
        }
        engine.wait_for_all()?;
        let end = *write_end.lock();
        let mut s = starts.lock().clone();
        s.sort_unstable();
        assert_eq!(s.len(), readers, "every read ran once");
        half.push(s[workers / 2 - 1].saturating_sub(end));
        full.push(s[workers - 1].saturating_sub(end));
    }
    half.sort_unstable();
    full.sort_unstable();
    println!(
        "workers={workers} readers={readers} rounds={rounds} gap_us={} \
         half_pool_median_us={:.1} whole_pool_median_us={:.1} whole_pool_p90_us={:.1}",
        gap.as_micros(),
        quantile_us(&half, 0.5),
        quantile_us(&full, 0.5),
        quantile_us(&full, 0.9),
    );
    Ok(())
}
