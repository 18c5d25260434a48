//! The aggregated front's listener: TLS whose configuration follows the
//! cluster's request-header CA, each request handed to the front stack with
//! the connection's verified client certificate. The accept loop and the
//! connection are `listen/`'s, shared with every listener.

use std::sync::Arc;

use http::Request;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::serve::listen::accept_loop;
use crate::serve::listen::connection::{self, Protocol};
use crate::serve::{Access, Proxy, Serving};

/// The aggregated front: TLS whose configuration may change (certificate
/// and request-header CA reloads), each request authenticated with the
/// connection's verified client certificate; within `serving`'s limits,
/// until shutdown.
pub async fn serve_front(
    listener: TcpListener,
    tls: Arc<super::tls::ReloadingConfig>,
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
