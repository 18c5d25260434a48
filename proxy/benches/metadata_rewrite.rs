//! What `metadata:` rules cost, in one run: the same bodies renamed for
//! the app by an engine without metadata rules (the baseline: the catalog
//! and every byte as before metadata existed) and by one with them.
//!
//! Bodies: the captured Foo (`027-get-foo-json`, 921 bytes) and Deployment
//! (`041-get-deployment-json`, `042-get-deployment-protobuf`) from
//! `testdata/kube-1.24/renamed`, whose keys no rule names (`miss`: the
//! rules are configured, nothing matches); and the JSON Deployment with
//! labels in the ruled prefix added to its own and its template's labels
//! and to its selector (`hit`: built from the capture, one edit each).
//! Run: `cargo bench -p regroup --bench metadata_rewrite`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use regroup::kube::Wire;
use regroup::rewrite::{Catalog, Context, Engine};
use regroup_config::Direction;

const RULES: &str = "
rules:
  - {from: samplecontroller.k8s.io, to: samplecontroller.team1.example.com}
names: {kinds: []}
";

const METADATA: &str = "
metadata:
  prefixes:
    - {from: kopf.zalando.org, to: kopf.team1.example.com}
    - {from: samplecontroller.k8s.io, to: samplecontroller.team1.example.com}
  values:
    - {key: app.kubernetes.io/managed-by, from: sample-controller, to: sample-controller-team1}
";

fn capture(case: &str) -> Vec<u8> {
    let path = format!(
        "{}/../testdata/kube-1.24/renamed/{case}/response.body",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn engine(config: &str) -> Engine {
    let s = regroup_config::load(config).unwrap();
    Engine::new(s.map.clone(), Catalog::for_map(&s.fields, &s.map))
}

/// The Deployment with keys of the ruled prefix (as the cluster holds
/// them) in its labels, its selector and its template's labels.
fn deployment_hit() -> Vec<u8> {
    let text = String::from_utf8(capture("041-get-deployment-json")).unwrap();
    let key = r#""samplecontroller.team1.example.com/owner":"alpha","#;
    let out = text.replace(r#""labels":{"#, &format!(r#""labels":{{{key}"#));
    let out = out.replace(r#""matchLabels":{"#, &format!(r#""matchLabels":{{{key}"#));
    assert!(out.matches(key).count() >= 3, "the capture's shape changed");
    out.into_bytes()
}

fn bench(c: &mut Criterion) {
    let plain = engine(RULES);
    let ruled = engine(&format!("{RULES}{METADATA}"));
    let cases: [(&str, Wire, Vec<u8>); 4] = [
        ("foo_json_miss", Wire::Json, capture("027-get-foo-json")),
        (
            "deployment_json_miss",
            Wire::Json,
            capture("041-get-deployment-json"),
        ),
        ("deployment_json_hit", Wire::Json, deployment_hit()),
        (
            "deployment_protobuf_miss",
            Wire::Protobuf,
            capture("042-get-deployment-protobuf"),
        ),
    ];
    let mut g = c.benchmark_group("metadata");
    for (name, wire, body) in &cases {
        // The rules do rename a hit (and nothing else): what is measured is
        // real work.
        let renamed = ruled
            .body(Direction::ToApp, *wire, Context::default(), body)
            .unwrap();
        if name.ends_with("_hit") {
            let out = String::from_utf8(renamed.unwrap()).unwrap();
            assert!(out.contains("\"samplecontroller.k8s.io/owner\""));
        }
        g.throughput(Throughput::Bytes(body.len() as u64));
        for (label, e) in [("no_rules", &plain), ("rules", &ruled)] {
            g.bench_function(format!("{name}/{label}"), |b| {
                b.iter(|| {
                    e.body(Direction::ToApp, *wire, Context::default(), black_box(body))
                        .unwrap()
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
