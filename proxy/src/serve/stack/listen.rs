//! The sidecar's listeners, plain or TLS, each request handed to the
//! sidecar stack. The accept loop and the connection are `listen/`'s.

use std::sync::Arc;

use http::Request;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::serve::listen::accept_loop;
use crate::serve::listen::connection::{self, Protocol};
use crate::serve::stack::proxy::Proxy;
use crate::serve::{Access, Serving};

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
