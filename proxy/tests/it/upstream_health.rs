//! The h2 connection's health check (`limits.upstreamReadIdleTimeout`,
//! `upstreamPingTimeout`), against the real binary: between regroup and a
//! TLS upstream offering h2 (as a kube-apiserver does) sits a relay that
//! can freeze its connections, as a node that vanished without a RST would.
//! A frozen connection's ping goes unanswered: its watch and its waiting
//! request end, the log says why, and the next request opens a new
//! connection. A healthy idle connection answers its pings and is kept.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::regroup_binary::{
    get, read_to_end_within, start_with_kubeconfig, tls_kubeconfig, Regroup, OWN_TOKEN,
};
use crate::watch_upstream::{Relay, WatchUpstream, PATH, WATCH};

/// Pings after a second of silence, a second for the answer.
/// `auto`: every request on the one h2 connection, so a GET is held on
/// the watch's connection.
const FAST_PINGS: &str =
    "upstream:\n  http2: auto\nlimits:\n  upstreamReadIdleTimeout: 1s\n  upstreamPingTimeout: 1s\n";

/// regroup in front of a relay in front of a TLS h2 upstream.
/// The upstream is returned to be kept: dropping it ends its watches.
async fn setup(name: &str, extra: &str) -> (Relay, Regroup, WatchUpstream) {
    let upstream = WatchUpstream::start(None).await;
    let relay = Relay::start(upstream.port).await;
    let kc = tls_kubeconfig(relay.port, &upstream.ca_pem);
    let r = start_with_kubeconfig(name, &kc, extra).await;
    (relay, r, upstream)
}

/// Reads from `s` until `needle` has arrived; what was read.
async fn read_until(s: &mut TcpStream, needle: &str, r: &Regroup) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(20);
    while !String::from_utf8_lossy(&got).contains(needle) {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
            other => panic!(
                "no {needle:?} ({other:?}): {}\n{}",
                String::from_utf8_lossy(&got),
                r.log()
            ),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test]
async fn an_unanswered_ping_ends_the_watch_and_the_waiting_request_and_a_new_connection_serves_the_next(
) {
    let (relay, r, _upstream) = setup("upstream-health-dead", FAST_PINGS).await;
    let (code, body) = get(r.port, PATH).await;
    assert_eq!(code, 200, "{body}\n{}", r.log());
    assert_eq!(relay.accepted(), 1);

    // A watch with its first event through, and a GET the upstream holds:
    // both on the one h2 connection.
    let mut watch = TcpStream::connect(("127.0.0.1", r.port)).await.unwrap();
    watch
        .write_all(
            format!("GET {WATCH} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
    let first = read_until(&mut watch, "\"ADDED\"", &r).await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    let port = r.port;
    let held = tokio::spawn(async move { get(port, &format!("{PATH}?hold")).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(relay.accepted(), 1, "{}", r.log());

    relay.freeze();

    // The watch ends: the client sees its stream end cleanly (the last
    // chunk), so a client-go informer watches again (a functional wait, not
    // a measure of how fast).
    let rest = match read_to_end_within(&mut watch, Duration::from_secs(20)).await {
        Ok(rest) => rest,
        Err(rest) => panic!("the watch did not end: {rest}\n{}", r.log()),
    };
    assert!(
        (first + &rest).ends_with("\r\n0\r\n\r\n"),
        "{rest}\n{}",
        r.log()
    );
    // The request waiting for its headers is answered with a Status.
    let (code, body) = held.await.unwrap();
    assert_eq!(code, 503, "{body}\n{}", r.log());
    assert!(body.contains("\"kind\":\"Status\""), "{body}");
    let log = r.log();
    assert!(
        log.contains("WARN") && log.contains("no answer to a ping"),
        "{log}"
    );
    assert!(!log.contains(OWN_TOKEN), "{log}");
    let metrics = scrape(&r).await;
    assert!(
        metrics.contains("regroup_upstream_ping_timeouts_total 1\n"),
        "{metrics}"
    );

    // The next request opens a new connection, relayed as before.
    let (code, body) = get(r.port, PATH).await;
    assert_eq!(code, 200, "{body}\n{}", r.log());
    assert_eq!(relay.accepted(), 2, "{}", r.log());
}

#[tokio::test]
async fn a_healthy_idle_connection_answers_its_pings_and_is_kept() {
    let (relay, r, _upstream) = setup("upstream-health-idle", FAST_PINGS).await;
    let (code, body) = get(r.port, PATH).await;
    assert_eq!(code, 200, "{body}\n{}", r.log());
    // Several ping intervals with nothing in flight.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (code, body) = get(r.port, PATH).await;
    assert_eq!(code, 200, "{body}\n{}", r.log());
    assert_eq!(relay.accepted(), 1, "{}", r.log());
    assert!(!r.log().contains("no answer to a ping"), "{}", r.log());
    let metrics = scrape(&r).await;
    assert!(
        metrics.contains("regroup_upstream_ping_timeouts_total 0\n"),
        "{metrics}"
    );
}

/// regroup's `/metrics`.
async fn scrape(r: &Regroup) -> String {
    let (code, body) = get(r.metrics, "/metrics").await;
    assert_eq!(code, 200, "{body}");
    body
}

#[tokio::test]
async fn an_invalid_ping_timeout_is_refused_at_start() {
    for (config, needle) in [
        (
            "limits:\n  upstreamPingTimeout: 0s\n",
            "limits.upstreamPingTimeout",
        ),
        ("limits:\n  upstreamReadIdleTimeout: 3x\n", "`1.5s`"),
    ] {
        let err = crate::regroup_binary::check_refuses("upstream-health-bad", config);
        assert!(err.contains(needle), "{config}: {err}");
    }
}
