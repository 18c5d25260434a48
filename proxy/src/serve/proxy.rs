//! The proxy: one engine, given the GroupMap and a direction. The sidecar
//! renames requests to the cluster's names and responses back to the app's;
//! the aggregated front (later) is the same with the direction flipped.

mod trust_patch;
mod trust_proto;

use std::convert::Infallible;
use std::io::Read;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use regroup_config::{Direction, Form, GroupMap};
use serde_json::Value as Json;

use super::body::{collect, full, pass, rewrite_frames, CollectError, Framing};
use super::front::auth::{self as front_auth, RequestHeaderConfig};
use super::status::{page_not_found, Failure};
use super::trust::FrontTrust;
use crate::rewrite::list_stream::ListStream;
use crate::rewrite::openapi::OpenApiRewriter;
use crate::rewrite::openapi_proto::OpenApiProtoRewriter;
use crate::rewrite::ProtoRewriter;
use crate::rewrite::{Catalog, JsonRewriter, RewriteError};
use crate::route::{self, RequestInfo};
use crate::upstream::{Body, Upstream};

/// The largest request or non-streamed response body regroup rewrites.
const BODY_LIMIT: usize = 256 << 20;

/// Hop-by-hop headers, never forwarded (RFC 9110 7.6.1).
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Shared state of every request.
pub struct Proxy {
    map: &'static GroupMap,
    /// Renames requests (towards the side that is not the caller).
    requests: JsonRewriter<'static>,
    /// Renames responses (back towards the caller).
    responses: JsonRewriter<'static>,
    /// Renames OpenAPI documents in responses.
    openapi: OpenApiRewriter<'static>,
    /// Renames OpenAPI v2 in protobuf (gnostic) in responses.
    openapi_proto: OpenApiProtoRewriter<'static>,
    /// Renames Kubernetes protobuf request bodies.
    proto_requests: ProtoRewriter<'static>,
    /// Renames Kubernetes protobuf responses and watch frames.
    proto_responses: ProtoRewriter<'static>,
    upstream: Upstream,
    pass_through_auth: bool,
    /// Sidecar: how the app comes to trust regroup's front, when there is one.
    trust: Option<FrontTrust>,
    /// Front: how callers are authenticated (changes when the cluster's
    /// request-header configuration does).
    front_auth: Option<Arc<RwLock<RequestHeaderConfig>>>,
    /// Appended to ETags of bodies regroup may rewrite, so a cache keyed by
    /// an ETag never mixes renamed and unrenamed bytes, or two rule sets.
    etag_tag: String,
}

impl Proxy {
    /// A sidecar proxy: the caller is the app.
    pub fn sidecar(
        map: &'static GroupMap,
        catalog: &'static Catalog,
        upstream: Upstream,
        pass_through_auth: bool,
    ) -> Proxy {
        Proxy::new(
            map,
            catalog,
            upstream,
            Direction::ToCluster,
            pass_through_auth,
            rules_tag(map),
        )
    }

    fn new(
        map: &'static GroupMap,
        catalog: &'static Catalog,
        upstream: Upstream,
        request_dir: Direction,
        pass_through_auth: bool,
        etag_tag: String,
    ) -> Proxy {
        Proxy {
            map,
            requests: JsonRewriter::new(map, catalog, request_dir),
            responses: JsonRewriter::new(map, catalog, request_dir.flip()),
            openapi: OpenApiRewriter::new(map, request_dir.flip(), &etag_tag),
            openapi_proto: OpenApiProtoRewriter::new(map, request_dir.flip()),
            proto_requests: ProtoRewriter::new(map, catalog, request_dir),
            proto_responses: ProtoRewriter::new(map, catalog, request_dir.flip()),
            upstream,
            pass_through_auth,
            trust: None,
            front_auth: None,
            etag_tag,
        }
    }

    /// GETs a JSON document from the upstream with regroup's own
    /// credentials (regroup's own reads, not the app's).
    pub async fn get_json(&self, path: &str) -> Result<Json, String> {
        let resp = self.get_upstream(path).await?;
        let status = resp.status();
        let body = collect(resp.into_body(), BODY_LIMIT)
            .await
            .map_err(|e| format!("GET {path}: {e}"))?;
        if !status.is_success() {
            return Err(format!("GET {path}: {status}"));
        }
        serde_json::from_slice(&body).map_err(|e| format!("GET {path}: {e}"))
    }

    /// A JSON GET to the upstream with regroup's own credentials, its body
    /// left to the caller (a watch streams).
    pub async fn get_upstream(&self, path: &str) -> Result<Response<Incoming>, String> {
        let uri = self.upstream.uri(path).map_err(|e| e.to_string())?;
        let mut req = Request::get(uri)
            .body(full(Bytes::new()))
            .expect("valid request");
        req.headers_mut()
            .insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        if let Some(v) = self.upstream.authorization(false) {
            req.headers_mut().insert(header::AUTHORIZATION, v);
        }
        self.upstream
            .send(req)
            .await
            .map_err(|e| format!("GET {path}: {e}"))
    }

    /// The same sidecar, also making the app trust regroup's front.
    pub fn with_trust(mut self, trust: FrontTrust) -> Proxy {
        self.trust = Some(trust);
        self
    }

    /// The aggregated front: callers are the cluster's aggregator (cluster
    /// names), `backend` is the app's own aggregated server (app names).
    /// The direction is the sidecar's, flipped.
    pub fn front(
        map: &'static GroupMap,
        catalog: &'static Catalog,
        backend: Upstream,
        auth: Arc<RwLock<RequestHeaderConfig>>,
    ) -> Proxy {
        let mut p = Proxy::new(
            map,
            catalog,
            backend,
            Direction::ToApp,
            true,
            rules_tag(map),
        );
        p.front_auth = Some(auth);
        p
    }

    /// Serves one front request: authenticates the caller as
    /// kube-apiserver's request-header authenticator does, then forwards
    /// with the identity in the configured headers.
    pub async fn handle_front(
        self: Arc<Self>,
        mut req: Request<Incoming>,
        peer: Arc<Option<Vec<rustls::pki_types::CertificateDer<'static>>>>,
    ) -> Result<Response<Body>, Infallible> {
        let Some(auth) = self.front_auth.clone() else {
            return Ok(Failure::unavailable("not a front listener").into_response());
        };
        let cfg = auth.read().unwrap_or_else(|p| p.into_inner()).clone();
        let result = front_auth::authenticate(peer.as_deref(), req.headers(), &cfg);
        front_auth::strip_identity_headers(req.headers_mut(), &cfg);
        match result {
            Ok(id) => set_identity(req.headers_mut(), &cfg, &id),
            Err(front_auth::Rejection::NoClientCertificate)
                if req.headers().contains_key(header::AUTHORIZATION) =>
            {
                // No front-proxy certificate, but a token: the app delegates
                // its TokenReview itself; no identity headers go with it.
            }
            Err(r) => {
                super::metrics::metrics().rejection(r.reason());
                super::metrics::metrics().request("front", http::StatusCode::UNAUTHORIZED);
                tracing::warn!(reason = r.reason(), path = %req.uri().path(), "front caller rejected");
                return Ok(r.failure().into_response());
            }
        }
        self.handle(req).await
    }

    fn request_dir(&self) -> Direction {
        self.requests.direction()
    }

    /// Serves one request. Every failure becomes a `Status`.
    pub async fn handle(
        self: Arc<Self>,
        req: Request<Incoming>,
    ) -> Result<Response<Body>, Infallible> {
        let started = Instant::now();
        let method = req.method().clone();
        let path = req.uri().path().to_owned();
        let info = RequestInfo::parse(&path, req.uri().query());
        let listener = if self.front_auth.is_some() {
            "front"
        } else {
            "sidecar"
        };
        let resp = match self.forward(req, &info).await {
            Ok(r) => r,
            Err(f) => {
                super::metrics::metrics().error(listener, f.reason);
                tracing::warn!(%method, %path, code = f.code.as_u16(), reason = f.reason, "{}", f.message);
                f.into_response()
            }
        };
        super::metrics::metrics().request(listener, resp.status());
        tracing::debug!(
            %method,
            %path,
            status = resp.status().as_u16(),
            ms = started.elapsed().as_secs_f64() * 1e3,
            "request"
        );
        Ok(resp)
    }

    async fn forward(
        self: &Arc<Self>,
        req: Request<Incoming>,
        info: &RequestInfo,
    ) -> Result<Response<Body>, Failure> {
        let dir = self.request_dir();
        let path = req.uri().path();
        let openapi_group = path
            .strip_prefix("/openapi/v3/apis/")
            .map(|r| r.split('/').next().unwrap_or(r));
        let named_group = if info.is_api {
            Some(info.group.as_str())
        } else {
            openapi_group
        };
        if named_group.is_some_and(|g| !g.is_empty() && self.map.is_shadowed(g, dir)) {
            // The caller named the other side's group: it doesn't exist here.
            return Ok(page_not_found());
        }
        let req_path = path.to_owned();
        let mut pq = route::rewrite_path(path, self.map, dir).unwrap_or_else(|| path.to_owned());
        let cluster_path = pq.clone();
        if let Some(q) = req.uri().query() {
            let q =
                route::rewrite_query_for(q, info, self.map, dir).unwrap_or_else(|| q.to_owned());
            pq.push('?');
            // OpenAPI v3 documents are addressed by the hash regroup tagged.
            pq.push_str(&q.replace(&self.etag_tag, ""));
        }
        let uri = self
            .upstream
            .uri(&pq)
            .map_err(|e| Failure::bad_request(format!("invalid request URI: {e}")))?;

        let (mut parts, body) = req.into_parts();
        let upgrade = is_upgrade(&parts.headers);
        let own_auth =
            !(self.pass_through_auth && parts.headers.contains_key(header::AUTHORIZATION));
        let mut headers = self.request_headers(&parts.headers, upgrade);
        if own_auth {
            if let Some(v) = self.upstream.authorization(false) {
                headers.insert(header::AUTHORIZATION, v);
            }
        }

        if upgrade {
            let on_upgrade = parts.extensions.remove::<hyper::upgrade::OnUpgrade>();
            return self
                .upgrade(parts.method, uri, headers, body, on_upgrade)
                .await;
        }

        if self.trust.is_some()
            && trust_patch::applies(info, &parts.method, &media_type(&headers), self.map, dir)
        {
            let target = trust_patch::Target {
                app_path: &req_path,
                cluster_path: &cluster_path,
                query: parts.uri.query(),
            };
            return self.trust_json_patch(info, target, headers, body).await;
        }

        let body = if info.is_api && carries_body(&parts.method) {
            self.request_body(info, &mut headers, body).await?
        } else {
            pass(body)
        };
        let retry_safe = own_auth
            && self.upstream.can_refresh()
            && matches!(parts.method, Method::GET | Method::HEAD);
        let mut up = Request::builder()
            .method(parts.method.clone())
            .uri(uri.clone())
            .body(body)
            .expect("parts are valid");
        *up.headers_mut() = headers.clone();
        let mut resp = self.send(up).await?;
        if resp.status() == StatusCode::UNAUTHORIZED && retry_safe {
            // A rotated token: read it again and retry once.
            if let Some(v) = self.upstream.authorization(true) {
                headers.insert(header::AUTHORIZATION, v);
            }
            let mut up = Request::builder()
                .method(parts.method.clone())
                .uri(uri)
                .body(full(Bytes::new()))
                .expect("parts are valid");
            *up.headers_mut() = headers;
            resp = self.send(up).await?;
        }
        self.response(info, &req_path, parts.method == Method::GET, resp)
            .await
    }

    async fn send(&self, up: Request<Body>) -> Result<Response<Incoming>, Failure> {
        self.upstream.send(up).await.map_err(|e| {
            let mut msg = e.to_string();
            let mut src = std::error::Error::source(&e);
            while let Some(s) = src {
                msg.push_str(": ");
                msg.push_str(&s.to_string());
                src = s.source();
            }
            Failure::unavailable(format!("the Kubernetes API server is unavailable: {msg}"))
        })
    }

    fn request_headers(&self, incoming: &HeaderMap, upgrade: bool) -> HeaderMap {
        let mut h = HeaderMap::with_capacity(incoming.len());
        for (name, value) in incoming {
            let n = name.as_str();
            let hop =
                HOP_BY_HOP.contains(&n) && !(upgrade && matches!(n, "connection" | "upgrade"));
            if hop
                || name == header::HOST
                || name == header::ACCEPT_ENCODING
                || (!self.pass_through_auth && name == header::AUTHORIZATION)
                // Front-proxy identity headers are only trusted from an
                // authenticated front-proxy caller (the front sets them
                // itself after authenticating), never from the app.
                || (self.front_auth.is_none() && n.starts_with("x-remote-"))
            {
                continue;
            }
            if name == header::IF_NONE_MATCH {
                if let Ok(v) = value.to_str() {
                    if let Ok(v) = HeaderValue::from_str(&v.replace(&self.etag_tag, "")) {
                        h.append(name.clone(), v);
                        continue;
                    }
                }
            }
            h.append(name.clone(), value.clone());
        }
        h
    }

    /// Renames a request body of a rewritable type; other bodies stream on.
    async fn request_body(
        &self,
        info: &RequestInfo,
        headers: &mut HeaderMap,
        body: Incoming,
    ) -> Result<Body, Failure> {
        let media = media_type(headers);
        let kind = request_kind(info);
        let hint_version = info.api_version().unwrap_or_default();
        let is_kube_proto = media.starts_with("application/vnd.kubernetes.protobuf");
        let rewritable = matches!(
            media.as_str(),
            "application/json"
                | "application/merge-patch+json"
                | "application/strategic-merge-patch+json"
                | "application/json-patch+json"
                | "application/apply-patch+yaml"
                | "application/yaml"
        ) || is_kube_proto;
        if !rewritable {
            return Ok(pass(body));
        }
        let bytes = read_request_body(body).await?;
        let (api_version, kind) = match (info.subresource.as_deref(), kind) {
            (Some("scale"), _) => ("autoscaling/v1".to_string(), "Scale"),
            (_, k) => (hint_version, k.unwrap_or("")),
        };
        let rw = &self.requests;
        let bad = |e: RewriteError| {
            Failure::bad_request(format!("the request body can't be renamed: {e}"))
        };
        let out: Option<Vec<u8>> = match media.as_str() {
            "application/json"
            | "application/merge-patch+json"
            | "application/strategic-merge-patch+json" => rw
                .rewrite_bytes_as(&bytes, &api_version, kind)
                .map_err(bad)?,
            "application/json-patch+json" => {
                json_patch(rw, &bytes, &api_version, kind).map_err(bad)?
            }
            "application/apply-patch+yaml" | "application/yaml" => {
                if !rw.may_contain(&bytes) {
                    None
                } else {
                    let text = std::str::from_utf8(&bytes).map_err(|e| {
                        Failure::bad_request(format!("the request body is not UTF-8: {e}"))
                    })?;
                    let doc: Json = serde_saphyr::from_str(text).map_err(|e| {
                        Failure::bad_request(format!("the request body is not valid YAML: {e}"))
                    })?;
                    let json = serde_json::to_vec(&doc).expect("values serialize");
                    let renamed = rw
                        .rewrite_bytes_as(&json, &api_version, kind)
                        .map_err(bad)?;
                    // JSON is YAML: apply-patch+yaml accepts it as it is.
                    if media == "application/yaml" {
                        headers.insert(
                            header::CONTENT_TYPE,
                            HeaderValue::from_static("application/json"),
                        );
                    }
                    Some(renamed.unwrap_or(json))
                }
            }
            _ => self.proto_requests.rewrite_bytes(&bytes).map_err(bad)?,
        };
        let mut bytes = out.map(Bytes::from).unwrap_or(bytes);
        if let Some(trust) = &self.trust {
            // JSON Patches of the app's own APIService never get here
            // (trust_patch applies them); others have no object to amend.
            if trust_relevant(info) && is_kube_proto {
                if let Some(b) = trust.proto_to_cluster(&bytes, self.map).map_err(|e| {
                    Failure::bad_request(format!("the request body can't be read: {e}"))
                })? {
                    bytes = Bytes::from(b);
                }
            } else if trust_relevant(info) && media != "application/json-patch+json" {
                // A merge patch names its APIService in the URL only.
                let patched = (media != "application/json" && media != "application/yaml")
                    .then_some(info.name.as_deref())
                    .flatten()
                    .map(|n| {
                        let cluster = self.map.map(Form::QualifiedName, n, Direction::ToCluster);
                        cluster.unwrap_or_else(|| n.to_owned())
                    });
                if let Ok(mut v) = serde_json::from_slice::<Json>(&bytes) {
                    if trust.to_cluster(&mut v, self.map, patched.as_deref()) {
                        bytes = Bytes::from(serde_json::to_vec(&v).expect("values serialize"));
                    }
                }
            }
        }
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
        Ok(full(bytes))
    }

    async fn response(
        self: &Arc<Self>,
        info: &RequestInfo,
        path: &str,
        is_read: bool,
        resp: Response<Incoming>,
    ) -> Result<Response<Body>, Failure> {
        let (mut parts, body) = resp.into_parts();
        let media = media_type(&parts.headers);
        strip_hop_by_hop(&mut parts.headers);
        self.response_headers(&mut parts.headers);
        if is_openapi(path) && parts.status.is_success() {
            return self.openapi_response(parts, body, &media, path).await;
        }
        if !info.is_api {
            return Ok(Response::from_parts(parts, pass(body)));
        }
        let gzip = parts
            .headers
            .get(header::CONTENT_ENCODING)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"));
        let addressed = request_kind(info).map(|k| (info.group.clone(), k));
        let is_kube_proto = media.starts_with("application/vnd.kubernetes.protobuf");
        let json = media == "application/json";
        let yaml = media == "application/yaml";
        if !(json || yaml || is_kube_proto) {
            return Ok(Response::from_parts(parts, pass(body)));
        }
        self.tag_etag(&mut parts.headers);

        let trusting = self.trust.is_some() && trust_relevant(info);
        if info.watch && parts.status.is_success() {
            if gzip {
                return Err(Failure::bad_gateway(
                    "gzip-encoded watch streams are not supported",
                ));
            }
            parts.headers.remove(header::CONTENT_LENGTH);
            let this = Arc::clone(self);
            let body = if json {
                let addressed = addressed.clone();
                rewrite_frames(
                    body,
                    Framing::Lines,
                    move |event| {
                        let out = match &addressed {
                            Some((g, k)) => this.responses.rewrite_bytes_addressed(event, g, k),
                            None => this.responses.rewrite_bytes(event),
                        }?;
                        Ok(this
                            .trust_to_app(trusting, out.as_deref().unwrap_or(event))
                            .or(out))
                    },
                    |e| {
                        let f = Failure::bad_gateway(format!(
                            "a watch event from the API server can't be renamed: {e}"
                        ));
                        Bytes::from(format!(
                            "{{\"type\":\"ERROR\",\"object\":{}}}\n",
                            f.status_json()
                        ))
                    },
                )
            } else {
                // Protobuf watch: 4-byte big-endian length, then a raw
                // WatchEvent. A frame that can't be renamed ends the stream
                // (the client re-lists) rather than reach the app unrenamed.
                rewrite_frames(
                    body,
                    Framing::LengthPrefixed,
                    move |frame| {
                        let event = &frame[4..];
                        let out = match &addressed {
                            Some((g, k)) => this
                                .proto_responses
                                .rewrite_watch_frame_addressed(event, g, k),
                            None => this.proto_responses.rewrite_watch_frame(event),
                        }?;
                        let out = match this.trust.as_ref().filter(|_| trusting) {
                            Some(t) => t
                                .proto_watch_event_to_app(out.as_deref().unwrap_or(event))?
                                .or(out),
                            None => out,
                        };
                        Ok(out.map(|e| {
                            let mut f = Vec::with_capacity(e.len() + 4);
                            f.extend_from_slice(&(e.len() as u32).to_be_bytes());
                            f.extend_from_slice(&e);
                            f
                        }))
                    },
                    |_| Bytes::new(),
                )
            };
            return Ok(Response::from_parts(parts, body));
        }

        if json && !gzip && info.name.is_none() && parts.status.is_success() && is_read && !trusting
        {
            // A list: streamed item by item, memory bounded by one item.
            parts.headers.remove(header::CONTENT_LENGTH);
            let this = Arc::clone(self);
            let stream = ListStream::new(addressed, BODY_LIMIT);
            return Ok(Response::from_parts(parts, stream_list(this, body, stream)));
        }

        let mut bytes = collect(body, BODY_LIMIT)
            .await
            .map_err(|e| Failure::bad_gateway(format!("reading the API server's response: {e}")))?;
        if gzip {
            let mut out = Vec::with_capacity(bytes.len() * 4);
            flate2::read::GzDecoder::new(&bytes[..])
                .read_to_end(&mut out)
                .map_err(|e| {
                    Failure::bad_gateway(format!("the API server's gzip body is corrupt: {e}"))
                })?;
            bytes = Bytes::from(out);
            parts.headers.remove(header::CONTENT_ENCODING);
        }
        let rw = &self.responses;
        let bad = |e: RewriteError| {
            Failure::bad_gateway(format!("the API server's response can't be renamed: {e}"))
        };
        let out = if json {
            match &addressed {
                Some((g, k)) => rw.rewrite_bytes_addressed(&bytes, g, k),
                None => rw.rewrite_bytes(&bytes),
            }
            .map_err(bad)?
        } else if yaml {
            if rw.may_contain(&bytes) {
                let text = std::str::from_utf8(&bytes)
                    .map_err(|e| bad(RewriteError::Malformed(e.to_string())))?;
                let doc: Json = serde_saphyr::from_str(text)
                    .map_err(|e| bad(RewriteError::Malformed(e.to_string())))?;
                let json = serde_json::to_vec(&doc).expect("values serialize");
                match rw.rewrite_bytes(&json).map_err(bad)? {
                    Some(renamed) => {
                        let v: Json = serde_json::from_slice(&renamed)
                            .map_err(|e| bad(RewriteError::Malformed(e.to_string())))?;
                        Some(
                            serde_saphyr::to_string(&v)
                                .map_err(|e| bad(RewriteError::Malformed(e.to_string())))?
                                .into_bytes(),
                        )
                    }
                    None => None,
                }
            } else {
                None
            }
        } else {
            match &addressed {
                Some((g, k)) => self.proto_responses.rewrite_bytes_addressed(&bytes, g, k),
                None => self.proto_responses.rewrite_bytes(&bytes),
            }
            .map_err(bad)?
        };
        let out = match self.trust.as_ref().filter(|_| trusting) {
            Some(_) if json => self
                .trust_to_app(trusting, out.as_deref().unwrap_or(&bytes))
                .or(out),
            // Errors are Status objects, whatever the body.
            Some(t) if is_kube_proto && parts.status.is_success() => t
                .proto_to_app(out.as_deref().unwrap_or(&bytes))
                .map_err(bad)?
                .or(out),
            _ => out,
        };
        let bytes = out.map(Bytes::from).unwrap_or(bytes);
        parts
            .headers
            .insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
        Ok(Response::from_parts(parts, full(bytes)))
    }

    /// The front-trust amendments of a renamed JSON document, if any apply.
    fn trust_to_app(&self, trusting: bool, doc: &[u8]) -> Option<Vec<u8>> {
        let trust = self.trust.as_ref().filter(|_| trusting)?;
        let mut v: Json = serde_json::from_slice(doc).ok()?;
        trust
            .to_app(&mut v)
            .then(|| serde_json::to_vec(&v).expect("values serialize"))
    }

    /// OpenAPI documents: JSON renamed whole (they are served as
    /// `text/plain` by some servers, so the body decides); the v2 protobuf
    /// form (gnostic) is not renamed yet and passes through, logged.
    async fn openapi_response(
        &self,
        mut parts: http::response::Parts,
        body: Incoming,
        media: &str,
        path: &str,
    ) -> Result<Response<Body>, Failure> {
        // 1.24 serves the gnostic protobuf as application/octet-stream.
        let v2 = path == "/openapi/v2";
        if media.contains("protobuf") && !v2 {
            tracing::warn!("OpenAPI v3 in protobuf passes through unrenamed (not supported yet)");
            return Ok(Response::from_parts(parts, pass(body)));
        }
        let bytes = collect(body, BODY_LIMIT)
            .await
            .map_err(|e| Failure::bad_gateway(format!("reading the API server's OpenAPI: {e}")))?;
        let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
        let out = match (first == Some(&b'{'), v2) {
            (true, _) => self.openapi.rewrite_bytes(&bytes),
            (false, true) => self.openapi_proto.rewrite_bytes(&bytes),
            (false, false) => return Ok(Response::from_parts(parts, full(bytes))),
        }
        .map_err(|e| {
            Failure::bad_gateway(format!("the API server's OpenAPI can't be renamed: {e}"))
        })?;
        self.tag_etag(&mut parts.headers);
        let bytes = out.map(Bytes::from).unwrap_or(bytes);
        parts
            .headers
            .insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
        Ok(Response::from_parts(parts, full(bytes)))
    }

    /// `Warning` texts and `Location` paths name groups too.
    fn response_headers(&self, h: &mut HeaderMap) {
        let dir = self.responses.direction();
        let warnings: Vec<HeaderValue> = h.get_all(header::WARNING).iter().cloned().collect();
        if !warnings.is_empty() {
            h.remove(header::WARNING);
            for w in warnings {
                let v = w
                    .to_str()
                    .ok()
                    .and_then(|s| self.map.map_text(s, dir))
                    .and_then(|s| HeaderValue::from_str(&s).ok())
                    .unwrap_or(w);
                h.append(header::WARNING, v);
            }
        }
        if let Some(loc) = h.get(header::LOCATION).and_then(|v| v.to_str().ok()) {
            if let Some(v) =
                route::rewrite_path(loc, self.map, dir).and_then(|s| HeaderValue::from_str(&s).ok())
            {
                h.insert(header::LOCATION, v);
            }
        }
    }

    fn tag_etag(&self, h: &mut HeaderMap) {
        if let Some(v) = h.get(header::ETAG).and_then(|v| v.to_str().ok()) {
            let tagged = match v.strip_suffix('"') {
                Some(head) => format!("{head}{}\"", self.etag_tag),
                None => format!("{v}{}", self.etag_tag),
            };
            if let Ok(v) = HeaderValue::from_str(&tagged) {
                h.insert(header::ETAG, v);
            }
        }
    }

    /// Protocol upgrades (exec, attach, port-forward over SPDY or
    /// WebSocket) carry no group: the bytes are spliced both ways.
    async fn upgrade(
        &self,
        method: Method,
        uri: http::Uri,
        headers: HeaderMap,
        body: Incoming,
        on_upgrade: Option<hyper::upgrade::OnUpgrade>,
    ) -> Result<Response<Body>, Failure> {
        let mut up = Request::builder()
            .method(method)
            .uri(uri)
            .body(pass(body))
            .expect("parts are valid");
        *up.headers_mut() = headers;
        let mut resp = self.upstream.send_upgrade(up).await.map_err(|e| {
            Failure::unavailable(format!("the Kubernetes API server is unavailable: {e}"))
        })?;
        if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
            let (parts, body) = resp.into_parts();
            return Ok(Response::from_parts(parts, pass(body)));
        }
        let upstream_io = hyper::upgrade::on(&mut resp);
        let Some(client_io) = on_upgrade else {
            return Err(Failure::bad_request("this connection can't be upgraded"));
        };
        tokio::spawn(async move {
            match tokio::try_join!(client_io, upstream_io) {
                Ok((c, u)) => {
                    let mut c = hyper_util::rt::TokioIo::new(c);
                    let mut u = hyper_util::rt::TokioIo::new(u);
                    if let Err(e) = tokio::io::copy_bidirectional(&mut c, &mut u).await {
                        tracing::debug!("upgraded stream ended: {e}");
                    }
                }
                Err(e) => tracing::warn!("protocol upgrade failed: {e}"),
            }
        });
        let (parts, _) = resp.into_parts();
        Ok(Response::from_parts(parts, full(Bytes::new())))
    }
}

/// A list body renamed as it streams. A failure mid-stream aborts the body
/// (the client sees a broken response, never unrenamed bytes).
fn stream_list(proxy: Arc<Proxy>, body: Incoming, list: ListStream) -> Body {
    use http_body_util::BodyExt;
    struct St {
        proxy: Arc<Proxy>,
        body: Incoming,
        list: Option<ListStream>,
    }
    let st = St {
        proxy,
        body,
        list: Some(list),
    };
    let s = futures_util::stream::unfold(st, |mut st| async move {
        loop {
            let list = st.list.as_mut()?;
            match st.body.frame().await {
                Some(Ok(f)) => {
                    let Ok(data) = f.into_data() else { continue };
                    match list.feed(&st.proxy.responses, &data) {
                        Ok(out) if out.is_empty() => continue,
                        Ok(out) => return Some((Ok(http_body::Frame::data(Bytes::from(out))), st)),
                        Err(e) => {
                            tracing::error!("the API server's list can't be renamed, aborting the response: {e}");
                            st.list = None;
                            return Some((Err(Box::new(e) as crate::upstream::BoxError), st));
                        }
                    }
                }
                Some(Err(e)) => {
                    st.list = None;
                    return Some((Err(Box::new(e) as crate::upstream::BoxError), st));
                }
                None => {
                    let list = st.list.take()?;
                    return match list.finish(&st.proxy.responses) {
                        Ok(out) => Some((Ok(http_body::Frame::data(Bytes::from(out))), st)),
                        Err(e) => {
                            tracing::error!("the API server's list can't be renamed, aborting the response: {e}");
                            Some((Err(Box::new(e) as crate::upstream::BoxError), st))
                        }
                    };
                }
            }
        }
    });
    http_body_util::StreamBody::new(s).boxed()
}

/// A tag derived from the rules (FNV-1a), appended to ETags and OpenAPI
/// hashes.
fn rules_tag(map: &GroupMap) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for r in map.rules() {
        let (from, to) = r.rule.ends(Direction::ToCluster);
        for b in from.bytes().chain([0]).chain(to.bytes()).chain([0]) {
            h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
        }
    }
    format!("-rg{h:08x}")
}

/// The forwarded identity, in the first configured header of each kind.
fn set_identity(h: &mut HeaderMap, cfg: &RequestHeaderConfig, id: &front_auth::Identity) {
    let put = |h: &mut HeaderMap, name: &str, value: &str| {
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            h.append(n, v);
        }
    };
    if let Some(n) = cfg.username_headers.first() {
        put(h, n, &id.user);
    }
    if let (Some(n), Some(uid)) = (cfg.uid_headers.first(), &id.uid) {
        put(h, n, uid);
    }
    if let Some(n) = cfg.group_headers.first() {
        for g in &id.groups {
            put(h, n, g);
        }
    }
    if let Some(prefix) = cfg.extra_headers_prefixes.first() {
        for (k, vs) in &id.extra {
            let key: String =
                percent_encoding::utf8_percent_encode(k, percent_encoding::NON_ALPHANUMERIC)
                    .to_string();
            for v in vs {
                put(h, &format!("{prefix}{key}"), v);
            }
        }
    }
}

/// A whole request body, within [`BODY_LIMIT`].
async fn read_request_body(body: Incoming) -> Result<Bytes, Failure> {
    collect(body, BODY_LIMIT).await.map_err(|e| match e {
        CollectError::TooLarge(n) => {
            Failure::too_large(format!("request body larger than {n} bytes"))
        }
        CollectError::Io(m) => Failure::bad_request(m),
    })
}

/// The kind addressed by a request, where its objects carry groups.
fn request_kind(info: &RequestInfo) -> Option<&'static str> {
    Catalog::kind_for_resource(&info.group, info.resource.as_deref()?)
}

/// Requests whose objects the front-trust hooks look at: the
/// authentication ConfigMap and APIServices.
fn trust_relevant(info: &RequestInfo) -> bool {
    match (info.group.as_str(), info.resource.as_deref()) {
        ("", Some("configmaps")) => info.namespace.as_deref() == Some("kube-system"),
        ("apiregistration.k8s.io", Some("apiservices")) => true,
        _ => false,
    }
}

fn is_openapi(path: &str) -> bool {
    path == "/openapi/v2" || path == "/openapi/v3" || path.starts_with("/openapi/v3/")
}

fn carries_body(m: &Method) -> bool {
    matches!(
        *m,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

fn is_upgrade(h: &HeaderMap) -> bool {
    h.contains_key(header::UPGRADE)
        && h.get_all(header::CONNECTION).iter().any(|v| {
            v.to_str().is_ok_and(|s| {
                s.split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
            })
        })
}

fn strip_hop_by_hop(h: &mut HeaderMap) {
    for name in HOP_BY_HOP {
        h.remove(HeaderName::from_static(name));
    }
}

/// The media type of `Content-Type`, lower-cased, without parameters.
fn media_type(h: &HeaderMap) -> String {
    h.get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default()
}

/// Renames each operation of a JSON Patch: the `value` is placed at its
/// `path` in an otherwise empty object of the addressed kind, renamed there
/// by the catalog, and taken back out.
fn json_patch(
    rw: &JsonRewriter<'_>,
    bytes: &[u8],
    api_version: &str,
    kind: &str,
) -> Result<Option<Vec<u8>>, RewriteError> {
    if !rw.may_contain(bytes) {
        return Ok(None);
    }
    let mut ops: Vec<Json> =
        serde_json::from_slice(bytes).map_err(|e| RewriteError::Malformed(e.to_string()))?;
    let mut changed = false;
    for op in &mut ops {
        let Some(path) = op.get("path").and_then(Json::as_str).map(str::to_owned) else {
            continue;
        };
        let Some(value) = op.get_mut("value") else {
            continue;
        };
        let tokens: Vec<String> = path
            .split('/')
            .skip(1)
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect();
        let mut wrapped = value.clone();
        for t in tokens.iter().rev() {
            wrapped = if t == "-" || t.parse::<usize>().is_ok() {
                Json::Array(vec![wrapped])
            } else {
                let mut m = serde_json::Map::new();
                m.insert(t.clone(), wrapped);
                Json::Object(m)
            };
        }
        if !wrapped.is_object() {
            continue;
        }
        if rw.rewrite_as(&mut wrapped, api_version, kind)? {
            let mut v = &wrapped;
            for t in &tokens {
                v = if t == "-" || t.parse::<usize>().is_ok() {
                    &v[0]
                } else {
                    &v[t.as_str()]
                };
            }
            if v != value {
                *value = v.clone();
                changed = true;
            }
        }
    }
    Ok(changed.then(|| serde_json::to_vec(&ops).expect("values serialize")))
}
