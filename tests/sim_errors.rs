//! Malformed profiles give errors that name the file and the entry.

use std::fs;
use std::path::{Path, PathBuf};

use depengine::sim::{from_graph, Profile};

fn base() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/sim/semi_sync")
}

/// A copy of the `semi_sync` fixture in a fresh temporary folder, with
/// `file` replaced by `text` (or removed when `None`).
fn variant(case: &str, file: &str, text: Option<&str>) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("depengine-sim-{}-{case}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    for f in [
        "io_info.json",
        "resize_info.json",
        "tensor_size.json",
        "cost_info.json",
    ] {
        fs::copy(base().join(f), dir.join(f)).unwrap();
    }
    match text {
        Some(t) => fs::write(dir.join(file), t).unwrap(),
        None => fs::remove_file(dir.join(file)).unwrap(),
    }
    dir
}

fn error_of(dir: &Path) -> String {
    let err = Profile::load_dir(dir, None).expect_err("the profile should be rejected");
    let _ = fs::remove_dir_all(dir);
    err.to_string()
}

fn assert_names(msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "{msg:?} should contain {p:?}");
    }
}

fn io_info(edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let mut v: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(base().join("io_info.json")).unwrap()).unwrap();
    edit(&mut v);
    v.to_string()
}

#[test]
fn the_fixture_itself_loads() {
    let p = Profile::load_dir(base(), None).unwrap();
    assert_eq!((p.ops.len(), p.forward_ops), (6, 3));
}

#[test]
fn missing_cost_names_cost_info_and_the_op() {
    let costs = r#"{"0": 1, "1": 1, "3": 1, "4": 1, "5": 1}"#;
    let msg = error_of(&variant("cost", "cost_info.json", Some(costs)));
    assert_names(&msg, &["cost_info.json", "op 2 (\"fwd2\")", "no time"]);
}

#[test]
fn cost_key_out_of_range_or_not_a_number() {
    let msg = error_of(&variant(
        "cost-range",
        "cost_info.json",
        Some(r#"{"9": 1}"#),
    ));
    assert_names(&msg, &["cost_info.json", "key \"9\"", "only 6 ops"]);
    let msg = error_of(&variant("cost-key", "cost_info.json", Some(r#"{"x1": 1}"#)));
    assert_names(&msg, &["cost_info.json", "\"x1\"", "op index"]);
    let msg = error_of(&variant("cost-neg", "cost_info.json", Some(r#"{"0": -1}"#)));
    assert_names(&msg, &["cost_info.json", "key \"0\"", "non-negative"]);
}

#[test]
fn missing_size_names_tensor_size_and_the_key() {
    let sizes = r#"{"0": 1000, "1": 100, "3": 100, "4": 100, "5": 10}"#;
    let msg = error_of(&variant("size", "tensor_size.json", Some(sizes)));
    assert_names(&msg, &["tensor_size.json", "key \"2\"", "op 2 (\"fwd2\")"]);
}

#[test]
fn bad_size_key_is_named() {
    let sizes = r#"{"0": 1000, "abc": 5}"#;
    let msg = error_of(&variant("size-key", "tensor_size.json", Some(sizes)));
    assert_names(&msg, &["tensor_size.json", "\"abc\""]);
}

#[test]
fn resize_info_of_the_wrong_length() {
    let msg = error_of(&variant("resize-len", "resize_info.json", Some("[[], []]")));
    assert_names(&msg, &["resize_info.json", "2 entries", "6 ops"]);
}

#[test]
fn workspace_freed_without_alloc_or_never_freed() {
    let text = r#"[[], [["free", "1:0"]], [], [], [], []]"#;
    let msg = error_of(&variant("free", "resize_info.json", Some(text)));
    assert_names(
        &msg,
        &["resize_info.json", "entry 1, action 0", "did not allocate"],
    );
    let text = r#"[[], [["alloc", "1:0"]], [], [], [], []]"#;
    let dir = variant("leak", "resize_info.json", Some(text));
    fs::write(
        dir.join("tensor_size.json"),
        r#"{"0":1000,"1":100,"2":500,"3":100,"4":100,"5":10,"1:0":8}"#,
    )
    .unwrap();
    assert_names(
        &error_of(&dir),
        &["resize_info.json", "entry 1", "\"1:0\"", "never freed"],
    );
    let text = r#"[[], [["grow", "1:0"]], [], [], [], []]"#;
    let msg = error_of(&variant("action", "resize_info.json", Some(text)));
    assert_names(&msg, &["resize_info.json", "entry 1, action 0", "\"grow\""]);
}

#[test]
fn io_info_inconsistencies_name_the_entry() {
    let text = io_info(|v| v[2]["release"] = serde_json::json!([1, 42]));
    let msg = error_of(&variant("rel", "io_info.json", Some(&text)));
    assert_names(
        &msg,
        &["io_info.json", "entry 2 (op \"fwd2\")", "tensor 42"],
    );

    let text = io_info(|v| v[1]["release"] = serde_json::json!([0]));
    let msg = error_of(&variant("after", "io_info.json", Some(&text)));
    assert_names(
        &msg,
        &[
            "io_info.json",
            "entry 5 (op \"fwd0_backward\")",
            "after op 1 released it",
        ],
    );

    let text = io_info(|v| v[3]["id"] = serde_json::json!(7));
    let msg = error_of(&variant("id", "io_info.json", Some(&text)));
    assert_names(&msg, &["io_info.json", "entry 3", "\"id\" is 7"]);

    let text = io_info(|v| v[3]["outputs"] = serde_json::json!([2]));
    let msg = error_of(&variant("twice", "io_info.json", Some(&text)));
    assert_names(
        &msg,
        &["io_info.json", "entry 3", "already produced by op 2"],
    );

    let text = io_info(|v| {
        for e in v.as_array_mut().unwrap() {
            let name = e["op"].as_str().unwrap().replace("backward", "grad");
            e["op"] = name.into();
        }
    });
    let msg = error_of(&variant("boundary", "io_info.json", Some(&text)));
    assert_names(&msg, &["io_info.json", "--forward-ops"]);
}

#[test]
fn syntax_errors_and_missing_files_name_the_file() {
    let msg = error_of(&variant("syntax", "io_info.json", Some("[\n{\"op\": }")));
    assert_names(&msg, &["io_info.json", "line 2"]);
    let msg = error_of(&variant("gone", "cost_info.json", None));
    assert_names(&msg, &["cost_info.json", "cannot read"]);
}

#[test]
fn graphs_that_are_not_training_graphs_are_refused() {
    let dir = std::env::temp_dir().join(format!("depengine-sim-{}-graph", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join("inference.json");
    fs::write(
        &path,
        r#"{"model":"m","tensors":[{"id":1,"size":8,"kind":"input"},{"id":2,"size":8,"kind":"output"}],
            "ops":[{"name":"relu","type":"ReLU","inputs":[1],"outputs":[2]}]}"#,
    )
    .unwrap();
    let msg = from_graph::load(&path, &Default::default(), None)
        .unwrap_err()
        .to_string();
    assert_names(&msg, &["inference.json", "forward_ops", "--forward-ops"]);
    fs::write(
        &path,
        r#"{"model":"m","forward_ops":1,"tensors":[{"id":1,"size":8,"kind":"input"}],
            "ops":[{"name":"relu","type":"ReLU","inputs":[9],"outputs":[1]}]}"#,
    )
    .unwrap();
    let msg = from_graph::load(&path, &Default::default(), None)
        .unwrap_err()
        .to_string();
    assert_names(&msg, &["inference.json", "op 0 (\"relu\")", "input 9"]);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn forward_ops_can_be_given_when_names_do_not_tell() {
    let text = io_info(|v| {
        for e in v.as_array_mut().unwrap() {
            let name = e["op"].as_str().unwrap().replace("backward", "grad");
            e["op"] = name.into();
        }
    });
    let dir = variant("given", "io_info.json", Some(&text));
    let p = Profile::load_dir(&dir, Some(3)).unwrap();
    assert_eq!(p.forward_ops, 3);
    let err = Profile::load_dir(&dir, Some(9)).unwrap_err().to_string();
    let _ = fs::remove_dir_all(&dir);
    assert_names(&err, &["io_info.json", "first backward op 9"]);
}

#[test]
fn seed_style_file_names_are_found() {
    let dir = std::env::temp_dir().join(format!("depengine-sim-{}-names", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    fs::copy(
        base().join("io_info.json"),
        dir.join("MobilenetV2.io_info.json"),
    )
    .unwrap();
    for f in ["resize_info", "tensor_size", "cost_info"] {
        fs::copy(
            base().join(format!("{f}.json")),
            dir.join(format!("MobilenetV2.4.{f}.json")),
        )
        .unwrap();
    }
    let p = Profile::load_dir(&dir, None);
    let _ = fs::remove_dir_all(&dir);
    assert_eq!(p.unwrap().ops.len(), 6);
}
