//! regroup's connections to the apiserver, on hyper's connection-level
//! client API (`hyper::client::conn::http1` and `http2`) with a small pool
//! of its own, instead of a general-purpose pooled client: one upstream, so
//! no pool key to hash, no `Uri` rebuilt, no task spawned to return a
//! connection.
//!
//! - h2 (chosen by TLS ALPN, as a kube-apiserver offers, unless
//!   `upstream.http2: never` offers HTTP/1.1 only): a short list of
//!   multiplexed connections, usually one. A request takes the first with
//!   fewer streams open (`streams.rs`) than the lower of
//!   `limits.upstreamMaxStreamsPerConnection` and the server's own limit;
//!   when every one is full (a hundred open watches) another is opened, as
//!   client-go's transport does, instead of hyper queueing the request
//!   until a stream ends. Closed connections leave the list; an extra one
//!   with no stream open for `limits.upstreamIdleConnectionTimeout` is
//!   closed (the first stays).
//!   Each is pinged when silent and closed when the ping goes unanswered
//!   (`health.rs`).
//! - HTTP/1.1: a list of connections, the most recently used last; one
//!   takes a request when hyper says it is ready (its previous response
//!   read to the end). A checkout looks at the few most recently used
//!   (short requests finish first; watches sink to the front), then sweeps
//!   them all (closed ones out, idle ones past the idle timeout or past 64
//!   closed) before opening a new connection, which costs far more than a
//!   sweep.
//! - Idle connections are closed on a timer of the pool's own too (the
//!   sweeper, [`State::sweep`]): without traffic no request would come to
//!   close them. It runs only while the pool has a connection it may close
//!   (an HTTP/1.1 one, an h2 one beyond the first), ticking at a
//!   sixteenth of the idle timeout; a request never touches it.
//! - `upstream.http2: watches` builds two pools (`super::Clients`): one
//!   whose connector offers h2 for the watches, one offering HTTP/1.1 only
//!   for everything else. A pool does not know which it is.
//! - Each connection is driven on its own task; dropping the pool (a new
//!   client certificate or CA) lets each connection finish what it carries
//!   and close.
//! - A request hyper hands back unsent (the connection closed as it was
//!   taken) is sent once more on a new connection, whatever its method: it
//!   never reached the apiserver. `super::Upstream::send` adds the retry of
//!   safe requests whose connection closed after they were sent.

use std::future::Future as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use futures_util::FutureExt as _;
use http::header::{HeaderValue, HOST};
use http::{Method, Request, Response, Uri};
use hyper::client::conn::{http1, http2, TrySendError};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::Connection as _;
use hyper_util::rt::TokioIo;
use tower_service::Service as _;

use super::dial::Dial;
use super::health::HealthCheck;
use super::server_settings::SettingsSeen;
use super::streams::{ResponseBody, StreamGuard, Streams};
use super::tallies::{Counted, Tallies};
use super::{Body, BoxError};

/// Idle HTTP/1.1 connections kept at most; more are closed.
const MAX_IDLE: usize = 64;
/// Busy connections looked at before sweeping them all.
const QUICK_LOOK: usize = 16;

/// Why a request got no response from the pool.
#[derive(Debug)]
pub enum ClientError {
    /// Connecting (TCP, the proxy tunnel, TLS) failed.
    Connect(BoxError),
    /// The HTTP handshake on a new connection failed.
    Handshake(hyper::Error),
    /// The connection failed while the request was sent or answered.
    Send(hyper::Error),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ClientError::Connect(_) => "connecting to the upstream failed",
            ClientError::Handshake(_) => "the HTTP handshake with the upstream failed",
            ClientError::Send(_) => "the upstream connection failed",
        })
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientError::Connect(e) => Some(&**e),
            ClientError::Handshake(e) | ClientError::Send(e) => Some(e),
        }
    }
}

/// The connections to one upstream with one TLS identity.
pub(super) struct Pool {
    connector: HttpsConnector<Dial>,
    /// `scheme://authority`, what the connector dials.
    dst: Uri,
    /// `Host` of HTTP/1.1 requests, as the URL names the server.
    host: HeaderValue,
    /// HTTP/1.1 connections that keep their socket for protocol upgrades.
    upgrades: bool,
    /// The h2 connection's ping.
    health: HealthCheck,
    /// The upstream's tallies (connections, streams, pings).
    tallies: Arc<Tallies>,
    /// Streams regroup opens on one h2 connection at most
    /// (`limits.upstreamMaxStreamsPerConnection`).
    max_streams: usize,
    /// An idle HTTP/1.1 connection unused this long is closed, and so is an
    /// extra h2 connection with no stream open
    /// (`limits.upstreamIdleConnectionTimeout`).
    idle: Duration,
    /// Shared with the sweeper, which holds it weakly: dropping the pool
    /// ends the sweeper too.
    state: Arc<Mutex<State>>,
}

/// One h2 connection.
struct H2 {
    send: http2::SendRequest<Body>,
    streams: Arc<Streams>,
    /// When a request last took a stream on it, or the sweeper last saw a
    /// stream open (kept only while there is more than one connection: it
    /// closes idle extras).
    used: Instant,
    /// Until the server's limit is read: no room for any request but the
    /// one the connection was opened for.
    unsettled: Option<Unsettled>,
}

/// An h2 connection whose server's limit is not read yet
/// (`server_settings.rs`).
struct Unsettled {
    /// Raised by the socket once hyper has applied the server's SETTINGS.
    seen: Arc<AtomicBool>,
    /// The server's limit as hyper's connection knows it.
    read_limit: Box<dyn Fn() -> usize + Send + Sync>,
}

impl H2 {
    /// Reads the server's limit once its SETTINGS are applied: here, by
    /// the request looking for room, not when the connection's task is
    /// next scheduled.
    fn settle(&mut self) {
        if let Some(u) = &self.unsettled {
            if u.seen.load(Ordering::Acquire) {
                self.streams.set_peer_max((u.read_limit)());
                self.unsettled = None;
            }
        }
    }
}

#[derive(Default)]
struct State {
    /// h2 connections, the oldest first: requests fill them in order.
    h2: Vec<H2>,
    /// HTTP/1.1 connections, each with when it last sent a request (or the
    /// sweeper last saw it busy): the most recent last.
    h1: Vec<(http1::SendRequest<Body>, Instant)>,
    /// Whether the sweeper runs.
    sweeping: bool,
}

impl State {
    /// Closes the connections idle for `idle` at `now`: HTTP/1.1 ones
    /// ready for a request, h2 ones beyond the first with no stream open
    /// (the first stays, as the one a request finds). Busy ones are
    /// stamped `now`: they are idle at the earliest from then. Whether any
    /// connection it may close later is left.
    fn sweep(&mut self, idle: Duration, now: Instant) -> bool {
        self.h1.retain_mut(|(s, last)| {
            if s.is_closed() {
                return false;
            }
            if !s.is_ready() {
                *last = now;
            }
            now.saturating_duration_since(*last) < idle
        });
        self.h2.retain(|c| !c.send.is_closed());
        let mut first = true;
        self.h2.retain_mut(|c| {
            if std::mem::take(&mut first) {
                return true;
            }
            if c.streams.open() > 0 {
                c.used = now;
            }
            now.saturating_duration_since(c.used) < idle
        });
        !self.h1.is_empty() || self.h2.len() > 1
    }
}

/// A connection taken from the pool.
enum Taken {
    H1(http1::SendRequest<Body>),
    H2(http2::SendRequest<Body>, Option<StreamGuard>),
}

/// Why a pool can't dial the server URL.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// The URL has no host.
    #[error("no host")]
    NoHost,
    /// The URL has no scheme.
    #[error("no scheme")]
    NoScheme,
    /// The host can't be a `Host` header.
    #[error("host: {0}")]
    Host(#[source] http::header::InvalidHeaderValue),
    /// The URL to dial can't be built.
    #[error("{0}")]
    Uri(#[from] http::Error),
}

impl Pool {
    /// `upgrades`: HTTP/1.1 connections ready for `101 Switching
    /// Protocols` (the connector must offer HTTP/1.1 only).
    pub(super) fn new(
        connector: HttpsConnector<Dial>,
        dst: &Uri,
        upgrades: bool,
        health: HealthCheck,
        tallies: Arc<Tallies>,
        max_streams: usize,
        idle: Duration,
    ) -> Result<Pool, PoolError> {
        let host = dst.host().ok_or(PoolError::NoHost)?;
        let default_port = match dst.scheme_str() {
            Some("https") => 443,
            _ => 80,
        };
        let host = match dst.port_u16() {
            Some(p) if p != default_port => HeaderValue::from_str(&format!("{host}:{p}")),
            _ => HeaderValue::from_str(host),
        }
        .map_err(PoolError::Host)?;
        let dst = Uri::builder()
            .scheme(dst.scheme().cloned().ok_or(PoolError::NoScheme)?)
            .authority(dst.authority().cloned().ok_or(PoolError::NoHost)?)
            .path_and_query("/")
            .build()?;
        Ok(Pool {
            connector,
            dst,
            host,
            upgrades,
            health,
            tallies,
            max_streams: max_streams.max(1),
            idle,
            state: Arc::default(),
        })
    }

    /// Sends `req` (its URI absolute, the upstream's) and waits for the
    /// response headers.
    pub(super) async fn send(
        &self,
        req: Request<Body>,
    ) -> Result<Response<ResponseBody>, ClientError> {
        // Connecting is boxed: its future (dialing, TLS, the handshake) is
        // kilobytes, and this one is moved with every request's future.
        let (taken, reused) = match self.take() {
            Some(t) => (t, true),
            None => (Box::pin(self.connect()).await?, false),
        };
        match self.send_on(taken, req).await {
            Ok(r) => Ok(r),
            Err(mut e) => match e.take_message() {
                Some(req) if reused => {
                    tracing::debug!("upstream connection closed as it was taken: on a new one");
                    let taken = Box::pin(self.connect()).await?;
                    self.send_on(taken, req)
                        .await
                        .map_err(|e| ClientError::Send(e.into_error()))
                }
                _ => Err(ClientError::Send(e.into_error())),
            },
        }
    }

    async fn send_on(
        &self,
        taken: Taken,
        mut req: Request<Body>,
    ) -> Result<Response<ResponseBody>, TrySendError<Request<Body>>> {
        match taken {
            // The stream stays counted until the body ends; a failed or
            // dropped send drops the guard with it.
            Taken::H2(mut s, stream) => Ok(s
                .try_send_request(req)
                .await?
                .map(|b| ResponseBody::new(b, stream))),
            Taken::H1(mut s) => {
                req.headers_mut()
                    .entry(HOST)
                    .or_insert_with(|| self.host.clone());
                origin_form(&mut req);
                let sent = s.try_send_request(req);
                self.put_back(s);
                Ok(sent.await?.map(|b| ResponseBody::new(b, None)))
            }
        }
    }

    /// A connection that takes a request now, if the pool has one.
    fn take(&self) -> Option<Taken> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if !st.h2.is_empty() {
            return self.take_h2(&mut st.h2);
        }
        let h1 = &mut st.h1;
        let n = h1.len();
        for i in (n.saturating_sub(QUICK_LOOK)..n).rev() {
            if h1[i].0.is_ready() {
                let (s, last) = h1.remove(i);
                if last.elapsed() <= self.idle {
                    return Some(Taken::H1(s));
                }
                break;
            }
        }
        // The sweep: closed connections out, idle ones past the limits
        // closed, the most recently used idle one taken.
        let mut idle = 0;
        let mut found = None;
        for (s, last) in std::mem::take(h1).into_iter().rev() {
            if s.is_closed() {
                continue;
            }
            if s.is_ready() {
                if last.elapsed() > self.idle || idle >= MAX_IDLE {
                    continue;
                }
                if found.is_none() {
                    found = Some(s);
                    continue;
                }
                idle += 1;
            }
            h1.push((s, last));
        }
        h1.reverse();
        found.map(Taken::H1)
    }

    /// A stream on the first h2 connection with room; `None` when every one
    /// is full (or closed): the caller opens another.
    fn take_h2(&self, h2: &mut Vec<H2>) -> Option<Taken> {
        // The common case, one connection, without a clock read.
        if let [c] = h2.as_mut_slice() {
            if !c.send.is_closed() {
                c.settle();
                let stream = c.streams.take(self.max_streams)?;
                return Some(Taken::H2(c.send.clone(), Some(stream)));
            }
        }
        let now = Instant::now();
        h2.retain(|c| !c.send.is_closed());
        h2.iter_mut().for_each(H2::settle);
        let first = h2
            .iter()
            .position(|c| c.streams.has_room(self.max_streams))?;
        let c = &mut h2[first];
        let stream = c.streams.take(self.max_streams);
        c.used = now;
        let taken = Taken::H2(c.send.clone(), stream);
        // Requests fill the connections in order: one past the first with
        // room is needed only when that one fills, so an idle one is closed.
        let mut i = 0;
        h2.retain(|c| {
            i += 1;
            i <= first + 1 || c.streams.open() > 0 || now - c.used <= self.idle
        });
        Some(taken)
    }

    /// An HTTP/1.1 connection that just sent a request.
    fn put_back(&self, s: http1::SendRequest<Body>) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.h1.push((s, Instant::now()));
    }

    /// Starts the sweeper unless it runs (under the pool's lock).
    fn sweep_later(&self, st: &mut State) {
        if std::mem::replace(&mut st.sweeping, true) {
            return;
        }
        let state = Arc::downgrade(&self.state);
        let idle = self.idle;
        tokio::spawn(sweeper(state, idle));
    }

    /// A new connection, its driver spawned.
    async fn connect(&self) -> Result<Taken, ClientError> {
        let mut connector = self.connector.clone();
        let io = connector
            .call(self.dst.clone())
            .await
            .map_err(ClientError::Connect)?;
        if io.connected().is_negotiated_h2() {
            let (io, seen) = SettingsSeen::new(TokioIo::new(io));
            let (send, conn) = self
                .health
                .builder()
                .handshake(TokioIo::new(io))
                .await
                .map_err(ClientError::Handshake)?;
            let health = self.health;
            // No room for other requests until the server's limit is known.
            let streams = Streams::new(0);
            self.tallies.streams_opened(&streams);
            let limit = streams.clone();
            let counted = Counted::new(&self.tallies, true);
            let tallies = self.tallies.clone();
            // Shared with the pool until the server's limit is read there;
            // locked by the driving task for each poll (uncontended).
            let conn = Arc::new(Mutex::new(Box::pin(conn)));
            let driven = conn.clone();
            let unsettled = Unsettled {
                seen: seen.clone(),
                read_limit: Box::new(move || {
                    let c = conn.lock().unwrap_or_else(|p| p.into_inner());
                    c.current_max_send_streams()
                }),
            };
            tokio::spawn(async move {
                let _counted = counted;
                // The server's limit after each poll once its first SETTINGS
                // are applied: it may change.
                let ended = std::future::poll_fn(|cx| {
                    let mut c = driven.lock().unwrap_or_else(|p| p.into_inner());
                    let polled = c.as_mut().poll(cx);
                    if seen.load(Ordering::Acquire) {
                        limit.set_peer_max(c.current_max_send_streams());
                    }
                    polled
                })
                .await;
                if let Err(e) = ended {
                    health.ended(&e, &tallies);
                }
            });
            // This request's stream, counted whatever the limits say: the
            // server's SETTINGS may not have arrived yet, and the
            // connection was opened for it.
            let stream = streams.take_first();
            let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            st.h2.retain(|c| !c.send.is_closed());
            st.h2.iter_mut().for_each(H2::settle);
            // Kept for the next requests unless another connection opened
            // meanwhile has room (a burst of requests each dialing one):
            // then this one carries its one request and closes.
            if st.h2.iter().all(|c| !c.streams.has_room(self.max_streams)) {
                st.h2.push(H2 {
                    send: send.clone(),
                    streams,
                    used: Instant::now(),
                    unsettled: Some(unsettled),
                });
                if st.h2.len() > 1 {
                    self.sweep_later(&mut st);
                }
            }
            return Ok(Taken::H2(send, Some(stream)));
        }
        let (send, conn) = http1::handshake(io).await.map_err(ClientError::Handshake)?;
        let counted = Counted::new(&self.tallies, false);
        // `map`, not an `async` block awaiting it: the block would hold
        // the connection's future twice (as captured and as awaited), for
        // as long as the connection lives.
        let ended = move |r: Result<(), hyper::Error>| {
            drop(counted);
            if let Err(e) = r {
                tracing::debug!("upstream connection ended: {e}");
            }
        };
        if self.upgrades {
            tokio::spawn(conn.with_upgrades().map(ended));
        } else {
            tokio::spawn(conn.map(ended));
        }
        // It joins the list when its request is sent: the sweeper will
        // find it there.
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        self.sweep_later(&mut st);
        Ok(Taken::H1(send))
    }
}

/// The pool's sweeper: every sixteenth of `idle`, closes the connections
/// idle that long ([`State::sweep`]); ends when the pool has no connection
/// it may close (the next one that may starts it again) or is dropped.
async fn sweeper(state: Weak<Mutex<State>>, idle: Duration) {
    let tick = (idle / 16).max(Duration::from_millis(10));
    loop {
        tokio::time::sleep(tick).await;
        let Some(state) = state.upgrade() else {
            return;
        };
        let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
        if !st.sweep(idle, Instant::now()) {
            st.sweeping = false;
            return;
        }
    }
}

/// HTTP/1.1 requests carry the path and query only (origin form); h2 keeps
/// the absolute URI for its pseudo-headers.
fn origin_form(req: &mut Request<Body>) {
    let uri = req.uri();
    if uri.scheme().is_none() {
        return;
    }
    let pq = match uri.path_and_query() {
        Some(pq) if *req.method() != Method::CONNECT => pq.clone(),
        _ => return,
    };
    let mut parts = http::uri::Parts::default();
    parts.path_and_query = Some(pq);
    if let Ok(u) = Uri::from_parts(parts) {
        *req.uri_mut() = u;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use http_body_util::BodyExt as _;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// A plain-HTTP upstream: answers each request head with `body`
    /// (`hold`: the first response's body is sent only after the test says
    /// so). Records every request head; counts connections.
    struct Server {
        url: Uri,
        heads: Arc<Mutex<Vec<String>>>,
        accepted: Arc<AtomicUsize>,
        release: Arc<tokio::sync::Notify>,
    }

    async fn server(hold: bool) -> Server {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url: Uri = format!("http://{}", l.local_addr().unwrap())
            .parse()
            .unwrap();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let accepted = Arc::new(AtomicUsize::new(0));
        let release = Arc::new(tokio::sync::Notify::new());
        let (h, a, r) = (heads.clone(), accepted.clone(), release.clone());
        tokio::spawn(async move {
            loop {
                let (mut s, _) = l.accept().await.unwrap();
                let n = a.fetch_add(1, Ordering::SeqCst);
                let (h, r) = (h.clone(), r.clone());
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut b = [0u8; 1024];
                    loop {
                        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                            match s.read(&mut b).await {
                                Ok(0) | Err(_) => return,
                                Ok(k) => buf.extend_from_slice(&b[..k]),
                            }
                        }
                        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                        let head: Vec<u8> = buf.drain(..end).collect();
                        h.lock().unwrap().push(String::from_utf8(head).unwrap());
                        if hold && n == 0 {
                            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n")
                                .await
                                .unwrap();
                            r.notified().await;
                            s.write_all(b"ok").await.unwrap();
                        } else {
                            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                                .await
                                .unwrap();
                        }
                    }
                });
            }
        });
        Server {
            url,
            heads,
            accepted,
            release,
        }
    }

    fn pool(url: &Uri) -> Pool {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_all_versions()
            .wrap_connector(Dial::new(http, None).unwrap());
        Pool::new(
            connector,
            url,
            false,
            HealthCheck::from(&regroup_config::Limits::default()),
            Default::default(),
            100,
            Duration::from_secs(90),
        )
        .unwrap()
    }

    fn get(url: &Uri, path: &str) -> Request<Body> {
        let mut r = Request::new(crate::body::empty());
        *r.uri_mut() = format!("{url}{}", path.trim_start_matches('/'))
            .parse()
            .unwrap();
        r
    }

    use hyper_util::client::legacy::connect::HttpConnector;

    #[tokio::test]
    async fn sequential_requests_reuse_one_connection_in_origin_form_with_host() {
        let s = server(false).await;
        let p = pool(&s.url);
        for i in 0..3 {
            let resp = p
                .send(get(&s.url, &format!("/api/v1/x{i}?a=b")))
                .await
                .unwrap();
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(&body[..], b"ok");
        }
        assert_eq!(s.accepted.load(Ordering::SeqCst), 1);
        let heads = s.heads.lock().unwrap().clone();
        assert_eq!(heads.len(), 3);
        assert!(
            heads[2].starts_with("GET /api/v1/x2?a=b HTTP/1.1\r\n"),
            "{}",
            heads[2]
        );
        let host = format!("host: {}\r\n", s.url.authority().unwrap());
        assert!(
            heads[2].to_ascii_lowercase().contains(&host),
            "{}",
            heads[2]
        );
    }

    #[tokio::test]
    async fn a_connection_still_streaming_a_body_is_not_taken() {
        let s = server(true).await;
        let p = pool(&s.url);
        // The first response's body is held back: its connection is busy.
        let first = p.send(get(&s.url, "/watch")).await.unwrap();
        let second = p.send(get(&s.url, "/b")).await.unwrap();
        let body = second.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"ok");
        assert_eq!(s.accepted.load(Ordering::SeqCst), 2);
        s.release.notify_one();
        let body = first.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"ok");
        // Both are idle now: the next request opens none.
        p.send(get(&s.url, "/c")).await.unwrap();
        assert_eq!(s.accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_closed_connection_is_replaced() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url: Uri = format!("http://{}", l.local_addr().unwrap())
            .parse()
            .unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let a = accepted.clone();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = l.accept().await.unwrap();
                a.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut b = [0u8; 1024];
                    let _ = s.read(&mut b).await;
                    // One answer, then the connection is closed.
                    let _ = s
                        .write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                        )
                        .await;
                });
            }
        });
        let p = pool(&url);
        for _ in 0..2 {
            let resp = p.send(get(&url, "/x")).await.unwrap();
            resp.into_body().collect().await.unwrap();
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn nothing_listening_is_a_connect_error() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url: Uri = format!("http://{}", l.local_addr().unwrap())
            .parse()
            .unwrap();
        drop(l);
        let err = pool(&url).send(get(&url, "/x")).await.unwrap_err();
        assert!(matches!(err, ClientError::Connect(_)), "{err:?}");
    }
}
