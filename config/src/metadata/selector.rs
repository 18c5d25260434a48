//! Label selectors as strings renamed by the metadata rules: each
//! requirement's key and values, every other byte kept (the grammar is
//! `label_selector`'s).

use crate::label_selector::{parse, LabelSelectorError};
use crate::metadata::MetadataMap;
use crate::rule::Direction;

/// `selector` with every requirement's key and values renamed in `dir`.
/// `Ok(None)`: nothing renamed (an empty selector included). An error
/// says why the selector can't be parsed.
pub fn map_label_selector(
    selector: &str,
    map: &MetadataMap,
    dir: Direction,
) -> Result<Option<String>, LabelSelectorError> {
    if selector.trim().is_empty() {
        return Ok(None);
    }
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    for r in parse(selector)? {
        let key = &selector[r.key.0..r.key.1];
        if let Some(k) = map.map_key(key, dir) {
            edits.push((r.key.0, r.key.1, k));
        }
        if matches!(r.op, "<" | ">") {
            continue;
        }
        for (a, b) in r.values {
            if let Some(v) = map.map_value(key, &selector[a..b], dir) {
                edits.push((a, b, v));
            }
        }
    }
    if edits.is_empty() {
        return Ok(None);
    }
    let mut out = String::with_capacity(selector.len() + 32);
    let mut at = 0;
    for (a, b, v) in edits {
        out.push_str(&selector[at..a]);
        out.push_str(&v);
        at = b;
    }
    out.push_str(&selector[at..]);
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{Pair, ValueRule};
    use proptest::prelude::*;

    fn map() -> MetadataMap {
        MetadataMap::new(
            vec![Pair {
                app: "cert-manager.io".into(),
                cluster: "cert-manager.team-b.example.com".into(),
            }],
            vec![],
            vec![ValueRule {
                key: "app.kubernetes.io/managed-by".into(),
                value: Pair {
                    app: "foo-operator".into(),
                    cluster: "foo-operator-team-b".into(),
                },
            }],
            vec![],
        )
    }

    fn to_cluster(s: &str) -> Option<String> {
        map_label_selector(s, &map(), Direction::ToCluster).unwrap()
    }

    #[test]
    fn every_operator() {
        let cases = [
            ("cert-manager.io/x", "cert-manager.team-b.example.com/x"),
            ("!cert-manager.io/x", "!cert-manager.team-b.example.com/x"),
            ("cert-manager.io/x=a", "cert-manager.team-b.example.com/x=a"),
            ("cert-manager.io/x==a", "cert-manager.team-b.example.com/x==a"),
            ("cert-manager.io/x!=a", "cert-manager.team-b.example.com/x!=a"),
            ("cert-manager.io/x=", "cert-manager.team-b.example.com/x="),
            (
                "cert-manager.io/x in (a, b)",
                "cert-manager.team-b.example.com/x in (a, b)",
            ),
            (
                "cert-manager.io/x notin (a,b),app=y",
                "cert-manager.team-b.example.com/x notin (a,b),app=y",
            ),
            ("cert-manager.io/x>3", "cert-manager.team-b.example.com/x>3"),
            (
                "app.kubernetes.io/managed-by in (foo-operator,helm)",
                "app.kubernetes.io/managed-by in (foo-operator-team-b,helm)",
            ),
            (
                " app.kubernetes.io/managed-by = foo-operator , cert-manager.io/fao",
                " app.kubernetes.io/managed-by = foo-operator-team-b , cert-manager.team-b.example.com/fao",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(to_cluster(input).as_deref(), Some(want), "{input}");
        }
        assert_eq!(to_cluster("app=web,tier notin (db)"), None);
        assert_eq!(to_cluster(""), None);
    }

    #[test]
    fn bad_selectors_are_errors() {
        for bad in [
            "cert-manager.io/x in a",
            "cert-manager.io/x in (a",
            "=a",
            "a b",
            "!a=b",
            "a,",
            "a>",
            "(",
        ] {
            assert!(
                map_label_selector(bad, &map(), Direction::ToCluster).is_err(),
                "{bad}"
            );
        }
    }

    proptest! {
        /// Parsing never panics, and renaming back gives the input.
        #[test]
        fn round_trip_and_no_panic(s in "[a-z!=(),<> ./-]{0,40}") {
            let m = map();
            if let Ok(Some(there)) = map_label_selector(&s, &m, Direction::ToCluster) {
                let back = map_label_selector(&there, &m, Direction::ToApp).unwrap();
                prop_assert_eq!(back.unwrap_or(there), s);
            }
        }
    }
}
