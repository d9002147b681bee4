//! The graph IR's validation, and the NNVM planner rule by rule on small
//! hand-made graphs, then on every real graph in `tests/data/graphs`.

use std::path::{Path, PathBuf};

use depengine::graph::planner::{
    color_node_group, plan, AssignKind, MatchRange, Placement, PlanError, PlanOptions,
};
use depengine::graph::{Graph, GraphError};
use depengine::storage::DeviceId;

/// A graph from a compact description: tensors as `(id, size, kind)`, ops as
/// `(name, type, inputs, outputs, inplace pairs)`.
type OpSpec<'a> = (&'a str, &'a str, &'a [u64], &'a [u64], &'a [[usize; 2]]);

fn json(tensors: &[(u64, u64, &str)], ops: &[OpSpec<'_>]) -> String {
    let ts: Vec<String> = tensors
        .iter()
        .map(|(id, size, kind)| format!(r#"{{"id":{id},"size":{size},"kind":"{kind}"}}"#))
        .collect();
    let os: Vec<String> = ops
        .iter()
        .map(|(name, ty, i, o, p)| {
            format!(
                r#"{{"name":"{name}","type":"{ty}","inputs":{i:?},"outputs":{o:?},"inplace":{p:?}}}"#
            )
        })
        .collect();
    format!(
        r#"{{"model":"hand","tensors":[{}],"ops":[{}]}}"#,
        ts.join(","),
        os.join(",")
    )
}

fn graph(tensors: &[(u64, u64, &str)], ops: &[OpSpec<'_>]) -> Result<Graph, GraphError> {
    Graph::from_json_str(&json(tensors, ops), Path::new("hand.json"))
}

fn opts(inplace: bool, match_range: MatchRange) -> PlanOptions {
    PlanOptions {
        inplace,
        match_range,
        ..PlanOptions::default()
    }
}

fn sid(g: &Graph, p: &depengine::graph::MemoryPlan, file_id: u64) -> usize {
    p.storage_of[g.tensor_by_file_id(file_id).unwrap()]
}

// ---------------------------------------------------------------- the IR

#[test]
fn ir_errors_name_the_op_or_tensor() {
    let t = [(0, 8, "input"), (1, 8, "intermediate"), (2, 8, "output")];
    let unknown = graph(&t, &[("a", "f", &[0], &[9], &[])]).unwrap_err();
    assert!(
        matches!(unknown, GraphError::UnknownTensor { id: 9, .. }),
        "{unknown}"
    );
    assert!(unknown.to_string().contains("\"a\""), "{unknown}");

    let early = graph(
        &t,
        &[("a", "f", &[1], &[2], &[]), ("b", "f", &[0], &[1], &[])],
    )
    .unwrap_err();
    assert!(
        matches!(early, GraphError::ReadBeforeWritten { .. }),
        "{early}"
    );
    assert!(early.to_string().contains("tensor 1"), "{early}");

    let never = graph(&t, &[("a", "f", &[1], &[2], &[])]).unwrap_err();
    assert!(never.to_string().contains("no op produces it"), "{never}");

    let twice = graph(
        &t,
        &[("a", "f", &[0], &[1], &[]), ("b", "f", &[0], &[1], &[])],
    )
    .unwrap_err();
    assert!(matches!(twice, GraphError::TwoProducers { .. }), "{twice}");
    assert!(twice.to_string().contains("\"b\""), "{twice}");

    let cycle = graph(
        &t,
        &[("a", "f", &[0, 2], &[1], &[]), ("b", "f", &[1], &[2], &[])],
    )
    .unwrap_err();
    assert!(matches!(cycle, GraphError::Cycle { .. }), "{cycle}");

    let self_loop = graph(&t, &[("a", "f", &[1], &[1], &[])]).unwrap_err();
    assert!(matches!(self_loop, GraphError::Cycle { .. }), "{self_loop}");

    let bad_pair = graph(&t, &[("a", "f", &[0], &[1], &[[1, 0]])]).unwrap_err();
    assert!(
        matches!(bad_pair, GraphError::BadInplace { .. }),
        "{bad_pair}"
    );
    let t2 = [(0, 8, "input"), (1, 16, "output")];
    let bad_size = graph(&t2, &[("a", "f", &[0], &[1], &[[0, 0]])]).unwrap_err();
    assert!(bad_size.to_string().contains("16"), "{bad_size}");

    let writes_input = graph(&t, &[("a", "f", &[1], &[0], &[])]).unwrap_err();
    assert!(
        matches!(writes_input, GraphError::ProducesExternal { .. }),
        "{writes_input}"
    );

    let dup = graph(&[(0, 8, "input"), (0, 8, "output")], &[]).unwrap_err();
    assert!(
        matches!(dup, GraphError::DuplicateTensor { id: 0 }),
        "{dup}"
    );

    let bad_assign = graph(
        &[(0, 8, "intermediate"), (1, 8, "input"), (2, 8, "output")],
        &[
            ("p", "f", &[1], &[0], &[]),
            ("as", "assign", &[0, 1], &[2], &[]),
        ],
    )
    .unwrap_err();
    assert!(
        matches!(bad_assign, GraphError::BadAssign { .. }),
        "{bad_assign}"
    );
}

#[test]
fn malformed_file_names_the_file() {
    let err = Graph::from_json_str("{", Path::new("broken.json")).unwrap_err();
    assert!(err.to_string().contains("broken.json"), "{err}");
    let err = Graph::load("/nonexistent/graph.json").unwrap_err();
    assert!(err.to_string().contains("/nonexistent/graph.json"), "{err}");
}

// ---------------------------------------------------------------- in-place

/// x -> conv -> a -> relu(in place) -> b -> conv -> out
fn chain() -> Graph {
    graph(
        &[
            (0, 64, "input"),
            (1, 64, "intermediate"),
            (2, 64, "intermediate"),
            (3, 64, "output"),
        ],
        &[
            ("conv1", "Conv", &[0], &[1], &[]),
            ("relu", "ReLU", &[1], &[2], &[[0, 0]]),
            ("conv2", "Conv", &[2], &[3], &[]),
        ],
    )
    .unwrap()
}

#[test]
fn inplace_reuses_an_input_with_no_reader_left() {
    let g = chain();
    let p = plan(&g, &opts(true, MatchRange::Fixed(16))).unwrap();
    p.validate(&g).unwrap();
    assert_eq!(sid(&g, &p, 1), sid(&g, &p, 2));
    assert_eq!(
        p.placement[g.tensor_by_file_id(2).unwrap()],
        Placement::InPlace { input: 1 }
    );
    assert_eq!(p.planned_bytes(), 128);
    // Off: the relu output needs a block of its own while `a` is read.
    let q = plan(&g, &opts(false, MatchRange::Fixed(16))).unwrap();
    q.validate(&g).unwrap();
    assert_ne!(sid(&g, &q, 1), sid(&g, &q, 2));
    assert_eq!(q.planned_bytes(), 128);
    // Two element-wise ops in a row: one block with in-place, two without.
    let h = graph(
        &[
            (0, 64, "input"),
            (1, 64, "intermediate"),
            (2, 64, "intermediate"),
            (3, 64, "output"),
        ],
        &[
            ("conv", "Conv", &[0], &[1], &[]),
            ("relu", "ReLU", &[1], &[2], &[[0, 0]]),
            ("sig", "sigmoid", &[2], &[3], &[[0, 0]]),
        ],
    )
    .unwrap();
    assert_eq!(
        plan(&h, &opts(true, MatchRange::Auto))
            .unwrap()
            .planned_bytes(),
        64
    );
    assert_eq!(
        plan(&h, &opts(false, MatchRange::Auto))
            .unwrap()
            .planned_bytes(),
        128
    );
    // Inputs are never taken in place, even when the op allows it.
    let h = graph(
        &[(0, 64, "input"), (1, 64, "output")],
        &[("relu", "ReLU", &[0], &[1], &[[0, 0]])],
    )
    .unwrap();
    let r = plan(&h, &PlanOptions::default()).unwrap();
    assert_eq!(r.placement[1], Placement::Fresh);
}

#[test]
fn inplace_waits_for_the_last_reader() {
    // a is read by relu (which may work in place) and later by add: no
    // in-place, since a still has a reader after relu.
    let g = graph(
        &[
            (0, 64, "input"),
            (1, 64, "intermediate"),
            (2, 64, "intermediate"),
            (3, 64, "output"),
        ],
        &[
            ("conv", "Conv", &[0], &[1], &[]),
            ("relu", "ReLU", &[1], &[2], &[[0, 0]]),
            ("add", "add", &[1, 2], &[3], &[[1, 0]]),
        ],
    )
    .unwrap();
    let p = plan(&g, &PlanOptions::default()).unwrap();
    p.validate(&g).unwrap();
    assert_ne!(sid(&g, &p, 1), sid(&g, &p, 2));
    // add takes b (its second input, last reader) in place.
    assert_eq!(sid(&g, &p, 2), sid(&g, &p, 3));
}

#[test]
fn validate_rejects_overlap_and_a_forbidden_inplace() {
    let g = chain();
    let mut p = plan(&g, &opts(false, MatchRange::Fixed(16))).unwrap();
    // Force b into a's storage without the op's leave: rejected.
    let (a, b) = (
        g.tensor_by_file_id(1).unwrap(),
        g.tensor_by_file_id(2).unwrap(),
    );
    p.storage_of[b] = p.storage_of[a];
    let err = p.validate(&g).unwrap_err();
    assert!(matches!(err, PlanError::Invalid { .. }), "{err}");
    assert!(err.to_string().contains("at once"), "{err}");
    // Force the graph output (live to the end) into a's storage: overlap.
    let mut q = plan(&g, &opts(true, MatchRange::Fixed(16))).unwrap();
    let out = g.tensor_by_file_id(3).unwrap();
    q.storage_of[out] = q.storage_of[a];
    assert!(q.validate(&g).is_err());
}

#[test]
fn ignored_inputs_do_not_hold_storage() {
    // `like` only looks at a's shape: ignoring that input, a is dead after
    // conv2 and conv3's output can take its block.
    let text = json(
        &[
            (0, 64, "input"),
            (1, 64, "intermediate"),
            (2, 64, "intermediate"),
            (3, 64, "intermediate"),
            (4, 64, "output"),
        ],
        &[
            ("conv1", "Conv", &[0], &[1], &[]),
            ("conv2", "Conv", &[1], &[2], &[]),
            ("conv3", "Conv", &[2], &[3], &[]),
            ("like", "zeros_like", &[3, 1], &[4], &[]),
        ],
    );
    let mut g = Graph::from_json_str(&text, Path::new("ig.json")).unwrap();
    let counted = plan(&g, &PlanOptions::default()).unwrap();
    counted.validate(&g).unwrap();
    g.ignore_inputs(3, &[1]).unwrap();
    let ignored = plan(&g, &PlanOptions::default()).unwrap();
    ignored.validate(&g).unwrap();
    // Counted, a lives to op 3 and needs its own block all along; ignored,
    // conv3's output reuses a's block.
    assert!(ignored.planned_bytes() < counted.planned_bytes());
    assert_eq!(sid(&g, &ignored, 1), sid(&g, &ignored, 3));
    assert!(g.ignore_inputs(3, &[7]).is_err());
}

#[test]
fn a_tensor_nothing_produces_or_reads_gets_a_block_of_its_own() {
    let g = graph(
        &[
            (0, 64, "input"),
            (1, 64, "intermediate"),
            (2, 64, "intermediate"),
            (3, 64, "output"),
        ],
        &[("a", "f", &[0], &[1], &[]), ("b", "f", &[1], &[3], &[])],
    )
    .unwrap();
    let p = plan(&g, &PlanOptions::default()).unwrap();
    p.validate(&g).unwrap();
    let orphan = g.tensor_by_file_id(2).unwrap();
    assert!(
        p.storage_of
            .iter()
            .filter(|&&s| s == p.storage_of[orphan])
            .count()
            == 1
    );
}

// ---------------------------------------------------------------- match_range

/// Free a 100-byte block, then ask for 300 bytes.
fn grow_case() -> Graph {
    graph(
        &[
            (0, 8, "input"),
            (1, 100, "intermediate"),
            (2, 8, "intermediate"),
            (3, 300, "intermediate"),
            (4, 8, "output"),
        ],
        &[
            ("a", "f", &[0], &[1], &[]),
            ("b", "f", &[1], &[2], &[]),
            ("c", "f", &[2], &[3], &[]),
            ("d", "f", &[3], &[4], &[]),
        ],
    )
    .unwrap()
}

#[test]
fn match_range_bounds_the_search_and_smaller_blocks_grow() {
    let g = grow_case();
    // Range 2: 100 < 300 / 2, not reusable: a new 300 block.
    let p2 = plan(&g, &opts(false, MatchRange::Fixed(2))).unwrap();
    p2.validate(&g).unwrap();
    assert_ne!(sid(&g, &p2, 1), sid(&g, &p2, 3));
    // Range 4: 100 >= 300 / 4: the 100 block is grown to 300.
    let p4 = plan(&g, &opts(false, MatchRange::Fixed(4))).unwrap();
    p4.validate(&g).unwrap();
    assert_eq!(sid(&g, &p4, 1), sid(&g, &p4, 3));
    assert_eq!(p4.storages[sid(&g, &p4, 1)].size, 300);
    assert!(p4.planned_bytes() < p2.planned_bytes());
    // Range 0: no reuse at all.
    let p0 = plan(&g, &opts(false, MatchRange::Fixed(0))).unwrap();
    assert_eq!(p0.planned_bytes(), 100 + 8 + 300 + 8);
}

#[test]
fn bigger_free_block_is_preferred_to_a_smaller_one() {
    // Two blocks freed at once (100 and 400), then a request for 200.
    let g = graph(
        &[
            (0, 8, "input"),
            (1, 100, "intermediate"),
            (2, 400, "intermediate"),
            (3, 8, "intermediate"),
            (4, 200, "intermediate"),
            (5, 8, "output"),
        ],
        &[
            ("a", "f", &[0], &[1, 2], &[]),
            ("b", "f", &[1, 2], &[3], &[]),
            ("c", "f", &[3], &[4], &[]),
            ("d", "f", &[4], &[5], &[]),
        ],
    )
    .unwrap();
    let p = plan(&g, &opts(false, MatchRange::Fixed(4))).unwrap();
    p.validate(&g).unwrap();
    assert_eq!(sid(&g, &p, 4), sid(&g, &p, 2));
    assert_eq!(p.storages[sid(&g, &p, 2)].size, 400);
}

#[test]
fn auto_search_keeps_the_smallest_total() {
    let g = grow_case();
    let p = plan(&g, &opts(false, MatchRange::Auto)).unwrap();
    p.validate(&g).unwrap();
    let ranges: Vec<u64> = p.tried.iter().map(|t| t.0).collect();
    assert_eq!(ranges, vec![1, 2, 4, 8, 16]);
    let min = p.tried.iter().map(|t| t.1).min().unwrap();
    assert_eq!(p.planned_bytes(), min);
    // The first range reaching the minimum is kept.
    assert_eq!(p.match_range, 4);
    assert_eq!("auto".parse::<MatchRange>().unwrap(), MatchRange::Auto);
    assert_eq!("8".parse::<MatchRange>().unwrap(), MatchRange::Fixed(8));
    assert!("x".parse::<MatchRange>().is_err());
}

// ---------------------------------------------------------------- assign

#[test]
fn plain_assign_writes_into_its_target() {
    // w_new = sgd(w, g) is also read by `use`, so the assign stays plain.
    let g = graph(
        &[
            (0, 32, "param"),
            (1, 32, "input"),
            (2, 32, "intermediate"),
            (3, 32, "intermediate"),
            (4, 32, "output"),
            (5, 32, "output"),
        ],
        &[
            ("sgd", "sgd", &[0, 1], &[2], &[]),
            ("use", "f", &[2], &[4], &[]),
            ("assign", "assign", &[0, 2], &[3], &[]),
            ("after", "f", &[3], &[5], &[]),
        ],
    )
    .unwrap();
    let p = plan(&g, &PlanOptions::default()).unwrap();
    p.validate(&g).unwrap();
    assert_eq!(p.assign[2], AssignKind::Plain);
    assert_eq!(sid(&g, &p, 3), sid(&g, &p, 0));
    assert_ne!(sid(&g, &p, 2), sid(&g, &p, 0));
    assert_eq!(p.storages[sid(&g, &p, 0)].external, Some(0));
}

#[test]
fn assign_of_a_single_use_value_becomes_a_no_op() {
    let g = graph(
        &[
            (0, 32, "param"),
            (1, 32, "input"),
            (2, 32, "intermediate"),
            (3, 32, "output"),
        ],
        &[
            ("sgd", "sgd", &[0, 1], &[2], &[]),
            ("assign", "assign", &[0, 2], &[3], &[]),
        ],
    )
    .unwrap();
    let p = plan(&g, &PlanOptions::default()).unwrap();
    p.validate(&g).unwrap();
    assert_eq!(p.assign[1], AssignKind::Simplified);
    assert_eq!(sid(&g, &p, 2), sid(&g, &p, 0));
    assert_eq!(sid(&g, &p, 3), sid(&g, &p, 0));
    assert_eq!(p.planned_bytes(), 0, "nothing left to plan");
    // A read of the target between the value's producer and the assign
    // keeps it plain (it would see the new value early).
    let h = graph(
        &[
            (0, 32, "param"),
            (1, 32, "input"),
            (2, 32, "intermediate"),
            (3, 32, "output"),
            (4, 32, "output"),
        ],
        &[
            ("sgd", "sgd", &[0, 1], &[2], &[]),
            ("peek", "f", &[0], &[4], &[]),
            ("assign", "assign", &[0, 2], &[3], &[]),
        ],
    )
    .unwrap();
    let q = plan(&h, &PlanOptions::default()).unwrap();
    q.validate(&h).unwrap();
    assert_eq!(q.assign[2], AssignKind::Plain);
}

// ---------------------------------------------------------------- devices

/// TVM's example: x, y -> add/1 -> copy1 -> sqrt/2, copy2 -> log/3, copies
/// back -> subtract -> exp, default device 4 (here: add on gpu(1), sqrt on
/// gpu(2), log on gpu(3), default cpu(0)).
#[test]
fn devices_propagate_from_copy_ops() {
    let mut g = graph(
        &[
            (0, 16, "input"),
            (1, 16, "input"),
            (2, 16, "intermediate"),
            (3, 16, "intermediate"),
            (4, 16, "intermediate"),
            (5, 16, "intermediate"),
            (6, 16, "intermediate"),
            (7, 16, "intermediate"),
            (8, 16, "intermediate"),
            (9, 16, "intermediate"),
            (10, 16, "output"),
        ],
        &[
            ("add", "add", &[0, 1], &[2], &[]),
            ("copy1", "copy", &[2], &[3], &[]),
            ("copy2", "copy", &[2], &[4], &[]),
            ("sqrt", "sqrt", &[3], &[5], &[]),
            ("log", "log", &[4], &[6], &[]),
            ("copy3", "copy", &[5], &[7], &[]),
            ("copy4", "copy", &[6], &[8], &[]),
            ("subtract", "sub", &[7, 8], &[9], &[]),
            ("exp", "exp", &[9], &[10], &[[0, 0]]),
        ],
    )
    .unwrap();
    let (g1, g2, g3, cpu) = (
        DeviceId::gpu(1),
        DeviceId::gpu(2),
        DeviceId::gpu(3),
        DeviceId::cpu(0),
    );
    // Only the copies are annotated: add's device comes backwards from copy1.
    g.mark_copy(1, g1, g2).unwrap();
    g.mark_copy(2, g1, g3).unwrap();
    g.mark_copy(5, g2, cpu).unwrap();
    g.mark_copy(6, g3, cpu).unwrap();
    let p = plan(&g, &PlanOptions::default()).unwrap();
    p.validate(&g).unwrap();
    let d = &p.devices;
    assert_eq!(d.op_device[0], g1, "add: backwards from copy1");
    assert_eq!(d.op_device[3], g2, "sqrt: forwards from copy1");
    assert_eq!(d.op_device[4], g3, "log: forwards from copy2");
    assert_eq!(d.op_device[7], cpu, "subtract: forwards from copy3");
    assert_eq!(d.op_device[8], cpu);
    assert_eq!(d.tensor_device[0], g1, "x lives where add runs");
    assert_eq!(d.tensor_device[3], g2, "copy1's output on its destination");
    // No storage holds tensors of two devices.
    for (t, &s) in p.storage_of.iter().enumerate() {
        assert_eq!(p.storages[s].device, d.tensor_device[t]);
    }
    // An annotation that contradicts a copy is an error naming the op.
    let mut bad = g.clone();
    bad.annotate_device(0, g3).unwrap();
    let err = plan(&bad, &PlanOptions::default()).unwrap_err();
    assert!(matches!(err, PlanError::DeviceConflict { .. }), "{err}");
    assert!(err.to_string().contains("\"add\""), "{err}");
    // An op reading another device's tensor without a copy is an error.
    let mut missing = g.clone();
    missing.annotate_device(8, g1).unwrap();
    let err = plan(&missing, &PlanOptions::default()).unwrap_err();
    assert!(err.to_string().contains("copy op is missing"), "{err}");
    // A graph input read on two devices without a copy is an error too.
    let mut two = graph(
        &[(0, 16, "input"), (1, 16, "output"), (2, 16, "output")],
        &[("a", "f", &[0], &[1], &[]), ("b", "f", &[0], &[2], &[])],
    )
    .unwrap();
    two.annotate_device(1, g2).unwrap();
    let err = plan(&two, &PlanOptions::default()).unwrap_err();
    assert!(err.to_string().contains("\"b\""), "{err}");
}

#[test]
fn storage_is_never_shared_across_devices() {
    // a (gpu0) dies before c (cpu) is made; same size, yet no sharing.
    let mut g = graph(
        &[
            (0, 64, "input"),
            (1, 64, "intermediate"),
            (2, 64, "intermediate"),
            (3, 64, "intermediate"),
            (4, 64, "output"),
        ],
        &[
            ("a", "f", &[0], &[1], &[]),
            ("to_cpu", "copy", &[1], &[2], &[]),
            ("c", "f", &[2], &[3], &[]),
            ("d", "f", &[3], &[4], &[]),
        ],
    )
    .unwrap();
    let plain = plan(&g, &PlanOptions::default()).unwrap();
    assert_eq!(sid(&g, &plain, 1), sid(&g, &plain, 3));
    g.mark_copy(1, DeviceId::gpu(0), DeviceId::cpu(0)).unwrap();
    let p = plan(&g, &PlanOptions::default()).unwrap();
    p.validate(&g).unwrap();
    assert_ne!(sid(&g, &p, 1), sid(&g, &p, 3));
    assert_eq!(p.storages[sid(&g, &p, 1)].device, DeviceId::gpu(0));
}

// ---------------------------------------------------------------- coloring

/// Two independent branches from one input, joined at the end.
fn branches() -> Graph {
    graph(
        &[
            (0, 64, "input"),
            (1, 64, "intermediate"),
            (2, 64, "intermediate"),
            (3, 64, "intermediate"),
            (4, 64, "intermediate"),
            (5, 64, "intermediate"),
            (6, 64, "intermediate"),
            (7, 64, "output"),
        ],
        &[
            ("l1", "f", &[0], &[1], &[]),
            ("l2", "f", &[1], &[2], &[]),
            ("l3", "f", &[2], &[3], &[]),
            ("r1", "f", &[0], &[4], &[]),
            ("r2", "f", &[4], &[5], &[]),
            ("r3", "f", &[5], &[6], &[]),
            ("join", "add", &[3, 6], &[7], &[]),
        ],
    )
    .unwrap()
}

#[test]
fn coloring_takes_the_heaviest_chain_first() {
    let g = branches();
    let c = color_node_group(&g, &[1; 7], 2);
    assert_eq!(c.count, 2);
    // The longest chain is one branch plus join (4 ops): colour 0.
    let first: Vec<usize> = (0..7).filter(|&k| c.colors[k] == 0).collect();
    assert_eq!(first.len(), 4, "{:?}", c.colors);
    assert!(first.contains(&6));
    // Heavier weights on the right branch pull it into the first chain.
    let c = color_node_group(&g, &[1, 1, 1, 5, 5, 5, 1], 2);
    assert_eq!(&c.colors[3..], &[0, 0, 0, 0]);
    assert_eq!(&c.colors[..3], &[1, 1, 1]);
    // k = 1: one group; k larger than the chains: stops when nothing is left.
    assert_eq!(color_node_group(&g, &[1; 7], 1).colors, vec![0; 7]);
    let c = color_node_group(&g, &[1; 7], 10);
    assert!(c.count <= 3, "{c:?}");
}

#[test]
fn storage_is_shared_only_within_a_group() {
    let g = branches();
    let one = plan(&g, &PlanOptions::default()).unwrap();
    one.validate(&g).unwrap();
    let two = plan(
        &g,
        &PlanOptions {
            colors: 2,
            ..PlanOptions::default()
        },
    )
    .unwrap();
    two.validate(&g).unwrap();
    assert!(two.planned_bytes() >= one.planned_bytes());
    // Every reused block was freed by an op of the taker's group.
    for (t, place) in two.placement.iter().enumerate() {
        if *place == Placement::Reused {
            let s = two.storage_of[t];
            let taker = g.tensor(t).producer.unwrap();
            for (u, &su) in two.storage_of.iter().enumerate() {
                if su == s && u != t {
                    let freed_by = g.last_use(u).unwrap();
                    if freed_by < taker {
                        assert_eq!(two.coloring.colors[freed_by], two.coloring.colors[taker]);
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------- real graphs

fn real_graphs() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/graphs");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_real_graph_plans_and_validates() {
    let files = real_graphs();
    assert_eq!(files.len(), 32);
    for f in files {
        let g = Graph::load(&f).unwrap();
        let naive: u64 = g
            .tensors()
            .iter()
            .filter(|t| !t.is_external())
            .map(|t| t.size)
            .sum();
        for (inplace, colors) in [(true, 1), (false, 1), (true, 2), (true, 4)] {
            let p = plan(
                &g,
                &PlanOptions {
                    inplace,
                    colors,
                    ..PlanOptions::default()
                },
            )
            .unwrap();
            p.validate(&g)
                .unwrap_or_else(|e| panic!("{}: inplace {inplace}, k {colors}: {e}", g.model()));
            assert!(p.planned_bytes() <= naive, "{}", g.model());
        }
    }
}
