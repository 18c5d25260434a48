//! When an h2 connection's server has said its limits. The server's
//! `SETTINGS` frame is the first it sends, and hyper's h2 client applies a
//! `SETTINGS` frame before it reads another: so once the connection reads
//! again after the read that brought the server's first bytes, hyper knows
//! the server's stream limit. Until then hyper assumes 100, and a second
//! request let onto a connection whose server allows one would wait behind
//! the first (for a watch, many minutes).
//!
//! [`SettingsSeen`] wraps the connection's socket and tells the task that
//! drives the connection, once, at that second read; the pool offers the
//! connection to other requests only after.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::oneshot;

/// A socket (tokio's traits: its read buffer says what a read filled)
/// that tells, once, when the server's first frames have been read and
/// applied.
pub(super) struct SettingsSeen<T> {
    io: T,
    /// Some until told.
    tell: Option<oneshot::Sender<()>>,
    /// The server's first bytes have been read.
    read_some: bool,
}

impl<T> SettingsSeen<T> {
    /// `io`, and the receiver that resolves when the server's first frames
    /// are applied (or the connection ended first).
    pub(super) fn new(io: T) -> (SettingsSeen<T>, oneshot::Receiver<()>) {
        let (tell, told) = oneshot::channel();
        let io = SettingsSeen {
            io,
            tell: Some(tell),
            read_some: false,
        };
        (io, told)
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for SettingsSeen<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.tell.is_some() && this.read_some {
            if let Some(tell) = this.tell.take() {
                let _ = tell.send(());
            }
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.read_some = true;
        }
        polled
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
    async fn told_at_the_read_after_the_first_bytes_not_before() {
        let (ours, mut server) = tokio::io::duplex(64);
        let (mut io, mut told) = SettingsSeen::new(ours);
        server.write_all(b"settings").await.unwrap();
        let mut buf = [0u8; 4];
        assert_eq!(io.read(&mut buf).await.unwrap(), 4);
        assert!(
            told.try_recv().is_err(),
            "not at the read that brought them"
        );
        assert_eq!(io.read(&mut buf).await.unwrap(), 4);
        assert!(told.try_recv().is_ok(), "told at the next read");
    }

    #[tokio::test]
    async fn a_connection_that_ends_unread_ends_the_wait() {
        let (ours, server) = tokio::io::duplex(64);
        let (io, told) = SettingsSeen::new(ours);
        drop(server);
        drop(io);
        assert!(told.await.is_err());
    }
}
