//! The closed sets of reasons the metrics registry starts with
//! (`observe/labels.rs`), held against every reason the listeners, the
//! front and the failures produce. Here, above them all, so that observe/
//! imports none of them.

use crate::front::auth::Rejection;
use crate::listen::access::Access;
use crate::listen::path_check::check_path;
use crate::observe::labels::{FRONT_REJECTIONS, LISTENER_REASONS, SIDECAR_REASONS};
use crate::status::{Failure, STATUS_REASONS};

/// Every reason the code produces is one the registry starts with: a
/// new one added without its zero series fails here.
#[test]
fn the_closed_sets_hold_every_reason_the_code_produces() {
    for f in [
        Failure::bad_request(""),
        Failure::too_large(""),
        Failure::unsupported(""),
        Failure::patch_does_not_apply(),
        Failure::invalid(""),
        Failure::bad_gateway(""),
        Failure::insufficient_storage(""),
        Failure::unavailable(""),
        Failure::unauthorized(""),
        Failure::forbidden(""),
        Failure::gateway_timeout(""),
        Failure::too_many_requests(""),
    ] {
        assert!(STATUS_REASONS.contains(&f.reason), "{}", f.reason);
    }
    for path in ["x", "/a/../b", "/a//b", "/a%2Fb"] {
        let r = check_path(path).unwrap_err().reason();
        assert!(LISTENER_REASONS.contains(&r), "{r}");
    }
    let req = |host: &str| {
        http::Request::get("/api")
            .header("host", host)
            .body(())
            .unwrap()
    };
    let (_, r) = Access::loopback(vec!["localhost".into()])
        .check(&req("evil"))
        .unwrap_err();
    assert!(SIDECAR_REASONS.contains(&r), "{r}");
    let (_, r) = Access::beyond_loopback(false)
        .check(&req("evil"))
        .unwrap_err();
    assert!(SIDECAR_REASONS.contains(&r), "{r}");
    for r in [
        Rejection::NoClientCertificate,
        Rejection::UnreadableCertificate,
        Rejection::CommonNameNotAllowed,
        Rejection::NoUser,
        Rejection::MalformedHeader,
    ] {
        assert!(FRONT_REJECTIONS.contains(&r.reason()), "{}", r.reason());
    }
}
