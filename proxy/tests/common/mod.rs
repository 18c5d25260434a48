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
