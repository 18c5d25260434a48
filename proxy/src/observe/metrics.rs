//! `/metrics` (OpenMetrics text) and `/healthz`, on `listeners.metrics`.
//!
//! Counters: requests by listener and status code, Status errors regroup
//! produced by reason, and front callers rejected by reason; the standard
//! unprefixed `process_*` metrics (`process_metrics.rs`). Labels never
//! carry paths, names, certificates or tokens.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures_util::future::BoxFuture;

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::body::full;
use crate::observe::labels::{self, snake_case};
use crate::upstream::Tallies;

type Labels = Vec<(String, String)>;

/// The labels of the per-request families: fixed-size and borrowed (no
/// string built per request), encoded as the label vectors were.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListenerCode {
    listener: &'static str,
    code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListenerVerb {
    listener: &'static str,
    verb: &'static str,
}

/// How many label sets of one per-request family a thread keeps handles
/// on; past them it asks the family.
const HANDLES_KEPT: usize = 32;

/// A thread's handles on the per-request series it has counted: the
/// family's own counter or histogram (a clone shares its value), found by
/// a short scan instead of the family's lock and a SipHash of the labels.
/// The handles are of one [`Metrics`] (`owner`, its id): a thread that
/// records into another drops them first (tests make several; a process
/// serves one).
#[derive(Default)]
struct Handles {
    owner: u64,
    requests: Vec<(ListenerCode, Counter)>,
    latency: Vec<(ListenerVerb, Histogram)>,
}

thread_local! {
    static HANDLES: std::cell::RefCell<Handles> = std::cell::RefCell::new(Handles::default());
}

/// Applies `apply` to the series of `key` in the list `list` picks: from
/// this thread's handles, or else made by `create` (the family's
/// `get_or_create`) and kept.
fn with_handle<K: PartialEq + Clone, M>(
    owner: u64,
    list: impl Fn(&mut Handles) -> &mut Vec<(K, M)>,
    key: K,
    create: impl Fn(&K) -> M,
    apply: impl Fn(&M),
) {
    let kept = HANDLES.try_with(|h| {
        let Ok(mut h) = h.try_borrow_mut() else {
            return false;
        };
        if h.owner != owner {
            *h = Handles {
                owner,
                ..Handles::default()
            };
        }
        let kept = list(&mut h);
        match kept.iter().find(|(k, _)| *k == key) {
            Some((_, m)) => apply(m),
            None => {
                let m = create(&key);
                apply(&m);
                if kept.len() < HANDLES_KEPT {
                    kept.push((key.clone(), m));
                }
            }
        }
        true
    });
    if !matches!(kept, Ok(true)) {
        // The thread is ending, or this is a nested call: no handle.
        apply(&create(&key));
    }
}

/// The commit regroup was built from (12 hex digits), or `unknown`
/// (`build.rs`).
pub const COMMIT: &str = env!("REGROUP_COMMIT");

/// Why a readiness check failed: the check's own error, shown in
/// `/readyz` by its `Display` (which names its causes).
pub type CheckError = Box<dyn std::error::Error + Send + Sync>;

/// A readiness check's outcome.
pub type Check = Result<(), CheckError>;

/// regroup's counters: one per process, made by `regroup serve` and
/// handed to every listener, stack and the health listener that encodes
/// them.
pub struct Metrics {
    /// Which `Metrics` this is, for the threads' kept handles.
    id: u64,
    /// The upstreams whose tallies the scrape sums.
    upstreams: UpstreamTallies,
    registry: Registry,
    /// `process_*`: unprefixed, as every exporter names them.
    process: Registry,
    requests: Family<ListenerCode, Counter>,
    errors: Family<Labels, Counter>,
    rejections: Family<Labels, Counter>,
    in_flight: Gauge,
    latency: Family<ListenerVerb, Histogram>,
    reloads: Family<Labels, Counter>,
    generation: Gauge,
    open_watches: Family<Labels, Gauge>,
    upstream_errors: Family<Labels, Counter>,
    webhook_requests: Family<Labels, Counter>,
    webhook_rejections: Family<Labels, Counter>,
    webhook_errors: Family<Labels, Counter>,
}

/// Buckets of `regroup_request_duration_seconds` (kube-apiserver's
/// `apiserver_request_duration_seconds` range, coarser).
const LATENCY_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0,
];

/// What the engine counts itself (`rewrite::tally`), read at each scrape.
#[derive(Debug)]
struct EngineTallies;

impl prometheus_client::collector::Collector for EngineTallies {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        let m = prometheus_client::metrics::counter::ConstCounter::new(
            crate::rewrite::tally::object_annotations_not_json(),
        );
        m.encode(encoder.encode_descriptor(
            "object_annotations_not_json",
            "Annotations that hold an object (last-applied-configuration) whose value was not JSON, forwarded unchanged",
            None,
            m.metric_type(),
        )?)
    }
}

/// The h2 connections to the apiserver (and to the front's and webhooks'
/// backends, built by the same client) closed because a ping went
/// unanswered (`upstream/health.rs`), read at each scrape.
/// Every upstream's tallies (`upstream::Tallies`), summed at a scrape:
/// credentials obtained and failed by source, h2 connections closed for an
/// unanswered ping, connections by protocol, h2 streams open.
#[derive(Debug, Clone, Default)]
struct UpstreamTallies(Arc<std::sync::Mutex<Vec<Arc<Tallies>>>>);

impl UpstreamTallies {
    fn all(&self) -> Vec<Arc<Tallies>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl prometheus_client::collector::Collector for UpstreamTallies {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::counter::ConstCounter;
        use prometheus_client::metrics::gauge::ConstGauge;
        let all = self.all();
        // Credentials, by source over every upstream.
        let mut by_source: Vec<(&'static str, u64, u64)> = Vec::new();
        for (source, ok, failed) in all.iter().flat_map(|t| t.credentials()) {
            match by_source.iter_mut().find(|(s, _, _)| *s == source) {
                Some(e) => {
                    e.1 += ok;
                    e.2 += failed;
                }
                None => by_source.push((source, ok, failed)),
            }
        }
        type Count = fn(&(&str, u64, u64)) -> u64;
        let families: [(&str, &str, Count); 2] = [
            (
                "credential_refreshes",
                "regroup's own upstream credential obtained (exec plugin run, file read), by source",
                |t| t.1,
            ),
            (
                "credential_failures",
                "Failures to obtain regroup's own upstream credential, by source",
                |t| t.2,
            ),
        ];
        for (name, help, count) in families {
            let mut family = encoder.encode_descriptor(
                name,
                help,
                None,
                prometheus_client::metrics::MetricType::Counter,
            )?;
            for t in by_source.iter().filter(|t| count(t) > 0) {
                let labels: Labels = vec![("source".into(), t.0.into())];
                ConstCounter::new(count(t)).encode(family.encode_family(&labels)?)?;
            }
        }
        let family = encoder.encode_descriptor(
            "upstream_ping_timeouts",
            "h2 connections to the apiserver (and to the front's and webhooks' backends) closed because a ping went unanswered (limits.upstreamPingTimeout)",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        let pings: u64 = all.iter().map(|t| t.unanswered_ping_closes()).sum();
        ConstCounter::new(pings).encode(family)?;
        let gauge = |n: u64| ConstGauge::new(i64::try_from(n).unwrap_or(i64::MAX));
        let (h1, h2) = all.iter().fold((0, 0), |(a, b), t| {
            let (h1, h2) = t.open_connections();
            (a + h1, b + h2)
        });
        let mut family = encoder.encode_descriptor(
            "upstream_connections",
            "Connections open to the apiserver (and to the front's and webhooks' backends), by protocol (http1, h2)",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        for (protocol, n) in [("http1", h1), ("h2", h2)] {
            let labels: Labels = vec![("protocol".into(), protocol.into())];
            gauge(n).encode(family.encode_family(&labels)?)?;
        }
        let open: usize = all.iter().map(|t| t.open_h2_streams()).sum();
        let streams = gauge(open as u64);
        streams.encode(encoder.encode_descriptor(
            "upstream_h2_streams",
            "Streams (requests in flight, open watches) open on the h2 connections to the upstreams",
            None,
            streams.metric_type(),
        )?)
    }
}

#[derive(Debug)]
struct MemoryBudget;

impl prometheus_client::collector::Collector for MemoryBudget {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::counter::ConstCounter;
        use prometheus_client::metrics::gauge::ConstGauge;
        use prometheus_client::registry::Unit;
        let b = crate::body::budget::budget();
        for (name, help, v) in [
            (
                "memory_budget",
                "The memory budget every byte regroup holds to rename is taken from (limits.memoryBudgetBytes)",
                b.total(),
            ),
            (
                "memory_in_use",
                "Bytes of the memory budget held now",
                b.in_use(),
            ),
        ] {
            let m = ConstGauge::new(i64::try_from(v).unwrap_or(i64::MAX));
            m.encode(encoder.encode_descriptor(name, help, Some(&Unit::Bytes), m.metric_type())?)?;
        }
        let mut family = encoder.encode_descriptor(
            "memory_refusals",
            "Work refused for memory, by reason (request_too_large, object_too_large, over_budget, busy)",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for (r, n) in crate::body::budget::refusals() {
            let labels: Labels = vec![("reason".into(), r.label().into())];
            ConstCounter::new(n).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Every family registered, the closed label sets at zero.
    pub fn new() -> Metrics {
        static IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let id = IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut registry = Registry::with_prefix("regroup");
        let requests = Family::<ListenerCode, Counter>::default();
        let errors = Family::<Labels, Counter>::default();
        let rejections = Family::<Labels, Counter>::default();
        let in_flight = Gauge::default();
        let latency: Family<ListenerVerb, Histogram> =
            Family::new_with_constructor(|| Histogram::new(LATENCY_BUCKETS.iter().copied()));
        let build_info = Family::<Labels, Gauge>::default();
        build_info
            .get_or_create(&vec![
                ("version".into(), env!("CARGO_PKG_VERSION").into()),
                ("commit".into(), COMMIT.into()),
            ])
            .set(1);
        registry.register(
            "build_info",
            "regroup's version and the commit it was built from (always 1)",
            build_info,
        );
        registry.register(
            "requests_in_flight",
            "Requests being served (a watch counts until it ends)",
            in_flight.clone(),
        );
        registry.register_with_unit(
            "request_duration",
            "Time to the response headers of non-watch requests, by listener and verb",
            prometheus_client::registry::Unit::Seconds,
            latency.clone(),
        );
        registry.register(
            "requests",
            "Requests served, by listener and HTTP status code",
            requests.clone(),
        );
        registry.register(
            "errors",
            "Kubernetes Status errors regroup answered itself, by listener and reason",
            errors.clone(),
        );
        registry.register(
            "front_rejections",
            "Callers of the aggregated front rejected, by reason",
            rejections.clone(),
        );
        let reloads = Family::<Labels, Counter>::default();
        let generation = Gauge::default();
        registry.register(
            "config_reloads",
            "Configuration reloads (file change or SIGHUP), by result (ok, failed)",
            reloads.clone(),
        );
        registry.register(
            "config_generation",
            "The configuration in force: 1 at start, +1 per successful reload",
            generation.clone(),
        );
        generation.set(1);
        let open_watches = Family::<Labels, Gauge>::default();
        let upstream_errors = Family::<Labels, Counter>::default();
        registry.register(
            "open_watches",
            "Watch streams being renamed, by listener",
            open_watches.clone(),
        );
        registry.register(
            "upstream_errors",
            "Requests the upstream did not answer, by listener and kind (timeout, unreachable)",
            upstream_errors.clone(),
        );
        let webhook_requests = Family::<Labels, Counter>::default();
        let webhook_rejections = Family::<Labels, Counter>::default();
        let webhook_errors = Family::<Labels, Counter>::default();
        registry.register(
            "webhook_requests",
            "Reviews the cluster sent to a fronted webhook, by webhook and kind (AdmissionReview, ConversionReview)",
            webhook_requests.clone(),
        );
        registry.register(
            "webhook_rejections",
            "Reviews the app's webhook refused (admission not allowed, conversion failed), by webhook",
            webhook_rejections.clone(),
        );
        registry.register(
            "webhook_errors",
            "Reviews regroup answered with an error, by webhook and reason",
            webhook_errors.clone(),
        );
        registry.register_collector(Box::new(EngineTallies));
        registry.register_collector(Box::new(MemoryBudget));
        let upstreams = UpstreamTallies::default();
        registry.register_collector(Box::new(upstreams.clone()));
        // The closed label sets, at zero from the start (`labels.rs`).
        let label = |k: &str, v: &str| (k.to_owned(), v.to_owned());
        for (listener, reason) in labels::error_series() {
            let l = vec![label("listener", listener), label("reason", &reason)];
            errors.get_or_create(&l).inc_by(0);
        }
        for reason in labels::FRONT_REJECTIONS {
            rejections
                .get_or_create(&vec![label("reason", reason)])
                .inc_by(0);
        }
        for listener in labels::STACKS {
            open_watches
                .get_or_create(&vec![label("listener", listener)])
                .inc_by(0);
            for kind in labels::UPSTREAM_ERROR_KINDS {
                let l = vec![label("listener", listener), label("kind", kind)];
                upstream_errors.get_or_create(&l).inc_by(0);
            }
        }
        for result in labels::RELOAD_RESULTS {
            reloads
                .get_or_create(&vec![label("result", result)])
                .inc_by(0);
        }
        let mut process = Registry::default();
        process.register_collector(Box::new(crate::observe::process_metrics::ProcessCollector));
        Metrics {
            id,
            upstreams,
            webhook_requests,
            webhook_rejections,
            webhook_errors,
            registry,
            process,
            requests,
            errors,
            rejections,
            in_flight,
            latency,
            reloads,
            generation,
            open_watches,
            upstream_errors,
        }
    }
}

impl Metrics {
    /// Counts `tallies`'s upstream (its connections, streams, pings and
    /// credentials) from now on.
    pub fn count_upstream(&self, tallies: Arc<Tallies>) {
        let mut all = self.upstreams.0.lock().unwrap_or_else(|p| p.into_inner());
        if !all.iter().any(|t| Arc::ptr_eq(t, &tallies)) {
            all.push(tallies);
        }
    }

    /// A review received for the fronted webhook `webhook`.
    pub fn webhook_request(&self, webhook: &str, kind: &str) {
        self.webhook_requests
            .get_or_create(&vec![
                ("webhook".into(), webhook.into()),
                ("kind".into(), kind.into()),
            ])
            .inc();
    }

    /// The app's webhook refused a review.
    pub fn webhook_rejection(&self, webhook: &str) {
        self.webhook_rejections
            .get_or_create(&vec![("webhook".into(), webhook.into())])
            .inc();
    }

    /// regroup answered a review with an error, for `reason`.
    pub fn webhook_error(&self, webhook: &str, reason: &str) {
        self.webhook_errors
            .get_or_create(&vec![
                ("webhook".into(), webhook.into()),
                ("reason".into(), reason.into()),
            ])
            .inc();
    }

    /// A watch stream opened (`1`) or ended (`-1`).
    pub fn open_watches_add(&self, listener: &str, n: i64) {
        self.open_watches
            .get_or_create(&vec![("listener".into(), listener.into())])
            .inc_by(n);
    }

    /// A request the upstream did not answer.
    pub fn upstream_error(&self, listener: &str, kind: &str) {
        self.upstream_errors
            .get_or_create(&vec![
                ("listener".into(), listener.into()),
                ("kind".into(), kind.into()),
            ])
            .inc();
    }

    /// One request served.
    pub fn request(&self, listener: &'static str, code: StatusCode) {
        let key = ListenerCode {
            listener,
            code: code.as_u16(),
        };
        with_handle(
            self.id,
            |h| &mut h.requests,
            key,
            |k| self.requests.get_or_create(k).clone(),
            |c| {
                c.inc();
            },
        );
    }

    /// One Status error regroup produced. Its `reason` label is in one
    /// style, snake case, whether it came as a Status reason
    /// (`ServiceUnavailable`) or as regroup's own (`foreign_host`).
    pub fn error(&self, listener: &str, reason: &str) {
        self.errors
            .get_or_create(&vec![
                ("listener".into(), listener.into()),
                ("reason".into(), snake_case(reason)),
            ])
            .inc();
    }

    /// One front caller rejected.
    pub fn rejection(&self, reason: &str) {
        self.rejections
            .get_or_create(&vec![("reason".into(), reason.into())])
            .inc();
    }

    /// Requests in flight, up or down.
    pub fn in_flight_add(&self, n: i64) {
        self.in_flight.inc_by(n);
    }

    /// A non-watch request's time to its response headers.
    pub fn latency(&self, listener: &'static str, verb: &'static str, d: std::time::Duration) {
        with_handle(
            self.id,
            |h| &mut h.latency,
            ListenerVerb { listener, verb },
            |k| self.latency.get_or_create(k).clone(),
            |h| h.observe(d.as_secs_f64()),
        );
    }

    /// A configuration reload, `ok` or `failed`.
    pub fn reload(&self, result: &str) {
        self.reloads
            .get_or_create(&vec![("result".into(), result.into())])
            .inc();
    }

    /// The configuration generation now in force.
    pub fn set_generation(&self, generation: i64) {
        self.generation.set(generation);
    }

    /// The OpenMetrics text.
    pub fn encode(&self) -> String {
        let mut s = String::new();
        encode_registry(&mut s, &self.registry).expect("writing to a String");
        encode_registry(&mut s, &self.process).expect("writing to a String");
        encode_eof(&mut s).expect("writing to a String");
        s
    }
}

/// What `/readyz` asks, as named checks: whether regroup is draining
/// (`shutdown`), the aggregated front's certificates (`front`), the
/// upstream (`upstream`). An error says why the check failed.
#[derive(Clone, Default)]
pub struct Health {
    /// Set once regroup shuts down: `/readyz` then answers 503.
    pub shutting_down: Option<Arc<AtomicBool>>,
    /// The upstream check.
    #[allow(clippy::type_complexity)]
    pub upstream: Option<Arc<dyn Fn() -> BoxFuture<'static, Check> + Send + Sync>>,
    /// The aggregated front's certificates (`front/ready.rs`), when there is a front.
    #[allow(clippy::type_complexity)]
    pub front: Option<Arc<dyn Fn() -> Check + Send + Sync>>,
    /// Publish mode's central cluster, checked as the upstream is.
    #[allow(clippy::type_complexity)]
    pub central: Option<Arc<dyn Fn() -> BoxFuture<'static, Check> + Send + Sync>>,
}

impl Health {
    /// Every check regroup has, in order, with its result (`excluded`
    /// ones are not run).
    pub async fn readyz(&self, excluded: &[String]) -> Vec<(&'static str, Option<Check>)> {
        let skip = |name: &str| excluded.iter().any(|e| e == name);
        let mut out = Vec::new();
        let shutdown = || match self
            .shutting_down
            .as_ref()
            .is_some_and(|s| s.load(Ordering::SeqCst))
        {
            true => Err("shutting down".into()),
            false => Ok(()),
        };
        out.push(("shutdown", (!skip("shutdown")).then(shutdown)));
        if let Some(check) = &self.front {
            out.push(("front", (!skip("front")).then(|| check())));
        }
        if let Some(check) = &self.upstream {
            let r = match skip("upstream") {
                true => None,
                false => Some(check().await),
            };
            out.push(("upstream", r));
        }
        if let Some(check) = &self.central {
            let r = match skip("central") {
                true => None,
                false => Some(check().await),
            };
            out.push(("central", r));
        }
        out
    }
}

/// kube-apiserver's health answer for `endpoint` (`readyz`, `livez`):
/// `ok` when every check passed and `verbose` was not asked; else one line
/// per check (`[+]name ok`, `[+]name excluded: ok`, `[-]name failed:
/// reason`), the excluded names that match no check, then `<endpoint> check
/// passed` or `failed`. Unlike kube-apiserver, a failed check's reason is
/// shown (kube-apiserver withholds it from callers and logs it): regroup's
/// reasons are paths, addresses and error messages, never secrets, and the
/// caller is a probe or an operator who needs the root cause.
fn health_answer(
    endpoint: &str,
    checks: &[(&'static str, Option<Check>)],
    excluded: &[String],
    verbose: bool,
) -> (StatusCode, String) {
    use std::fmt::Write;
    let mut out = String::new();
    let mut failed = Vec::new();
    for (name, r) in checks {
        match r {
            None => {
                let _ = writeln!(out, "[+]{name} excluded: ok");
            }
            Some(Ok(())) => {
                let _ = writeln!(out, "[+]{name} ok");
            }
            Some(Err(why)) => {
                let _ = writeln!(out, "[-]{name} failed: {why}");
                failed.push(*name);
            }
        }
    }
    let unknown: Vec<String> = excluded
        .iter()
        .filter(|e| !checks.iter().any(|(n, _)| n == e))
        .map(|e| format!("{e:?}"))
        .collect();
    if !unknown.is_empty() {
        let _ = writeln!(
            out,
            "warn: some health checks cannot be excluded: no matches for {}",
            unknown.join(",")
        );
    }
    if !failed.is_empty() {
        tracing::debug!(checks = %failed.join(","), "{endpoint} check failed");
        let _ = writeln!(out, "{endpoint} check failed");
        return (StatusCode::SERVICE_UNAVAILABLE, out);
    }
    if !verbose {
        return (StatusCode::OK, "ok".into());
    }
    let _ = writeln!(out, "{endpoint} check passed");
    (StatusCode::OK, out)
}

/// `?verbose` (any value) and every `?exclude=NAME`, as kube-apiserver
/// reads them.
fn health_query(query: Option<&str>) -> (bool, Vec<String>) {
    let mut verbose = false;
    let mut excluded = Vec::new();
    for (k, v) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        match &*k {
            "verbose" => verbose = true,
            "exclude" => excluded.push(v.into_owned()),
            _ => {}
        }
    }
    (verbose, excluded)
}

/// Answers `/readyz` and `/livez` (and `/healthz`, the same as `/livez`).
async fn health_endpoint(health: &Health, path: &str, query: Option<&str>) -> (StatusCode, String) {
    let (verbose, excluded) = health_query(query);
    if path == "/readyz" {
        let checks = health.readyz(&excluded).await;
        return health_answer("readyz", &checks, &excluded, verbose);
    }
    // The process answers: that is all liveness means here.
    let ping = (
        "ping",
        (!excluded.iter().any(|e| e == "ping")).then_some(Ok(())),
    );
    let endpoint = path.trim_start_matches('/');
    health_answer(endpoint, &[ping], &excluded, verbose)
}

/// Serves `/metrics`, `/healthz` and `/livez` (the process), `/readyz`
/// (without a [`Health`]: always ready) until the task is dropped.
pub async fn serve_metrics(listener: TcpListener, metrics: Arc<Metrics>) {
    serve_health(listener, Health::default(), metrics).await
}

/// Like [`serve_metrics`], `/readyz` answering from `health`.
pub async fn serve_health(listener: TcpListener, health: Health, metrics: Arc<Metrics>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        };
        let (health, metrics) = (health.clone(), metrics.clone());
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                let (health, metrics) = (health.clone(), metrics.clone());
                async move {
                    let (code, ctype, body) = match req.uri().path() {
                        "/metrics" => (
                            StatusCode::OK,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                            Bytes::from(metrics.encode()),
                        ),
                        p @ ("/healthz" | "/livez" | "/readyz") => {
                            let (code, text) = health_endpoint(&health, p, req.uri().query()).await;
                            (code, "text/plain; charset=utf-8", Bytes::from(text))
                        }
                        _ => (
                            StatusCode::NOT_FOUND,
                            "text/plain",
                            Bytes::from_static(b"404 page not found\n"),
                        ),
                    };
                    let mut r = Response::new(full(body));
                    *r.status_mut() = code;
                    r.headers_mut()
                        .insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
                    Ok::<_, std::convert::Infallible>(r)
                }
            });
            let mut b = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            b.http1()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(std::time::Duration::from_secs(32));
            let _ = b.serve_connection(TokioIo::new(stream), svc).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_appear_in_the_openmetrics_text_without_sensitive_labels() {
        let m = Metrics::new();
        m.request("sidecar", StatusCode::OK);
        m.error("sidecar", "ServiceUnavailable");
        m.rejection("no_client_certificate");
        m.latency("sidecar", "GET", std::time::Duration::from_millis(3));
        let text = m.encode();
        assert!(
            text.contains(
                "regroup_request_duration_seconds_count{listener=\"sidecar\",verb=\"GET\"}"
            ),
            "{text}"
        );
        assert!(
            text.contains("regroup_requests_total{listener=\"sidecar\",code=\"200\"}"),
            "{text}"
        );
        assert!(text
            .contains("regroup_errors_total{listener=\"sidecar\",reason=\"service_unavailable\"}"));
        assert!(text.contains("regroup_front_rejections_total{reason=\"no_client_certificate\"}"));
        assert!(text.ends_with("# EOF\n"));
        assert_eq!(text.matches("# EOF").count(), 1);
    }

    #[tokio::test]
    async fn health_answers_as_kube_apiserver_with_the_reason() {
        let down = Arc::new(AtomicBool::new(false));
        let h = Health {
            shutting_down: Some(down.clone()),
            upstream: Some(Arc::new(|| {
                Box::pin(async { Err("GET /readyz: connection refused".into()) })
            })),
            front: Some(Arc::new(|| Ok(()))),
            central: None,
        };
        let (code, text) = health_endpoint(&h, "/readyz", None).await;
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            text,
            "[+]shutdown ok\n[+]front ok\n[-]upstream failed: GET /readyz: connection refused\nreadyz check failed\n"
        );
        let (code, text) = health_endpoint(&h, "/readyz", Some("exclude=upstream")).await;
        assert_eq!((code, text.as_str()), (StatusCode::OK, "ok"));
        let (code, text) =
            health_endpoint(&h, "/readyz", Some("verbose&exclude=upstream&exclude=etcd")).await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(
            text,
            "[+]shutdown ok\n[+]front ok\n[+]upstream excluded: ok\n\
             warn: some health checks cannot be excluded: no matches for \"etcd\"\n\
             readyz check passed\n"
        );
        down.store(true, Ordering::SeqCst);
        let (code, text) = health_endpoint(&h, "/readyz", Some("exclude=upstream")).await;
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            text.starts_with("[-]shutdown failed: shutting down\n"),
            "{text}"
        );
        let (code, text) = health_endpoint(&h, "/livez", Some("verbose=1")).await;
        assert_eq!(
            (code, text.as_str()),
            (StatusCode::OK, "[+]ping ok\nlivez check passed\n")
        );
        assert_eq!(health_endpoint(&h, "/healthz", None).await.1, "ok");
    }

    #[test]
    fn closed_label_sets_are_present_at_zero() {
        let text = Metrics::new().encode();
        for series in [
            "regroup_errors_total{listener=\"front\",reason=\"too_many_requests\"}",
            "regroup_errors_total{listener=\"webhooks\",reason=\"tls_handshake\"}",
            "regroup_front_rejections_total{reason=\"malformed_header\"}",
            "regroup_upstream_errors_total{listener=\"front\",kind=\"timeout\"}",
            "regroup_config_reloads_total{result=\"failed\"}",
            "regroup_open_watches{listener=\"front\"}",
        ] {
            assert!(text.contains(series), "{series} in:\n{text}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn process_metrics_are_unprefixed_and_read_from_proc() {
        let text = Metrics::new().encode();
        let value = |name: &str| -> f64 {
            let line = text
                .lines()
                .find(|l| l.starts_with(&format!("{name} ")))
                .unwrap_or_else(|| panic!("no {name} sample in:\n{text}"));
            line[name.len() + 1..].trim().parse().expect("a number")
        };
        assert!(value("process_resident_memory_bytes") > 1e6);
        assert!(value("process_open_fds") >= 3.0);
        assert!(value("process_cpu_seconds_total") >= 0.0);
        assert!(value("process_start_time_seconds") > 1.6e9);
        assert!(
            text.contains("# TYPE process_cpu_seconds counter"),
            "{text}"
        );
        assert!(!text.contains("regroup_process_"));
    }
}
