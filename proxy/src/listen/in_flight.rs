//! A response on its way to the caller, tracked: its request counts as in
//! flight until the body ends (idle connections and draining read it), and
//! a watch ends cleanly between two events once regroup shuts down (the
//! client sees the end of the stream and watches again).

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::Response;
use http_body::{Body as HttpBody, Frame, SizeHint};

use crate::body::{Body, BoxError};
use crate::observe::metrics::Metrics;
use crate::rewrite::framing::Boundary;

/// One connection's requests in flight and its clock readings, for the
/// [`watchdog`](super::watchdog) that closes it when it has been idle, or
/// without a whole request head, too long.
#[derive(Debug)]
pub struct ConnState {
    pub(crate) in_flight: AtomicUsize,
    pub(crate) requests: AtomicUsize,
    /// When the connection last had no request in flight (or opened), on
    /// the watchdog's coarse clock: a request reads an atomic, not the
    /// system clock.
    pub(crate) idle_since: AtomicU64,
    /// When it opened, on the same clock.
    pub(crate) opened: u64,
    /// HTTP/2: an idle connection waits for `idleTimeout` only (HTTP/1.1's
    /// header clock runs while it waits for the next request head).
    pub(crate) http2: bool,
    /// Why the watchdog asked it to close ([`Expiry`] as a number).
    pub(crate) expiry: AtomicU8,
    /// Woken by the watchdog: once to close gracefully, again to drop the
    /// connection if it has not closed by then; and at shutdown.
    pub(crate) signal: super::conn_signal::ConnSignal,
    /// The listener's metrics (requests in flight).
    pub(crate) metrics: Arc<Metrics>,
    /// An HTTP/1.1 connection's socket, which the watchdog asks whether the
    /// client closed it while a request is in flight
    /// ([`peer_gone`](super::peer_gone)); none for HTTP/2, whose connection
    /// hyper reads throughout.
    pub(crate) peer_fd: Option<std::os::fd::RawFd>,
}

impl Default for ConnState {
    fn default() -> Self {
        ConnState::new(false, Arc::new(Metrics::new()))
    }
}

impl ConnState {
    /// A connection opened now, speaking HTTP/2 or HTTP/1.1.
    pub fn new(http2: bool, metrics: Arc<Metrics>) -> ConnState {
        let now = super::coarse_clock::now_ms();
        ConnState {
            in_flight: AtomicUsize::new(0),
            requests: AtomicUsize::new(0),
            idle_since: AtomicU64::new(now),
            opened: now,
            http2,
            expiry: AtomicU8::new(0),
            signal: Default::default(),
            metrics,
            peer_fd: None,
        }
    }

    /// The same, its socket `fd` looked at for the client's close while a
    /// request is in flight (HTTP/1.1).
    pub fn with_peer_fd(mut self, fd: std::os::fd::RawFd) -> ConnState {
        self.peer_fd = Some(fd);
        self
    }

    /// True until the connection's first request arrives.
    pub fn never_used(&self) -> bool {
        self.requests.load(Ordering::SeqCst) == 0
    }

    /// How long, in ms of the coarse clock at `now`, the connection has had
    /// no request in flight (zero while one is).
    pub fn idle_ms(&self, now: u64) -> u64 {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return 0;
        }
        now.saturating_sub(self.idle_since.load(Ordering::SeqCst))
    }
}

/// A request in flight, until its response body ends or is dropped.
pub(crate) struct InFlight {
    conn: Arc<ConnState>,
}

impl InFlight {
    pub(crate) fn new(conn: Arc<ConnState>) -> InFlight {
        conn.in_flight.fetch_add(1, Ordering::SeqCst);
        conn.requests.fetch_add(1, Ordering::SeqCst);
        conn.metrics.in_flight_add(1);
        InFlight { conn }
    }

    /// The listener's metrics.
    pub(crate) fn metrics(&self) -> &Metrics {
        &self.conn.metrics
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.conn
            .idle_since
            .store(super::coarse_clock::now_ms(), Ordering::SeqCst);
        self.conn.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.conn.metrics.in_flight_add(-1);
    }
}

/// A response body that keeps its request counted in flight until it ends,
/// and, for a watch, ends cleanly at the next event boundary once regroup
/// shuts down (the client sees the end of the stream and watches again).
pub struct Tracked {
    inner: Body,
    _token: InFlight,
    end: Option<BoxFuture<'static, ()>>,
    ending: bool,
    /// A watch's event boundaries (the core's framer's own tracker); none
    /// for any other response, which is never ended early.
    boundary: Option<Boundary>,
}

impl Tracked {
    pub(crate) fn wrap(
        resp: Response<Body>,
        token: InFlight,
        end: Option<BoxFuture<'static, ()>>,
        boundary: Option<Boundary>,
    ) -> Response<Tracked> {
        resp.map(|inner| Tracked {
            inner,
            _token: token,
            end,
            ending: false,
            boundary,
        })
    }
}

impl Tracked {
    fn at_boundary(&self) -> bool {
        self.boundary.as_ref().is_some_and(Boundary::at_boundary)
    }
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if !this.ending {
            if let Some(end) = this.end.as_mut() {
                if end.as_mut().poll(cx).is_ready() {
                    this.ending = true;
                    this.end = None;
                    tracing::debug!("shutting down: ending a watch at the next event");
                }
            }
        }
        if this.ending && this.at_boundary() {
            return Poll::Ready(None);
        }
        let r = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &r {
            if let (Some(d), Some(b)) = (frame.data_ref(), this.boundary.as_mut()) {
                b.feed(d);
            }
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        (self.ending && self.at_boundary()) || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
