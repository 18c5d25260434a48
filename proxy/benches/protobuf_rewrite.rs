//! regroup's protobuf rewrite (descriptor-guided wire walk, splicing bytes)
//! against the naive approach, in one run: prost-reflect DynamicMessage
//! decode -> rename the catalog's places -> encode, of the same body.
//!
//! Input: a 10,000-item ConfigMapList built from the captured ConfigMap
//! (`testdata/kube-1.24/renamed/047-get-configmap-protobuf`: an
//! ownerReference to a Foo of the renamed group, managedFields, a label
//! whose key contains the app's group name), renamed for the app. In `1%`
//! and `100%`, that share of the items carries the mapped group and the
//! others name no mapped group at all; in `1%-labels` the others still
//! carry the group's name in a label key (not a place: nothing to rename,
//! but the walker must look).
//! `stream` is the splice fed item by item in 16 KiB reads, as the proxy
//! renames protobuf lists (`rewrite/protobuf/list_stream.rs`).
//! Run: `cargo bench -p regroup --bench protobuf_rewrite`.

#[path = "../tests/it/common/mod.rs"]
mod common;
#[path = "../tests/it/protobuf_support/mod.rs"]
mod protobuf_support;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use protobuf_support::{envelope_json, Naive};
use regroup::rewrite::protobuf::list_stream::rewrite_in_chunks;
use regroup::rewrite::protobuf::MAGIC;
use regroup::rewrite::{Catalog, ProtoRewriter};
use regroup_config::Direction;

const CLUSTER: &str = "samplecontroller.team1.example.com";
const APP: &str = "samplecontroller.k8s.io";

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn ld(n: u32, value: &[u8], out: &mut Vec<u8>) {
    varint(u64::from(n) << 3 | 2, out);
    varint(value.len() as u64, out);
    out.extend_from_slice(value);
}

/// `what` replaced by a same-length name of no mapped group.
fn unmap(bytes: &[u8], what: &str) -> Vec<u8> {
    let other: String = what
        .chars()
        .map(|c| if c.is_ascii_lowercase() { 'q' } else { c })
        .collect();
    assert_eq!(other.len(), what.len());
    let mut out = bytes.to_vec();
    let mut i = 0;
    while let Some(at) = out[i..]
        .windows(what.len())
        .position(|w| w == what.as_bytes())
    {
        out[i + at..i + at + what.len()].copy_from_slice(other.as_bytes());
        i += at + what.len();
    }
    out
}

/// A ConfigMapList of `n` items, `percent`% carrying the mapped group; the
/// others keep the label key naming the group when `labels`.
fn list(n: usize, percent: usize, labels: bool) -> Vec<u8> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/kube-1.24/renamed/047-get-configmap-protobuf/response.body"
    );
    let captured = std::fs::read(path).unwrap();
    let (_, _, unknown, _) = protobuf_support::decode_envelope(&captured);
    let item = unknown
        .get_field_by_name("raw")
        .unwrap()
        .as_bytes()
        .unwrap()
        .to_vec();
    let mut unmapped = unmap(&item, CLUSTER);
    if !labels {
        unmapped = unmap(&unmapped, APP);
    }
    let every = 100 / percent;
    let mut body = Vec::with_capacity(n * (item.len() + 3) + 64);
    ld(1, b"\x12\x041234", &mut body);
    for i in 0..n {
        ld(2, if i % every == 0 { &item } else { &unmapped }, &mut body);
    }
    let mut type_meta = Vec::new();
    ld(1, b"v1", &mut type_meta);
    ld(2, b"ConfigMapList", &mut type_meta);
    let mut out = MAGIC.to_vec();
    ld(1, &type_meta, &mut out);
    ld(2, &body, &mut out);
    ld(3, b"", &mut out);
    ld(4, b"", &mut out);
    out
}

fn bench(c: &mut Criterion) {
    let map = common::fixture_map();
    let catalog = Catalog::new(&[]);
    let rw = ProtoRewriter::new(&map, &catalog, Direction::ToApp);
    let naive = Naive::new(&map, &catalog, Direction::ToApp);
    let mut group = c.benchmark_group("protobuf_rewrite");
    group.sample_size(10);
    for (label, percent, labels) in [
        ("1%", 1, false),
        ("1%-labels", 1, true),
        ("100%", 100, false),
    ] {
        let body = list(10_000, percent, labels);
        // Both approaches agree.
        let spliced = rw.rewrite_bytes(&body).unwrap().expect("renamed");
        assert_eq!(
            envelope_json(&spliced),
            envelope_json(&naive.rewrite(&body))
        );
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_with_input(BenchmarkId::new("splice", label), &body, |b, body| {
            b.iter(|| rw.rewrite_bytes(black_box(body)).unwrap())
        });
        group.bench_with_input(BenchmarkId::new("naive", label), &body, |b, body| {
            b.iter(|| naive.rewrite(black_box(body)))
        });
        // The same walk item by item, fed as 16 KiB reads (as the proxy
        // renames protobuf lists): the same bytes.
        assert_eq!(
            rewrite_in_chunks(&rw, &body, None, 16 << 10).unwrap(),
            spliced
        );
        group.bench_with_input(BenchmarkId::new("stream", label), &body, |b, body| {
            b.iter(|| rewrite_in_chunks(&rw, black_box(body), None, 16 << 10).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
