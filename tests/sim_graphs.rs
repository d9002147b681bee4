//! The simulator on the shared training graphs (repository copies).

use std::path::PathBuf;

use depengine::sim::policy::{choose, sweep};
use depengine::sim::{from_graph, simulate, AllocModel, Mode, Profile, SimConfig};
use depengine::storage::rounding::Rounding;

fn graph(name: &str) -> Profile {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    from_graph::load(&path, &Default::default(), None).unwrap_or_else(|e| panic!("{e}"))
}

const GRAPHS: [&str; 2] = ["resnet18_train_b8.json", "mobilenet_v2_train_b8.json"];

/// Without swapping, the oracle peak of a derived profile is the usage
/// records' lower bound (`lower_bound_bytes` of records/<model>.json):
/// resnet18_train_b8 280503716, mobilenet_v2_train_b8 636084740.
#[test]
fn oracle_peak_is_the_records_lower_bound() {
    let r = simulate(&graph(GRAPHS[0]), Mode::Oracle, &SimConfig::default(), &[]);
    assert_eq!(r.peak_bytes, 280_503_716);
    let m = simulate(&graph(GRAPHS[1]), Mode::Oracle, &SimConfig::default(), &[]);
    assert_eq!(m.peak_bytes, 636_084_740);
}

#[test]
fn oracle_never_exceeds_pool() {
    for name in GRAPHS {
        let p = graph(name);
        for rounding in [
            Rounding::round_default(),
            Rounding::exact_default(),
            Rounding::None,
        ] {
            let cfg = SimConfig {
                rounding,
                ..SimConfig::default()
            };
            let oracle = simulate(&p, Mode::Oracle, &cfg, &[]);
            let pool = simulate(&p, Mode::Pool, &cfg, &[]);
            assert!(
                oracle.peak_bytes <= pool.peak_bytes,
                "{name} {rounding:?}: {} > {}",
                oracle.peak_bytes,
                pool.peak_bytes
            );
            assert_eq!(oracle.peak_bytes, pool.live_peak_bytes);
        }
    }
}

#[test]
fn unlimited_budget_swaps_nothing_and_takes_the_sum_of_op_times() {
    for name in GRAPHS {
        let p = graph(name);
        let sum: f64 = p.ops.iter().map(|o| o.time_ms).sum();
        for mode in Mode::ALL {
            let plan = choose(&p, mode, &SimConfig::default(), u64::MAX);
            assert!(plan.swap.is_empty(), "{name} {mode}");
            let r = plan.result;
            assert_eq!(r.swapped_bytes, 0, "{name} {mode}");
            assert_eq!(r.total_ms, sum, "{name} {mode}");
            assert_eq!(r.stall_ms, 0.0, "{name} {mode}");
            assert_eq!(r.fits, Some(true));
        }
    }
}

#[test]
fn peak_stays_within_the_budget_whenever_the_policy_says_it_fits() {
    let p = graph(GRAPHS[0]);
    for alloc in [AllocModel::Pool, AllocModel::Oracle] {
        let cfg = SimConfig {
            alloc,
            ..SimConfig::default()
        };
        let base = simulate(
            &p,
            if alloc == AllocModel::Pool {
                Mode::Pool
            } else {
                Mode::Oracle
            },
            &cfg,
            &[],
        )
        .peak_bytes;
        let mut semi_sync_fitted_by_swapping = false;
        for percent in [95_u64, 80, 65] {
            let budget = base / 100 * percent;
            for mode in Mode::SWAP {
                let plan = choose(&p, mode, &cfg, budget);
                let r = &plan.result;
                if r.fits == Some(true) {
                    assert!(r.peak_bytes <= budget, "{alloc:?} {mode} {budget}: {r:?}");
                    if mode == Mode::SemiSync {
                        semi_sync_fitted_by_swapping |= !plan.swap.is_empty();
                    }
                } else {
                    assert!(r.peak_bytes > budget);
                }
                // Bookkeeping: stall is what the disk added; reads never exceed writes.
                assert!((r.total_ms - r.compute_ms - r.stall_ms).abs() < 1e-6);
                assert_eq!(r.swapped_bytes, r.swapped_out_bytes + r.swapped_in_bytes);
                assert!(r.swapped_in_bytes <= r.swapped_out_bytes);
                // The chosen set, simulated again, gives the same figures.
                assert_eq!(
                    &simulate(&p, mode, &cfg, &plan.swap).peak_bytes,
                    &r.peak_bytes
                );
            }
        }
        assert!(semi_sync_fitted_by_swapping, "{alloc:?}");
    }
}

#[test]
fn sweep_starts_at_the_unswapped_peak_and_goes_down() {
    let p = graph(GRAPHS[0]);
    let cfg = SimConfig::default();
    let curves = sweep(&p, &[Mode::SemiSync], &cfg, 3);
    let pts = &curves[0].1;
    assert_eq!(pts.len(), 3);
    assert_eq!(
        pts[0].budget,
        simulate(&p, Mode::Pool, &cfg, &[]).peak_bytes
    );
    assert!(pts[0].plan.swap.is_empty());
    assert!(pts.windows(2).all(|w| w[0].budget > w[1].budget));
    for pt in pts {
        if pt.plan.result.fits == Some(true) {
            assert!(pt.plan.result.peak_bytes <= pt.budget);
        }
    }
}

/// A three-op training graph: x (input, 400 B) -> conv (w: param 100 B; y =
/// 400 B) -> loss (z = 4 B, output) -> conv_backward (reads x and y; g =
/// 100 B, output).
/// - op times: 0.01 ms + bytes touched / 10^6 bytes per ms, parameters
///   counted: conv 0.01 + 900e-6, loss 0.01 + 404e-6, conv_backward
///   0.01 + 900e-6;
/// - x is allocated by op 0; y is released after its last reader (op 2), x
///   too; z and g (outputs) never are. Oracle peak at op 2: x + y + z + g =
///   904 B.
/// - feature maps: x and y (made in the forward pass, read by op 2).
#[test]
fn graph_derivation_follows_the_documented_mapping() {
    let text = r#"{"model":"tiny","forward_ops":2,"tensors":[
        {"id":1,"size":400,"kind":"input"},{"id":2,"size":100,"kind":"param"},
        {"id":3,"size":400,"kind":"intermediate"},{"id":4,"size":4,"kind":"output"},
        {"id":5,"size":100,"kind":"output"}],
      "ops":[{"name":"conv","type":"c","inputs":[1,2],"outputs":[3]},
             {"name":"loss","type":"l","inputs":[3],"outputs":[4]},
             {"name":"conv_backward","type":"cb","inputs":[1,3],"outputs":[5]}]}"#;
    let g =
        depengine::graph::format::GraphFile::from_json_str(text, std::path::Path::new("tiny.json"))
            .unwrap();
    let p = from_graph::from_graph(
        &g,
        std::path::Path::new("tiny.json"),
        &Default::default(),
        None,
    )
    .unwrap();
    let times: Vec<f64> = p.ops.iter().map(|o| o.time_ms).collect();
    let want = [0.01 + 900e-6, 0.01 + 404e-6, 0.01 + 900e-6];
    assert!(
        times.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-12),
        "{times:?}"
    );
    assert_eq!(p.ops[0].outputs.len(), 2); // x, then y
    assert_eq!(
        simulate(&p, Mode::Oracle, &SimConfig::default(), &[]).peak_bytes,
        904
    );
    let maps: Vec<u64> = p.feature_maps().iter().map(|m| m.size).collect();
    assert_eq!(maps, [400, 400]);
}
