//! `/metrics` (OpenMetrics text) and `/healthz`, on `listeners.metrics`.
//!
//! Counters: requests by listener and status code, Status errors regroup
//! produced by reason, and front callers rejected by reason. Labels never
//! carry paths, names, certificates or tokens.

use std::sync::OnceLock;

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use super::body::full;

type Labels = Vec<(String, String)>;

/// regroup's counters.
pub struct Metrics {
    registry: Registry,
    requests: Family<Labels, Counter>,
    errors: Family<Labels, Counter>,
    rejections: Family<Labels, Counter>,
}

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    static M: OnceLock<Metrics> = OnceLock::new();
    M.get_or_init(|| {
        let mut registry = Registry::with_prefix("regroup");
        let requests = Family::<Labels, Counter>::default();
        let errors = Family::<Labels, Counter>::default();
        let rejections = Family::<Labels, Counter>::default();
        registry.register(
            "requests",
            "Requests served, by listener and HTTP status code",
            requests.clone(),
        );
        registry.register(
            "errors",
            "Kubernetes Status errors regroup answered itself, by listener and reason",
            errors.clone(),
        );
        registry.register(
            "front_rejections",
            "Callers of the aggregated front rejected, by reason",
            rejections.clone(),
        );
        Metrics {
            registry,
            requests,
            errors,
            rejections,
        }
    })
}

impl Metrics {
    /// One request served.
    pub fn request(&self, listener: &str, code: StatusCode) {
        self.requests
            .get_or_create(&vec![
                ("listener".into(), listener.into()),
                ("code".into(), code.as_u16().to_string()),
            ])
            .inc();
    }

    /// One Status error regroup produced.
    pub fn error(&self, listener: &str, reason: &str) {
        self.errors
            .get_or_create(&vec![
                ("listener".into(), listener.into()),
                ("reason".into(), reason.into()),
            ])
            .inc();
    }

    /// One front caller rejected.
    pub fn rejection(&self, reason: &str) {
        self.rejections
            .get_or_create(&vec![("reason".into(), reason.into())])
            .inc();
    }

    /// The OpenMetrics text.
    pub fn encode(&self) -> String {
        let mut s = String::new();
        encode(&mut s, &self.registry).expect("writing to a String");
        s
    }
}

/// Serves `/metrics` and `/healthz` until the task is dropped.
pub async fn serve_metrics(listener: TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            let svc = service_fn(|req: Request<hyper::body::Incoming>| async move {
                let (code, ctype, body) = match req.uri().path() {
                    "/metrics" => (
                        StatusCode::OK,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        Bytes::from(metrics().encode()),
                    ),
                    "/healthz" | "/readyz" | "/livez" => {
                        (StatusCode::OK, "text/plain", Bytes::from_static(b"ok"))
                    }
                    _ => (
                        StatusCode::NOT_FOUND,
                        "text/plain",
                        Bytes::from_static(b"404 page not found\n"),
                    ),
                };
                let mut r = Response::new(full(body));
                *r.status_mut() = code;
                r.headers_mut()
                    .insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
                Ok::<_, std::convert::Infallible>(r)
            });
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_appear_in_the_openmetrics_text_without_sensitive_labels() {
        let m = metrics();
        m.request("sidecar", StatusCode::OK);
        m.error("sidecar", "ServiceUnavailable");
        m.rejection("no_client_certificate");
        let text = m.encode();
        assert!(
            text.contains("regroup_requests_total{listener=\"sidecar\",code=\"200\"}"),
            "{text}"
        );
        assert!(text
            .contains("regroup_errors_total{listener=\"sidecar\",reason=\"ServiceUnavailable\"}"));
        assert!(text.contains("regroup_front_rejections_total{reason=\"no_client_certificate\"}"));
        assert!(text.ends_with("# EOF\n"));
    }
}
