//! Per-copy short names and categories (`names.shortNamePrefix`) on real
//! kube-apiserver bytes: a CRD (JSON, as kubectl writes and reads it), the
//! legacy discovery `APIResourceList` (JSON and protobuf, kube 1.24
//! captures) and aggregated discovery `APIGroupDiscoveryList` (JSON and
//! protobuf, kube 1.29 captures). Only the renamed groups' resources' names
//! change; the built-in groups' (`deploy`, `crd`, `all`) never do.

use crate::common;
use crate::common::EngineJson;
use crate::protobuf_support;

use common::fixtures_of;
use protobuf_support::envelope_json;
use regroup::rewrite::{Catalog, ProtoRewriter};
use regroup_config::{Direction, GroupMap};
use serde_json::Value as Json;

const RULES: &str = "
rules:
  - {from: samplecontroller.k8s.io, to: samplecontroller.team1.example.com}
  - {from: wardle.example.com, to: wardle.team1.example.com}
";

fn map(names: &str) -> (GroupMap, Catalog) {
    let s = regroup_config::load(&format!("{RULES}{names}")).unwrap();
    let catalog = Catalog::for_map(&s.fields, &s.map);
    (s.map, catalog)
}

const PREFIXED: &str = "names: {shortNamePrefix: t1-}\n";
const EVERY_CATEGORY: &str = "names: {shortNamePrefix: t1-, keepCategories: []}\n";

fn read(version: &str, case: &str, file: &str) -> Vec<u8> {
    std::fs::read(fixtures_of(version).join(case).join(file)).unwrap()
}

fn json(bytes: &[u8]) -> Json {
    serde_json::from_slice(bytes).unwrap()
}

fn strings(v: &Json) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().map(|s| s.as_str().unwrap()).collect())
        .unwrap_or_default()
}

#[test]
fn a_crd_written_by_the_app_gets_the_prefix_and_reads_back_as_written() {
    let create = read("kube-1.24", "orig/001-create-crd", "request.body");
    for (names, categories) in [(PREFIXED, vec!["all"]), (EVERY_CATEGORY, vec!["t1-all"])] {
        let (map, catalog) = map(names);
        let to_cluster = EngineJson::new(&map, &catalog, Direction::ToCluster);
        let to_app = EngineJson::new(&map, &catalog, Direction::ToApp);
        let sent = to_cluster.rewrite_bytes(&create).unwrap().unwrap();
        let crd = json(&sent);
        assert_eq!(crd["spec"]["group"], "samplecontroller.team1.example.com");
        assert_eq!(strings(&crd["spec"]["names"]["shortNames"]), ["t1-fo"]);
        assert_eq!(strings(&crd["spec"]["names"]["categories"]), categories);
        // Back toward the app: the bytes the app wrote.
        let back = to_app.rewrite_bytes(&sent).unwrap().unwrap();
        assert!(back == create, "{}", String::from_utf8_lossy(&back));
    }
}

#[test]
fn without_a_prefix_short_names_and_categories_keep_their_bytes() {
    let create = read("kube-1.24", "orig/001-create-crd", "request.body");
    let (map, catalog) = map("");
    let sent = EngineJson::new(&map, &catalog, Direction::ToCluster)
        .rewrite_bytes(&create)
        .unwrap()
        .unwrap();
    let crd = json(&sent);
    assert_eq!(strings(&crd["spec"]["names"]["shortNames"]), ["fo"]);
    assert_eq!(strings(&crd["spec"]["names"]["categories"]), ["all"]);
}

#[test]
fn a_crd_on_the_cluster_without_the_prefix_is_shown_shadowed_and_kept_on_write_back() {
    // Captured from a cluster where the renamed CRD was installed by hand,
    // with the app's short name: not this copy's mark.
    let stored = read("kube-1.24", "renamed/036-get-crd-json", "response.body");
    let (map, catalog) = map(EVERY_CATEGORY);
    let to_app = EngineJson::new(&map, &catalog, Direction::ToApp);
    let to_cluster = EngineJson::new(&map, &catalog, Direction::ToCluster);
    let seen = to_app.rewrite_bytes(&stored).unwrap().unwrap();
    let crd = json(&seen);
    for names in [&crd["spec"]["names"], &crd["status"]["acceptedNames"]] {
        assert_eq!(strings(&names["shortNames"]), ["fo.shadowed"]);
        assert_eq!(strings(&names["categories"]), ["all.shadowed"]);
    }
    // A PUT of what the app read: not one byte of the names lost.
    let put = to_cluster.rewrite_bytes(&seen).unwrap().unwrap();
    assert!(put == stored, "{}", String::from_utf8_lossy(&put));
}

#[test]
fn a_crd_of_a_group_no_rule_renames_is_left_alone() {
    let (map, catalog) = map(EVERY_CATEGORY);
    let other = br#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"certificates.cert-manager.io"},"spec":{"group":"cert-manager.io","names":{"plural":"certificates","kind":"Certificate","shortNames":["cert","certs"],"categories":["cert-manager"]}},"status":{"acceptedNames":{"plural":"certificates","kind":"Certificate","shortNames":["cert","certs"],"categories":["cert-manager"]}}}"#;
    for dir in [Direction::ToCluster, Direction::ToApp] {
        let out = EngineJson::new(&map, &catalog, dir)
            .rewrite_bytes(other)
            .unwrap();
        assert!(out.is_none(), "{dir:?}");
    }
}

#[test]
fn a_short_name_too_long_with_the_prefix_is_refused_naming_it() {
    let (map, catalog) = map(PREFIXED);
    let long = "a".repeat(62);
    let body = format!(
        r#"{{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{{"name":"foos.samplecontroller.k8s.io"}},"spec":{{"group":"samplecontroller.k8s.io","names":{{"plural":"foos","kind":"Foo","shortNames":["{long}"]}}}}}}"#
    );
    let e = EngineJson::new(&map, &catalog, Direction::ToCluster)
        .rewrite_bytes(body.as_bytes())
        .unwrap_err();
    assert!(e.to_string().contains(&long), "{e}");
    assert!(e.to_string().contains("63"), "{e}");
}

/// The legacy discovery of the renamed group with the cluster's names
/// prefixed, as a cluster holding a rendered CRD serves it.
fn prefixed_legacy(bytes: &[u8]) -> Vec<u8> {
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    assert!(text.contains(r#""shortNames":["fo"],"categories":["all"]"#));
    text.replace(
        r#""shortNames":["fo"],"categories":["all"]"#,
        r#""shortNames":["t1-fo"],"categories":["t1-all"]"#,
    )
    .into_bytes()
}

#[test]
fn legacy_discovery_json_loses_the_prefix_for_the_app() {
    let (map, catalog) = map(EVERY_CATEGORY);
    let to_app = EngineJson::new(&map, &catalog, Direction::ToApp);
    let cluster = prefixed_legacy(&read(
        "kube-1.24",
        "renamed/264-discovery-v1alpha1-json",
        "response.body",
    ));
    let doc = json(&to_app.rewrite_bytes(&cluster).unwrap().unwrap());
    assert_eq!(doc["groupVersion"], "samplecontroller.k8s.io/v1alpha1");
    let foos = &doc["resources"][0];
    assert_eq!(foos["name"], "foos");
    assert_eq!(strings(&foos["shortNames"]), ["fo"]);
    assert_eq!(strings(&foos["categories"]), ["all"]);
    // As captured (no prefix on the cluster): shown shadowed.
    let captured = read(
        "kube-1.24",
        "renamed/264-discovery-v1alpha1-json",
        "response.body",
    );
    let doc = json(&to_app.rewrite_bytes(&captured).unwrap().unwrap());
    assert_eq!(strings(&doc["resources"][0]["shortNames"]), ["fo.shadowed"]);
}

#[test]
fn the_core_groups_short_names_are_never_touched() {
    let (map, catalog) = map(EVERY_CATEGORY);
    let core = read(
        "kube-1.24",
        "common/004-discovery-api-v1-json",
        "response.body",
    );
    assert!(core
        .windows(6)
        .any(|w| w == br#""po"]"#.as_slice() || w == b"\"all\"]"));
    for dir in [Direction::ToCluster, Direction::ToApp] {
        let out = EngineJson::new(&map, &catalog, dir)
            .rewrite_bytes(&core)
            .unwrap();
        assert!(out.is_none_or(|o| o == core), "{dir:?}");
    }
}

#[test]
fn legacy_discovery_protobuf_is_renamed_both_ways() {
    let (map, catalog) = map(EVERY_CATEGORY);
    let to_app = ProtoRewriter::new(&map, &catalog, Direction::ToApp);
    let to_cluster = ProtoRewriter::new(&map, &catalog, Direction::ToCluster);
    // The orig world's document as the cluster would serve the renamed
    // copy (the codec is the same both ways), then back: the same bytes.
    let orig = read(
        "kube-1.24",
        "orig/265-discovery-v1alpha1-protobuf",
        "response.body",
    );
    let cluster = to_cluster.rewrite_bytes(&orig).unwrap().unwrap();
    let doc = envelope_json(&cluster);
    assert_eq!(
        doc["groupVersion"],
        "samplecontroller.team1.example.com/v1alpha1"
    );
    assert_eq!(strings(&doc["resources"][0]["shortNames"]), ["t1-fo"]);
    assert_eq!(strings(&doc["resources"][0]["categories"]), ["t1-all"]);
    let back = to_app.rewrite_bytes(&cluster).unwrap().unwrap();
    assert!(back == orig, "round trip differs");
    // The capture of the renamed world (installed without the prefix).
    let captured = read(
        "kube-1.24",
        "renamed/265-discovery-v1alpha1-protobuf",
        "response.body",
    );
    let doc = envelope_json(&to_app.rewrite_bytes(&captured).unwrap().unwrap());
    assert_eq!(strings(&doc["resources"][0]["shortNames"]), ["fo.shadowed"]);
    assert_eq!(doc["groupVersion"], "samplecontroller.k8s.io/v1alpha1");
}

/// Every (group, resource, shortNames, categories) of an aggregated
/// discovery document.
fn short_forms(doc: &Json) -> Vec<(String, String, Vec<String>, Vec<String>)> {
    let mut out = Vec::new();
    for item in doc["items"].as_array().unwrap() {
        let group = item["metadata"]["name"].as_str().unwrap_or("").to_owned();
        for v in item["versions"].as_array().into_iter().flatten() {
            // A version of an unavailable aggregated API lists none.
            for r in v["resources"].as_array().into_iter().flatten() {
                let list = |k: &str| -> Vec<String> {
                    strings(&r[k]).iter().map(|s| s.to_string()).collect()
                };
                out.push((
                    group.clone(),
                    r["resource"].as_str().unwrap().to_owned(),
                    list("shortNames"),
                    list("categories"),
                ));
            }
        }
    }
    out
}

/// For the app: the original group (shadowed) is gone, the renamed one
/// takes its name and its names lose the mark; every other group's names
/// are as they came.
fn check_aggregated_for_the_app(before: &Json, after: &Json, foo_short: &str, foo_cat: &str) {
    let before = short_forms(before);
    let after = short_forms(after);
    let others = |v: &[(String, String, Vec<String>, Vec<String>)]| {
        v.iter()
            .filter(|(g, ..)| !g.starts_with("samplecontroller.") && !g.starts_with("wardle."))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(others(&before), others(&after));
    let apps: Vec<_> = others(&after)
        .into_iter()
        .filter(|(g, r, ..)| g == "apps" && r == "deployments")
        .collect();
    assert!(
        apps.iter()
            .any(|(_, _, s, c)| s == &["deploy"] && c == &["all"]),
        "{apps:?} {:?}",
        after
            .iter()
            .map(|x| (&x.0, &x.1))
            .take(8)
            .collect::<Vec<_>>()
    );
    let foos: Vec<_> = after
        .iter()
        .filter(|(g, r, ..)| g == "samplecontroller.k8s.io" && r == "foos")
        .collect();
    assert_eq!(
        foos.len(),
        2,
        "v1beta1 and v1alpha1 of the renamed group only"
    );
    for (_, _, s, c) in foos {
        assert_eq!(s, &[foo_short]);
        assert_eq!(c, &[foo_cat]);
    }
    assert!(!after.iter().any(|(g, ..)| g.contains("team1")));
}

#[test]
fn aggregated_discovery_json_loses_the_prefix_for_the_app() {
    let (map, catalog) = map(EVERY_CATEGORY);
    let to_app = EngineJson::new(&map, &catalog, Direction::ToApp);
    let captured = read(
        "kube-1.29",
        "common/002-discovery-apis-aggregated-v2beta1-json",
        "response.body",
    );
    // The cluster with this copy's CRD rendered: its names prefixed.
    let mut cluster = json(&captured);
    for item in cluster["items"].as_array_mut().unwrap() {
        if item["metadata"]["name"] != "samplecontroller.team1.example.com" {
            continue;
        }
        for v in item["versions"].as_array_mut().unwrap() {
            for r in v["resources"].as_array_mut().unwrap() {
                if r.get("shortNames").is_some() {
                    r["shortNames"] = serde_json::json!(["t1-fo"]);
                    r["categories"] = serde_json::json!(["t1-all"]);
                }
            }
        }
    }
    let cluster_bytes = serde_json::to_vec(&cluster).unwrap();
    let after = json(&to_app.rewrite_bytes(&cluster_bytes).unwrap().unwrap());
    check_aggregated_for_the_app(&cluster, &after, "fo", "all");
    // As captured (no mark on the cluster): shown shadowed.
    let after = json(&to_app.rewrite_bytes(&captured).unwrap().unwrap());
    check_aggregated_for_the_app(&json(&captured), &after, "fo.shadowed", "all.shadowed");
}

#[test]
fn aggregated_discovery_protobuf_is_renamed_both_ways() {
    let (map, catalog) = map(EVERY_CATEGORY);
    let to_app = ProtoRewriter::new(&map, &catalog, Direction::ToApp);
    let to_cluster = ProtoRewriter::new(&map, &catalog, Direction::ToCluster);
    let captured = read(
        "kube-1.29",
        "common/007-discovery-apis-aggregated-v2beta1-protobuf",
        "response.body",
    );
    // As captured, for the app: the renamed group's names unmarked.
    let before = envelope_json(&captured);
    let after = envelope_json(&to_app.rewrite_bytes(&captured).unwrap().unwrap());
    check_aggregated_for_the_app(&before, &after, "fo.shadowed", "all.shadowed");
    // The responseKinds too (the descriptors reach them).
    assert!(before
        .to_string()
        .contains("\"group\":\"samplecontroller.team1.example.com\""));
    assert!(!after.to_string().contains("team1"));
    // Toward the cluster the original group's entry takes the mark (the
    // codec is the same both ways; the cluster's own team1 entry is the
    // other side's name there, dropped), and back for the app it loses it.
    let cluster = to_cluster.rewrite_bytes(&captured).unwrap().unwrap();
    let marked = short_forms(&envelope_json(&cluster));
    let foos: Vec<_> = marked
        .iter()
        .filter(|(g, r, ..)| g == "samplecontroller.team1.example.com" && r == "foos")
        .map(|(_, _, s, c)| (s.clone(), c.clone()))
        .collect();
    let mark = (vec!["t1-fo".to_string()], vec!["t1-all".to_string()]);
    assert_eq!(foos, vec![mark.clone(), mark], "v1beta1 and v1alpha1");
    let app = short_forms(&envelope_json(
        &to_app.rewrite_bytes(&cluster).unwrap().unwrap(),
    ));
    let foos: Vec<_> = app
        .iter()
        .filter(|(g, r, ..)| g == "samplecontroller.k8s.io" && r == "foos")
        .map(|(_, _, s, c)| (s.clone(), c.clone()))
        .collect();
    let plain = (vec!["fo".to_string()], vec!["all".to_string()]);
    assert_eq!(foos, vec![plain.clone(), plain]);
}

/// The aggregated discovery descriptors (proto/apidiscovery_v2beta1.proto)
/// read kube 1.29's protobuf `/apis` as its JSON form says: every
/// resource's group, names for people and response kinds.
#[test]
fn the_protobuf_aggregated_discovery_decodes_as_its_json_form() {
    let proto = envelope_json(&read(
        "kube-1.29",
        "common/007-discovery-apis-aggregated-v2beta1-protobuf",
        "response.body",
    ));
    let json = json(&read(
        "kube-1.29",
        "common/002-discovery-apis-aggregated-v2beta1-json",
        "response.body",
    ));
    assert_eq!(short_forms(&proto), short_forms(&json));
    assert!(short_forms(&json).len() > 50);
    let kinds = |doc: &Json| -> Vec<String> {
        let mut out = Vec::new();
        for item in doc["items"].as_array().unwrap() {
            for v in item["versions"].as_array().into_iter().flatten() {
                for r in v["resources"].as_array().into_iter().flatten() {
                    out.push(format!("{}", r["responseKind"]));
                    for s in r["subresources"].as_array().into_iter().flatten() {
                        out.push(format!("{} {}", s["subresource"], s["responseKind"]));
                    }
                }
            }
        }
        out
    };
    assert_eq!(kinds(&proto), kinds(&json));
}
