//! Writes a hard usage-records instance with a known optimum as MiniMalloc
//! CSV: a 1 MiB × `ops` rectangle (memory × time) cut at random into `n`
//! tensors, so they pack exactly into 1 MiB, which is also the lower bound.
//!
//! ```text
//! cargo run --release --example perfect_packing -- N SEED > FILE.csv
//! depengine plan FILE.csv --strategy improve
//! ```

use depengine::util::rng::SplitMix64;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(n), Some(seed)) = (
        args.get(1).and_then(|a| a.parse::<usize>().ok()),
        args.get(2).and_then(|a| a.parse::<u64>().ok()),
    ) else {
        eprintln!("usage: perfect_packing N SEED > FILE.csv");
        std::process::exit(2);
    };
    let capacity: u64 = 1 << 20;
    let ops = n.max(64) as u64;
    let mut rng = SplitMix64::new(seed);
    // (bottom, top, first op, one past the last op)
    let mut rects: Vec<(u64, u64, u64, u64)> = vec![(0, capacity, 0, ops)];
    while rects.len() < n {
        let k = rng.below(rects.len() as u64) as usize;
        let (a, b, t0, t1) = rects[k];
        if rng.below(2) == 0 && b - a >= 2048 {
            let m = a + 1024 * rng.range_inclusive(1, (b - a) / 1024 - 1);
            rects[k] = (a, m, t0, t1);
            rects.push((m, b, t0, t1));
        } else if t1 - t0 >= 2 {
            let m = rng.range_inclusive(t0 + 1, t1 - 1);
            rects[k] = (a, b, t0, m);
            rects.push((a, b, m, t1));
        }
    }
    for i in (1..rects.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        rects.swap(i, j);
    }
    println!("id,lower,upper,size");
    for (i, &(a, b, t0, t1)) in rects.iter().enumerate() {
        println!("{i},{t0},{t1},{}", b - a);
    }
}
