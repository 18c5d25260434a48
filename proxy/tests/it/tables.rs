//! `kubectl get crd` / `kubectl get apiservice` on real captures: the Table
//! cell that names a CRD (`plural.group`) or an APIService
//! (`version.group`) is renamed both ways, whole body and streamed, with
//! every `includeObject` form (`kube-1.24` and `kube-1.29` captures); and
//! the cluster's own CRD or APIService of a shadowed group (named like the
//! app's original group) is hidden from the app's lists, Tables and watch
//! events.

use crate::common;
use crate::common::EngineJson;

use common::{case_names_of, documents, first_difference, fixture_map, normalize_docs, Case};
use regroup::rewrite::list_stream::ListStream;
use regroup::rewrite::Catalog;
use regroup_config::Direction;
use serde_json::{json, Value as Json};

/// The kind a request path addresses: `/apis/{group}/{version}/{resource}`.
fn addressed(case: &Case) -> Option<(&'static str, &'static str)> {
    let path = case.exchange["path"].as_str().unwrap_or("");
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let group: &'static str = match parts.get(1).copied() {
        Some("apiextensions.k8s.io") => "apiextensions.k8s.io",
        Some("apiregistration.k8s.io") => "apiregistration.k8s.io",
        _ => return None,
    };
    Catalog::kind_for_resource(group, parts.get(3)?).map(|k| (group, k))
}

/// The Table cases of CRDs and APIServices, of both capture sets.
fn table_cases() -> Vec<(&'static str, String)> {
    let mut cases = Vec::new();
    for name in case_names_of("kube-1.24") {
        if (name.contains("-crd-") || name.contains("-apiservice-")) && name.ends_with("-table") {
            cases.push(("kube-1.24", name));
        }
    }
    for name in case_names_of("kube-1.29") {
        let c = Case::load_of("kube-1.29", "orig", &name);
        if c.exchange["status"] == 200 && c.response_type() == "application/json" {
            cases.push(("kube-1.29", name));
        }
    }
    cases
}

fn rewrite(rw: &EngineJson, body: &[u8], addressed: Option<(&str, &str)>) -> Vec<u8> {
    let out = match addressed {
        Some((g, k)) => rw.rewrite_bytes_addressed(body, g, k),
        None => rw.rewrite_bytes(body),
    };
    out.expect("renames").unwrap_or_else(|| body.to_vec())
}

fn stream(
    rw: &EngineJson,
    body: &[u8],
    addressed: Option<(&str, &'static str)>,
    chunk: usize,
) -> Vec<u8> {
    let mut s = ListStream::new(addressed.map(|(g, k)| (g.to_owned(), k)), usize::MAX);
    let mut out = Vec::new();
    for c in body.chunks(chunk) {
        out.extend(rw.list_feed(&mut s, c).expect("streams"));
    }
    out.extend(rw.list_finish(s).expect("ends"));
    out
}

/// Every name cell of a Table body.
fn name_cells(body: &[u8]) -> Vec<String> {
    let t: Json = serde_json::from_slice(body).unwrap();
    t["rows"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| r["cells"][0].as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn compare(dir: Direction) {
    let map = fixture_map();
    let catalog = Catalog::new(&[]);
    let rw = EngineJson::new(&map, &catalog, dir);
    let (from, to) = match dir {
        Direction::ToApp => ("renamed", "orig"),
        Direction::ToCluster => ("orig", "renamed"),
    };
    let mut failures = Vec::new();
    let mut compared = 0;
    for (version, name) in table_cases() {
        let input = Case::load_of(version, from, &name);
        let want = Case::load_of(version, to, &name);
        let addressed = addressed(&input);
        let whole = rewrite(&rw, &input.response, addressed);
        // The name cells say the other world's names, exactly.
        if name_cells(&whole) != name_cells(&want.response) {
            failures.push(format!(
                "{version}/{name}: name cells {:?} want {:?}",
                name_cells(&whole),
                name_cells(&want.response)
            ));
        }
        // The whole document is the other world's, volatile values masked
        // by path only.
        let mut got = documents(&whole).unwrap();
        let mut wanted = documents(&want.response).unwrap();
        normalize_docs(&mut got, from, &name);
        normalize_docs(&mut wanted, to, &name);
        if got != wanted {
            failures.push(format!(
                "{version}/{name}: {}",
                first_difference(&Json::from(got), &Json::from(wanted), String::new())
                    .unwrap_or_default()
            ));
        }
        // Streamed row by row, in any chunking: the same bytes.
        for chunk in [1, 5, 64, 4096, input.response.len()] {
            if stream(&rw, &input.response, addressed, chunk) != whole {
                failures.push(format!("{version}/{name}: streamed in {chunk} differs"));
            }
        }
        compared += 1;
    }
    assert!(compared >= 22, "only {compared} Table cases");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn crd_and_apiservice_name_cells_read_as_the_orig_world_for_the_app() {
    compare(Direction::ToApp);
}

#[test]
fn crd_and_apiservice_name_cells_read_as_the_renamed_world_for_the_cluster() {
    compare(Direction::ToCluster);
}

/// The bodies of a case in both worlds, parsed.
fn both(version: &str, name: &str) -> (Json, Json) {
    let parse =
        |w| -> Json { serde_json::from_slice(&Case::load_of(version, w, name).response).unwrap() };
    (parse("renamed"), parse("orig"))
}

/// A cluster that has both: the renamed world's objects (the app's, under
/// the cluster's names) and the orig world's (an upstream CRD or APIService
/// of the group whose name now means the renamed one), in `member`.
fn cluster_with_both(version: &str, name: &str, member: &str) -> Vec<u8> {
    let (mut renamed, orig) = both(version, name);
    let theirs = orig[member].as_array().unwrap().clone();
    let ours = renamed[member].as_array_mut().unwrap();
    // The shadowed one first, last and alone in between.
    let mut all = theirs.clone();
    all.append(ours);
    all.extend(theirs);
    renamed[member] = Json::from(all);
    serde_json::to_vec(&renamed).unwrap()
}

fn names_of_items(body: &[u8]) -> Vec<String> {
    let v: Json = serde_json::from_slice(body).unwrap();
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn shadowed_crds_and_apiservices_are_dropped_from_lists_and_tables() {
    let map = fixture_map();
    let catalog = Catalog::new(&[]);
    let rw = EngineJson::new(&map, &catalog, Direction::ToApp);
    let crd = Some(("apiextensions.k8s.io", "CustomResourceDefinition"));
    let apiservice = Some(("apiregistration.k8s.io", "APIService"));
    type Shadowing<'a> = (
        &'a str,
        &'a str,
        &'a str,
        Option<(&'a str, &'static str)>,
        &'a [&'a str],
    );
    let cases: &[Shadowing] = &[
        (
            "kube-1.24",
            "116-list-crd-json",
            "items",
            None,
            &["foos.samplecontroller.k8s.io"],
        ),
        (
            "kube-1.24",
            "119-list-crd-poml",
            "items",
            crd,
            &["foos.samplecontroller.k8s.io"],
        ),
        (
            "kube-1.24",
            "171-list-apiservice-json",
            "items",
            None,
            &["v1alpha1.wardle.example.com"],
        ),
        (
            "kube-1.24",
            "118-list-crd-table",
            "rows",
            crd,
            &["foos.samplecontroller.k8s.io"],
        ),
        (
            "kube-1.24",
            "173-list-apiservice-table",
            "rows",
            apiservice,
            &["v1alpha1.wardle.example.com"],
        ),
        (
            "kube-1.29",
            "037-list-crd-table",
            "rows",
            crd,
            &["foos.samplecontroller.k8s.io"],
        ),
        (
            "kube-1.29",
            "038-list-crd-kubectl-1.36-sort-by",
            "rows",
            crd,
            &["foos.samplecontroller.k8s.io"],
        ),
        (
            "kube-1.29",
            "035-get-crd-table-include-none",
            "rows",
            crd,
            &["foos.samplecontroller.k8s.io"],
        ),
        (
            "kube-1.29",
            "044-list-apiservice-local-table",
            "rows",
            apiservice,
            &["v1alpha1.samplecontroller.k8s.io"],
        ),
        (
            "kube-1.29",
            "042-get-apiservice-local-table-include-none",
            "rows",
            apiservice,
            &["v1alpha1.samplecontroller.k8s.io"],
        ),
    ];
    for (version, name, member, addressed, want) in cases {
        let body = cluster_with_both(version, name, member);
        let whole = rewrite(&rw, &body, *addressed);
        let names = if *member == "rows" {
            name_cells(&whole)
        } else {
            names_of_items(&whole)
        };
        assert_eq!(names, *want, "{version}/{name}");
        // Only the renamed ones are left, renamed: exactly the orig world's
        // body (path masks only).
        let mut got = documents(&whole).unwrap();
        let mut wanted = documents(&Case::load_of(version, "orig", name).response).unwrap();
        normalize_docs(&mut got, "renamed", name);
        normalize_docs(&mut wanted, "orig", name);
        assert!(
            got == wanted,
            "{version}/{name}: {}",
            first_difference(&Json::from(got), &Json::from(wanted), String::new())
                .unwrap_or_default()
        );
        for chunk in [1, 7, 512, body.len()] {
            assert_eq!(
                String::from_utf8_lossy(&stream(&rw, &body, *addressed, chunk)),
                String::from_utf8_lossy(&whole),
                "{version}/{name} streamed in {chunk}"
            );
        }
    }
}

#[test]
fn a_list_of_only_hidden_objects_is_empty_for_the_app() {
    let map = fixture_map();
    let catalog = Catalog::new(&[]);
    let rw = EngineJson::new(&map, &catalog, Direction::ToApp);
    let (_, orig) = both("kube-1.24", "116-list-crd-json");
    let body = serde_json::to_vec(&orig).unwrap();
    let whole = rewrite(&rw, &body, None);
    assert!(names_of_items(&whole).is_empty());
    let v: Json = serde_json::from_slice(&whole).unwrap();
    assert_eq!(v["items"], json!([]));
    assert_eq!(stream(&rw, &body, None, 3), whole);
}

#[test]
fn watch_events_of_hidden_objects_are_said_to_be_hidden() {
    let map = fixture_map();
    let catalog = Catalog::new(&[]);
    let to_app = EngineJson::new(&map, &catalog, Direction::ToApp);
    let to_cluster = EngineJson::new(&map, &catalog, Direction::ToCluster);
    let crd = ("apiextensions.k8s.io", "CustomResourceDefinition");
    for (name, list) in [
        ("116-list-crd-json", false),
        ("171-list-apiservice-json", false),
        ("119-list-crd-poml", false),
        ("118-list-crd-table", true),
        ("173-list-apiservice-table", true),
    ] {
        let (renamed, orig) = both("kube-1.24", name);
        let addressed = if name.contains("crd") {
            crd
        } else {
            ("apiregistration.k8s.io", "APIService")
        };
        let object = |v: &Json| -> Json {
            if list {
                // A Table watch event: the Table with one row.
                let mut t = v.clone();
                t["rows"] = Json::from(vec![v["rows"][0].clone()]);
                t
            } else {
                let mut o = v["items"][0].clone();
                let item_kind = v["kind"].as_str().unwrap().trim_end_matches("List");
                o["kind"] = Json::from(item_kind);
                o["apiVersion"] = v["apiVersion"].clone();
                o
            }
        };
        for (o, hidden) in [(object(&orig), true), (object(&renamed), false)] {
            let event =
                serde_json::to_vec(&json!({"type": "MODIFIED", "object": o.clone()})).unwrap();
            let obj = serde_json::to_vec(&o).unwrap();
            for doc in [&event, &obj] {
                assert_eq!(
                    to_app
                        .codec()
                        .hides_addressed(doc, addressed.0, addressed.1)
                        .unwrap(),
                    hidden,
                    "{name}: {}",
                    String::from_utf8_lossy(doc)
                );
                // Toward the cluster, nothing is ever hidden.
                assert!(!to_cluster
                    .codec()
                    .hides_addressed(doc, addressed.0, addressed.1)
                    .unwrap());
            }
            if o["kind"] != "PartialObjectMetadata" && !list {
                assert_eq!(to_app.codec().hides(&event).unwrap(), hidden, "{name}");
            }
        }
    }
    // Anything else is never hidden, even naming a shadowed group.
    let foo = br#"{"type":"ADDED","object":{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo","metadata":{"name":"foos.samplecontroller.k8s.io"}}}"#;
    assert!(!to_app.codec().hides(foo).unwrap());
    assert!(
        to_app.codec().hides(b"{not json").is_err() || !to_app.codec().hides(b"{not json").unwrap()
    );
}

/// Through a real regroup listener (the sidecar's list streaming and
/// whole-body paths): `kubectl get crd` and `kubectl get crd -o name` on a
/// cluster that has both the renamed CRD and the shadowed one show the app
/// one CRD, under its own name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_sidecar_a_hidden_crd_is_listed_nowhere() {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use hyper::service::service_fn;
    use hyper_util::rt::{TokioExecutor, TokioIo};

    let table = cluster_with_both("kube-1.24", "118-list-crd-table", "rows");
    let list = cluster_with_both("kube-1.24", "116-list-crd-json", "items");
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (s, _) = l.accept().await.unwrap();
            let (table, list) = (table.clone(), list.clone());
            tokio::spawn(async move {
                let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let accept = req
                        .headers()
                        .get("accept")
                        .map(|v| v.to_str().unwrap().to_owned())
                        .unwrap_or_default();
                    let body = if accept.contains("as=Table") {
                        table.clone()
                    } else {
                        list.clone()
                    };
                    async move {
                        Ok::<_, std::convert::Infallible>(
                            http::Response::builder()
                                .header("content-type", "application/json")
                                .body(Full::new(Bytes::from(body)))
                                .unwrap(),
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    let regroup = common::sidecar(format!("http://{addr}"), None).await;
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    for accept in [
        "application/json;as=Table;v=v1;g=meta.k8s.io",
        "application/json",
    ] {
        let req = http::Request::get(format!(
            "http://{regroup}/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        ))
        .header("accept", accept)
        .body(Full::new(Bytes::new()))
        .unwrap();
        let resp = client.request(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        let names = if accept.contains("Table") {
            name_cells(&body)
        } else {
            names_of_items(&body)
        };
        assert_eq!(names, ["foos.samplecontroller.k8s.io"], "{accept}");
    }
}
