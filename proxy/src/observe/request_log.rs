//! The one log line per request, under one target (`regroup::request`):
//! the listener, the method and the Kubernetes verb, the path with names
//! left out, the status, whole microseconds. A watch's line is written
//! when the watch ends, with its duration, the events sent and how it
//! ended; every other request's when its response headers are ready.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::io::Write as _;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::Method;
use http_body::{Frame, SizeHint};

use crate::body::{Body, BoxError};
use crate::observe::log_format::write_utc_micros;
use crate::observe::log_writer;

/// Set by `serve`'s logging set-up when its subscriber would write the
/// request line exactly as [`format_request_line`] does (the text format,
/// no colours, `regroup::request` at `info` on by the configured level):
/// regroup then writes the line itself, without `tracing`'s dispatch and
/// its per-field visits (about 3.5k instructions a request).
static WRITTEN_DIRECTLY: AtomicBool = AtomicBool::new(false);

/// From now on the request line is written by [`format_request_line`]
/// straight to the log writer (`serve/run`'s logging set-up, once).
pub fn write_directly() {
    WRITTEN_DIRECTLY.store(true, Ordering::Relaxed);
}

thread_local! {
    /// The line being written, kept between requests (no allocation each).
    static LINE: RefCell<String> = const { RefCell::new(String::new()) };
}

/// A request line's `path` field: written straight into the line when
/// the line is written directly, displayed when it goes through `tracing`.
pub trait LinePath: std::fmt::Display {
    /// Appends the path to `out`.
    fn write_into(&self, out: &mut String) -> std::fmt::Result {
        write!(out, "{self}")
    }
}

impl LinePath for &str {
    fn write_into(&self, out: &mut String) -> std::fmt::Result {
        out.push_str(self);
        Ok(())
    }
}

impl LinePath for String {
    fn write_into(&self, out: &mut String) -> std::fmt::Result {
        out.push_str(self);
        Ok(())
    }
}

impl LinePath for crate::kube::request::Template<'_> {
    fn write_into(&self, out: &mut String) -> std::fmt::Result {
        self.write_to(out)
    }
}

/// Writes a request's line now.
pub fn request_line(
    listener: &str,
    method: &Method,
    verb: &str,
    path: &dyn LinePath,
    status: u16,
    took: Duration,
) {
    if WRITTEN_DIRECTLY.load(Ordering::Relaxed) {
        let written = LINE.try_with(|line| {
            let Ok(mut line) = line.try_borrow_mut() else {
                return false;
            };
            line.clear();
            let at = SystemTime::now();
            let us = micros(took);
            if format_request_line(&mut line, at, listener, method, verb, path, status, us).is_err()
            {
                return false;
            }
            // As the subscriber's writer does: a log that can't be written
            // is not an error anyone can act on from here.
            let _ = log_writer::Line::info().write_all(line.as_bytes());
            true
        });
        if written == Ok(true) {
            return;
        }
    }
    // Fields are evaluated only when the line is logged.
    tracing::info!(
        target: "regroup::request",
        listener,
        %method,
        verb,
        %path,
        status,
        us = micros(took),
        "request"
    );
}

/// The request line as the text format (`observe/log_format.rs`, and so
/// `tracing-subscriber`'s `Full` format) writes the event
/// [`request_line`] logs at `at`, its newline included.
#[allow(clippy::too_many_arguments)] // the line's fields, in its order
pub fn format_request_line(
    out: &mut String,
    at: SystemTime,
    listener: &str,
    method: &Method,
    verb: &str,
    path: &dyn LinePath,
    status: u16,
    us: u64,
) -> std::fmt::Result {
    write_utc_micros(out, at)?;
    out.push_str("  INFO regroup::request: request listener=");
    push_word(out, listener);
    out.push_str(" method=");
    out.push_str(method.as_str());
    out.push_str(" verb=");
    push_word(out, verb);
    out.push_str(" path=");
    path.write_into(out)?;
    out.push_str(" status=");
    out.push_str(itoa::Buffer::new().format(status));
    out.push_str(" us=");
    out.push_str(itoa::Buffer::new().format(us));
    out.push('\n');
    Ok(())
}

/// A listener's or a verb's name, quoted as `{:?}` quotes it: they are
/// regroup's own lower-case words, with nothing to escape (so not searched
/// for it, ~200 instructions a request).
fn push_word(out: &mut String, word: &str) {
    debug_assert!(word.bytes().all(|b| b.is_ascii_lowercase()), "{word}");
    out.push('"');
    out.push_str(word);
    out.push('"');
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Set once the process shuts down: a watch dropped after that was ended
/// by the drain, not by its client.
static SHUTTING_DOWN: AtomicBool = AtomicBool::new(false);

/// Marks the process as shutting down (`serve/run`, as the drain begins).
pub fn shutting_down() {
    SHUTTING_DOWN.store(true, Ordering::SeqCst);
}

/// What a watch's line says besides its events and duration.
pub struct WatchLine {
    pub listener: &'static str,
    pub method: Method,
    pub verb: &'static str,
    /// The path template (names left out), formatted once.
    pub path: String,
    pub status: u16,
    pub started: Instant,
}

/// `body` (a watch's event stream), logging its request line when it is
/// dropped: at its end, or when the client leaves, or at shutdown.
pub fn logged_at_end(body: Body, line: WatchLine) -> Body {
    http_body_util::BodyExt::boxed(Logged {
        body,
        line,
        events: 0,
        end: None,
    })
}

struct Logged {
    body: Body,
    line: WatchLine,
    /// Data frames sent: a renamed watch sends one event per frame.
    events: u64,
    /// Set when the stream ended on its own (`upstream`) or failed
    /// (`error`); unset when dropped before (`client` or `shutdown`).
    end: Option<&'static str>,
}

impl http_body::Body for Logged {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let r = Pin::new(&mut self.body).poll_frame(cx);
        match &r {
            Poll::Ready(Some(Ok(f))) if f.is_data() => self.events += 1,
            Poll::Ready(Some(Err(_))) => self.end = Some("error"),
            Poll::Ready(None) => {
                self.end.get_or_insert("upstream");
            }
            _ => {}
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        let end = self.end.unwrap_or(if SHUTTING_DOWN.load(Ordering::SeqCst) {
            "shutdown"
        } else {
            "client"
        });
        let l = &self.line;
        tracing::info!(
            target: "regroup::request",
            listener = l.listener,
            method = %l.method,
            verb = l.verb,
            path = %l.path,
            status = l.status,
            us = micros(l.started.elapsed()),
            events = self.events,
            end,
            "request"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use std::sync::{Arc, Mutex};
    use std::time::UNIX_EPOCH;
    use tracing_subscriber::fmt::format::Writer;
    use tracing_subscriber::fmt::time::FormatTime;

    /// The instant both formatters are given.
    const AT: &str = "2026-11-25T01:02:03.000004Z";

    #[derive(Clone)]
    struct Fixed;

    impl FormatTime for Fixed {
        fn format_time(&self, w: &mut Writer<'_>) -> std::fmt::Result {
            w.write_str(AT)
        }
    }

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The lines `request_line` logs through `tracing` to `format`'s
    /// subscriber (stock `Full` or regroup's `TextFormat`).
    fn through_tracing(ours: bool, lines: &[(&str, Method, &str, &str, u16, u64)]) -> String {
        let out = Captured::default();
        let sink = out.clone();
        let builder = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || sink.clone())
            .with_timer(Fixed);
        let emit = || {
            for (listener, method, verb, path, status, us) in lines {
                let took = Duration::from_micros(*us);
                request_line(listener, method, verb, path, *status, took);
            }
        };
        if ours {
            let format = crate::observe::log_format::TextFormat::with_timer(Fixed);
            tracing::subscriber::with_default(builder.event_format(format).finish(), emit);
        } else {
            tracing::subscriber::with_default(builder.finish(), emit);
        }
        let bytes = out.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn the_request_line_written_directly_is_the_stock_full_formats() {
        let lines = [
            (
                "sidecar",
                Method::GET,
                "get",
                "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/{namespace}/foos/{name}",
                200,
                1234,
            ),
            (
                "front",
                Method::DELETE,
                "deletecollection",
                "/api/v1/pods",
                403,
                0,
            ),
            (
                "sidecar",
                Method::PATCH,
                "patch",
                "/",
                502,
                u64::from(u32::MAX) * 7,
            ),
            (
                "sidecar",
                Method::from_bytes(b"BREW").unwrap(),
                "other",
                "/weird \"path\"/...",
                405,
                17,
            ),
        ];
        // 2026-11-25T01:02:03.000004Z
        let at = UNIX_EPOCH + Duration::from_secs(1_795_568_523) + Duration::from_micros(4);
        let mut direct = String::new();
        for (listener, method, verb, path, status, us) in &lines {
            let mut line = String::new();
            format_request_line(&mut line, at, listener, method, verb, path, *status, *us).unwrap();
            direct.push_str(&line);
        }
        let stock = through_tracing(false, &lines);
        assert_eq!(stock.lines().count(), lines.len(), "{stock}");
        assert_eq!(direct, stock);
        assert_eq!(direct, through_tracing(true, &lines));
        assert!(direct.starts_with(
            "2026-11-25T01:02:03.000004Z  INFO regroup::request: request listener=\"sidecar\" \
             method=GET verb=\"get\" \
             path=/apis/samplecontroller.k8s.io/v1alpha1/namespaces/{namespace}/foos/{name} \
             status=200 us=1234\n"
        ));
    }

    fn line() -> WatchLine {
        WatchLine {
            listener: "sidecar",
            method: Method::GET,
            verb: "watch",
            path: "/api/v1/namespaces/{namespace}/configmaps".into(),
            status: 200,
            started: Instant::now(),
        }
    }

    #[tokio::test]
    async fn events_are_counted_and_the_end_is_named() {
        let frames = futures_util::stream::iter(
            ["a\n", "b\n", "c\n"].map(|s| Ok::<_, BoxError>(Frame::data(Bytes::from(s)))),
        );
        let body = http_body_util::StreamBody::new(frames).boxed();
        let mut logged = Logged {
            body,
            line: line(),
            events: 0,
            end: None,
        };
        while let Some(f) = logged.frame().await {
            f.unwrap();
        }
        assert_eq!((logged.events, logged.end), (3, Some("upstream")));

        let pending = http_body_util::StreamBody::new(futures_util::stream::pending::<
            Result<Frame<Bytes>, BoxError>,
        >())
        .boxed();
        let cut = Logged {
            body: pending,
            line: line(),
            events: 0,
            end: None,
        };
        assert_eq!(cut.end, None, "dropped before its end: client or shutdown");
    }
}
