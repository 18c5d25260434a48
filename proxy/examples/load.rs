//! Load test on loopback: the added latency of a ~2 KB GET through the real
//! `regroup` binary versus straight to a static upstream, and regroup's
//! peak RSS while it streams a ~200 MB list.
//!
//! `cargo build --release -p regroup && cargo run --release -p regroup --example load`
//! (options: `--requests N`, `--list-mb M`, `--bin PATH`). Bounded: a fixed
//! number of requests, loopback only, and everything stops by itself.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

const CLUSTER: &str = "samplecontroller.team1.example.com";

fn foo_item(i: usize) -> String {
    format!(
        r#"{{"apiVersion":"{CLUSTER}/v1alpha1","kind":"Foo","metadata":{{"name":"foo-{i:08}","namespace":"ns","uid":"0b4459ae-6b7f-4714-8b54-c2a993ef70c6","resourceVersion":"883","generation":1,"creationTimestamp":"2026-11-22T03:09:52Z","labels":{{"app":"alpha"}},"ownerReferences":[{{"apiVersion":"{CLUSTER}/v1alpha1","kind":"Foo","name":"parent","uid":"0b4459ae-6b7f-4714-8b54-c2a993ef70c6","controller":true}}],"managedFields":[{{"manager":"regroup-fixture-capture","operation":"Update","apiVersion":"{CLUSTER}/v1alpha1","time":"2026-11-22T03:09:52Z","fieldsType":"FieldsV1","fieldsV1":{{"f:metadata":{{"f:labels":{{".":{{}},"f:app":{{}}}}}},"f:spec":{{".":{{}},"f:deploymentName":{{}},"f:replicas":{{}}}}}}}}]}},"spec":{{"deploymentName":"alpha-deploy","replicas":1}},"status":{{"availableReplicas":0}}}}"#
    )
}

/// A ~2 KB object (padded with an annotation).
fn object_2k() -> Bytes {
    let mut o = foo_item(0);
    let pad = 2048usize.saturating_sub(o.len() + 40);
    o = o.replacen(
        r#""labels":{"app":"alpha"}"#,
        &format!(
            r#""labels":{{"app":"alpha"}},"annotations":{{"pad":"{}"}}"#,
            "x".repeat(pad)
        ),
        1,
    );
    Bytes::from(o)
}

async fn upstream(list_bytes: usize) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let object = object_2k();
    tokio::spawn(async move {
        loop {
            let (s, _) = l.accept().await.unwrap();
            let _ = s.set_nodelay(true);
            let object = object.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let object = object.clone();
                    async move {
                        let body = if req.uri().path().ends_with("/foos") {
                            // A list generated as it is sent: ~64 KB frames.
                            let head = format!(
                                r#"{{"kind":"FooList","apiVersion":"{CLUSTER}/v1alpha1","metadata":{{"resourceVersion":"1"}},"items":["#
                            );
                            let item_len = foo_item(0).len() + 1;
                            let n = list_bytes / item_len;
                            let frames =
                                futures_util::stream::iter((0..=n / 64 + 1).map(move |chunk| {
                                    let mut s = String::with_capacity(64 * item_len + 256);
                                    if chunk == 0 {
                                        s.push_str(&head);
                                    }
                                    for i in chunk * 64..((chunk + 1) * 64).min(n) {
                                        if i > 0 {
                                            s.push(',');
                                        }
                                        s.push_str(&foo_item(i));
                                    }
                                    if chunk == n / 64 + 1 {
                                        s.push_str("]}");
                                    }
                                    Ok::<_, Infallible>(Frame::data(Bytes::from(s)))
                                }));
                            StreamBody::new(frames).boxed()
                        } else {
                            Full::new(object).map_err(|e| match e {}).boxed()
                        };
                        Ok::<_, Infallible>(
                            Response::builder()
                                .header("content-type", "application/json")
                                .body(body)
                                .unwrap(),
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    addr
}

fn start_regroup(bin: &str, upstream: SocketAddr, listen: SocketAddr) -> Child {
    let dir = std::env::temp_dir().join(format!("regroup-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "rules:\n- from: samplecontroller.k8s.io\n  to: {CLUSTER}\nlogging:\n  level: warn\n"
        ),
    )
    .unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!("apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster: {{server: 'http://{upstream}'}}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\nusers:\n- name: u\n  user: {{token: load}}\n"),
    )
    .unwrap();
    Command::new(bin)
        .args(["serve", "-c"])
        .arg(&config)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--listen")
        .arg(listen.to_string())
        .stdout(Stdio::null())
        .spawn()
        .expect("start regroup (build it with cargo build --release -p regroup)")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

async fn latencies(url: &str, n: usize) -> Vec<Duration> {
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let mut out = Vec::with_capacity(n);
    for i in 0..n + n / 10 {
        let t = Instant::now();
        let resp = client
            .request(Request::get(url).body(Full::default()).unwrap())
            .await
            .unwrap();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert!(body.len() > 1000);
        if i >= n / 10 {
            out.push(t.elapsed());
        }
    }
    out.sort();
    out
}

fn vm_hwm_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: &str| -> String {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
            .unwrap_or_else(|| default.to_string())
    };
    let requests: usize = arg("--requests", "5000").parse().unwrap();
    let list_mb: usize = arg("--list-mb", "200").parse().unwrap();
    let bin = arg(
        "--bin",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../target/release/regroup"),
    );

    let up = upstream(list_mb << 20).await;
    let listen: SocketAddr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let mut child = start_regroup(&bin, up, listen);
    let deadline = Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(listen).await.is_err() {
        assert!(Instant::now() < deadline, "regroup did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // `--path /version` measures the transport alone (no body rewrite).
    let path = arg("--path", "/apis/{G}/v1alpha1/namespaces/ns/foos/alpha");
    let direct = latencies(
        &format!("http://{up}{}", path.replace("{G}", CLUSTER)),
        requests,
    )
    .await;
    let via = latencies(
        &format!(
            "http://{listen}{}",
            path.replace("{G}", "samplecontroller.k8s.io")
        ),
        requests,
    )
    .await;
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!("GET ~2 KB object, {requests} sequential requests each, keep-alive, loopback");
    for (name, p) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)] {
        let (d, v) = (percentile(&direct, p), percentile(&via, p));
        println!(
            "  {name}: direct {:8.1} us   via regroup {:8.1} us   added {:8.1} us",
            us(d),
            us(v),
            us(v) - us(d)
        );
    }

    let rss_before = vm_hwm_kb(child.id());
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let t = Instant::now();
    let resp = client
        .request(
            Request::get(format!(
                "http://{listen}/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos"
            ))
            .body(Full::default())
            .unwrap(),
        )
        .await
        .unwrap();
    let mut body = resp.into_body();
    let mut total = 0usize;
    let mut renamed_seen = false;
    while let Some(f) = body.frame().await {
        let f = f.expect("list body");
        if let Ok(d) = f.into_data() {
            if !renamed_seen {
                renamed_seen = d.windows(24).any(|w| w == b"samplecontroller.k8s.io/");
            }
            assert!(
                !d.windows(CLUSTER.len()).any(|w| w == CLUSTER.as_bytes()),
                "cluster name leaked"
            );
            total += d.len();
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let hwm = vm_hwm_kb(child.id());
    println!(
        "list: {:.0} MB streamed in {secs:.2} s ({:.0} MB/s), every item renamed: {renamed_seen}; regroup peak RSS {:.1} MB (before the list: {:.1} MB)",
        total as f64 / 1e6,
        total as f64 / 1e6 / secs,
        hwm as f64 / 1024.0,
        rss_before as f64 / 1024.0
    );
    let _ = child.kill();
    let _ = child.wait();
}
