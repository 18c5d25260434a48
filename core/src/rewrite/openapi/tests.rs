//! OpenAPI on the real captures: the cluster's documents, renamed for the
//! app, describe the renamed world exactly as the original world's entries
//! do, and the upstream's own original-named entries are shadowed.

use serde_json::{json, Value as Json};

use super::*;
use regroup_config::{MapRule, Rule};

const APP: &str = "samplecontroller.k8s.io";
const CLUSTER: &str = "samplecontroller.team1.example.com";

fn map() -> GroupMap {
    GroupMap::new(vec![MapRule {
        rule: Rule::Exact {
            from: APP.into(),
            to: CLUSTER.into(),
        },
        reference_keys: true,
    }])
    .unwrap()
}

fn capture(path: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/../testdata/kube-1.24/{path}/response.body",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn to_app(input: &[u8]) -> Json {
    let map = map();
    let rw = OpenApiRewriter::new(&map, Direction::ToApp, "-rgtag");
    let out = rw.rewrite_bytes(input).unwrap().expect("something renamed");
    serde_json::from_slice(&out).expect("still JSON")
}

/// Operation ids and tags embed a camel-cased group; they are not renamed.
fn without_operation_names(v: &mut Json) {
    match v {
        Json::Object(m) => {
            m.remove("operationId");
            m.remove("tags");
            m.values_mut().for_each(without_operation_names);
        }
        Json::Array(a) => a.iter_mut().for_each(without_operation_names),
        _ => {}
    }
}

#[test]
fn v2_definitions_paths_and_refs_read_like_the_original_worlds() {
    // common/012 comes from the capture cluster, which serves both worlds.
    let upstream_bytes = capture("common/012-openapi-v2-json");
    let upstream: Json = serde_json::from_slice(&upstream_bytes).unwrap();
    let seen = to_app(&upstream_bytes);

    let ours = |v: &Json| -> Vec<String> {
        let mut k: Vec<String> = v["definitions"]
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| k.contains("samplecontroller"))
            .cloned()
            .collect();
        k.sort();
        k
    };
    assert_eq!(ours(&upstream).len(), 8, "both worlds upstream");
    assert_eq!(
        ours(&seen),
        [
            "io.k8s.samplecontroller.v1alpha1.Foo",
            "io.k8s.samplecontroller.v1alpha1.FooList",
            "io.k8s.samplecontroller.v1beta1.Foo",
            "io.k8s.samplecontroller.v1beta1.FooList"
        ]
    );
    // The definition the app sees is the cluster's renamed one, and reads
    // exactly like the original world's own.
    for name in ours(&seen) {
        let cluster_name = name.replace(
            "io.k8s.samplecontroller",
            "com.example.team1.samplecontroller",
        );
        let mut want = upstream["definitions"][&name].clone();
        let got = &seen["definitions"][&name];
        assert_ne!(got, &Json::Null);
        // Sanity: the renamed world's definition differed before renaming.
        assert_ne!(upstream["definitions"][&cluster_name], want);
        want["x-kubernetes-group-version-kind"][0]["group"] = json!(APP);
        assert_eq!(got, &want, "{name}");
    }
    let paths: Vec<&String> = seen["paths"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|p| p.contains("samplecontroller"))
        .collect();
    let upstream_paths: Vec<&String> = upstream["paths"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|p| p.starts_with(&format!("/apis/{APP}/")))
        .collect();
    assert_eq!(paths.len(), upstream_paths.len());
    for p in &paths {
        assert!(p.starts_with(&format!("/apis/{APP}/")), "{p}");
        let mut got = seen["paths"][p.as_str()].clone();
        let mut want = upstream["paths"][p.as_str()].clone();
        without_operation_names(&mut got);
        without_operation_names(&mut want);
        assert_eq!(got, want, "{p}");
    }
    let text = serde_json::to_string(&seen).unwrap();
    assert!(!text.contains(CLUSTER) && !text.contains("com.example.team1.samplecontroller"));
    // Everything else is untouched.
    assert_eq!(
        seen["definitions"].as_object().unwrap().len(),
        upstream["definitions"].as_object().unwrap().len() - 4
    );
    assert_eq!(
        seen["definitions"]["io.k8s.api.apps.v1.Deployment"],
        upstream["definitions"]["io.k8s.api.apps.v1.Deployment"]
    );
}

#[test]
fn v3_group_document_reads_like_the_original_worlds() {
    let renamed = capture("renamed/270-openapi-v3-group-v1alpha1-json");
    let mut got = to_app(&renamed);
    let mut want: Json =
        serde_json::from_slice(&capture("orig/270-openapi-v3-group-v1alpha1-json")).unwrap();
    without_operation_names(&mut got);
    without_operation_names(&mut want);
    assert_eq!(got, want);
}

#[test]
fn v3_group_document_round_trips_byte_for_byte() {
    let map = map();
    let renamed = capture("renamed/270-openapi-v3-group-v1alpha1-json");
    let app = OpenApiRewriter::new(&map, Direction::ToApp, "")
        .rewrite_bytes(&renamed)
        .unwrap()
        .unwrap();
    let back = OpenApiRewriter::new(&map, Direction::ToCluster, "")
        .rewrite_bytes(&app)
        .unwrap()
        .unwrap();
    assert_eq!(
        String::from_utf8(back).unwrap(),
        String::from_utf8(renamed).unwrap()
    );
}

#[test]
fn v3_index_of_1_24_lists_the_original_group_once() {
    let seen = to_app(&capture("common/014-openapi-v3-index"));
    let mine: Vec<&str> = seen["Paths"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Json::as_str)
        .filter(|p| p.contains("samplecontroller"))
        .collect();
    assert_eq!(
        mine,
        [
            format!("apis/{APP}/v1alpha1"),
            format!("apis/{APP}/v1beta1")
        ]
    );
}

#[test]
fn published_v3_index_renames_keys_urls_and_tags_hashes() {
    let index = json!({"paths": {
        "apis/apps/v1": {"serverRelativeURL": "/openapi/v3/apis/apps/v1?hash=AA"},
        (format!("apis/{APP}/v1")): {"serverRelativeURL": format!("/openapi/v3/apis/{APP}/v1?hash=BB")},
        (format!("apis/{CLUSTER}/v1")): {"serverRelativeURL": format!("/openapi/v3/apis/{CLUSTER}/v1?hash=CC")}
    }});
    let seen = to_app(index.to_string().as_bytes());
    assert_eq!(
        seen,
        json!({"paths": {
            "apis/apps/v1": {"serverRelativeURL": "/openapi/v3/apis/apps/v1?hash=AA"},
            (format!("apis/{APP}/v1")): {"serverRelativeURL": format!("/openapi/v3/apis/{APP}/v1?hash=CC-rgtag")}
        }})
    );
}

#[test]
fn documents_without_a_mapped_name_are_not_parsed() {
    let map = map();
    let rw = OpenApiRewriter::new(&map, Direction::ToApp, "");
    assert_eq!(rw.rewrite_bytes(b"{not json, no names").unwrap(), None);
    assert!(rw
        .rewrite_bytes(format!("{{\"paths\": {{\"/apis/{CLUSTER}\": ").as_bytes())
        .is_err());
}
