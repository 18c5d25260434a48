//! Table name cells and hidden objects on shapes the captures don't have.

use regroup_config::{Direction, GroupMap, MapRule, Rule};
use serde_json::{json, Value as Json};

use crate::rewrite::list_stream::ListStream;
use crate::rewrite::{Catalog, JsonRewriter};

fn map() -> GroupMap {
    let rule = |rule| MapRule {
        rule,
        reference_keys: true,
    };
    GroupMap::new(vec![
        rule(Rule::Exact {
            from: "samplecontroller.k8s.io".into(),
            to: "samplecontroller.team1.example.com".into(),
        }),
        rule(Rule::Suffix {
            from: "pinniped.dev".into(),
            to: "pinniped.team1.example.com".into(),
        }),
    ])
    .unwrap()
}

const CRD: (&str, &str) = ("apiextensions.k8s.io", "CustomResourceDefinition");
const APP_CRD: &str = "foos.samplecontroller.k8s.io";
const CLUSTER_CRD: &str = "foos.samplecontroller.team1.example.com";

fn rewrite(dir: Direction, v: &Json, addressed: Option<(&str, &str)>) -> Json {
    let map = map();
    let catalog = Catalog::new(&[]);
    let rw = JsonRewriter::new(&map, &catalog, dir);
    let bytes = serde_json::to_vec(v).unwrap();
    let out = match addressed {
        Some((g, k)) => rw.rewrite_bytes_with(&bytes, None, Some((g, k))),
        None => rw.rewrite_bytes(&bytes),
    }
    .unwrap();
    // Streamed row by row (in odd chunks), the same bytes.
    let whole = out.clone().unwrap_or_else(|| bytes.clone());
    let mut s = ListStream::new(
        addressed.map(|(g, k)| (g.to_owned(), static_kind(k))),
        1 << 20,
    );
    let mut streamed = Vec::new();
    for c in bytes.chunks(3) {
        streamed.extend(s.feed(&rw, c).unwrap());
    }
    streamed.extend(s.finish(&rw).unwrap());
    assert_eq!(
        String::from_utf8_lossy(&streamed),
        String::from_utf8_lossy(&whole)
    );
    serde_json::from_slice(&whole).unwrap()
}

fn static_kind(k: &str) -> &'static str {
    match k {
        "CustomResourceDefinition" => "CustomResourceDefinition",
        "APIService" => "APIService",
        _ => panic!("{k}"),
    }
}

fn pom(name: &str) -> Json {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
           "metadata": {"name": name}})
}

fn table(columns: Json, rows: Vec<Json>) -> Json {
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {},
           "columnDefinitions": columns, "rows": rows})
}

fn name_first() -> Json {
    json!([{"name": "Name", "type": "string", "format": "name"},
           {"name": "Created At", "type": "date", "format": ""}])
}

fn cells(t: &Json) -> Vec<Json> {
    t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["cells"].clone())
        .collect()
}

#[test]
fn the_name_cell_is_found_by_its_column_definition() {
    let cols = json!([{"name": "Group", "type": "string", "format": ""},
                      {"name": "Name", "type": "string", "format": "name"}]);
    let t = table(
        cols,
        vec![json!({"cells": [CLUSTER_CRD, CLUSTER_CRD], "object": pom(CLUSTER_CRD)})],
    );
    let out = rewrite(Direction::ToApp, &t, Some(CRD));
    // Only the Name column's cell; the other merely looks like a name.
    assert_eq!(cells(&out), [json!([CLUSTER_CRD, APP_CRD])]);
    assert_eq!(out["rows"][0]["object"]["metadata"]["name"], APP_CRD);
}

#[test]
fn without_a_name_format_the_column_called_name_is_the_name() {
    let cols = json!([{"name": "Age", "type": "string", "format": ""},
                      {"name": "Name", "type": "string", "format": ""}]);
    let t = table(
        cols,
        vec![json!({"cells": ["1s", CLUSTER_CRD], "object": pom(CLUSTER_CRD)})],
    );
    let out = rewrite(Direction::ToApp, &t, Some(CRD));
    assert_eq!(cells(&out), [json!(["1s", APP_CRD])]);
}

#[test]
fn without_definitions_the_first_column_is_the_name() {
    // A Table watch's later events: `columnDefinitions: null`.
    let t = table(
        Json::Null,
        vec![json!({"cells": [CLUSTER_CRD, "1s"], "object": pom(CLUSTER_CRD)})],
    );
    let out = rewrite(Direction::ToApp, &t, Some(CRD));
    assert_eq!(cells(&out), [json!([APP_CRD, "1s"])]);
    // Definitions without a name column: no cell is the name.
    let cols = json!([{"name": "X", "type": "string", "format": ""}]);
    let t = table(
        cols,
        vec![json!({"cells": [CLUSTER_CRD], "object": pom(CLUSTER_CRD)})],
    );
    let out = rewrite(Direction::ToApp, &t, Some(CRD));
    assert_eq!(cells(&out), [json!([CLUSTER_CRD])]);
}

#[test]
fn a_cell_is_renamed_only_when_it_is_the_objects_name() {
    let t = table(
        name_first(),
        vec![
            json!({"cells": ["bars.samplecontroller.team1.example.com", "x"],
                    "object": pom(CLUSTER_CRD)}),
        ],
    );
    let out = rewrite(Direction::ToApp, &t, Some(CRD));
    assert_eq!(
        cells(&out),
        [json!(["bars.samplecontroller.team1.example.com", "x"])]
    );
}

#[test]
fn cells_of_kinds_whose_names_carry_no_group_stay() {
    // A Foo named like a CRD, in a Foo Table: a plain name.
    let foo = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                     "metadata": {"name": CLUSTER_CRD}});
    let t = table(
        name_first(),
        vec![json!({"cells": [CLUSTER_CRD, "x"], "object": foo})],
    );
    let out = rewrite(Direction::ToApp, &t, None);
    assert_eq!(cells(&out), [json!([CLUSTER_CRD, "x"])]);
    // Without an object nor an addressed kind, the kind is unknown.
    let t = table(
        name_first(),
        vec![json!({"cells": [CLUSTER_CRD, "x"], "object": null})],
    );
    assert_eq!(
        cells(&rewrite(Direction::ToApp, &t, None)),
        [json!([CLUSTER_CRD, "x"])]
    );
    assert_eq!(
        cells(&rewrite(Direction::ToApp, &t, Some(CRD))),
        [json!([APP_CRD, "x"])]
    );
}

#[test]
fn full_objects_in_rows_name_their_own_kind() {
    let crd = json!({"kind": "CustomResourceDefinition",
                     "apiVersion": "apiextensions.k8s.io/v1",
                     "metadata": {"name": APP_CRD},
                     "spec": {"group": "samplecontroller.k8s.io"}});
    let t = table(
        name_first(),
        vec![json!({"cells": [APP_CRD, "x"], "object": crd})],
    );
    let out = rewrite(Direction::ToCluster, &t, None);
    assert_eq!(cells(&out), [json!([CLUSTER_CRD, "x"])]);
    assert_eq!(
        out["rows"][0]["object"]["spec"]["group"],
        "samplecontroller.team1.example.com"
    );
    // Back.
    let back = rewrite(Direction::ToApp, &out, None);
    assert_eq!(back, t);
}

#[test]
fn rows_and_items_of_hidden_objects_are_dropped_for_the_app() {
    let shadowed = "foos.samplecontroller.k8s.io";
    let suffix_shadowed = "tokens.login.pinniped.dev";
    let t = table(
        name_first(),
        vec![
            json!({"cells": [shadowed, "a"], "object": pom(shadowed)}),
            json!({"cells": [CLUSTER_CRD, "b"], "object": pom(CLUSTER_CRD)}),
            json!({"cells": [suffix_shadowed, "c"], "object": pom(suffix_shadowed)}),
            json!({"cells": ["certificates.cert-manager.io", "d"],
                   "object": pom("certificates.cert-manager.io")}),
            json!({"cells": [shadowed, "e"], "object": null}),
        ],
    );
    let out = rewrite(Direction::ToApp, &t, Some(CRD));
    assert_eq!(
        cells(&out),
        [
            json!([APP_CRD, "b"]),
            json!(["certificates.cert-manager.io", "d"])
        ]
    );
    // Toward the cluster, nothing is hidden: every row stays, renamed.
    let out = rewrite(Direction::ToCluster, &t, Some(CRD));
    let names: Vec<Json> = cells(&out).iter().map(|c| c[0].clone()).collect();
    assert_eq!(
        names,
        [
            json!(CLUSTER_CRD),
            json!(CLUSTER_CRD),
            json!("tokens.login.pinniped.team1.example.com"),
            json!("certificates.cert-manager.io"),
            json!(CLUSTER_CRD)
        ]
    );

    // A `v1 List` of mixed kinds: only the hidden CRD and APIService go.
    let list = json!({"kind": "List", "apiVersion": "v1", "metadata": {}, "items": [
        {"kind": "CustomResourceDefinition", "apiVersion": "apiextensions.k8s.io/v1",
         "metadata": {"name": shadowed}},
        {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": shadowed}},
        {"kind": "APIService", "apiVersion": "apiregistration.k8s.io/v1",
         "metadata": {"name": "v1.samplecontroller.k8s.io"}},
        {"kind": "APIService", "apiVersion": "apiregistration.k8s.io/v1",
         "metadata": {"name": "v1.samplecontroller.team1.example.com"}},
    ]});
    let out = rewrite(Direction::ToApp, &list, None);
    let kept: Vec<(&str, &str)> = out["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["kind"].as_str().unwrap(),
                i["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kept,
        [
            ("ConfigMap", shadowed),
            ("APIService", "v1.samplecontroller.k8s.io")
        ]
    );
}

#[test]
fn dropped_items_take_their_commas_in_any_layout() {
    let map = map();
    let catalog = Catalog::new(&[]);
    let rw = JsonRewriter::new(&map, &catalog, Direction::ToApp);
    let item = |n: &str| format!("{{\"metadata\" : {{\"name\":\"{n}\"}}}}");
    let hidden = item("foos.samplecontroller.k8s.io");
    let ours = item(CLUSTER_CRD);
    let other = item("a.b.c");
    for (items, want) in [
        (vec![&hidden, &ours, &other], vec![APP_CRD, "a.b.c"]),
        (vec![&ours, &hidden, &other], vec![APP_CRD, "a.b.c"]),
        (vec![&ours, &other, &hidden], vec![APP_CRD, "a.b.c"]),
        (vec![&hidden, &hidden], vec![]),
        (vec![&hidden], vec![]),
        (
            vec![&other, &hidden, &hidden, &ours],
            vec!["a.b.c", APP_CRD],
        ),
    ] {
        for sep in [",", " ,\n  ", "\n,"] {
            let body = format!(
                "{{\"kind\":\"CustomResourceDefinitionList\",\"apiVersion\":\"apiextensions.k8s.io/v1\",\"metadata\":{{}},\"items\":[ {} ] }}",
                items.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(sep)
            );
            let whole = rw.rewrite_bytes(body.as_bytes()).unwrap().unwrap();
            for chunk in [1, 2, 5, body.len()] {
                let mut s = ListStream::new(None, 1 << 20);
                let mut out = Vec::new();
                for c in body.as_bytes().chunks(chunk) {
                    out.extend(s.feed(&rw, c).unwrap());
                }
                out.extend(s.finish(&rw).unwrap());
                let v: Json = serde_json::from_slice(&out)
                    .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out)));
                let names: Vec<&str> = v["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|i| i["metadata"]["name"].as_str().unwrap())
                    .collect();
                assert_eq!(names, want, "{body} in chunks of {chunk}");
                assert_eq!(serde_json::from_slice::<Json>(&whole).unwrap(), v);
            }
        }
    }
}

#[test]
fn hides_says_which_watch_events_to_drop() {
    let map = map();
    let catalog = Catalog::new(&[]);
    let rw = JsonRewriter::new(&map, &catalog, Direction::ToApp);
    let hides = |v: Json| rw.hides(&serde_json::to_vec(&v).unwrap()).unwrap();
    let crd = |n: &str| {
        json!({"kind": "CustomResourceDefinition", "apiVersion": "apiextensions.k8s.io/v1",
               "metadata": {"name": n}})
    };
    assert!(hides(json!({"type": "ADDED", "object": crd(APP_CRD)})));
    assert!(hides(crd(APP_CRD)));
    assert!(!hides(json!({"type": "ADDED", "object": crd(CLUSTER_CRD)})));
    assert!(!hides(json!({"type": "ERROR", "object": {"kind": "Status",
        "apiVersion": "v1", "message": APP_CRD}})));
    // A Table event: hidden when every row is.
    let row = |n: &str| json!({"cells": [n, "1s"], "object": crd(n)});
    assert!(hides(json!({"type": "MODIFIED",
        "object": table(Json::Null, vec![row(APP_CRD)])})));
    assert!(!hides(json!({"type": "MODIFIED",
        "object": table(Json::Null, vec![row(APP_CRD), row(CLUSTER_CRD)])})));
    assert!(!hides(
        json!({"type": "MODIFIED", "object": table(Json::Null, vec![])})
    ));
    // Metadata only: only with the addressed kind.
    let event = serde_json::to_vec(&json!({"type": "ADDED", "object": pom(APP_CRD)})).unwrap();
    assert!(!rw.hides(&event).unwrap());
    assert!(rw.hides_addressed(&event, CRD.0, CRD.1).unwrap());
    // Nothing mapped: not even parsed.
    assert!(!rw.hides(b"{not json").unwrap());
    assert!(rw
        .hides(b"{\"metadata\":{\"name\":\"foos.samplecontroller.k8s.io\"")
        .is_err());
}
