//! Observability of the real `regroup` binary: the metrics
//! scraped right after start (every closed label set at zero, names and
//! label values pinned, `build_info` with the commit), `--version`, the
//! request line of a watch written when the watch ends (by the upstream,
//! by the client, by the shutdown drain), and `/readyz` as kube-apiserver
//! answers it (the failed check's root cause, `?verbose`, `?exclude`).

use crate::regroup_binary::{self, free_port, get, Regroup};

use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use http::{Request, Response};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::{TcpListener, TcpStream};

type TestBody = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;

fn event(n: u32) -> Bytes {
    Bytes::from(format!(
        "{{\"type\":\"ADDED\",\"object\":{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"c{n}\"}}}}}}\n"
    ))
}

/// A fake apiserver: a watch in namespace `ends` sends three events and
/// ends; any other watch sends one event and then nothing until the
/// connection closes; everything else is an empty ConfigMapList.
async fn upstream() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                let svc = service_fn(|req: Request<hyper::body::Incoming>| async move {
                    let watch = req.uri().query().is_some_and(|q| q.contains("watch=1"));
                    let body: TestBody = if watch && req.uri().path().contains("/namespaces/ends/")
                    {
                        let s = futures_util::stream::iter(
                            (0..3)
                                .map(|n| Ok::<_, std::convert::Infallible>(Frame::data(event(n)))),
                        );
                        BodyExt::boxed(StreamBody::new(s))
                    } else if watch {
                        let s = futures_util::stream::iter([Ok(Frame::data(event(0)))])
                            .chain(futures_util::stream::pending());
                        BodyExt::boxed(StreamBody::new(s))
                    } else {
                        BodyExt::boxed(Full::new(Bytes::from_static(
                            br#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{},"items":[]}"#,
                        )))
                    };
                    Ok::<_, std::convert::Infallible>(
                        Response::builder()
                            .header("content-type", "application/json")
                            .body(body)
                            .unwrap(),
                    )
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    port
}

/// Starts `regroup serve` against `upstream_port` (a drain of up to 20 s)
/// and waits until it listens.
async fn start(name: &str, upstream_port: u16) -> Regroup {
    regroup_binary::start(
        &format!("obs-{name}"),
        upstream_port,
        "limits:\n  shutdownGracePeriod: 20s\n",
    )
    .await
}

/// The commit the binary should name: `$REGROUP_COMMIT` when the build had
/// it, else this checkout's HEAD, else `unknown`.
fn expected_commit() -> String {
    if let Some(c) = option_env!("REGROUP_COMMIT").filter(|c| !c.trim().is_empty()) {
        return c.trim().to_owned();
    }
    Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim()[..12].to_owned())
        .unwrap_or_else(|| "unknown".into())
}

#[test]
fn version_names_the_commit() {
    let out = Command::new(env!("CARGO_BIN_EXE_regroup"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text.trim(),
        format!(
            "regroup {} (commit {})",
            env!("CARGO_PKG_VERSION"),
            expected_commit()
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_scraped_right_after_start_have_every_closed_series_at_zero() {
    let up = upstream().await;
    let r = start("zero", up).await;
    let (code, text) = get(r.metrics, "/metrics").await;
    assert_eq!(code, 200);
    let commit = expected_commit();
    let pinned = [
        format!(
            "regroup_build_info{{version=\"{}\",commit=\"{commit}\"}} 1",
            env!("CARGO_PKG_VERSION")
        ),
        "regroup_config_generation 1".into(),
        "regroup_config_reloads_total{result=\"ok\"} 0".into(),
        "regroup_config_reloads_total{result=\"failed\"} 0".into(),
        "regroup_open_watches{listener=\"sidecar\"} 0".into(),
        "regroup_open_watches{listener=\"front\"} 0".into(),
        "regroup_front_rejections_total{reason=\"no_client_certificate\"} 0".into(),
        "regroup_front_rejections_total{reason=\"common_name_not_allowed\"} 0".into(),
        "regroup_upstream_errors_total{listener=\"sidecar\",kind=\"timeout\"} 0".into(),
        "regroup_upstream_errors_total{listener=\"sidecar\",kind=\"unreachable\"} 0".into(),
        "regroup_memory_refusals_total{reason=\"over_budget\"} 0".into(),
    ];
    for series in &pinned {
        assert!(
            text.contains(&format!("{series}\n")),
            "{series} in:\n{text}"
        );
    }
    // regroup_errors_total: every reason, in snake case, for each listener.
    let statuses = [
        "bad_request",
        "not_acceptable",
        "not_found",
        "conflict",
        "already_exists",
        "request_entity_too_large",
        "unsupported_media_type",
        "invalid",
        "internal_error",
        "service_unavailable",
        "unauthorized",
        "forbidden",
        "timeout",
        "too_many_requests",
    ];
    let listeners = [
        "path_not_absolute",
        "path_dot_segment",
        "path_empty_segment",
        "path_encoded_slash",
        "connection_limit",
        "tls_handshake",
    ];
    let mut want = Vec::new();
    for listener in ["sidecar", "front"] {
        want.extend(statuses.iter().map(|r| (listener, *r)));
    }
    for (listener, own) in [
        ("sidecar", &["foreign_host", "no_credential"][..]),
        ("front", &[][..]),
        ("webhooks", &["unknown_webhook"][..]),
    ] {
        want.extend(listeners.iter().chain(own).map(|r| (listener, *r)));
    }
    for (listener, reason) in &want {
        let series =
            format!("regroup_errors_total{{listener=\"{listener}\",reason=\"{reason}\"}} 0\n");
        assert!(text.contains(&series), "{series} in:\n{text}");
    }
    // One style: no CamelCase reason anywhere.
    for line in text.lines().filter(|l| l.contains("reason=\"")) {
        let reason = line
            .split("reason=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        assert!(
            reason.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
            "{line}"
        );
    }
    // The families with a closed set and nothing else at start.
    let errors = text
        .lines()
        .filter(|l| l.starts_with("regroup_errors_total{"))
        .count();
    assert_eq!(errors, want.len(), "{text}");
}

/// Opens a watch on `path` and reads its first event: the body to go on
/// reading or to drop.
async fn open_watch(port: u16, path: &str) -> hyper::body::Incoming {
    let stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let (mut h1, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let resp = h1
        .send_request(
            Request::get(path)
                .header("host", "localhost")
                .body(Full::<Bytes>::default())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    let first = body.frame().await.unwrap().unwrap();
    assert!(first.is_data());
    body
}

/// Waits until the log has a request line containing every one of `parts`.
async fn line_with(r: &Regroup, parts: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(l) = r
            .request_lines()
            .into_iter()
            .find(|l| parts.iter().all(|p| l.contains(p)))
        {
            return l;
        }
        assert!(
            Instant::now() < deadline,
            "no request line with {parts:?}:\n{}",
            r.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn field<'a>(line: &'a str, name: &str) -> &'a str {
    line.split(&format!(" {name}="))
        .nth(1)
        .unwrap_or_else(|| panic!("no {name} in {line}"))
        .split(' ')
        .next()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_is_logged_when_it_ends_with_its_events_and_how_it_ended() {
    let up = upstream().await;
    let mut r = start("watch-lines", up).await;

    // A list and a watch of the same collection differ by verb.
    let (code, _) = get(r.port, "/api/v1/namespaces/ends/configmaps").await;
    assert_eq!(code, 200);
    let list = line_with(&r, &["verb=\"list\""]).await;
    assert!(!list.contains("events="), "{list}");

    // The upstream ends it after three events.
    let (code, body) = get(r.port, "/api/v1/namespaces/ends/configmaps?watch=1").await;
    assert_eq!((code, body.matches("ADDED").count()), (200, 3), "{body}");
    let ended = line_with(&r, &["verb=\"watch\"", "end=\"upstream\""]).await;
    assert_eq!(field(&ended, "events"), "3", "{ended}");
    assert_eq!(field(&ended, "status"), "200", "{ended}");
    assert!(
        ended.contains("path=/api/v1/namespaces/{namespace}/configmaps "),
        "{ended}"
    );
    assert!(field(&ended, "us").parse::<u64>().is_ok(), "{ended}");

    // The client leaves after one event: no line while it is open.
    let body = open_watch(r.port, "/api/v1/namespaces/client/configmaps?watch=1").await;
    assert!(
        !r.request_lines()
            .iter()
            .any(|l| l.contains("end=\"client\"")),
        "a line before the watch ended:\n{}",
        r.log()
    );
    drop(body);
    let gone = line_with(&r, &["verb=\"watch\"", "end=\"client\""]).await;
    assert_eq!(field(&gone, "events"), "1", "{gone}");

    // The drain at shutdown ends the last one: it gets its line too.
    let mut held = open_watch(r.port, "/api/v1/namespaces/held/configmaps?watch=1").await;
    r.terminate();
    while let Some(Ok(_)) = held.frame().await {}
    let log = r.log();
    let cut: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" regroup::request: ") && l.contains("end=\"shutdown\""))
        .collect();
    assert_eq!(cut.len(), 1, "{log}");
    assert_eq!(field(cut[0], "events"), "1", "{log}");
    assert!(field(cut[0], "us").parse::<u64>().unwrap() > 0, "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_names_the_failed_check_and_its_root_cause_and_lists_every_check() {
    let up = free_port(); // nothing listens there
    let r = start("readyz", up).await;
    let (code, text) = get(r.metrics, "/readyz").await;
    assert_eq!(code, 503, "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(lines[0], "[+]shutdown ok");
    assert!(
        lines[1].starts_with("[-]upstream failed: GET /readyz: "),
        "{text}"
    );
    // The root cause, not only hyper's `client error (Connect)`.
    assert!(lines[1].contains("onnection refused"), "{text}");
    assert_eq!(lines[2], "readyz check failed");

    let (code, text) = get(r.metrics, "/readyz?exclude=upstream").await;
    assert_eq!((code, text.as_str()), (200, "ok"));
    let (code, text) = get(r.metrics, "/readyz?verbose&exclude=upstream&exclude=etcd").await;
    assert_eq!(code, 200, "{text}");
    assert_eq!(
        text,
        "[+]shutdown ok\n[+]upstream excluded: ok\n\
         warn: some health checks cannot be excluded: no matches for \"etcd\"\n\
         readyz check passed\n"
    );
    let (code, text) = get(r.metrics, "/livez?verbose").await;
    assert_eq!(
        (code, text.as_str()),
        (200, "[+]ping ok\nlivez check passed\n")
    );
}
