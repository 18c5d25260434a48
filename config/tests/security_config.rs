//! `limits:`, `listeners.allowedHosts` and the credential-lending rules.

use std::time::Duration;

use regroup_config::{load, Limits};

const RULE: &str =
    "rules:\n  - from: samplecontroller.k8s.io\n    to: samplecontroller.team1.example.com\n";

fn with(extra: &str) -> String {
    format!("{RULE}{extra}")
}

#[test]
fn limits_default_to_the_documented_values() {
    let s = load(RULE).unwrap();
    assert_eq!(s.limits, Limits::default());
    assert_eq!(s.limits.header_read_timeout, Duration::from_secs(32));
    assert_eq!(s.limits.max_request_body_bytes, 3 << 20);
    assert_eq!(s.allowed_hosts, ["localhost", "127.0.0.1", "::1"]);
}

#[test]
fn limits_are_read_with_go_durations() {
    let s = load(&with(
        "limits:\n  headerReadTimeout: 2s\n  upstreamResponseHeaderTimeout: 1m30s\n  maxInflatedBytes: 1048576\n  shutdownGracePeriod: 500ms\n",
    ))
    .unwrap();
    assert_eq!(s.limits.header_read_timeout, Duration::from_secs(2));
    assert_eq!(
        s.limits.upstream_response_header_timeout,
        Duration::from_secs(90)
    );
    assert_eq!(s.limits.max_inflated_bytes, 1 << 20);
    assert_eq!(s.limits.shutdown_grace_period, Duration::from_millis(500));
    assert_eq!(s.limits.max_headers, Limits::default().max_headers);
}

#[test]
fn bad_limits_are_refused() {
    for (yaml, needle) in [
        ("limits:\n  headerReadTimeout: 32\n", "not a duration"),
        (
            "limits:\n  headerReadTimeout: 0s\n",
            "limits.headerReadTimeout",
        ),
        ("limits:\n  maxHeaderBytes: 10\n", "limits.maxHeaderBytes"),
        ("limits:\n  maxConnections: 0\n", "limits.maxConnections"),
        ("limits:\n  noSuchLimit: 1\n", "noSuchLimit"),
    ] {
        let e = load(&with(yaml)).unwrap_err().to_string();
        assert!(e.contains(needle), "{yaml}: {e}");
    }
}

#[test]
fn allowed_hosts_are_normalized_and_checked() {
    let s = load(&with(
        "listeners:\n  allowedHosts: [LocalHost, \"[::1]\", app.internal]\n",
    ))
    .unwrap();
    assert_eq!(s.allowed_hosts, ["localhost", "::1", "app.internal"]);
    for bad in ["\"localhost:8001\"", "\"http://x\"", "\"\""] {
        let e = load(&with(&format!("listeners:\n  allowedHosts: [{bad}]\n")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("listeners.allowedHosts"), "{bad}: {e}");
    }
}

const TLS_WIDE: &str =
    "listeners:\n  tls:\n    listen: 0.0.0.0:8443\n    generatedCaFile: /tmp/ca.crt\n";

#[test]
fn pass_through_off_beyond_loopback_is_refused_without_the_opt_in() {
    let e = load(&with(&format!(
        "{TLS_WIDE}credentials:\n  passThrough: false\n"
    )))
    .unwrap_err()
    .to_string();
    assert!(e.contains("credentials.passThrough: false"), "{e}");
    assert!(e.contains("dangerousLendCredentials"), "{e}");
    // On loopback it is the app's own choice.
    load(&with(
        "listeners:\n  tls:\n    listen: 127.0.0.1:8443\n    generatedCaFile: /tmp/ca.crt\ncredentials:\n  passThrough: false\n",
    ))
    .unwrap();
    // With the opt-in it is accepted, and warned about.
    let s = load(&with(&format!(
        "{TLS_WIDE}    dangerousLendCredentials: true\ncredentials:\n  passThrough: false\n"
    )))
    .unwrap();
    let w = s.warnings().join("\n");
    assert!(w.contains("dangerousLendCredentials"), "{w}");
    assert!(w.contains("acts as regroup"), "{w}");
}

#[test]
fn no_warning_for_a_default_configuration() {
    assert!(load(&with(TLS_WIDE)).unwrap().warnings().is_empty());
}
