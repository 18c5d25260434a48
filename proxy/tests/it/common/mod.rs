//! Shared helpers for tests on the real captures in `testdata/kube-1.24`.
#![allow(dead_code)]

use std::path::PathBuf;

use regroup_config::{GroupMap, MapRule, Rule};
use serde_json::Value as Json;

/// `testdata/kube-1.24` in the repository.
pub fn fixtures() -> PathBuf {
    fixtures_of("kube-1.24")
}

/// `testdata/<version>` (`kube-1.24`, `kube-1.29`) in the repository.
pub fn fixtures_of(version: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata")
        .join(version)
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
    /// Loads `<world>/<name>` of `kube-1.24`.
    pub fn load(world: &str, name: &str) -> Case {
        Case::load_of("kube-1.24", world, name)
    }

    /// Loads `<world>/<name>` of the captures of `version`.
    pub fn load_of(version: &str, world: &str, name: &str) -> Case {
        let dir = fixtures_of(version).join(world).join(name);
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

    /// The response body as the apiserver meant it: inflated when it was
    /// sent gzipped.
    pub fn response_body(&self) -> Vec<u8> {
        if !self.gzipped() {
            return self.response.clone();
        }
        let mut out = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(&self.response[..]),
            &mut out,
        )
        .expect("a captured gzip body inflates");
        out
    }
}

/// Names of the paired cases (`orig/` and `renamed/` have the same list).
pub fn case_names() -> Vec<String> {
    case_names_of("kube-1.24")
}

/// [`case_names`] of the captures of `version`.
pub fn case_names_of(version: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures_of(version).join("orig"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.as_bytes()[0].is_ascii_digit())
        .collect();
    names.sort();
    names
}

/// Masks what differs between the two captured worlds for reasons other
/// than the rename, **by path**: a value is masked only where the fixtures
/// README ("Volatile fields", "Differences between paired cases") says it is
/// volatile, never because of its key's name elsewhere. Everything else,
/// group-bearing or not, is compared. The world's own name (namespace,
/// cluster-scoped names, label value) becomes `<world>` in every string.
///
/// `case` is the capture's name (`118-list-crd-table`); `docs` are one body
/// or the events of one watch stream, in order (a Table watch sends its
/// column definitions in the first event only).
pub fn normalize_docs(docs: &mut [Json], world: &str, case: &str) {
    let mut m = Masker {
        case,
        columns: Vec::new(),
    };
    for d in docs.iter_mut() {
        m.document(d);
        mask_strings(d, world);
    }
}

/// [`normalize_docs`] for a single document.
pub fn normalize(v: &mut Json, world: &str, case: &str) {
    normalize_docs(std::slice::from_mut(v), world, case);
}

const MASK: &str = "<masked>";

fn mask(v: &mut Json) {
    *v = Json::String(MASK.into());
}

/// Masks the member at `path` (dot-separated; `[]` is every element).
fn mask_at(v: &mut Json, path: &str) {
    fn go(v: &mut Json, steps: &[&str]) {
        let Some((first, rest)) = steps.split_first() else {
            mask(v);
            return;
        };
        match first.strip_suffix("[]") {
            Some(k) => {
                if let Some(Json::Array(a)) = v.get_mut(k) {
                    for e in a {
                        go(e, rest);
                    }
                }
            }
            None => {
                if let Some(c) = v.get_mut(*first) {
                    go(c, rest);
                }
            }
        }
    }
    go(v, &path.split('.').collect::<Vec<_>>());
}

struct Masker<'c> {
    case: &'c str,
    /// Indexes of the Table cells that hold times (the last column
    /// definitions seen in this stream).
    columns: Vec<usize>,
}

impl Masker<'_> {
    /// A top-level document: an object, a list, a Table or a watch event.
    fn document(&mut self, d: &mut Json) {
        if let Json::Array(ops) = d {
            // A JSON Patch: the values it adds at volatile paths.
            for op in ops {
                let path = op["path"].as_str().unwrap_or("").to_owned();
                if path == "/metadata/ownerReferences" {
                    mask_at(op, "value[].uid");
                } else if path.starts_with("/metadata/ownerReferences/") {
                    mask_at(op, "value.uid");
                }
            }
            return;
        }
        let is_event =
            d.get("kind").is_none() && d.get("type").is_some() && d.get("object").is_some();
        if is_event {
            // JSON: the object itself; protobuf decoded: a RawExtension.
            let o = match d.pointer_mut("/object/raw") {
                Some(_) => d.pointer_mut("/object/raw"),
                None => d.get_mut("object"),
            };
            if let Some(o) = o {
                self.object(o, None);
            }
        } else {
            self.object(d, None);
        }
    }

    /// One Kubernetes object (of any kind, lists and Tables included);
    /// `hint` is the (group, kind) of a typed list's items, which omit
    /// theirs.
    fn object(&mut self, o: &mut Json, hint: Option<(&str, &str)>) {
        if !o.is_object() {
            return;
        }
        let api_version = o.get("apiVersion").and_then(Json::as_str);
        let (mut group, mut kind) = match (api_version, o.get("kind").and_then(Json::as_str)) {
            (Some(a), Some(k)) => (
                a.split_once('/').map_or("", |(g, _)| g).to_owned(),
                k.to_owned(),
            ),
            _ => hint.map_or_else(Default::default, |(g, k)| (g.to_owned(), k.to_owned())),
        };
        if let Some(list) = kind.strip_prefix("PartialObjectMetadata") {
            // Metadata only: the kind is the one the case addressed.
            if let Some((g, k)) = addressed_kind(self.case) {
                (group, kind) = (g.to_owned(), format!("{k}{list}"));
            }
        }
        // Assigned by the server per object and per run: metadata.uid,
        // resourceVersion, creationTimestamp, managedFields[].time, and the
        // uids other objects' references copy (README "Volatile fields").
        // (The captured deletionTimestamps, Event times and generations
        // agree between the worlds, so they are compared.)
        for p in [
            "metadata.uid",
            "metadata.resourceVersion",
            "metadata.creationTimestamp",
            "metadata.managedFields[].time",
            "metadata.ownerReferences[].uid",
            // A list's paging token encodes the resourceVersion.
            "metadata.continue",
        ] {
            mask_at(o, p);
        }
        // managedFields keys such as `k:{"uid":"7a72..."}` embed uids.
        if let Some(Json::Array(mf)) = o.pointer_mut("/metadata/managedFields") {
            for m in mf {
                if let Some(f) = m.get_mut("fieldsV1") {
                    mask_uid_keys(f);
                }
            }
        }
        match (group.as_str(), kind.as_str()) {
            ("", "Event") => {
                mask_at(o, "involvedObject.uid");
                mask_at(o, "related.uid");
            }
            ("events.k8s.io", "Event") => {
                mask_at(o, "regarding.uid");
                mask_at(o, "related.uid");
            }
            ("apiextensions.k8s.io", "CustomResourceDefinition")
            | ("apiregistration.k8s.io", "APIService") => {
                mask_at(o, "status.conditions[].lastTransitionTime");
                // Only a CRD of a protected `*.k8s.io` group (the orig
                // world's) gets the API approval condition (README "Of
                // note"): dropped in both worlds, with what managedFields
                // record of it.
                if let Some(Json::Array(cs)) = o.pointer_mut("/status/conditions") {
                    cs.retain(|c| c["type"] != "KubernetesAPIApprovalPolicyConformant");
                }
                if let Some(Json::Array(mf)) = o.pointer_mut("/metadata/managedFields") {
                    for m in mf {
                        // `Raw`: the protobuf form, decoded.
                        for at in ["/fieldsV1", "/fieldsV1/Raw"] {
                            let at = format!("{at}/f:status/f:conditions");
                            if let Some(Json::Object(c)) = m.pointer_mut(&at) {
                                c.remove("k:{\"type\":\"KubernetesAPIApprovalPolicyConformant\"}");
                            }
                        }
                    }
                }
            }
            ("authorization.k8s.io", "SelfSubjectRulesReview") => {
                // The server returned these rules in a different order in
                // the two worlds (README): compared as a set.
                if let Some(Json::Array(r)) = o.pointer_mut("/status/nonResourceRules") {
                    r.sort_by_key(|x| x.to_string());
                }
            }
            ("", "APIResourceList") => {
                // Derived from the group: base64(sha256("<group>/<storage
                // version>/<Kind>")[:8]) (README "Of note"). regroup leaves
                // the cluster's as it is: a real difference, unfixed (it
                // names no group; clients only compare it with itself over
                // time, to notice a storage version change).
                mask_at(o, "resources[].storageVersionHash");
            }
            ("", "Status") | ("meta.k8s.io", "Status") => {
                // The deleted object's uid.
                mask_at(o, "details.uid");
                // "too old resource version: 1 (<current RV>)" (251, 261).
                if o["reason"] == "Expired" {
                    if let Some(Json::String(m)) = o.get_mut("message") {
                        if let Some(i) = m.find(" (") {
                            m.truncate(i);
                        }
                    }
                }
            }
            ("", "DeleteOptions") | ("meta.k8s.io", "DeleteOptions") => {
                // The uid of the object being deleted.
                mask_at(o, "preconditions.uid");
            }
            ("meta.k8s.io", "Table") => self.table(o),
            _ => {}
        }
        let item_kind = kind.strip_suffix("List").map(str::to_owned);
        if let Some(Json::Array(items)) = o.get_mut("items") {
            for i in items {
                self.object(i, item_kind.as_deref().map(|k| (group.as_str(), k)));
            }
        }
    }

    /// A Table: its rows' objects, and the cells of time columns (`Age`,
    /// and `date` columns such as a CRD's `Created At`): they hold the
    /// object's age or creation time (README "Volatile fields").
    fn table(&mut self, t: &mut Json) {
        if let Some(Json::Array(cols)) = t.get("columnDefinitions") {
            self.columns = cols
                .iter()
                .enumerate()
                .filter(|(_, c)| c["name"] == "Age" || c["type"] == "date")
                .map(|(i, _)| i)
                .collect();
        }
        if let Some(Json::Array(rows)) = t.get_mut("rows") {
            for r in rows {
                if let Some(Json::Array(cells)) = r.get_mut("cells") {
                    for &i in &self.columns {
                        if let Some(c) = cells.get_mut(i) {
                            mask(c);
                        }
                    }
                }
                if let Some(o) = r.get_mut("object") {
                    self.object(o, None);
                }
            }
        }
    }
}

/// The kind whose objects a case addresses, for the metadata-only forms
/// (`PartialObjectMetadata`), which lose it: by the case's name.
fn addressed_kind(case: &str) -> Option<(&'static str, &'static str)> {
    if case.contains("-crd") {
        Some(("apiextensions.k8s.io", "CustomResourceDefinition"))
    } else if case.contains("-apiservice") {
        Some(("apiregistration.k8s.io", "APIService"))
    } else if case.contains("-event-core") {
        Some(("", "Event"))
    } else if case.contains("-event-eventsv1") {
        Some(("events.k8s.io", "Event"))
    } else {
        None
    }
}

/// Replaces the world's name in every string (values only).
fn mask_strings(v: &mut Json, world: &str) {
    match v {
        Json::Object(m) => m.values_mut().for_each(|c| mask_strings(c, world)),
        Json::Array(a) => a.iter_mut().for_each(|c| mask_strings(c, world)),
        Json::String(s) => *s = mask_world(s, world),
        _ => {}
    }
}

/// Masks uids in the keys of a `fieldsV1` tree.
fn mask_uid_keys(v: &mut Json) {
    if let Json::Object(m) = v {
        let members = std::mem::take(m);
        for (k, mut c) in members {
            mask_uid_keys(&mut c);
            m.insert(mask_uid_key(&k), c);
        }
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

/// Masks what an OpenAPI document's operations name after their group in
/// camel case, which regroup leaves as it is: `paths.*.<operation>.operationId`
/// and `.tags` (v2 and v3).
pub fn mask_operation_names(doc: &mut Json) {
    let Some(Json::Object(paths)) = doc.get_mut("paths") else {
        return;
    };
    for item in paths.values_mut() {
        let Json::Object(ops) = item else { continue };
        for op in ops.values_mut() {
            if let Json::Object(op) = op {
                for k in ["operationId", "tags"] {
                    if let Some(v) = op.get_mut(k) {
                        mask(v);
                    }
                }
            }
        }
    }
}

/// The sidecar (fixture rules, built-in catalog, the app's credentials
/// passed through) in front of `server`, on a loopback port, making the app
/// trust a front when `trust` is given. Returns its address.
pub async fn sidecar(
    server: String,
    trust: Option<regroup::hooks::front_trust::FrontTrust>,
) -> std::net::SocketAddr {
    sidecar_with(server, trust, None).await
}

/// [`sidecar`], also pointing fronted webhook registrations at regroup.
#[allow(dead_code)]
pub async fn sidecar_with(
    server: String,
    trust: Option<regroup::hooks::front_trust::FrontTrust>,
    registration: Option<regroup::hooks::registrations::WebhookRegistration>,
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
    let mut proxy = regroup::pipeline::proxy::Proxy::sidecar(
        regroup::pipeline::live::Live::new(regroup::rewrite::Engine::new(
            map.clone(),
            catalog.clone(),
        )),
        std::sync::Arc::new(up),
        true,
    );
    if let Some(t) = trust {
        proxy = proxy.with_trust(t);
    }
    if let Some(r) = registration {
        proxy = proxy.with_registration(r);
    }
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(serve_plain(l, std::sync::Arc::new(proxy)));
    addr
}

/// What a fake upstream received: one whole request.
pub struct Received {
    pub method: http::Method,
    pub path: String,
    pub query: Option<String>,
    pub headers: http::HeaderMap,
    pub body: bytes::Bytes,
}

impl Received {
    /// A header's value as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    }
}

/// A plain-HTTP/1.1 server on loopback standing in for kube-apiserver:
/// each request, read whole, goes to `answer`, which returns the status,
/// the `Content-Type` and the body. Returns its base URL.
pub async fn fake_upstream<F>(answer: F) -> String
where
    F: Fn(Received) -> (http::StatusCode, String, bytes::Bytes) + Send + Sync + 'static,
{
    use http_body_util::BodyExt;
    let answer = std::sync::Arc::new(answer);
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (s, _) = l.accept().await.unwrap();
            let answer = answer.clone();
            tokio::spawn(async move {
                let svc =
                    hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let answer = answer.clone();
                        async move {
                            let (parts, body) = req.into_parts();
                            let received = Received {
                                method: parts.method,
                                path: parts.uri.path().to_owned(),
                                query: parts.uri.query().map(str::to_owned),
                                headers: parts.headers,
                                body: body.collect().await.unwrap().to_bytes(),
                            };
                            let (code, ctype, body) = answer(received);
                            Ok::<_, std::convert::Infallible>(
                                http::Response::builder()
                                    .status(code)
                                    .header("content-type", ctype)
                                    .body(http_body_util::Full::new(body))
                                    .unwrap(),
                            )
                        }
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    format!("http://{addr}")
}

/// An engine for the captures' rule (`samplecontroller.k8s.io` ↔
/// `samplecontroller.team1.example.com`) with this `names:` section (YAML,
/// its lines indented by two), built as `regroup serve` builds it.
pub fn names_engine(names: &str) -> regroup::rewrite::Engine {
    let config = format!(
        "rules:\n  - from: samplecontroller.k8s.io\n    to: samplecontroller.team1.example.com\nnames:\n{names}"
    );
    let s = regroup_config::load(&config).expect("a valid configuration");
    let catalog = regroup::rewrite::Catalog::for_map(&s.fields, &s.map);
    regroup::rewrite::Engine::new(s.map, catalog)
}

/// JSON renamed in one direction the way the proxy renames it: through the
/// [`Engine`](regroup::rewrite::Engine), whose codecs are its own (the
/// tests hold no codec of their own).
pub struct EngineJson {
    engine: regroup::rewrite::Engine,
    dir: regroup_config::Direction,
}

impl EngineJson {
    /// An engine over copies of `map` and `catalog`, renaming in `dir`.
    pub fn new(
        map: &GroupMap,
        catalog: &regroup::rewrite::Catalog,
        dir: regroup_config::Direction,
    ) -> EngineJson {
        EngineJson {
            engine: regroup::rewrite::Engine::new(map.clone(), catalog.clone()),
            dir,
        }
    }

    fn body(
        &self,
        bytes: &[u8],
        hint: Option<(&str, &str)>,
        addressed: Option<(&str, &str)>,
    ) -> Result<Option<Vec<u8>>, regroup::rewrite::RewriteError> {
        let cx = regroup::rewrite::Context { hint, addressed };
        self.engine
            .body(self.dir, regroup::kube::Wire::Json, cx, bytes)
    }

    /// One JSON object, of any kind.
    pub fn rewrite_bytes(
        &self,
        bytes: &[u8],
    ) -> Result<Option<Vec<u8>>, regroup::rewrite::RewriteError> {
        self.body(bytes, None, None)
    }

    /// A partial object of type `api_version`/`kind`.
    pub fn rewrite_bytes_as(
        &self,
        bytes: &[u8],
        api_version: &str,
        kind: &str,
    ) -> Result<Option<Vec<u8>>, regroup::rewrite::RewriteError> {
        self.body(bytes, Some((api_version, kind)), None)
    }

    /// An answer to a request that addressed `group`/`kind`.
    pub fn rewrite_bytes_addressed(
        &self,
        bytes: &[u8],
        group: &str,
        kind: &str,
    ) -> Result<Option<Vec<u8>>, regroup::rewrite::RewriteError> {
        self.body(bytes, None, Some((group, kind)))
    }

    /// A value, in place; whether anything changed.
    pub fn rewrite(&self, v: &mut Json) -> Result<bool, regroup::rewrite::RewriteError> {
        let cx = regroup::rewrite::Context::default();
        self.engine.value(self.dir, cx, v)
    }

    /// [`rewrite_bytes_addressed`](Self::rewrite_bytes_addressed) on a value.
    pub fn rewrite_addressed(
        &self,
        v: &mut Json,
        group: &str,
        kind: &str,
    ) -> Result<bool, regroup::rewrite::RewriteError> {
        let cx = regroup::rewrite::Context {
            hint: None,
            addressed: Some((group, kind)),
        };
        self.engine.value(self.dir, cx, v)
    }

    /// The next chunk of a JSON list streamed through the engine.
    pub fn list_feed(
        &self,
        list: &mut regroup::rewrite::list_stream::ListStream,
        chunk: &[u8],
    ) -> Result<Vec<u8>, regroup::rewrite::RewriteError> {
        self.engine.list_feed(self.dir, list, chunk)
    }

    /// The end of a JSON list streamed through the engine.
    pub fn list_finish(
        &self,
        list: regroup::rewrite::list_stream::ListStream,
    ) -> Result<Vec<u8>, regroup::rewrite::RewriteError> {
        self.engine.list_finish(self.dir, list)
    }

    /// The engine's JSON codec in this direction, for its checks (`hides`,
    /// `may_contain_name`) and `rewrite_in_chunks`.
    pub fn codec(&self) -> &regroup::rewrite::JsonRewriter<'_> {
        self.engine.json(self.dir)
    }
}

/// `proxy` served on `listener` as `regroup serve` serves the sidecar's
/// plain listener: through the same accept loop, with the default limits
/// and the loopback `Host` check.
pub async fn serve_plain(
    listener: tokio::net::TcpListener,
    proxy: std::sync::Arc<regroup::pipeline::proxy::Proxy>,
) {
    let access =
        regroup::listen::access::Access::loopback(regroup_config::schema::default_allowed_hosts());
    let serving = regroup::listen::lifecycle::Serving::default();
    regroup::listen::stacks::serve_sidecar(listener, None, proxy, serving, access).await
}

/// [`serve_plain`] over TLS (h2 and http/1.1 by ALPN), as the sidecar's TLS
/// listener.
pub async fn serve_tls(
    listener: tokio::net::TcpListener,
    tls: std::sync::Arc<rustls::ServerConfig>,
    proxy: std::sync::Arc<regroup::pipeline::proxy::Proxy>,
) {
    let access =
        regroup::listen::access::Access::loopback(regroup_config::schema::default_allowed_hosts());
    let serving = regroup::listen::lifecycle::Serving::default();
    regroup::listen::stacks::serve_sidecar(listener, Some(tls), proxy, serving, access).await
}
