//! Writes a hard usage-records instance with a known optimum as MiniMalloc
//! CSV: a 1 MiB × `ops` rectangle (memory × time) cut at random into `n`
//! tensors, so they pack exactly into 1 MiB, which is also the lower bound.
//!
//! ```text
//! cargo run --release --example perfect_packing -- N SEED > FILE.csv
//! depengine plan FILE.csv --strategy improve
//! ```

use std::io::Write;

use depengine::plan::synthetic::perfect_packing;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(n), Some(seed)) = (
        args.get(1).and_then(|a| a.parse::<usize>().ok()),
        args.get(2).and_then(|a| a.parse::<u64>().ok()),
    ) else {
        eprintln!("usage: perfect_packing N SEED > FILE.csv");
        std::process::exit(2);
    };
    // A closed pipe (`... | head`) ends the output quietly.
    let _ = write_csv(&mut std::io::stdout().lock(), n, seed);
}

fn write_csv(out: &mut impl Write, n: usize, seed: u64) -> std::io::Result<()> {
    writeln!(out, "id,lower,upper,size")?;
    for r in perfect_packing(n, seed, 1 << 20) {
        // MiniMalloc CSV: half-open lifetimes.
        writeln!(out, "{},{},{},{}", r.id, r.first, r.last + 1, r.size)?;
    }
    Ok(())
}
