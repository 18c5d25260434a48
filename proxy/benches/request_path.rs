//! The per-request work of the proxy without I/O, against what any
//! pass-through forwarder does for the same request, in one run.
//!
//! One GET of the captured Foo (`testdata/kube-1.24/renamed/027-get-foo-json`,
//! 921 bytes) as kubectl sends it:
//! - `regroup_rename`: the request read (`RequestInfo`), its path and query
//!   renamed, the forwarded headers chosen (hop-by-hop out, `Accept`
//!   filtered), the response's media type read and its body renamed;
//! - `regroup_no_name`: the same with a configuration whose names the body
//!   does not contain (the body decision finds nothing to parse);
//! - `baseline_copy`: the headers copied into a new map and the body copied,
//!   the least a proxy that owns its buffers does.
//!
//! The ratio between them is the result (criterion prints each time).
//! Run: `cargo bench -p regroup --bench request_path`.

use std::hint::black_box;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use http::header::{self, HeaderMap, HeaderValue};
use regroup::kube::{media, MediaType, RequestInfo};
use regroup::rewrite::{Catalog, Context, Engine};
use regroup::url_rename;
use regroup_config::{Direction, GroupMap, MapRule, Rule};

const APP: &str = "samplecontroller.k8s.io";
const CLUSTER: &str = "samplecontroller.team1.example.com";
const PATH: &str = "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/renamed/foos/alpha";

fn engine(from: &str, to: &str) -> Engine {
    let map = GroupMap::new(vec![MapRule {
        rule: Rule::Exact {
            from: from.into(),
            to: to.into(),
        },
        reference_keys: true,
    }])
    .unwrap();
    Engine::new(map, Catalog::new(&[]))
}

/// kubectl 1.31's headers for a GET.
fn request_headers() -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in [
        ("host", "127.0.0.1:8001"),
        (
            "accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
        ),
        ("user-agent", "kubectl/v1.31.9 (linux/amd64) kubernetes/2a4f5b5"),
        ("kubectl-command", "kubectl get"),
        ("kubectl-session", "3b5c2d0e-5d0b-4a4e-9b1f-6f1f2c3d4e5f"),
        ("accept-encoding", "gzip"),
    ] {
        h.append(k, HeaderValue::from_static(v));
    }
    h
}

/// The captured response's headers.
fn response_headers() -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in [
        ("cache-control", "no-cache, private"),
        ("content-type", "application/json"),
        (
            "x-kubernetes-pf-flowschema-uid",
            "9211250e-ac75-466f-90d0-a82b3dc452ba",
        ),
        (
            "x-kubernetes-pf-prioritylevel-uid",
            "b88eeeee-243c-4281-8182-297c0e5e4cbe",
        ),
        ("date", "Sun, 22 Nov 2026 03:09:52 GMT"),
        ("content-length", "921"),
    ] {
        h.append(k, HeaderValue::from_static(v));
    }
    h
}

const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// The proxy's per-request decisions, in the order the sidecar stack takes
/// them (`serve/stack`): what is sent upstream, then the renamed body.
fn regroup_path(
    engine: &Engine,
    path: &str,
    req: &HeaderMap,
    resp: &HeaderMap,
    body: &Bytes,
) -> (String, HeaderMap, Bytes) {
    let dir = Direction::ToCluster;
    let info = RequestInfo::parse(path, None);
    let upstream_path = url_rename::rewrite_path_for(path, &info, engine.map(), dir)
        .unwrap_or_else(|| path.to_owned());
    let mut out = HeaderMap::with_capacity(req.len());
    for (name, value) in req {
        let n = name.as_str();
        if HOP_BY_HOP.contains(&n) || name == header::HOST || name == header::ACCEPT_ENCODING {
            continue;
        }
        if name == header::ACCEPT {
            if let Some(kept) = value
                .to_str()
                .ok()
                .and_then(media::accept_without_unrenamable)
            {
                if let Ok(v) = HeaderValue::from_str(&kept) {
                    out.append(name.clone(), v);
                }
                continue;
            }
        }
        out.append(name.clone(), value.clone());
    }
    let media = MediaType::of(resp);
    let kind = Catalog::kind_for_resource(&info.group, info.resource.as_deref().unwrap_or(""));
    let cx = Context {
        hint: None,
        addressed: kind.map(|k| (info.group.as_str(), k)),
    };
    let renamed = engine
        .body(dir.flip(), media.response_wire(), cx, body)
        .unwrap();
    let body = renamed.map(Bytes::from).unwrap_or_else(|| body.clone());
    (upstream_path, out, body)
}

/// What a pass-through forwarder does at least: its own copy of the headers
/// and of the body.
fn baseline_copy(req: &HeaderMap, body: &Bytes) -> (HeaderMap, Bytes) {
    let mut out = HeaderMap::with_capacity(req.len());
    for (name, value) in req {
        out.append(name.clone(), value.clone());
    }
    (out, Bytes::copy_from_slice(body))
}

fn bench(c: &mut Criterion) {
    let captured = Bytes::from(
        std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../testdata/kube-1.24/renamed/027-get-foo-json/response.body"
        ))
        .unwrap(),
    );
    let renaming = engine(APP, CLUSTER);
    let no_name = engine("wardle.example.com", "wardle.team1.example.com");
    let (req, resp) = (request_headers(), response_headers());

    // Checked once, outside the timing: each case does what it says.
    let (p, h, b) = regroup_path(&renaming, PATH, &req, &resp, &captured);
    assert_eq!(
        p,
        "/apis/samplecontroller.team1.example.com/v1alpha1/namespaces/renamed/foos/alpha"
    );
    assert!(h.get(header::HOST).is_none() && h.get(header::ACCEPT).is_some());
    assert_eq!(&b[..], foo_renamed(&captured).as_slice());
    let cluster_path = PATH.replace(APP, CLUSTER);
    let (_, _, b) = regroup_path(&no_name, &cluster_path, &req, &resp, &captured);
    assert_eq!(b, captured, "nothing to rename: the same bytes");

    let mut g = c.benchmark_group("request_path_get_foo");
    g.throughput(Throughput::Elements(1));
    g.bench_function("baseline_copy", |b| {
        b.iter(|| baseline_copy(black_box(&req), black_box(&captured)))
    });
    g.bench_function("regroup_no_name", |b| {
        b.iter(|| regroup_path(&no_name, black_box(&cluster_path), &req, &resp, &captured))
    });
    g.bench_function("regroup_rename", |b| {
        b.iter(|| regroup_path(&renaming, black_box(PATH), &req, &resp, &captured))
    });
    g.finish();
}

fn foo_renamed(captured: &[u8]) -> Vec<u8> {
    String::from_utf8(captured.to_vec())
        .unwrap()
        .replace(CLUSTER, APP)
        .into_bytes()
}

criterion_group!(benches, bench);
criterion_main!(benches);
