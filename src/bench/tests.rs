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
fn several_pushers_push_every_op_once() {
    for kind in [EngineKind::Naive, EngineKind::Pooled, EngineKind::PerDevice] {
        let engine = Engine::builder().kind(kind).cpu_workers(2).build().unwrap();
        for w in [Workload::Indep, Workload::IndepNoVars] {
            let trace = Spec::new(w, 1001).trace();
            for pushers in [1, 3] {
                let counter = Arc::new(AtomicUsize::new(0));
                let r = run_trace_pushers(&engine, &trace, Some(&counter), pushers).unwrap();
                assert_eq!(
                    counter.load(Ordering::Relaxed),
                    1001,
                    "{kind:?} {w} {pushers}"
                );
                assert!(r.push_elapsed <= r.elapsed);
                assert_eq!(engine.pending(), 0);
            }
        }
    }
}

#[test]
fn a_captured_trace_runs_in_full_at_every_push() {
    // 20 ops of 200 µs on one var: a chain, so no run can take less than
    // 4 ms, however many workers, unless nodes are skipped or run out of
    // order alongside one another.
    let engine = Engine::builder().cpu_workers(2).build().unwrap();
    let trace = Spec {
        body_ns: 200_000,
        ..Spec::new(Workload::Chain, 20)
    }
    .trace();
    for vars in [ReplayVars::Private, ReplayVars::Engine] {
        let captured = TraceReplay::capture(&engine, &trace, vars).unwrap();
        assert_eq!(captured.len(), 20);
        for _ in 0..3 {
            let r = captured.run(&engine).unwrap();
            assert!(
                r.elapsed >= std::time::Duration::from_millis(4),
                "{vars:?}: {:?}",
                r.elapsed
            );
            assert!(r.push_elapsed <= r.elapsed);
            assert_eq!(engine.pending(), 0);
        }
        captured.release(&engine).unwrap();
        assert_eq!(engine.pending(), 0);
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
    assert_eq!(quantile(&[2.5, 0.5, 1.5, 1.0], 0.25), 0.5);
    assert_eq!(quantile::<f64>(&[], 0.5), 0.0);
    assert_eq!(Summary::of(&[3.0, 1.0, 2.0]).median, 2.0);
}

/// Ops in a row on `workers`, each `body_ns`: the makespan of independent
/// ops packed in full rounds.
fn rounds(ops: u64, workers: u64) -> u64 {
    ops.div_ceil(workers)
}

#[test]
fn ideal_schedule_of_independent_ops_fills_rounds() {
    for (ops, workers) in [(1, 1), (10, 4), (64, 16), (65, 16), (1000, 7)] {
        let spec = Spec {
            body_ns: 1_000,
            ..Spec::new(Workload::IndepNoVars, ops)
        };
        let ideal = ideal_schedule(&spec.trace(), workers);
        let r = rounds(ops as u64, workers as u64);
        assert_eq!(ideal.makespan_ns, r * 1_000, "{ops} ops on {workers}");
        assert_eq!(ideal.critical_path_ns, 1_000);
        let expected = ops as f64 / (workers as u64 * r) as f64;
        assert!((ideal.efficiency - expected).abs() < 1e-12);
    }
}

#[test]
fn ideal_schedule_of_a_chain_uses_one_worker() {
    let spec = Spec {
        body_ns: 500,
        ..Spec::new(Workload::Chain, 100)
    };
    for workers in [1, 2, 16] {
        let ideal = ideal_schedule(&spec.trace(), workers);
        assert_eq!(ideal.makespan_ns, 50_000);
        assert_eq!(ideal.critical_path_ns, 50_000);
        assert!((ideal.efficiency - 1.0 / workers as f64).abs() < 1e-12);
    }
}

#[test]
fn ideal_schedule_of_rwmix_runs_each_writer_alone_then_its_readers() {
    // Groups of 64 ops: one writer, then 63 readers that only it orders.
    let groups = 20u64;
    let spec = Spec {
        body_ns: 1_000,
        ..Spec::new(Workload::Rwmix, (64 * groups) as usize)
    };
    for workers in [1u64, 2, 3, 8, 16, 64] {
        let ideal = ideal_schedule(&spec.trace(), workers as usize);
        let steps = groups * (1 + rounds(63, workers));
        assert_eq!(ideal.makespan_ns, steps * 1_000, "{workers} workers");
        assert_eq!(ideal.critical_path_ns, groups * 2 * 1_000);
    }
}

#[test]
fn ideal_schedule_lies_between_the_lower_bounds_and_grahams_bound() {
    let mut rng = SplitMix64::new(7);
    for case in 0..40 {
        let vars = rng.range(1, 12) as usize;
        let mut t = Trace::new(vars);
        for _ in 0..rng.range(1, 300) {
            let mut ids: Vec<u32> = (0..vars as u32).collect();
            // Distinct vars: a shuffled prefix split into reads and writes.
            for i in (1..ids.len()).rev() {
                ids.swap(i, rng.range(0, i as u32) as usize);
            }
            let k = rng.range(0, vars.min(4) as u32) as usize;
            let r = rng.range(0, k as u32) as usize;
            let body = rng.range(0, 5_000);
            t.push(&ids[..r], &ids[r..k], rng.range(0, 2) as i32, body);
        }
        let work = t.total_body_ns();
        for workers in 1..=5u64 {
            let ideal = ideal_schedule(&t, workers as usize);
            let m = ideal.makespan_ns;
            assert!(
                m >= ideal.critical_path_ns,
                "case {case}: below the critical path"
            );
            assert!(m * workers >= work, "case {case}: below work / workers");
            assert!(
                m * workers <= work + workers * ideal.critical_path_ns,
                "case {case}: above Graham's bound on {workers} workers"
            );
            if workers == 1 {
                assert_eq!(
                    m, work,
                    "case {case}: one worker runs the bodies back to back"
                );
            }
            assert!(ideal.efficiency <= 1.0 + 1e-12);
        }
    }
}

#[test]
fn a_specs_size_bounds_the_trace_it_builds() {
    for w in ALL_WORKLOADS {
        for spec in [tiny(w), Spec { vars: 3, ..tiny(w) }, Spec::new(w, 1)] {
            let size = spec.check().unwrap();
            assert_eq!(size, spec.size());
            let t = spec.try_trace().unwrap();
            assert_eq!(size.ops, t.ops.len() as u128, "{spec:?}");
            assert_eq!(size.vars, t.vars as u128, "{spec:?}");
            let refs = t.var_ids.len() as u128;
            assert!(refs <= size.var_ids, "{spec:?}: {refs} > {size:?}");
            // Exact where no draw or edge makes fewer.
            if !matches!(
                w,
                Workload::Random | Workload::Randsum | Workload::Wavefront | Workload::Fan
            ) {
                assert_eq!(refs, size.var_ids, "{spec:?}");
            }
            assert_eq!(t, spec.trace());
        }
    }
    // fan's bound is met once round 0 is past: its writer reads no y_k.
    let fan = Spec::new(Workload::Fan, 3);
    let refs = fan.trace().var_ids.len() as u128;
    assert_eq!(refs + FAN_READERS as u128, fan.size().var_ids);
}

#[test]
fn a_spec_past_a_traces_32_bit_ids_is_refused_before_anything_is_built() {
    let side = |n: usize| Spec {
        n,
        ..Spec::new(Workload::Wavefront, 0)
    };
    // 65,536^2 = 2^32 cells: one op past the limit.
    match side(1 << 16).check() {
        Err(SpecError::TooLarge { what, count, .. }) => {
            assert_eq!((what, count), ("ops", 1u128 << 32));
        }
        other => panic!("{other:?}"),
    }
    // One cell a side fewer fits in ops, not in its three references each.
    match side((1 << 16) - 1).check() {
        Err(
            e @ SpecError::TooLarge {
                what: "var references",
                ..
            },
        ) => {
            assert!(e.to_string().contains("smaller grid (--n)"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    let limit = TRACE_LIMIT as usize;
    let indep = Spec::new(Workload::Indep, limit);
    assert_eq!(indep.check().map(|s| s.ops), Ok(u128::from(TRACE_LIMIT)));
    assert!(matches!(
        Spec::new(Workload::Indep, limit + 1).check(),
        Err(SpecError::TooLarge { what: "ops", .. })
    ));
    assert!(matches!(
        Spec {
            vars: limit + 1,
            ..Spec::new(Workload::Readers, 10)
        }
        .check(),
        Err(SpecError::TooLarge { what: "vars", .. })
    ));
    // random: up to five references an op.
    assert!(Spec::new(Workload::Random, limit / 5).check().is_ok());
    assert!(matches!(
        Spec::new(Workload::Random, limit / 5 + 1).check(),
        Err(SpecError::TooLarge {
            what: "var references",
            ..
        })
    ));
    // Sizes past usize's reach on any machine are worked out, not wrapped.
    assert!(side(usize::MAX).check().is_err());
    assert!(Spec::new(Workload::Fan, usize::MAX).check().is_err());
}

#[test]
fn a_trace_past_the_memory_available_is_refused() {
    let spec = Spec::new(Workload::Random, 1000);
    let size = spec.size();
    // 1,000 ops of 16 bytes and at most 5,000 references of 4, and a run's
    // 10,000 vars of at least three cache lines each.
    assert_eq!(
        size.bytes(),
        1000 * std::mem::size_of::<TraceOp>() as u128 + 5000 * 4
    );
    assert!(size.run_bytes() >= size.bytes() + 10_000 * 3 * 64);
    let run = u64::try_from(size.run_bytes()).unwrap();
    let trace = u64::try_from(size.bytes()).unwrap();
    assert_eq!(spec.check_run_memory(run), Ok(()));
    assert_eq!(spec.check_trace_memory(trace), Ok(()));
    // The trace alone fits where a run does not.
    assert_eq!(spec.check_trace_memory(run - 1), Ok(()));
    match spec.check_run_memory(run - 1) {
        Err(e @ SpecError::PastMemory { needs: "a run", .. }) => {
            assert!(e.to_string().contains("fewer ops (--ops)"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        spec.check_trace_memory(trace - 1),
        Err(SpecError::PastMemory {
            needs: "the trace",
            ..
        })
    ));
    // What the allocator cannot grant is an error, not an abort.
    assert!(Trace::try_with_capacity(1, usize::MAX, 0).is_err());
    assert!(Trace::try_with_capacity(1, 0, usize::MAX).is_err());
}
