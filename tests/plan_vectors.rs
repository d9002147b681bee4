//! TFLite's memory-planning test vectors (restated as data in
//! `tests/data/memory_planning.json`), reproduced one by one.

use depengine::plan::multidim::{self, MultiDimAssignment, MultiDimRecord};
use depengine::plan::*;
use serde_json::Value;

fn vectors() -> Value {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/memory_planning.json"
    ))
    .unwrap();
    serde_json::from_str(&text).unwrap()
}

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

fn usizes(v: &Value) -> Vec<usize> {
    u64s(v).into_iter().map(|x| x as usize).collect()
}

/// `[size, first, last]` triples as records with ids 0..n.
fn records(v: &Value) -> Vec<UsageRecord> {
    v.as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let t = u64s(t);
            UsageRecord::new(i as u64, t[0], t[1] as usize, t[2] as usize)
        })
        .collect()
}

fn objects(v: &Value) -> ObjectsAssignment {
    ObjectsAssignment {
        object_ids: usizes(&v["object_ids"]),
        object_sizes: u64s(&v["object_sizes"]),
    }
}

fn offsets(v: &Value) -> OffsetsAssignment {
    OffsetsAssignment {
        offsets: u64s(&v["offsets"]),
        total_size: v["total_size"].as_u64().unwrap(),
    }
}

fn strategy(name: &str) -> Option<fn(&[UsageRecord]) -> ObjectsAssignment> {
    Some(match name {
        "NAIVE" => naive,
        "EQUALITY" => equality,
        "MINCOSTFLOW" => min_cost_flow,
        "GREEDY_IN_ORDER" => |r| greedy_in_order(r, None),
        "GREEDY_BY_BREADTH" => greedy_by_breadth,
        // TFLite's GREEDY_BY_SIZE for objects is the distance-priority planner.
        "GREEDY_BY_SIZE" => greedy_by_size_dist,
        "GREEDY_BEST" => |r| best_objects(r, None),
        _ => return None,
    })
}

#[test]
fn objects_to_offsets() {
    let v = vectors();
    let cases = v["objects_to_offsets"]["cases"]["objects_to_offsets"]
        .as_array()
        .unwrap();
    assert_eq!(cases.len(), 4);
    for case in cases {
        let a = objects(case);
        let got = a.to_offsets();
        assert_eq!(
            got.offsets,
            u64s(&case["expect"]["offsets"]),
            "{}",
            case["name"]
        );
        let total = case["expect"]["total_size"]
            .as_u64()
            .or(case["derived"]["total_size"].as_u64())
            .unwrap();
        assert_eq!(got.total_size, total, "{}", case["name"]);
    }
}

#[test]
fn size_records_every_strategy() {
    let v = vectors();
    let mut checked = 0;
    for (name, case) in v["records"]["cases"].as_object().unwrap() {
        let recs = records(&case["records"]);
        if let Some(all) = case.get("expect_all_strategies") {
            for s in [
                "NAIVE",
                "EQUALITY",
                "MINCOSTFLOW",
                "GREEDY_IN_ORDER",
                "GREEDY_BY_BREADTH",
                "GREEDY_BY_SIZE",
                "GREEDY_BEST",
            ] {
                let got = strategy(s).unwrap()(&recs);
                assert_eq!(got, objects(all), "{name} {s}");
                validate_objects(&recs, None, &got).unwrap();
                checked += 1;
            }
        }
        if let Some(exp) = case.get("expect") {
            for (s, want) in exp.as_object().unwrap() {
                if let Some(f) = strategy(s) {
                    let got = f(&recs);
                    assert_eq!(got, objects(want), "{name} {s}");
                    validate_objects(&recs, None, &got).unwrap();
                    checked += 1;
                }
            }
            let got = offsets_greedy_by_size(&recs, None, 1);
            assert_eq!(got, offsets(&exp["offsets_GREEDY_BY_SIZE"]), "{name}");
            validate_offsets(&recs, None, &got, 1).unwrap();
            checked += 1;
        }
        let align = case
            .get("base_addr_align_bytes")
            .and_then(Value::as_u64)
            .unwrap_or(1);
        if let Some(want) = case.get("expect_offsets_GREEDY_BY_SIZE") {
            let got = offsets_greedy_by_size(&recs, None, align);
            assert_eq!(got, offsets(want), "{name}");
            validate_offsets(&recs, None, &got, align).unwrap();
            checked += 1;
        }
        if let Some(d) = case.get("derived") {
            if let Some(load) = d.get("load") {
                assert_eq!(lower_bound(&recs), load.as_u64().unwrap(), "{name}");
            }
            if let Some(pm) = d.get("positional_maximums") {
                assert_eq!(positional_maximums(&recs), u64s(pm), "{name}");
            }
            if let Some(s) = d.get("sum_positional_maximums") {
                assert_eq!(
                    positional_maximums(&recs).iter().sum::<u64>(),
                    s.as_u64().unwrap()
                );
            }
            if let Some(totals) = d.get("totals") {
                for (s, t) in totals.as_object().unwrap() {
                    assert_eq!(
                        strategy(s).unwrap()(&recs).total(),
                        t.as_u64().unwrap(),
                        "{name} {s}"
                    );
                }
            }
            if let Some(best) = d.get("GREEDY_BEST") {
                assert_eq!(best_objects(&recs, None), objects(best), "{name}");
            }
        }
    }
    assert!(checked >= 30, "only {checked} expectations checked");
}

fn md_records(v: &Value) -> Vec<MultiDimRecord> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| MultiDimRecord {
            dims: u64s(&t[0]),
            first: t[1].as_u64().unwrap() as usize,
            last: t[2].as_u64().unwrap() as usize,
        })
        .collect()
}

fn md_objects(v: &Value) -> MultiDimAssignment {
    MultiDimAssignment {
        object_ids: usizes(&v["object_ids"]),
        object_sizes: v["object_sizes"]
            .as_array()
            .unwrap()
            .iter()
            .map(u64s)
            .collect(),
    }
}

#[test]
fn multidimensional_records() {
    let v = vectors();
    let mut checked = 0;
    for (name, case) in v["multidimensional_records"]["cases"].as_object().unwrap() {
        let recs = md_records(&case["records"]);
        for (s, want) in case["expect"].as_object().unwrap() {
            let got = match s.as_str() {
                "NAIVE" => multidim::naive(&recs),
                "EQUALITY_hash" => multidim::equality_hash(&recs),
                "EQUALITY_scan" => multidim::equality_scan(&recs),
                "GREEDY_IN_ORDER_multidim" => multidim::greedy_in_order(&recs),
                other => panic!("unknown strategy {other} in {name}"),
            };
            assert_eq!(got, md_objects(want), "{name} {s}");
            checked += 1;
        }
        if let Some(would) = case
            .get("derived")
            .and_then(|d| d.get("EQUALITY_hash_would_give"))
        {
            assert_eq!(
                multidim::equality_hash(&recs).object_ids,
                usizes(&would["object_ids"]),
                "{name}"
            );
        }
    }
    assert_eq!(checked, 8);
}

#[test]
fn task_profiles_and_positional_maximums() {
    let v = vectors();
    for (name, case) in v["task_profiles"]["cases"].as_object().unwrap() {
        let recs = records(&case["records"]);
        let want: Vec<Vec<usize>> = case["task_profiles"]
            .as_array()
            .unwrap()
            .iter()
            .map(usizes)
            .collect();
        assert_eq!(task_profiles(&recs), want, "{name}");
        assert_eq!(
            positional_maximums(&recs),
            u64s(&case["positional_maximums"]),
            "{name}"
        );
        if let Some(b) = case.get("derived_task_breadths") {
            assert_eq!(task_breadths(&recs), u64s(b), "{name}");
        }
    }
}

#[test]
fn reallocation_graphs() {
    let v = vectors();
    for (name, case) in v["reallocation_graph"]["cases"].as_object().unwrap() {
        let deps: Vec<Vec<usize>> = case["deps"]
            .as_array()
            .unwrap()
            .iter()
            .map(usizes)
            .collect();
        let want: Vec<Vec<usize>> = case["realloc"]
            .as_array()
            .unwrap()
            .iter()
            .map(usizes)
            .collect();
        assert_eq!(reallocation_graph(&deps), want, "{name}");
    }
}

/// With the conflicts a reallocation graph implies, every planner keeps the
/// pairs apart (checked by `validate`), on the ComplexGraph dependency chain.
#[test]
fn planners_honour_reallocation_graph() {
    let v = vectors();
    let case = &v["reallocation_graph"]["cases"]["ComplexGraph"];
    let deps: Vec<Vec<usize>> = case["deps"]
        .as_array()
        .unwrap()
        .iter()
        .map(usizes)
        .collect();
    let conflicts = Conflicts::from_reallocation_graph(&reallocation_graph(&deps));
    // Tensor i produced by op i and read up to its last successor, in
    // sequential order: intervals alone would let many of them share.
    let recs: Vec<UsageRecord> = deps
        .iter()
        .enumerate()
        .map(|(i, d)| {
            UsageRecord::new(
                i as u64,
                8 + (i as u64 % 3) * 8,
                i,
                d.iter().copied().max().unwrap_or(i).max(i),
            )
        })
        .collect();
    let options = PlanOptions {
        conflicts: Some(conflicts.clone()),
        ..PlanOptions::default()
    };
    for s in Strategy::ALL {
        let out = plan(&recs, s, &options);
        out.plan
            .validate(&recs, Some(&conflicts), 1)
            .unwrap_or_else(|e| panic!("{}: {e}", s.name()));
        // Without the conflicts, some strategy must be able to do better, or
        // the test would not be testing anything.
    }
    let free = plan(
        &recs,
        Strategy::OffsetsGreedyBySize,
        &PlanOptions::default(),
    )
    .plan
    .total();
    let kept = plan(&recs, Strategy::OffsetsGreedyBySize, &options)
        .plan
        .total();
    assert!(kept > free, "conflicts changed nothing: {kept} vs {free}");
}

#[test]
fn minimalloc_example_fits_capacity_12() {
    let v = vectors();
    let case = &v["external"]["cases"]["minimalloc_example_capacity_12"];
    let bufs = case["buffers_half_open"].as_array().unwrap();
    let recs: Vec<UsageRecord> = bufs
        .iter()
        .enumerate()
        .map(|(i, b)| {
            UsageRecord::new(
                i as u64,
                b[3].as_u64().unwrap(),
                b[1].as_u64().unwrap() as usize,
                b[2].as_u64().unwrap() as usize - 1,
            )
        })
        .collect();
    let cap = case["capacity"].as_u64().unwrap();
    assert_eq!(
        lower_bound(&recs),
        case["derived"]["load"].as_u64().unwrap()
    );
    let out = exact(
        &recs,
        None,
        &ExactOptions {
            capacity: Some(cap),
            ..ExactOptions::default()
        },
    );
    assert_eq!(out.fits, Fits::Yes);
    assert!(out.plan.total_size <= cap);
    validate_offsets(&recs, None, &out.plan, 1).unwrap();
    // The reference placement itself is valid and fits.
    let reference = &case["reference_offsets"];
    let offs: Vec<u64> = bufs
        .iter()
        .map(|b| reference[b[0].as_str().unwrap()].as_u64().unwrap())
        .collect();
    let reference = OffsetsAssignment::from_offsets(&recs, offs);
    validate_offsets(&recs, None, &reference, 1).unwrap();
    assert_eq!(reference.total_size, cap);
    // One byte less cannot fit: the lower bound says so.
    let out = exact(
        &recs,
        None,
        &ExactOptions {
            capacity: Some(cap - 1),
            ..ExactOptions::default()
        },
    );
    assert_eq!(out.fits, Fits::No);
}

/// PyTorch's SmallLinearScan: three 448-byte buffers alive together take
/// 1344 bytes at offsets 0, 448, 896 under a linear scan (greedy in order).
#[test]
fn pytorch_small_linear_scan() {
    let v = vectors();
    let case = &v["external"]["cases"]["pytorch_jit_SmallLinearScan"];
    let allocs: Vec<Vec<u64>> = case["expected_allocs"]
        .as_array()
        .unwrap()
        .iter()
        .map(u64s)
        .collect();
    let recs: Vec<UsageRecord> = allocs
        .iter()
        .enumerate()
        .map(|(i, a)| UsageRecord::new(i as u64, a[0], 0, 2))
        .collect();
    let got = offsets_greedy_in_order(&recs, None, 1);
    assert_eq!(
        got.total_size,
        case["expected_storage_bytes"].as_u64().unwrap()
    );
    assert_eq!(got.offsets, allocs.iter().map(|a| a[1]).collect::<Vec<_>>());
}
