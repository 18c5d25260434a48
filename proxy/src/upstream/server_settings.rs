//! When an h2 connection's server has said its limits. The server's
//! `SETTINGS` frame is the first it sends, and hyper's h2 client applies a
//! `SETTINGS` frame before it reads another: so once the connection reads
//! again after the read that brought the server's first bytes, hyper knows
//! the server's stream limit. Until then hyper assumes 100, and a second
//! request let onto a connection whose server allows one would wait behind
//! the first (for a watch, many minutes).
//!
//! [`SettingsSeen`] wraps the connection's socket and raises a flag at
//! that second read; the pool offers the connection to other requests only
//! once the flag is up, reading the limit from hyper then (not waiting for
//! the task that drives the connection to be scheduled).

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A socket (tokio's traits: its read buffer says what a read filled)
/// that raises a flag when the server's first frames have been read and
/// applied.
pub(super) struct SettingsSeen<T> {
    io: T,
    /// Up once they have.
    seen: Arc<AtomicBool>,
    /// Where the reads are.
    state: Reads,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Reads {
    /// Nothing read yet.
    None,
    /// The server's first bytes have been read.
    Some,
    /// The flag is up.
    Told,
}

impl<T> SettingsSeen<T> {
    /// `io`, and the flag raised when the server's first frames are
    /// applied.
    pub(super) fn new(io: T) -> (SettingsSeen<T>, Arc<AtomicBool>) {
        let seen = Arc::new(AtomicBool::new(false));
        let io = SettingsSeen {
            io,
            seen: seen.clone(),
            state: Reads::None,
        };
        (io, seen)
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for SettingsSeen<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        match this.state {
            Reads::Told => Pin::new(&mut this.io).poll_read(cx, buf),
            Reads::Some => {
                // The read after the first bytes: h2 has applied what they
                // carried.
                this.seen.store(true, Ordering::Release);
                this.state = Reads::Told;
                Pin::new(&mut this.io).poll_read(cx, buf)
            }
            Reads::None => {
                let before = buf.filled().len();
                let polled = Pin::new(&mut this.io).poll_read(cx, buf);
                if buf.filled().len() > before {
                    this.state = Reads::Some;
                }
                polled
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for SettingsSeen<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[tokio::test]
    async fn raised_at_the_read_after_the_first_bytes_not_before() {
        let (ours, mut server) = tokio::io::duplex(64);
        let (mut io, seen) = SettingsSeen::new(ours);
        server.write_all(b"settings").await.unwrap();
        let mut buf = [0u8; 4];
        assert_eq!(io.read(&mut buf).await.unwrap(), 4);
        assert!(
            !seen.load(Ordering::Acquire),
            "not at the read that brought them"
        );
        assert_eq!(io.read(&mut buf).await.unwrap(), 4);
        assert!(seen.load(Ordering::Acquire), "raised at the next read");
    }

    #[tokio::test]
    async fn not_raised_while_nothing_was_read() {
        let (ours, server) = tokio::io::duplex(64);
        let (mut io, seen) = SettingsSeen::new(ours);
        drop(server);
        let mut buf = [0u8; 4];
        assert_eq!(io.read(&mut buf).await.unwrap(), 0);
        assert!(!seen.load(Ordering::Acquire));
    }
}
