//! Where a request goes: refused as not found when it names the other
//! side's group (shadowed), else its path and query in the upstream's names.

use http::Uri;

use super::etag;
use super::exchange::Forward;
use crate::kube::RequestInfo;
use crate::rewrite::Engine;
use crate::status::Failure;
use crate::url_rename;

/// The upstream address of a request.
pub(crate) struct Target {
    /// The full URI (path and query renamed).
    pub uri: Uri,
    /// The path alone, renamed; `None`: unchanged.
    pub path: Option<String>,
}

/// A DELETE of a whole collection whose names `names:` renames per copy
/// (`kubectl delete clusterroles -l app=foo`): the cluster would delete the
/// other copies' objects too (they carry the same labels), so it is
/// refused with 403, saying why. Deleting by name is not affected.
pub(crate) fn refuse_shared_collection_delete(
    fwd: &Forward,
    engine: &Engine,
    info: &RequestInfo,
    method: &http::Method,
) -> Result<(), Failure> {
    let (Some(resource), None) = (info.resource.as_deref(), info.name.as_deref()) else {
        return Ok(());
    };
    let covered = engine
        .map()
        .object_names()
        .is_some_and(|n| n.covers_resource(&info.group, resource));
    if method == http::Method::DELETE && covered && fwd.dir == regroup_config::Direction::ToCluster
    {
        return Err(Failure::forbidden(format!(
            "regroup: deleting the collection {resource}.{} would delete other copies' objects too \
             (their names are renamed per copy by `names:`, but a collection delete selects by \
             labels and fields only); delete them by name",
            info.group
        )));
    }
    Ok(())
}

/// `Ok(None)`: the request names a shadowed group and must look exactly
/// like a request for a group that does not exist.
pub(crate) fn resolve(
    fwd: &Forward,
    engine: &Engine,
    info: &RequestInfo,
    uri: &Uri,
) -> Result<Option<Target>, Failure> {
    let (map, dir) = (engine.map(), fwd.dir);
    let path = uri.path();
    let openapi_group = path
        .strip_prefix("/openapi/v3/apis/")
        .map(|r| r.split('/').next().unwrap_or(r));
    let named_group = if info.is_api {
        Some(info.group.as_str())
    } else {
        openapi_group
    };
    if named_group.is_some_and(|g| !g.is_empty() && map.is_shadowed(g, dir)) {
        return Ok(None);
    }
    let renamed = url_rename::rewrite_path_for(path, info, map, dir);
    // OpenAPI v3 documents are addressed by the hash regroup tagged.
    let query = match uri.query() {
        Some(q) => {
            let q =
                url_rename::rewrite_query_for(q, info, map, dir).unwrap_or_else(|| q.to_owned());
            let q = match url_rename::rewrite_label_selector(&q, map, dir) {
                Ok(Some(renamed)) => renamed,
                Ok(None) => q,
                Err(why) => return Err(Failure::bad_request(format!("regroup: {why}"))),
            };
            Some(etag::untag(engine, &q))
        }
        None => None,
    };
    let bad = |e: http::Error| Failure::bad_request(format!("invalid request URI: {e}"));
    let unchanged = renamed.is_none() && query.as_deref() == uri.query();
    let uri = match uri.path_and_query() {
        // Most requests keep their path and query: no new string to check.
        Some(pq) if unchanged => fwd.upstream.uri_of(pq).map_err(bad)?,
        _ => {
            let path = renamed.as_deref().unwrap_or(path);
            let q = query.as_deref().map_or(0, |q| q.len() + 1);
            let mut pq = String::with_capacity(path.len() + q);
            pq.push_str(path);
            if let Some(q) = &query {
                pq.push('?');
                pq.push_str(q);
            }
            fwd.upstream.uri_owned(pq).map_err(bad)?
        }
    };
    Ok(Some(Target { uri, path: renamed }))
}
