//! `depengine run` from the command line.

use std::path::PathBuf;
use std::process::{Command, Output};

fn graph(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/graphs")
        .join(format!("{name}.json"))
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_depengine"))
        .arg("run")
        .args(args)
        // The bundled model must be found from any directory.
        .current_dir(std::env::temp_dir())
        .output()
        .expect("the binary runs")
}

fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[test]
fn bundled_model_runs_with_json() {
    let v = json(&run(&["--json", "--scale", "0.01"]));
    for key in [
        "model",
        "engine",
        "workers",
        "colors",
        "mode",
        "planned_bytes",
        "peak_pool_bytes",
        "makespan_ms",
        "parallelism",
    ] {
        assert!(v.get(key).is_some(), "{key} missing from {v}");
    }
    assert_eq!(v["model"], "resnet18");
    assert_eq!(v["engine"], "per-device");
    assert_eq!(v["workers"], 2);
    assert_eq!(v["colors"], 1);
    assert_eq!(v["mode"], "static");
    assert!(v["planned_bytes"].as_u64().unwrap() > 0);
    assert!(v["peak_pool_bytes"].as_u64().unwrap() >= v["planned_bytes"].as_u64().unwrap());
    assert!(v["parallelism"].as_f64().unwrap() > 0.0);
}

#[test]
fn every_option_combination_reproduces_the_serial_checksums() {
    let path = graph("mp_hand_recrop");
    let path = path.to_str().unwrap();
    for engine in ["naive", "pooled", "per-device"] {
        for (mode, colors) in [("static", "1"), ("static", "4"), ("dynamic", "2")] {
            let v = json(&run(&[
                path,
                "--json",
                "--check",
                "--engine",
                engine,
                "--mode",
                mode,
                "--colors",
                colors,
                "--workers",
                "2",
            ]));
            assert_eq!(v["checksums_match"], true, "{engine} {mode} {colors}: {v}");
            assert_eq!(v["model"], "mp_hand_recrop");
            assert_eq!(v["engine"], engine);
            assert_eq!(v["mode"], mode);
        }
    }
}

#[test]
fn match_range_and_inplace_options_reach_the_planner() {
    let path = graph("squeezenet1_1");
    let path = path.to_str().unwrap();
    let auto = json(&run(&[path, "--json", "--scale", "0"]));
    let none = json(&run(&[
        path,
        "--json",
        "--scale",
        "0",
        "--match-range",
        "0",
        "--no-inplace",
    ]));
    assert_eq!(none["match_range"], 0);
    assert_eq!(none["inplace"], false);
    assert!(none["planned_bytes"].as_u64().unwrap() > auto["planned_bytes"].as_u64().unwrap());
    let text = run(&[path, "--match-range", "4", "--scale", "0"]);
    assert!(text.status.success());
    let line = String::from_utf8(text.stdout).unwrap();
    assert!(
        line.contains("match_range=4") && line.contains("planned_bytes="),
        "{line}"
    );
}

#[test]
fn bad_input_is_an_error_naming_it() {
    let out = run(&["/nonexistent/model.json"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/model.json"), "{err}");

    let out = run(&["--match-range", "wide"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("wide"));

    let out = run(&["--mode", "lazy"]);
    assert!(!out.status.success());

    let out = run(&["--engine", "gpu"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown engine"));

    let broken = std::env::temp_dir().join(format!("depengine-broken-{}.json", std::process::id()));
    std::fs::write(
        &broken,
        r#"{"model":"b","tensors":[{"id":1,"size":4,"kind":"output"}],
            "ops":[{"name":"x","type":"f","inputs":[7],"outputs":[1]}]}"#,
    )
    .unwrap();
    let out = run(&[broken.to_str().unwrap()]);
    std::fs::remove_file(&broken).ok();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("\"x\"") && err.contains('7'), "{err}");
}
