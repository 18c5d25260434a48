//! The aggregated front over real TLS: a caller with a front-proxy
//! certificate reaches the app's own aggregated server under the cluster's
//! group, the app sees its own group and the caller's identity (and regroup's
//! client certificate), and answers come back in the cluster's names.
//! Callers without a valid front-proxy certificate never get identity
//! headers through.

use crate::tls_support;

use std::sync::{Arc, Mutex, RwLock};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use regroup::front::auth::RequestHeaderConfig;
use regroup::front::tls::{ClientCaSource, ReloadingConfig, ServingSource};
use regroup::net::tls;
use regroup::pipeline::proxy::Proxy;
use regroup::rewrite::Catalog;
use regroup::upstream::{Resolved, Upstream};
use regroup_config::{GroupMap, MapRule, Rule};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;

#[derive(Default, Clone, Debug)]
struct Seen {
    path: String,
    user: Option<String>,
    groups: Vec<String>,
    authorization: Option<String>,
    client_cert: bool,
}

/// The app's own OpenAPI v3 document for its group, in app names.
const APP_OPENAPI: &str = r##"{"openapi":"3.0.0","paths":{"/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders":{"get":{"responses":{"200":{"content":{"application/json":{"schema":{"$ref":"#/components/schemas/com.example.wardle.v1alpha1.FlunderList"}}}}},"x-kubernetes-group-version-kind":{"group":"wardle.example.com","version":"v1alpha1","kind":"Flunder"}}}},"components":{"schemas":{"com.example.wardle.v1alpha1.Flunder":{"type":"object","x-kubernetes-group-version-kind":[{"group":"wardle.example.com","kind":"Flunder","version":"v1alpha1"}]},"com.example.wardle.v1alpha1.FlunderList":{"type":"object","properties":{"items":{"type":"array","items":{"$ref":"#/components/schemas/com.example.wardle.v1alpha1.Flunder"}}}}}}}"##;

const FLUNDER: &str = r#"{"apiVersion":"wardle.example.com/v1alpha1","kind":"Flunder","metadata":{"name":"f","namespace":"ns"}}"#;

/// The app's aggregated server: TLS, asks for a client certificate signed by
/// `client_ca` (regroup's), records what it saw, answers in app names.
async fn app_backend(
    serving: &tls::Identity,
    client_ca: &str,
    seen: Arc<Mutex<Vec<Seen>>>,
) -> String {
    let roots = {
        let mut r = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(client_ca.as_bytes()) {
            r.add(c.unwrap()).unwrap();
        }
        Arc::new(r)
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(roots, provider.clone())
            .allow_unauthenticated()
            .build()
            .unwrap();
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(serving.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .unwrap();
    let key = PrivateKeyDer::from_pem_slice(serving.key_pem.as_bytes()).unwrap();
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .unwrap();
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (s, _) = l.accept().await.unwrap();
            let (acceptor, seen) = (acceptor.clone(), seen.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(s).await else {
                    return;
                };
                let client_cert = tls.get_ref().1.peer_certificates().is_some();
                let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let seen = seen.clone();
                    async move {
                        let (parts, body) = req.into_parts();
                        let req = Request::from_parts(parts, ());
                        let body = body.collect().await.unwrap().to_bytes();
                        let h =
                            |n: &str| req.headers().get(n).map(|v| v.to_str().unwrap().to_owned());
                        seen.lock().unwrap().push(Seen {
                            path: req.uri().path().to_owned(),
                            user: h("x-remote-user"),
                            groups: req
                                .headers()
                                .get_all("x-remote-group")
                                .iter()
                                .map(|v| v.to_str().unwrap().to_owned())
                                .collect(),
                            authorization: h("authorization"),
                            client_cert,
                        });
                        // Creates echo the body (as the app saw it); watches
                        // send two events; everything else is one Flunder.
                        let answer = if req.uri().path().starts_with("/openapi/") {
                            Bytes::from_static(APP_OPENAPI.as_bytes())
                        } else if req.method() == http::Method::POST {
                            body
                        } else if req.uri().query().is_some_and(|q| q.contains("watch=1")) {
                            Bytes::from(format!("{{\"type\":\"ADDED\",\"object\":{FLUNDER}}}\n{{\"type\":\"DELETED\",\"object\":{FLUNDER}}}\n"))
                        } else {
                            Bytes::from_static(FLUNDER.as_bytes())
                        };
                        Ok::<_, std::convert::Infallible>(
                            Response::builder()
                                .header("content-type", "application/json")
                                .body(Full::new(answer))
                                .unwrap(),
                        )
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    format!("https://127.0.0.1:{}", addr.port())
}

struct Front {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    serving_ca: String,
    front_proxy: tls::Identity,
    /// The stack's metrics.
    metrics: Arc<regroup::observe::metrics::Metrics>,
}

async fn front() -> Front {
    let map: &'static GroupMap = Box::leak(Box::new(
        GroupMap::new(vec![MapRule {
            rule: Rule::Exact {
                from: "wardle.example.com".into(),
                to: "wardle.team1.example.com".into(),
            },
            reference_keys: true,
        }])
        .unwrap(),
    ));
    let catalog: &'static Catalog = Box::leak(Box::new(Catalog::new(&[])));
    // The cluster's front-proxy client (the aggregator) and its CA.
    let front_proxy =
        tls::generate_for("front-proxy-ca", &["front-proxy-client".into()], true).unwrap();
    // regroup's own client identity towards the app, and the app's serving cert.
    let regroup_client =
        tls::generate_for("regroup client CA", &["regroup-front-proxy".into()], true).unwrap();
    let app_serving = tls::generate().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let backend = app_backend(
        &app_serving,
        regroup_client.ca_pem.as_deref().unwrap(),
        seen.clone(),
    )
    .await;
    let up = Upstream::new(
        &Resolved {
            server: backend,
            ca_pem: app_serving.ca_pem.clone().map(String::into_bytes),
            client_cert: Some((
                regroup_client.cert_pem.clone().into_bytes(),
                regroup_client.key_pem.clone().into_bytes(),
            )),
            ..Resolved::default()
        },
        false,
    )
    .unwrap();
    let cfg = RequestHeaderConfig {
        allowed_names: vec!["front-proxy-client".into()],
        ..RequestHeaderConfig::default()
    };
    let proxy = Arc::new(Proxy::front(
        regroup::pipeline::live::Live::new(regroup::rewrite::Engine::new(
            map.clone(),
            catalog.clone(),
        )),
        std::sync::Arc::new(up),
        Arc::new(RwLock::new(cfg)),
    ));
    let metrics = proxy.metrics().clone();
    let serving = tls::generate().unwrap();
    let reloading = Arc::new(
        ReloadingConfig::new(
            ServingSource::fixed(&serving),
            ClientCaSource::Pem(front_proxy.ca_pem.clone().unwrap().into_bytes()),
        )
        .unwrap(),
    );
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(regroup::listen::stacks::serve_front(
        l,
        reloading,
        proxy,
        regroup::listen::lifecycle::Serving::default(),
    ));
    Front {
        url: format!("https://127.0.0.1:{port}"),
        seen,
        serving_ca: serving.ca_pem.unwrap(),
        front_proxy,
        metrics,
    }
}

/// A caller trusting the front's serving CA, with `client` as its certificate.
fn caller(
    f: &Front,
    client: Option<&tls::Identity>,
) -> hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
> {
    tls_support::https_client(&f.serving_ca, client)
}

const PATH: &str = "/apis/wardle.team1.example.com/v1alpha1/namespaces/ns/flunders/f";

async fn get(
    c: &hyper_util::client::legacy::Client<
        hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
        Full<Bytes>,
    >,
    url: String,
    headers: &[(&str, &str)],
) -> Result<(StatusCode, String), String> {
    let mut req = Request::get(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = c
        .request(req.body(Full::default()).unwrap())
        .await
        .map_err(|e| format!("{e:?}"))?;
    let status = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

#[tokio::test]
async fn an_authenticated_aggregator_reaches_the_app_under_the_clusters_group() {
    let f = front().await;
    let c = caller(&f, Some(&f.front_proxy));
    let (status, body) = get(
        &c,
        format!("{}{PATH}", f.url),
        &[
            ("x-remote-user", "alice"),
            ("x-remote-group", "devs"),
            ("x-remote-group", "system:authenticated"),
        ],
    )
    .await
    .unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        body.contains("\"wardle.team1.example.com/v1alpha1\""),
        "{body}"
    );
    let seen = f.seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        seen.path,
        "/apis/wardle.example.com/v1alpha1/namespaces/ns/flunders/f"
    );
    assert_eq!(seen.user.as_deref(), Some("alice"));
    assert_eq!(seen.groups, ["devs", "system:authenticated"]);
    assert!(
        seen.client_cert,
        "regroup presents its own client certificate to the app"
    );
}

#[tokio::test]
async fn callers_without_a_front_proxy_certificate_get_401_and_never_forward_identity() {
    let f = front().await;
    let anonymous = caller(&f, None);
    let (status, body) = get(
        &anonymous,
        format!("{}{PATH}", f.url),
        &[("x-remote-user", "system:admin")],
    )
    .await
    .unwrap();
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(body.contains("\"kind\":\"Status\""));
    assert!(f.seen.lock().unwrap().is_empty(), "nothing reached the app");
    // Metrics say who was rejected and why, with no certificate or header content.
    let text = f.metrics.encode();
    assert!(
        text.contains("regroup_front_rejections_total{reason=\"no_client_certificate\"}"),
        "{text}"
    );
    assert!(!text.contains("system:admin"));

    // A token without a certificate goes to the app, which reviews it; the
    // spoofed identity does not.
    let (status, _) = get(
        &anonymous,
        format!("{}{PATH}", f.url),
        &[
            ("authorization", "Bearer t0ken"),
            ("x-remote-user", "system:admin"),
        ],
    )
    .await
    .unwrap();
    assert_eq!(status, StatusCode::OK);
    let seen = f.seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(seen.authorization.as_deref(), Some("Bearer t0ken"));
    assert_eq!(seen.user, None);

    // A certificate from another CA never completes the handshake.
    let stranger =
        tls::generate_for("some other CA", &["front-proxy-client".into()], true).unwrap();
    assert!(get(
        &caller(&f, Some(&stranger)),
        format!("{}{PATH}", f.url),
        &[]
    )
    .await
    .is_err());
}

#[tokio::test]
async fn creates_and_watches_are_renamed_both_ways_through_the_front() {
    let f = front().await;
    let c = caller(&f, Some(&f.front_proxy));
    let created = r#"{"apiVersion":"wardle.team1.example.com/v1alpha1","kind":"Flunder","metadata":{"name":"g"},"spec":{"reference":"x"}}"#;
    let req = Request::post(format!(
        "{}/apis/wardle.team1.example.com/v1alpha1/namespaces/ns/flunders",
        f.url
    ))
    .header("content-type", "application/json")
    .header(
        "x-remote-user",
        "system:serviceaccount:kube-system:generic-garbage-collector",
    )
    .body(Full::new(Bytes::from_static(created.as_bytes())))
    .unwrap();
    let resp = c.request(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    // The app saw its own group; the aggregator sees the cluster's again.
    assert_eq!(String::from_utf8_lossy(&body), created);
    assert_eq!(
        f.seen.lock().unwrap().last().unwrap().path,
        "/apis/wardle.example.com/v1alpha1/namespaces/ns/flunders"
    );

    let (status, body) = get(
        &c,
        format!(
            "{}/apis/wardle.team1.example.com/v1alpha1/namespaces/ns/flunders?watch=1",
            f.url
        ),
        &[("x-remote-user", "alice")],
    )
    .await
    .unwrap();
    assert_eq!(status, StatusCode::OK);
    let events: Vec<serde_json::Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 2);
    for e in &events {
        assert_eq!(
            e["object"]["apiVersion"],
            "wardle.team1.example.com/v1alpha1"
        );
    }
}

#[tokio::test]
async fn the_apps_own_openapi_reaches_the_aggregator_in_the_clusters_names() {
    let f = front().await;
    let c = caller(&f, Some(&f.front_proxy));
    let (status, body) = get(
        &c,
        format!(
            "{}/openapi/v3/apis/wardle.team1.example.com/v1alpha1",
            f.url
        ),
        &[("x-remote-user", "system:kube-aggregator")],
    )
    .await
    .unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        f.seen.lock().unwrap().last().unwrap().path,
        "/openapi/v3/apis/wardle.example.com/v1alpha1"
    );
    let want = APP_OPENAPI
        .replace(
            "/apis/wardle.example.com/",
            "/apis/wardle.team1.example.com/",
        )
        .replace("com.example.wardle.", "com.example.team1.wardle.")
        .replace(
            "\"group\":\"wardle.example.com\"",
            "\"group\":\"wardle.team1.example.com\"",
        );
    assert_eq!(body, want);
}
