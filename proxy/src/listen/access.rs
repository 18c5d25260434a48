//! Request-level checks before the proxy sees a request, and bookkeeping
//! around it: who may use regroup's credential (`Host` on loopback
//! listeners, an own `Authorization` beyond loopback), paths that would be
//! read differently by a later hop, the 504 for an upstream that never
//! answered, in-flight tracking for idle connections and draining, and the
//! clean end of watches on shutdown.

use std::sync::Arc;
use std::time::Instant;

use futures_util::future::BoxFuture;
use http::{header, Request, Response, StatusCode};

use crate::body::Body;
use crate::listen::in_flight::{ConnState, InFlight, Tracked};
use crate::listen::path_check::check_path;
use crate::rewrite::framing::{Boundary, Framing};
use crate::status::Failure;

/// Who a listener serves.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// `sidecar` or `front` (metrics and logs).
    pub listener: &'static str,
    /// Loopback listeners: the host names `Host`/`:authority` may carry.
    pub allowed_hosts: Option<Arc<Vec<String>>>,
    /// A TLS listener beyond loopback without the opt-in: callers must
    /// bring their own `Authorization` (else 401).
    pub require_own_credential: bool,
}

impl Access {
    /// A loopback sidecar listener accepting `hosts`.
    pub fn loopback(hosts: Vec<String>) -> Access {
        Access {
            listener: "sidecar",
            allowed_hosts: Some(Arc::new(hosts)),
            require_own_credential: false,
        }
    }

    /// The sidecar's TLS listener bound beyond loopback.
    pub fn beyond_loopback(lend: bool) -> Access {
        Access {
            listener: "sidecar",
            allowed_hosts: None,
            require_own_credential: !lend,
        }
    }

    /// The aggregated front (callers authenticated by certificate there).
    pub fn front() -> Access {
        Access {
            listener: "front",
            allowed_hosts: None,
            require_own_credential: false,
        }
    }

    /// The webhook listener (callers authenticated by TLS, if at all).
    pub fn webhooks() -> Access {
        Access {
            listener: "webhooks",
            allowed_hosts: None,
            require_own_credential: false,
        }
    }

    /// Why this request is refused before routing, if it is: a foreign
    /// host (403), a missing credential (401), then a confusing path (400).
    pub fn check<B>(&self, req: &Request<B>) -> Result<(), (Failure, &'static str)> {
        if let Some(allowed) = &self.allowed_hosts {
            // Bytes, not `to_str`: a name not visible ASCII matches no
            // allowed one anyway, and checking every byte first cost ~70
            // instructions a request.
            let from_uri = req.uri().authority().map(|a| a.as_str().as_bytes());
            let from_header = req.headers().get(header::HOST).map(|v| v.as_bytes());
            if from_uri.is_none() && from_header.is_none() {
                return Err((
                    Failure::forbidden("a request without a Host is not served"),
                    "foreign_host",
                ));
            }
            for h in [from_uri, from_header].into_iter().flatten() {
                if !host_allowed(h, allowed) {
                    return Err((
                        Failure::forbidden(format!(
                            "host `{}` is not accepted on this listener (listeners.allowedHosts)",
                            printable(&String::from_utf8_lossy(h))
                        )),
                        "foreign_host",
                    ));
                }
            }
        }
        if self.require_own_credential && !req.headers().contains_key(header::AUTHORIZATION) {
            return Err((
                Failure::unauthorized(
                    "Unauthorized: callers of this listener must bring their own credential",
                ),
                "no_credential",
            ));
        }
        // Only then the path: a caller that may not be served learns nothing
        // more than that.
        if let Err(p) = check_path(req.uri().path()) {
            return Err((Failure::bad_request(p.message()), p.reason()));
        }
        Ok(())
    }
}

/// A `Host` value (or `:authority`) against the allowed names: port
/// ignored, IPv6 brackets removed, case-insensitive, like `kubectl proxy`.
pub fn host_allowed(value: &[u8], allowed: &[String]) -> bool {
    // Bytes, not `str` searches: a `Host` is a few bytes, read on every
    // request, where `contains`/`rsplit_once` set up a searcher each.
    let b = value;
    let host = if let Some(v6) = b.strip_prefix(b"[") {
        if b.contains(&b'@') {
            return false;
        }
        match v6.iter().position(|&c| c == b']') {
            Some(end) if end + 1 == v6.len() || is_port(&v6[end + 1..]) => &v6[..end],
            _ => return false,
        }
    } else {
        // One pass: an `@` refuses, a single `:` ends the name.
        let (mut colons, mut last) = (0, 0);
        for (i, &c) in b.iter().enumerate() {
            if c == b'@' {
                return false;
            }
            if c == b':' {
                colons += 1;
                last = i;
            }
        }
        match colons {
            0 => value,
            1 if is_port_number(&value[last + 1..]) => &value[..last],
            _ => return false,
        }
    };
    // Most callers write the name as configured: one byte comparison
    // before the case-insensitive one, which lowers each byte.
    allowed.iter().any(|a| {
        a.len() == host.len() && (a.as_bytes() == host || a.as_bytes().eq_ignore_ascii_case(host))
    })
}

fn is_port(s: &[u8]) -> bool {
    s.strip_prefix(b":").is_some_and(is_port_number)
}

fn is_port_number(p: &[u8]) -> bool {
    !p.is_empty() && p.len() <= 5 && p.iter().all(u8::is_ascii_digit)
}

/// At most 100 printable characters of a caller-supplied value, for logs.
fn printable(s: &str) -> String {
    s.chars()
        .take(100)
        .map(|c| if c.is_ascii_graphic() { c } else { '?' })
        .collect()
}

/// Serves one request through `next` (the proxy) after the checks; `next`
/// gets when the request arrived (one clock read a request). The
/// connection's service future itself (hence `Result`, and what it holds
/// owned): an `async` block around it moved its state once more.
pub async fn serve<F, Fut>(
    access: Arc<Access>,
    conn: Arc<ConnState>,
    lifecycle: Arc<crate::listen::lifecycle::Lifecycle>,
    req: Request<hyper::body::Incoming>,
    next: F,
) -> Result<Response<Tracked>, std::convert::Infallible>
where
    F: FnOnce(Request<hyper::body::Incoming>, Instant) -> Fut,
    Fut: std::future::Future<Output = Response<Body>>,
{
    let token = InFlight::new(conn);
    let started = Instant::now();
    if let Err((f, reason)) = access.check(&req) {
        let path = printable(req.uri().path());
        let responder = crate::pipeline::respond::Responder {
            metrics: token.metrics(),
            listener: access.listener,
        };
        let resp =
            responder.refused_at_access(req.method(), &path, req.uri().query(), started, reason, f);
        return Ok(Tracked::wrap(resp, token, None, None));
    }
    let watch = is_watch(&req);
    // The stacks time their requests with the Kubernetes verb they read
    // (pipeline/errors.rs); the webhook listener's are reviews the API
    // server sends, each a `create`.
    let review = access.listener == "webhooks";
    let resp = next(req, started).await;
    if review {
        token
            .metrics()
            .latency(access.listener, "create", started.elapsed());
    }
    // Only a watch's event stream is ended early, never an error body.
    let watch = watch && resp.status() == StatusCode::OK;
    let boundary = watch.then(|| {
        let ctype = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        Boundary::new(if ctype.contains("protobuf") {
            Framing::LengthPrefixed
        } else {
            Framing::Lines
        })
    });
    let end = watch.then(|| {
        // Subscribed for watches only: other requests never end early.
        let mut rx = lifecycle.subscribe();
        let f: BoxFuture<'static, ()> = Box::pin(async move {
            crate::listen::lifecycle::fired(&mut rx).await;
        });
        f
    });
    Ok(Tracked::wrap(resp, token, end, boundary))
}

/// A watch, as kube-apiserver reads it (`?watch=true` in any of Go's true
/// spellings, or the legacy `/watch/` paths).
pub fn is_watch<B>(req: &Request<B>) -> bool {
    crate::kube::request::is_watch(req.uri().path(), req.uri().query())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts() -> Vec<String> {
        vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]
    }

    #[test]
    fn loopback_hosts_pass_with_or_without_a_port() {
        for h in [
            "localhost",
            "LOCALHOST:8001",
            "127.0.0.1",
            "127.0.0.1:8001",
            "[::1]",
            "[::1]:8001",
        ] {
            assert!(host_allowed(h.as_bytes(), &hosts()), "{h}");
        }
    }

    #[test]
    fn foreign_hosts_are_refused() {
        for h in [
            "evil.example",
            "evil.example:8001",
            "localhost.evil.example",
            "127.0.0.1.nip.io:8001",
            "user@localhost",
            "localhost:80:80",
            "[::1]x",
            "::1",
            "localhost:",
            "",
            "127.0.0.2",
        ] {
            assert!(!host_allowed(h.as_bytes(), &hosts()), "{h}");
        }
    }

    fn req(uri: &str, host: Option<&str>, auth: bool) -> Request<()> {
        let mut b = Request::get(uri);
        if let Some(h) = host {
            b = b.header("host", h);
        }
        if auth {
            b = b.header("authorization", "Bearer x");
        }
        b.body(()).unwrap()
    }

    #[test]
    fn access_checks_host_then_credential_then_path() {
        let lo = Access::loopback(hosts());
        assert!(lo
            .check(&req("/api/v1", Some("localhost:1"), false))
            .is_ok());
        let (f, r) = lo
            .check(&req("/api/v1", Some("evil:1"), false))
            .unwrap_err();
        assert_eq!((f.code.as_u16(), r), (403, "foreign_host"));
        let (f, _) = lo.check(&req("/api/v1", None, false)).unwrap_err();
        assert_eq!(f.code.as_u16(), 403);
        // A `Host` that is no text: refused, and the message says so
        // printably.
        let mut odd = req("/api/v1", None, false);
        odd.headers_mut().insert(
            header::HOST,
            http::HeaderValue::from_bytes(b"local\xffhost").unwrap(),
        );
        let (f, r) = lo.check(&odd).unwrap_err();
        assert_eq!((f.code.as_u16(), r), (403, "foreign_host"));
        assert!(f.message.contains("local?host"), "{}", f.message);
        // HTTP/2 (or absolute-form): the URI's authority is checked too.
        let (f, _) = lo
            .check(&req("http://evil.example/api/v1", Some("localhost"), false))
            .unwrap_err();
        assert_eq!(f.code.as_u16(), 403);
        assert!(lo
            .check(&req("http://[::1]:8001/api/v1", None, false))
            .is_ok());
        let (f, r) = lo
            .check(&req("/api/v1/../x", Some("localhost"), false))
            .unwrap_err();
        assert_eq!((f.code.as_u16(), r), (400, "path_dot_segment"));
        let (f, _) = lo
            .check(&req("/api/v1/../x", Some("evil"), false))
            .unwrap_err();
        assert_eq!(f.code.as_u16(), 403, "a foreign caller learns nothing more");

        let wide = Access::beyond_loopback(false);
        let (f, r) = wide
            .check(&req("/api/v1", Some("evil"), false))
            .unwrap_err();
        assert_eq!((f.code.as_u16(), r), (401, "no_credential"));
        assert!(wide.check(&req("/api/v1", Some("evil"), true)).is_ok());
        assert!(Access::beyond_loopback(true)
            .check(&req("/api/v1", Some("evil"), false))
            .is_ok());
    }

    #[test]
    fn watches_are_recognized() {
        for (uri, w) in [
            ("/api/v1/pods?watch=true", true),
            ("/api/v1/pods?labelSelector=a&watch=1", true),
            ("/api/v1/watch/pods", true),
            ("/apis/samplecontroller.k8s.io/v1alpha1/watch/foos", true),
            ("/api/v1/pods?watch=false", false),
            ("/api/v1/pods", false),
            ("/api/v1/namespaces/watch/pods", false),
        ] {
            assert_eq!(is_watch(&req(uri, None, false)), w, "{uri}");
        }
    }
}
