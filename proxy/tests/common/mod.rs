//! Shared helpers for tests on the real captures in `testdata/kube-1.24`.
#![allow(dead_code)]

use std::path::PathBuf;

use regroup_config::{GroupMap, MapRule, Rule};
use serde_json::Value as Json;

/// `testdata/kube-1.24` in the repository.
pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/kube-1.24")
}

/// The rules that turn the `orig` world into the `renamed` world.
pub fn fixture_map() -> GroupMap {
    let exact = |from: &str, to: &str| MapRule {
        rule: Rule::Exact {
            from: from.into(),
            to: to.into(),
        },
        reference_keys: true,
    };
    GroupMap::new(vec![
        exact(
            "samplecontroller.k8s.io",
            "samplecontroller.team1.example.com",
        ),
        exact("wardle.example.com", "wardle.team1.example.com"),
    ])
    .expect("fixture rules are valid")
}

/// One captured exchange.
pub struct Case {
    pub name: String,
    pub exchange: Json,
    pub request: Option<Vec<u8>>,
    pub response: Vec<u8>,
}

impl Case {
    /// Loads `<world>/<name>`.
    pub fn load(world: &str, name: &str) -> Case {
        let dir = fixtures().join(world).join(name);
        let exchange = serde_json::from_slice(&std::fs::read(dir.join("exchange.json")).unwrap())
            .unwrap_or_else(|e| panic!("{world}/{name}/exchange.json: {e}"));
        Case {
            name: name.to_string(),
            exchange,
            request: std::fs::read(dir.join("request.body")).ok(),
            response: std::fs::read(dir.join("response.body")).unwrap_or_default(),
        }
    }

    /// A response or request header (first value if it was sent several times).
    pub fn header(&self, which: &str, name: &str) -> Option<String> {
        let h = self.exchange.get(which)?.get(name)?;
        match h {
            Json::String(s) => Some(s.clone()),
            Json::Array(a) => a.first().and_then(Json::as_str).map(str::to_owned),
            _ => None,
        }
    }

    pub fn response_type(&self) -> String {
        self.header("response_headers", "Content-Type")
            .unwrap_or_default()
    }

    pub fn request_type(&self) -> String {
        self.header("request_headers", "Content-Type")
            .unwrap_or_default()
    }

    pub fn gzipped(&self) -> bool {
        self.header("response_headers", "Content-Encoding")
            .is_some()
    }
}

/// Names of the paired cases (`orig/` and `renamed/` have the same list).
pub fn case_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures().join("orig"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.as_bytes()[0].is_ascii_digit())
        .collect();
    names.sort();
    names
}

/// Members that differ between runs and worlds (fixtures README, "Volatile
/// fields"), plus those the README lists as differing for timing reasons.
pub const VOLATILE: &[&str] = &[
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "generation",
    "time",
    "lastTransitionTime",
    "continue",
    "storageVersionHash", // computed by the server from the group
    "cells",              // Table Age columns
    "conditions",         // CRD approval condition exists only for *.k8s.io
    "nonResourceRules",   // came back in a different order
    "remainingItemCount",
];

/// Cases whose differences are outside the rename (fixtures README):
/// the members to mask in them on top of [`VOLATILE`].
pub fn extra_masks(name: &str) -> &'static [&'static str] {
    if name.contains("-crd") {
        // managedFields record the CRD approval condition, which only the
        // protected *.k8s.io group gets.
        &["fieldsV1"]
    } else if name.starts_with("251-") {
        // "too old resource version: 1 (<current RV>)".
        &["message"]
    } else {
        &[]
    }
}

/// Replaces the world's name (namespace, cluster-scoped names, label value)
/// with a placeholder and masks volatile members.
pub fn normalize(v: &mut Json, world: &str, extra: &[&str]) {
    match v {
        Json::Object(m) => {
            let members = std::mem::take(m);
            for (k, mut child) in members {
                if VOLATILE.contains(&k.as_str()) || extra.contains(&k.as_str()) {
                    child = Json::String("<masked>".into());
                } else {
                    normalize(&mut child, world, extra);
                }
                m.insert(mask_uid_key(&k), child);
            }
        }
        Json::Array(a) => a.iter_mut().for_each(|e| normalize(e, world, extra)),
        Json::String(s) => *s = mask_world(s, world),
        _ => {}
    }
}

/// managedFields keys such as `k:{"uid":"7a72..."}` embed volatile uids.
pub fn mask_uid_key(k: &str) -> String {
    match k.find("\"uid\":\"") {
        Some(i) => {
            let start = i + 7;
            let end = k[start..].find('"').map_or(k.len(), |e| start + e);
            format!("{}<uid>{}", &k[..start], &k[end..])
        }
        None => k.to_owned(),
    }
}

pub fn mask_world(s: &str, world: &str) -> String {
    // Only whole DNS-ish tokens: `renamed`, `foo-viewer-renamed`, `renamed-bulk`.
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(world) {
        let before = rest[..i].chars().last();
        let after = rest[i + world.len()..].chars().next();
        let boundary = |c: Option<char>| c.is_none_or(|c| !c.is_ascii_alphanumeric());
        out.push_str(&rest[..i]);
        out.push_str(if boundary(before) && boundary(after) {
            "<world>"
        } else {
            world
        });
        rest = &rest[i + world.len()..];
    }
    out.push_str(rest);
    out
}

/// The JSON documents of a body: one object, or newline-delimited watch events.
pub fn documents(body: &[u8]) -> Option<Vec<Json>> {
    if let Ok(v) = serde_json::from_slice::<Json>(body) {
        return v.is_object().then(|| vec![v]);
    }
    let docs: Result<Vec<Json>, _> = body
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(serde_json::from_slice)
        .collect();
    docs.ok().filter(|d| !d.is_empty())
}

/// Drops BOOKMARK events, whose number depends on timing.
pub fn without_bookmarks(docs: Vec<Json>) -> Vec<Json> {
    docs.into_iter()
        .filter(|d| d.get("type").and_then(Json::as_str) != Some("BOOKMARK"))
        .collect()
}

/// Where two documents first differ, and how.
pub fn first_difference(got: &Json, want: &Json, at: String) -> Option<String> {
    match (got, want) {
        (Json::Object(a), Json::Object(b)) => {
            for (k, va) in a {
                match b.get(k) {
                    Some(vb) => {
                        if let Some(d) = first_difference(va, vb, format!("{at}.{k}")) {
                            return Some(d);
                        }
                    }
                    None => return Some(format!("{at}.{k}: unexpected member")),
                }
            }
            b.keys()
                .find(|k| !a.contains_key(*k))
                .map(|k| format!("{at}.{k}: missing member"))
        }
        (Json::Array(a), Json::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (x, y))| first_difference(x, y, format!("{at}[{i}]"))),
        _ if got == want => None,
        _ => Some(format!("{at}: got {got}, want {want}")),
    }
}

/// Removes members with these names everywhere in `v`.
pub fn strip_members(v: &mut Json, names: &[&str]) {
    match v {
        Json::Object(m) => {
            for n in names {
                m.remove(*n);
            }
            m.values_mut().for_each(|c| strip_members(c, names));
        }
        Json::Array(a) => a.iter_mut().for_each(|c| strip_members(c, names)),
        _ => {}
    }
}

/// The sidecar (fixture rules, built-in catalog, the app's credentials
/// passed through) in front of `server`, on a loopback port, making the app
/// trust a front when `trust` is given. Returns its address.
pub async fn sidecar(
    server: String,
    trust: Option<regroup::serve::trust::FrontTrust>,
) -> std::net::SocketAddr {
    let map = Box::leak(Box::new(fixture_map()));
    let catalog: &'static regroup::rewrite::Catalog =
        Box::leak(Box::new(regroup::rewrite::Catalog::new(&[])));
    let up = regroup::upstream::Upstream::new(
        &regroup::upstream::Resolved {
            server,
            ..Default::default()
        },
        false,
    )
    .unwrap();
    let mut proxy = regroup::serve::Proxy::sidecar(map, catalog, up, true);
    if let Some(t) = trust {
        proxy = proxy.with_trust(t);
    }
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(regroup::serve::serve_plain(l, std::sync::Arc::new(proxy)));
    addr
}
