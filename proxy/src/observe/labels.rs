//! The closed sets of label values: every series of a counter family whose
//! labels take one of these is registered at zero when the registry is
//! created, so dashboards and alerts see it before the first event (a
//! series that appears only with its first error has no `rate()` until
//! its second).

use crate::status::STATUS_REASONS;

/// The `listener` label: the app's listeners (plain and TLS), the
/// aggregated front, the webhook listener.
pub const LISTENERS: [&str; 3] = ["sidecar", "front", "webhooks"];

/// The listeners that forward Kubernetes requests (the two stacks).
pub const STACKS: [&str; 2] = ["sidecar", "front"];

/// Reasons every listener refuses a connection or a request before a
/// stack sees it (`listen/path_check.rs`, `listen/mod.rs`).
pub const LISTENER_REASONS: [&str; 6] = [
    "path_not_absolute",
    "path_dot_segment",
    "path_empty_segment",
    "path_encoded_slash",
    "connection_limit",
    "tls_handshake",
];

/// Reasons only the sidecar's listeners count: a foreign `Host` on
/// loopback, no own credential beyond it (`listen/access.rs`).
pub const SIDECAR_REASONS: [&str; 2] = ["foreign_host", "no_credential"];

/// Reasons only the webhook listener counts (`listen/mod.rs`,
/// `webhook/mod.rs`).
pub const WEBHOOK_LISTENER_REASONS: [&str; 1] = ["unknown_webhook"];

/// `regroup_front_rejections_total`'s reasons (`front/auth.rs`).
pub const FRONT_REJECTIONS: [&str; 5] = [
    "no_client_certificate",
    "unreadable_certificate",
    "common_name_not_allowed",
    "no_user",
    "malformed_header",
];

/// `regroup_upstream_errors_total`'s kinds (`pipeline/errors.rs`).
pub const UPSTREAM_ERROR_KINDS: [&str; 2] = ["timeout", "unreachable"];

/// `regroup_config_reloads_total`'s results (`cmd/serve/reload.rs`).
pub const RELOAD_RESULTS: [&str; 2] = ["ok", "failed"];

/// Every `(listener, reason)` of `regroup_errors_total`, reasons in snake
/// case: the stacks answer every Status reason; every listener counts the
/// listener reasons, the sidecar and the webhook listener their own too.
pub fn error_series() -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for listener in STACKS {
        out.extend(STATUS_REASONS.iter().map(|r| (listener, snake_case(r))));
    }
    for listener in LISTENERS {
        let own: &[&str] = match listener {
            "sidecar" => &SIDECAR_REASONS,
            "webhooks" => &WEBHOOK_LISTENER_REASONS,
            _ => &[],
        };
        out.extend(
            LISTENER_REASONS
                .iter()
                .chain(own)
                .map(|r| (listener, (*r).to_owned())),
        );
    }
    out
}

/// `ServiceUnavailable` → `service_unavailable`; snake case stays.
pub fn snake_case(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    for (i, c) in s.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 && !out.ends_with('_') {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_snake_case() {
        assert_eq!(snake_case("ServiceUnavailable"), "service_unavailable");
        assert_eq!(snake_case("Timeout"), "timeout");
        assert_eq!(snake_case("foreign_host"), "foreign_host");
        assert_eq!(snake_case("TooManyRequests"), "too_many_requests");
    }

    #[test]
    fn error_series_are_unique_and_in_one_style() {
        let s = error_series();
        let mut seen = std::collections::HashSet::new();
        for (l, r) in &s {
            assert!(seen.insert((l, r)), "{l} {r} twice");
            assert_eq!(*r, snake_case(r));
        }
        assert!(s.contains(&("sidecar", "service_unavailable".into())));
        assert!(s.contains(&("webhooks", "tls_handshake".into())));
        assert!(s.contains(&("front", "tls_handshake".into())));
        assert!(!s.contains(&("sidecar", "unknown_webhook".into())));
        assert!(!s.contains(&("front", "foreign_host".into())));
        assert!(s.contains(&("front", "path_dot_segment".into())));
    }
}
