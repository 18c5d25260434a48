//! A watch-list (`sendInitialEvents=true`, client-go 1.35+'s informers) on
//! every kind regroup hides or renames, in JSON and protobuf, through the
//! sidecar: the initial events are exactly the list the app would get, and
//! the `k8s.io/initial-events-end` BOOKMARK arrives exactly once, whether or
//! not any object came before it. An ERROR's Status is never hidden either.
//!
//! A real kube-apiserver 1.36 sends a watch-list's bookmark as an object of
//! the watched kind with no name: only `metadata.resourceVersion` and the
//! annotation. regroup once read a nameless object of a `names:` kind as
//! another copy's and dropped it, so a client-go informer on ClusterRoles
//! waited for it forever.

use crate::upstream_support::{send, sidecar_for, Answer};
use http::{Request, StatusCode};
use http_body_util::Full;
use regroup::rewrite::protobuf::test_wire::{cat, envelope, ld};
use regroup_config::GroupMap;
use serde_json::{json, Value as Json};

/// The default configuration: rules only, so `names:` is derived.
const CONFIG: &str =
    "rules:\n  - from: samplecontroller.k8s.io\n    to: samplecontroller.team1.example.com\n";

fn map() -> GroupMap {
    regroup_config::load(CONFIG)
        .expect("a valid configuration")
        .map
}

/// What a watch-list asks for.
const WATCH_LIST: &str =
    "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true";

const END: &str = "k8s.io/initial-events-end";

/// A kind regroup gives per-copy names to, with its URL and API version.
struct Kind {
    path: &'static str,
    api_version: &'static str,
    kind: &'static str,
}

const KINDS: &[Kind] = &[
    Kind {
        path: "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        api_version: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRole",
    },
    Kind {
        path: "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        api_version: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRoleBinding",
    },
    Kind {
        path: "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        api_version: "admissionregistration.k8s.io/v1",
        kind: "ValidatingWebhookConfiguration",
    },
    Kind {
        path: "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        api_version: "admissionregistration.k8s.io/v1",
        kind: "MutatingWebhookConfiguration",
    },
    Kind {
        path: "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
        api_version: "admissionregistration.k8s.io/v1",
        kind: "ValidatingAdmissionPolicy",
    },
    Kind {
        path: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        api_version: "apiextensions.k8s.io/v1",
        kind: "CustomResourceDefinition",
    },
];

/// This copy's object and another copy's, by their cluster names.
fn names(map: &GroupMap, k: &Kind) -> (String, String) {
    if k.kind == "CustomResourceDefinition" {
        return (
            "foos.samplecontroller.team1.example.com".into(),
            // The cluster's own original group is shadowed.
            "foos.samplecontroller.k8s.io".into(),
        );
    }
    let n = map.object_names().expect("names: derived from the rules");
    (n.to_cluster("reader").unwrap(), "team2-reader".into())
}

fn json_event(ty: &str, k: &Kind, meta: Json) -> String {
    let object = json!({"apiVersion": k.api_version, "kind": k.kind, "metadata": meta});
    json!({"type": ty, "object": object}).to_string() + "\n"
}

fn json_stream(k: &Kind, ours: &str, theirs: &str, with_objects: bool) -> String {
    let mut s = String::new();
    if with_objects {
        s += &json_event("ADDED", k, json!({"name": ours, "resourceVersion": "10"}));
        s += &json_event("ADDED", k, json!({"name": theirs, "resourceVersion": "11"}));
    }
    s += &json_event(
        "BOOKMARK",
        k,
        json!({"resourceVersion": "12", "annotations": {END: "true"}}),
    );
    s
}

/// ObjectMeta {1 name, 6 resourceVersion, 12 annotations {1 key, 2 value}}.
fn pb_object(k: &Kind, name: Option<&str>, rv: &str, end: bool) -> Vec<u8> {
    let mut meta = Vec::new();
    if let Some(n) = name {
        meta.extend(ld(1, n));
    }
    meta.extend(ld(6, rv));
    if end {
        meta.extend(ld(12, cat(&[ld(1, END), ld(2, "true")])));
    }
    envelope(k.api_version, k.kind, &ld(1, meta))
}

/// One length-prefixed frame of `WatchEvent {1 type, 2 object {1 raw}}`.
fn pb_frame(ty: &str, object: &[u8]) -> Vec<u8> {
    let event = cat(&[ld(1, ty), ld(2, ld(1, object))]);
    let mut out = (event.len() as u32).to_be_bytes().to_vec();
    out.extend(event);
    out
}

fn pb_stream(k: &Kind, ours: &str, theirs: &str, with_objects: bool) -> Vec<u8> {
    let mut s = Vec::new();
    if with_objects {
        s.extend(pb_frame("ADDED", &pb_object(k, Some(ours), "10", false)));
        s.extend(pb_frame("ADDED", &pb_object(k, Some(theirs), "11", false)));
    }
    s.extend(pb_frame("BOOKMARK", &pb_object(k, None, "12", true)));
    s
}

/// The frames of a protobuf watch body: (type, whether the object carries
/// the initial-events-end annotation, the object's bytes).
fn pb_frames(body: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let n = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        let frame = &rest[4..4 + n];
        rest = &rest[4 + n..];
        // type: field 1, the first field as built.
        assert_eq!(frame[0], 0x0a);
        let len = frame[1] as usize;
        let ty = String::from_utf8(frame[2..2 + len].to_vec()).unwrap();
        out.push((ty, frame[2 + len..].to_vec()));
    }
    out
}

async fn watch(url: &str, k: &Kind, accept: &str) -> (StatusCode, Vec<u8>) {
    let (status, _, body) = send(
        Request::get(format!("{url}{}?{WATCH_LIST}", k.path))
            .header("accept", accept)
            .body(Full::default())
            .unwrap(),
    )
    .await;
    (status, body.to_vec())
}

#[tokio::test]
async fn a_json_watch_list_keeps_its_bookmark_and_drops_only_another_copys_objects() {
    let map = map();
    for k in KINDS {
        let (ours, theirs) = names(&map, k);
        for with_objects in [true, false] {
            let stream = json_stream(k, &ours, &theirs, with_objects);
            let (url, _) = sidecar_for(CONFIG, Answer::ok("application/json", stream)).await;
            let (status, body) = watch(&url, k, "application/json").await;
            assert_eq!(status, StatusCode::OK, "{}", k.kind);
            let events: Vec<Json> = body
                .split(|b| *b == b'\n')
                .filter(|l| !l.is_empty())
                .map(|l| serde_json::from_slice(l).unwrap())
                .collect();
            let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
            let want: &[&str] = if with_objects {
                &["ADDED", "BOOKMARK"]
            } else {
                &["BOOKMARK"]
            };
            assert_eq!(types, want, "{} (objects: {with_objects})", k.kind);
            let bookmark = events.last().unwrap();
            assert_eq!(
                bookmark["object"]["metadata"]["annotations"][END], "true",
                "{}",
                k.kind
            );
            if with_objects {
                let name = events[0]["object"]["metadata"]["name"].as_str().unwrap();
                assert!(!name.contains("team2"), "{}: {name}", k.kind);
            }
        }
    }
}

#[tokio::test]
async fn a_protobuf_watch_list_keeps_its_bookmark_and_drops_only_another_copys_objects() {
    let map = map();
    let accept = "application/vnd.kubernetes.protobuf;type=watch, application/json";
    for k in KINDS {
        let (ours, theirs) = names(&map, k);
        for with_objects in [true, false] {
            let stream = pb_stream(k, &ours, &theirs, with_objects);
            let (url, _) = sidecar_for(
                CONFIG,
                Answer::ok("application/vnd.kubernetes.protobuf;stream=watch", stream),
            )
            .await;
            let (status, body) = watch(&url, k, accept).await;
            assert_eq!(status, StatusCode::OK, "{}", k.kind);
            let frames = pb_frames(&body);
            let types: Vec<&str> = frames.iter().map(|(t, _)| t.as_str()).collect();
            let want: &[&str] = if with_objects {
                &["ADDED", "BOOKMARK"]
            } else {
                &["BOOKMARK"]
            };
            assert_eq!(types, want, "{} (objects: {with_objects})", k.kind);
            // The bookmark's bytes are the apiserver's: nothing in it is
            // renamed.
            let sent = pb_frame("BOOKMARK", &pb_object(k, None, "12", true));
            let got = &frames.last().unwrap().1;
            assert_eq!(&sent[4 + 2 + "BOOKMARK".len()..], &got[..], "{}", k.kind);
            if with_objects {
                let added = String::from_utf8_lossy(&frames[0].1);
                assert!(!added.contains("team2"), "{}: {added:?}", k.kind);
            }
        }
    }
}

#[tokio::test]
async fn an_error_event_is_never_hidden() {
    let k = &KINDS[0];
    let status = json!({"apiVersion": "v1", "kind": "Status", "status": "Failure",
        "message": "too old resource version: 1 (12)", "reason": "Expired", "code": 410});
    let line = json!({"type": "ERROR", "object": status}).to_string() + "\n";
    let (url, _) = sidecar_for(CONFIG, Answer::ok("application/json", line.clone())).await;
    let (_, body) = watch(&url, k, "application/json").await;
    assert_eq!(String::from_utf8(body).unwrap(), line);

    // Protobuf: the Status is enveloped as `v1`/`Status` {1 metadata,
    // 2 status, 3 message, 4 reason, 6 code}.
    let status = envelope(
        "v1",
        "Status",
        &cat(&[
            ld(2, "Failure"),
            ld(3, "too old resource version"),
            ld(4, "Expired"),
        ]),
    );
    let frame = pb_frame("ERROR", &status);
    let (url, _) = sidecar_for(
        CONFIG,
        Answer::ok(
            "application/vnd.kubernetes.protobuf;stream=watch",
            frame.clone(),
        ),
    )
    .await;
    let (_, body) = watch(&url, k, "application/vnd.kubernetes.protobuf;type=watch").await;
    assert_eq!(body, frame);
}
