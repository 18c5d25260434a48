//! Listeners and connections: the accept loops of the sidecar (plain HTTP
//! and TLS) for the app, the aggregated front for the cluster and the
//! webhook listener. Every connection is bounded (`limits:`): header size,
//! count and read time, idle time, connections per listener; every request
//! passes [`access`] before the stack sees it, and counts as in flight
//! ([`in_flight`]) until its response ends.

pub mod access;
pub mod in_flight;
pub mod lifecycle;
pub mod path_check;
pub mod serving_cert;
pub mod tls;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::body::Body;
use crate::serve::{Access, Proxy, Serving};

/// The number of request headers hyper's HTTP/1 server accepts when no
/// limit is set (a request with more gets 431).
const HYPER_MAX_HEADERS: usize = 100;

/// Accepts connections on `listener` and serves each with `proxy`, HTTP/1.1
/// and HTTP/2 (h2c prior knowledge) alike, until the task is dropped; with
/// the default limits and `Host` check.
pub async fn serve_plain(listener: TcpListener, proxy: Arc<Proxy>) {
    let hosts = regroup_config::schema::default_allowed_hosts();
    serve_sidecar(
        listener,
        None,
        proxy,
        Serving::default(),
        Access::loopback(hosts),
    )
    .await
}

/// Like [`serve_plain`], over TLS (h2 and http/1.1 by ALPN). Bound beyond
/// loopback, callers must bring their own credential.
pub async fn serve_tls(listener: TcpListener, tls: Arc<rustls::ServerConfig>, proxy: Arc<Proxy>) {
    let access = match listener.local_addr() {
        Ok(a) if a.ip().is_loopback() => {
            Access::loopback(regroup_config::schema::default_allowed_hosts())
        }
        _ => Access::beyond_loopback(false),
    };
    serve_sidecar(listener, Some(tls), proxy, Serving::default(), access).await
}

/// The sidecar's listeners: plain (`tls: None`) or TLS, serving whom
/// `access` says, within `serving`'s limits, until shutdown.
pub async fn serve_sidecar(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    proxy: Arc<Proxy>,
    serving: Serving,
    access: Access,
) {
    let access = Arc::new(access);
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let s = serving.clone();
    accept_loop(listener, serving, access.listener, move |stream, peer| {
        let (proxy, acceptor, serving, access) =
            (proxy.clone(), acceptor.clone(), s.clone(), access.clone());
        let handler = move |req: Request<Incoming>| {
            let proxy = proxy.clone();
            async move { proxy.handle(req).await.unwrap_or_else(|e| match e {}) }
        };
        async move {
            match acceptor {
                None => {
                    serve_connection(TokioIo::new(stream), peer, &serving, access, handler).await
                }
                Some(acceptor) => {
                    let timeout = serving.limits.header_read_timeout;
                    match tokio::time::timeout(timeout, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            serve_connection(TokioIo::new(tls), peer, &serving, access, handler)
                                .await
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, "TLS handshake failed: {e}"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                }
            }
        }
    })
    .await
}

/// The aggregated front: TLS whose configuration may change (certificate
/// and request-header CA reloads), each request authenticated with the
/// connection's verified client certificate.
pub async fn serve_front(
    listener: TcpListener,
    tls: Arc<crate::serve::front::tls::ReloadingConfig>,
    proxy: Arc<Proxy>,
) {
    serve_front_with(listener, tls, proxy, Serving::default()).await
}

/// Like [`serve_front`], within `serving`'s limits, until shutdown.
pub async fn serve_front_with(
    listener: TcpListener,
    tls: Arc<crate::serve::front::tls::ReloadingConfig>,
    proxy: Arc<Proxy>,
    serving: Serving,
) {
    let access = Arc::new(Access::front());
    let s = serving.clone();
    accept_loop(listener, serving, "front", move |stream, peer| {
        let (proxy, acceptor, serving, access) =
            (proxy.clone(), tls.acceptor(), s.clone(), access.clone());
        async move {
            let timeout = serving.limits.header_read_timeout;
            let tls = match tokio::time::timeout(timeout, acceptor.accept(stream)).await {
                Ok(Ok(t)) => t,
                Ok(Err(e)) => {
                    tracing::info!(%peer, "front TLS handshake failed (untrusted or invalid client certificate?): {e}");
                    return;
                }
                Err(_) => {
                    tracing::info!(%peer, "front TLS handshake timed out");
                    return;
                }
            };
            let certs: Arc<Option<Vec<rustls::pki_types::CertificateDer<'static>>>> =
                Arc::new(tls.get_ref().1.peer_certificates().map(|c| c.iter().map(|c| c.clone().into_owned()).collect()));
            let handler = move |req: Request<Incoming>| {
                let (proxy, certs) = (proxy.clone(), certs.clone());
                async move {
                    proxy
                        .handle_with_peer(req, certs)
                        .await
                        .unwrap_or_else(|e| match e {})
                }
            };
            serve_connection(TokioIo::new(tls), peer, &serving, access, handler).await
        }
    })
    .await
}

/// The webhook listener: TLS (a client certificate required when the
/// configuration asks for one, verified in the handshake), each call served
/// by `webhooks`, within `serving`'s limits, until shutdown.
pub async fn serve_webhooks(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    webhooks: Arc<crate::serve::webhook::Webhooks>,
    serving: Serving,
) {
    let access = Arc::new(Access::webhooks());
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let s = serving.clone();
    accept_loop(listener, serving, "webhooks", move |stream, peer| {
        let (webhooks, acceptor, serving, access) =
            (webhooks.clone(), acceptor.clone(), s.clone(), access.clone());
        async move {
            let timeout = serving.limits.header_read_timeout;
            let tls = match tokio::time::timeout(timeout, acceptor.accept(stream)).await {
                Ok(Ok(t)) => t,
                Ok(Err(e)) => {
                    tracing::info!(%peer, "webhooks: TLS handshake failed (no or untrusted client certificate?): {e}");
                    crate::serve::observe::metrics::metrics().error("webhooks", "tls_handshake");
                    return;
                }
                Err(_) => {
                    tracing::info!(%peer, "webhooks: TLS handshake timed out");
                    return;
                }
            };
            let handler = move |req: Request<Incoming>| {
                let webhooks = webhooks.clone();
                async move { webhooks.handle(req).await }
            };
            serve_connection(TokioIo::new(tls), peer, &serving, access, handler).await
        }
    })
    .await
}

/// Accepts until shutdown, one task per connection, at most
/// `limits.maxConnections` at once (then it stops accepting until one
/// closes: the kernel's backlog holds the rest).
async fn accept_loop<F, Fut>(
    listener: TcpListener,
    serving: Serving,
    name: &'static str,
    mut on_connection: F,
) where
    F: FnMut(tokio::net::TcpStream, SocketAddr) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let max = serving.limits.max_connections;
    let slots = Arc::new(Semaphore::new(max));
    serving.lifecycle.register(slots.clone(), max as u32);
    let mut shutdown = serving.lifecycle.subscribe();
    let mut at_limit = false;
    loop {
        if slots.available_permits() == 0 {
            if !at_limit {
                tracing::warn!(
                    listener = name,
                    max,
                    "connection limit reached (limits.maxConnections): not accepting until one closes"
                );
                crate::serve::observe::metrics::metrics().error(name, "connection_limit");
            }
            at_limit = true;
        } else {
            at_limit = false;
        }
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = lifecycle::fired(&mut shutdown) => break,
        };
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    // Out of file descriptors and the like: don't spin.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = lifecycle::fired(&mut shutdown) => break,
        };
        let _ = stream.set_nodelay(true);
        let conn = on_connection(stream, peer);
        tokio::spawn(async move {
            conn.await;
            drop(permit);
        });
    }
    tracing::info!(listener = name, "stopped accepting");
}

/// Serves one connection through the guard, closing it when idle for
/// `limits.idleTimeout` or (gracefully) at shutdown.
async fn serve_connection<I, H, Fut>(
    io: I,
    peer: SocketAddr,
    serving: &Serving,
    access: Arc<Access>,
    handler: H,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    H: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<Body>> + Send + 'static,
{
    let limits = &serving.limits;
    let state = Arc::new(in_flight::ConnState::default());
    let (svc_state, lifecycle) = (state.clone(), serving.lifecycle.clone());
    let svc = service_fn(move |req| {
        let (access, state, handler) = (access.clone(), svc_state.clone(), handler.clone());
        let shutdown = lifecycle.subscribe();
        async move { Ok::<_, Infallible>(access::serve(&access, state, shutdown, req, handler).await) }
    });
    let mut b = auto::Builder::new(TokioExecutor::new());
    b.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes);
    // hyper's own limit is the default, 100; set, hyper fills a buffer of
    // that many entries for every request head it reads.
    if limits.max_headers != HYPER_MAX_HEADERS {
        b.http1().max_headers(limits.max_headers);
    }
    b.http2()
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX));
    let conn = b.serve_connection_with_upgrades(io, svc);
    tokio::pin!(conn);
    let mut shutdown = serving.lifecycle.subscribe();
    let idle = limits.idle_timeout;
    let opened = std::time::Instant::now();
    let first_request = limits.header_read_timeout;
    let period =
        (idle.min(first_request) / 4).clamp(Duration::from_millis(10), Duration::from_secs(5));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut closing = false;
    loop {
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(%peer, "connection ended: {e}");
                }
                break;
            }
            _ = lifecycle::fired(&mut shutdown), if !closing => {
                conn.as_mut().graceful_shutdown();
                closing = true;
            }
            _ = tick.tick(), if !closing => {
                // A connection that sends nothing at all (hyper's header
                // timer starts only once it knows the protocol) is a
                // slowloris too.
                if state.never_used() && opened.elapsed() >= first_request {
                    tracing::debug!(%peer, "closing a connection with no request (limits.headerReadTimeout)");
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                } else if state.idle_for() >= idle {
                    tracing::debug!(%peer, "closing an idle connection (limits.idleTimeout)");
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                }
            }
        }
    }
}
