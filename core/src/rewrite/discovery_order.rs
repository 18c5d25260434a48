//! The copy's own groups first in the app's view of `/apis`.
//!
//! kubectl (and every client built on client-go's RESTMapper) resolves a
//! resource it was given without a group — a plural, a singular, a kind, a
//! short name — to the first group in discovery order that serves it. Two
//! copies of one operator serve the same resources under different groups;
//! through copy B's regroup, copy B's groups read as the app's original
//! names, but they keep copy B's place in the cluster's order, so a copy
//! whose groups sort later would resolve `kubectl get foos` to another
//! copy's Foos. In the app's view the groups its rules map (its own) are
//! therefore moved ahead of every group that is neither its own nor one
//! kube-apiserver serves itself; kube-apiserver's own groups keep their
//! places (an operator's `certificates` must not take over a built-in's
//! name), and the order among the moved groups and among the rest is kept.
//!
//! Applied to the renamed answer of `GET /apis`: `APIGroupList` (legacy
//! discovery) and `APIGroupDiscoveryList` (aggregated discovery, v2beta1
//! and v2), in JSON and protobuf. Entries are moved as they are, byte for
//! byte.

use regroup_config::{Direction, GroupMap};

use super::error::{malformed, RewriteError};
use super::protobuf::wire::{Fields, LEN};
use super::raw::{member, string, Walk};

/// The `k8s\0` prefix of Kubernetes' protobuf envelope.
const MAGIC: &[u8] = b"k8s\0";

/// Where each entry stands: kube-apiserver's own, this copy's, or another.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Rank {
    Builtin,
    Own,
    Other,
}

fn rank(map: &GroupMap, group: &str) -> Rank {
    if regroup_config::builtin::is_builtin(group) || group.is_empty() {
        Rank::Builtin
    } else if map.map_group(group, Direction::ToCluster).is_some() {
        // A group the app names that the rules send elsewhere: the
        // app's own, shown in its own name.
        Rank::Own
    } else {
        Rank::Other
    }
}

/// The new order of entries ranked `ranks`, or `None` when it is the same:
/// every own entry placed just before the first other entry that came
/// before it.
fn order(ranks: &[Rank]) -> Option<Vec<usize>> {
    let first_other = ranks.iter().position(|r| *r == Rank::Other)?;
    if !ranks[first_other..].contains(&Rank::Own) {
        return None;
    }
    let mut out: Vec<usize> = (0..first_other).collect();
    out.extend((first_other..ranks.len()).filter(|&i| ranks[i] == Rank::Own));
    out.extend((first_other..ranks.len()).filter(|&i| ranks[i] != Rank::Own));
    Some(out)
}

/// `body`, the app's view of a JSON `APIGroupList` or
/// `APIGroupDiscoveryList` (already renamed toward the app), with the
/// copy's own groups first. `Ok(None)`: the order stays (or the body is
/// another kind).
pub fn json(map: &GroupMap, body: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
    let text = std::str::from_utf8(body).map_err(malformed)?;
    let (mut w, root) = Walk::parse(text)?;
    let Some(ms) = w.members(root)? else {
        return Ok(None);
    };
    let kind = match member(&ms, "kind") {
        Some(k) => string(k)?.unwrap_or_default(),
        None => return Ok(None),
    };
    let (array, name_path): (&str, &[&str]) = match kind.as_ref() {
        "APIGroupList" => ("groups", &["name"]),
        "APIGroupDiscoveryList" => ("items", &["metadata", "name"]),
        _ => return Ok(None),
    };
    let Some(entries) = member(&ms, array) else {
        return Ok(None);
    };
    let Some(elements) = w.elements(entries)? else {
        return Ok(None);
    };
    let mut ranks = Vec::with_capacity(elements.len());
    let mut spans = Vec::with_capacity(elements.len());
    for e in elements.iter() {
        let mut v = e;
        for key in name_path {
            v = match w.members(v)? {
                Some(m) => member(&m, key).ok_or_else(|| {
                    malformed(format!("a discovery entry without {}", name_path.join(".")))
                })?,
                None => return Err(malformed("a discovery entry that is not an object")),
            };
        }
        let group = string(v)?.unwrap_or_default();
        ranks.push(rank(map, &group));
        let s = w.offset(e);
        spans.push((s, s + e.get().len()));
    }
    let Some(new) = order(&ranks) else {
        return Ok(None);
    };
    let (start, end) = (spans[0].0, spans[spans.len() - 1].1);
    let mut out = Vec::with_capacity(body.len());
    out.extend_from_slice(&body[..start]);
    for (n, &i) in new.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&body[spans[i].0..spans[i].1]);
    }
    out.extend_from_slice(&body[end..]);
    Ok(Some(out))
}

/// In the app's view of aggregated discovery (`body`, a JSON
/// `APIGroupDiscoveryList` already renamed toward the app): the resources
/// of groups that are neither the copy's nor kube-apiserver's own and that
/// serve a resource of the same plural as one of the copy's (another copy
/// of the same operator) lose their `shortNames` and `categories`, so a
/// short name or a category (`kubectl get fo`, `kubectl get all`) names
/// the copy's resources alone; they stay reachable by their full names.
/// `Ok(None)`: nothing to strip.
pub fn strip_other_copies_short_forms(
    map: &GroupMap,
    body: &[u8],
) -> Result<Option<Vec<u8>>, RewriteError> {
    let mut doc: serde_json::Value = serde_json::from_slice(body).map_err(malformed)?;
    if doc.get("kind").and_then(|k| k.as_str()) != Some("APIGroupDiscoveryList") {
        return Ok(None);
    }
    let group_of = |item: &serde_json::Value| -> String {
        item.pointer("/metadata/name")
            .and_then(|n| n.as_str())
            .unwrap_or("")
            .to_owned()
    };
    let resources = |item: &serde_json::Value| -> Vec<String> {
        item.get("versions")
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
            .flat_map(|v| {
                v.get("resources")
                    .and_then(|r| r.as_array())
                    .into_iter()
                    .flatten()
            })
            .filter_map(|r| {
                r.get("resource")
                    .and_then(|p| p.as_str())
                    .map(str::to_owned)
            })
            .collect()
    };
    let Some(items) = doc.get_mut("items").and_then(|i| i.as_array_mut()) else {
        return Ok(None);
    };
    let own: Vec<String> = items
        .iter()
        .filter(|i| rank(map, &group_of(i)) == Rank::Own)
        .flat_map(resources)
        .collect();
    if own.is_empty() {
        return Ok(None);
    }
    let mut changed = false;
    for item in items.iter_mut() {
        if rank(map, &group_of(item)) != Rank::Other {
            continue;
        }
        for v in item
            .get_mut("versions")
            .and_then(|v| v.as_array_mut())
            .into_iter()
            .flatten()
        {
            for r in v
                .get_mut("resources")
                .and_then(|r| r.as_array_mut())
                .into_iter()
                .flatten()
            {
                let plural = r.get("resource").and_then(|p| p.as_str()).unwrap_or("");
                if !own.iter().any(|o| o == plural) {
                    continue;
                }
                if let Some(o) = r.as_object_mut() {
                    changed |= o.remove("shortNames").is_some();
                    changed |= o.remove("categories").is_some();
                }
            }
        }
    }
    if !changed {
        return Ok(None);
    }
    serde_json::to_vec(&doc).map(Some).map_err(malformed)
}

/// [`json`] for the protobuf form: the envelope's `raw` holds
/// `APIGroupList {1 groups: APIGroup {1 name}}` or
/// `APIGroupDiscoveryList {1 metadata, 2 items: APIGroupDiscovery
/// {1 metadata: ObjectMeta {1 name}}}`; the entries, top-level fields of
/// `raw`, change places and no length changes.
pub fn protobuf(map: &GroupMap, body: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
    let Some(unknown) = body.strip_prefix(MAGIC) else {
        return Ok(None);
    };
    let field = |buf: &[u8], start, end, n| -> Result<Option<(usize, usize)>, RewriteError> {
        let mut found = None;
        for f in Fields::new(buf, start, end) {
            let f = f?;
            if f.number == n && f.wire == LEN {
                found = Some((f.value_start, f.end));
            }
        }
        Ok(found)
    };
    let Some((ts, te)) = field(unknown, 0, unknown.len(), 1)? else {
        return Ok(None);
    };
    let kind = match field(unknown, ts, te, 2)? {
        Some((s, e)) => &unknown[s..e],
        None => return Ok(None),
    };
    let (entries_field, name_path): (u32, &[u32]) = match kind {
        b"APIGroupList" => (1, &[1]),
        b"APIGroupDiscoveryList" => (2, &[1, 1]),
        _ => return Ok(None),
    };
    let Some((rs, re)) = field(unknown, 0, unknown.len(), 2)? else {
        return Ok(None);
    };
    // Every top-level field of `raw`, the entries among them ranked.
    let mut fields: Vec<(usize, usize, Option<Rank>)> = Vec::new();
    for f in Fields::new(unknown, rs, re) {
        let f = f?;
        let rank = if f.number == entries_field && f.wire == LEN {
            let (mut s, mut e) = (f.value_start, f.end);
            for &n in name_path {
                (s, e) = field(unknown, s, e, n)?.unwrap_or((s, s));
            }
            let group = std::str::from_utf8(&unknown[s..e]).map_err(malformed)?;
            Some(rank(map, group))
        } else {
            None
        };
        fields.push((f.start, f.end, rank));
    }
    let ranks: Vec<Rank> = fields.iter().filter_map(|f| f.2).collect();
    let Some(new) = order(&ranks) else {
        return Ok(None);
    };
    // The entries' slots, filled in the new order; other fields stay.
    let entries: Vec<(usize, usize)> = fields
        .iter()
        .filter(|f| f.2.is_some())
        .map(|f| (f.0, f.1))
        .collect();
    let mut next = new.iter().map(|&i| entries[i]);
    let off = MAGIC.len();
    let mut out = Vec::with_capacity(body.len());
    out.extend_from_slice(&body[..off + rs]);
    for (s, e, r) in &fields {
        let (s, e) = match r {
            Some(_) => next.next().expect("one entry per slot"),
            None => (*s, *e),
        };
        out.extend_from_slice(&unknown[s..e]);
    }
    out.extend_from_slice(&body[off + re..]);
    debug_assert_eq!(out.len(), body.len());
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map() -> GroupMap {
        regroup_config::load(
            "rules:\n  - from: samplecontroller.k8s.io\n    to: samplecontroller.team2.example.com\n",
        )
        .unwrap()
        .map
    }

    #[test]
    fn own_groups_go_before_other_copies_and_after_the_builtins() {
        use Rank::*;
        assert_eq!(
            order(&[Builtin, Other, Own, Builtin]),
            Some(vec![0, 2, 1, 3])
        );
        assert_eq!(order(&[Builtin, Own, Other]), None);
        assert_eq!(order(&[Other, Other, Own, Own]), Some(vec![2, 3, 0, 1]));
        assert_eq!(order(&[Builtin, Other]), None);
    }

    #[test]
    fn a_json_group_list_puts_the_copys_groups_first() {
        // The app's view through copy 2: copy 1's group, then copy 2's own
        // (renamed back to the app's name).
        let body = br#"{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"apps","versions":[]},{"name":"samplecontroller.team1.example.com","versions":[]},{"name":"samplecontroller.k8s.io","versions":[]},{"name":"other.example.org","versions":[]}]}"#;
        let got = json(&map(), body).unwrap().unwrap();
        assert_eq!(
            String::from_utf8(got).unwrap(),
            r#"{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"apps","versions":[]},{"name":"samplecontroller.k8s.io","versions":[]},{"name":"samplecontroller.team1.example.com","versions":[]},{"name":"other.example.org","versions":[]}]}"#
        );
        let disc = br#"{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},"items":[{"metadata":{"name":"samplecontroller.team1.example.com"}},{"metadata":{"name":"samplecontroller.k8s.io"}}]}"#;
        let got = json(&map(), disc).unwrap().unwrap();
        assert_eq!(
            String::from_utf8(got).unwrap(),
            r#"{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},"items":[{"metadata":{"name":"samplecontroller.k8s.io"}},{"metadata":{"name":"samplecontroller.team1.example.com"}}]}"#
        );
        // Already first: untouched.
        let first = br#"{"kind":"APIGroupList","groups":[{"name":"samplecontroller.k8s.io"},{"name":"x.example.org"}]}"#;
        assert_eq!(json(&map(), first).unwrap(), None);
        assert!(json(&map(), br#"{"kind":"APIGroupList","groups":[{"versions":[]}, {"name":"samplecontroller.k8s.io"}]}"#).is_err());
    }

    #[test]
    fn another_copys_short_names_and_categories_are_left_out() {
        let foo = |short: &str| {
            serde_json::json!({"resource": "foos", "responseKind": {"kind": "Foo"}, "scope": "Namespaced",
                "shortNames": [short], "categories": ["all", "samplecontroller"]})
        };
        let item = |g: &str, r: serde_json::Value| serde_json::json!({"metadata": {"name": g}, "versions": [{"version": "v1alpha1", "resources": [r]}]});
        let doc = serde_json::json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "items": [
            item("samplecontroller.k8s.io", foo("fo")),
            item("samplecontroller.team1.example.com", foo("fo")),
            item("other.example.org", serde_json::json!({"resource": "bars", "shortNames": ["ba"], "categories": ["all"]})),
        ]});
        let got = strip_other_copies_short_forms(&map(), &serde_json::to_vec(&doc).unwrap())
            .unwrap()
            .unwrap();
        let got: serde_json::Value = serde_json::from_slice(&got).unwrap();
        let r = |i: usize| &got["items"][i]["versions"][0]["resources"][0];
        assert_eq!(r(0)["shortNames"], serde_json::json!(["fo"]));
        assert!(r(1).get("shortNames").is_none() && r(1).get("categories").is_none());
        assert_eq!(r(1)["resource"], "foos");
        assert_eq!(r(2)["shortNames"], serde_json::json!(["ba"]));
    }

    #[test]
    fn a_protobuf_group_list_puts_the_copys_groups_first() {
        use crate::rewrite::protobuf::test_wire::{cat, envelope, ld};
        let group = |n: &str| ld(1, cat(&[ld(1, n), ld(2, "x")]));
        let raw = cat(&[
            group("apps"),
            group("samplecontroller.team1.example.com"),
            group("samplecontroller.k8s.io"),
        ]);
        let body = envelope("v1", "APIGroupList", &raw);
        let got = protobuf(&map(), &body).unwrap().unwrap();
        let want = envelope(
            "v1",
            "APIGroupList",
            &cat(&[
                group("apps"),
                group("samplecontroller.k8s.io"),
                group("samplecontroller.team1.example.com"),
            ]),
        );
        assert_eq!(got, want);
        // Aggregated discovery: {1 ListMeta, 2 items {1 ObjectMeta {1 name}}}.
        let item = |n: &str| ld(2, cat(&[ld(1, ld(1, n)), ld(2, "v")]));
        let raw = cat(&[
            ld(1, ""),
            item("samplecontroller.team1.example.com"),
            item("samplecontroller.k8s.io"),
        ]);
        let body = envelope("apidiscovery.k8s.io/v2", "APIGroupDiscoveryList", &raw);
        let got = protobuf(&map(), &body).unwrap().unwrap();
        let raw = cat(&[
            ld(1, ""),
            item("samplecontroller.k8s.io"),
            item("samplecontroller.team1.example.com"),
        ]);
        assert_eq!(
            got,
            envelope("apidiscovery.k8s.io/v2", "APIGroupDiscoveryList", &raw)
        );
    }
}
