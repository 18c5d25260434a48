//! Publish mode's hook, made once for the process: a request of the
//! remote cluster's aggregator is, before forwarding (`Amend::route`),
//! authorized by the remote cluster, its namespace mapped, its name checked
//! against the other sources and its URL pointed at the central one; its
//! body put in the central namespace on the way (`amend.rs`, kept in the
//! request's context); what comes back put in the remote namespaces, and
//! last (`Amend::answered`) a read checked against its source, a refused
//! create explained, discovery and OpenAPI cut down to the published
//! groups.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode, Uri};
use hyper::body::Incoming;
use regroup_config::{Direction, GroupMap};
use serde_json::Value as Json;

use super::across;
use super::amend::Published;
use super::authorize::{self, Attributes};
use super::credentials::{Credentials, SecretRef};
use super::filter;
use super::namespaces::Namespaces;
use super::source::{self, Holder, Source};
use crate::body::{collect, full, Body};
use crate::front::auth::Identity;
use crate::hooks::{edit_json, Amend, Ctx, Route};
use crate::kube::{MediaType, RequestInfo};
use crate::pipeline;
use crate::pipeline::exchange::BodyLimits;
use crate::rewrite::framing::Framing;
use crate::rewrite::{Engine, RewriteError};
use crate::status::{page_not_found, Failure};
use crate::upstream::own_client::OwnClient;
use crate::upstream::Upstream;

/// The largest discovery or OpenAPI document cut down.
const DOCUMENT_LIMIT: usize = 64 << 20;

/// What publish mode serves from.
pub struct Publisher {
    central: Arc<Upstream>,
    central_reads: OwnClient,
    reviews: authorize::Reviewer,
    namespaces: Arc<Namespaces>,
    cluster: String,
    /// The published groups, in the central cluster's names.
    groups: Vec<String>,
    limits: BodyLimits,
    /// Each remote namespace's central credential.
    credentials: Arc<Credentials>,
    /// Read-only federation: reads only, of every source's objects.
    read_only: bool,
    /// Central `group/version` → resource → namespaced, from discovery.
    scopes: Mutex<HashMap<String, HashMap<String, bool>>>,
}

/// What the publisher keeps of one request in its context, for the way
/// back: its edits, and what is checked of the answer last.
#[derive(Clone)]
struct Asked {
    /// The request in the remote cluster's names, as the caller sent it.
    remote: Arc<RequestInfo>,
    /// The engine it was routed with (the published groups' names).
    engine: Arc<Engine>,
    /// The body and answer edits.
    published: Published,
    /// The central client of the request's credential (regroup's reads
    /// for it).
    reads: OwnClient,
    /// A read checked on its answer: shown only when this source holds it.
    read_check: Option<Source>,
    /// A create, whose conflict is explained (the central group, version
    /// and resource).
    create: Option<(String, String, String)>,
    /// A discovery or OpenAPI document cut down to the published groups.
    document: Option<Document>,
}

/// What publish mode is configured with.
pub(crate) struct PublishSettings {
    pub central: Arc<Upstream>,
    pub remote: OwnClient,
    pub namespaces: Arc<Namespaces>,
    pub cluster: String,
    pub groups: Vec<String>,
    pub limits: BodyLimits,
    pub credentials: Arc<Credentials>,
    pub read_only: bool,
}

impl Publisher {
    pub(crate) fn new(s: PublishSettings) -> Publisher {
        Publisher {
            central_reads: OwnClient::new(s.central.clone()),
            central: s.central,
            namespaces: s.namespaces,
            reviews: authorize::Reviewer::new(s.remote),
            cluster: s.cluster,
            groups: s.groups,
            limits: s.limits,
            credentials: s.credentials,
            read_only: s.read_only,
            scopes: Mutex::new(HashMap::new()),
        }
    }

    /// The central cluster's client.
    pub fn central(&self) -> &Arc<Upstream> {
        &self.central
    }

    /// regroup's own client of the central cluster.
    pub fn central_reads(&self) -> &OwnClient {
        &self.central_reads
    }

    /// The body limits of its stack.
    pub fn limits(&self) -> &BodyLimits {
        &self.limits
    }

    /// This cluster's id.
    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    /// The published groups (central names).
    pub fn groups(&self) -> &[String] {
        &self.groups
    }

    /// Whether a group (remote name) is published.
    fn published(&self, engine: &Engine, remote: &str) -> bool {
        let central = engine
            .map()
            .map_group(remote, Direction::ToApp)
            .unwrap_or_else(|| remote.to_owned());
        self.groups.contains(&central)
    }

    /// Routes a request for a published resource.
    async fn route_resource(
        &self,
        ctx: &mut Ctx,
        engine: &Arc<Engine>,
        req: &mut Request<Incoming>,
        who: &Identity,
    ) -> Result<Route, Failure> {
        let info = ctx.info.clone();
        if !self.published(engine, &info.group) {
            return Ok(Route::Answered(page_not_found()));
        }
        let (version, resource) = (
            info.version.as_deref().unwrap_or_default(),
            info.resource.as_deref().unwrap_or_default(),
        );
        let verb = info.verb(req.method().as_str());
        let reads_only = matches!(verb, "get" | "list" | "watch");
        if self.read_only && !reads_only {
            return Err(Failure::forbidden(format!(
                "{resource}.{} are read-only here (publish.readOnly): {verb} them in the central cluster",
                info.group
            )));
        }
        self.reviews
            .review(
                who,
                &Attributes::Resource {
                    verb,
                    group: &info.group,
                    version,
                    resource,
                    subresource: info.subresource.as_deref(),
                    namespace: info.namespace.as_deref(),
                    name: info.name.as_deref(),
                },
            )
            .await?;
        json_answers(req.headers_mut())?;
        let central_group = engine
            .map()
            .map_group(&info.group, Direction::ToApp)
            .unwrap_or_else(|| info.group.to_string());
        let namespaced = self.namespaced(&central_group, version, resource).await?;
        let mut published = Published {
            cluster: self.cluster.clone(),
            namespaces: None,
            uid: None,
            delete: req.method() == Method::DELETE,
            created: None,
            shown_in: None,
        };
        let mut selector = None;
        let mut read_check = None;
        let mut reads = self.central_reads.clone();
        let mut path = req.uri().path().to_owned();
        match (namespaced, info.namespace.as_deref()) {
            // The central cluster's own cluster-scoped objects: read-only.
            (false, _) => {
                if !reads_only {
                    return Err(Failure::forbidden(format!(
                        "{resource}.{} are the central cluster's, read-only here",
                        info.group
                    )));
                }
                ctx.upstream = Some(
                    self.credentials
                        .client(self.default_secret().as_ref())
                        .await?,
                );
            }
            (true, None) => {
                if !matches!(verb, "list" | "watch") {
                    return Err(Failure::bad_request(format!(
                        "{verb} of {resource} needs a namespace"
                    )));
                }
                if !self.read_only {
                    selector = Some(source::cluster_selector(&self.cluster));
                }
                let mapped = self.namespaces.every_namespace().await?;
                // Each central namespace once, read with the credential of
                // a remote namespace that goes there: the first that can be
                // used (one namespace's missing Secret, or a credential the
                // central cluster refuses, is that namespace's trouble).
                let targets = by_target(mapped.iter().map(|m| {
                    let secret = self
                        .credentials
                        .secret_of(&m.remote, m.credentials.as_deref());
                    (m.target.clone(), secret)
                }));
                if self.read_only {
                    let shown = mapped.iter().map(|m| (m.target.clone(), m.remote.clone()));
                    published.shown_in = Some(shown.collect());
                }
                if let [(only, secrets)] = targets.as_slice() {
                    path = with_namespace(&path, resource, only);
                    ctx.upstream = Some(self.usable(secrets).await?.remove(0));
                } else if targets.len() > 1 {
                    let query = with_selector(
                        req.uri().query(),
                        selector.as_deref().unwrap_or_default(),
                        None,
                    );
                    // In the central cluster's names, as the pipeline sends a query.
                    let query =
                        crate::url_rename::rewrite_query(&query, engine.map(), Direction::ToApp)
                            .unwrap_or(query);
                    let mut paths = Vec::new();
                    for (t, secrets) in &targets {
                        let clients = self.usable(secrets).await?;
                        let path = format!(
                            "{}/namespaces/{t}/{resource}?{}",
                            group_version_path(&central_group, version),
                            without_paging(&query)
                        );
                        paths.push((clients.into_iter().map(OwnClient::new).collect(), path));
                    }
                    let published = Arc::new(published);
                    // The caller's own (a Table for kubectl), made JSON above.
                    let accept = req
                        .headers()
                        .get(header::ACCEPT)
                        .cloned()
                        .unwrap_or(HeaderValue::from_static("application/json"));
                    let engine = engine.clone();
                    let answer = if verb == "watch" {
                        across::watch(engine, published, &paths, accept).await
                    } else {
                        across::list(&engine, &published, &paths, accept).await
                    };
                    return answer.map(Route::Answered);
                }
            }
            (true, Some(remote_ns)) => {
                let target = self.namespaces.target(remote_ns).await?;
                // The request acts centrally with its namespace's credential.
                let named = self.namespaces.credentials(remote_ns).await?;
                let secret = self.credentials.secret_of(remote_ns, named.as_deref());
                let client = self.credentials.client(secret.as_ref()).await?;
                ctx.upstream = Some(client.clone());
                reads = OwnClient::new(client);
                let source = Source {
                    namespace: remote_ns.to_owned(),
                    cluster: self.cluster.clone(),
                };
                // A read whose answer carries the object's labels (not a
                // Table without its objects) is checked on the answer.
                let checked_on_answer = verb == "get"
                    && !req
                        .uri()
                        .query()
                        .is_some_and(|q| q.contains("includeObject=None"));
                if self.read_only {
                    // Every source's objects are read here, none written.
                    published.shown_in = Some(vec![(target.clone(), remote_ns.to_owned())]);
                } else if let Some(name) = info.name.as_deref().filter(|_| !checked_on_answer) {
                    let central_path = format!(
                        "{}/namespaces/{target}/{resource}/{name}",
                        group_version_path(&central_group, version)
                    );
                    let held = self.held_by(&reads, &central_path, &source, &info, verb);
                    published.uid = held.await?;
                    if published.uid.is_none() && is_apply(req) {
                        // Creating by apply: `force` has nothing to force
                        // on a create, and without it an object another
                        // source made in the meantime conflicts on the
                        // source labels instead of being taken over
                        // (docs/publish.md, "The apply window").
                        unforce(req)?;
                    }
                } else if checked_on_answer {
                    read_check = Some(source.clone());
                } else if verb != "create" {
                    selector = Some(source.selector());
                }
                path = replace_namespace(&path, remote_ns, &target);
                published.namespaces = Some((remote_ns.to_owned(), target));
            }
        }
        let query = match (req.uri().query(), &selector) {
            (q, Some(ours)) => Some(with_selector(q, ours, published.namespaces.as_ref())),
            (Some(q), None) => Some(map_field_namespace(q, published.namespaces.as_ref())),
            (None, None) => None,
        };
        *req.uri_mut() = rebuilt(&path, query.as_deref())?;
        let create = (req.method() == Method::POST)
            .then(|| (central_group, version.to_owned(), resource.to_owned()));
        self.routed(ctx, engine, req, published, reads, read_check, create, None);
        Ok(Route::Forward)
    }

    /// The central clients of the credentials `secrets` (in order) that
    /// can be used, at least one: a Secret missing or unusable is passed
    /// over, and when none can be used the first one's refusal is the
    /// answer.
    async fn usable(&self, secrets: &[Option<SecretRef>]) -> Result<Vec<Arc<Upstream>>, Failure> {
        let mut out = Vec::new();
        let mut refused = None;
        for secret in secrets {
            match self.credentials.client(secret.as_ref()).await {
                Ok(client) => out.push(client),
                Err(f) => {
                    tracing::debug!(
                        "a list across namespaces passes over a credential: {}",
                        f.message
                    );
                    refused.get_or_insert(f);
                }
            }
        }
        match refused {
            Some(f) if out.is_empty() => Err(f),
            _ => Ok(out),
        }
    }

    /// The default credentials Secret (regroup's own credential when none).
    fn default_secret(&self) -> Option<SecretRef> {
        self.credentials.secret_of("", None)
    }

    /// Keeps what was learned of a routed request in its context, and
    /// what its URL now addresses (the central names).
    #[allow(clippy::too_many_arguments)]
    fn routed(
        &self,
        ctx: &mut Ctx,
        engine: &Arc<Engine>,
        req: &Request<Incoming>,
        published: Published,
        reads: OwnClient,
        read_check: Option<Source>,
        create: Option<(String, String, String)>,
        document: Option<Document>,
    ) {
        let remote = std::mem::replace(
            &mut ctx.info,
            Arc::new(RequestInfo::parse(req.uri().path(), req.uri().query())),
        );
        ctx.slots.insert(Asked {
            remote,
            engine: engine.clone(),
            published,
            reads,
            read_check,
            create,
            document,
        });
    }

    /// Reads the central object a request names: its uid when this source
    /// holds it, `None` when there is none; a refusal when another does.
    async fn held_by(
        &self,
        reads: &OwnClient,
        central_path: &str,
        source: &Source,
        info: &RequestInfo,
        verb: &str,
    ) -> Result<Option<String>, Failure> {
        let (status, body) = reads
            .read(central_path)
            .await
            .map_err(|e| Failure::unavailable(format!("reading the central object: {e}")))?;
        if status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            let message = format!(
                "the central cluster refused regroup's read of this object ({status}): the namespace's central credential needs get in the target namespace"
            );
            return Err(match status {
                StatusCode::FORBIDDEN => Failure::forbidden(message),
                _ => Failure::unavailable(message),
            });
        }
        let obj: Json = serde_json::from_slice(&body)
            .map_err(|_| Failure::bad_gateway("the central object is not JSON"))?;
        let what = format!(
            "{}.{} {:?}",
            info.resource.as_deref().unwrap_or_default(),
            info.group,
            info.name.as_deref().unwrap_or_default()
        );
        match source.holder(&obj) {
            Holder::Us => Ok(obj["metadata"]["uid"].as_str().map(str::to_owned)),
            Holder::Other if matches!(verb, "get" | "list" | "watch") => Err(Failure::not_found(format!(
                "{what} not found (the name is held in the central cluster by another namespace or cluster)"
            ))),
            Holder::Other => {
                tracing::info!(object = %what, "refused: the name is held centrally by another source");
                Err(Failure::conflict(format!(
                    "{what}: the name is held in the central cluster by another namespace or cluster; regroup never overwrites it"
                )))
            }
        }
    }

    /// A create that met an existing name: said plainly when another
    /// source holds it.
    async fn explain_conflict(
        &self,
        resp: Response<Body>,
        published: &Published,
        reads: &OwnClient,
        info: &RequestInfo,
        (central_group, version, resource): (&str, &str, &str),
    ) -> Result<Response<Body>, Failure> {
        let (Some(name), Some((remote_ns, target))) = (&published.created, &published.namespaces)
        else {
            return Ok(resp);
        };
        let path = format!(
            "{}/namespaces/{target}/{resource}/{name}",
            group_version_path(central_group, version)
        );
        let source = Source {
            namespace: remote_ns.clone(),
            cluster: self.cluster.clone(),
        };
        let Ok(obj) = reads.get_json(&path).await else {
            return Ok(resp);
        };
        if source.holder(&obj) == Holder::Us {
            return Ok(resp);
        }
        tracing::info!(resource, name = %name, "create refused: the name is held centrally by another source");
        Err(Failure::already_exists(format!(
            "{resource}.{} {name:?} already exists in the central cluster, held by another namespace or cluster: choose another name, or another central namespace (annotation regroup.dev/publish-target-namespace on namespace {remote_ns:?})",
            info.group
        )))
    }

    /// Whether a central resource is namespaced (its group-version's
    /// discovery, read once).
    async fn namespaced(
        &self,
        group: &str,
        version: &str,
        resource: &str,
    ) -> Result<bool, Failure> {
        let gv = format!("{group}/{version}");
        let known = |scopes: &HashMap<String, HashMap<String, bool>>, gv: &str| {
            scopes.get(gv).and_then(|r| r.get(resource)).copied()
        };
        if let Some(n) = known(&self.scopes.lock().unwrap_or_else(|p| p.into_inner()), &gv) {
            return Ok(n);
        }
        let doc = self
            .central_reads
            .get_json(&group_version_path(group, version))
            .await
            .map_err(|e| {
                Failure::unavailable(format!("reading the central cluster's discovery: {e}"))
            })?;
        let resources: HashMap<String, bool> = doc["resources"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(|r| {
                let name = r["name"].as_str()?;
                Some((
                    name.split('/').next()?.to_owned(),
                    r["namespaced"].as_bool()?,
                ))
            })
            .collect();
        let mut scopes = self.scopes.lock().unwrap_or_else(|p| p.into_inner());
        scopes.insert(gv.clone(), resources);
        known(&scopes, &gv).ok_or_else(|| {
            Failure::not_found(format!(
                "the server could not find the requested resource ({resource}.{group})"
            ))
        })
    }

    /// Discovery, OpenAPI and the rest: authorized as a path, JSON only,
    /// cut down to the published groups on the way back.
    async fn route_non_resource(
        &self,
        ctx: &mut Ctx,
        engine: &Arc<Engine>,
        req: &mut Request<Incoming>,
        who: &Identity,
    ) -> Result<Route, Failure> {
        let path = req.uri().path().to_owned();
        self.reviews
            .review(
                who,
                &Attributes::NonResource {
                    verb: ctx.info.verb(req.method().as_str()),
                    path: &path,
                },
            )
            .await?;
        let doc = Document::of(&path);
        if let Some(g) = doc.group(&path) {
            if !self.published(engine, g) {
                return Ok(Route::Answered(page_not_found()));
            }
        }
        if doc.is_filtered() {
            json_answers(req.headers_mut())?;
            req.headers_mut().remove(header::ACCEPT_ENCODING);
        }
        let published = Published {
            cluster: self.cluster.clone(),
            namespaces: None,
            uid: None,
            delete: false,
            created: None,
            shown_in: None,
        };
        let client = self
            .credentials
            .client(self.default_secret().as_ref())
            .await?;
        ctx.upstream = Some(client.clone());
        let document = doc.is_filtered().then_some(doc);
        let reads = OwnClient::new(client);
        self.routed(ctx, engine, req, published, reads, None, None, document);
        Ok(Route::Forward)
    }

    /// A discovery or OpenAPI document cut down to the published groups.
    async fn cut(
        &self,
        doc: Document,
        engine: &Engine,
        resp: Response<Body>,
    ) -> Result<Response<Body>, Failure> {
        if !resp.status().is_success() {
            return Ok(resp);
        }
        let keep = |g: &str| self.published(engine, g);
        let (mut parts, body) = resp.into_parts();
        let bytes = whole(body).await.map_err(|e| {
            Failure::bad_gateway(format!("reading the central cluster's {}: {e}", doc.noun()))
        })?;
        let cut = match doc {
            Document::Root => filter::discovery_root(&bytes, &keep),
            Document::OpenApiV2 => filter::openapi_v2(&bytes, &keep),
            Document::OpenApiV3Index => filter::openapi_v3_index(&bytes, &keep),
            _ => unreachable!("only filtered documents get here"),
        }
        .map_err(|e| Failure::bad_gateway(format!("the central cluster's {}: {e}", doc.noun())))?;
        parts.headers.remove(header::ETAG);
        parts.headers.remove(header::CONTENT_ENCODING);
        parts
            .headers
            .insert(header::CONTENT_LENGTH, HeaderValue::from(cut.len()));
        Ok(Response::from_parts(parts, full(cut)))
    }

    /// The answer, last: what the request asked to be checked of it.
    async fn answer(&self, asked: &Asked, resp: Response<Body>) -> Result<Response<Body>, Failure> {
        if let Some(doc) = asked.document {
            return self.cut(doc, &asked.engine, resp).await;
        }
        if let Some(source) = asked
            .read_check
            .as_ref()
            .filter(|_| resp.status().is_success())
        {
            return held_read(resp, source, &asked.remote).await;
        }
        match &asked.create {
            Some((group, version, resource)) if resp.status() == StatusCode::CONFLICT => {
                let what = (group.as_str(), version.as_str(), resource.as_str());
                self.explain_conflict(resp, &asked.published, &asked.reads, &asked.remote, what)
                    .await
            }
            _ => Ok(resp),
        }
    }
}

impl Amend for Publisher {
    fn noun(&self) -> &'static str {
        "published object"
    }

    fn routes(&self) -> bool {
        true
    }

    /// Authorized by the remote cluster, its namespace mapped, its name
    /// checked, its URL the central one; or answered here.
    fn route<'a>(
        &'a self,
        ctx: &'a mut Ctx,
        engine: &'a Arc<Engine>,
        req: &'a mut Request<Incoming>,
    ) -> BoxFuture<'a, Result<Route, Failure>> {
        Box::pin(async move {
            if pipeline::headers::is_upgrade(req.headers()) {
                // A spliced stream could not be edited (namespaces, labels).
                return Err(Failure::bad_request(
                    "protocol upgrades (exec, attach, port-forward) are not published",
                ));
            }
            // The front identity admitted the caller before.
            let who = ctx
                .who
                .clone()
                .ok_or_else(|| Failure::unauthorized("no authenticated caller"))?;
            if ctx.info.is_api && ctx.info.resource.is_some() {
                self.route_resource(ctx, engine, req, &who).await
            } else {
                self.route_non_resource(ctx, engine, req, &who).await
            }
        })
    }

    fn looks_at(&self, ctx: &Ctx) -> bool {
        ctx.slots.get::<Asked>().is_some()
    }

    fn request_body(
        &self,
        ctx: &mut Ctx,
        _map: &GroupMap,
        media: MediaType,
        bytes: Bytes,
    ) -> Result<Bytes, Failure> {
        match ctx.slots.get_mut::<Asked>() {
            Some(asked) => asked.published.body_for_central(media, bytes),
            None => Ok(bytes),
        }
    }

    fn response_body(
        &self,
        ctx: &Ctx,
        media: MediaType,
        _success: bool,
        body: &[u8],
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        let Some(asked) = ctx.slots.get::<Asked>() else {
            return Ok(None);
        };
        // Only JSON is asked of the central cluster.
        Ok(match media {
            MediaType::Json => edit_json(body, |doc| asked.published.to_remote(doc)),
            _ => None,
        })
    }

    fn watch_event(
        &self,
        ctx: &Ctx,
        framing: Framing,
        event: &[u8],
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        let Some(asked) = ctx.slots.get::<Asked>() else {
            return Ok(None);
        };
        Ok(match framing {
            Framing::Lines => edit_json(event, |doc| asked.published.to_remote(doc)),
            Framing::LengthPrefixed => None,
        })
    }

    fn answers(&self, ctx: &Ctx) -> bool {
        ctx.slots
            .get::<Asked>()
            .is_some_and(|a| a.document.is_some() || a.read_check.is_some() || a.create.is_some())
    }

    fn answered<'a>(
        &'a self,
        ctx: &'a Ctx,
        resp: Response<Body>,
    ) -> BoxFuture<'a, Result<Response<Body>, Failure>> {
        Box::pin(async move {
            match ctx.slots.get::<Asked>() {
                Some(asked) => self.answer(asked, resp).await,
                None => Ok(resp),
            }
        })
    }
}

/// A read of one object, answered only when this source holds it: the
/// object (or a Table of it, kubectl's) carries the source labels, else it
/// is another's and not there for this caller (`404`, as a read after
/// [`Publisher::held_by`] answers).
async fn held_read(
    resp: Response<Body>,
    source: &Source,
    info: &RequestInfo,
) -> Result<Response<Body>, Failure> {
    let (parts, body) = resp.into_parts();
    let bytes = whole(body)
        .await
        .map_err(|e| Failure::bad_gateway(format!("reading the central object: {e}")))?;
    let doc: Json = serde_json::from_slice(&bytes)
        .map_err(|_| Failure::bad_gateway("the central object is not JSON"))?;
    let objects: Vec<&Json> = match doc["rows"].as_array() {
        Some(rows) if doc["kind"] == "Table" => rows.iter().map(|r| &r["object"]).collect(),
        _ => vec![&doc],
    };
    if objects.iter().all(|o| source.holder(o) == Holder::Us) {
        return Ok(Response::from_parts(parts, full(bytes)));
    }
    Err(Failure::not_found(format!(
        "{}.{} {:?} not found (the name is held in the central cluster by another namespace or cluster)",
        info.resource.as_deref().unwrap_or_default(),
        info.group,
        info.name.as_deref().unwrap_or_default()
    )))
}

/// A document's whole body. Boxed: the generic `collect` inside an async
/// fn defeats the compiler's `Send` proof for the listener's future.
fn whole(
    body: Body,
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<bytes::Bytes, crate::body::CollectError>> + Send>,
> {
    Box::pin(collect(body, DOCUMENT_LIMIT))
}

/// The non-resource documents publish mode treats apart.
#[derive(Clone, Copy, Debug)]
enum Document {
    /// `/apis`: cut down to the published groups.
    Root,
    /// `/apis/{group}[/{version}]`: only a published group's.
    Group,
    OpenApiV2,
    OpenApiV3Index,
    /// `/openapi/v3/apis/{group}/{version}`: only a published group's.
    OpenApiV3Group,
    Other,
}

impl Document {
    fn of(path: &str) -> Document {
        let p = path.trim_end_matches('/');
        match p {
            "/apis" => Document::Root,
            "/openapi/v2" => Document::OpenApiV2,
            "/openapi/v3" => Document::OpenApiV3Index,
            _ if p.starts_with("/apis/") => Document::Group,
            _ if p.starts_with("/openapi/v3/apis/") => Document::OpenApiV3Group,
            _ => Document::Other,
        }
    }

    fn is_filtered(self) -> bool {
        matches!(
            self,
            Document::Root | Document::OpenApiV2 | Document::OpenApiV3Index
        )
    }

    /// The group a group document is of (`/api/...`: the core group, never
    /// published).
    fn group(self, path: &str) -> Option<&str> {
        match self {
            Document::Group => filter::path_group(path),
            Document::OpenApiV3Group => filter::path_group(path.trim_start_matches("/openapi/v3")),
            Document::Other if path.starts_with("/api/") || path == "/api" => Some(""),
            _ => None,
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Document::Root => "discovery",
            _ => "OpenAPI",
        }
    }
}

/// Asks the central cluster for JSON only: what comes back is edited as
/// JSON (namespaces, discovery), and a protobuf or CBOR answer would pass
/// unedited. Clients that list JSON beside protobuf (client-go) read it;
/// one that accepts no JSON at all gets `406`, as from a server without it.
fn json_answers(h: &mut http::HeaderMap) -> Result<(), Failure> {
    let accept = h
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let any = accept.trim().is_empty()
        || accept.split(',').any(|r| {
            matches!(
                r.split(';').next().map(str::trim),
                Some("*/*" | "application/*")
            )
        });
    let json = filter::json_only_accept(accept);
    if !any && !accept.to_ascii_lowercase().contains("application/json") {
        return Err(Failure {
            code: StatusCode::NOT_ACCEPTABLE,
            reason: "NotAcceptable",
            message: format!("only JSON is served for published groups, not {accept:?}"),
        });
    }
    let v = HeaderValue::from_str(&json)
        .map_err(|_| Failure::bad_request("an Accept that is not text"))?;
    h.insert(header::ACCEPT, v);
    Ok(())
}

/// Each central namespace once, in the order first met, with the
/// credentials (Secrets; `None`: regroup's own) of the remote namespaces
/// that go there, each once, in order.
fn by_target(
    pairs: impl Iterator<Item = (String, Option<SecretRef>)>,
) -> Vec<(String, Vec<Option<SecretRef>>)> {
    let mut out: Vec<(String, Vec<Option<SecretRef>>)> = Vec::new();
    for (target, secret) in pairs {
        match out.iter_mut().find(|(t, _)| *t == target) {
            Some((_, secrets)) if !secrets.contains(&secret) => secrets.push(secret),
            Some(_) => {}
            None => out.push((target, vec![secret])),
        }
    }
    out
}

/// `/apis/{group}/{version}` (`/api/{version}` for the core group).
fn group_version_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    }
}

/// `path` with its `namespaces/{from}` segment naming `to`.
fn replace_namespace(path: &str, from: &str, to: &str) -> String {
    let mut segs: Vec<&str> = path.split('/').collect();
    if let Some(i) = segs
        .windows(2)
        .position(|w| w[0] == "namespaces" && w[1] == from)
    {
        segs[i + 1] = to;
    }
    segs.join("/")
}

/// A collection path across namespaces (`.../{resource}`, `.../watch/{resource}`)
/// narrowed to namespace `ns`.
fn with_namespace(path: &str, resource: &str, ns: &str) -> String {
    match path.rsplit_once(&format!("/{resource}")) {
        Some((head, tail)) => format!("{head}/namespaces/{ns}/{resource}{tail}"),
        None => path.to_owned(),
    }
}

/// A query with `ours` added to its `labelSelector` (and its
/// `fieldSelector` mapped).
fn with_selector(query: Option<&str>, ours: &str, ns: Option<&(String, String)>) -> String {
    let mut found = false;
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (k, v) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match k.as_ref() {
            "labelSelector" => {
                found = true;
                out.append_pair(&k, &source::and_selector(Some(&v), ours));
            }
            "fieldSelector" => {
                out.append_pair(&k, &field_namespace(&v, ns));
            }
            _ => {
                out.append_pair(&k, &v);
            }
        }
    }
    if !found {
        out.append_pair("labelSelector", ours);
    }
    out.finish()
}

/// A query whose `fieldSelector` names the central namespace.
fn map_field_namespace(query: &str, ns: Option<&(String, String)>) -> String {
    if ns.is_none() || !query.contains("fieldSelector") {
        return query.to_owned();
    }
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        if k == "fieldSelector" {
            out.append_pair(&k, &field_namespace(&v, ns));
        } else {
            out.append_pair(&k, &v);
        }
    }
    out.finish()
}

/// `metadata.namespace=REMOTE` (or `==`, `!=`) in a field selector as the
/// central namespace.
fn field_namespace(selector: &str, ns: Option<&(String, String)>) -> String {
    let Some((remote, target)) = ns else {
        return selector.to_owned();
    };
    selector
        .split(',')
        .map(|term| {
            for op in ["!=", "==", "="] {
                if let Some((k, v)) = term.split_once(op) {
                    if k.trim() == "metadata.namespace" && v.trim() == remote {
                        return format!("{}{op}{target}", k.trim());
                    }
                    return term.to_owned();
                }
            }
            term.to_owned()
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A query without `limit` and `continue`: a list merged from several
/// parts is answered whole.
fn without_paging(query: &str) -> String {
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        if k != "limit" && k != "continue" {
            out.append_pair(&k, &v);
        }
    }
    out.finish()
}

/// A server-side apply (a PATCH of `application/apply-patch+yaml`).
fn is_apply(req: &Request<Incoming>) -> bool {
    req.method() == Method::PATCH
        && req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("application/apply-patch"))
}

/// The request without `force` in its query.
fn unforce(req: &mut Request<Incoming>) -> Result<(), Failure> {
    let Some(q) = req.uri().query().filter(|q| q.contains("force")) else {
        return Ok(());
    };
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (k, v) in form_urlencoded::parse(q.as_bytes()) {
        if k != "force" {
            out.append_pair(&k, &v);
        }
    }
    let uri = rebuilt(req.uri().path(), Some(&out.finish()))?;
    *req.uri_mut() = uri;
    Ok(())
}

fn rebuilt(path: &str, query: Option<&str>) -> Result<Uri, Failure> {
    let pq = match query.filter(|q| !q.is_empty()) {
        Some(q) => format!("{path}?{q}"),
        None => path.to_owned(),
    };
    pq.parse()
        .map_err(|_| Failure::bad_request("the request's path can't be mapped"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_asked_for_in_json_or_refused() {
        let mut h = http::HeaderMap::new();
        let ask = |h: &mut http::HeaderMap, a: &str| {
            h.insert(header::ACCEPT, HeaderValue::from_str(a).unwrap());
            json_answers(h).map(|()| h[header::ACCEPT].to_str().unwrap().to_owned())
        };
        assert_eq!(
            ask(
                &mut h,
                "application/vnd.kubernetes.protobuf,application/json"
            )
            .unwrap(),
            "application/json"
        );
        assert_eq!(
            ask(
                &mut h,
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
            )
            .unwrap(),
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        );
        assert_eq!(ask(&mut h, "*/*").unwrap(), "application/json");
        let e = ask(&mut h, "application/vnd.kubernetes.protobuf").unwrap_err();
        assert_eq!(e.code, StatusCode::NOT_ACCEPTABLE);
    }

    #[test]
    fn a_central_namespace_is_read_with_any_credential_that_goes_there() {
        let secret = |ns: &str, name: &str| {
            Some(SecretRef {
                namespace: ns.into(),
                name: name.into(),
            })
        };
        let pairs = vec![
            ("home".to_owned(), None),
            ("ns-b".to_owned(), secret("mixed", "borrowed")),
            ("ns-a".to_owned(), secret("nosecret", "gone")),
            ("home".to_owned(), None),
            ("ns-a".to_owned(), secret("team-a", "creds")),
            ("ns-b".to_owned(), secret("team-b", "creds")),
            ("ns-a".to_owned(), secret("team-a", "creds")),
        ];
        assert_eq!(
            by_target(pairs.into_iter()),
            vec![
                ("home".to_owned(), vec![None]),
                (
                    "ns-b".to_owned(),
                    vec![secret("mixed", "borrowed"), secret("team-b", "creds")]
                ),
                (
                    "ns-a".to_owned(),
                    vec![secret("nosecret", "gone"), secret("team-a", "creds")]
                ),
            ]
        );
    }

    #[test]
    fn the_namespace_segment_is_mapped_and_only_it() {
        assert_eq!(
            replace_namespace("/apis/g.io/v1/namespaces/foo/things/foo", "foo", "bar"),
            "/apis/g.io/v1/namespaces/bar/things/foo"
        );
        assert_eq!(
            replace_namespace("/apis/g.io/v1/watch/namespaces/foo/things", "foo", "bar"),
            "/apis/g.io/v1/watch/namespaces/bar/things"
        );
    }

    #[test]
    fn a_list_across_namespaces_is_narrowed_to_the_one_target() {
        assert_eq!(
            with_namespace("/apis/g.io/v1/things", "things", "bar"),
            "/apis/g.io/v1/namespaces/bar/things"
        );
        assert_eq!(
            with_namespace("/apis/g.io/v1/watch/things", "things", "bar"),
            "/apis/g.io/v1/watch/namespaces/bar/things"
        );
    }

    #[test]
    fn selectors_get_ours_and_the_central_namespace() {
        let ns = ("foo".to_owned(), "bar".to_owned());
        let q = with_selector(
            Some("watch=1&labelSelector=app%3Dwp&fieldSelector=metadata.namespace%3Dfoo%2Cmetadata.name%3Dx"),
            "s=1",
            Some(&ns),
        );
        let pairs: HashMap<String, String> =
            form_urlencoded::parse(q.as_bytes()).into_owned().collect();
        assert_eq!(pairs["labelSelector"], "app=wp,s=1");
        assert_eq!(
            pairs["fieldSelector"],
            "metadata.namespace=bar,metadata.name=x"
        );
        assert_eq!(pairs["watch"], "1");
        assert_eq!(with_selector(None, "s=1", None), "labelSelector=s%3D1");
        assert_eq!(
            map_field_namespace("fieldSelector=metadata.namespace%21%3Dfoo", Some(&ns)),
            "fieldSelector=metadata.namespace%21%3Dbar"
        );
    }
}
