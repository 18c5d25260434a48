//! regroup's own credential from an exec plugin, through the real stack:
//! the upstream accepts only the current token; when it rotates, a request
//! with the old one gets 401, regroup refreshes (one plugin run) and sends
//! it again, bodies included, so the app never sees the 401. An app's own
//! token is never retried with regroup's identity nor impersonating.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use regroup::pipeline::proxy::Proxy;
use regroup::rewrite::Catalog;
use regroup::upstream::kubeconfig::ExecConfig;
use regroup::upstream::{Impersonate, Resolved, Upstream};
use tokio::net::TcpListener;

const FOO: &str = r#"{"apiVersion":"samplecontroller.team1.example.com/v1alpha1","kind":"Foo","metadata":{"name":"alpha"}}"#;

/// (method, authorization, impersonate-user, body) of one request.
type Seen = (String, Option<String>, Option<String>, Vec<u8>);

#[derive(Default)]
struct Upstate {
    /// The only token accepted.
    token: String,
    /// (method, authorization, impersonate-user, body) of each request.
    seen: Vec<Seen>,
}

async fn upstream(state: Arc<Mutex<Upstate>>) -> String {
    upstream_tls(state, None).await
}

async fn upstream_tls(
    state: Arc<Mutex<Upstate>>,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let scheme = if tls.is_some() { "https" } else { "http" };
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let state = state.clone();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let state = state.clone();
                    async move {
                        let h =
                            |n: &str| req.headers().get(n).map(|v| v.to_str().unwrap().to_owned());
                        let (auth, imp) = (h("authorization"), h("impersonate-user"));
                        let method = req.method().to_string();
                        let body = req.into_body().collect().await.unwrap().to_bytes().to_vec();
                        let ok = {
                            let mut s = state.lock().unwrap();
                            s.seen.push((method, auth.clone(), imp, body));
                            auth.as_deref() == Some(&format!("Bearer {}", s.token))
                        };
                        let (code, body) = if ok {
                            (StatusCode::OK, FOO)
                        } else {
                            (
                                StatusCode::UNAUTHORIZED,
                                r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}"#,
                            )
                        };
                        Ok::<_, std::convert::Infallible>(
                            Response::builder()
                                .status(code)
                                .header("content-type", "application/json")
                                .body(Full::new(Bytes::from_static(body.as_bytes())))
                                .unwrap(),
                        )
                    }
                });
                let b = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                match acceptor {
                    Some(a) => {
                        if let Ok(s) = a.accept(stream).await {
                            let _ = b.serve_connection(TokioIo::new(s), svc).await;
                        }
                    }
                    None => {
                        let _ = b.serve_connection(TokioIo::new(stream), svc).await;
                    }
                }
            });
        }
    });
    format!("{scheme}://{addr}")
}

/// A plugin printing the token in `dir/token`, counting runs in `dir/runs`.
fn plugin(dir: &Path) -> ExecConfig {
    ExecConfig {
        api_version: "client.authentication.k8s.io/v1".into(),
        command: "sh".into(),
        args: vec![
            "-c".into(),
            format!(
                r#"cd '{}'; n=$(( $(cat runs 2>/dev/null || echo 0) + 1 )); echo $n > runs
printf '{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{{"token":"%s"}}}}' "$(cat token)""#,
                dir.display()
            ),
        ],
        ..ExecConfig::default()
    }
}

fn runs(dir: &Path) -> u32 {
    std::fs::read_to_string(dir.join("runs"))
        .map(|s| s.trim().parse().unwrap())
        .unwrap_or(0)
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("regroup-cred-it-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

async fn request(
    base: &str,
    method: &str,
    body: &'static str,
    auth: Option<&str>,
) -> (StatusCode, String) {
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let mut req = Request::builder()
        .method(method)
        .uri(format!(
            "{base}/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos"
        ))
        .header("content-type", "application/json");
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    let resp = client
        .request(
            req.body(Full::new(Bytes::from_static(body.as_bytes())))
                .unwrap(),
        )
        .await
        .unwrap();
    let status = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_token_is_refreshed_and_the_request_retried_once() {
    let dir = tmp("rotation");
    std::fs::write(dir.join("token"), "one").unwrap();
    let state = Arc::new(Mutex::new(Upstate {
        token: "one".into(),
        ..Upstate::default()
    }));
    let server = upstream(state.clone()).await;
    let up = Upstream::new(
        &Resolved {
            server,
            exec: Some(plugin(&dir)),
            impersonate: Some(Impersonate {
                user: "jane".into(),
                groups: vec!["dev".into()],
                ..Impersonate::default()
            }),
            ..Resolved::default()
        },
        false,
    )
    .unwrap();
    let base = listen(up).await;

    // Ten concurrent first requests: one plugin run.
    let first: Vec<_> = (0..10)
        .map(|_| {
            let base = base.clone();
            tokio::spawn(async move { request(&base, "GET", "", None).await })
        })
        .collect();
    for r in first {
        let (code, body) = r.await.unwrap();
        assert_eq!(code, StatusCode::OK, "{body}");
        assert!(body.contains("samplecontroller.k8s.io/v1alpha1"), "{body}");
    }
    assert_eq!(runs(&dir), 1);
    {
        let s = state.lock().unwrap();
        assert!(
            s.seen
                .iter()
                .all(|(_, a, i, _)| a.as_deref() == Some("Bearer one")
                    && i.as_deref() == Some("jane"))
        );
    }

    // Rotation: the apiserver now wants "two"; the plugin hands it out.
    std::fs::write(dir.join("token"), "two").unwrap();
    state.lock().unwrap().token = "two".into();
    state.lock().unwrap().seen.clear();
    let (code, body) = request(
        &base,
        "POST",
        r#"{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo"}"#,
        None,
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(runs(&dir), 2);
    {
        let s = state.lock().unwrap();
        assert_eq!(s.seen.len(), 2, "one 401, one retry");
        assert_eq!(s.seen[0].1.as_deref(), Some("Bearer one"));
        assert_eq!(s.seen[1].1.as_deref(), Some("Bearer two"));
        assert_eq!(s.seen[0].3, s.seen[1].3, "the same (renamed) body, twice");
        assert!(
            String::from_utf8_lossy(&s.seen[1].3).contains("samplecontroller.team1.example.com")
        );
    }

    // An app's own token: passed through, its 401 answered, never retried
    // with regroup's identity, never impersonating.
    state.lock().unwrap().seen.clear();
    let (code, _) = request(&base, "GET", "", Some("Bearer apps-own")).await;
    assert_eq!(code, StatusCode::UNAUTHORIZED);
    {
        let s = state.lock().unwrap();
        assert_eq!(s.seen.len(), 1);
        assert_eq!(s.seen[0].1.as_deref(), Some("Bearer apps-own"));
        assert_eq!(s.seen[0].2, None);
    }
    assert_eq!(runs(&dir), 2);

    // The app asks to impersonate with regroup's credential: its own
    // Impersonate-* never go, the kubeconfig's do.
    state.lock().unwrap().seen.clear();
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let req = Request::builder()
        .uri(format!(
            "{base}/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos"
        ))
        .header("impersonate-user", "root")
        .header("impersonate-group", "system:masters")
        .body(Full::new(Bytes::new()))
        .unwrap();
    assert_eq!(client.request(req).await.unwrap().status(), StatusCode::OK);
    {
        let s = state.lock().unwrap();
        assert_eq!(s.seen.len(), 1);
        assert_eq!(s.seen[0].2.as_deref(), Some("jane"));
    }

    // A credential the apiserver never takes: retried once, then the 401.
    state.lock().unwrap().token = "three".into();
    state.lock().unwrap().seen.clear();
    let (code, _) = request(&base, "GET", "", None).await;
    assert_eq!(code, StatusCode::UNAUTHORIZED);
    assert_eq!(state.lock().unwrap().seen.len(), 2);
    std::fs::remove_dir_all(&dir).ok();
}

/// A sidecar (the fixtures' rules, the app's token passed through) in
/// front of `up`: its base URL.
async fn listen(up: Upstream) -> String {
    let p = Arc::new(Proxy::sidecar(
        regroup::pipeline::live::Live::new(regroup::rewrite::Engine::new(
            common::fixture_map().clone(),
            Catalog::new(&[]),
        )),
        std::sync::Arc::new(up),
        true,
    ));
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(common::serve_plain(l, p));
    base
}

#[tokio::test]
async fn a_plugin_that_fails_is_a_503_naming_its_stderr() {
    let state = Arc::new(Mutex::new(Upstate::default()));
    let server = upstream(state.clone()).await;
    let up = Upstream::new(
        &Resolved {
            server,
            exec: Some(ExecConfig {
                api_version: "client.authentication.k8s.io/v1".into(),
                command: "sh".into(),
                args: vec!["-c".into(), "echo 'sso session expired' >&2; exit 1".into()],
                ..ExecConfig::default()
            }),
            ..Resolved::default()
        },
        false,
    )
    .unwrap();
    let base = listen(up).await;
    let (code, body) = request(&base, "GET", "", None).await;
    assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.contains("sso session expired"), "{body}");
    assert!(state.lock().unwrap().seen.is_empty());
}

/// A minimal HTTP CONNECT proxy; records each CONNECT line.
async fn connect_proxy(seen: Arc<Mutex<Vec<String>>>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut c, _) = l.accept().await.unwrap();
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if c.read(&mut b).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(b[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let line = head.lines().next().unwrap_or("").to_owned();
                seen.lock().unwrap().push(head.clone());
                let target = line.split(' ').nth(1).unwrap_or("").to_owned();
                let mut up = tokio::net::TcpStream::connect(target).await.unwrap();
                c.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await
                    .unwrap();
                let _ = tokio::io::copy_bidirectional(&mut c, &mut up).await;
            });
        }
    });
    format!("http://user:p%40ss@{addr}")
}

#[tokio::test]
async fn proxy_url_tunnels_with_connect_and_proxy_authorization() {
    let state = Arc::new(Mutex::new(Upstate {
        token: "tok".into(),
        ..Upstate::default()
    }));
    let server = upstream(state.clone()).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let proxy_url = connect_proxy(seen.clone()).await;
    let up = Upstream::new(
        &Resolved {
            server: server.clone(),
            token: Some("tok".into()),
            proxy_url: Some(proxy_url),
            ..Resolved::default()
        },
        false,
    )
    .unwrap();
    assert!(up.describe().contains("proxy-url"), "{}", up.describe());
    let base = listen(up).await;
    let (code, body) = request(&base, "GET", "", None).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    let host = server.trim_start_matches("http://");
    assert!(
        seen[0].starts_with(&format!("CONNECT {host} HTTP/1.1")),
        "{}",
        seen[0]
    );
    // user:p@ss, percent-decoded from the URL.
    assert!(
        seen[0].contains("Proxy-Authorization: Basic dXNlcjpwQHNz"),
        "{}",
        seen[0]
    );
}

#[test]
fn unsupported_proxy_schemes_are_refused_clearly() {
    let r = |proxy: &str| Resolved {
        server: "https://127.0.0.1:6443".into(),
        insecure: true,
        proxy_url: Some(proxy.into()),
        ..Resolved::default()
    };
    let e = Upstream::new(&r("https://proxy:3128"), false)
        .err()
        .unwrap();
    assert!(e.to_string().contains("https:// proxy"), "{e}");
    let e = Upstream::new(&r("ftp://proxy"), false).err().unwrap();
    assert!(e.to_string().contains("not supported"), "{e}");
    assert!(Upstream::new(&r("socks5://127.0.0.1:1080"), false).is_ok());
}

#[tokio::test]
async fn the_upstream_ca_file_is_reread_when_it_changes() {
    let state = Arc::new(Mutex::new(Upstate {
        token: "tok".into(),
        ..Upstate::default()
    }));
    let id = regroup::net::tls::generate().unwrap();
    let other = regroup::net::tls::generate().unwrap();
    let server = upstream_tls(state, Some(regroup::net::tls::server_config(&id).unwrap())).await;
    let dir = tmp("ca");
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.crt");
    std::fs::write(&ca, other.ca_pem.as_deref().unwrap()).unwrap();
    let up = Upstream::new(
        &Resolved {
            server,
            token: Some("tok".into()),
            ca_pem: Some(std::fs::read(&ca).unwrap()),
            ca_file: Some(ca.clone()),
            ..Resolved::default()
        },
        false,
    )
    .unwrap();
    let base = listen(up).await;
    // The wrong CA: the apiserver's certificate is not trusted.
    let (code, _) = request(&base, "GET", "", None).await;
    assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
    // The CA bundle updated on disk (a rotation): new connections trust it.
    let both = format!(
        "{}{}",
        other.ca_pem.as_deref().unwrap(),
        id.ca_pem.as_deref().unwrap()
    );
    std::fs::write(&ca, both).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(5200)).await;
    let (code, body) = request(&base, "GET", "", None).await;
    assert_eq!(code, StatusCode::OK, "{body}");
}

/// An https upstream that records the client certificate of each
/// connection (DER of the leaf) and answers FOO.
async fn mtls_upstream(
    serving: &regroup::net::tls::Identity,
    client_cas: &str,
    seen: Arc<Mutex<Vec<Vec<u8>>>>,
) -> String {
    use rustls::pki_types::pem::PemObject;
    let verifier = regroup::front::tls::client_verifier(client_cas.as_bytes()).unwrap();
    let certs: Vec<rustls::pki_types::CertificateDer<'static>> =
        rustls::pki_types::CertificateDer::pem_slice_iter(serving.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .unwrap();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(serving.key_pem.as_bytes()).unwrap();
    let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_client_cert_verifier(verifier)
    .with_single_cert(certs, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let (acceptor, seen) = (acceptor.clone(), seen.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let leaf = tls
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .map(|c| c.to_vec())
                    .unwrap_or_default();
                seen.lock().unwrap().push(leaf);
                let svc = service_fn(|_req: Request<hyper::body::Incoming>| async {
                    Ok::<_, std::convert::Infallible>(
                        Response::builder()
                            .header("content-type", "application/json")
                            .body(Full::new(Bytes::from_static(FOO.as_bytes())))
                            .unwrap(),
                    )
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    format!("https://{addr}")
}

fn der(pem: &str) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

#[tokio::test]
async fn a_client_certificate_renewed_on_disk_is_used_for_new_connections() {
    use regroup::net::tls::{generate, generate_for};
    let serving = generate().unwrap();
    let one = generate_for("client CA one", &["regroup-one".into()], true).unwrap();
    let two = generate_for("client CA two", &["regroup-two".into()], true).unwrap();
    let cas = format!(
        "{}{}",
        one.ca_pem.as_deref().unwrap(),
        two.ca_pem.as_deref().unwrap()
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let server = mtls_upstream(&serving, &cas, seen.clone()).await;
    let dir = tmp("clientcert");
    let (c, k) = (dir.join("client.crt"), dir.join("client.key"));
    std::fs::write(&c, &one.cert_pem).unwrap();
    std::fs::write(&k, &one.key_pem).unwrap();
    let up = Upstream::new(
        &Resolved {
            server,
            ca_pem: serving.ca_pem.clone().map(String::into_bytes),
            client_cert: Some((
                one.cert_pem.clone().into_bytes(),
                one.key_pem.clone().into_bytes(),
            )),
            client_cert_files: Some((c.clone(), k.clone())),
            ..Resolved::default()
        },
        false,
    )
    .unwrap();
    assert!(up.can_refresh());
    let base = listen(up).await;
    let (code, body) = request(&base, "GET", "", None).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(seen.lock().unwrap().last().unwrap(), &der(&one.cert_pem));
    // Renewed on disk (key first, then the certificate, as cert-manager's
    // Secret volume swaps both at once).
    std::fs::write(&k, &two.key_pem).unwrap();
    std::fs::write(&c, &two.cert_pem).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (code, body) = request(&base, "GET", "", None).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(seen.lock().unwrap().last().unwrap(), &der(&two.cert_pem));
    std::fs::remove_dir_all(&dir).ok();
}
