//! regroup's JSON rewrite against the naive approach, in one run: a
//! serde_json `Value` parse -> rename -> serialize of the same body.
//!
//! Input: a 10,000-item FooList built from the captured Foo
//! (`testdata/kube-1.24/renamed/111-list-foo-json`), where 1% or 100% of
//! the items carry the mapped group (the others name an unmapped group).
//! Run: `cargo bench -p regroup --bench json_rewrite`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use regroup::kube::Wire;
use regroup::rewrite::list_stream::rewrite_in_chunks;
use regroup::rewrite::{Catalog, Context, Engine};
use regroup_config::{Direction, GroupMap, MapRule, Rule};
use serde_json::Value as Json;

const CLUSTER: &str = "samplecontroller.team1.example.com";
const OTHER: &str = "unmapped.other.example.org";

fn map() -> GroupMap {
    GroupMap::new(vec![MapRule {
        rule: Rule::Exact {
            from: "samplecontroller.k8s.io".into(),
            to: CLUSTER.into(),
        },
        reference_keys: true,
    }])
    .unwrap()
}

/// A FooList of `n` items, `percent`% of them in the mapped group.
fn list(n: usize, percent: usize) -> Vec<u8> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/kube-1.24/renamed/111-list-foo-json/response.body"
    );
    let captured: Json = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let item = serde_json::to_string(&captured["items"][0]).unwrap();
    let unmapped = item.replace(CLUSTER, OTHER);
    let every = 100usize.checked_div(percent).unwrap_or(usize::MAX);
    let items: Vec<&str> = (0..n)
        .map(|i| {
            if i % every == 0 {
                item.as_str()
            } else {
                unmapped.as_str()
            }
        })
        .collect();
    format!(
        r#"{{"kind":"FooList","apiVersion":"{OTHER}/v1alpha1","metadata":{{"resourceVersion":"1"}},"items":[{}]}}"#,
        items.join(",")
    )
    .into_bytes()
}

/// The naive baseline: parse everything, rename every group-ish string,
/// serialize everything.
fn naive(map: &GroupMap, body: &[u8]) -> Vec<u8> {
    fn walk(map: &GroupMap, v: &mut Json) {
        match v {
            Json::Object(m) => {
                for (k, c) in m.iter_mut() {
                    let mapped = match (k.as_str(), c.as_str()) {
                        ("apiVersion", Some(s)) => map.map_api_version(s, Direction::ToApp),
                        ("apiGroup" | "group", Some(s)) => map.map_group(s, Direction::ToApp),
                        _ => None,
                    };
                    match mapped {
                        Some(m) => *c = Json::String(m),
                        None => walk(map, c),
                    }
                }
            }
            Json::Array(a) => a.iter_mut().for_each(|e| walk(map, e)),
            _ => {}
        }
    }
    let mut v: Json = serde_json::from_slice(body).unwrap();
    walk(map, &mut v);
    serde_json::to_vec(&v).unwrap()
}

fn bench(c: &mut Criterion) {
    let map = map();
    let catalog = Catalog::new(&[]);
    // The codec as the proxy holds it: the engine's.
    let engine = Engine::new(map.clone(), catalog);
    let rw = engine.json(Direction::ToApp);
    let mut g = c.benchmark_group("json_list_10k");
    g.sample_size(20);
    for percent in [1, 100] {
        let body = list(10_000, percent);
        // Same renames, checked once outside the timing.
        let ours: Json =
            serde_json::from_slice(&rewrite_in_chunks(rw, &body, 65536).unwrap()).unwrap();
        let theirs: Json = serde_json::from_slice(&naive(&map, &body)).unwrap();
        assert_eq!(ours, theirs, "both rename the same places");
        g.throughput(Throughput::Bytes(body.len() as u64));
        g.bench_with_input(
            BenchmarkId::new("naive_value", percent),
            &body,
            |b, body| b.iter(|| naive(&map, black_box(body))),
        );
        g.bench_with_input(
            BenchmarkId::new("regroup_whole", percent),
            &body,
            |b, body| {
                b.iter(|| {
                    let cx = Context::default();
                    engine
                        .body(Direction::ToApp, Wire::Json, cx, black_box(body))
                        .unwrap()
                })
            },
        );
        g.bench_with_input(
            BenchmarkId::new("regroup_stream_64k", percent),
            &body,
            |b, body| b.iter(|| rewrite_in_chunks(rw, black_box(body), 65536).unwrap()),
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
