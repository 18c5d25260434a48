//! Noticing that an HTTP/1.1 client closed its connection while regroup
//! streams it a response (a quiet watch, a followed log), so the upstream
//! request ends with it.
//!
//! hyper can do this itself (`half_close(false)`): it reads the socket
//! for an EOF while each request is in flight. That read costs every
//! request: the request head still holds hyper's read buffer, so the read
//! makes hyper allocate a new 8 KB buffer (and share the old one) each
//! time, ~0.8k instructions a request (docs/performance.md, "Session 34").
//! Only a streamed response needs the check, so regroup serves HTTP/1.1
//! with `half_close(true)` (hyper does not read until the response ends)
//! and arms this watch for a response whose length is not known up front:
//! a duplicate of the socket, registered for readability, whose
//! read-closed (`EPOLLRDHUP`) readiness says the client shut its side. A
//! client's further bytes (pipelined requests, a TLS alert) are left for
//! hyper to read after the response.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd, RawFd};
use std::task::{Context, Poll};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// A client connection watched for its closing.
pub(crate) struct PeerGone {
    fd: AsyncFd<OwnedFd>,
}

impl PeerGone {
    /// Watches the socket `fd` of the connection a request is being
    /// served on. `None` (and a debug line) if the socket cannot be
    /// duplicated or registered: the response is then served as with
    /// `half_close(true)` alone, its end noticed at the next failed write.
    ///
    /// # Safety
    /// `fd` must be the socket of the connection the caller's request
    /// arrived on, called while that request is being served: hyper owns
    /// the socket until the connection's future ends, which waits for the
    /// service, so the descriptor is open (and the same socket) throughout
    /// this call; the duplicate made here is independent of it after.
    pub(crate) unsafe fn arm(fd: RawFd) -> Option<PeerGone> {
        let dup = || -> io::Result<AsyncFd<OwnedFd>> {
            // SAFETY: the caller's contract (above).
            let owned = unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()?;
            // SAFETY: the `AsyncFd` owns the duplicate, open until it drops.
            unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) }
                .map_err(|e| e.into_parts().1)
        };
        match dup() {
            Ok(fd) => Some(PeerGone { fd }),
            Err(e) => {
                tracing::debug!("not watching the client's connection for its close: {e}");
                None
            }
        }
    }

    /// Ready once the client has closed (or half-closed) its side of the
    /// connection, or the socket reports an error.
    pub(crate) fn poll_gone(&self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            let mut guard = match self.fd.poll_read_ready(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(_)) => return Poll::Ready(()),
                Poll::Ready(Ok(g)) => g,
            };
            if guard.ready().is_read_closed() {
                return Poll::Ready(());
            }
            // Bytes only: left unread for hyper; wait for the next event.
            guard.clear_ready();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::time::Duration;
    use tokio::io::AsyncWriteExt;
    use tokio::net::{TcpListener, TcpStream};

    async fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        (s, c)
    }

    async fn gone_within(p: &PeerGone, d: Duration) -> bool {
        tokio::time::timeout(d, std::future::poll_fn(|cx| p.poll_gone(cx)))
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn bytes_from_the_client_are_not_a_close_and_stay_for_the_server() {
        let (server, mut client) = pair().await;
        // SAFETY: `server` is open for the whole test.
        let p = unsafe { PeerGone::arm(server.as_raw_fd()) }.unwrap();
        assert!(!gone_within(&p, Duration::from_millis(100)).await);
        client.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        assert!(!gone_within(&p, Duration::from_millis(200)).await);
        let mut buf = [0u8; 32];
        let n = server.peek(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"GET / HTTP/1.1\r\n", "the bytes stay unread");
        // Then the client shuts its side: noticed, unread bytes or not.
        client.shutdown().await.unwrap();
        assert!(gone_within(&p, Duration::from_secs(5)).await);
    }

    #[tokio::test]
    async fn a_client_that_closes_is_noticed() {
        let (server, client) = pair().await;
        // SAFETY: `server` is open for the whole test.
        let p = unsafe { PeerGone::arm(server.as_raw_fd()) }.unwrap();
        assert!(!gone_within(&p, Duration::from_millis(100)).await);
        drop(client);
        assert!(gone_within(&p, Duration::from_secs(5)).await);
        // The server's own socket is untouched by the watch's end.
        drop(p);
        let mut buf = [0u8; 1];
        assert_eq!(server.peek(&mut buf).await.unwrap(), 0);
    }
}
