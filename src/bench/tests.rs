use super::*;
use crate::sync::unmodelled::{AtomicUsize, Ordering};
use crate::sync::Arc;
use crate::EngineKind;

fn tiny(workload: Workload) -> Spec {
    Spec {
        n: 7,
        ..Spec::new(workload, 40)
    }
}

#[test]
fn every_workload_runs_every_op_on_every_executor() {
    for kind in [EngineKind::Naive, EngineKind::Pooled, EngineKind::PerDevice] {
        let engine = Engine::builder().kind(kind).cpu_workers(2).build().unwrap();
        for w in ALL_WORKLOADS {
            let counter = Arc::new(AtomicUsize::new(0));
            let expected = if w == Workload::Roundtrip {
                roundtrip(&engine, 40, 0, Some(&counter)).unwrap();
                40
            } else {
                let mut spec = tiny(w);
                if w == Workload::Priority {
                    spec.ops = 8; // 10 µs low-priority bodies
                }
                let trace = spec.trace();
                let r = run_trace(&engine, &trace, Some(&counter)).unwrap();
                if w == Workload::Priority {
                    assert_eq!(r.latencies_ns.len(), PRIORITY_HIGH_OPS);
                    let (p50, p99) = (
                        quantile(&r.latencies_ns, 0.5),
                        quantile(&r.latencies_ns, 0.99),
                    );
                    assert!(p50 <= p99, "{kind:?}: p50 {p50} > p99 {p99}");
                } else {
                    assert!(r.latencies_ns.is_empty());
                }
                trace.ops.len()
            };
            assert_eq!(counter.load(Ordering::Relaxed), expected, "{kind:?} {w}");
            assert_eq!(engine.pending(), 0, "{kind:?} {w}");
        }
    }
}

#[test]
fn legacy_entry_point_runs_the_old_workloads() {
    let engine = Engine::builder().cpu_workers(2).build().unwrap();
    for w in [Workload::Indep, Workload::Chain, Workload::Readers] {
        run_workload(&engine, w, 2000, 16).unwrap();
        assert_eq!(engine.pending(), 0);
    }
    assert!("bogus".parse::<Workload>().is_err());
    for w in ALL_WORKLOADS {
        assert_eq!(w.to_string().parse::<Workload>(), Ok(w));
    }
}

#[test]
fn traces_have_the_sizes_and_seeds_of_the_workloads() {
    let count = |w: Workload| tiny(w).trace().ops.len();
    assert_eq!(count(Workload::Indep), 40);
    assert_eq!(tiny(Workload::Indep).trace().vars, 40);
    assert_eq!(count(Workload::Wavefront), 49);
    assert_eq!(count(Workload::Fan), 40 * (FAN_READERS + 1));
    assert_eq!(count(Workload::Priority), 40 + PRIORITY_HIGH_OPS);
    let rw = tiny(Workload::Rwmix).trace();
    assert_eq!(rw.ops.iter().filter(|o| o.n_writes == 1).count(), 1);
    // Fixed seed: the same ops every time, within the stated bounds.
    let r = tiny(Workload::Random).trace();
    assert_eq!(r, tiny(Workload::Random).trace());
    assert!(r
        .ops
        .iter()
        .all(|o| o.n_reads <= 3 && (1..=2).contains(&o.n_writes)));
    let s = tiny(Workload::Randsum).trace();
    assert!(s
        .ops
        .iter()
        .all(|o| (2..=19).contains(&o.n_reads) && o.n_writes == 1));
    for t in [&r, &s] {
        for op in &t.ops {
            let mut ids: Vec<u32> = t.reads(op).iter().chain(t.writes(op)).copied().collect();
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(ids.len(), usize::from(op.n_reads + op.n_writes));
        }
    }
}

#[test]
fn inferred_edges_follow_reads_and_writes() {
    let mut t = Trace::new(2);
    t.push(&[], &[0], 0, 0); // 0: W a
    t.push(&[0], &[1], 0, 0); // 1: R a, W b
    t.push(&[0], &[], 0, 0); // 2: R a
    t.push(&[], &[0], 0, 0); // 3: W a after readers 1, 2
    t.push(&[], &[1], 0, 0); // 4: W b after writer 1
    let e = t.inferred_edges();
    assert_eq!(e, vec![vec![], vec![0], vec![0], vec![1, 2], vec![1]]);
}

#[test]
fn trace_file_has_the_documented_layout() {
    let mut t = Trace::new(3);
    t.push(&[2], &[0, 1], 5, 1000);
    let mut out = Vec::new();
    t.write_to(&mut out).unwrap();
    let words: Vec<u32> = out
        .chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(
        words,
        vec![TRACE_MAGIC, TRACE_VERSION, 3, 1, 5, 1000, 1, 2, 2, 0, 1]
    );
    assert_eq!(quantile(&[5, 1, 3], 0.5), 3);
    assert_eq!(Summary::of(&[3.0, 1.0, 2.0]).median, 2.0);
}
