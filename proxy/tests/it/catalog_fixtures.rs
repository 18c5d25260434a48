//! The catalog, on real kube-apiserver bytes: every JSON object captured in
//! the `renamed` world, renamed for the app, equals the `orig` world's object
//! (and the reverse), once volatile fields and the world's own name are
//! masked. Equality of the whole document pins both halves of the contract:
//! every group-bearing field is renamed, and nothing else changes (label keys
//! such as `samplecontroller.k8s.io/owner` included).

use crate::common;
use crate::common::EngineJson;

use common::{
    case_names, documents, first_difference, fixture_map, normalize_docs, without_bookmarks, Case,
};
use regroup::rewrite::Catalog;
use regroup_config::Direction;
use serde_json::Value as Json;

fn rewrite_all(docs: &mut [Json], dir: Direction, addressed: Option<(&str, &str)>) -> bool {
    let map = fixture_map();
    let catalog = Catalog::new(&[]);
    let rw = EngineJson::new(&map, &catalog, dir);
    let mut changed = false;
    for d in docs {
        changed |= match addressed {
            Some((g, k)) => rw.rewrite_addressed(d, g, k),
            None => rw.rewrite(d),
        }
        .expect("rewrite");
    }
    changed
}

/// The kind a request path addresses, when its objects' names carry a
/// group: `/apis/{group}/{version}/{resource}[/{name}]`.
fn addressed(path: &str) -> Option<(&'static str, &'static str)> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["apis", group @ "apiextensions.k8s.io", _, resource, ..]
        | ["apis", group @ "apiregistration.k8s.io", _, resource, ..] => {
            let g: &'static str = if *group == "apiextensions.k8s.io" {
                "apiextensions.k8s.io"
            } else {
                "apiregistration.k8s.io"
            };
            Catalog::kind_for_resource(g, resource).map(|k| (g, k))
        }
        _ => None,
    }
}

struct Pair {
    name: String,
    case: String,
    addressed: Option<(&'static str, &'static str)>,
    orig: Vec<Json>,
    renamed: Vec<Json>,
}

/// Every paired JSON body: responses, and request bodies that are whole objects.
fn json_pairs() -> Vec<Pair> {
    let mut pairs = Vec::new();
    for name in case_names() {
        let (o, r) = (Case::load("orig", &name), Case::load("renamed", &name));
        if o.response_type().starts_with("application/json") && !o.gzipped() {
            if let (Some(a), Some(b)) = (documents(&o.response), documents(&r.response)) {
                pairs.push(Pair {
                    name: format!("{name} response"),
                    case: name.clone(),
                    addressed: addressed(o.exchange["path"].as_str().unwrap_or("")),
                    orig: without_bookmarks(a),
                    renamed: without_bookmarks(b),
                });
            }
        }
        if o.response_type() == "application/yaml" {
            let yaml =
                |b: &[u8]| -> Json { serde_saphyr::from_slice(b).expect("captured YAML parses") };
            pairs.push(Pair {
                name: format!("{name} response (yaml)"),
                case: name.clone(),
                addressed: None,
                orig: vec![yaml(&o.response)],
                renamed: vec![yaml(&r.response)],
            });
        }
        if o.request_type() == "application/json" {
            if let (Some(a), Some(b)) = (
                o.request.as_deref().and_then(documents),
                r.request.as_deref().and_then(documents),
            ) {
                if a[0].get("kind").is_some() {
                    pairs.push(Pair {
                        name: format!("{name} request"),
                        case: name.clone(),
                        addressed: None,
                        orig: a,
                        renamed: b,
                    });
                }
            }
        }
    }
    pairs
}

fn compare(dir: Direction) {
    let pairs = json_pairs();
    assert!(
        pairs.len() > 150,
        "expected most JSON cases, got {}",
        pairs.len()
    );
    let mut failures = Vec::new();
    let mut renamed_something = 0;
    for p in pairs {
        let (mut input, mut want, in_world, want_world) = match dir {
            Direction::ToApp => (p.renamed, p.orig, "renamed", "orig"),
            Direction::ToCluster => (p.orig, p.renamed, "orig", "renamed"),
        };
        if rewrite_all(&mut input, dir, p.addressed) {
            renamed_something += 1;
        }
        normalize_docs(&mut input, in_world, &p.case);
        normalize_docs(&mut want, want_world, &p.case);
        if input != want {
            failures.push(format!(
                "{}: {}",
                p.name,
                first_difference(&Json::from(input), &Json::from(want), String::new())
                    .unwrap_or_default()
            ));
        }
    }
    assert!(
        renamed_something > 100,
        "only {renamed_something} documents carried a group"
    );
    assert!(
        failures.is_empty(),
        "{} cases differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn renamed_world_responses_read_as_orig_world_for_the_app() {
    compare(Direction::ToApp);
}

#[test]
fn orig_world_bodies_read_as_renamed_world_for_the_cluster() {
    compare(Direction::ToCluster);
}

/// The comparison above is not vacuous: without the rewrite, the worlds differ.
#[test]
fn worlds_differ_without_the_rewrite() {
    let mut differing = 0;
    for p in json_pairs() {
        let (mut a, mut b) = (p.renamed, p.orig);
        normalize_docs(&mut a, "renamed", &p.case);
        normalize_docs(&mut b, "orig", &p.case);
        if a != b {
            differing += 1;
        }
    }
    assert!(differing > 100, "only {differing} pairs differ by group");
}

/// Byte fidelity on real bytes: renaming the renamed world's bodies for the
/// app and back for the cluster gives back exactly the captured bytes.
#[test]
fn renaming_there_and_back_gives_back_the_captured_bytes() {
    let map = fixture_map();
    let catalog = Catalog::new(&[]);
    let to_app = EngineJson::new(&map, &catalog, Direction::ToApp);
    let to_cluster = EngineJson::new(&map, &catalog, Direction::ToCluster);
    let mut round_trips = 0;
    for name in case_names() {
        let case = Case::load("renamed", &name);
        if !case.response_type().starts_with("application/json") || case.gzipped() {
            continue;
        }
        // Whole bodies, or each line of a watch stream.
        let docs: Vec<&[u8]> = if serde_json::from_slice::<Json>(&case.response).is_ok() {
            vec![&case.response[..]]
        } else {
            case.response
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .collect()
        };
        for doc in docs {
            if serde_json::from_slice::<Json>(doc).is_err() {
                continue;
            }
            let Some(app) = to_app.rewrite_bytes(doc).unwrap() else {
                continue;
            };
            assert_ne!(app, doc);
            let back = to_cluster
                .rewrite_bytes(&app)
                .unwrap()
                .expect("renamed back");
            assert_eq!(
                String::from_utf8_lossy(&back),
                String::from_utf8_lossy(doc),
                "{name}"
            );
            round_trips += 1;
        }
    }
    assert!(round_trips > 100, "only {round_trips} bodies round-tripped");
}
