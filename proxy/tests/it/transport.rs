//! Transport: the TLS sidecar listener (h2 and http/1.1 by ALPN), an https
//! upstream verified against the kubeconfig's CA, credentials, and errors
//! when the upstream is down.

use crate::common;

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response, StatusCode, Version};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use regroup::net::tls;
use regroup::pipeline::proxy::Proxy;
use regroup::rewrite::Catalog;
use regroup::upstream::{Resolved, Upstream};
use regroup_config::GroupMap;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use tokio::net::TcpListener;

const FOO: &str = r#"{"apiVersion":"samplecontroller.team1.example.com/v1alpha1","kind":"Foo","metadata":{"name":"alpha"}}"#;

#[derive(Default, Clone)]
struct Seen {
    version: Option<Version>,
    authorization: Option<String>,
    path: String,
}

/// An upstream (TLS with `id`, or plain) answering every request with FOO.
async fn upstream(id: Option<&tls::Identity>, seen: Arc<Mutex<Seen>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = id.map(|id| tokio_rustls::TlsAcceptor::from(tls::server_config(id).unwrap()));
    let scheme = if acceptor.is_some() { "https" } else { "http" };
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let seen = seen.clone();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let seen = seen.clone();
                    async move {
                        *seen.lock().unwrap() = Seen {
                            version: Some(req.version()),
                            authorization: req
                                .headers()
                                .get("authorization")
                                .map(|v| v.to_str().unwrap().to_owned()),
                            path: req.uri().path().to_owned(),
                        };
                        Ok::<_, std::convert::Infallible>(
                            Response::builder()
                                .header("content-type", "application/json")
                                .body(Full::new(Bytes::from_static(FOO.as_bytes())))
                                .unwrap(),
                        )
                    }
                });
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                match acceptor {
                    Some(a) => {
                        if let Ok(s) = a.accept(stream).await {
                            let _ = builder.serve_connection(TokioIo::new(s), svc).await;
                        }
                    }
                    None => {
                        let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
                    }
                }
            });
        }
    });
    format!("{scheme}://{addr}")
}

fn map() -> &'static GroupMap {
    Box::leak(Box::new(common::fixture_map()))
}

fn proxy(resolved: Resolved, pass_through: bool) -> Arc<Proxy> {
    let catalog: &'static Catalog = Box::leak(Box::new(Catalog::new(&[])));
    Arc::new(Proxy::sidecar(
        regroup::pipeline::live::Live::new(regroup::rewrite::Engine::new(
            (map()).clone(),
            catalog.clone(),
        )),
        std::sync::Arc::new(Upstream::new(&resolved, false).unwrap()),
        pass_through,
    ))
}

async fn plain_listener(p: Arc<Proxy>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(common::serve_plain(l, p));
    format!("http://{addr}")
}

async fn get(url: &str, auth: Option<&str>) -> (StatusCode, String) {
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let mut req = Request::get(url);
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    let resp = client
        .request(req.body(Full::default()).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

const PATH: &str = "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos/alpha";

#[tokio::test]
async fn tls_listener_serves_h2_and_http1_with_a_generated_ca() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let server = upstream(None, seen.clone()).await;
    let p = proxy(
        Resolved {
            server,
            ..Resolved::default()
        },
        true,
    );
    let id = tls::generate().unwrap();
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(common::serve_tls(l, tls::server_config(&id).unwrap(), p));

    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(id.ca_pem.as_deref().unwrap().as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    for (http2, want) in [(true, Version::HTTP_2), (false, Version::HTTP_11)] {
        let b = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(cfg.clone())
            .https_only();
        let conn = if http2 {
            b.enable_http2().build()
        } else {
            b.enable_http1().build()
        };
        let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .build::<_, Full<Bytes>>(conn);
        let resp = client
            .request(
                Request::get(format!("https://127.0.0.1:{}{PATH}", addr.port()))
                    .body(Full::default())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(resp.version(), want);
        // The renamed body is shorter; its length is said (hyper writes it
        // from the body: regroup removes the upstream's).
        let length = resp.headers().get_all("content-length").iter().count();
        let said = resp.headers().get("content-length").cloned();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert!(String::from_utf8_lossy(&body).contains("\"samplecontroller.k8s.io/v1alpha1\""));
        assert!(body.len() < FOO.len());
        assert_eq!(length, 1, "{want:?}");
        assert_eq!(said.unwrap().to_str().unwrap(), body.len().to_string());
        assert_eq!(
            seen.lock().unwrap().path,
            "/apis/samplecontroller.team1.example.com/v1alpha1/namespaces/ns/foos/alpha"
        );
    }
}

#[tokio::test]
async fn https_upstream_is_verified_against_the_kubeconfig_ca_and_uses_h2() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let id = tls::generate().unwrap();
    let server = upstream(Some(&id), seen.clone()).await;
    let good = proxy(
        Resolved {
            server: server.clone(),
            ca_pem: id.ca_pem.clone().map(String::into_bytes),
            token: Some("own".into()),
            ..Resolved::default()
        },
        true,
    );
    let (status, body) = get(&format!("{}{PATH}", plain_listener(good).await), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("\"samplecontroller.k8s.io/v1alpha1\""));
    assert_eq!(seen.lock().unwrap().version, Some(Version::HTTP_2));

    let other = tls::generate().unwrap();
    let bad = proxy(
        Resolved {
            server,
            ca_pem: other.ca_pem.map(String::into_bytes),
            ..Resolved::default()
        },
        true,
    );
    let (status, body) = get(&format!("{}{PATH}", plain_listener(bad).await), None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        body.contains("\"kind\":\"Status\"") && body.contains("ServiceUnavailable"),
        "{body}"
    );
}

#[tokio::test]
async fn the_apps_token_passes_through_and_regroups_own_is_used_otherwise() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let server = upstream(None, seen.clone()).await;
    let resolved = Resolved {
        server,
        token: Some("regroup-own".into()),
        ..Resolved::default()
    };
    let url = format!(
        "{}{PATH}",
        plain_listener(proxy(resolved.clone(), true)).await
    );
    get(&url, Some("Bearer the-apps")).await;
    assert_eq!(
        seen.lock().unwrap().authorization.as_deref(),
        Some("Bearer the-apps")
    );
    get(&url, None).await;
    assert_eq!(
        seen.lock().unwrap().authorization.as_deref(),
        Some("Bearer regroup-own")
    );
    // passThrough: false always uses regroup's own.
    let url = format!("{}{PATH}", plain_listener(proxy(resolved, false)).await);
    get(&url, Some("Bearer the-apps")).await;
    assert_eq!(
        seen.lock().unwrap().authorization.as_deref(),
        Some("Bearer regroup-own")
    );
}

#[tokio::test]
async fn an_unreachable_upstream_is_a_503_status() {
    let dead = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = format!("http://{}", dead.local_addr().unwrap());
    drop(dead);
    let url = format!(
        "{}{PATH}",
        plain_listener(proxy(
            Resolved {
                server,
                ..Resolved::default()
            },
            true
        ))
        .await
    );
    let (status, body) = get(&url, None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["kind"], "Status");
    assert_eq!(v["code"], 503);
}

#[tokio::test]
async fn the_app_naming_the_clusters_group_gets_404_like_an_unknown_group() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let server = upstream(None, seen.clone()).await;
    let url = plain_listener(proxy(
        Resolved {
            server,
            ..Resolved::default()
        },
        true,
    ))
    .await;
    let (status, body) = get(
        &format!("{url}/apis/samplecontroller.team1.example.com/v1alpha1/foos"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, "404 page not found\n");
    assert_eq!(
        seen.lock().unwrap().path,
        "",
        "nothing reached the upstream"
    );
}
