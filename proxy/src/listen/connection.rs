//! One connection served with hyper's connection-level API: which protocol
//! it speaks (h2 by ALPN on TLS, by the client preface on plain TCP: h2c
//! prior knowledge), hyper's builder for it with the limits set, and the
//! loop that drives it until it ends, shutdown or the [`Watchdog`] closes
//! it.

use std::future::Future;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;

use super::access::{self, Access};
use super::in_flight::ConnState;
use super::lifecycle::Serving;
use super::watchdog::{Expiry, Watchdog};
use crate::body::Body;

/// The number of request headers hyper's HTTP/1 server accepts when no
/// limit is set (a request with more gets 431).
const HYPER_MAX_HEADERS: usize = 100;

/// HTTP/2 defences, hyper's defaults written out so they stay put: streams
/// open at once per connection, streams a client may reset before regroup
/// accepts them (rapid reset), and streams regroup may reset for a
/// client's protocol errors before the connection is closed. A header
/// block's size (CONTINUATION floods) is bounded by `maxHeaderBytes`.
const H2_MAX_CONCURRENT_STREAMS: u32 = 200;
const H2_MAX_PENDING_ACCEPT_RESET_STREAMS: usize = 20;
const H2_MAX_LOCAL_ERROR_RESET_STREAMS: usize = 1024;

/// The client connection preface every HTTP/2 connection begins with.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The protocol a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1 (and 1.0).
    Http1,
    /// HTTP/2.
    Http2,
}

impl Protocol {
    /// A TLS connection's, as ALPN chose (no ALPN: HTTP/1.1).
    pub fn from_alpn(alpn: Option<&[u8]>) -> Protocol {
        match alpn {
            Some(b"h2") => Protocol::Http2,
            _ => Protocol::Http1,
        }
    }

    /// What a plain connection's first bytes say, or `None` while they are
    /// still a prefix of the HTTP/2 preface.
    fn from_first_bytes(b: &[u8]) -> Option<Protocol> {
        let n = b.len().min(H2_PREFACE.len());
        if b[..n] != H2_PREFACE[..n] {
            Some(Protocol::Http1)
        } else if n == H2_PREFACE.len() {
            Some(Protocol::Http2)
        } else {
            None
        }
    }
}

/// A plain connection's protocol, from its first bytes, peeked (they stay
/// for hyper to read); `None` if it closed before sending one. Callers
/// bound the wait (`headerReadTimeout`).
pub async fn sniff_plain(stream: &TcpStream) -> std::io::Result<Option<Protocol>> {
    let mut buf = [0u8; 24];
    loop {
        let n = stream.peek(&mut buf).await?;
        if n == 0 {
            return Ok(None);
        }
        if let Some(p) = Protocol::from_first_bytes(&buf[..n]) {
            return Ok(Some(p));
        }
        // Part of the preface: peeking again at once would only see the
        // same bytes (the socket stays readable), so wait a little.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A connection to serve: what hyper reads and writes (the TCP stream or
/// the TLS stream over it), and the TCP socket under it.
pub struct Io<I> {
    io: I,
    fd: std::os::fd::RawFd,
}

impl Io<TokioIo<TcpStream>> {
    /// A plain connection.
    pub fn plain(tcp: TcpStream) -> Self {
        Io {
            fd: tcp.as_raw_fd(),
            io: TokioIo::new(tcp),
        }
    }
}

impl Io<TokioIo<tokio_rustls::server::TlsStream<TcpStream>>> {
    /// A TLS connection.
    pub fn tls(tls: tokio_rustls::server::TlsStream<TcpStream>) -> Self {
        Io {
            fd: tls.get_ref().0.as_raw_fd(),
            io: TokioIo::new(tls),
        }
    }
}

/// Serves one connection through the access checks until it ends: closed
/// by the client, gracefully at shutdown, or by the watchdog (idle, or a
/// request head too slow).
pub async fn serve<I, H, Fut>(
    Io { io, fd }: Io<I>,
    protocol: Protocol,
    peer: SocketAddr,
    serving: &Serving,
    watchdog: &Watchdog,
    access: Arc<Access>,
    handler: H,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    H: Fn(Request<Incoming>, std::time::Instant) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Body>> + Send + 'static,
{
    let limits = &serving.limits;
    let state = ConnState::new(protocol == Protocol::Http2, serving.metrics.clone());
    // HTTP/1.1: the watchdog looks at the socket for the client's close
    // while a request is in flight (hyper reads an HTTP/2 connection
    // throughout).
    let state = Arc::new(match protocol {
        Protocol::Http1 => state.with_peer_fd(fd),
        Protocol::Http2 => state,
    });
    watchdog.watch(state.clone());
    let (svc_state, lifecycle) = (state.clone(), serving.lifecycle.clone());
    let call = move |req| {
        let (access, state, handler) = (access.clone(), svc_state.clone(), handler.clone());
        access::serve(access, state, lifecycle.clone(), req, handler)
    };
    match protocol {
        Protocol::Http1 => {
            let mut b = hyper::server::conn::http1::Builder::new();
            // No hyper timer: the watchdog times the request head.
            b.header_read_timeout(None)
                .max_buf_size(limits.max_header_bytes)
                // No read for the client's EOF while a request is in
                // flight (it cost every request a buffer): the watchdog
                // looks for it instead (`peer_gone`).
                .half_close(true)
                .writev(false);
            // hyper's own limit is the default, 100; set, hyper fills a
            // buffer of that many entries for every request head it reads.
            if limits.max_headers != HYPER_MAX_HEADERS {
                b.max_headers(limits.max_headers);
            }
            let conn = b.serve_connection(io, service_fn(call)).with_upgrades();
            drive(conn, |c| c.graceful_shutdown(), peer, serving, &state).await
        }
        Protocol::Http2 => {
            let mut b = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
            b.max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX))
                .max_concurrent_streams(H2_MAX_CONCURRENT_STREAMS)
                .max_pending_accept_reset_streams(H2_MAX_PENDING_ACCEPT_RESET_STREAMS)
                .max_local_error_reset_streams(H2_MAX_LOCAL_ERROR_RESET_STREAMS);
            // Each request's future boxed: hyper spawns every stream as a
            // task of its own and moves the stream's state, the future
            // inside it, several times on the way (KBs each time); boxed,
            // only a pointer moves (docs/performance.md, "Session 37").
            let svc = service_fn(move |req| Box::pin(call(req)));
            let conn = b.serve_connection(io, svc);
            // Boxed: an HTTP/2 connection's state is KBs, and held inline
            // it would size every HTTP/1.1 connection's task as well.
            Box::pin(drive(
                conn,
                |c| c.graceful_shutdown(),
                peer,
                serving,
                &state,
            ))
            .await
        }
    }
}

/// Polls `conn` to its end; at shutdown or the watchdog's first call, asks
/// it to close gracefully; at the watchdog's second, drops it. Both reach
/// it through the connection's [`ConnSignal`](super::conn_signal::ConnSignal)
/// (shutdown by the watchdog, which wakes each connection): a poll reads
/// two atomics besides the connection.
async fn drive<C>(
    conn: C,
    graceful_shutdown: impl Fn(Pin<&mut C>),
    peer: SocketAddr,
    serving: &Serving,
    state: &ConnState,
) where
    C: Future<Output = Result<(), hyper::Error>>,
{
    tokio::pin!(conn);
    let shutting_down = serving.lifecycle.flag();
    let mut closing = false;
    let mut expirations = 0;
    std::future::poll_fn(|cx| loop {
        if let Poll::Ready(r) = conn.as_mut().poll(cx) {
            if let Err(e) = r {
                tracing::debug!(%peer, "connection ended: {e}");
            }
            return Poll::Ready(());
        }
        // Registered before reading what woke it: no wake-up is lost.
        state.signal.register(cx.waker());
        if !closing && shutting_down.load(Ordering::SeqCst) {
            graceful_shutdown(conn.as_mut());
            closing = true;
            continue;
        }
        let n = state.signal.expirations();
        if n == expirations {
            return Poll::Pending;
        }
        expirations = n;
        let code = state.expiry.load(Ordering::Relaxed);
        let why = Expiry::describe(code);
        // A client gone with its request in flight: nothing to finish.
        if closing || code == Expiry::PeerGone as u8 {
            tracing::debug!(%peer, "{why}: not closed gracefully, dropped");
            return Poll::Ready(());
        }
        tracing::debug!(%peer, "{why}");
        graceful_shutdown(conn.as_mut());
        closing = true;
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_bytes_tell_h2c_prior_knowledge_from_http1() {
        assert_eq!(
            Protocol::from_first_bytes(b"GET / HTTP/1.1\r\n"),
            Some(Protocol::Http1)
        );
        assert_eq!(Protocol::from_first_bytes(b"P"), None);
        assert_eq!(Protocol::from_first_bytes(b"PRI * HTTP/2"), None);
        assert_eq!(
            Protocol::from_first_bytes(b"POST /x"),
            Some(Protocol::Http1)
        );
        assert_eq!(
            Protocol::from_first_bytes(b"PRI * HTTP/1.1\r\n"),
            Some(Protocol::Http1)
        );
        assert_eq!(
            Protocol::from_first_bytes(H2_PREFACE),
            Some(Protocol::Http2)
        );
        let mut more = H2_PREFACE.to_vec();
        more.extend_from_slice(b"\0\0\x12\x04");
        assert_eq!(Protocol::from_first_bytes(&more), Some(Protocol::Http2));
    }

    #[tokio::test]
    async fn an_http1_connections_future_holds_no_http2_state() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let _client = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (stream, peer) = l.accept().await.unwrap();
        let serving = Serving::default();
        let watchdog = Watchdog::start(&serving.limits, &serving.lifecycle);
        let handler = |_: Request<Incoming>, _| async { Response::new(crate::body::empty()) };
        let access = Arc::new(Access::front());
        let conn = serve(
            Io::plain(stream),
            Protocol::Http1,
            peer,
            &serving,
            &watchdog,
            access,
            handler,
        );
        // hyper's HTTP/2 server connection alone is more than this; held
        // inline (not boxed), it sized every HTTP/1.1 connection.
        let size = std::mem::size_of_val(&conn);
        assert!(size < 3 * 1024, "{size} bytes");
    }

    #[test]
    fn alpn_h2_is_http2_anything_else_http1() {
        assert_eq!(Protocol::from_alpn(Some(b"h2")), Protocol::Http2);
        assert_eq!(Protocol::from_alpn(Some(b"http/1.1")), Protocol::Http1);
        assert_eq!(Protocol::from_alpn(None), Protocol::Http1);
    }
}
