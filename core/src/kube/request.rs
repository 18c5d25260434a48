//! A request's Kubernetes meaning, read from its URL the way
//! kube-apiserver's `RequestInfo` does. Pure: no I/O.

use std::borrow::Cow;

use percent_encoding::percent_decode_str;

use super::path::segments;

/// A segment of a request's path as [`RequestInfo`] keeps it: inline up to
/// 24 bytes (no allocation for most), dereferencing to `str`.
pub type Segment = compact_str::CompactString;

/// A path segment percent-decoded; one without `%` is borrowed as it is
/// (most are, and this runs for every request).
fn decode_segment(s: &str) -> Cow<'_, str> {
    if s.contains('%') {
        percent_decode_str(s).decode_utf8_lossy()
    } else {
        Cow::Borrowed(s)
    }
}

/// Segments [`RequestInfo::parse`] reads: nothing past the ninth is read
/// (`apis`, group, version, `watch`, `namespaces`, namespace, resource,
/// name, subresource).
const SEGMENTS_READ: usize = 9;

/// The first non-empty segments of `path` into `out`, as
/// [`segments`](super::path::segments) cuts them; how many. Every slash's
/// place is read from a mask of a word's slashes (`path::bytes_equal`),
/// eight bytes a step, with nothing kept between segments but where the
/// last one ended.
fn first_segments<'p>(path: &'p str, out: &mut [&'p str]) -> usize {
    use super::path::{bytes_equal, word_at};
    let bytes = path.as_bytes();
    let (mut n, mut start, mut word) = (0, 0, 0);
    while word < bytes.len() && n < out.len() {
        let mut slashes = bytes_equal(word_at(bytes, word), b'/');
        while slashes != 0 {
            let at = word + slashes.trailing_zeros() as usize / 8;
            slashes &= slashes - 1;
            if at > start {
                // `/` is ASCII: both ends are character boundaries.
                out[n] = &path[start..at];
                n += 1;
                if n == out.len() {
                    return n;
                }
            }
            start = at + 1;
        }
        word += 8;
    }
    if start < bytes.len() && n < out.len() {
        out[n] = &path[start..];
        n += 1;
    }
    n
}

/// What a request addresses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// `/api/...` or `/apis/...` with a version: a resource or discovery path.
    pub is_api: bool,
    /// The group (`""` for `/api`), percent-decoded, as the caller named it.
    pub group: Segment,
    /// The version, if the path has one.
    pub version: Option<Segment>,
    /// The namespace, for namespaced paths.
    pub namespace: Option<Segment>,
    /// The resource (`foos`), if any.
    pub resource: Option<Segment>,
    /// The object name, if any.
    pub name: Option<Segment>,
    /// The subresource (`status`, `scale`, `log`, `exec`, ...), if any.
    pub subresource: Option<Segment>,
    /// A watch: the legacy `/watch/` path or `?watch=true|1`.
    pub watch: bool,
}

impl RequestInfo {
    /// The Kubernetes verb of a request with this method, as kube-apiserver
    /// names it (audit, RBAC, its metrics): `get`, `list`, `watch`,
    /// `create`, `update`, `patch`, `delete`, `deletecollection`; a path
    /// that is no resource gets the method in lower case; anything else
    /// `other` (a bounded set: it is a metric label).
    ///
    /// ```
    /// use regroup_core::kube::request::RequestInfo;
    /// let list = RequestInfo::parse("/apis/g.io/v1/namespaces/n/foos", None);
    /// assert_eq!(list.verb("GET"), "list");
    /// let watch = RequestInfo::parse("/apis/g.io/v1/namespaces/n/foos", Some("watch=1"));
    /// assert_eq!(watch.verb("GET"), "watch");
    /// assert_eq!(list.verb("DELETE"), "deletecollection");
    /// ```
    pub fn verb(&self, method: &str) -> &'static str {
        let named = self.name.is_some();
        if !self.is_api || self.resource.is_none() {
            return match method {
                "GET" => "get",
                "HEAD" => "head",
                "POST" => "post",
                "PUT" => "put",
                "PATCH" => "patch",
                "DELETE" => "delete",
                "OPTIONS" => "options",
                _ => "other",
            };
        }
        match method {
            "GET" | "HEAD" if self.watch => "watch",
            "GET" | "HEAD" if named => "get",
            "GET" | "HEAD" => "list",
            "POST" => "create",
            "PUT" => "update",
            "PATCH" => "patch",
            "DELETE" if named => "delete",
            "DELETE" => "deletecollection",
            _ => "other",
        }
    }

    /// Reads a request path (as sent, percent-encoded) and its raw query.
    ///
    /// ```
    /// let i = regroup_core::kube::request::RequestInfo::parse(
    ///     "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos/alpha/status", None);
    /// assert_eq!(i.group, "samplecontroller.k8s.io");
    /// assert_eq!(i.resource.as_deref(), Some("foos"));
    /// assert_eq!(i.subresource.as_deref(), Some("status"));
    /// ```
    pub fn parse(path: &str, query: Option<&str>) -> RequestInfo {
        let watch = query.is_some_and(query_says_watch);
        // The path searched for an escape once: most have none, and their
        // segments are read as the path's own slices, cut where
        // `first_segments` found them (no iterator over the pieces, no
        // decoding).
        if memchr::memchr(b'%', path.as_bytes()).is_some() {
            let mut read: [Cow<'_, str>; SEGMENTS_READ] = Default::default();
            let mut n = 0;
            for s in segments(path).take(SEGMENTS_READ) {
                read[n] = decode_segment(s);
                n += 1;
            }
            return RequestInfo::of_segments(&read[..n], watch);
        }
        let mut read = [""; SEGMENTS_READ];
        let n = first_segments(path, &mut read);
        RequestInfo::of_segments(&read[..n], watch)
    }

    /// What the first segments of a path (at most [`SEGMENTS_READ`],
    /// decoded) address.
    fn of_segments<S: AsRef<str>>(segments: &[S], watch: bool) -> RequestInfo {
        let mut info = RequestInfo {
            watch,
            ..RequestInfo::default()
        };
        let at = |i: usize| segments.get(i).map(AsRef::as_ref);
        let mut next = match at(0) {
            Some("api") => 1,
            Some("apis") => match at(1) {
                Some(g) => {
                    info.group = Segment::from(g);
                    2
                }
                None => {
                    info.is_api = true;
                    return info;
                }
            },
            _ => return info,
        };
        info.is_api = true;
        let Some(version) = at(next) else {
            return info;
        };
        info.version = Some(Segment::from(version));
        next += 1;
        if at(next) == Some("watch") {
            info.watch = true;
            next += 1;
        }
        if at(next) == Some("namespaces") {
            if let Some(ns) = at(next + 1) {
                info.namespace = Some(Segment::from(ns));
                // `namespaces/{ns}/status` and `/finalize` are subresources
                // of the namespace itself.
                if at(next + 2).is_some_and(|s| !matches!(s, "status" | "finalize")) {
                    next += 2;
                }
            }
        }
        info.resource = at(next).map(Segment::from);
        info.name = at(next + 1).map(Segment::from);
        info.subresource = at(next + 2).map(Segment::from);
        info
    }

    /// `group/version` (or `version` for the core group).
    pub fn api_version(&self) -> Option<String> {
        let v = self.version.as_ref()?;
        Some(if self.group.is_empty() {
            v.to_string()
        } else {
            format!("{}/{v}", self.group)
        })
    }
}

impl RequestInfo {
    /// The path with object and namespace names replaced by placeholders,
    /// for logs and metrics: groups, versions and resources are kept (a
    /// bounded set), names never.
    pub fn template(&self, path: &str) -> String {
        self.template_of(path).to_string()
    }

    /// [`template`](Self::template), written where it is displayed (the
    /// request log line) instead of built first.
    pub fn template_of<'a>(&'a self, path: &'a str) -> Template<'a> {
        Template { info: self, path }
    }
}

/// A request's path template (see [`RequestInfo::template`]), as `Display`.
pub struct Template<'a> {
    info: &'a RequestInfo,
    path: &'a str,
}

impl std::fmt::Display for Template<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.write_to(f)
    }
}

impl Template<'_> {
    /// Writes the template to `f`: into a `String`, without `core::fmt`'s
    /// dynamic dispatch per piece (the request log line, every request).
    pub fn write_to(&self, f: &mut impl std::fmt::Write) -> std::fmt::Result {
        let info = self.info;
        if !info.is_api {
            // Discovery-less paths: their first two segments say what they
            // are (`/openapi/v3`, `/version`, `/healthz`).
            let mut pieces = segments(self.path);
            let mut any = false;
            for s in pieces.by_ref().take(2) {
                f.write_str("/")?;
                f.write_str(s)?;
                any = true;
            }
            if !any {
                return f.write_str("/");
            }
            if pieces.next().is_some() {
                f.write_str("/...")?;
            }
            return Ok(());
        }
        if info.group.is_empty() {
            f.write_str("/api")?;
        } else {
            f.write_str("/apis/")?;
            f.write_str(&info.group)?;
        }
        if let Some(v) = &info.version {
            f.write_str("/")?;
            f.write_str(v)?;
        }
        // A namespace's own path names it once, as the object.
        if info.namespace.is_some() && info.resource.as_deref() != Some("namespaces") {
            f.write_str("/namespaces/{namespace}")?;
        }
        if let Some(r) = &info.resource {
            f.write_str("/")?;
            f.write_str(r)?;
        }
        if info.name.is_some() {
            f.write_str("/{name}")?;
        }
        if let Some(sub) = &info.subresource {
            f.write_str("/")?;
            f.write_str(sub)?;
        }
        Ok(())
    }
}

/// A watch, read from the raw path and query without parsing the request
/// further: `?watch=` true (Go's spellings) or the legacy `/watch/` paths
/// (`/api/{version}/watch/...`, `/apis/{group}/{version}/watch/...`). The
/// same answer as [`RequestInfo::parse`]'s `watch`.
pub fn is_watch(path: &str, query: Option<&str>) -> bool {
    if query.is_some_and(query_says_watch) {
        return true;
    }
    // Only a path with a `watch` segment can be a legacy watch. Its `w`s
    // found by `memchr` (most paths have none), where `contains` sets up
    // a substring searcher on every request.
    let b = path.as_bytes();
    if !memchr::memchr_iter(b'w', b)
        .any(|i| i > 0 && b[i - 1] == b'/' && b[i..].starts_with(b"watch"))
    {
        return false;
    }
    let mut segs = segments(path);
    match segs.next() {
        Some("api") => segs.nth(1) == Some("watch"),
        Some("apis") => segs.nth(2) == Some("watch"),
        _ => false,
    }
}

/// A request kube-apiserver holds open as long as the client wants
/// (its long-running check, less the protocol upgrades: attach, exec and
/// port-forward): a watch, or a `log` or `proxy` subresource (`logs -f`,
/// a pod's or service's proxy). Read like [`is_watch`]; the path is parsed
/// only when it has such a segment.
pub fn is_long_running(path: &str, query: Option<&str>) -> bool {
    if is_watch(path, query) {
        return true;
    }
    if !(path.contains("/log") || path.contains("/proxy")) {
        return false;
    }
    matches!(
        RequestInfo::parse(path, query).subresource.as_deref(),
        Some("log" | "proxy")
    )
}

fn query_says_watch(q: &str) -> bool {
    q.split('&').any(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        // Go's strconv.ParseBool, as kube-apiserver reads it.
        k == "watch" && matches!(v, "1" | "t" | "T" | "true" | "TRUE" | "True")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn first_segments_are_the_first_non_empty_pieces(path in "[/aé.w]{0,40}", room in 0usize..12) {
            let mut out = vec![""; room];
            let n = first_segments(&path, &mut out);
            let want: Vec<&str> = segments(&path).take(room).collect();
            proptest::prop_assert_eq!(&out[..n], &want[..]);
        }

        #[test]
        fn a_path_reads_the_same_with_its_segments_escaped(
            segs in proptest::collection::vec("(api|apis|v1|watch|namespaces|status|finalize|foos|[a-z.]{1,5})", 0..12),
            slashes in proptest::collection::vec("/{1,2}", 12),
        ) {
            // The escaped path goes the decoding way; the plain one, cut
            // in place, must read the same.
            let mut plain = String::new();
            let mut escaped = String::new();
            for (s, slash) in segs.iter().zip(&slashes) {
                plain.push_str(slash);
                plain.push_str(s);
                escaped.push_str(slash);
                escaped.push_str(&s.replacen('a', "%61", 1));
            }
            proptest::prop_assert_eq!(RequestInfo::parse(&plain, None), RequestInfo::parse(&escaped, None));
        }
    }

    #[test]
    fn verbs_are_kube_apiservers() {
        let v = |method: &str, path: &str, query: Option<&str>| {
            RequestInfo::parse(path, query).verb(method)
        };
        let foos = "/apis/g.io/v1/namespaces/n/foos";
        let foo = "/apis/g.io/v1/namespaces/n/foos/a";
        assert_eq!(v("GET", foo, None), "get");
        assert_eq!(v("GET", foos, None), "list");
        assert_eq!(v("GET", foos, Some("watch=true")), "watch");
        assert_eq!(v("GET", "/api/v1/watch/namespaces/n/pods", None), "watch");
        assert_eq!(v("POST", foos, None), "create");
        assert_eq!(v("PUT", &format!("{foo}/status"), None), "update");
        assert_eq!(v("PATCH", foo, None), "patch");
        assert_eq!(v("DELETE", foo, None), "delete");
        assert_eq!(v("DELETE", foos, None), "deletecollection");
        assert_eq!(v("GET", "/api/v1/namespaces/n", None), "get");
        assert_eq!(v("GET", "/apis/g.io/v1", None), "get");
        assert_eq!(v("GET", "/healthz", None), "get");
        assert_eq!(v("BREW", foos, None), "other");
    }

    #[test]
    fn is_watch_agrees_with_parse() {
        for (p, q) in [
            ("/api/v1/pods", Some("watch=true")),
            ("/api/v1/pods", Some("labelSelector=a&watch=1")),
            ("/api/v1/pods", Some("watch=false")),
            ("/api/v1/watch/pods", None),
            ("/apis/samplecontroller.k8s.io/v1alpha1/watch/foos", None),
            ("/apis/samplecontroller.k8s.io/v1alpha1/foos", None),
            ("/api/v1/namespaces/watch/pods", None),
            ("/apis/watch", None),
            ("/version", None),
        ] {
            assert_eq!(is_watch(p, q), RequestInfo::parse(p, q).watch, "{p} {q:?}");
        }
    }

    #[test]
    fn long_running_are_watches_logs_and_proxies() {
        for (p, q, long) in [
            (
                "/api/v1/namespaces/ns/pods/p/log",
                Some("follow=true"),
                true,
            ),
            ("/api/v1/namespaces/ns/pods/p/log", None, true),
            (
                "/api/v1/namespaces/ns/services/s/proxy/metrics/x",
                None,
                true,
            ),
            ("/api/v1/namespaces/ns/pods/p/proxy", None, true),
            (
                "/apis/samplecontroller.k8s.io/v1alpha1/foos",
                Some("watch=1"),
                true,
            ),
            ("/api/v1/watch/pods", None, true),
            ("/api/v1/namespaces/ns/pods/p", None, false),
            ("/api/v1/namespaces/ns/pods/logger", None, false),
            ("/api/v1/namespaces/proxy/pods/p/status", None, false),
            (
                "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos/log",
                None,
                false,
            ),
            (
                "/api/v1/namespaces/ns/pods/p/exec",
                Some("command=ls"),
                false,
            ),
            ("/version", None, false),
        ] {
            assert_eq!(is_long_running(p, q), long, "{p} {q:?}");
        }
    }

    #[test]
    fn templates_keep_groups_and_resources_never_names() {
        let t = |p: &str| RequestInfo::parse(p, None).template(p);
        assert_eq!(
            t("/apis/samplecontroller.k8s.io/v1alpha1/namespaces/team-secret/foos/alpha/status"),
            "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/{namespace}/foos/{name}/status"
        );
        assert_eq!(t("/api/v1/pods"), "/api/v1/pods");
        assert_eq!(
            t("/api/v1/namespaces/kube-system"),
            "/api/v1/namespaces/{name}"
        );
        assert_eq!(t("/openapi/v3/apis/g/v1"), "/openapi/v3/...");
        assert_eq!(t("/version"), "/version");
        assert_eq!(t("/"), "/");
    }
}
