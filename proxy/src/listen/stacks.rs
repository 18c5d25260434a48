//! The stacks' listeners, each request handed to its stack: the sidecar's,
//! plain or TLS, and the aggregated front's, TLS whose configuration
//! follows the cluster's request-header CA, with the connection's verified
//! client certificate. The accept loop and the connection are `listen/`'s,
//! shared with every listener.

use std::sync::Arc;

use http::Request;
use hyper::body::Incoming;
use tokio::net::TcpListener;

use crate::listen::accept_loop;
use crate::listen::access::Access;
use crate::listen::connection;
use crate::listen::lifecycle::Serving;
use crate::listen::tls_handshake;
use crate::pipeline::proxy::Proxy;

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
        let handler = move |req: Request<Incoming>, started| proxy.clone().serve(req, None, started);
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
                    let io = connection::Io::plain(stream);
                    connection::serve(io, protocol, peer, &serving, &watchdog, access, handler)
                        .await
                }
                // Boxed: the handshake and the TLS stream are KBs, and held
                // inline they would size every plain connection's task as
                // well (a watch holds its task for as long as it lasts).
                Some(acceptor) => Box::pin(async move {
                    let listener = access.listener;
                    let Some((tls, protocol)) =
                        tls_handshake::accept(&acceptor, stream, peer, &serving, listener).await
                    else {
                        return;
                    };
                    let io = connection::Io::tls(tls);
                    connection::serve(io, protocol, peer, &serving, &watchdog, access, handler).await
                })
                .await,
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
    tls: Arc<crate::front::tls::ReloadingConfig>,
    proxy: Arc<Proxy>,
    serving: Serving,
) {
    let access = Arc::new(Access::front());
    let s = serving.clone();
    accept_loop(listener, serving, "front", move |stream, peer, watchdog| {
        let (proxy, acceptor, serving, access) =
            (proxy.clone(), tls.acceptor(), s.clone(), access.clone());
        async move {
            let Some((tls, protocol)) =
                tls_handshake::accept(&acceptor, stream, peer, &serving, "front").await
            else {
                return;
            };
            let certs: Option<Arc<Vec<rustls::pki_types::CertificateDer<'static>>>> = tls
                .get_ref()
                .1
                .peer_certificates()
                .map(|c| Arc::new(c.iter().map(|c| c.clone().into_owned()).collect()));
            let handler = move |req: Request<Incoming>, started| {
                proxy.clone().serve(req, certs.clone(), started)
            };
            let io = connection::Io::tls(tls);
            connection::serve(io, protocol, peer, &serving, &watchdog, access, handler).await
        }
    })
    .await
}
