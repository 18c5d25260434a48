//! Load test of the aggregated front on loopback: the added latency of a
//! ~2 KB GET through the real `regroup` binary's front (mTLS in, request-header
//! authentication, cluster names -> app names, TLS to the app with regroup's
//! client certificate, app names -> cluster names) versus straight to the app
//! over TLS, in the same run; then the throughput of a large list through the
//! front and regroup's peak RSS.
//!
//! `cargo build --release -p regroup && cargo run --release -p regroup --example front_load`
//! (options: `--requests N` (5000), `--list-mb M` (50, 0 to skip), `--h2`
//! (callers speak HTTP/2 instead of HTTP/1.1), `--bin PATH`, `--timeout S`
//! (300)). Bounded: a fixed number of requests on one keep-alive connection
//! per case, loopback only; regroup is killed at the end. Exits non-zero when
//! an answer is not 200 or the front's answer is not in the cluster's names.

#[path = "../tests/it/tls_support/mod.rs"]
mod tls_support;

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aho_corasick::AhoCorasick;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use regroup::net::tls::{self, Identity};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::{TcpListener, TcpStream};

/// The app's group and the cluster's name for it.
const APP: &str = "wardle.example.com";
const CLUSTER: &str = "wardle.team1.example.com";

fn flunder(group: &str, name: &str, pad: usize) -> String {
    let annotations = if pad > 0 {
        format!(r#","annotations":{{"pad":"{}"}}"#, "x".repeat(pad))
    } else {
        String::new()
    };
    format!(
        r#"{{"apiVersion":"{group}/v1alpha1","kind":"Flunder","metadata":{{"name":"{name}","namespace":"ns","uid":"0b4459ae-6b7f-4714-8b54-c2a993ef70c6","resourceVersion":"883","generation":1,"creationTimestamp":"2026-11-22T03:09:52Z","labels":{{"app":"alpha"}}{annotations},"ownerReferences":[{{"apiVersion":"{group}/v1alpha1","kind":"Fischer","name":"parent","uid":"0b4459ae-6b7f-4714-8b54-c2a993ef70c6","controller":true}}],"managedFields":[{{"manager":"kubectl-client-side-apply","operation":"Update","apiVersion":"{group}/v1alpha1","time":"2026-11-22T03:09:52Z","fieldsType":"FieldsV1","fieldsV1":{{"f:metadata":{{"f:labels":{{".":{{}},"f:app":{{}}}}}},"f:spec":{{".":{{}},"f:reference":{{}},"f:referenceType":{{}}}}}}}}]}},"spec":{{"reference":"parent","referenceType":"Fischer"}},"status":{{}}}}"#
    )
}

/// A ~2 KB Flunder in the app's names (padded with an annotation).
fn object_2k() -> Bytes {
    let pad = 2048usize.saturating_sub(flunder(APP, "x", 0).len() + 30);
    Bytes::from(flunder(APP, "x", pad))
}

/// The app's aggregated server: TLS (h2 or http/1.1), answers the 2 KB
/// object, or a list of about `list_bytes` streamed in ~64-item frames for
/// `.../flunders`; 404 for any path not in its own group. Sets `saw_cert`
/// when a caller presents a client certificate.
async fn app_backend(id: &Identity, list_bytes: usize, saw_cert: Arc<AtomicBool>) -> u16 {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls_support::app_server_config(id, true));
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let object = object_2k();
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = l.accept().await else {
                continue;
            };
            let _ = s.set_nodelay(true);
            let (acceptor, object, saw_cert) = (acceptor.clone(), object.clone(), saw_cert.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(s).await else {
                    return;
                };
                if tls.get_ref().1.peer_certificates().is_some() {
                    saw_cert.store(true, Ordering::Relaxed);
                }
                let svc = service_fn(move |req: Request<Incoming>| {
                    let object = object.clone();
                    async move {
                        let path = req.uri().path();
                        let body = if !path.starts_with(&format!("/apis/{APP}/")) {
                            return Ok::<_, Infallible>(
                                Response::builder()
                                    .status(StatusCode::NOT_FOUND)
                                    .body(Full::new(Bytes::from(path.to_owned())).boxed())
                                    .unwrap(),
                            );
                        } else if path.ends_with("/flunders") {
                            list_body(list_bytes)
                        } else {
                            Full::new(object).boxed()
                        };
                        Ok(Response::builder()
                            .header("content-type", "application/json")
                            .body(body)
                            .unwrap())
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    port
}

/// Number of items in a list of about `list_bytes`.
fn list_items(list_bytes: usize) -> usize {
    list_bytes / (flunder(APP, "flunder-00000000", 0).len() + 1)
}

/// A FlunderList generated as it is sent, in frames of 64 items.
fn list_body(list_bytes: usize) -> http_body_util::combinators::BoxBody<Bytes, Infallible> {
    let n = list_items(list_bytes);
    let chunks = n.div_ceil(64);
    let frames = futures_util::stream::iter((0..=chunks).map(move |chunk| {
        let mut s = String::with_capacity(64 * 1024);
        if chunk == 0 {
            s.push_str(&format!(
                r#"{{"kind":"FlunderList","apiVersion":"{APP}/v1alpha1","metadata":{{"resourceVersion":"1"}},"items":["#
            ));
        }
        for i in chunk * 64..((chunk + 1) * 64).min(n) {
            if i > 0 {
                s.push(',');
            }
            s.push_str(&flunder(APP, &format!("flunder-{i:08}"), 0));
        }
        if chunk == chunks {
            s.push_str("]}");
        }
        Ok(Frame::data(Bytes::from(s)))
    }));
    StreamBody::new(frames).boxed()
}

/// One persistent TLS connection, HTTP/1.1 or HTTP/2.
enum Conn {
    H1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

impl Conn {
    /// Connects to 127.0.0.1:`port` trusting `ca_pem` and presenting `cert`.
    async fn open(port: u16, ca_pem: &str, cert: &Identity, h2: bool) -> Result<Conn, String> {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots
                .add(c.map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
        }
        let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_client_auth_cert(
            CertificateDer::pem_slice_iter(cert.cert_pem.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(|e| e.to_string())?,
            PrivateKeyDer::from_pem_slice(cert.key_pem.as_bytes()).map_err(|e| e.to_string())?,
        )
        .map_err(|e| e.to_string())?;
        cfg.alpn_protocols = vec![if h2 {
            b"h2".to_vec()
        } else {
            b"http/1.1".to_vec()
        }];
        let tcp = TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| format!("connect {port}: {e}"))?;
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        let tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
            .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
            .await
            .map_err(|e| format!("TLS to {port}: {e}"))?;
        let io = TokioIo::new(tls);
        Ok(if h2 {
            let (send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(conn);
            Conn::H2(send)
        } else {
            let (send, conn) = hyper::client::conn::http1::handshake(io)
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(conn);
            Conn::H1(send)
        })
    }

    async fn get(&mut self, port: u16, path: &str) -> Result<Response<Incoming>, String> {
        let req = Request::get(format!("https://127.0.0.1:{port}{path}"))
            .header("x-remote-user", "alice")
            .header("x-remote-group", "system:authenticated");
        let e = |e: hyper::Error| e.to_string();
        match self {
            Conn::H1(s) => {
                // HTTP/1.1: origin-form request line and a Host header.
                let req = req
                    .uri(path)
                    .header("host", format!("127.0.0.1:{port}"))
                    .body(Full::default())
                    .unwrap();
                s.ready().await.map_err(e)?;
                s.send_request(req).await.map_err(e)
            }
            Conn::H2(s) => {
                s.ready().await.map_err(e)?;
                s.send_request(req.body(Full::default()).unwrap())
                    .await
                    .map_err(e)
            }
        }
    }
}

/// `n` timed sequential GETs (after `n / 10` untimed ones) on one
/// connection; every answer must be 200 and pass `check`.
async fn latencies(
    conn: &mut Conn,
    port: u16,
    path: &str,
    n: usize,
    check: impl Fn(&[u8]) -> bool,
) -> Result<Vec<Duration>, String> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n + n / 10 {
        let t = Instant::now();
        let resp = conn.get(port, path).await?;
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        let took = t.elapsed();
        if status != StatusCode::OK || !check(&body) {
            return Err(format!(
                "GET :{port}{path} (request {i}): {status}: {}",
                String::from_utf8_lossy(&body[..body.len().min(300)])
            ));
        }
        if i >= n / 10 {
            out.push(took);
        }
    }
    out.sort();
    Ok(out)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Streams a list; returns (bytes, seconds, occurrences of `CLUSTER/`, of `APP/`).
async fn stream_list(
    conn: &mut Conn,
    port: u16,
    path: &str,
) -> Result<(usize, f64, usize, usize), String> {
    let names = AhoCorasick::new([format!("{CLUSTER}/"), format!("{APP}/")]).unwrap();
    let keep = CLUSTER.len(); // the longer name, without its '/'
    let t = Instant::now();
    let resp = conn.get(port, path).await?;
    if resp.status() != StatusCode::OK {
        return Err(format!("list :{port}{path}: {}", resp.status()));
    }
    let mut body = resp.into_body();
    let (mut total, mut counts) = (0usize, [0usize; 2]);
    // The end of the previous frame is searched again with the next one, so
    // a name split across frames is found; a match that ends in the old part
    // was counted already.
    let mut carry: Vec<u8> = Vec::new();
    while let Some(f) = body.frame().await {
        if let Ok(d) = f.map_err(|e| e.to_string())?.into_data() {
            total += d.len();
            let old = carry.len();
            carry.extend_from_slice(&d);
            for m in names.find_iter(&carry).filter(|m| m.end() > old) {
                counts[m.pattern().as_usize()] += 1;
            }
            let cut = carry.len().saturating_sub(keep);
            carry.drain(..cut);
        }
    }
    Ok((total, t.elapsed().as_secs_f64(), counts[0], counts[1]))
}

fn vm_hwm_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Writes the certificates, config and kubeconfig, and starts `regroup serve`.
fn start_regroup(
    bin: &str,
    dir: &Path,
    app: &Identity,
    front_proxy_ca: &str,
    backend: u16,
    front: u16,
) -> Result<(Child, Identity), String> {
    let w = |name: &str, data: &str| -> Result<PathBuf, String> {
        let p = dir.join(name);
        std::fs::write(&p, data).map_err(|e| format!("{}: {e}", p.display()))?;
        Ok(p)
    };
    // regroup's front serving certificate, from files.
    let serving = tls::generate().map_err(|e| e.to_string())?;
    w("front.crt", &serving.cert_pem)?;
    w("front.key", &serving.key_pem)?;
    w("front-ca.crt", serving.ca_pem.as_deref().unwrap())?;
    w("front-proxy-ca.crt", front_proxy_ca)?;
    w("app-ca.crt", app.ca_pem.as_deref().unwrap())?;
    let config = w(
        "config.yaml",
        &format!(
            "rules:\n- from: {APP}\n  to: {CLUSTER}\n\
             listeners:\n  http: 127.0.0.1:{sidecar}\n\
             front:\n  listen: 127.0.0.1:{front}\n  certFile: {d}/front.crt\n  keyFile: {d}/front.key\n  caFile: {d}/front-ca.crt\n\
             \x20 backend: https://127.0.0.1:{backend}\n  backendCaFile: {d}/app-ca.crt\n\
             \x20 requestHeader:\n    fromCluster: false\n    clientCaFile: {d}/front-proxy-ca.crt\n    allowedNames: [front-proxy-client]\n\
             logging:\n  level: warn\n",
            sidecar = free_port(),
            d = dir.display()
        ),
    )?;
    // The sidecar's upstream: a dummy, never contacted by the front.
    let kubeconfig = w(
        "kubeconfig",
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {}}]\n",
    )?;
    let log = std::fs::File::create(dir.join("regroup.log")).map_err(|e| e.to_string())?;
    let child = Command::new(bin)
        .arg("serve")
        .arg("-c")
        .arg(&config)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| {
            format!("starting {bin} (build it with cargo build --release -p regroup): {e}")
        })?;
    Ok((child, serving))
}

struct Args {
    requests: usize,
    list_mb: usize,
    h2: bool,
}

async fn run(args: &Args, child: &mut Option<Child>, bin: &str, dir: &Path) -> Result<(), String> {
    // The cluster's front-proxy CA and the aggregator's client certificate.
    let aggregator = tls::generate_for("front-proxy-ca", &["front-proxy-client".into()], true)
        .map_err(|e| e.to_string())?;
    let app = tls::generate().map_err(|e| e.to_string())?;
    let saw_cert = Arc::new(AtomicBool::new(false));
    let backend = app_backend(&app, args.list_mb << 20, saw_cert.clone()).await;
    let front = free_port();
    let (started, serving) = start_regroup(
        bin,
        dir,
        &app,
        aggregator.ca_pem.as_deref().unwrap(),
        backend,
        front,
    )?;
    let pid = started.id();
    *child = Some(started);
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", front)).await.is_err() {
        if let Some(status) = child
            .as_mut()
            .unwrap()
            .try_wait()
            .map_err(|e| e.to_string())?
        {
            return Err(format!("regroup exited: {status}"));
        }
        if Instant::now() > deadline {
            return Err("regroup's front did not start within 20 s".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let object = "/v1alpha1/namespaces/ns/flunders/x";
    let (app_path, cluster_path) = (
        format!("/apis/{APP}{object}"),
        format!("/apis/{CLUSTER}{object}"),
    );
    let app_ca = app.ca_pem.as_deref().unwrap();
    let front_ca = serving.ca_pem.as_deref().unwrap();
    let mut direct_conn = Conn::open(backend, app_ca, &aggregator, args.h2).await?;
    let mut front_conn = Conn::open(front, front_ca, &aggregator, args.h2).await?;
    let has = |b: &[u8], s: &str| b.windows(s.len()).any(|w| w == s.as_bytes());
    let (app_api, cluster_api) = (
        format!("\"{APP}/v1alpha1\""),
        format!("\"{CLUSTER}/v1alpha1\""),
    );
    let n = args.requests;
    let direct = latencies(&mut direct_conn, backend, &app_path, n, |b| {
        b.len() > 1900 && has(b, &app_api)
    })
    .await?;
    let via = latencies(&mut front_conn, front, &cluster_path, n, |b| {
        b.len() > 1900 && has(b, &cluster_api) && !has(b, &format!("{APP}/"))
    })
    .await?;
    if !saw_cert.load(Ordering::Relaxed) {
        return Err("regroup did not present a client certificate to the app".into());
    }

    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "GET ~2 KB Flunder, {n} sequential requests each (after {} warm-up), one keep-alive TLS connection ({}), loopback",
        n / 10,
        if args.h2 { "h2" } else { "http/1.1" }
    );
    for (name, p) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)] {
        let (d, v) = (us(percentile(&direct, p)), us(percentile(&via, p)));
        println!(
            "  {name}: direct {d:8.1} us   via front {v:8.1} us   added {:8.1} us   ratio {:.2}",
            v - d,
            v / d
        );
    }
    let mean = |s: &[Duration]| us(s.iter().sum::<Duration>()) / s.len() as f64;
    let over_1ms = |s: &[Duration]| s.iter().filter(|d| d.as_millis() >= 1).count();
    println!(
        "  mean: direct {:8.1} us   via front {:8.1} us   (over 1 ms: direct {}, via front {})",
        mean(&direct),
        mean(&via),
        over_1ms(&direct),
        over_1ms(&via)
    );
    println!(
        "  every answer 200, front answers in {CLUSTER}; app saw regroup's client certificate; regroup peak RSS {:.1} MB",
        vm_hwm_kb(pid) as f64 / 1024.0
    );

    if args.list_mb > 0 {
        let items = list_items(args.list_mb << 20);
        let list = "/v1alpha1/namespaces/ns/flunders";
        let (bytes, secs, _, app_names) =
            stream_list(&mut direct_conn, backend, &format!("/apis/{APP}{list}")).await?;
        println!(
            "list of {items} Flunders: direct {:.1} MB in {secs:.2} s ({:.0} MB/s)",
            bytes as f64 / 1e6,
            bytes as f64 / 1e6 / secs
        );
        if app_names != 3 * items + 1 {
            return Err(format!(
                "direct list: {app_names} app names, expected {}",
                3 * items + 1
            ));
        }
        let rss_before = vm_hwm_kb(pid);
        let (bytes, secs, cluster_names, app_names) =
            stream_list(&mut front_conn, front, &format!("/apis/{CLUSTER}{list}")).await?;
        let hwm = vm_hwm_kb(pid);
        println!(
            "  via front {:.1} MB in {secs:.2} s ({:.0} MB/s); {cluster_names} cluster names, {app_names} app names; regroup peak RSS {:.1} MB (before the list: {:.1} MB)",
            bytes as f64 / 1e6,
            bytes as f64 / 1e6 / secs,
            hwm as f64 / 1024.0,
            rss_before as f64 / 1024.0
        );
        if cluster_names != 3 * items + 1 || app_names != 0 {
            return Err(format!(
                "front list: {cluster_names} cluster names (expected {}), {app_names} app names (expected 0)",
                3 * items + 1
            ));
        }
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() {
    let argv: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: &str| -> String {
        argv.iter()
            .position(|a| a == name)
            .and_then(|i| argv.get(i + 1).cloned())
            .unwrap_or_else(|| default.to_string())
    };
    let args = Args {
        requests: arg("--requests", "5000").parse().expect("--requests N"),
        list_mb: arg("--list-mb", "50").parse().expect("--list-mb M"),
        h2: argv.iter().any(|a| a == "--h2"),
    };
    let timeout: u64 = arg("--timeout", "300").parse().expect("--timeout S");
    let bin = arg(
        "--bin",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../target/release/regroup"),
    );
    let dir = std::env::temp_dir().join(format!("regroup-front-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    let mut child = None;
    let result = tokio::time::timeout(
        Duration::from_secs(timeout),
        run(&args, &mut child, &bin, &dir),
    )
    .await
    .unwrap_or_else(|_| Err(format!("not done within {timeout} s")));
    if let Some(mut c) = child {
        let _ = c.kill();
        let _ = c.wait();
    }
    if let Err(e) = result {
        eprintln!("front_load failed: {e}");
        let log = std::fs::read_to_string(dir.join("regroup.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(20).collect();
        for l in tail.into_iter().rev() {
            eprintln!("  regroup: {l}");
        }
        std::fs::remove_dir_all(&dir).ok();
        std::process::exit(1);
    }
    std::fs::remove_dir_all(&dir).ok();
}
