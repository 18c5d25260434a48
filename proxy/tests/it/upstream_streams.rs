//! The server's stream limit on the h2 connection to the apiserver,
//! against the real binary. kube-apiserver allows 100 streams per h2
//! connection; every request in flight and every open watch is one. With
//! the connection full, hyper would hold the next request until a watch
//! ends (minutes); regroup opens another connection instead, as client-go
//! does. Its own bound, `limits.upstreamMaxStreamsPerConnection`, applies
//! too.

use std::time::Duration;

use tokio::net::TcpStream;

use crate::regroup_binary::{get, start_with_kubeconfig, tls_kubeconfig, Regroup, OWN_TOKEN};
use crate::watch_upstream::{watch_ends, WatchUpstream, PATH, WATCH};

/// A watch through regroup, its first event read: its stream is open.
async fn open_watch(r: &Regroup) -> TcpStream {
    crate::watch_upstream::open_watch(r, WATCH).await
}

/// A GET through regroup, answered within a generous wait (a request stuck
/// behind a full connection would wait until a watch ends: forever here).
async fn get_answered(r: &Regroup, what: &str) {
    let answered = tokio::time::timeout(Duration::from_secs(10), get(r.port, PATH)).await;
    let Ok((code, body)) = answered else {
        panic!("{what}: no answer within 10s\n{}", r.log());
    };
    assert_eq!(code, 200, "{what}: {body}\n{}", r.log());
    assert!(body.contains("\"name\":\"alpha\""), "{what}: {body}");
}

#[tokio::test]
async fn a_full_connection_opens_another_when_the_server_allows_two_streams() {
    let up = WatchUpstream::start(Some(2)).await;
    let r = start_with_kubeconfig(
        "upstream-streams-server",
        &tls_kubeconfig(up.port, &up.ca_pem),
        "",
    )
    .await;
    let a = open_watch(&r).await;
    let b = open_watch(&r).await;
    assert_eq!(up.accepted(), 1, "two watches, one connection\n{}", r.log());

    // The connection carries the server's two streams: the GET goes on a
    // second one.
    get_answered(&r, "beside two watches").await;
    assert_eq!(up.accepted(), 2, "{}", r.log());
    // And so does the next, the second connection having room.
    get_answered(&r, "again").await;
    assert_eq!(up.accepted(), 2, "{}", r.log());

    // The watches end: their streams are released, requests still work on
    // the connections open.
    up.end_watches();
    watch_ends(a, &r).await;
    watch_ends(b, &r).await;
    for i in 0..3 {
        get_answered(&r, &format!("after the watches, {i}")).await;
    }
    assert_eq!(up.accepted(), 2, "{}", r.log());
    // A new watch and a GET fit on the first connection again.
    let c = open_watch(&r).await;
    get_answered(&r, "beside one watch").await;
    assert_eq!(up.accepted(), 2, "{}", r.log());
    drop(c);
    assert!(!r.log().contains(OWN_TOKEN));
}

#[tokio::test]
async fn a_server_allowing_one_stream_gets_a_connection_per_watch_from_the_start() {
    // The server's limit is read before a fresh connection takes a second
    // request: a second watch queued by hyper behind the first would wait
    // until that one ends.
    let up = WatchUpstream::start(Some(1)).await;
    let r = start_with_kubeconfig(
        "upstream-streams-one",
        &tls_kubeconfig(up.port, &up.ca_pem),
        "",
    )
    .await;
    let a = open_watch(&r).await;
    let b = open_watch(&r).await;
    assert_eq!(up.accepted(), 2, "{}", r.log());
    get_answered(&r, "beside two watches").await;
    assert_eq!(up.accepted(), 3, "{}", r.log());
    get_answered(&r, "again").await;
    assert_eq!(up.accepted(), 3, "{}", r.log());
    up.end_watches();
    watch_ends(a, &r).await;
    watch_ends(b, &r).await;
}

#[tokio::test]
async fn regroups_own_limit_of_one_stream_per_connection_opens_one_per_watch() {
    let up = WatchUpstream::start(None).await;
    let r = start_with_kubeconfig(
        "upstream-streams-own",
        &tls_kubeconfig(up.port, &up.ca_pem),
        "limits:\n  upstreamMaxStreamsPerConnection: 1\n",
    )
    .await;
    let a = open_watch(&r).await;
    assert_eq!(up.accepted(), 1, "{}", r.log());
    let b = open_watch(&r).await;
    assert_eq!(up.accepted(), 2, "{}", r.log());
    get_answered(&r, "beside two watches").await;
    assert_eq!(up.accepted(), 3, "{}", r.log());

    up.end_watches();
    watch_ends(a, &r).await;
    watch_ends(b, &r).await;
    // One after the other, each request finds a connection with room.
    for i in 0..3 {
        get_answered(&r, &format!("after the watches, {i}")).await;
    }
    assert_eq!(up.accepted(), 3, "{}", r.log());
}

#[tokio::test]
async fn a_zero_stream_limit_is_refused_at_start() {
    let err = crate::regroup_binary::check_refuses(
        "upstream-streams-bad",
        "limits:\n  upstreamMaxStreamsPerConnection: 0\n",
    );
    assert!(
        err.contains("limits.upstreamMaxStreamsPerConnection: must be at least 1"),
        "{err}"
    );
}
