//! The incident metrics through a real listener: open watches are counted
//! while they stream and released when they end; a request the upstream
//! does not answer is counted by kind.

// Exact counts: each stack here counts into a `Metrics` of this test's
// own, as `regroup serve` hands each its process's.

use std::sync::Arc;

use http::{Request, StatusCode};
use http_body_util::Full;
use regroup::observe::metrics::Metrics;

use crate::common;
use crate::upstream_support::{send, sidecar_counting, Answer};

#[tokio::test]
async fn a_finished_watch_is_no_longer_open_and_an_unreachable_upstream_is_counted() {
    let event = r#"{"type":"ADDED","object":{"apiVersion":"samplecontroller.team1.example.com/v1alpha1","kind":"Foo","metadata":{"name":"a"}}}"#;
    let metrics = Arc::new(Metrics::new());
    let (url, _) = sidecar_counting(
        &common::fixture_map(),
        Answer::ok("application/json", format!("{event}\n{event}\n")),
        metrics.clone(),
    )
    .await;
    let (status, _, body) = send(
        Request::get(format!(
            "{url}/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos?watch=true"
        ))
        .body(Full::default())
        .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body.split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .count(),
        2
    );
    let text = metrics.encode();
    assert!(
        text.contains("regroup_open_watches{listener=\"sidecar\"} 0"),
        "{text}"
    );

    // An upstream that refuses connections.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let up = regroup::upstream::Upstream::new(
        &regroup::upstream::Resolved {
            server: format!("http://{addr}"),
            ..Default::default()
        },
        false,
    )
    .unwrap();
    let proxy = std::sync::Arc::new(
        regroup::pipeline::proxy::Proxy::sidecar(
            regroup::pipeline::live::Live::new(regroup::rewrite::Engine::new(
                common::fixture_map().clone(),
                regroup::rewrite::Catalog::new(&[]).clone(),
            )),
            std::sync::Arc::new(up),
            true,
        )
        .with_metrics(metrics.clone()),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = l.local_addr().unwrap();
    tokio::spawn(common::serve_plain(l, proxy));
    let (status, _, _) = send(
        Request::get(format!("http://{at}/api/v1/namespaces"))
            .body(Full::default())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let text = metrics.encode();
    assert!(
        text.contains("regroup_upstream_errors_total{listener=\"sidecar\",kind=\"unreachable\"} 1"),
        "{text}"
    );
}
