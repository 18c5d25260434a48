//! Whether an HTTP/1.1 client closed its connection while a request on it
//! is in flight (a quiet watch, a followed log, a slow list), so the
//! request, and the upstream request with it, ends then.
//!
//! hyper can notice this itself (`half_close(false)`): it reads the socket
//! for an EOF while each request is in flight. That read cost every
//! request: the request head still holds hyper's read buffer, so hyper
//! allocated a new 8 KB buffer (and shared the old one) each time,
//! 0.5k–1.1k instructions a request (docs/performance.md, "Session 34").
//! So regroup serves HTTP/1.1 with `half_close(true)` (hyper does not read
//! until the response has been written), and the listener's watchdog,
//! at each sweep (a second at the defaults), asks the kernel about each
//! HTTP/1.1 connection with a request in flight: one `poll(2)` for
//! read-closed (`POLLRDHUP`), which the client's FIN or reset sets whatever
//! it sent before (a pipelined request, a TLS alert: left unread for hyper).
//! Such a connection is dropped. No request pays for it; a departed client
//! is noticed within a sweep, not at once.

use std::os::fd::RawFd;

/// The events that say the client is gone: it shut its side (or both), or
/// the connection failed.
#[cfg(target_os = "linux")]
const GONE: libc::c_short = libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR;
#[cfg(not(target_os = "linux"))]
const GONE: libc::c_short = libc::POLLHUP | libc::POLLERR;

/// True when the client of the connection on socket `fd` has closed (or
/// half-closed) it. Reads nothing and never waits. A descriptor no longer
/// open (the connection ended meanwhile) reports `POLLNVAL`: false.
pub(crate) fn closed(fd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: GONE,
        revents: 0,
    };
    // SAFETY: `p` is one valid `pollfd`, for the call's duration; `poll`
    // with a timeout of 0 only reads the descriptor's state, and any value
    // of `fd`, open or not, is defined for it (`POLLNVAL`).
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n == 1 && p.revents & GONE != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use tokio::io::AsyncWriteExt;
    use tokio::net::{TcpListener, TcpStream};

    async fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        (s, c)
    }

    /// The kernel's view settles a moment after the client acts.
    async fn settles(server: &TcpStream, want: bool) -> bool {
        for _ in 0..200 {
            if closed(server.as_raw_fd()) == want {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        false
    }

    #[tokio::test]
    async fn bytes_are_not_a_close_and_stay_unread_a_shutdown_is() {
        let (server, mut client) = pair().await;
        assert!(!closed(server.as_raw_fd()));
        client.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        let mut buf = [0u8; 32];
        let n = server.peek(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"GET / HTTP/1.1\r\n");
        assert!(!closed(server.as_raw_fd()), "bytes only");
        // The client shuts its side with its bytes still unread.
        client.shutdown().await.unwrap();
        assert!(settles(&server, true).await);
        assert_eq!(server.peek(&mut buf).await.unwrap(), n, "still unread");
    }

    #[tokio::test]
    async fn a_client_that_closes_is_noticed() {
        let (server, client) = pair().await;
        assert!(!closed(server.as_raw_fd()));
        drop(client);
        assert!(settles(&server, true).await);
    }

    #[test]
    fn a_descriptor_not_open_is_not_a_close() {
        assert!(!closed(-1));
    }
}
