//! The graph executor: every executor, static and dynamic, any number of
//! colour groups, computes the same checksums as a serial run with a buffer
//! per tensor.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use depengine::graph::executor::{
    self, busy_body, checksum_body, Bodies, BusyCost, ChecksumLog, ExecError, Mode, RunOptions,
};
use depengine::graph::planner::{plan, MemoryPlan, PlanOptions};
use depengine::graph::Graph;
use depengine::storage::DeviceId;
use depengine::{Engine, EngineKind};

fn engines() -> Vec<Engine> {
    [EngineKind::Naive, EngineKind::Pooled, EngineKind::PerDevice]
        .into_iter()
        .map(|kind| {
            Engine::builder()
                .kind(kind)
                .cpu_workers(2)
                .gpus(4)
                .build()
                .unwrap()
        })
        .collect()
}

fn checksum_run(g: &Graph, p: &MemoryPlan, engine: &Engine, mode: Mode) -> executor::Checksums {
    let log = Arc::new(ChecksumLog::new(g.ops().len()));
    let bodies = Bodies::new(checksum_body(log.clone()));
    let options = RunOptions {
        mode,
        hash_outputs: true,
        ..RunOptions::default()
    };
    let report = executor::run(g, p, engine, &bodies, &options).unwrap();
    assert_eq!(report.ops, g.ops().len());
    report.checksums(&log)
}

/// Every engine, both modes, k = 1, 2, 4, with and without in-place.
fn same_as_serial(g: &Graph) {
    same_as_serial_with(g, &[(1, true), (2, true), (4, true), (1, false)]);
}

/// Every engine, both modes, each `(k, in-place)` of `configs`.
fn same_as_serial_with(g: &Graph, configs: &[(u32, bool)]) {
    let want = executor::reference(g);
    assert!(
        !want.outputs.is_empty(),
        "{}: no outputs to compare",
        g.model()
    );
    for engine in engines() {
        for &(colors, inplace) in configs {
            let p = plan(
                g,
                &PlanOptions {
                    colors,
                    inplace,
                    ..PlanOptions::default()
                },
            )
            .unwrap();
            for mode in [Mode::Static, Mode::Dynamic] {
                let got = checksum_run(g, &p, &engine, mode);
                assert_eq!(
                    got,
                    want,
                    "{}: engine {}, mode {mode}, k {colors}, in-place {inplace}",
                    g.model(),
                    engine.kind()
                );
            }
        }
    }
}

fn hand(text: &str) -> Graph {
    Graph::from_json_str(text, Path::new("hand.json")).unwrap()
}

const BRANCHES: &str = r#"{"model":"branches","tensors":[
  {"id":0,"size":256,"kind":"input"},{"id":9,"size":64,"kind":"param"},
  {"id":1,"size":256,"kind":"intermediate"},{"id":2,"size":256,"kind":"intermediate"},
  {"id":3,"size":256,"kind":"intermediate"},{"id":4,"size":256,"kind":"intermediate"},
  {"id":5,"size":256,"kind":"intermediate"},{"id":6,"size":256,"kind":"intermediate"},
  {"id":7,"size":256,"kind":"intermediate"},{"id":8,"size":256,"kind":"output"}],
  "ops":[{"name":"l1","type":"Conv","inputs":[0,9],"outputs":[1]},
         {"name":"l2","type":"ReLU","inputs":[1],"outputs":[2],"inplace":[[0,0]]},
         {"name":"l3","type":"Conv","inputs":[2,9],"outputs":[3]},
         {"name":"r1","type":"Conv","inputs":[0,9],"outputs":[4]},
         {"name":"r2","type":"ReLU","inputs":[4],"outputs":[5],"inplace":[[0,0]]},
         {"name":"r3","type":"Conv","inputs":[5,9],"outputs":[6]},
         {"name":"join","type":"add","inputs":[3,6],"outputs":[7],"inplace":[[0,0],[1,0]]},
         {"name":"head","type":"Conv","inputs":[7,9],"outputs":[8]}]}"#;

#[test]
fn hand_made_branches_match_the_serial_run() {
    same_as_serial(&hand(BRANCHES));
}

#[test]
fn assigns_match_the_serial_run() {
    // A plain assign (its value is also read elsewhere), a simplified one,
    // and reads of the param before and after.
    let g = hand(
        r#"{"model":"assign","tensors":[
      {"id":0,"size":96,"kind":"param"},{"id":1,"size":96,"kind":"input"},
      {"id":2,"size":96,"kind":"intermediate"},{"id":3,"size":96,"kind":"intermediate"},
      {"id":4,"size":96,"kind":"output"},{"id":5,"size":96,"kind":"intermediate"},
      {"id":6,"size":96,"kind":"intermediate"},{"id":7,"size":96,"kind":"output"},
      {"id":8,"size":96,"kind":"output"}],
      "ops":[{"name":"grad","type":"f","inputs":[0,1],"outputs":[2]},
             {"name":"use","type":"f","inputs":[2],"outputs":[4]},
             {"name":"assign1","type":"assign","inputs":[0,2],"outputs":[3]},
             {"name":"step","type":"sgd","inputs":[0,3,1],"outputs":[5]},
             {"name":"assign2","type":"assign","inputs":[0,5],"outputs":[6]},
             {"name":"after","type":"f","inputs":[0,6],"outputs":[7]},
             {"name":"peek","type":"f","inputs":[1],"outputs":[8]}]}"#,
    );
    let p = plan(&g, &PlanOptions::default()).unwrap();
    use depengine::graph::planner::AssignKind;
    assert_eq!(p.assign[2], AssignKind::Plain);
    assert_eq!(p.assign[4], AssignKind::Simplified);
    same_as_serial(&g);
}

#[test]
fn ignored_inputs_match_the_serial_run() {
    let mut g = hand(
        r#"{"model":"ignored","tensors":[
      {"id":0,"size":128,"kind":"input"},{"id":1,"size":128,"kind":"intermediate"},
      {"id":2,"size":128,"kind":"intermediate"},{"id":3,"size":128,"kind":"intermediate"},
      {"id":4,"size":128,"kind":"output"}],
      "ops":[{"name":"c1","type":"Conv","inputs":[0],"outputs":[1]},
             {"name":"c2","type":"Conv","inputs":[1],"outputs":[2]},
             {"name":"c3","type":"Conv","inputs":[2],"outputs":[3]},
             {"name":"like","type":"zeros_like","inputs":[3,1],"outputs":[4]}]}"#,
    );
    g.ignore_inputs(3, &[1]).unwrap();
    same_as_serial(&g);
}

#[test]
fn copies_between_devices_match_the_serial_run() {
    let mut g = hand(
        r#"{"model":"devices","tensors":[
      {"id":0,"size":64,"kind":"input"},{"id":1,"size":64,"kind":"intermediate"},
      {"id":2,"size":64,"kind":"intermediate"},{"id":3,"size":64,"kind":"intermediate"},
      {"id":4,"size":64,"kind":"intermediate"},{"id":5,"size":64,"kind":"output"}],
      "ops":[{"name":"up","type":"copy","inputs":[0],"outputs":[1]},
             {"name":"f","type":"Conv","inputs":[1],"outputs":[2]},
             {"name":"g","type":"ReLU","inputs":[2],"outputs":[3],"inplace":[[0,0]]},
             {"name":"down","type":"copy","inputs":[3],"outputs":[4]},
             {"name":"h","type":"Conv","inputs":[4],"outputs":[5]}]}"#,
    );
    g.mark_copy(0, DeviceId::cpu(0), DeviceId::gpu(1)).unwrap();
    g.mark_copy(3, DeviceId::gpu(1), DeviceId::cpu(0)).unwrap();
    let p = plan(&g, &PlanOptions::default()).unwrap();
    assert_eq!(p.devices.op_device[1], DeviceId::gpu(1));
    same_as_serial(&g);
}

#[test]
fn real_graphs_match_the_serial_run() {
    // Small real graphs (6 to 9 MB of activations), so that the test stays
    // quick in debug builds too; the hand-made graphs cover the other
    // configurations.
    for name in [
        "mp_hand_recrop",
        "mp_iris_landmark",
        "mp_face_detection_short_range",
    ] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/graphs")
            .join(format!("{name}.json"));
        same_as_serial_with(&Graph::load(path).unwrap(), &[(1, true), (4, true)]);
    }
}

#[test]
fn user_bodies_are_chosen_by_op_type() {
    let g = hand(BRANCHES);
    let p = plan(&g, &PlanOptions::default()).unwrap();
    let relus = Arc::new(AtomicUsize::new(0));
    let seen = relus.clone();
    let bodies = Bodies::new(busy_body(BusyCost::scaled(0.0))).with(
        "ReLU",
        Arc::new(move |data: &mut executor::OpData<'_>| {
            assert_eq!(data.op().op_type, "ReLU");
            seen.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }),
    );
    let engine = Engine::builder().cpu_workers(2).build().unwrap();
    let progress_calls = Arc::new(AtomicUsize::new(0));
    let pc = progress_calls.clone();
    let options = RunOptions {
        progress: Some(Arc::new(move |done, total| {
            assert!(done <= total);
            pc.fetch_add(1, Ordering::Relaxed);
        })),
        ..RunOptions::default()
    };
    let report = executor::run(&g, &p, &engine, &bodies, &options).unwrap();
    assert_eq!(relus.load(Ordering::Relaxed), 2);
    assert_eq!(progress_calls.load(Ordering::Relaxed), g.ops().len());
    assert_eq!(report.pushed, g.ops().len());
}

#[test]
fn report_figures_hold_together() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/graphs/mp_hand_recrop.json");
    let g = Graph::load(path).unwrap();
    let p = plan(&g, &PlanOptions::default()).unwrap();
    let engine = Engine::builder()
        .kind(EngineKind::Pooled)
        .cpu_workers(2)
        .build()
        .unwrap();
    let bodies = Bodies::new(busy_body(BusyCost::scaled(0.01)));
    let stat = executor::run(&g, &p, &engine, &bodies, &RunOptions::default()).unwrap();
    assert_eq!(stat.planned_bytes, p.planned_bytes());
    // The pool holds every planned storage (rounded up to pages).
    assert!(stat.peak_pool_bytes >= p.planned_bytes());
    assert!(stat.peak_in_use_bytes >= p.planned_bytes());
    assert!(stat.parallelism > 0.0 && stat.busy <= stat.makespan * 2);
    let dynamic = RunOptions {
        mode: Mode::Dynamic,
        ..RunOptions::default()
    };
    let dy = executor::run(&g, &p, &engine, &bodies, &dynamic).unwrap();
    let naive: u64 = g
        .tensors()
        .iter()
        .filter(|t| !t.is_external())
        .map(|t| t.size)
        .sum();
    assert!(dy.peak_in_use_bytes > 0);
    assert!(dy.peak_in_use_bytes <= naive + 4096 * g.tensors().len() as u64);
}

#[test]
fn a_plan_of_another_graph_is_refused() {
    let g = hand(BRANCHES);
    let mut p = plan(&g, &PlanOptions::default()).unwrap();
    // Put the join's output into the storage of a tensor still live.
    let (a, b) = (
        g.tensor_by_file_id(3).unwrap(),
        g.tensor_by_file_id(6).unwrap(),
    );
    p.storage_of[b] = p.storage_of[a];
    let engine = Engine::builder().kind(EngineKind::Naive).build().unwrap();
    let bodies = Bodies::new(busy_body(BusyCost::scaled(0.0)));
    let err = executor::run(&g, &p, &engine, &bodies, &RunOptions::default()).unwrap_err();
    assert!(matches!(err, ExecError::Plan(_)), "{err}");
}

#[test]
fn a_failing_body_is_reported() {
    let g = hand(BRANCHES);
    let p = plan(&g, &PlanOptions::default()).unwrap();
    let engine = Engine::builder().cpu_workers(2).build().unwrap();
    let bodies = Bodies::new(busy_body(BusyCost::scaled(0.0))).with(
        "add",
        Arc::new(|_: &mut executor::OpData<'_>| Err(depengine::OpError::msg("no kernel"))),
    );
    for mode in [Mode::Static, Mode::Dynamic] {
        let options = RunOptions {
            mode,
            ..RunOptions::default()
        };
        let err = executor::run(&g, &p, &engine, &bodies, &options).unwrap_err();
        assert!(err.to_string().contains("no kernel"), "{err}");
    }
    // The engine is usable afterwards.
    executor::run(
        &g,
        &p,
        &engine,
        &Bodies::new(busy_body(BusyCost::scaled(0.0))),
        &RunOptions::default(),
    )
    .unwrap();
}

#[test]
fn public_graph_types_are_thread_safe() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Graph>();
    send_sync::<MemoryPlan>();
    send_sync::<Bodies>();
    send_sync::<RunOptions>();
    send_sync::<executor::RunReport>();
    send_sync::<ChecksumLog>();
    send_sync::<ExecError>();
}
