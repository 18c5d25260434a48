//! A request's URL rewritten for the other side: the group in the path, the
//! names of CRDs and APIServices, field selectors. What the URL means is
//! read in [`crate::kube::request`].

use std::borrow::Cow;

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, CONTROLS};

pub use crate::kube::request::RequestInfo;
use regroup_config::label_selector::LabelSelectorError;
use regroup_config::{Direction, Form, GroupMap};

/// Characters escaped when a rewritten query value is re-encoded.
const QUERY_VALUE: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'&')
    .add(b'+')
    .add(b',')
    .add(b'/')
    .add(b'<')
    .add(b'=')
    .add(b'>')
    .add(b'?');

/// The form of the object names of the resource `info` addresses, when
/// they are renamed: CRDs and APIServices (their names carry a group), the
/// kinds listed in `names:`. As the catalog says.
fn name_form(info: &RequestInfo, map: &GroupMap) -> Option<Form> {
    let resource = info.resource.as_deref()?;
    crate::rewrite::catalog::Catalog::name_form_of_resource(map, &info.group, resource)
}

/// Rewrites a raw request path: the group of `/apis/{group}/...` and
/// `/openapi/v3/apis/{group}/...`, and the object name of a CRD, an
/// APIService or a kind listed in `names:`. `None`: unchanged.
pub fn rewrite_path(path: &str, map: &GroupMap, dir: Direction) -> Option<String> {
    rewrite_path_for(path, &RequestInfo::parse(path, None), map, dir)
}

/// [`rewrite_path`] for a path already read as `info`.
pub fn rewrite_path_for(
    path: &str,
    info: &RequestInfo,
    map: &GroupMap,
    dir: Direction,
) -> Option<String> {
    // Most paths keep every segment: find what would change before
    // splitting the path into a list. The group is the piece of
    // `path.split('/')` after `apis` (the third) or `openapi/v3/apis` (the
    // fifth), found by those prefixes after the first slash without
    // cutting the path (a request's path starts with that slash).
    let after_first = path
        .as_bytes()
        .iter()
        .position(|&b| b == b'/')
        .map(|i| &path[i + 1..]);
    let group_at = after_first.and_then(|tail| {
        [("apis/", 2), ("openapi/v3/apis/", 4)]
            .into_iter()
            .find_map(|(prefix, i)| Some((i, tail.strip_prefix(prefix)?)))
    });
    // The group: its piece's index, its byte range in `path`, its new name.
    let mut group = None;
    if let Some((i, rest)) = group_at {
        let seg = crate::kube::path::split(rest).next().unwrap_or(rest);
        let decoded = if seg.bytes().any(|b| b == b'%') {
            percent_decode_str(seg).decode_utf8().ok()?
        } else {
            Cow::Borrowed(seg)
        };
        let start = path.len() - rest.len();
        // Borrowed from an exact rule: no `String` a renamed path.
        group = map
            .map_group_cow(&decoded, dir)
            .map(|mapped| (i, start..start + seg.len(), mapped));
    }
    let name = name_form(info, map)
        .zip(info.name.as_deref())
        .and_then(|(form, name)| map.map(form, name, dir));
    if group.is_none() && name.is_none() {
        return None;
    }
    // The new path spliced from the old one, piece ranges found in one
    // pass: no list of the pieces.
    let mut edits: [Option<(std::ops::Range<usize>, Cow<str>)>; 2] = [None, None];
    let name_range = name.as_ref().and_then(|_| {
        // The name is the piece after the resource's (compared with the
        // group's piece as renamed).
        let resource = info.resource.as_deref().unwrap_or_default();
        let mut at = 0;
        let mut after_resource = false;
        for (index, piece) in crate::kube::path::split(path).enumerate() {
            let range = at..at + piece.len();
            at = range.end + 1;
            if after_resource {
                return Some(range);
            }
            let piece = match &group {
                Some((i, _, mapped)) if *i == index => mapped,
                _ => piece,
            };
            after_resource = piece == resource;
        }
        None
    });
    if let Some((_, range, mapped)) = group {
        // A name piece that is the group's piece (a resource named like
        // the piece before the group) is renamed as a name.
        if name_range.as_ref() != Some(&range) {
            edits[0] = Some((range, mapped));
        }
    }
    if let (Some(range), Some(mapped)) = (name_range, name) {
        edits[1] = Some((range, Cow::Owned(mapped)));
    }
    if edits.iter().all(Option::is_none) {
        return None;
    }
    edits.sort_by_key(|e| e.as_ref().map(|(r, _)| r.start));
    let mut out = String::with_capacity(path.len() + 32);
    let mut copied = 0;
    for (range, text) in edits.into_iter().flatten() {
        out.push_str(&path[copied..range.start]);
        out.push_str(&text);
        copied = range.end;
    }
    out.push_str(&path[copied..]);
    Some(out)
}

/// Rewrites `fieldSelector` requirements on `*.apiVersion` / `*.apiGroup`
/// (`involvedObject.apiVersion=foo.example.io/v1`). `None`: unchanged, so the
/// raw query goes on byte for byte.
pub fn rewrite_query(query: &str, map: &GroupMap, dir: Direction) -> Option<String> {
    rewrite_query_for(query, &RequestInfo::default(), map, dir)
}

/// [`rewrite_query`] knowing the request: `metadata.name` selectors on
/// CRDs and APIServices (`kubectl get crd foos.foo.example.io -w`) name a
/// group too.
pub fn rewrite_query_for(
    query: &str,
    info: &RequestInfo,
    map: &GroupMap,
    dir: Direction,
) -> Option<String> {
    let names = name_form(info, map);
    let mut changed = false;
    let parts: Vec<String> = query
        .split('&')
        .map(|kv| {
            let Some(("fieldSelector", raw)) = kv.split_once('=') else {
                return kv.to_owned();
            };
            let value = percent_decode_str(&raw.replace('+', " "))
                .decode_utf8_lossy()
                .into_owned();
            match map.map_field_selector(&value, names, dir) {
                Some(v) => {
                    changed = true;
                    format!("fieldSelector={}", utf8_percent_encode(&v, QUERY_VALUE))
                }
                None => kv.to_owned(),
            }
        })
        .collect();
    changed.then(|| parts.join("&"))
}

/// Why a `labelSelector` that must be renamed can't be.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LabelSelectorQueryError {
    /// Its percent-decoded bytes are not UTF-8.
    #[error("labelSelector is not UTF-8: {0}")]
    NotUtf8(#[from] std::str::Utf8Error),
    /// It can't be parsed.
    #[error(transparent)]
    Selector(#[from] LabelSelectorError),
}

/// Rewrites the keys and values of a `labelSelector` by the metadata rules
/// (list, watch, deletecollection). `Ok(None)`: unchanged, the raw query
/// goes on byte for byte (always so without `metadata:` rules). An error
/// says why a selector that must be renamed can't be parsed.
pub fn rewrite_label_selector(
    query: &str,
    map: &GroupMap,
    dir: Direction,
) -> Result<Option<String>, LabelSelectorQueryError> {
    if map.metadata().is_none() || !query.contains("labelSelector=") {
        return Ok(None);
    }
    let mut changed = false;
    let mut parts = Vec::new();
    for kv in query.split('&') {
        let Some(("labelSelector", raw)) = kv.split_once('=') else {
            parts.push(kv.to_owned());
            continue;
        };
        let plus = raw.replace('+', " ");
        let value = percent_decode_str(&plus).decode_utf8()?;
        match map.map_label_selector(&value, dir)? {
            Some(v) => {
                changed = true;
                parts.push(format!(
                    "labelSelector={}",
                    utf8_percent_encode(&v, QUERY_VALUE)
                ));
            }
            None => parts.push(kv.to_owned()),
        }
    }
    Ok(changed.then(|| parts.join("&")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use regroup_config::{MapRule, Rule};

    fn map() -> GroupMap {
        GroupMap::new(vec![MapRule {
            rule: Rule::Exact {
                from: "samplecontroller.k8s.io".into(),
                to: "samplecontroller.team1.example.com".into(),
            },
            reference_keys: true,
        }])
        .unwrap()
    }

    proptest::proptest! {
        /// The group is renamed where `path.split('/')` puts it: the third
        /// piece after `apis`, the fifth after `openapi/v3/apis`.
        #[test]
        fn the_group_renamed_is_the_piece_split_finds(
            pieces in proptest::collection::vec(
                proptest::sample::select(vec![
                    "", "apis", "openapi", "v3", "samplecontroller.k8s.io",
                    "samplecontroller%2Ek8s.io", "%ff", "v1", "foos",
                ]),
                0..7,
            )
        ) {
            let path = pieces.join("/");
            let split: Vec<&str> = path.split('/').collect();
            let at = match split.as_slice() {
                [_, "apis", ..] => Some(2),
                [_, "openapi", "v3", "apis", ..] => Some(4),
                _ => None,
            };
            let m = map();
            let want = at.and_then(|i| {
                let g = percent_decode_str(split.get(i)?).decode_utf8().ok()?;
                let mapped = m.map_group(&g, Direction::ToCluster)?;
                let mut renamed: Vec<String> = split.iter().map(|s| s.to_string()).collect();
                renamed[i] = mapped;
                Some(renamed.join("/"))
            });
            proptest::prop_assert_eq!(rewrite_path(&path, &m, Direction::ToCluster), want);
        }
    }

    /// The path renamed as a list of its pieces: each piece renamed in
    /// place, then joined (what [`rewrite_path_for`] splices in one pass).
    fn by_pieces(path: &str, map: &GroupMap, dir: Direction) -> Option<String> {
        let info = RequestInfo::parse(path, None);
        let mut pieces: Vec<String> = path.split('/').map(str::to_owned).collect();
        let mut changed = false;
        let at = match pieces.iter().map(String::as_str).collect::<Vec<_>>()[..] {
            [_, "apis", _, ..] => Some(2),
            [_, "openapi", "v3", "apis", _, ..] => Some(4),
            _ => None,
        };
        if let Some(i) = at {
            let g = percent_decode_str(&pieces[i]).decode_utf8().ok()?;
            if let Some(mapped) = map.map_group(&g, dir) {
                pieces[i] = mapped;
                changed = true;
            }
        }
        let name = name_form(&info, map)
            .zip(info.name.as_deref())
            .and_then(|(form, name)| map.map(form, name, dir));
        if let Some(mapped) = name {
            let resource = info.resource.as_deref().unwrap_or_default();
            if let Some(r) = pieces.iter().position(|s| s == resource) {
                if r + 1 < pieces.len() {
                    pieces[r + 1] = mapped;
                    changed = true;
                }
            }
        }
        changed.then(|| pieces.join("/"))
    }

    proptest::proptest! {
        /// Groups and names (of CRDs) renamed in one pass, as renaming the
        /// pieces one by one does.
        #[test]
        fn the_path_spliced_is_the_path_renamed_piece_by_piece(
            head in proptest::sample::select(vec![
                "", "/apis", "/openapi/v3/apis", "/apis/samplecontroller.k8s.io/v1",
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                "/apis/apiregistration.k8s.io/v1/apiservices",
            ]),
            pieces in proptest::collection::vec(
                proptest::sample::select(vec![
                    "", "apis", "openapi", "v3", "samplecontroller.k8s.io", "v1",
                    "apiextensions.k8s.io", "customresourcedefinitions",
                    "foos.samplecontroller.k8s.io", "status", "foos",
                    "samplecontroller.team1.example.com",
                    "foos.samplecontroller.team1.example.com",
                    "v1alpha1.samplecontroller.k8s.io", "namespaces", "ns",
                ]),
                0..6,
            )
        ) {
            let path = format!("{head}/{}", pieces.join("/"));
            let m = map();
            for dir in [Direction::ToCluster, Direction::ToApp] {
                proptest::prop_assert_eq!(rewrite_path(&path, &m, dir), by_pieces(&path, &m, dir));
            }
        }
    }

    fn info(path: &str, q: Option<&str>) -> RequestInfo {
        RequestInfo::parse(path, q)
    }

    #[test]
    fn namespaced_resource_paths() {
        let i = info(
            "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos/alpha",
            None,
        );
        assert_eq!(i.group, "samplecontroller.k8s.io");
        assert_eq!(i.version.as_deref(), Some("v1alpha1"));
        assert_eq!(i.namespace.as_deref(), Some("ns"));
        assert_eq!(i.resource.as_deref(), Some("foos"));
        assert_eq!(i.name.as_deref(), Some("alpha"));
        assert!(!i.watch);
        assert_eq!(
            i.api_version().as_deref(),
            Some("samplecontroller.k8s.io/v1alpha1")
        );
    }

    #[test]
    fn cluster_scoped_core_and_discovery_paths() {
        let i = info("/api/v1/namespaces/ns", None);
        assert_eq!(
            (i.group.as_str(), i.resource.as_deref(), i.name.as_deref()),
            ("", Some("namespaces"), Some("ns"))
        );
        let i = info("/api/v1/namespaces/ns/status", None);
        assert_eq!(
            (
                i.resource.as_deref(),
                i.name.as_deref(),
                i.subresource.as_deref()
            ),
            (Some("namespaces"), Some("ns"), Some("status"))
        );
        let i = info("/apis/samplecontroller.k8s.io", None);
        assert_eq!(
            (i.group.as_str(), i.version.as_deref()),
            ("samplecontroller.k8s.io", None)
        );
        let i = info("/apis", None);
        assert!(i.is_api && i.group.is_empty());
        let i = info("/version", None);
        assert!(!i.is_api);
        let i = info(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/foos.samplecontroller.k8s.io",
            None,
        );
        assert_eq!(i.name.as_deref(), Some("foos.samplecontroller.k8s.io"));
    }

    #[test]
    fn watches_by_query_and_legacy_path() {
        assert!(
            info(
                "/apis/g.io/v1/namespaces/n/foos",
                Some("watch=1&resourceVersion=5")
            )
            .watch
        );
        assert!(info("/apis/g.io/v1/namespaces/n/foos", Some("watch=true")).watch);
        assert!(!info("/apis/g.io/v1/namespaces/n/foos", Some("watch=false")).watch);
        assert!(info("/apis/g.io/v1/namespaces/n/foos", Some("watch=True")).watch);
        assert!(info("/apis/g.io/v1/namespaces/n/foos", Some("watch=t")).watch);
        assert!(!info("/apis/g.io/v1/namespaces/n/foos", Some("watch=0")).watch);
        let i = info("/apis/g.io/v1/watch/namespaces/n/foos", None);
        assert!(i.watch);
        assert_eq!(
            (i.namespace.as_deref(), i.resource.as_deref()),
            (Some("n"), Some("foos"))
        );
    }

    #[test]
    fn percent_encoded_groups_are_decoded_before_matching() {
        let i = info("/apis/samplecontroller%2Ek8s.io/v1alpha1/foos", None);
        assert_eq!(i.group, "samplecontroller.k8s.io");
        assert_eq!(
            rewrite_path(
                "/apis/samplecontroller%2Ek8s.io/v1alpha1/foos",
                &map(),
                Direction::ToCluster
            )
            .as_deref(),
            Some("/apis/samplecontroller.team1.example.com/v1alpha1/foos")
        );
    }

    #[test]
    fn paths_are_rewritten_only_in_the_group_segment() {
        let m = map();
        assert_eq!(
            rewrite_path("/apis/samplecontroller.k8s.io/v1alpha1/namespaces/samplecontroller.k8s.io/foos", &m, Direction::ToCluster).as_deref(),
            Some("/apis/samplecontroller.team1.example.com/v1alpha1/namespaces/samplecontroller.k8s.io/foos")
        );
        assert_eq!(
            rewrite_path("/apis/samplecontroller.k8s.io", &m, Direction::ToCluster).as_deref(),
            Some("/apis/samplecontroller.team1.example.com")
        );
        assert_eq!(rewrite_path("/api/v1/pods", &m, Direction::ToCluster), None);
        assert_eq!(
            rewrite_path("/apis/apps/v1", &m, Direction::ToCluster),
            None
        );
    }

    #[test]
    fn crd_and_apiservice_names_and_openapi_v3_paths_are_rewritten() {
        let m = map();
        assert_eq!(
            rewrite_path("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/foos.samplecontroller.k8s.io", &m, Direction::ToCluster).as_deref(),
            Some("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/foos.samplecontroller.team1.example.com")
        );
        assert_eq!(
            rewrite_path("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/foos.samplecontroller.k8s.io/status", &m, Direction::ToCluster).as_deref(),
            Some("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/foos.samplecontroller.team1.example.com/status")
        );
        assert_eq!(
            rewrite_path(
                "/api/v1/namespaces/ns/configmaps/foos.samplecontroller.k8s.io",
                &m,
                Direction::ToCluster
            ),
            None
        );
        assert_eq!(
            rewrite_path(
                "/openapi/v3/apis/samplecontroller.k8s.io/v1alpha1",
                &m,
                Direction::ToCluster
            )
            .as_deref(),
            Some("/openapi/v3/apis/samplecontroller.team1.example.com/v1alpha1")
        );
        let info = RequestInfo::parse(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            None,
        );
        assert_eq!(
            rewrite_query_for(
                "fieldSelector=metadata.name%3Dfoos.samplecontroller.k8s.io&watch=1",
                &info,
                &m,
                Direction::ToCluster
            )
            .as_deref(),
            Some("fieldSelector=metadata.name%3Dfoos.samplecontroller.team1.example.com&watch=1")
        );
        assert_eq!(
            rewrite_query(
                "fieldSelector=metadata.name%3Dfoos.samplecontroller.k8s.io",
                &m,
                Direction::ToCluster
            ),
            None
        );
    }

    #[test]
    fn field_selectors_naming_an_api_version_are_rewritten() {
        let m = map();
        let q = "fieldSelector=involvedObject.apiVersion%3Dsamplecontroller.k8s.io%2Fv1alpha1%2CinvolvedObject.name%3Dalpha&limit=5";
        assert_eq!(
            rewrite_query(q, &m, Direction::ToCluster).as_deref(),
            Some("fieldSelector=involvedObject.apiVersion%3Dsamplecontroller.team1.example.com%2Fv1alpha1%2CinvolvedObject.name%3Dalpha&limit=5")
        );
        assert_eq!(
            rewrite_query(
                "fieldSelector=metadata.name%3Dx&watch=1",
                &m,
                Direction::ToCluster
            ),
            None
        );
        assert_eq!(
            rewrite_query(
                "fieldSelector=regarding.apiVersion!=samplecontroller.k8s.io/v1",
                &m,
                Direction::ToCluster
            )
            .as_deref(),
            Some("fieldSelector=regarding.apiVersion!%3Dsamplecontroller.team1.example.com%2Fv1")
        );
    }
}
