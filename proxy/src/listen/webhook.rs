//! The webhook listener: TLS (a client certificate required when the
//! configuration asks for one), each call served by the webhooks. The
//! accept loop and the connection are `listen/`'s.

use std::sync::Arc;

use http::Request;
use hyper::body::Incoming;
use tokio::net::TcpListener;

use crate::listen::accept_loop;
use crate::listen::access::Access;
use crate::listen::connection;
use crate::listen::lifecycle::Serving;
use crate::listen::tls_handshake;

/// The webhook listener: TLS (a client certificate required when the
/// configuration asks for one, verified in the handshake), each call served
/// by `webhooks`, within `serving`'s limits, until shutdown.
pub async fn serve_webhooks(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    webhooks: Arc<crate::webhook::Webhooks>,
    serving: Serving,
) {
    let access = Arc::new(Access::webhooks());
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let s = serving.clone();
    accept_loop(
        listener,
        serving,
        "webhooks",
        move |stream, peer, watchdog| {
            let (webhooks, acceptor, serving, access) = (
                webhooks.clone(),
                acceptor.clone(),
                s.clone(),
                access.clone(),
            );
            async move {
                let Some((tls, protocol)) =
                    tls_handshake::accept(&acceptor, stream, peer, &serving, "webhooks").await
                else {
                    return;
                };
                let handler = move |req: Request<Incoming>, _started| {
                    let webhooks = webhooks.clone();
                    async move { webhooks.handle(req).await }
                };
                let io = connection::Io::tls(tls);
                connection::serve(io, protocol, peer, &serving, &watchdog, access, handler).await
            }
        },
    )
    .await
}
