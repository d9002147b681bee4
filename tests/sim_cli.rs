//! `depengine simulate` from the command line.

use std::path::PathBuf;
use std::process::{Command, Output};

fn data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(rel)
}

fn simulate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_depengine"))
        .arg("simulate")
        .args(args)
        .output()
        .expect("the binary runs")
}

fn json_lines(out: &Output) -> Vec<serde_json::Value> {
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

#[test]
fn json_prints_one_object_per_mode() {
    let dir = data("sim/semi_sync");
    let out = simulate(&[
        dir.to_str().unwrap(),
        "--json",
        "--bandwidth",
        "500000",
        "--alloc",
        "oracle",
    ]);
    let lines = json_lines(&out);
    let modes: Vec<&str> = lines.iter().map(|v| v["mode"].as_str().unwrap()).collect();
    assert_eq!(modes, ["oracle", "pool", "semi-sync", "async"]);
    for v in &lines {
        for key in ["peak_bytes", "total_ms", "stall_ms", "swapped_bytes"] {
            assert!(v[key].is_number(), "{key} in {v}");
        }
    }
    // No budget: nothing swapped; the oracle peak worked out in sim_rules.
    assert_eq!(lines[0]["peak_bytes"], 1600);
    assert_eq!(lines[0]["total_ms"], 6.0);
    assert!(lines.iter().all(|v| v["swapped_bytes"] == 0));
}

#[test]
fn budget_makes_the_swap_modes_swap_and_fit() {
    let g = data("resnet18_train_b8.json");
    let out = simulate(&[
        g.to_str().unwrap(),
        "--mode",
        "semi-sync",
        "--budget",
        "350MiB",
        "--json",
    ]);
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 1);
    let v = &lines[0];
    assert_eq!(v["mode"], "semi-sync");
    assert_eq!(v["fits"], true);
    assert!(v["peak_bytes"].as_u64().unwrap() <= 350 << 20);
    assert!(v["swapped_bytes"].as_u64().unwrap() > 0);
    assert!(v["stall_ms"].as_f64().unwrap() > 0.0);
    // The chosen maps, by tensor id of the graph.
    let swap = v["swap"].as_array().unwrap();
    assert!(swap.len() as u64 >= v["swapped_maps"].as_u64().unwrap() && !swap.is_empty());
    assert!(swap
        .iter()
        .all(|id| id.as_str().unwrap().parse::<u64>().is_ok()));
}

#[test]
fn table_and_svg() {
    let g = data("resnet18_train_b8.json");
    let svg = std::env::temp_dir().join(format!("depengine-sim-{}.svg", std::process::id()));
    let out = simulate(&[
        g.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
        "--points",
        "3",
    ]);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    for word in [
        "resnet18_train_b8",
        "oracle",
        "pool",
        "semi-sync",
        "async",
        "peak_bytes",
    ] {
        assert!(table.contains(word), "{word} in {table}");
    }
    let text = std::fs::read_to_string(&svg).unwrap();
    let _ = std::fs::remove_file(&svg);
    assert!(text.starts_with("<svg") && text.trim_end().ends_with("</svg>"));
    assert!(text.contains("semi-sync") && text.contains("async") && text.contains("memory budget"));
}

#[test]
fn bad_input_fails_with_a_message_naming_the_file() {
    let out = simulate(&[data("sim").to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("io_info.json"), "{err}");

    let out = simulate(&[data("sim/order").to_str().unwrap(), "--mode", "sync"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("semi-sync"));

    let out = simulate(&[data("sim/order").to_str().unwrap(), "--budget", "12XB"]);
    assert!(!out.status.success());
}
