//! Listeners: the sidecar (plain HTTP and TLS on loopback) for the app.

pub mod body;
pub mod proxy;
pub mod run;
pub mod status;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

pub use proxy::Proxy;

/// Accepts connections on `listener` and serves each with `proxy`, HTTP/1.1
/// and HTTP/2 (h2c prior knowledge) alike, until the task is dropped.
pub async fn serve_plain(listener: TcpListener, proxy: Arc<Proxy>) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let proxy = proxy.clone();
        tokio::spawn(async move {
            serve_connection(TokioIo::new(stream), peer, proxy).await;
        });
    }
}

/// Like [`serve_plain`], over TLS (h2 and http/1.1 by ALPN).
pub async fn serve_tls(listener: TcpListener, tls: Arc<rustls::ServerConfig>, proxy: Arc<Proxy>) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let proxy = proxy.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            match acceptor.accept(stream).await {
                Ok(tls) => serve_connection(TokioIo::new(tls), peer, proxy).await,
                Err(e) => tracing::debug!(%peer, "TLS handshake failed: {e}"),
            }
        });
    }
}

async fn serve_connection<I>(io: I, peer: SocketAddr, proxy: Arc<Proxy>)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let svc = service_fn(move |req| proxy.clone().handle(req));
    if let Err(e) = auto::Builder::new(TokioExecutor::new())
        .serve_connection_with_upgrades(io, svc)
        .await
    {
        tracing::debug!(%peer, "connection ended: {e}");
    }
}
