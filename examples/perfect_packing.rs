//! Writes a hard usage-records instance with a known optimum as MiniMalloc
//! CSV: a 1 MiB × `ops` rectangle (memory × time) cut at random into `n`
//! tensors, so they pack exactly into 1 MiB, which is also the lower bound.
//!
//! ```text
//! cargo run --release --example perfect_packing -- N SEED > FILE.csv
//! depengine plan FILE.csv --strategy improve
//! ```

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
    println!("id,lower,upper,size");
    for r in perfect_packing(n, seed, 1 << 20) {
        // MiniMalloc CSV: half-open lifetimes.
        println!("{},{},{},{}", r.id, r.first, r.last + 1, r.size);
    }
}
