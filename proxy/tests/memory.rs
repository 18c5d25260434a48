//! Issue 32: memory bounded under any input and any concurrency, against
//! the real `regroup` binary and a stub upstream on loopback. Oversized
//! uploads refused before they are read, uploads that need renaming
//! sharing one budget (waiting or 429, never lost or corrupted), a gzip
//! bomb stopped at the per-object limit. Peak RSS (`VmHWM` of the spawned
//! binary) is printed for each (`--nocapture`); only a generous bound is
//! asserted, never a timing.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const APP: &str = "samplecontroller.k8s.io";
const CLUSTER: &str = "samplecontroller.team1.example.com";
const FOO: &str = r#"{"apiVersion":"samplecontroller.team1.example.com/v1alpha1","kind":"Foo","metadata":{"name":"alpha"}}"#;
const FOOS: &str = "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos";

/// The request bodies the upstream received, in arrival order.
type Seen = Arc<Mutex<Vec<Bytes>>>;

/// A stub apiserver: a write is answered with its own body (so the answer
/// is renamed back), `foos/bomb` with a gzip bomb, anything else with FOO.
async fn upstream(bomb: Bytes) -> (u16, Seen) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = Seen::default();
    let s = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = l.accept().await else {
                continue;
            };
            let (seen, bomb) = (s.clone(), bomb.clone());
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let (seen, bomb) = (seen.clone(), bomb.clone());
                    async move {
                        let path = req.uri().path().to_owned();
                        let write = req.method() != http::Method::GET;
                        let body = req.into_body().collect().await?.to_bytes();
                        let mut r = Response::builder().header("content-type", "application/json");
                        let out = if write {
                            seen.lock().unwrap().push(body.clone());
                            body
                        } else if path.ends_with("/bomb") {
                            r = r.header("content-encoding", "gzip");
                            bomb
                        } else {
                            Bytes::from_static(FOO.as_bytes())
                        };
                        Ok::<_, hyper::Error>(r.body(Full::new(out)).unwrap())
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (port, seen)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The real binary, killed on drop.
struct Regroup {
    child: Child,
    port: u16,
    metrics: u16,
    dir: PathBuf,
}

impl Drop for Regroup {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Regroup {
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("regroup.log")).unwrap_or_default()
    }

    /// A field of `/proc/<pid>/status`, in KiB (`VmRSS`, `VmHWM`).
    fn status_kib(&self, field: &str) -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        s.lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("{field} in /proc/<pid>/status"))
    }
}

async fn start(name: &str, upstream_port: u16, limits: &str) -> Regroup {
    let dir = std::env::temp_dir().join(format!("regroup-mem-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (port, metrics) = (free_port(), free_port());
    std::fs::write(
        dir.join("config.yaml"),
        format!(
            "rules:\n- from: {APP}\n  to: {CLUSTER}\n\
             listeners:\n  http: 127.0.0.1:{port}\n  metrics: 127.0.0.1:{metrics}\n{limits}"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("kubeconfig"),
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{upstream_port}'}}}}]\n\
             contexts: [{{name: c, context: {{cluster: c, user: u}}}}]\n\
             users: [{{name: u, user: {{token: t}}}}]\n"
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("regroup.log")).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_regroup"))
        .args(["serve", "-c"])
        .arg(dir.join("config.yaml"))
        .arg("--kubeconfig")
        .arg(dir.join("kubeconfig"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let r = Regroup {
        child,
        port,
        metrics,
        dir,
    };
    for p in [port, metrics] {
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", p)).await.is_err() {
            assert!(Instant::now() < deadline, "not listening:\n{}", r.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    r
}

/// Status code, headers and body of one HTTP/1.1 answer read to the end.
fn parse(out: &[u8]) -> (u16, String, Vec<u8>) {
    let at = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {:?}", String::from_utf8_lossy(out)));
    let head = String::from_utf8_lossy(&out[..at]).into_owned();
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    (code, head, out[at + 4..].to_vec())
}

/// Sends `request` (head and body) on a new connection, reads the answer.
async fn exchange(port: u16, head: String, body: &[u8]) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    // An answer may come before the body is read: what matters is it.
    let _ = s.write_all(body).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(60), s.read_to_end(&mut out))
        .await
        .expect("an answer within 60 s");
    parse(&out)
}

async fn get(port: u16, path: &str) -> (u16, String, Vec<u8>) {
    let head = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    exchange(port, head, b"").await
}

async fn metric(r: &Regroup, name: &str) -> u64 {
    let (_, _, body) = get(r.metrics, "/metrics").await;
    let text = String::from_utf8(body).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("{name} in /metrics:\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

fn assert_status(body: &[u8], code: u16, reason: &str) {
    let v: serde_json::Value = serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(body)));
    assert_eq!(v["kind"], "Status", "{v}");
    assert_eq!(v["code"], code, "{v}");
    assert_eq!(v["reason"], reason, "{v}");
}

/// One upload of 64 MiB, refused: with a `Content-Length` nothing of the
/// body is sent before the answer is read; chunked, it is sent until
/// regroup answers (or stops reading). Returns the code and the bytes of
/// body written.
async fn oversized_upload(port: u16, chunked: bool) -> (u16, Vec<u8>, usize) {
    const SIZE: usize = 64 << 20;
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let framing = if chunked {
        "Transfer-Encoding: chunked".to_string()
    } else {
        format!("Content-Length: {SIZE}")
    };
    let head = format!(
        "POST {FOOS} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n{framing}\r\n\r\n"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let (mut rd, mut wr) = s.into_split();
    let written = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let w = written.clone();
    let writer = tokio::spawn(async move {
        let mut sent = 0;
        if chunked {
            let chunk = vec![b' '; 64 << 10];
            let mut framed = format!("{:x}\r\n", chunk.len()).into_bytes();
            framed.extend_from_slice(&chunk);
            framed.extend_from_slice(b"\r\n");
            while sent < SIZE {
                if wr.write_all(&framed).await.is_err() {
                    break;
                }
                sent += chunk.len();
                w.store(sent, std::sync::atomic::Ordering::Relaxed);
            }
        }
    });
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    // Until the whole answer is in (regroup closes after refusing).
    loop {
        match tokio::time::timeout(Duration::from_secs(60), rd.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => panic!("no answer within 60 s"),
        }
        if let Some(at) = out.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&out[..at]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map(|v| v.trim().parse().unwrap())
                .unwrap_or(0);
            if out.len() >= at + 4 + len {
                break;
            }
        }
    }
    writer.abort();
    let _ = writer.await;
    let sent = written.load(std::sync::atomic::Ordering::Relaxed);
    let (code, _, body) = parse(&out);
    (code, body, sent)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_uploads_are_refused_before_they_are_read() {
    let (up, seen) = upstream(Bytes::new()).await;
    let r = start("uploads", up, "").await;
    assert_eq!(
        metric(
            &r,
            "regroup_memory_refusals_total{reason=\"request_too_large\"}"
        )
        .await,
        0
    );
    let rss_before = r.status_kib("VmRSS");
    // Eight at once: four with a Content-Length (no byte of body sent),
    // four chunked (refused once 3 MiB arrived).
    let tasks: Vec<_> = (0..8)
        .map(|i| tokio::spawn(oversized_upload(r.port, i % 2 == 1)))
        .collect();
    for (i, t) in tasks.into_iter().enumerate() {
        let (code, body, sent) = t.await.unwrap();
        assert_eq!(code, 413, "upload {i}: {}", String::from_utf8_lossy(&body));
        assert_status(&body, 413, "RequestEntityTooLarge");
        let message = serde_json::from_slice::<serde_json::Value>(&body).unwrap()["message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(message.contains("limits.maxRequestBodyBytes"), "{message}");
        if i % 2 == 0 {
            assert_eq!(sent, 0, "refused from its Content-Length alone");
        }
        // Chunked: what the client got into the socket (the kernel's
        // buffers on both sides hold several MiB) before the answer.
        eprintln!("upload {i}: 413 after {sent} bytes of body written by the client");
    }
    let hwm = r.status_kib("VmHWM");
    eprintln!(
        "8 x 64 MiB uploads: VmRSS before {} KiB, VmHWM after {} KiB: peak growth {} KiB",
        rss_before,
        hwm,
        hwm.saturating_sub(rss_before)
    );
    // Before this issue: +529 MiB. A generous bound, not a benchmark.
    assert!(
        hwm.saturating_sub(rss_before) < 32 << 10,
        "peak grew by {} KiB",
        hwm - rss_before
    );
    assert!(seen.lock().unwrap().is_empty(), "nothing was forwarded");
    assert_eq!(
        metric(
            &r,
            "regroup_memory_refusals_total{reason=\"request_too_large\"}"
        )
        .await,
        8
    );
    // The next request is served.
    let (code, _, body) = get(r.port, &format!("{FOOS}/alpha")).await;
    assert_eq!(code, 200);
    assert!(String::from_utf8_lossy(&body).contains(APP));
    assert_eq!(metric(&r, "regroup_memory_in_use_bytes").await, 0);
    let log = r.log();
    assert_eq!(
        log.matches("memory: refused a request body").count(),
        8,
        "one log line per refusal:\n{log}"
    );
}

/// A 2.5 MiB Foo named `n`, in the app's names.
fn big_foo(n: usize) -> String {
    let filler: String = std::iter::repeat_n(format!("{n:04}-"), (5 << 19) / 5).collect();
    format!(
        r#"{{"apiVersion":"{APP}/v1alpha1","kind":"Foo","metadata":{{"name":"foo-{n}"}},"spec":{{"data":"{filler}"}}}}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_uploads_share_the_budget_none_lost_or_corrupted() {
    const N: usize = 16;
    let (up, seen) = upstream(Bytes::new()).await;
    // 16 MiB: three of these uploads at a time (each takes twice its body
    // for the request, twice for the answer), far less than the 16.
    let r = start(
        "share",
        up,
        "limits:\n  memoryBudgetBytes: 16777216\n  memoryBudgetWait: 2s\n",
    )
    .await;
    assert_eq!(metric(&r, "regroup_memory_budget_bytes").await, 16 << 20);
    assert_eq!(
        metric(&r, "regroup_memory_refusals_total{reason=\"busy\"}").await,
        0
    );
    let rss_before = r.status_kib("VmRSS");
    let tasks: Vec<_> = (0..N)
        .map(|n| {
            let port = r.port;
            tokio::spawn(async move {
                let body = big_foo(n);
                let head = format!(
                    "PUT {FOOS}/foo-{n} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let started = Instant::now();
                let (code, head, out) = exchange(port, head, body.as_bytes()).await;
                (n, code, head, out, body, started.elapsed())
            })
        })
        .collect();
    let (mut ok, mut busy) = (0, 0);
    for t in tasks {
        let (n, code, head, out, sent, took) = t.await.unwrap();
        match code {
            200 => {
                // Renamed there and back: exactly what was sent.
                assert!(out == sent.as_bytes(), "upload {n}: the answer differs");
                ok += 1;
            }
            429 => {
                assert_status(&out, 429, "TooManyRequests");
                assert!(
                    head.to_ascii_lowercase().contains("retry-after: 1"),
                    "{head}"
                );
                busy += 1;
            }
            c => panic!("upload {n}: {c} {}", String::from_utf8_lossy(&out)),
        }
        eprintln!("upload {n}: {code} in {took:?}");
    }
    let hwm = r.status_kib("VmHWM");
    eprintln!(
        "{N} x 2.5 MiB renamed uploads, 16 MiB budget: {ok} served, {busy} refused 429; \
         VmRSS before {rss_before} KiB, VmHWM after {hwm} KiB: peak growth {} KiB",
        hwm.saturating_sub(rss_before)
    );
    assert!(ok >= 1, "some served");
    // Every upload served reached the upstream renamed, exactly.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen.len(),
        ok,
        "each served upload reached the upstream once"
    );
    for b in &seen {
        let text = std::str::from_utf8(b).unwrap();
        let n: usize = text
            .split("\"name\":\"foo-")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(
            text,
            big_foo(n).replace(APP, CLUSTER),
            "upload {n} upstream"
        );
    }
    assert_eq!(
        metric(&r, "regroup_memory_refusals_total{reason=\"busy\"}").await,
        busy as u64
    );
    assert_eq!(metric(&r, "regroup_memory_in_use_bytes").await, 0);
    // The budget bounds what is held: the peak stays within it plus what
    // the process needs around it (measured and printed above).
    assert!(
        hwm.saturating_sub(rss_before) < 64 << 10,
        "peak grew by {} KiB",
        hwm - rss_before
    );
    // A single request larger than the whole budget is refused at once.
    let too_big = format!(
        r#"{{"apiVersion":"{APP}/v1alpha1","kind":"Foo","metadata":{{"name":"x"}},"spec":{{"data":"{}"}}}}"#,
        " ".repeat(10 << 20)
    );
    let r2 = start(
        "whole",
        up,
        "limits:\n  memoryBudgetBytes: 16777216\n  maxRequestBodyBytes: 33554432\n",
    )
    .await;
    let head = format!(
        "PUT {FOOS}/x HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        too_big.len()
    );
    let (code, _, out) = exchange(r2.port, head, b"").await;
    assert_eq!(code, 413, "{}", String::from_utf8_lossy(&out));
    assert!(String::from_utf8_lossy(&out).contains("whole memory budget"));
    assert_eq!(
        metric(&r2, "regroup_memory_refusals_total{reason=\"over_budget\"}").await,
        1
    );
}

/// A gzip body of `prefix` then `spaces` spaces (1 GiB from about 1 MiB),
/// built from one sync-flushed block of 1 MiB of spaces repeated: every
/// copy decodes alone (a literal, then matches at distance 1).
fn gzip_bomb(prefix: &[u8], mib: usize) -> Bytes {
    use flate2::write::DeflateEncoder;
    use flate2::Compression;
    use std::io::Write;
    let mut p = DeflateEncoder::new(Vec::new(), Compression::best());
    p.write_all(prefix).unwrap();
    p.flush().unwrap();
    let head = p.get_ref().clone();
    let spaces = vec![b' '; 1 << 20];
    let mut e = DeflateEncoder::new(Vec::new(), Compression::best());
    e.write_all(&spaces).unwrap();
    e.flush().unwrap();
    let block = e.get_ref().clone();
    let end = DeflateEncoder::new(Vec::new(), Compression::best())
        .finish()
        .unwrap();
    let mut crc = flate2::Crc::new();
    crc.update(prefix);
    for _ in 0..mib {
        crc.update(&spaces);
    }
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    out.extend_from_slice(&head);
    for _ in 0..mib {
        out.extend_from_slice(&block);
    }
    out.extend_from_slice(&end);
    out.extend_from_slice(&crc.sum().to_le_bytes());
    out.extend_from_slice(&(crc.amount()).to_le_bytes());
    Bytes::from(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gzip_bomb_is_a_502_after_inflating_at_most_the_object_limit() {
    let prefix = &FOO.as_bytes()[..FOO.len() - 1];
    let bomb = gzip_bomb(prefix, 1024);
    eprintln!("gzip bomb: {} bytes, inflating to 1 GiB", bomb.len());
    assert!(bomb.len() < 2 << 20);
    // The bomb decodes (its first 16 MiB, checked here).
    let mut d = flate2::read::GzDecoder::new(&bomb[..]);
    let mut first = vec![0u8; 16 << 20];
    std::io::Read::read_exact(&mut d, &mut first).unwrap();
    assert!(first.starts_with(prefix) && first[prefix.len()..].iter().all(|&b| b == b' '));
    drop(first);

    let (up, _) = upstream(bomb).await;
    let r = start("bomb", up, "").await;
    let rss_before = r.status_kib("VmRSS");
    let (code, _, body) = get(r.port, &format!("{FOOS}/bomb")).await;
    assert_eq!(code, 502, "{}", String::from_utf8_lossy(&body));
    assert_status(&body, 502, "InternalError");
    let message = String::from_utf8_lossy(&body).into_owned();
    assert!(
        message.contains(&format!("inflates past {} bytes", 8 << 20)),
        "{message}"
    );
    let hwm = r.status_kib("VmHWM");
    eprintln!(
        "gzip bomb 1 GiB: VmRSS before {rss_before} KiB, VmHWM after {hwm} KiB: peak growth {} KiB",
        hwm.saturating_sub(rss_before)
    );
    // Before this issue: +256 MiB. A generous bound, not a benchmark.
    assert!(
        hwm.saturating_sub(rss_before) < 32 << 10,
        "peak grew by {} KiB",
        hwm - rss_before
    );
    assert_eq!(
        metric(
            &r,
            "regroup_memory_refusals_total{reason=\"object_too_large\"}"
        )
        .await,
        1
    );
    assert_eq!(metric(&r, "regroup_memory_in_use_bytes").await, 0);
    // The next request is served.
    let (code, _, _) = get(r.port, &format!("{FOOS}/alpha")).await;
    assert_eq!(code, 200);
}

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// A list as its head, one item repeated, its tail (in `sep`-separated
/// JSON or length-prefixed protobuf): generated a chunk at a time, never
/// held whole.
#[derive(Clone)]
struct Pattern {
    head: Bytes,
    item: Bytes,
    sep: &'static [u8],
    count: usize,
    tail: Bytes,
}

impl Pattern {
    fn len(&self) -> usize {
        self.head.len()
            + self.item.len() * self.count
            + self.sep.len() * self.count.saturating_sub(1)
            + self.tail.len()
    }

    /// Its bytes in chunks of about 64 KiB.
    fn chunks(&self) -> impl Iterator<Item = Bytes> + Send + 'static {
        let p = self.clone();
        let per = ((64 << 10) / (p.item.len() + p.sep.len())).max(1);
        let batches = p.count.div_ceil(per);
        std::iter::once(p.head.clone())
            .chain((0..batches).map(move |b| {
                let n = per.min(p.count - b * per);
                let mut out = Vec::with_capacity(n * (p.item.len() + p.sep.len()));
                for i in 0..n {
                    if b * per + i > 0 {
                        out.extend_from_slice(p.sep);
                    }
                    out.extend_from_slice(&p.item);
                }
                Bytes::from(out)
            }))
            .chain(std::iter::once(self.tail.clone()))
    }

    /// The JSON list `body` (one item) with its item `count` times.
    fn json(body: &[u8], count: usize) -> Pattern {
        let body = body.strip_suffix(b"\n").unwrap_or(body);
        let start = find(body, b"\"items\":[").unwrap() + b"\"items\":[".len();
        let end = body.len() - b"]}".len();
        assert_eq!(&body[end..], b"]}");
        Pattern {
            head: Bytes::copy_from_slice(&body[..start]),
            item: Bytes::copy_from_slice(&body[start..end]),
            sep: b",",
            count,
            tail: Bytes::copy_from_slice(&body[end..]),
        }
    }

    /// The protobuf list `body` (`k8s\0`, typeMeta, raw holding the
    /// ListMeta and one item, the rest) with its item `count` times.
    fn protobuf(body: &[u8], count: usize) -> Pattern {
        assert!(body.starts_with(b"k8s\0") && body[4] == 0x0a);
        let mut at = 5;
        let n = read_varint(body, &mut at);
        let head_end = at + n;
        assert_eq!(body[head_end], 0x12, "raw after typeMeta");
        at = head_end + 1;
        let n = read_varint(body, &mut at);
        let (raw, tail) = (&body[at..at + n], &body[at + n..]);
        // The ListMeta (field 1), then the one item (field 2).
        assert_eq!(raw[0], 0x0a);
        let mut i = 1;
        let meta_len = read_varint(raw, &mut i);
        let (meta, item) = raw.split_at(i + meta_len);
        assert_eq!(item[0], 0x12);
        let mut j = 1;
        assert_eq!(read_varint(item, &mut j) + j, item.len(), "one item");
        let mut head = body[..head_end].to_vec();
        head.push(0x12);
        let raw_len = meta.len() + item.len() * count;
        let mut v = raw_len as u64;
        while v >= 0x80 {
            head.push(v as u8 | 0x80);
            v >>= 7;
        }
        head.push(v as u8);
        head.extend_from_slice(meta);
        Pattern {
            head: Bytes::from(head),
            item: Bytes::copy_from_slice(item),
            sep: b"",
            count,
            tail: Bytes::copy_from_slice(tail),
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn read_varint(b: &[u8], at: &mut usize) -> usize {
    let (mut v, mut shift) = (0usize, 0);
    loop {
        let byte = b[*at];
        *at += 1;
        v |= ((byte & 0x7f) as usize) << shift;
        shift += 7;
        if byte < 0x80 {
            return v;
        }
    }
}

fn capture(name: &str) -> Vec<u8> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata/kube-1.24/renamed")
        .join(name);
    std::fs::read(dir.join("response.body")).unwrap()
}

/// A stub apiserver: the CRD list as the Accept asks (the one-item capture
/// with `?one`, else the large list), streamed in 64 KiB chunks; a write
/// answered with its own body.
async fn list_upstream(json: (Bytes, Pattern), proto: (Bytes, Pattern)) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = l.accept().await else {
                continue;
            };
            let (json, proto) = (json.clone(), proto.clone());
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let (json, proto) = (json.clone(), proto.clone());
                    async move {
                        type B = http_body_util::combinators::BoxBody<Bytes, hyper::Error>;
                        let write = req.method() != http::Method::GET;
                        let pb = req
                            .headers()
                            .get("accept")
                            .is_some_and(|a| a.as_bytes().starts_with(PROTOBUF.as_bytes()));
                        let one = req.uri().query() == Some("one");
                        if write {
                            let body = req.into_body().collect().await?.to_bytes();
                            let r: Response<B> = Response::builder()
                                .header("content-type", "application/json")
                                .body(Full::new(body).map_err(|e| match e {}).boxed())
                                .unwrap();
                            return Ok::<_, hyper::Error>(r);
                        }
                        let ((small, big), ct) = if pb {
                            (proto, PROTOBUF)
                        } else {
                            (json, "application/json")
                        };
                        let body: B = if one {
                            Full::new(small).map_err(|e| match e {}).boxed()
                        } else {
                            let frames = big.chunks().map(|c| Ok(http_body::Frame::data(c)));
                            http_body_util::StreamBody::new(futures_util::stream::iter(frames))
                                .boxed()
                        };
                        Ok(Response::builder()
                            .header("content-type", ct)
                            .body(body)
                            .unwrap())
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    port
}

async fn get_whole(port: u16, path: &str, accept: &str) -> (u16, Vec<u8>) {
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let resp = client
        .request(
            Request::get(format!("http://127.0.0.1:{port}{path}"))
                .header("accept", accept)
                .body(Full::default())
                .unwrap(),
        )
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, body.to_vec())
}

/// GETs `path` as `accept`; returns the status and the body, checked
/// against `want` as it arrives (never held whole): (bytes read, whether
/// every one matched).
async fn get_checked(port: u16, path: &str, accept: &str, want: &Pattern) -> (u16, usize, bool) {
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let resp = client
        .request(
            Request::get(format!("http://127.0.0.1:{port}{path}"))
                .header("accept", accept)
                .body(Full::default())
                .unwrap(),
        )
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let mut expected = want.chunks();
    let mut pending = Bytes::new();
    let (mut read, mut same) = (0, true);
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.expect("the list's body").into_data() else {
            continue;
        };
        read += data.len();
        let mut data = &data[..];
        while !data.is_empty() && same {
            if pending.is_empty() {
                match expected.next() {
                    Some(c) => pending = c,
                    None => {
                        same = false;
                        break;
                    }
                }
            }
            let n = pending.len().min(data.len());
            same &= pending[..n] == data[..n];
            pending = pending.slice(n..);
            data = &data[n..];
        }
    }
    let rest: usize = pending.len() + expected.map(|c| c.len()).sum::<usize>();
    (status, read, same && rest == 0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_200_mib_list_streams_through_while_8_clients_upload() {
    const SIZE: usize = 200 << 20;
    const BUDGET: usize = 32 << 20;
    let (json_one, proto_one) = (
        capture("116-list-crd-json"),
        capture("117-list-crd-protobuf"),
    );
    let count = |p: Pattern| SIZE / (p.item.len() + p.sep.len());
    let json_n = count(Pattern::json(&json_one, 1));
    let proto_n = count(Pattern::protobuf(&proto_one, 1));
    let up = list_upstream(
        (
            Bytes::from(json_one.clone()),
            Pattern::json(&json_one, json_n),
        ),
        (
            Bytes::from(proto_one.clone()),
            Pattern::protobuf(&proto_one, proto_n),
        ),
    )
    .await;
    for (enc, accept) in [("json", "application/json"), ("protobuf", PROTOBUF)] {
        let r = start(
            &format!("list-{enc}"),
            up,
            &format!("limits:\n  memoryBudgetBytes: {BUDGET}\n  memoryBudgetWait: 2s\n"),
        )
        .await;
        // What regroup makes of the one-item list, repeated, is what the
        // large list must become.
        let (code, one) = get_whole(r.port, &format!("{CRDS}?one"), accept).await;
        assert_eq!(code, 200);
        let (input_one, n) = if enc == "json" {
            (&json_one, json_n)
        } else {
            (&proto_one, proto_n)
        };
        assert_ne!(&one, input_one, "the list is renamed");
        assert!(find(&one, CLUSTER.as_bytes()).is_none());
        let want = if enc == "json" {
            Pattern::json(&one, n)
        } else {
            Pattern::protobuf(&one, n)
        };
        let rss_before = r.status_kib("VmRSS");
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // Eight clients uploading 2.5 MiB renamed bodies until the list is
        // read (at most 16 each).
        let uploads: Vec<_> = (0..8)
            .map(|c| {
                let (port, done) = (r.port, done.clone());
                tokio::spawn(async move {
                    let (mut ok, mut busy) = (0, 0);
                    for i in 0..16 {
                        if done.load(std::sync::atomic::Ordering::Relaxed) {
                            break;
                        }
                        let n = c * 100 + i;
                        let body = big_foo(n);
                        let head = format!(
                            "PUT {FOOS}/foo-{n} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        );
                        let (code, _, out) = exchange(port, head, body.as_bytes()).await;
                        match code {
                            200 => {
                                assert!(out == body.as_bytes(), "upload {n}: the answer differs");
                                ok += 1;
                            }
                            429 => {
                                assert_status(&out, 429, "TooManyRequests");
                                busy += 1;
                            }
                            c => panic!("upload {n}: {c} {}", String::from_utf8_lossy(&out)),
                        }
                    }
                    (ok, busy)
                })
            })
            .collect();
        let (status, read, same) = get_checked(r.port, CRDS, accept, &want).await;
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let (mut ok, mut busy) = (0, 0);
        for u in uploads {
            let (o, b) = u.await.unwrap();
            ok += o;
            busy += b;
        }
        let hwm = r.status_kib("VmHWM");
        let growth = hwm.saturating_sub(rss_before);
        eprintln!(
            "{enc} list of {} MiB ({n} items) with 8 uploading clients ({ok} uploads served, \
             {busy} refused 429), {} MiB budget: VmRSS before {rss_before} KiB, VmHWM after \
             {hwm} KiB: peak growth {growth} KiB",
            want.len() >> 20,
            BUDGET >> 20
        );
        assert_eq!(status, 200, "{}", r.log());
        assert_eq!(read, want.len(), "the whole list");
        assert!(same, "the list is the one-item list's renaming, repeated");
        assert!(ok >= 1, "uploads served alongside");
        assert_eq!(metric(&r, "regroup_memory_in_use_bytes").await, 0);
        // Within the budget plus the fixed overhead stated in
        // docs/performance.md (measured and printed above).
        assert!(
            growth < ((BUDGET + OVERHEAD) >> 10) as u64,
            "peak grew by {growth} KiB"
        );
    }
}

/// What regroup holds beyond its memory budget under load, at most: hyper's
/// read buffer per busy connection (up to `maxHeaderBytes`) and glibc's
/// per-thread arenas, measured in docs/performance.md ("Beyond the
/// budget": 49 MiB in a debug build with 16 large uploads at once, 8 MiB
/// with both reduced).
const OVERHEAD: usize = 48 << 20;
