//! The TLS handshake every TLS listener runs before its connection is
//! served: bounded by `limits.headerReadTimeout`; a failure logged with the
//! listener's name and counted (`regroup_errors_total{reason=
//! "tls_handshake"}`). A peer that closed before finishing it (a TCP probe,
//! a port scan) is only a debug line: it is no one's failure.

use std::io::ErrorKind;
use std::net::SocketAddr;

use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use super::connection::Protocol;
use super::lifecycle::Serving;

/// The connection after its handshake, with the protocol ALPN chose;
/// `None` when the handshake failed or timed out (logged and counted here).
pub(crate) async fn accept(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
    peer: SocketAddr,
    serving: &Serving,
    listener: &'static str,
) -> Option<(TlsStream<TcpStream>, Protocol)> {
    let timeout = serving.limits.header_read_timeout;
    match tokio::time::timeout(timeout, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => {
            let protocol = Protocol::from_alpn(tls.get_ref().1.alpn_protocol());
            Some((tls, protocol))
        }
        Ok(Err(e)) if e.kind() == ErrorKind::UnexpectedEof => {
            tracing::debug!(listener, %peer, "connection closed during the TLS handshake");
            None
        }
        Ok(Err(e)) => {
            tracing::info!(
                listener,
                %peer,
                "TLS handshake failed (no, untrusted or invalid client certificate?): {e}"
            );
            serving.metrics.error(listener, "tls_handshake");
            None
        }
        Err(_) => {
            tracing::info!(listener, %peer, "TLS handshake timed out (limits.headerReadTimeout)");
            None
        }
    }
}
