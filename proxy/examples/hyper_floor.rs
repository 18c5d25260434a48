//! The floor under regroup's cost per request: a pass-through proxy built
//! on hyper's connection-level API and nothing else. No routing, renaming,
//! access checks, credentials, metrics or logging: what regroup cannot be
//! cheaper than.
//!
//! The design (each step measured, docs/performance.md "The floor"):
//! - server connections: `hyper::server::conn::http1`, `half_close(true)`
//!   (no EOF probe read), `writev(false)` (one flattened write buffer);
//! - upstream connections: `hyper::client::conn::http1::handshake` (or
//!   `http2` when TLS ALPN picks h2), one per client connection, opened on
//!   its first request and kept while it works; each driven on its own
//!   task;
//! - hop-by-hop headers dropped in one scan of the request's headers, `Host`
//!   set to the upstream's;
//! - no per-request timer: a watchdog task per runtime sweeps every
//!   [`SWEEP`] and closes connections idle (no request in service) longer
//!   than [`IDLE_LIMIT`], which bounds a slow request head as hyper's
//!   header timer does, to within a sweep;
//! - one current-thread runtime per core, each with its own `SO_REUSEPORT`
//!   listener, so a request, its client connection and its upstream
//!   connection stay on one thread.
//!
//! Flags put back the parts the previous floor (and regroup) used, one at a
//! time, so each step's cost can be measured with `bench/instructions.sh`
//! (`FLOOR_ARGS="--legacy-client" ...`):
//! `--multi-thread` (one tokio multi-thread runtime), `--legacy-client`
//! (hyper-util's pooled `Client` over hyper-rustls), `--auto-server`
//! (hyper-util's `auto` server, HTTP/1.1 and h2c), `--hyper-timer` (hyper's
//! per-request header timer, 30 s), `--no-half-close`, `--writev`.
//! `--same-task` goes the other way (a plain upstream, not with
//! `--auto-server`): the HTTP/1.1 upstream connection, opened as the
//! client connects, is driven by the client connection's own task (both
//! polled whenever either is woken) instead of a task of its own; measured
//! dearer (docs/performance.md, "Session 38").
//! `--core` adds, on the default layout, what regroup's core does with a
//! request and nothing of its proxy's layers: the configuration file
//! named by `FLOOR_CONFIG` loaded as `regroup serve` loads it, each
//! request's path read (`RequestInfo::parse`) and renamed towards the
//! cluster, the whole answer collected and put through `Engine::body` as
//! the proxy's whole-answer step does (the addressed group and kind, JSON),
//! and regroup's request line written: a bound from below on regroup's
//! own cost, measured in docs/performance.md ("Session 39").
//! Upstream protocol variants (over TLS): `--upstream-http1` (ALPN offers
//! `http/1.1` only, as regroup's `upstream.http2: never`),
//! `--h2-header-table=N` (the h2 client's HPACK table size),
//! `--h2-spec-windows` (64 KiB flow-control windows instead of hyper's),
//! `--no-h2-keepalive` (no h2 health check: by default the h2 client pings
//! after 30 s without a frame read and closes the connection when no
//! answer comes in 15 s, idle or not, as regroup's does by default).
//! The allocator is regroup's: glibc's malloc, or mimalloc when the
//! package's feature `mimalloc` is on (off by default), as in the
//! `regroup` binary.
//!
//! `cargo build --release -p regroup --example hyper_floor`, then
//! `target/release/examples/hyper_floor LISTEN_ADDR UPSTREAM_URL [FLAGS]`
//! (e.g. `127.0.0.1:8001 http://127.0.0.1:8080`). Stops on SIGINT/SIGTERM.
//! An `https` upstream is verified with the CAs in `FLOOR_CA_FILE` and
//! spoken to in h2 or HTTP/1.1 as ALPN chooses, as regroup does. Upgrades
//! are not bridged (regroup's cost on a GET is what it is compared on).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::header::{self, HeaderValue};
use http::{Request, Response, Uri};
use http_body_util::{Either, Full};
use hyper::body::{Body, Bytes, Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use regroup_config::Direction;
use regroup_core::kube::request::RequestInfo;
use regroup_core::kube::Wire;
use regroup_core::rewrite::{Catalog, Context as RenameContext, Engine};
use regroup_core::url_rename::rewrite_path_for;
use tokio::net::{TcpListener, TcpStream};

// The same allocator as the `regroup` binary (src/main.rs).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How often the watchdog sweeps the connections.
const SWEEP: Duration = Duration::from_secs(2);
/// A connection with no request in service for this long is closed.
const IDLE_LIMIT: Duration = Duration::from_secs(30);

/// The layout and parts, from the command line.
#[derive(Clone, Copy, Default)]
struct Options {
    multi_thread: bool,
    legacy_client: bool,
    auto_server: bool,
    hyper_timer: bool,
    no_half_close: bool,
    writev: bool,
    /// TLS ALPN offers `http/1.1` only: no h2 to the upstream.
    upstream_http1: bool,
    /// The h2 client's HPACK header table size (`SETTINGS_HEADER_TABLE_SIZE`).
    h2_header_table: Option<u32>,
    /// The h2 client with the protocol's default windows (64 KiB) instead
    /// of hyper's (5 MiB connection, 2 MiB stream).
    h2_spec_windows: bool,
    /// No h2 health check (regroup's `limits.upstreamReadIdleTimeout: 0`);
    /// by default the h2 client pings a connection silent for 30 s and
    /// closes it when no answer comes in 15 s (client-go's, regroup's).
    no_h2_keepalive: bool,
    /// Each client connection's upstream connection (plain HTTP/1.1,
    /// opened when the client connects) is driven by the client
    /// connection's own task, not a task of its own: what a request costs
    /// when no task hands it to another (`--same-task`).
    same_task: bool,
    /// regroup's core work on each request (`--core`, `FLOOR_CONFIG`).
    core: bool,
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(listen), Some(upstream)) = (args.next(), args.next()) else {
        eprintln!("usage: hyper_floor LISTEN_ADDR UPSTREAM_URL [FLAGS]");
        std::process::exit(2);
    };
    let listen: SocketAddr = listen.parse().expect("LISTEN_ADDR is host:port");
    let upstream: Uri = upstream.parse().expect("UPSTREAM_URL is a URL");
    let mut o = Options::default();
    for a in args {
        match a.as_str() {
            "--multi-thread" => o.multi_thread = true,
            "--legacy-client" => o.legacy_client = true,
            "--auto-server" => o.auto_server = true,
            "--hyper-timer" => o.hyper_timer = true,
            "--no-half-close" => o.no_half_close = true,
            "--writev" => o.writev = true,
            "--upstream-http1" => o.upstream_http1 = true,
            "--h2-spec-windows" => o.h2_spec_windows = true,
            "--no-h2-keepalive" => o.no_h2_keepalive = true,
            "--same-task" => o.same_task = true,
            "--core" => o.core = true,
            a if a.starts_with("--h2-header-table=") => {
                let n = a["--h2-header-table=".len()..].parse().expect("a size");
                o.h2_header_table = Some(n);
            }
            // The previous floor's layout flag: now the default.
            "per-core" => {}
            other => {
                eprintln!("hyper_floor: unknown flag {other}");
                std::process::exit(2);
            }
        }
    }
    let up = Arc::new(Upstream::new(upstream, o));
    if o.core {
        let path = std::env::var_os("FLOOR_CONFIG").expect("--core: FLOOR_CONFIG names a file");
        let text = std::fs::read_to_string(path).expect("FLOOR_CONFIG: readable");
        let s = regroup_config::load(&text).expect("FLOOR_CONFIG: a configuration");
        let engine = Engine::new(s.map.clone(), Catalog::for_map(&s.fields, &s.map));
        let _ = CORE.set(engine);
        regroup::observe::request_log::write_directly();
    }
    if o.multi_thread {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            serve(TcpListener::bind(listen).await.expect("bind"), up, o).await
        });
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads: Vec<_> = (0..cores)
        .map(|_| {
            let up = up.clone();
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                runtime.block_on(async move {
                    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
                    socket.set_reuseport(true).expect("SO_REUSEPORT");
                    socket.set_reuseaddr(true).expect("SO_REUSEADDR");
                    socket.bind(listen).expect("bind");
                    serve(socket.listen(1024).expect("listen"), up, o).await
                })
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
}

/// Where requests go, and how to open a connection there.
struct Upstream {
    uri: Uri,
    host: HeaderValue,
    addr: String,
    tls: Option<(
        tokio_rustls::TlsConnector,
        rustls::pki_types::ServerName<'static>,
    )>,
    tls_config: Arc<rustls::ClientConfig>,
    options: Options,
}

impl Upstream {
    fn new(uri: Uri, options: Options) -> Upstream {
        let authority = uri.authority().expect("UPSTREAM_URL has a host").clone();
        let https = uri.scheme_str() == Some("https");
        let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
        let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots())
        .with_no_client_auth();
        config.alpn_protocols = if options.upstream_http1 {
            vec![b"http/1.1".to_vec()]
        } else {
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        };
        let tls_config = Arc::new(config);
        let tls = https.then(|| {
            let name = rustls::pki_types::ServerName::try_from(authority.host().to_owned())
                .expect("a TLS server name");
            (tokio_rustls::TlsConnector::from(tls_config.clone()), name)
        });
        Upstream {
            host: HeaderValue::from_str(authority.as_str()).expect("a Host value"),
            addr: format!("{}:{port}", authority.host()),
            uri,
            tls,
            tls_config,
            options,
        }
    }

    /// A new upstream connection, driven on its own task.
    async fn connect(&self) -> Result<Sender, Box<dyn std::error::Error + Send + Sync>> {
        let tcp = TcpStream::connect(&self.addr).await?;
        tcp.set_nodelay(true)?;
        let Some((tls, name)) = &self.tls else {
            let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
            tokio::spawn(conn);
            return Ok(Sender::H1(send));
        };
        let tls = tls.connect(name.clone(), tcp).await?;
        if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
            let mut b = hyper::client::conn::http2::Builder::new(TokioExecutor::new());
            if let Some(n) = self.options.h2_header_table {
                b.header_table_size(n);
            }
            if self.options.h2_spec_windows {
                b.initial_stream_window_size(65_535)
                    .initial_connection_window_size(65_535);
            }
            if !self.options.no_h2_keepalive {
                b.timer(TokioTimer::new())
                    .keep_alive_interval(Duration::from_secs(30))
                    .keep_alive_timeout(Duration::from_secs(15))
                    .keep_alive_while_idle(true);
            }
            let (send, conn) = b.handshake(TokioIo::new(tls)).await?;
            tokio::spawn(conn);
            return Ok(Sender::H2(send));
        }
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
        tokio::spawn(conn);
        Ok(Sender::H1(send))
    }
}

/// One upstream connection's request half.
enum Sender {
    H1(hyper::client::conn::http1::SendRequest<Incoming>),
    H2(hyper::client::conn::http2::SendRequest<Incoming>),
}

impl Sender {
    /// Waits until the connection takes a request; `false` when it closed.
    async fn ready(&mut self) -> bool {
        match self {
            Sender::H1(s) => s.ready().await.is_ok(),
            Sender::H2(s) => s.ready().await.is_ok(),
        }
    }

    fn send(
        &mut self,
        req: Request<Incoming>,
    ) -> impl std::future::Future<Output = hyper::Result<Response<Incoming>>> {
        let f = match self {
            Sender::H1(s) => Either::Left(s.send_request(req)),
            Sender::H2(s) => Either::Right(s.send_request(req)),
        };
        async move {
            match f {
                Either::Left(f) => f.await,
                Either::Right(f) => f.await,
            }
        }
    }
}

/// One client connection's state: its upstream connection (opened on the
/// first request) and the stamp the watchdog reads.
struct Conn {
    up: Arc<Upstream>,
    sender: Mutex<Option<Sender>>,
    watch: Arc<Stamp>,
}

/// When a connection last had no request in service, in the watchdog's
/// coarse clock; [`BUSY`] while one is.
struct Stamp(AtomicU64);
const BUSY: u64 = u64::MAX;

/// The watchdog's clock: seconds since the process started, advanced by
/// the watchdogs, so a request reads it instead of the system clock.
static NOW: AtomicU64 = AtomicU64::new(0);
static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

fn now() -> u64 {
    NOW.load(Ordering::Relaxed)
}

/// One runtime's connections, swept every [`SWEEP`].
struct Watchdog {
    conns: Mutex<Vec<(Arc<Stamp>, tokio::task::AbortHandle)>>,
}

impl Watchdog {
    fn start() -> Arc<Watchdog> {
        let w = Arc::new(Watchdog {
            conns: Mutex::new(Vec::new()),
        });
        let weak = Arc::downgrade(&w);
        let start = *START.get_or_init(Instant::now);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(SWEEP);
            loop {
                tick.tick().await;
                let Some(w) = weak.upgrade() else { return };
                let now = start.elapsed().as_secs();
                NOW.store(now, Ordering::Relaxed);
                let mut conns = w.conns.lock().unwrap_or_else(|p| p.into_inner());
                conns.retain(|(stamp, task)| {
                    if task.is_finished() {
                        return false;
                    }
                    let s = stamp.0.load(Ordering::Relaxed);
                    if s != BUSY && now.saturating_sub(s) > IDLE_LIMIT.as_secs() {
                        task.abort();
                        return false;
                    }
                    true
                });
            }
        });
        w
    }
}

async fn serve(listener: TcpListener, up: Arc<Upstream>, o: Options) {
    let legacy = o.legacy_client.then(|| legacy_client(&up));
    let watchdog = (!o.hyper_timer).then(Watchdog::start);
    let stop = async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    };
    tokio::pin!(stop);
    loop {
        let (tcp, _) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(_) => continue,
            },
            _ = &mut stop => return,
        };
        let _ = tcp.set_nodelay(true);
        let stamp = Arc::new(Stamp(AtomicU64::new(now())));
        let conn = Arc::new(Conn {
            up: up.clone(),
            sender: Mutex::new(None),
            watch: stamp.clone(),
        });
        let (legacy, watched) = (legacy.clone(), watchdog.is_some());
        let task = tokio::spawn(async move {
            let io = TokioIo::new(tcp);
            // `--same-task`: the upstream connection, driven below.
            let mut upstream_conn = None;
            if o.same_task && conn.up.tls.is_none() {
                let Ok(tcp) = TcpStream::connect(&conn.up.addr).await else {
                    return;
                };
                let _ = tcp.set_nodelay(true);
                let Ok((send, c)) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await
                else {
                    return;
                };
                *conn.sender.lock().unwrap_or_else(|p| p.into_inner()) = Some(Sender::H1(send));
                upstream_conn = Some(c);
            }
            if o.core && !o.auto_server && legacy.is_none() && upstream_conn.is_none() {
                // HTTP/1.1 keeps a request's future where it is: unboxed, as
                // regroup's (boxed, the copy costs ~1.1k a request).
                let svc = service_fn(move |req| {
                    let conn = conn.clone();
                    async move { Ok::<_, Infallible>(forward_core(&conn, watched, req).await) }
                });
                let _ = h1_server(o).serve_connection(io, svc).await;
                return;
            }
            let svc = service_fn(move |req| {
                let (conn, legacy) = (conn.clone(), legacy.clone());
                async move {
                    Ok::<_, Infallible>(match legacy {
                        Some(client) => forward_legacy(&client, &conn.up, req).await,
                        // Boxed: the service's future stays the size of
                        // [`forward`]'s, which hyper's h2 server moves.
                        None if o.core => Box::pin(forward_core(&conn, watched, req)).await,
                        None => forward(&conn, watched, req).await,
                    })
                }
            });
            if o.auto_server {
                let mut b = auto::Builder::new(TokioExecutor::new());
                let h1 = &mut b.http1();
                h1.half_close(!o.no_half_close).writev(o.writev);
                if o.hyper_timer {
                    h1.timer(TokioTimer::new())
                        .header_read_timeout(Duration::from_secs(30));
                }
                b.http2().timer(TokioTimer::new());
                let _ = b.serve_connection_with_upgrades(io, svc).await;
            } else {
                let server = h1_server(o).serve_connection(io, svc);
                match upstream_conn {
                    // Both polled whenever the task is: a request handed
                    // to the upstream connection is written in the same
                    // poll, its answer read into the server's in the next.
                    Some(upstream) => {
                        tokio::pin!(server);
                        tokio::select! {
                            _ = &mut server => {}
                            _ = upstream => { let _ = server.await; }
                        }
                    }
                    None => {
                        let _ = server.await;
                    }
                }
            }
        });
        if let Some(w) = &watchdog {
            let mut conns = w.conns.lock().unwrap_or_else(|p| p.into_inner());
            conns.push((stamp, task.abort_handle()));
        }
    }
}

/// The HTTP/1.1 server connection's settings.
fn h1_server(o: Options) -> hyper::server::conn::http1::Builder {
    let mut b = hyper::server::conn::http1::Builder::new();
    b.half_close(!o.no_half_close).writev(o.writev);
    if o.hyper_timer {
        b.timer(TokioTimer::new())
            .header_read_timeout(Duration::from_secs(30));
    } else {
        b.header_read_timeout(None);
    }
    b
}

/// The hop-by-hop headers (RFC 9110 §7.6.1), and what `Connection` names.
fn drop_hop_by_hop(headers: &mut http::HeaderMap) {
    let mut connection = false;
    let mut other = false;
    for k in headers.keys() {
        if k == header::CONNECTION {
            connection = true;
        } else if k == header::TE
            || k == header::TRAILER
            || k == header::TRANSFER_ENCODING
            || k == header::UPGRADE
            || k == header::PROXY_AUTHORIZATION
            || k == header::PROXY_AUTHENTICATE
            || k.as_str() == "keep-alive"
            || k.as_str() == "proxy-connection"
        {
            other = true;
        }
    }
    if connection {
        let named: Vec<http::HeaderName> = headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|t| http::HeaderName::from_bytes(t.trim().as_bytes()).ok())
            .collect();
        for n in named {
            headers.remove(n);
        }
        headers.remove(header::CONNECTION);
    }
    if other {
        for n in [
            header::TE,
            header::TRAILER,
            header::TRANSFER_ENCODING,
            header::UPGRADE,
            header::PROXY_AUTHORIZATION,
            header::PROXY_AUTHENTICATE,
        ] {
            headers.remove(n);
        }
        headers.remove("keep-alive");
        headers.remove("proxy-connection");
    }
}

type Out = Either<Watched, Full<Bytes>>;

/// `--core`'s renaming engine.
static CORE: std::sync::OnceLock<Engine> = std::sync::OnceLock::new();

/// [`forward`] with regroup's core work around it (`--core`).
async fn forward_core(
    conn: &Arc<Conn>,
    watched: bool,
    mut req: Request<Incoming>,
) -> Response<Out> {
    let engine = CORE.get().expect("--core's engine");
    let start = Instant::now();
    let method = req.method().clone();
    // The caller's URI, kept for the request line (a clone shares its bytes).
    let uri = req.uri().clone();
    let info = RequestInfo::parse(uri.path(), uri.query());
    if let Some(p) = rewrite_path_for(uri.path(), &info, engine.map(), Direction::ToCluster) {
        let pq = match uri.query() {
            Some(q) => format!("{p}?{q}"),
            None => p,
        };
        match Uri::try_from(pq) {
            Ok(u) => *req.uri_mut() = u,
            Err(e) => return bad_gateway(conn, &e.to_string()),
        }
    }
    let resp = forward(conn, watched, req).await;
    let (mut parts, body) = resp.into_parts();
    let bytes = match body {
        Either::Left(b) => match http_body_util::BodyExt::collect(b).await {
            Ok(c) => c.to_bytes(),
            Err(e) => return bad_gateway(conn, &e.to_string()),
        },
        Either::Right(_) => return Response::from_parts(parts, body),
    };
    let kind = info
        .resource
        .as_deref()
        .and_then(|r| Catalog::kind_for_resource(&info.group, r));
    let cx = RenameContext {
        hint: None,
        addressed: kind.map(|k| (info.group.as_str(), k)),
    };
    let bytes = match engine.body(Direction::ToApp, Wire::Json, cx, &bytes) {
        Ok(Some(out)) => Bytes::from(out),
        Ok(None) => bytes,
        Err(e) => return bad_gateway(conn, &e.to_string()),
    };
    if parts
        .headers
        .get(header::CONTENT_LENGTH)
        .is_some_and(|v| v.as_bytes() != itoa::Buffer::new().format(bytes.len()).as_bytes())
    {
        parts.headers.remove(header::CONTENT_LENGTH);
    }
    regroup::observe::request_log::request_line(
        "app",
        &method,
        info.verb(method.as_str()),
        &info.template_of(uri.path()),
        parts.status.as_u16(),
        start.elapsed(),
    );
    Response::from_parts(parts, Either::Right(Full::new(bytes)))
}

async fn forward(conn: &Arc<Conn>, watched: bool, req: Request<Incoming>) -> Response<Out> {
    conn.watch.0.store(BUSY, Ordering::Relaxed);
    let (mut parts, body) = req.into_parts();
    drop_hop_by_hop(&mut parts.headers);
    parts.headers.insert(header::HOST, conn.up.host.clone());
    // HTTP/1.1 upstream: origin-form, the request's own path and query.
    let mut sender = conn.sender.lock().unwrap_or_else(|p| p.into_inner()).take();
    let ready = match &mut sender {
        Some(s) => s.ready().await,
        None => false,
    };
    if !ready {
        sender = match conn.up.connect().await {
            Ok(s) => Some(s),
            Err(e) => return bad_gateway(conn, &e.to_string()),
        };
    }
    let mut sender = sender.expect("connected");
    if let Sender::H2(_) = sender {
        // h2 needs the scheme and authority in the URI.
        let mut uri = conn.up.uri.clone().into_parts();
        uri.path_and_query = parts.uri.path_and_query().cloned();
        parts.uri = Uri::from_parts(uri).expect("upstream URL with a path");
        parts.version = http::Version::HTTP_2;
        parts.headers.remove(header::HOST);
    }
    let sent = sender.send(Request::from_parts(parts, body));
    *conn.sender.lock().unwrap_or_else(|p| p.into_inner()) = Some(sender);
    match sent.await {
        Ok(resp) => resp.map(|b| {
            Either::Left(Watched {
                inner: b,
                stamp: watched.then(|| conn.watch.clone()),
            })
        }),
        Err(e) => bad_gateway(conn, &e.to_string()),
    }
}

fn bad_gateway(conn: &Conn, e: &str) -> Response<Out> {
    conn.watch.0.store(now(), Ordering::Relaxed);
    Response::builder()
        .status(502)
        .body(Either::Right(Full::new(Bytes::from(format!(
            "upstream: {e}\n"
        )))))
        .expect("static response")
}

/// A response body that marks its connection idle when it ends.
struct Watched {
    inner: Incoming,
    stamp: Option<Arc<Stamp>>,
}

impl Drop for Watched {
    fn drop(&mut self) {
        if let Some(stamp) = &self.stamp {
            stamp.0.store(now(), Ordering::Relaxed);
        }
    }
}

impl Body for Watched {
    type Data = Bytes;
    type Error = hyper::Error;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }
    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

type Legacy = Client<hyper_rustls::HttpsConnector<HttpConnector>, Incoming>;

/// hyper-util's pooled client over hyper-rustls: the previous floor's.
fn legacy_client(up: &Upstream) -> Legacy {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    // hyper-rustls sets ALPN itself.
    let mut tls = (*up.tls_config).clone();
    tls.alpn_protocols.clear();
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_all_versions()
        .wrap_connector(http);
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .build(connector)
}

async fn forward_legacy(client: &Legacy, up: &Upstream, req: Request<Incoming>) -> Response<Out> {
    let (mut parts, body) = req.into_parts();
    let mut uri = up.uri.clone().into_parts();
    uri.path_and_query = parts.uri.path_and_query().cloned();
    parts.uri = Uri::from_parts(uri).expect("upstream URL with a path");
    parts.headers.remove(header::HOST);
    match client.request(Request::from_parts(parts, body)).await {
        Ok(resp) => resp.map(|b| {
            Either::Left(Watched {
                inner: b,
                stamp: None,
            })
        }),
        Err(e) => Response::builder()
            .status(502)
            .body(Either::Right(Full::new(Bytes::from(format!(
                "upstream: {e}\n"
            )))))
            .expect("static response"),
    }
}

/// The CAs an `https` upstream is verified with: the PEM file named by
/// `FLOOR_CA_FILE` (`bench/load.py --tls`), else none.
fn roots() -> rustls::RootCertStore {
    use rustls::pki_types::{pem::PemObject, CertificateDer};
    let mut roots = rustls::RootCertStore::empty();
    if let Some(path) = std::env::var_os("FLOOR_CA_FILE") {
        for cert in CertificateDer::pem_file_iter(&path).expect("FLOOR_CA_FILE: a PEM file") {
            roots
                .add(cert.expect("FLOOR_CA_FILE: a certificate"))
                .expect("a CA certificate");
        }
    }
    roots
}
