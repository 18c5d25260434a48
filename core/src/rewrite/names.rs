//! The one index of mapped names: every codec's "could these bytes name a
//! group?" pre-check, built once per configuration and shared by the codecs
//! of both directions. Bytes in which no index matches are forwarded
//! without being parsed.

use std::sync::Arc;

use regroup_config::{Direction, GroupMap};

use super::needles::Needles;

/// The searches for the names of both sides (shadowing looks for the other
/// side's names too).
struct Automata {
    /// The names, as they are (binary bodies: protobuf).
    names: Needles,
    /// The names and `\u` (a JSON escape could hide a name).
    json: Needles,
    /// The names forward and in reverse-DNS (OpenAPI definition names), for
    /// gnostic protobuf.
    dns: Needles,
    /// The same and `\u`, for OpenAPI JSON.
    dns_json: Needles,
    /// The kinds `names:` lists, when it is configured.
    named_kinds: Option<Needles>,
    /// The patterns of `names`, then those of `named_kinds`, for a codec's
    /// one search answering both (see [`NameIndex::names_and_kinds`]).
    name_patterns: Vec<String>,
    kind_patterns: Vec<String>,
}

/// The name index of one configuration; cloning it shares it.
#[derive(Clone)]
pub struct NameIndex(Arc<Automata>);

fn reverse(s: &str) -> String {
    s.split('.').rev().collect::<Vec<_>>().join(".")
}

/// `patterns` without those that contain another: "does any occur?"
/// answers the same (an occurrence of the longer one holds the shorter),
/// with fewer patterns to search (the default `names:` kinds: 8 to 5, as
/// `ClusterRole` is in `ClusterRoleBinding`).
fn outermost<'p>(patterns: &[&'p str]) -> Vec<&'p str> {
    let mut out: Vec<&str> = patterns
        .iter()
        .copied()
        .filter(|p| {
            !patterns
                .iter()
                .any(|q| q.len() < p.len() && !q.is_empty() && p.contains(q))
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

impl NameIndex {
    /// The index of `map`'s names.
    pub fn new(map: &GroupMap) -> NameIndex {
        let mut names: Vec<String> = [Direction::ToCluster, Direction::ToApp]
            .into_iter()
            .flat_map(|d| map.needles(d))
            .map(str::to_owned)
            .collect();
        names.sort();
        names.dedup();
        let mut dns: Vec<String> = names.iter().flat_map(|n| [n.clone(), reverse(n)]).collect();
        dns.sort();
        dns.dedup();
        let with_escape = |v: &[String]| {
            let mut v = v.to_vec();
            v.push("\\u".into());
            v
        };
        let kind_patterns: Option<Vec<String>> = map.object_names().map(|n| {
            outermost(&n.needles())
                .into_iter()
                .map(str::to_owned)
                .collect()
        });
        NameIndex(Arc::new(Automata {
            json: Needles::new(&with_escape(&names)),
            names: Needles::new(&names),
            dns_json: Needles::new(&with_escape(&dns)),
            dns: Needles::new(&dns),
            named_kinds: kind_patterns.as_deref().map(Needles::new),
            kind_patterns: kind_patterns.unwrap_or_default(),
            name_patterns: names,
        }))
    }

    /// The patterns of [`names`](Self::names) (the first `.1` of them),
    /// then those [`names_involved`](Self::names_involved) looks for (the
    /// next `.2`): a codec searching for more adds its own after them and
    /// answers every question in one pass over the body.
    pub fn names_and_kinds(&self) -> (Vec<&str>, usize, usize) {
        let a = &self.0;
        let patterns = a
            .name_patterns
            .iter()
            .chain(&a.kind_patterns)
            .map(String::as_str)
            .collect();
        (patterns, a.name_patterns.len(), a.kind_patterns.len())
    }

    /// True when `bytes` name a kind `names:` lists (an object's own kind,
    /// or a reference's): its names may have to be renamed or hidden.
    pub fn names_involved(&self, bytes: &[u8]) -> bool {
        self.0
            .named_kinds
            .as_ref()
            .is_some_and(|a| a.is_match(bytes))
    }

    /// Names of both sides, for binary bodies.
    pub fn names(&self) -> &Needles {
        &self.0.names
    }

    /// Names of both sides and `\u`, for JSON.
    pub fn json(&self) -> &Needles {
        &self.0.json
    }

    /// Names of both sides, forward and reverse-DNS (OpenAPI protobuf).
    pub fn dns(&self) -> &Needles {
        &self.0.dns
    }

    /// Names of both sides, forward and reverse-DNS, and `\u` (OpenAPI JSON).
    pub fn dns_json(&self) -> &Needles {
        &self.0.dns_json
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewrite::engine::tests::engine;

    #[test]
    fn patterns_holding_another_are_left_out_of_is_any_there() {
        let kinds = regroup_config::object_names::DEFAULT_KINDS;
        let kept = outermost(kinds);
        assert_eq!(
            kept,
            [
                "ClusterRole",
                "MutatingAdmissionPolicy",
                "MutatingWebhookConfiguration",
                "ValidatingAdmissionPolicy",
                "ValidatingWebhookConfiguration",
            ]
        );
        // Whatever any of them finds, the kept ones find.
        let all = Needles::new(kinds);
        let few = Needles::new(&kept);
        for hay in kinds
            .iter()
            .chain(&["Role", "kind: Cluster", "PolicyBinding"])
        {
            assert_eq!(all.is_match(hay), few.is_match(hay), "{hay}");
        }
        assert_eq!(outermost(&["ab", "ab", "b", "c"]), ["b", "c"]);
    }

    #[test]
    fn each_automaton_finds_what_its_codec_needs() {
        let e = engine("samplecontroller.team1.example.com");
        let ix = NameIndex::new(e.map());
        for a in [ix.names(), ix.json(), ix.dns(), ix.dns_json()] {
            assert!(a.is_match("x samplecontroller.k8s.io"));
            assert!(a.is_match("x samplecontroller.team1.example.com"));
            assert!(!a.is_match("apps/v1"));
        }
        assert!(ix.json().is_match(r"\u0073"));
        assert!(!ix.names().is_match(r"\u0073"));
        assert!(ix.dns().is_match("io.k8s.samplecontroller.v1alpha1.Foo"));
        assert!(ix
            .dns_json()
            .is_match("com.example.team1.samplecontroller.v1"));
        assert!(!ix.json().is_match("io.k8s.samplecontroller.v1alpha1.Foo"));
    }
}
