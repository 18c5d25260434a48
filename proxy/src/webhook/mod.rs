//! The webhook listener: kube-apiserver calls the app's admission and
//! conversion webhooks here, in the cluster's names. Each fronted webhook
//! has a path of its own; a review is renamed for the app (the catalog's
//! AdmissionReview and ConversionReview places), forwarded to the app's
//! webhook server, and its answer renamed for the cluster (the JSON Patch
//! inside it too, as a patch of the reviewed kind).
//!
//! Failures answer with a Kubernetes `Status` and an HTTP error, so
//! kube-apiserver applies the webhook's `failurePolicy` (a denial would
//! ignore it): `404` for a path no webhook has, `405`/`415` for what a
//! webhook is never sent, `400` for a body that isn't a review or can't be
//! renamed, `413` when too large, `502` when the app's answer is not a
//! review for that `uid` or can't be renamed, `503`/`504` when the app's
//! server can't be reached or doesn't answer in time. Logs name the
//! webhook, the review's kind and `uid` and the reason, never a body.

pub mod review;
pub mod tls;

use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use regroup_config::Direction;

use crate::body::budget;
use crate::body::Body;
use crate::body::{collect, collect_held, full, HeldCollectError};
use crate::kube::Wire;
use crate::observe::metrics::Metrics;
use crate::pipeline::live::Live;
use crate::pipeline::respond;
use crate::rewrite::Context;
use crate::status::Failure;
use crate::upstream::Upstream;
use review::{Answer, Review};

/// One fronted webhook.
pub struct Hook {
    /// For logs and metrics.
    pub name: String,
    /// The path regroup serves it at.
    pub path: String,
    /// The app's webhook server.
    pub backend: Arc<Upstream>,
    /// The path (and query) of the app's webhook on `backend`.
    pub backend_path: String,
}

/// The webhook listener's handler.
pub struct Webhooks {
    live: Live,
    hooks: Vec<Hook>,
    max_body: usize,
    metrics: Arc<Metrics>,
}

fn json_response(code: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(full(body.into()));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

impl Webhooks {
    /// The handler for `hooks`, renaming with the live engine, reading
    /// bodies up to `max_body` bytes.
    pub fn new(live: Live, hooks: Vec<Hook>, max_body: usize) -> Webhooks {
        Webhooks {
            live,
            hooks,
            max_body,
            metrics: Arc::new(Metrics::new()),
        }
    }

    /// Counting into `metrics` (the process's), the backends' tallies
    /// with it.
    pub fn with_metrics(self, metrics: Arc<Metrics>) -> Webhooks {
        for hook in &self.hooks {
            metrics.count_upstream(hook.backend.tallies().clone());
        }
        Webhooks { metrics, ..self }
    }

    /// The listener's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Every failure answered, counted and logged as the webhook
    /// listener's.
    fn responder(&self) -> respond::Responder<'_> {
        respond::Responder {
            metrics: &self.metrics,
            listener: "webhooks",
        }
    }

    /// Serves one call. Every failure becomes a `Status`.
    pub async fn handle<B>(&self, req: Request<B>) -> Response<Body>
    where
        B: http_body::Body<Data = Bytes> + Send,
        B::Error: Into<crate::upstream::BoxError>,
    {
        let Some(hook) = self.hooks.iter().find(|h| h.path == req.uri().path()) else {
            let f = Failure {
                code: StatusCode::NOT_FOUND,
                reason: "NotFound",
                message: format!("no webhook is served at {}", req.uri().path()),
            };
            return self.responder().webhook_failed(None, "unknown_webhook", f);
        };
        match self.review(hook, req).await {
            Ok(r) => r,
            Err((f, reason)) => self.responder().webhook_failed(Some(&hook.name), reason, f),
        }
    }

    async fn review<B>(
        &self,
        hook: &Hook,
        req: Request<B>,
    ) -> Result<Response<Body>, (Failure, &'static str)>
    where
        B: http_body::Body<Data = Bytes> + Send,
        B::Error: Into<crate::upstream::BoxError>,
    {
        if req.method() != Method::POST {
            let f = Failure {
                code: StatusCode::METHOD_NOT_ALLOWED,
                reason: "MethodNotAllowed",
                message: "a webhook is called with POST".into(),
            };
            return Err((f, "method"));
        }
        let json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .eq_ignore_ascii_case("application/json")
            });
        if !json || req.headers().contains_key(header::CONTENT_ENCODING) {
            let f = Failure::unsupported("a review is sent as application/json, unencoded");
            return Err((f, "media_type"));
        }
        let query = req.uri().query().map(str::to_owned);
        let too_large = |limit| {
            (
                Failure::too_large(format!(
                    "a review is limited to {limit} bytes (limits.maxReviewBytes)"
                )),
                "too_large",
            )
        };
        // The review and its renamed copy, from the memory budget (refused
        // from `Content-Length` before any of it is read).
        let b = budget::budget();
        let mut held = b.empty();
        let got = collect_held(
            req.into_body(),
            self.max_body,
            2,
            &mut held,
            &mut b.deadline(),
        )
        .await;
        let body = got.map_err(|e| match e {
            HeldCollectError::TooLarge(l) => {
                budget::refused(budget::Reason::RequestTooLarge, "a review", l);
                too_large(l)
            }
            HeldCollectError::Budget(r) => (r.failure("the review", false), "memory"),
            HeldCollectError::Io(e) => (Failure::bad_request(e), "read"),
        })?;
        let engine = self.live.load();
        let bad = |e: String| (Failure::bad_request(e), "bad_review");
        // The caller's answer says why, as text.
        let cluster_review = Review::read(&body).map_err(|e| bad(e.to_string()))?;
        let kind = cluster_review.kind.name();
        self.metrics.webhook_request(&hook.name, kind);
        let for_app = engine
            .body(Direction::ToApp, Wire::Json, Context::default(), &body)
            .map_err(|e| bad(format!("the {kind} can't be renamed: {e}")))?
            .map(Bytes::from)
            .unwrap_or(body);
        let review = Review::read(&for_app).map_err(|e| bad(e.to_string()))?;
        tracing::debug!(webhook = %hook.name, kind, uid = %review.uid, "webhooks: review");

        let path = match &query {
            Some(q) if hook.backend_path.contains('?') => format!("{}&{q}", hook.backend_path),
            Some(q) => format!("{}?{q}", hook.backend_path),
            None => hook.backend_path.clone(),
        };
        let uri = hook
            .backend
            .uri(&path)
            .map_err(|e| (Failure::bad_gateway(e.to_string()), "backend_uri"))?;
        let mut call = Request::post(uri)
            .body(full(for_app))
            .map_err(|e| (Failure::bad_gateway(e.to_string()), "backend_uri"))?;
        let h = call.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        h.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        if let Ok(host) = HeaderValue::from_str(hook.backend.authority().as_str()) {
            h.insert(header::HOST, host);
        }
        let answer = hook.backend.send(call).await.map_err(|e| {
            if e.is_timeout() {
                let f = Failure {
                    code: StatusCode::GATEWAY_TIMEOUT,
                    reason: "Timeout",
                    message: format!("the app's webhook did not answer: {e}"),
                };
                (f, "backend_timeout")
            } else {
                let f = Failure::unavailable(format!("the app's webhook can't be reached: {e}"));
                (f, "backend_unreachable")
            }
        })?;
        let status = answer.status();
        let answer = collect(answer.into_body(), self.max_body)
            .await
            .map_err(|e| {
                (
                    Failure::bad_gateway(format!("the app's answer: {e}")),
                    "backend_read",
                )
            })?;
        if status != StatusCode::OK {
            let f = Failure::bad_gateway(format!("the app's webhook answered {status}"));
            return Err((f, "backend_status"));
        }
        let bad_answer = |e: String| (Failure::bad_gateway(e), "bad_answer");
        let said = Answer::read(&answer, &review)
            .map_err(|e| bad_answer(format!("the app's answer: {e}")))?;
        // An answer that omits its apiVersion and kind (v1beta1 allowed
        // it) is still read as the review it answers.
        let cx = Context {
            hint: Some((review.api_version.as_str(), kind)),
            addressed: review
                .target
                .as_ref()
                .map(|(g, k)| (g.as_str(), k.as_str())),
        };
        let for_cluster = engine
            .body(Direction::ToCluster, Wire::Json, cx, &answer)
            .map_err(|e| bad_answer(format!("the app's answer can't be renamed: {e}")))?
            .map(Bytes::from)
            .unwrap_or(answer);
        if said.refused {
            self.metrics.webhook_rejection(&hook.name);
        }
        tracing::debug!(webhook = %hook.name, kind, uid = %review.uid, refused = said.refused, "webhooks: answered");
        Ok(json_response(StatusCode::OK, for_cluster))
    }
}

#[cfg(test)]
mod tests;
