//! Time and peak memory to rename the real OpenAPI v2 document (3.4 MB,
//! `testdata/kube-1.24/common/012-openapi-v2-json`) for the app.
//! `cargo run --release -p regroup --example openapi_cost`

use std::time::Instant;

use regroup::rewrite::openapi::OpenApiRewriter;
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
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/kube-1.24/common/012-openapi-v2-json/response.body"
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
    let rw = OpenApiRewriter::new(&map, Direction::ToApp, "-rg");
    let before = vm_hwm_kb();
    let mut best = f64::MAX;
    let mut out_len = 0;
    for _ in 0..5 {
        let t = Instant::now();
        let out = rw.rewrite_bytes(&doc).unwrap().expect("renamed");
        best = best.min(t.elapsed().as_secs_f64());
        out_len = out.len();
    }
    // A serde_json Value round trip of the same document, for scale.
    let t = Instant::now();
    let v: serde_json::Value = serde_json::from_slice(&doc).unwrap();
    let again = serde_json::to_vec(&v).unwrap();
    let value_secs = t.elapsed().as_secs_f64();
    drop((v, again));
    println!(
        "OpenAPI v2 JSON: {:.2} MB in, {:.2} MB out; rename {:.1} ms (best of 5); \
         serde_json Value parse+serialize alone {:.1} ms; peak RSS grew {:.1} MB while renaming (input held: {:.1} MB)",
        doc.len() as f64 / 1e6,
        out_len as f64 / 1e6,
        best * 1e3,
        value_secs * 1e3,
        (vm_hwm_kb().saturating_sub(before)) as f64 / 1024.0,
        doc.len() as f64 / 1048576.0,
    );
}
