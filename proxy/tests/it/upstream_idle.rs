//! Idle upstream connections closed on the pool's own timer
//! (`limits.upstreamIdleConnectionTimeout`), with no request coming to
//! close them, and the gauges of open connections and h2 streams, against
//! the real binary and a TLS upstream that counts its open connections.

use std::time::{Duration, Instant};

use crate::regroup_binary::{get, start_with_kubeconfig, tls_kubeconfig, Regroup};
use crate::watch_upstream::{open_watch, watch_ends, WatchUpstream, PATH, WATCH};

/// regroup's `/metrics`.
async fn scrape(r: &Regroup) -> String {
    let (code, body) = get(r.metrics, "/metrics").await;
    assert_eq!(code, 200, "{body}");
    body
}

/// Asserts the gauges: connections by protocol, h2 streams.
async fn gauges(r: &Regroup, http1: usize, h2: usize, streams: usize) {
    let m = scrape(r).await;
    for line in [
        format!("regroup_upstream_connections{{protocol=\"http1\"}} {http1}\n"),
        format!("regroup_upstream_connections{{protocol=\"h2\"}} {h2}\n"),
        format!("regroup_upstream_h2_streams {streams}\n"),
    ] {
        assert!(m.contains(&line), "{line}{m}");
    }
}

/// Waits (a functional wait, sending nothing to regroup) until the
/// upstream has `n` connections open.
async fn until_open(up: &WatchUpstream, n: usize, r: &Regroup) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while up.open() != n {
        assert!(
            Instant::now() < deadline,
            "{} open, not {n}\n{}",
            up.open(),
            r.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn get_foo(r: &Regroup) {
    let (code, body) = get(r.port, PATH).await;
    assert_eq!(code, 200, "{body}\n{}", r.log());
}

#[tokio::test]
async fn an_idle_extra_h2_connection_is_closed_without_traffic_and_the_first_stays() {
    // One stream per connection (regroup's own limit): beside a watch, a
    // GET opens a second.
    let up = WatchUpstream::start(None).await;
    let r = start_with_kubeconfig(
        "upstream-idle-h2",
        &tls_kubeconfig(up.port, &up.ca_pem),
        // `auto`: the GET goes to h2 too, so it needs a second connection.
        "upstream:\n  http2: auto\nlimits:\n  upstreamIdleConnectionTimeout: 1s\n  upstreamMaxStreamsPerConnection: 1\n",
    )
    .await;
    let w = open_watch(&r, WATCH).await;
    // A fresh connection's first stream is counted, before the server's
    // SETTINGS can have said anything.
    gauges(&r, 0, 1, 1).await;
    get_foo(&r).await;
    assert_eq!(up.accepted(), 2, "{}", r.log());
    // No request from here on: the extra connection closes on the timer.
    until_open(&up, 1, &r).await;
    gauges(&r, 0, 1, 1).await;
    // The watch ends; its connection, the first, stays open past several
    // idle timeouts.
    up.end_watches();
    watch_ends(w, &r).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(up.open(), 1, "{}", r.log());
    gauges(&r, 0, 1, 0).await;
    get_foo(&r).await;
    assert_eq!(up.accepted(), 2, "{}", r.log());
}

#[tokio::test]
async fn an_idle_http1_connection_is_closed_without_traffic() {
    let up = WatchUpstream::start(None).await;
    let r = start_with_kubeconfig(
        "upstream-idle-http1",
        &tls_kubeconfig(up.port, &up.ca_pem),
        "upstream:\n  http2: never\nlimits:\n  upstreamIdleConnectionTimeout: 1s\n",
    )
    .await;
    get_foo(&r).await;
    get_foo(&r).await;
    assert_eq!(up.accepted(), 1, "{}", r.log());
    until_open(&up, 0, &r).await;
    gauges(&r, 0, 0, 0).await;
    // The next request opens a new one.
    get_foo(&r).await;
    assert_eq!(up.accepted(), 2, "{}", r.log());
}

#[tokio::test]
async fn the_gauges_count_each_connection_and_stream_while_they_are_open() {
    let up = WatchUpstream::start(None).await;
    let r = start_with_kubeconfig(
        "upstream-gauges",
        &tls_kubeconfig(up.port, &up.ca_pem),
        "upstream:\n  http2: watches\nlimits:\n  upstreamMaxStreamsPerConnection: 1\n",
    )
    .await;
    gauges(&r, 0, 0, 0).await;
    // Two watches, one stream each on two h2 connections; a GET on HTTP/1.1.
    let a = open_watch(&r, WATCH).await;
    let b = open_watch(&r, WATCH).await;
    get_foo(&r).await;
    gauges(&r, 1, 2, 2).await;
    up.end_watches();
    watch_ends(a, &r).await;
    watch_ends(b, &r).await;
    // The streams are released when the watches end; the connections stay
    // (90 s idle by default).
    gauges(&r, 1, 2, 0).await;
}

#[tokio::test]
async fn a_zero_idle_connection_timeout_is_refused_at_start() {
    let err = crate::regroup_binary::check_refuses(
        "upstream-idle-bad",
        "limits:\n  upstreamIdleConnectionTimeout: 0s\n",
    );
    assert!(
        err.contains("limits.upstreamIdleConnectionTimeout: must be more than 0s"),
        "{err}"
    );
}
