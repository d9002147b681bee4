//! What a scheduler with no overhead at all would make of a trace: the
//! yardstick for the measured efficiencies.
//!
//! A measured efficiency below 1 mixes two things: the engine's own cost
//! (pushing, dependency tracking, waking workers) and the shape of the
//! workload, whose dependencies may leave workers idle however fast the
//! engine is (`rwmix` serialises on every 64th op, `randsum` reads a fifth of
//! all vars per op). [`ideal_schedule`] separates them: it list-schedules the
//! trace's inferred graph on `workers` workers with every op taking exactly
//! its body time and nothing else costing anything, ready ops taken by
//! priority and then in push order (the order the engine's queues keep).
//! The gap between its efficiency and a measured one is the engine's.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::Trace;

/// The zero-overhead schedule of a trace, see [`ideal_schedule`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IdealSchedule {
    /// Time from the first start to the last finish, in nanoseconds.
    pub makespan_ns: u64,
    /// Longest chain of dependent bodies, in nanoseconds: no schedule on
    /// any number of workers is shorter.
    pub critical_path_ns: u64,
    /// Total body time / (workers × makespan); 0 for a trace whose bodies
    /// are all empty.
    pub efficiency: f64,
}

/// List-schedules `trace` on `workers` workers (at least 1) with no cost but
/// the bodies: whenever a worker is free and an op is ready, the ready op of
/// highest priority, then earliest push, starts at once.
///
/// Greedy list scheduling is not always optimal, but it is what a perfect
/// work-conserving engine does, and it is within a factor
/// `2 − 1/workers` of the optimum (Graham's bound), which the tests check
/// through `makespan ≤ work / workers + critical path`.
///
/// # Example
///
/// ```
/// use depengine::bench::{ideal_schedule, Spec, Workload};
///
/// // 10 independent 1 µs ops on 4 workers: 3 rounds, the last one 2/4 full.
/// let spec = Spec { body_ns: 1_000, ..Spec::new(Workload::IndepNoVars, 10) };
/// let ideal = ideal_schedule(&spec.trace(), 4);
/// assert_eq!(ideal.makespan_ns, 3_000);
/// assert!((ideal.efficiency - 10.0 / 12.0).abs() < 1e-9);
/// ```
pub fn ideal_schedule(trace: &Trace, workers: usize) -> IdealSchedule {
    let workers = workers.max(1);
    let preds = trace.inferred_edges();
    let n = trace.ops.len();
    let mut succs: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut waiting: Vec<usize> = vec![0; n];
    let mut path_end = vec![0u64; n]; // critical path ending with op i
    let mut critical_path_ns = 0u64;
    for (i, p) in preds.iter().enumerate() {
        waiting[i] = p.len();
        let before = p.iter().map(|&q| path_end[q as usize]).max().unwrap_or(0);
        path_end[i] = before + u64::from(trace.ops[i].body_ns);
        critical_path_ns = critical_path_ns.max(path_end[i]);
        for &q in p {
            succs[q as usize].push(i as u32);
        }
    }
    drop(preds);

    // Ready ops: highest priority first, then earliest push.
    let mut ready: BinaryHeap<(i32, Reverse<u32>)> = BinaryHeap::new();
    for (i, &w) in waiting.iter().enumerate() {
        if w == 0 {
            ready.push((trace.ops[i].priority, Reverse(i as u32)));
        }
    }
    // Running ops by finish time.
    let mut running: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::new();
    let mut now = 0u64;
    let mut done = 0usize;
    while done < n {
        while running.len() < workers {
            let Some((_, Reverse(i))) = ready.pop() else {
                break;
            };
            let end = now + u64::from(trace.ops[i as usize].body_ns);
            running.push(Reverse((end, i)));
        }
        // Every op finishes; the graph is acyclic (edges go to earlier ops),
        // so while ops remain, something is running.
        let Reverse((t, _)) = *running
            .peek()
            .expect("an acyclic trace always has a running op");
        now = t;
        while let Some(&Reverse((t, i))) = running.peek() {
            if t != now {
                break;
            }
            running.pop();
            done += 1;
            for &s in &succs[i as usize] {
                waiting[s as usize] -= 1;
                if waiting[s as usize] == 0 {
                    ready.push((trace.ops[s as usize].priority, Reverse(s)));
                }
            }
        }
    }
    let work = trace.total_body_ns();
    let efficiency = if work == 0 || now == 0 {
        0.0
    } else {
        work as f64 / (workers as f64 * now as f64)
    };
    IdealSchedule {
        makespan_ns: now,
        critical_path_ns,
        efficiency,
    }
}
