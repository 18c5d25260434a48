//! `names.namespaced`: fixed names of namespaced kinds (a leader-election
//! Lease) renamed per copy, so two copies may share a namespace: the URL's
//! name segment, `metadata.name` in bodies both ways, list items (another
//! copy's object of the same fixed name hidden, every other name as it
//! is) and `fieldSelector=metadata.name=`.

use crate::common::EngineJson;
use regroup::rewrite::protobuf::test_wire as wire;
use regroup::rewrite::{Catalog, ProtoRewriter};
use regroup::url_rename::rewrite_path;
use regroup_config::{Direction, Form, GroupMap};
use serde_json::Value as Json;
use wire::{cat, envelope, ld};

const CONFIG: &str = "
rules:
  - {from: samplecontroller.k8s.io, to: samplecontroller.team1.example.com}
names:
  prefix: team1-
  namespaced:
    kinds: [Lease]
    names: [foo-operator-lock]
";

fn map() -> (GroupMap, Catalog) {
    let s = regroup_config::load(CONFIG).unwrap();
    let catalog = Catalog::for_map(&s.fields, &s.map);
    (s.map, catalog)
}

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/ops/leases";

#[test]
fn the_url_names_the_copys_lease() {
    let (map, _) = map();
    assert_eq!(
        rewrite_path(
            &format!("{LEASES}/foo-operator-lock"),
            &map,
            Direction::ToCluster
        )
        .as_deref(),
        Some(format!("{LEASES}/team1-foo-operator-lock").as_str())
    );
    // Other Leases, and ConfigMaps of the fixed name (ConfigMap is not
    // listed), keep their names.
    assert_eq!(
        rewrite_path(&format!("{LEASES}/other-lock"), &map, Direction::ToCluster),
        None
    );
    assert_eq!(
        rewrite_path(
            "/api/v1/namespaces/ops/configmaps/foo-operator-lock",
            &map,
            Direction::ToCluster
        ),
        None
    );
    // The field selector a client-go informer of one Lease sends.
    let form = Catalog::name_form_of_resource(&map, "coordination.k8s.io", "leases");
    assert_eq!(form, Some(Form::FixedName));
    assert_eq!(
        map.map_field_selector(
            "metadata.name=foo-operator-lock",
            form,
            Direction::ToCluster
        )
        .as_deref(),
        Some("metadata.name=team1-foo-operator-lock")
    );
}

const LEASE: &str = r#"{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"foo-operator-lock","namespace":"ops"},"spec":{"holderIdentity":"pod-a","leaseDurationSeconds":15}}"#;

#[test]
fn a_lease_written_by_the_app_is_the_copys_and_reads_back_as_written() {
    let (map, catalog) = map();
    let sent = EngineJson::new(&map, &catalog, Direction::ToCluster)
        .rewrite_bytes(LEASE.as_bytes())
        .unwrap()
        .unwrap();
    let v: Json = serde_json::from_slice(&sent).unwrap();
    assert_eq!(v["metadata"]["name"], "team1-foo-operator-lock");
    let back = EngineJson::new(&map, &catalog, Direction::ToApp)
        .rewrite_bytes(&sent)
        .unwrap()
        .unwrap();
    assert_eq!(back, LEASE.as_bytes());
    // Another Lease of the app's: as it is, both ways.
    let other = LEASE.replace("foo-operator-lock", "other-lock");
    for dir in [Direction::ToCluster, Direction::ToApp] {
        let out = EngineJson::new(&map, &catalog, dir)
            .rewrite_bytes(other.as_bytes())
            .unwrap();
        assert!(out.is_none_or(|o| o == other.as_bytes()), "{dir:?}");
    }
}

#[test]
fn a_list_shows_the_copys_lease_under_its_name_and_hides_the_other_copys() {
    let (map, catalog) = map();
    let list = r#"{"apiVersion":"coordination.k8s.io/v1","kind":"LeaseList","metadata":{"resourceVersion":"9"},"items":[{"metadata":{"name":"team1-foo-operator-lock","namespace":"ops"},"spec":{"holderIdentity":"b"}},{"metadata":{"name":"foo-operator-lock","namespace":"ops"},"spec":{"holderIdentity":"a"}},{"metadata":{"name":"team2-foo-operator-lock","namespace":"ops"},"spec":{"holderIdentity":"c"}},{"metadata":{"name":"kube-scheduler","namespace":"ops"}}]}"#;
    let out = EngineJson::new(&map, &catalog, Direction::ToApp)
        .rewrite_bytes_addressed(list.as_bytes(), "coordination.k8s.io", "Lease")
        .unwrap()
        .unwrap();
    let v: Json = serde_json::from_slice(&out).unwrap();
    let names: Vec<(&str, &str)> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["metadata"]["name"].as_str().unwrap(),
                i["spec"]["holderIdentity"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("foo-operator-lock", "b"),
            ("team2-foo-operator-lock", "c"),
            ("kube-scheduler", "")
        ]
    );
}

#[test]
fn check_refuses_bad_namespaced_sections_with_their_line() {
    let bad = |names: &str| {
        let e = regroup_config::load(&format!(
            "rules:\n  - {{from: a.example.io, to: a.t1.example.com}}\nnames:\n{names}"
        ))
        .unwrap_err();
        e.problems.join("\n")
    };
    let p = bad("  prefix: t1-\n  namespaced: {kinds: [Pod], names: [x]}\n");
    assert!(
        p.contains("line 4") && p.contains("`Pod` is not supported"),
        "{p}"
    );
    let p = bad("  prefix: t1-\n  namespaced: {kinds: [Lease], names: [Bad_Name]}\n");
    assert!(p.contains("`Bad_Name` is not an object name"), "{p}");
    let p = bad("  prefix: t1-\n  namespaced: {kinds: [Lease], names: [x, t1-x]}\n");
    assert!(p.contains("with this copy's mark"), "{p}");
    let p = bad("  prefix: t1-\n  namespaced: {kinds: [Lease]}\n");
    assert!(p.contains("list the fixed names"), "{p}");
}

/// In protobuf (a Lease has no descriptor of regroup's: the generic
/// message, `metadata` at 1, ObjectMeta `name` at 1): the copy's Lease
/// renamed both ways, byte for byte, and another copy's hidden from a list.
#[test]
fn a_lease_in_protobuf_is_renamed_and_the_other_copys_hidden() {
    let (map, catalog) = map();
    let lease = |name: &str| {
        envelope(
            "coordination.k8s.io/v1",
            "Lease",
            &ld(1, cat(&[ld(1, name), ld(3, "ops")])),
        )
    };
    let app = lease("foo-operator-lock");
    let cluster = lease("team1-foo-operator-lock");
    let out = ProtoRewriter::new(&map, &catalog, Direction::ToCluster)
        .rewrite_bytes(&app)
        .unwrap()
        .expect("renamed for the cluster");
    assert_eq!(out, cluster);
    let back = ProtoRewriter::new(&map, &catalog, Direction::ToApp)
        .rewrite_bytes(&cluster)
        .unwrap()
        .expect("renamed for the app");
    assert_eq!(back, app);
    // A LeaseList: ListMeta 1, items 2 (each a Lease's fields).
    let item = |name: &str| ld(2, ld(1, cat(&[ld(1, name), ld(3, "ops")])));
    let list = |items: &[Vec<u8>]| {
        let mut parts = vec![ld(1, b"")];
        parts.extend(items.iter().cloned());
        envelope("coordination.k8s.io/v1", "LeaseList", &cat(&parts))
    };
    let got = ProtoRewriter::new(&map, &catalog, Direction::ToApp)
        .rewrite_bytes(&list(&[
            item("team1-foo-operator-lock"),
            item("foo-operator-lock"),
            item("kube-scheduler"),
        ]))
        .unwrap()
        .expect("renamed for the app");
    assert_eq!(
        got,
        list(&[item("foo-operator-lock"), item("kube-scheduler")])
    );
}
