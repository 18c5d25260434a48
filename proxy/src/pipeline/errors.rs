//! The failures of the pipeline's own making (an upstream that did not
//! answer, a body it can't rename), as `Failure`s; `pipeline/respond.rs`
//! turns every failure into the caller's answer.

use crate::status::Failure;
use crate::upstream::SendError;

/// An upstream request that failed: `504` when the upstream did not answer
/// within `limits.upstreamResponseHeaderTimeout`, else `503`.
pub(crate) fn upstream(fwd: &super::exchange::Forward, e: &SendError) -> Failure {
    let kind = if e.is_timeout() {
        "timeout"
    } else {
        "unreachable"
    };
    fwd.metrics.upstream_error(fwd.listener, kind);
    if e.is_timeout() {
        return Failure::gateway_timeout(format!(
            "Timeout: the Kubernetes API server did not answer: {e} \
             (limits.upstreamResponseHeaderTimeout)"
        ));
    }
    unavailable(e)
}

/// The upstream could not be reached: the message names the cause chain.
fn unavailable(e: &dyn std::error::Error) -> Failure {
    Failure::unavailable(format!(
        "the Kubernetes API server is unavailable: {}",
        crate::upstream::with_causes(e)
    ))
}

/// regroup asked for none of these (`pipeline/headers.rs` removes them from
/// `Accept`), so an answer in one is the upstream's fault.
pub(crate) fn unrenamable_answer() -> Failure {
    Failure::bad_gateway("the API server answered in an encoding regroup can't rename")
}
