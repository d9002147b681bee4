//! What an op of a random test program does, for the tests that run one
//! program two ways and compare what the ops saw (`engine_serial.rs`,
//! `engine_push_all.rs`).

use std::sync::atomic::{AtomicU64, Ordering};

/// Op `i` folds what it reads into `seen[i]` and its index into each var
/// it writes (once per var, rule 2), so that any reordering or skipped op
/// changes some figure.
pub(crate) fn fold(
    i: usize,
    reads: &[usize],
    writes: &[usize],
    values: &[AtomicU64],
    seen: &[AtomicU64],
) {
    let mut h = i as u64 + 1;
    for &r in reads {
        h = h
            .wrapping_mul(31)
            .wrapping_add(values[r].load(Ordering::SeqCst));
    }
    seen[i].store(h, Ordering::SeqCst);
    let mut done: Vec<usize> = Vec::new();
    for &w in writes {
        if !done.contains(&w) {
            done.push(w);
            let v = values[w].load(Ordering::SeqCst);
            values[w].store(
                v.wrapping_mul(1_000_003).wrapping_add(i as u64),
                Ordering::SeqCst,
            );
        }
    }
}
