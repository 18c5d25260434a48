//! Protobuf lists renamed item by item as they arrive
//! (`rewrite::protobuf::list_stream`), on the real captures of
//! `testdata/kube-1.24`:
//!
//! - every captured protobuf body, fed in chunks of many sizes (the small
//!   lists cut in two at every byte), gives exactly the bytes the whole-body
//!   rewriter gives, in both directions;
//! - a hidden item (a CRD of a shadowed group) is dropped as by the whole
//!   path;
//! - a list cut short, a field longer than the list, an envelope repeating
//!   its items, a list over the limit: errors, never output;
//! - every one of those through a spill file too (the same bytes, no file
//!   left behind); a large built list held in memory only up to the
//!   look-ahead and the item being read; a list past the spill limit, an
//!   item past the object limit: errors (507 and 502 through regroup);
//! - through a real regroup listener, a list sent in small chunks is
//!   answered with the whole path's bytes, and a broken one with a `Status`
//!   (502) that holds none of the list's bytes.

use crate::common;
use crate::protobuf_support;

use bytes::Bytes;
use common::{fixture_map, fixtures, Case};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use protobuf_support::envelope_json;
use regroup::body::spill_files::to_disk;
use regroup::pipeline::BodyLimits;
use regroup::rewrite::protobuf::list_stream::{rewrite_in_chunks, ListStream};
use regroup::rewrite::protobuf::spool::Spill;
use regroup::rewrite::{Catalog, ProtoRewriter};
use regroup_config::Direction;
use serde_json::Value as Json;
use tokio::net::TcpListener;

struct Body {
    name: String,
    bytes: Vec<u8>,
    addressed: Option<(&'static str, &'static str)>,
    list: bool,
}

/// The kind a request path addresses, when its objects' names carry a
/// group (as the proxy decides it).
fn addressed(path: &str) -> Option<(&'static str, &'static str)> {
    let path = path.split('?').next()?;
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["apis", g, _, resource, ..] => ["apiextensions.k8s.io", "apiregistration.k8s.io"]
            .into_iter()
            .find(|k| k == g)
            .and_then(|g| Catalog::kind_for_resource(g, resource).map(|k| (g, k))),
        _ => None,
    }
}

/// Every protobuf (non-watch) response body captured in `world`.
fn bodies(world: &str) -> Vec<Body> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures().join(world))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.as_bytes()[0].is_ascii_digit())
        .collect();
    names.sort();
    let mut out = Vec::new();
    for name in names {
        let case = Case::load(world, &name);
        let ct = case.response_type();
        if !ct.starts_with("application/vnd.kubernetes.protobuf")
            || ct.contains("stream=watch")
            || case.response.is_empty()
        {
            continue;
        }
        let path = case.exchange["path"].as_str().unwrap_or("").to_owned();
        let bytes = case.response_body();
        out.push(Body {
            name: format!("{world}/{name}"),
            list: name.contains("-list-"),
            bytes,
            addressed: addressed(&path),
        });
    }
    out
}

fn all_bodies() -> Vec<Body> {
    ["orig", "renamed", "common"]
        .iter()
        .flat_map(|w| bodies(w))
        .collect()
}

/// What the whole-body rewriter makes of `input`.
fn whole(rw: &ProtoRewriter<'_>, b: &Body, input: &[u8]) -> Result<Vec<u8>, String> {
    rw.rewrite_bytes_with(input, b.addressed)
        .map(|o| o.unwrap_or_else(|| input.to_vec()))
        .map_err(|e| e.to_string())
}

/// `input` fed to a stream in the pieces `cuts` (ascending offsets) make,
/// in memory and through a spill file.
fn streamed(
    rw: &ProtoRewriter<'_>,
    b: &Body,
    input: &[u8],
    cuts: &[usize],
) -> Result<Vec<u8>, String> {
    streamed_with(rw, b, input, cuts, true)
}

fn streamed_with(
    rw: &ProtoRewriter<'_>,
    b: &Body,
    input: &[u8],
    cuts: &[usize],
    spill: bool,
) -> Result<Vec<u8>, String> {
    let mut s = ListStream::new(b.addressed, usize::MAX);
    let mut at = 0;
    for &c in cuts.iter().chain([input.len()].iter()) {
        s.feed(rw, &input[at..c]).map_err(|e| e.to_string())?;
        at = c;
    }
    let in_memory = s
        .finish(rw)
        .map_err(|e| e.to_string())?
        .into_chunks()
        .map_err(|e| e.to_string())?
        .concat();
    if !spill {
        return Ok(in_memory);
    }
    // Through a spill file from the first byte: the same bytes, and no
    // file left behind.
    let dir = tempfile::tempdir().unwrap();
    let mut s = ListStream::with_spill(
        b.addressed,
        usize::MAX,
        to_disk(0, u64::MAX, Some(dir.path())),
    );
    let mut at = 0;
    for &c in cuts.iter().chain([input.len()].iter()) {
        s.feed(rw, &input[at..c]).map_err(|e| e.to_string())?;
        at = c;
    }
    let spilled = s
        .finish(rw)
        .map_err(|e| e.to_string())?
        .into_chunks()
        .map_err(|e| e.to_string())?
        .concat();
    assert_eq!(spilled, in_memory, "{}: spilled", b.name);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    Ok(in_memory)
}

fn rewriters<'a>(
    map: &'a regroup_config::GroupMap,
    catalog: &'a Catalog,
) -> [ProtoRewriter<'a>; 2] {
    [
        ProtoRewriter::new(map, catalog, Direction::ToApp),
        ProtoRewriter::new(map, catalog, Direction::ToCluster),
    ]
}

#[test]
fn every_captured_protobuf_body_streams_to_the_whole_paths_bytes() {
    let (map, catalog) = (fixture_map(), Catalog::new(&[]));
    let bodies = all_bodies();
    let lists = bodies.iter().filter(|b| b.list).count();
    assert!(lists >= 30, "only {lists} protobuf lists captured");
    let (mut renamed, mut streamed_lists) = (0, 0);
    for rw in &rewriters(&map, &catalog) {
        for b in &bodies {
            let want = whole(rw, b, &b.bytes);
            if want.as_ref().is_ok_and(|w| *w != b.bytes) {
                renamed += 1;
            }
            for chunk in [1, 2, 3, 7, 64, 1000, b.bytes.len()] {
                let cuts: Vec<usize> = (chunk..b.bytes.len()).step_by(chunk).collect();
                let got = streamed(rw, b, &b.bytes, &cuts);
                assert_eq!(
                    got.as_ref().ok(),
                    want.as_ref().ok(),
                    "{} ({:?}), chunks of {chunk}: {:?}",
                    b.name,
                    rw.direction(),
                    got.as_ref().err()
                );
            }
            let mut s = ListStream::new(b.addressed, usize::MAX);
            if s.feed(rw, &b.bytes).is_ok() && s.is_streamed() {
                streamed_lists += usize::from(b.list);
            }
            assert_eq!(
                rewrite_in_chunks(rw, &b.bytes, b.addressed, 5).ok(),
                want.ok(),
                "{}",
                b.name
            );
        }
    }
    assert!(renamed > 60, "only {renamed} bodies renamed");
    // Not collected whole: every captured list (kinds regroup has a
    // message for and kinds walked leniently alike).
    assert_eq!(streamed_lists, 2 * lists, "lists renamed item by item");
}

#[test]
fn small_lists_cut_in_two_at_every_byte_give_the_same_bytes() {
    let (map, catalog) = (fixture_map(), Catalog::new(&[]));
    let mut cut = 0;
    for rw in &rewriters(&map, &catalog) {
        for b in all_bodies()
            .iter()
            .filter(|b| b.list && b.bytes.len() <= 8 << 10)
        {
            let want = whole(rw, b, &b.bytes).expect(&b.name);
            // In memory: the spill file holds the same bytes (every other
            // test here compares the two).
            for i in 0..=b.bytes.len() {
                let got = streamed_with(rw, b, &b.bytes, &[i], false);
                assert!(
                    got.as_ref() == Ok(&want),
                    "{} ({:?}) cut at {i}: {:?}",
                    b.name,
                    rw.direction(),
                    got.err()
                );
            }
            cut += 1;
        }
    }
    assert!(cut >= 40, "only {cut} lists cut");
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn read_varint(b: &[u8], at: &mut usize) -> usize {
    let mut v = 0usize;
    for i in 0.. {
        let byte = b[*at];
        *at += 1;
        v |= usize::from(byte & 0x7f) << (7 * i);
        if byte < 0x80 {
            break;
        }
    }
    v
}

/// An envelope's parts: magic and `typeMeta` field, `raw`'s value, and
/// what follows it (the usual shape, as the apiserver writes it).
fn split(body: &[u8]) -> (&[u8], &[u8], &[u8]) {
    assert!(body.starts_with(b"k8s\0"));
    let mut at = 4;
    assert_eq!(body[at], 0x0a, "typeMeta first");
    at += 1;
    let n = read_varint(body, &mut at);
    at += n;
    let head_end = at;
    assert_eq!(body[at], 0x12, "then raw");
    at += 1;
    let n = read_varint(body, &mut at);
    (&body[..head_end], &body[at..at + n], &body[at + n..])
}

fn envelope(head: &[u8], raw: &[u8], tail: &[u8]) -> Vec<u8> {
    let mut out = head.to_vec();
    out.push(0x12);
    varint(raw.len() as u64, &mut out);
    out.extend_from_slice(raw);
    out.extend_from_slice(tail);
    out
}

fn body(name: &str, bytes: Vec<u8>) -> Body {
    Body {
        name: name.into(),
        bytes,
        addressed: Some(("apiextensions.k8s.io", "CustomResourceDefinition")),
        list: true,
    }
}

fn names(list: &[u8]) -> Vec<String> {
    // An empty repeated field is absent from the decoded form.
    envelope_json(list)["items"]
        .as_array()
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The cluster's CRD list with, between two copies of its own CRD, a CRD of
/// `samplecontroller.k8s.io`: for the app that group is shadowed (the
/// cluster's `samplecontroller.team1.example.com` takes its name), so its
/// CRD is hidden.
#[test]
fn hidden_items_are_dropped_as_by_the_whole_path() {
    let (map, catalog) = (fixture_map(), Catalog::new(&[]));
    let list = Case::load("renamed", "117-list-crd-protobuf").response;
    let other = Case::load("orig", "037-get-crd-protobuf").response;
    let (head, raw, tail) = split(&list);
    let (_, hidden, _) = split(&other);
    let mut raw = raw.to_vec();
    let mut at = 0;
    let mut fields = Vec::new();
    while at < raw.len() {
        let start = at;
        at += 1;
        let n = read_varint(&raw, &mut at);
        at += n;
        fields.push((raw[start], start, at));
    }
    let item = fields.iter().find(|f| f.0 == 0x12).expect("an item");
    let own = raw[item.1..item.2].to_vec();
    let mut hidden_item = vec![0x12];
    varint(hidden.len() as u64, &mut hidden_item);
    hidden_item.extend_from_slice(hidden);
    for extra in [&hidden_item, &own] {
        raw.extend_from_slice(extra);
    }
    let input = body("crd list with a hidden item", envelope(head, &raw, tail));
    let before = names(&input.bytes);
    assert!(
        before.contains(&"foos.samplecontroller.k8s.io".to_owned()),
        "{before:?}"
    );
    let rw = ProtoRewriter::new(&map, &catalog, Direction::ToApp);
    let want = whole(&rw, &input, &input.bytes).unwrap();
    let after = names(&want);
    assert_eq!(after.len(), before.len() - 1, "{after:?}");
    assert!(
        after.iter().all(|n| n == "foos.samplecontroller.k8s.io"),
        "{after:?}"
    );
    for chunk in [1, 3, 100, input.bytes.len()] {
        let cuts: Vec<usize> = (chunk..input.bytes.len()).step_by(chunk).collect();
        assert_eq!(streamed(&rw, &input, &input.bytes, &cuts), Ok(want.clone()));
    }
    // A list of nothing but hidden items is an empty list.
    let mut only = Vec::new();
    for f in fields.iter().filter(|f| f.0 != 0x12) {
        only.extend_from_slice(&raw[f.1..f.2]);
    }
    only.extend_from_slice(&hidden_item);
    let input = body("only hidden", envelope(head, &only, tail));
    let got = streamed(&rw, &input, &input.bytes, &[7]).unwrap();
    assert_eq!(got, whole(&rw, &input, &input.bytes).unwrap());
    assert!(names(&got).is_empty());
}

fn len_field(number: u8, value: &[u8]) -> Vec<u8> {
    let mut out = vec![number << 3 | 2];
    varint(value.len() as u64, &mut out);
    out.extend_from_slice(value);
    out
}

/// A list of a kind regroup has no message for is walked by convention
/// (items at 2, their metadata at 1). An item that doesn't follow it is
/// left as it came; a list whose items field isn't even a message is left
/// whole as it came, wherever that field is and however the list is cut.
#[test]
fn a_lenient_list_that_breaks_the_convention_is_left_as_it_came() {
    let (map, catalog) = (fixture_map(), Catalog::new(&[]));
    let rw = ProtoRewriter::new(&map, &catalog, Direction::ToApp);
    let api_version = b"samplecontroller.team1.example.com/v1alpha1";
    let type_meta = [len_field(1, api_version), len_field(2, b"BarList")].concat();
    let head = [b"k8s\0".as_slice(), &len_field(1, &type_meta)].concat();
    let good = len_field(2, &len_field(1, &len_field(13, &len_field(5, api_version))));
    // `metadata` a varint, a name in another field.
    let bad_item = len_field(2, &[vec![0x08, 0x05], len_field(3, api_version)].concat());
    // `items` a varint.
    let bad_list = vec![0x10, 0x05];
    let list_meta = len_field(1, &len_field(2, b"42"));
    let tail = [0x1a, 0x00, 0x22, 0x00];
    let b = Body {
        name: "BarList".into(),
        bytes: Vec::new(),
        addressed: None,
        list: true,
    };
    let renamed = |bytes: &[u8]| -> usize {
        let text = String::from_utf8_lossy(bytes).into_owned();
        text.matches("samplecontroller.k8s.io/").count()
    };
    for (bad, renamed_items) in [(&bad_item, 3), (&bad_list, 0)] {
        for at in 1..=4 {
            let mut items = vec![list_meta.clone(), good.clone(), good.clone(), good.clone()];
            items.insert(at, bad.clone());
            let input = envelope(&head, &items.concat(), &tail);
            let want = whole(&rw, &b, &input).unwrap();
            // The envelope's own apiVersion, and each item that follows the
            // convention unless the list doesn't.
            assert_eq!(renamed(&want), 1 + renamed_items, "bad field at {at}");
            if renamed_items == 0 {
                let (_, raw, _) = split(&want);
                assert_eq!(raw, items.concat().as_slice(), "items as they came");
            }
            for chunk in [1, 4, 33, input.len()] {
                let cuts: Vec<usize> = (chunk..input.len()).step_by(chunk).collect();
                assert_eq!(
                    streamed(&rw, &b, &input, &cuts),
                    Ok(want.clone()),
                    "bad field at {at}, chunks of {chunk}"
                );
            }
        }
    }
    // Over several of the chunks renamed items are held in, one item larger
    // than a chunk among them: put back as well.
    let big = len_field(
        2,
        &[
            len_field(1, &len_field(13, &len_field(5, api_version))),
            len_field(3, &vec![b'x'; 300 << 10]),
        ]
        .concat(),
    );
    let mut items = vec![list_meta.clone()];
    items.extend(std::iter::repeat_n(good.clone(), 6000));
    items.push(big);
    items.extend(std::iter::repeat_n(good.clone(), 6000));
    for bad in [None, Some(&bad_list)] {
        let mut items = items.clone();
        items.extend(bad.cloned());
        let input = envelope(&head, &items.concat(), &tail);
        let want = whole(&rw, &b, &input).unwrap();
        assert_eq!(renamed(&want), 1 + if bad.is_some() { 0 } else { 12_001 });
        let cuts: Vec<usize> = (4096..input.len()).step_by(4096).collect();
        assert!(streamed(&rw, &b, &input, &cuts) == Ok(want));
    }
}

#[test]
fn broken_lists_are_errors_never_output() {
    let (map, catalog) = (fixture_map(), Catalog::new(&[]));
    let rw = ProtoRewriter::new(&map, &catalog, Direction::ToApp);
    let list = Case::load("renamed", "117-list-crd-protobuf").response;
    let (head, raw, tail) = split(&list);
    let raw_start = list.len() - tail.len() - raw.len();
    let b = body("117", list.clone());
    // Cut short anywhere inside the items: an error, however it is fed.
    for end in raw_start..raw_start + raw.len() {
        let short = &list[..end];
        assert!(
            streamed(&rw, &b, short, &[end / 2]).is_err(),
            "cut at {end} of {}",
            list.len()
        );
    }
    // Cut inside the head: what the whole path says of the same bytes.
    for end in 0..raw_start {
        let short = &list[..end];
        assert_eq!(
            streamed(&rw, &b, short, &[end / 2]).is_ok(),
            whole(&rw, &b, short).is_ok(),
            "cut at {end}"
        );
    }
    // An item longer than the list.
    let mut long = raw.to_vec();
    long.extend_from_slice(&[0x12, 0x7f, 0x0a]);
    let broken = envelope(head, &long, tail);
    assert!(streamed(&rw, &b, &broken, &[]).is_err());
    assert!(whole(&rw, &b, &broken).is_err());
    // An items field that isn't a message, without a name: an error when a
    // name is elsewhere in the list (before or after it), as in the whole
    // path.
    for at_start in [true, false] {
        let varint_items = [0x10, 0x05];
        let raw = if at_start {
            [&varint_items[..], raw].concat()
        } else {
            [raw, &varint_items[..]].concat()
        };
        let odd = envelope(head, &raw, tail);
        assert!(whole(&rw, &b, &odd).is_err());
        assert!(streamed(&rw, &b, &odd, &[odd.len() / 2]).is_err());
    }
    // An envelope that repeats its items after them.
    let mut repeated = list.clone();
    repeated.extend_from_slice(&list[raw_start - 3..raw_start + raw.len()]);
    assert!(streamed(&rw, &b, &repeated, &[100]).is_err());
    // Over the limit: refused as soon as the item's length is read.
    let mut huge = head.to_vec();
    huge.push(0x12);
    varint(1 << 40, &mut huge);
    huge.push(0x12);
    varint(1 << 39, &mut huge);
    let mut s = ListStream::new(b.addressed, 1 << 20);
    assert!(s.feed(&rw, &huge).is_err(), "an item over the limit");
    let mut s = ListStream::new(b.addressed, 1 << 10);
    let fed = list.chunks(100).try_for_each(|c| s.feed(&rw, c));
    assert!(fed.is_err(), "a list over the limit");
}

type UpBody = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;

/// An upstream answering every request with `body` as protobuf, in chunks
/// of `chunk` bytes.
async fn upstream(body: Vec<u8>, chunk: usize) -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (s, _) = l.accept().await.unwrap();
            let body = body.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |_req| {
                    let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = body
                        .chunks(chunk)
                        .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
                        .collect();
                    let r: Response<UpBody> = Response::builder()
                        .header("content-type", "application/vnd.kubernetes.protobuf")
                        .body(StreamBody::new(futures_util::stream::iter(frames)).boxed())
                        .unwrap();
                    async move { Ok::<_, std::convert::Infallible>(r) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    format!("http://{addr}")
}

async fn get(addr: std::net::SocketAddr, path: &str) -> (StatusCode, http::HeaderMap, Bytes) {
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let resp = client
        .request(
            Request::get(format!("http://{addr}{path}"))
                .header("accept", "application/vnd.kubernetes.protobuf")
                .body(Full::default())
                .unwrap(),
        )
        .await
        .unwrap();
    let (parts, body) = resp.into_parts();
    (
        parts.status,
        parts.headers,
        body.collect().await.unwrap().to_bytes(),
    )
}

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

#[tokio::test]
async fn through_regroup_a_list_in_small_chunks_is_the_whole_paths_bytes() {
    let (map, catalog) = (fixture_map(), Catalog::new(&[]));
    let rw = ProtoRewriter::new(&map, &catalog, Direction::ToApp);
    let list = Case::load("renamed", "117-list-crd-protobuf").response;
    let want = whole(&rw, &body("117", list.clone()), &list).unwrap();
    assert_ne!(want, list);
    let addr = common::sidecar(upstream(list, 13).await, None).await;
    let (status, headers, got) = get(addr, CRDS).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got, want);
    assert_eq!(
        headers["content-length"].to_str().unwrap(),
        want.len().to_string()
    );
}

#[tokio::test]
async fn through_regroup_a_broken_list_is_a_status_without_its_bytes() {
    let list = Case::load("renamed", "117-list-crd-protobuf").response;
    let (_, raw, tail) = split(&list);
    // Cut in the middle of the items.
    let short = list[..list.len() - tail.len() - raw.len() / 2].to_vec();
    let addr = common::sidecar(upstream(short, 64).await, None).await;
    let (status, _, got) = get(addr, CRDS).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    let st: Json = serde_json::from_slice(&got).expect("a JSON Status");
    assert_eq!(
        (st["kind"].as_str(), st["code"].as_u64()),
        (Some("Status"), Some(502))
    );
    assert!(!got.starts_with(b"k8s\0"));
    let text = String::from_utf8_lossy(&got);
    assert!(!text.contains("samplecontroller"), "{text}");
}

/// The CRD list's one item, repeated `n` times between its head and tail.
fn built_list(n: usize) -> Vec<u8> {
    let list = Case::load("renamed", "117-list-crd-protobuf").response;
    let (head, raw, tail) = split(&list);
    // The raw message's first field is the ListMeta, then the items.
    let mut at = 0;
    let mut fields = Vec::new();
    while at < raw.len() {
        let start = at;
        at += 1;
        let len = read_varint(raw, &mut at);
        at += len;
        fields.push(&raw[start..at]);
    }
    let (meta, items) = fields.split_first().unwrap();
    assert_eq!(items.len(), 1, "the capture holds one CRD");
    let mut big = meta.to_vec();
    for _ in 0..n {
        big.extend_from_slice(items[0]);
    }
    envelope(head, &big, tail)
}

#[test]
fn a_large_list_is_held_in_memory_only_up_to_the_look_ahead_and_one_item() {
    let (map, catalog) = (fixture_map(), Catalog::new(&[]));
    let rw = ProtoRewriter::new(&map, &catalog, Direction::ToApp);
    // About 10 MiB, each item renamed.
    let input = built_list(4000);
    let b = body("built", input.clone());
    let want = whole(&rw, &b, &input).unwrap();
    assert_ne!(want, input);
    let keep = 64 << 10;
    let dir = tempfile::tempdir().unwrap();
    let mut s = ListStream::with_spill(None, 1 << 20, to_disk(keep, u64::MAX, Some(dir.path())));
    let mut most = 0;
    let chunk = 16 << 10;
    for c in input.chunks(chunk) {
        s.feed(&rw, c).unwrap();
        most = most.max(s.held());
    }
    assert!(s.spilled());
    // The spool's write buffer (256 KiB) or the look-ahead, the envelope's
    // head, and the input buffer (an item and a chunk, at its capacity).
    assert!(
        most <= (256 << 10) + keep + 4 * chunk,
        "held at most {most} bytes of a {}-byte list",
        input.len()
    );
    let got = s.finish(&rw).unwrap();
    assert_eq!(got.len as usize, want.len());
    assert!(got.into_chunks().unwrap().concat() == want);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn limits_on_the_spill_and_the_item_are_errors_never_output() {
    let (map, catalog) = (fixture_map(), Catalog::new(&[]));
    let rw = ProtoRewriter::new(&map, &catalog, Direction::ToApp);
    let input = built_list(40);
    let dir = tempfile::tempdir().unwrap();
    // The renamed list past the spill limit.
    let mut s = ListStream::with_spill(None, 1 << 20, to_disk(1 << 10, 16 << 10, Some(dir.path())));
    let err = input
        .chunks(4096)
        .try_for_each(|c| s.feed(&rw, c))
        .expect_err("past the spill limit");
    assert!(
        matches!(err, regroup::rewrite::RewriteError::Storage(_)),
        "{err}"
    );
    drop(s);
    // An item past the object limit, spilled or not.
    for spill in [
        Spill::memory(usize::MAX),
        to_disk(0, u64::MAX, Some(dir.path())),
    ] {
        let mut s = ListStream::with_spill(None, 1 << 10, spill);
        let err = input
            .chunks(4096)
            .try_for_each(|c| s.feed(&rw, c))
            .expect_err("an item past the limit");
        assert!(err.to_string().contains("larger than 1024 bytes"), "{err}");
    }
    // Cut short after spilling: an error at the end.
    let mut s = ListStream::with_spill(None, 1 << 20, to_disk(0, u64::MAX, Some(dir.path())));
    s.feed(&rw, &input[..input.len() - 100]).unwrap();
    assert!(s.spilled());
    assert!(s.finish(&rw).is_err());
    // A spill directory that isn't there.
    let mut s = ListStream::with_spill(
        None,
        1 << 20,
        to_disk(0, u64::MAX, Some(&dir.path().join("absent"))),
    );
    let err = s.feed(&rw, &input).expect_err("no spill directory");
    assert!(err.to_string().contains("spill file"), "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

async fn sidecar_with_limits(server: String, limits: BodyLimits) -> std::net::SocketAddr {
    let engine = regroup::rewrite::Engine::new(fixture_map(), Catalog::new(&[]));
    let up = regroup::upstream::Upstream::new(
        &regroup::upstream::Resolved {
            server,
            ..Default::default()
        },
        false,
    )
    .unwrap();
    let proxy = regroup::pipeline::proxy::Proxy::sidecar(
        regroup::pipeline::live::Live::new(engine),
        std::sync::Arc::new(up),
        true,
    )
    .with_limits(limits);
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(common::serve_plain(l, std::sync::Arc::new(proxy)));
    addr
}

#[tokio::test]
async fn through_regroup_a_spilled_list_is_the_whole_paths_bytes_and_past_the_limits_a_status() {
    let (map, catalog) = (fixture_map(), Catalog::new(&[]));
    let rw = ProtoRewriter::new(&map, &catalog, Direction::ToApp);
    let list = built_list(1000);
    let want = whole(&rw, &body("built", list.clone()), &list).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let limits = |max: u64, object: usize| BodyLimits {
        spill: to_disk(64 << 10, max, Some(dir.path())),
        object,
        ..Default::default()
    };
    // Spilled: the same bytes as renamed whole.
    let addr = sidecar_with_limits(
        upstream(list.clone(), 4096).await,
        limits(u64::MAX, 8 << 20),
    )
    .await;
    let (status, headers, got) = get(addr, CRDS).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        headers["content-length"].to_str().unwrap(),
        want.len().to_string()
    );
    assert!(got == want);
    // Past the spill limit: 507; an item past the object limit: 502.
    for (l, code) in [
        (limits(100 << 10, 8 << 20), StatusCode::INSUFFICIENT_STORAGE),
        (limits(u64::MAX, 1 << 10), StatusCode::BAD_GATEWAY),
    ] {
        let addr = sidecar_with_limits(upstream(list.clone(), 4096).await, l).await;
        let (status, _, got) = get(addr, CRDS).await;
        assert_eq!(status, code);
        let st: Json = serde_json::from_slice(&got).expect("a JSON Status");
        assert_eq!(st["kind"].as_str(), Some("Status"));
        assert_eq!(st["code"].as_u64(), Some(code.as_u16() as u64));
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
