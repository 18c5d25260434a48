//! Time and peak memory to rename the real OpenAPI v2 document for the app:
//! JSON (3.5 MB, `common/012-openapi-v2-json`) or, with `--protobuf`, gnostic
//! protobuf (3.0 MB, `common/013-openapi-v2-protobuf`). One form per run, so
//! the peak RSS is that form's.
//! `cargo run --release -p regroup --example openapi_cost [-- --protobuf]`

use std::time::Instant;

use regroup::rewrite::openapi::OpenApiRewriter;
use regroup::rewrite::openapi_proto::OpenApiProtoRewriter;
use regroup_config::{Direction, GroupMap, MapRule, Rule};

fn vm_hwm_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let protobuf = std::env::args().any(|a| a == "--protobuf");
    let case = if protobuf {
        "013-openapi-v2-protobuf"
    } else {
        "012-openapi-v2-json"
    };
    let path = format!(
        "{}/../testdata/kube-1.24/common/{case}/response.body",
        env!("CARGO_MANIFEST_DIR")
    );
    let doc = std::fs::read(path).unwrap();
    let map = GroupMap::new(vec![MapRule {
        rule: Rule::Exact {
            from: "samplecontroller.k8s.io".into(),
            to: "samplecontroller.team1.example.com".into(),
        },
        reference_keys: true,
    }])
    .unwrap();
    let json_rw = OpenApiRewriter::new(&map, Direction::ToApp, "-rg");
    let proto_rw = OpenApiProtoRewriter::new(&map, Direction::ToApp);
    let before = vm_hwm_kb();
    let mut best = f64::MAX;
    let mut out_len = 0;
    for _ in 0..5 {
        let t = Instant::now();
        let out = if protobuf {
            proto_rw.rewrite_bytes(&doc)
        } else {
            json_rw.rewrite_bytes(&doc)
        }
        .unwrap()
        .expect("renamed");
        best = best.min(t.elapsed().as_secs_f64());
        out_len = out.len();
    }
    let grew = vm_hwm_kb().saturating_sub(before);
    println!(
        "OpenAPI v2 {}: {:.2} MB in, {:.2} MB out; rename {:.1} ms (best of 5); \
         peak RSS grew {:.1} MB while renaming (input held: {:.1} MB)",
        if protobuf { "protobuf" } else { "JSON" },
        doc.len() as f64 / 1e6,
        out_len as f64 / 1e6,
        best * 1e3,
        grew as f64 / 1024.0,
        doc.len() as f64 / 1048576.0,
    );
    if !protobuf {
        // A serde_json Value round trip of the same document, for scale.
        let t = Instant::now();
        let v: serde_json::Value = serde_json::from_slice(&doc).unwrap();
        let again = serde_json::to_vec(&v).unwrap();
        println!(
            "  (serde_json Value parse+serialize alone: {:.1} ms)",
            t.elapsed().as_secs_f64() * 1e3
        );
        drop((v, again));
    }
}
