//! Records from every input format, and the records derived from graph
//! files matching the shared records files.

use std::path::Path;

use depengine::graph::format::GraphFile;
use depengine::plan::{lower_bound, Records, RecordsError};

fn data(name: &str) -> String {
    format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn graph_derived_records_equal_the_records_files() {
    for model in ["resnet18", "mp_hand_landmark_full", "squeezenet1_1"] {
        let from_graph = Records::load(data(&format!("{model}.graph.json"))).unwrap();
        let from_file = Records::load(data(&format!("{model}.records.json"))).unwrap();
        assert_eq!(from_graph.ops, from_file.ops, "{model}");
        assert_eq!(from_graph.records, from_file.records, "{model}");
        // The file states its own lower bound; ours must agree.
        let raw: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(data(&format!("{model}.records.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(
            lower_bound(&from_file.records),
            raw["lower_bound_bytes"].as_u64().unwrap(),
            "{model}"
        );
        assert_eq!(
            from_file.naive_bytes(),
            raw["naive_bytes"].as_u64().unwrap(),
            "{model}"
        );
    }
}

#[test]
fn graph_with_unknown_tensor_is_an_error_naming_op_and_tensor() {
    let text = r#"{"model":"m","tensors":[{"id":1,"size":8,"kind":"input"}],
        "ops":[{"name":"relu","type":"ReLU","inputs":[1],"outputs":[7]}]}"#;
    let g = GraphFile::from_json_str(text, Path::new("g.json")).unwrap();
    let err = Records::from_graph(&g, Path::new("g.json")).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("g.json") && msg.contains("relu") && msg.contains('7'),
        "{msg}"
    );
}

#[test]
fn malformed_files_are_errors_not_panics() {
    let dir = std::env::temp_dir().join(format!("depengine-plan-records-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases: [(&str, &str, &[&str]); 6] = [
        ("trunc.json", "{\"records\": [\n{\"id\": 1,", &["trunc.json", "line 2"]),
        ("type.json", "{\"records\": [{\"id\": 1, \"size\": \"big\", \"first\": 0, \"last\": 0}]}", &["type.json", "line 1"]),
        ("order.json", "{\"ops\": 3, \"records\": [{\"id\": 4, \"size\": 8, \"first\": 2, \"last\": 1}]}", &["order.json", "tensor 4", "first"]),
        ("dup.json", "{\"records\": [{\"id\": 4, \"size\": 8, \"first\": 0, \"last\": 1}, {\"id\": 4, \"size\": 8, \"first\": 0, \"last\": 1}]}", &["dup.json", "id"]),
        ("bad.csv", "id,lower,upper,size\n0,0,4,16\n1,3,2,8\n", &["bad.csv", "line 3", "upper"]),
        ("head.csv", "id,start,end,size\n0,0,4,16\n", &["head.csv", "line 1", "lower"]),
    ];
    for (name, text, needles) in cases {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let err = Records::load(&path).unwrap_err();
        let msg = err.to_string();
        for n in needles {
            assert!(msg.contains(n), "{name}: {msg:?} lacks {n:?}");
        }
    }
    let missing = Records::load(dir.join("absent.json")).unwrap_err();
    assert!(matches!(missing, RecordsError::Io { .. }));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn minimalloc_csv_loads_half_open_lifetimes() {
    let dir = std::env::temp_dir().join(format!("depengine-plan-csv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("example.csv");
    std::fs::write(
        &path,
        "id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,0,9,4\nb4,9,21,4\nb5,0,21,4\n",
    )
    .unwrap();
    let r = Records::load(&path).unwrap();
    assert_eq!(r.records.len(), 5);
    assert_eq!((r.records[0].first, r.records[0].last), (0, 2));
    assert_eq!((r.records[3].first, r.records[3].last), (9, 20));
    assert_eq!(r.ops, 21);
    assert_eq!(lower_bound(&r.records), 12);
    std::fs::remove_dir_all(&dir).ok();
}
