//! The webhook listener: TLS (a client certificate required when the
//! configuration asks for one), each call served by the webhooks. The
//! accept loop and the connection are `listen/`'s.

use std::sync::Arc;

use http::Request;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::serve::listen::accept_loop;
use crate::serve::listen::access::Access;
use crate::serve::listen::connection::{self, Protocol};
use crate::serve::listen::lifecycle::Serving;

/// The webhook listener: TLS (a client certificate required when the
/// configuration asks for one, verified in the handshake), each call served
/// by `webhooks`, within `serving`'s limits, until shutdown.
pub async fn serve_webhooks(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    webhooks: Arc<super::Webhooks>,
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
