//! Every error regroup answers with becomes a Kubernetes `Status`, here.

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};

use crate::body::budget::{refused, Refusal};
use crate::body::full;
use crate::body::Body;
use crate::kube::status::watch_error_line;
use crate::rewrite::framing::Framing;

/// Every `Status.reason` a [`Failure`] below carries: the metrics register
/// `regroup_errors_total` at zero for each (`observe/labels.rs`, whose test
/// fails when a constructor here uses another).
pub const STATUS_REASONS: [&str; 14] = [
    "BadRequest",
    "NotAcceptable",
    "NotFound",
    "Conflict",
    "AlreadyExists",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "Invalid",
    "InternalError",
    "ServiceUnavailable",
    "Unauthorized",
    "Forbidden",
    "Timeout",
    "TooManyRequests",
];

/// A failure to answer as a Kubernetes `Status`.
#[derive(Debug)]
pub struct Failure {
    /// HTTP status.
    pub code: StatusCode,
    /// `Status.reason` (`BadRequest`, `ServiceUnavailable`, ...).
    pub reason: &'static str,
    /// `Status.message`: says what failed, never bodies or credentials.
    pub message: String,
}

impl Failure {
    /// 400: the app's own request can't be renamed.
    pub fn bad_request(message: impl Into<String>) -> Failure {
        Failure {
            code: StatusCode::BAD_REQUEST,
            reason: "BadRequest",
            message: message.into(),
        }
    }

    /// 413: a body too large to rewrite.
    pub fn too_large(message: impl Into<String>) -> Failure {
        Failure {
            code: StatusCode::PAYLOAD_TOO_LARGE,
            reason: "RequestEntityTooLarge",
            message: message.into(),
        }
    }

    /// 415: a body in a form regroup can't rename yet.
    pub fn unsupported(message: impl Into<String>) -> Failure {
        Failure {
            code: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            reason: "UnsupportedMediaType",
            message: message.into(),
        }
    }

    /// 422, as kube-apiserver answers a JSON Patch that does not apply (a
    /// failed `test`, a missing path): its generic message, whatever failed.
    pub fn patch_does_not_apply() -> Failure {
        Failure {
            code: StatusCode::UNPROCESSABLE_ENTITY,
            reason: "Invalid",
            message: "the server rejected our request due to an error in our request".into(),
        }
    }

    /// 422: a request regroup can't carry out as asked; the message says
    /// why.
    pub fn invalid(message: impl Into<String>) -> Failure {
        Failure {
            code: StatusCode::UNPROCESSABLE_ENTITY,
            reason: "Invalid",
            message: message.into(),
        }
    }

    /// 502: the apiserver's reply can't be renamed.
    pub fn bad_gateway(message: impl Into<String>) -> Failure {
        Failure {
            code: StatusCode::BAD_GATEWAY,
            reason: "InternalError",
            message: message.into(),
        }
    }

    /// 507: an answer regroup can't hold to rename (a protobuf list past
    /// `limits.maxSpillBytes`, or its spill file can't be written).
    pub fn insufficient_storage(message: impl Into<String>) -> Failure {
        Failure {
            code: StatusCode::INSUFFICIENT_STORAGE,
            reason: "InternalError",
            message: message.into(),
        }
    }

    /// 503: the apiserver can't be reached.
    pub fn unavailable(message: impl Into<String>) -> Failure {
        Failure {
            code: StatusCode::SERVICE_UNAVAILABLE,
            reason: "ServiceUnavailable",
            message: message.into(),
        }
    }

    /// The `Status` object's JSON.
    pub fn status_json(&self) -> String {
        crate::kube::status::failure_json(self.code.as_u16(), self.reason, &self.message)
    }

    /// What a watch this failure ends sends last: a JSON watch's `ERROR`
    /// event carrying the `Status` (one line); nothing for a protobuf
    /// watch, which has no error frame a client reads as such (the stream
    /// just ends).
    pub fn watch_error_event(&self, framing: Framing) -> Bytes {
        match framing {
            Framing::Lines => Bytes::from(watch_error_line(
                self.code.as_u16(),
                self.reason,
                &self.message,
            )),
            Framing::LengthPrefixed => Bytes::new(),
        }
    }

    /// The HTTP response.
    pub fn into_response(self) -> Response<Body> {
        let mut r = Response::new(full(Bytes::from(self.status_json())));
        *r.status_mut() = self.code;
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if self.code == StatusCode::TOO_MANY_REQUESTS {
            // As kube-apiserver's own 429s: come back in a second.
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        r
    }
}

/// What kube-apiserver answers for a group it doesn't serve (byte for byte,
/// see the capture `237-get-unknown-group-404`): a shadowed group looks
/// exactly like a missing one.
pub fn page_not_found() -> Response<Body> {
    let mut r = Response::new(full(Bytes::from_static(b"404 page not found\n")));
    *r.status_mut() = StatusCode::NOT_FOUND;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    r
}

impl Failure {
    /// 401, as kube-apiserver answers a caller it can't authenticate.
    pub fn unauthorized(message: impl Into<String>) -> Failure {
        Failure {
            code: StatusCode::UNAUTHORIZED,
            reason: "Unauthorized",
            message: message.into(),
        }
    }

    /// 403: a caller regroup won't serve (a foreign `Host`).
    pub fn forbidden(message: impl Into<String>) -> Failure {
        Failure {
            code: StatusCode::FORBIDDEN,
            reason: "Forbidden",
            message: message.into(),
        }
    }

    /// 404: an object that is not there for this caller (publish mode: its
    /// name is held by another source).
    pub fn not_found(message: impl Into<String>) -> Failure {
        Failure {
            code: StatusCode::NOT_FOUND,
            reason: "NotFound",
            message: message.into(),
        }
    }

    /// 409: a write regroup refuses so as not to overwrite another's object.
    pub fn conflict(message: impl Into<String>) -> Failure {
        Failure {
            code: StatusCode::CONFLICT,
            reason: "Conflict",
            message: message.into(),
        }
    }

    /// 409: a create whose name another holds.
    pub fn already_exists(message: impl Into<String>) -> Failure {
        Failure {
            code: StatusCode::CONFLICT,
            reason: "AlreadyExists",
            message: message.into(),
        }
    }

    /// 504: the apiserver did not answer in time.
    pub fn gateway_timeout(message: impl Into<String>) -> Failure {
        Failure {
            code: StatusCode::GATEWAY_TIMEOUT,
            reason: "Timeout",
            message: message.into(),
        }
    }

    /// 429: too many requests at once.
    pub fn too_many_requests(message: impl Into<String>) -> Failure {
        Failure {
            code: StatusCode::TOO_MANY_REQUESTS,
            reason: "TooManyRequests",
            message: message.into(),
        }
    }
}

/// The memory budget's refusals as the caller sees them: here, not in
/// `body/budget.rs`, which sits below the `Status` answers.
impl Refusal {
    /// Counted, logged, and as the caller's `Status`: 429 (with
    /// `Retry-After`) when busy; when larger than the whole budget, 413 for
    /// the caller's own body, 502 for the upstream's answer.
    pub fn failure(self, what: &str, upstream: bool) -> Failure {
        let asked = match self {
            Refusal::OverBudget { asked, .. } => asked,
            Refusal::Busy => 0,
        };
        refused(self.reason(), what, asked);
        match self {
            Refusal::Busy => Failure::too_many_requests(format!(
                "regroup's memory budget is spent (limits.memoryBudgetBytes); {what} waited and was refused, retry later"
            )),
            Refusal::OverBudget { asked, total } => {
                let m = format!(
                    "{what} needs {asked} bytes, more than regroup's whole memory budget of {total} bytes (limits.memoryBudgetBytes)"
                );
                if upstream {
                    Failure::bad_gateway(m)
                } else {
                    Failure::too_large(m)
                }
            }
        }
    }
}
