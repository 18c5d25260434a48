//! Listeners and the stacks behind them: the sidecar (plain HTTP and TLS on
//! loopback) for the app, the aggregated front for the cluster.

pub mod body;
mod follow;
pub mod front;
pub mod live;
pub mod metrics;
pub mod own_client;
pub mod proxy;
pub mod run;
mod stack;
pub mod status;
pub mod tls;
pub mod trust;

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
    accept_loop(listener, move |stream, peer| {
        let proxy = proxy.clone();
        async move { serve_connection(TokioIo::new(stream), peer, proxy).await }
    })
    .await
}

/// Like [`serve_plain`], over TLS (h2 and http/1.1 by ALPN).
pub async fn serve_tls(listener: TcpListener, tls: Arc<rustls::ServerConfig>, proxy: Arc<Proxy>) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    accept_loop(listener, move |stream, peer| {
        let (proxy, acceptor) = (proxy.clone(), acceptor.clone());
        async move {
            match acceptor.accept(stream).await {
                Ok(tls) => serve_connection(TokioIo::new(tls), peer, proxy).await,
                Err(e) => tracing::debug!(%peer, "TLS handshake failed: {e}"),
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
    tls: Arc<front::tls::ReloadingConfig>,
    proxy: Arc<Proxy>,
) {
    accept_loop(listener, move |stream, peer| {
        let (proxy, acceptor) = (proxy.clone(), tls.acceptor());
        async move {
            let tls = match acceptor.accept(stream).await {
                Ok(t) => t,
                Err(e) => {
                    tracing::info!(%peer, "front TLS handshake failed (untrusted or invalid client certificate?): {e}");
                    return;
                }
            };
            let certs: Arc<Option<Vec<rustls::pki_types::CertificateDer<'static>>>> =
                Arc::new(tls.get_ref().1.peer_certificates().map(|c| c.iter().map(|c| c.clone().into_owned()).collect()));
            let svc = service_fn(move |req| proxy.clone().handle_front(req, certs.clone()));
            if let Err(e) = auto::Builder::new(TokioExecutor::new())
                .serve_connection_with_upgrades(TokioIo::new(tls), svc)
                .await
            {
                tracing::debug!(%peer, "front connection ended: {e}");
            }
        }
    })
    .await
}

/// Accepts forever, one task per connection.
async fn accept_loop<F, Fut>(listener: TcpListener, mut on_connection: F)
where
    F: FnMut(tokio::net::TcpStream, SocketAddr) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                tokio::spawn(on_connection(stream, peer));
            }
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                // Out of file descriptors and the like: don't spin.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
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
