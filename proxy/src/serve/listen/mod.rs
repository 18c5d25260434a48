//! Listeners and connections: the accept loops of the sidecar (plain HTTP
//! and TLS) for the app, the aggregated front for the cluster and the
//! webhook listener. Every connection is bounded (`limits:`): header size,
//! count and read time, idle time, connections per listener; every request
//! passes [`access`] before the stack sees it, and counts as in flight
//! ([`in_flight`]) until its response ends. Each connection is served by
//! hyper's connection-level API ([`connection`]: HTTP/1.1, h2 by ALPN or
//! h2c prior knowledge) and timed by its listener's [`watchdog`].

pub mod access;
pub mod coarse_clock;
pub mod connection;
pub mod in_flight;
pub mod lifecycle;
pub mod path_check;
pub mod serving_cert;
pub mod tls;
pub mod watchdog;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::Request;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::serve::{Access, Proxy, Serving};
use connection::Protocol;
use watchdog::Watchdog;

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
    accept_loop(listener, serving, access.listener, move |stream, peer, watchdog| {
        let (proxy, acceptor, serving, access) =
            (proxy.clone(), acceptor.clone(), s.clone(), access.clone());
        let handler = move |req: Request<Incoming>| {
            let proxy = proxy.clone();
            async move { proxy.handle(req).await.unwrap_or_else(|e| match e {}) }
        };
        async move {
            let timeout = serving.limits.header_read_timeout;
            match acceptor {
                None => {
                    let protocol =
                        match tokio::time::timeout(timeout, connection::sniff_plain(&stream)).await
                        {
                            Ok(Ok(Some(p))) => p,
                            Ok(Ok(None)) => return,
                            Ok(Err(e)) => return tracing::debug!(%peer, "connection ended: {e}"),
                            Err(_) => {
                                return tracing::debug!(%peer, "closing a connection with no request (limits.headerReadTimeout)")
                            }
                        };
                    let io = TokioIo::new(stream);
                    connection::serve(io, protocol, peer, &serving, &watchdog, access, handler)
                        .await
                }
                Some(acceptor) => match tokio::time::timeout(timeout, acceptor.accept(stream)).await {
                    Ok(Ok(tls)) => {
                        let protocol = Protocol::from_alpn(tls.get_ref().1.alpn_protocol());
                        let io = TokioIo::new(tls);
                        connection::serve(io, protocol, peer, &serving, &watchdog, access, handler)
                            .await
                    }
                    Ok(Err(e)) => tracing::debug!(%peer, "TLS handshake failed: {e}"),
                    Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                },
            }
        }
    })
    .await
}

/// The aggregated front: TLS whose configuration may change (certificate
/// and request-header CA reloads), each request authenticated with the
/// connection's verified client certificate; within `serving`'s limits,
/// until shutdown.
pub async fn serve_front(
    listener: TcpListener,
    tls: Arc<crate::serve::front::tls::ReloadingConfig>,
    proxy: Arc<Proxy>,
    serving: Serving,
) {
    let access = Arc::new(Access::front());
    let s = serving.clone();
    accept_loop(listener, serving, "front", move |stream, peer, watchdog| {
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
            let certs: Option<Arc<Vec<rustls::pki_types::CertificateDer<'static>>>> =
                tls.get_ref().1.peer_certificates().map(|c| Arc::new(c.iter().map(|c| c.clone().into_owned()).collect()));
            let handler = move |req: Request<Incoming>| {
                let (proxy, certs) = (proxy.clone(), certs.clone());
                async move {
                    proxy
                        .handle_with_peer(req, certs)
                        .await
                        .unwrap_or_else(|e| match e {})
                }
            };
            let protocol = Protocol::from_alpn(tls.get_ref().1.alpn_protocol());
            let io = TokioIo::new(tls);
            connection::serve(io, protocol, peer, &serving, &watchdog, access, handler).await
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
    accept_loop(listener, serving, "webhooks", move |stream, peer, watchdog| {
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
            let protocol = Protocol::from_alpn(tls.get_ref().1.alpn_protocol());
            let io = TokioIo::new(tls);
            connection::serve(io, protocol, peer, &serving, &watchdog, access, handler).await
        }
    })
    .await
}

/// Accepts until shutdown, one task per connection, at most
/// `limits.maxConnections` at once (then it stops accepting until one
/// closes: the kernel's backlog holds the rest). The listener's connections
/// share one [`Watchdog`].
async fn accept_loop<F, Fut>(
    listener: TcpListener,
    serving: Serving,
    name: &'static str,
    mut on_connection: F,
) where
    F: FnMut(tokio::net::TcpStream, SocketAddr, Arc<Watchdog>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let max = serving.limits.max_connections;
    let slots = Arc::new(Semaphore::new(max));
    serving.lifecycle.register(slots.clone(), max as u32);
    let mut shutdown = serving.lifecycle.subscribe();
    let watchdog = Watchdog::start(&serving.limits);
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
        let conn = on_connection(stream, peer, watchdog.clone());
        tokio::spawn(async move {
            conn.await;
            drop(permit);
        });
    }
    tracing::info!(listener = name, "stopped accepting");
}
