//! The aggregated front through the real `regroup` binary and real TLS:
//! configuration from files (request-header CA, serving certificate), a
//! caller with a front-proxy certificate, an app backend over TLS that sees
//! its own group, the caller's identity and regroup's client certificate;
//! a caller without a certificate gets 401 and reaches nothing.

use crate::regroup_binary::{free_port, wait_for_port, KillOnDrop};
use crate::tls_support;

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use regroup::net::tls;
use tokio::net::TcpListener;

#[derive(Default, Clone, Debug)]
struct Seen {
    path: String,
    user: Option<String>,
    client_cert: bool,
}

async fn app_backend(seen: Arc<Mutex<Vec<Seen>>>) -> u16 {
    let id = tls::generate().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(tls_support::app_server_config(&id, true));
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
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
                        let sent = body.collect().await.unwrap().to_bytes();
                        seen.lock().unwrap().push(Seen {
                            path: req.uri().path().to_owned(),
                            user: req
                                .headers()
                                .get("x-remote-user")
                                .map(|v| v.to_str().unwrap().to_owned()),
                            client_cert,
                        });
                        // A list; a create echoes the object it got (app names);
                        // a watch sends one event per line.
                        let flunder = r#"{"apiVersion":"wardle.example.com/v1alpha1","kind":"Flunder","metadata":{"name":"f"}}"#;
                        let body = if req.method() == http::Method::POST {
                            sent
                        } else if req.uri().query().is_some_and(|q| q.contains("watch=1")) {
                            Bytes::from(format!("{{\"type\":\"ADDED\",\"object\":{flunder}}}\n{{\"type\":\"MODIFIED\",\"object\":{flunder}}}\n"))
                        } else {
                            Bytes::from(format!(
                                r#"{{"apiVersion":"wardle.example.com/v1alpha1","kind":"FlunderList","items":[{flunder}]}}"#
                            ))
                        };
                        Ok::<_, std::convert::Infallible>(
                            Response::builder()
                                .header("content-type", "application/json")
                                .body(Full::new(body))
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
    port
}

use tls_support::https_client as client;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_binary_fronts_an_aggregated_app_for_authenticated_callers_only() {
    let dir = std::env::temp_dir().join(format!("regroup-front-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The cluster's front-proxy CA and the aggregator's client certificate.
    let aggregator =
        tls::generate_for("front-proxy-ca", &["front-proxy-client".into()], true).unwrap();
    std::fs::write(
        dir.join("front-proxy-ca.crt"),
        aggregator.ca_pem.as_deref().unwrap(),
    )
    .unwrap();
    // regroup's front serving certificate, from files.
    let serving = tls::generate().unwrap();
    std::fs::write(dir.join("front.crt"), &serving.cert_pem).unwrap();
    std::fs::write(dir.join("front.key"), &serving.key_pem).unwrap();
    std::fs::write(dir.join("front-ca.crt"), serving.ca_pem.as_deref().unwrap()).unwrap();

    let seen = Arc::new(Mutex::new(Vec::new()));
    let backend = app_backend(seen.clone()).await;
    let (front_port, sidecar_port) = (free_port(), free_port());
    std::fs::write(
        dir.join("config.yaml"),
        format!(
            "rules:\n- from: wardle.example.com\n  to: wardle.team1.example.com\n\
             listeners:\n  http: 127.0.0.1:{sidecar_port}\n\
             front:\n  listen: 127.0.0.1:{front_port}\n  certFile: {d}/front.crt\n  keyFile: {d}/front.key\n  caFile: {d}/front-ca.crt\n\
             \x20 backend: https://127.0.0.1:{backend}\n  dangerousInsecureBackend: true\n\
             \x20 requestHeader:\n    fromCluster: false\n    clientCaFile: {d}/front-proxy-ca.crt\n    allowedNames: [front-proxy-client]\n",
            d = dir.display()
        ),
    )
    .unwrap();
    // The sidecar's upstream is not used by this test.
    std::fs::write(
        dir.join("kubeconfig"),
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {}}]\n",
    )
    .unwrap();
    let _regroup = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_regroup"))
            .arg("serve")
            .arg("-c")
            .arg(dir.join("config.yaml"))
            .arg("--kubeconfig")
            .arg(dir.join("kubeconfig"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_port(front_port, "regroup's front").await;
    let url = format!("https://127.0.0.1:{front_port}/apis/wardle.team1.example.com/v1alpha1/namespaces/ns/flunders");
    let ca = serving.ca_pem.clone().unwrap();

    let c = client(&ca, Some(&aggregator));
    let resp = c
        .request(
            Request::get(&url)
                .header("x-remote-user", "alice")
                .body(Full::default())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.contains("wardle.team1.example.com/v1alpha1")
            && !text.contains("\"wardle.example.com/"),
        "{text}"
    );
    let s = seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        s.path,
        "/apis/wardle.example.com/v1alpha1/namespaces/ns/flunders"
    );
    assert_eq!(s.user.as_deref(), Some("alice"));
    assert!(
        s.client_cert,
        "regroup presents its client certificate to the app"
    );

    // Create: the app gets its own names, the aggregator the cluster's back.
    let created = r#"{"apiVersion":"wardle.team1.example.com/v1alpha1","kind":"Flunder","metadata":{"name":"g"}}"#;
    let resp = c
        .request(
            Request::post(&url)
                .header("content-type", "application/json")
                .header("x-remote-user", "alice")
                .body(Full::new(Bytes::from_static(created.as_bytes())))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(String::from_utf8_lossy(&body), created);

    // Watch: every event in the cluster's names.
    let resp = c
        .request(
            Request::get(format!("{url}?watch=1"))
                .header("x-remote-user", "alice")
                .body(Full::default())
                .unwrap(),
        )
        .await
        .unwrap();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&body);
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(
        text.lines()
            .all(|l| l.contains("\"wardle.team1.example.com/v1alpha1\"")),
        "{text}"
    );

    let n = seen.lock().unwrap().len();
    let anonymous = client(&ca, None);
    let resp = anonymous
        .request(
            Request::get(&url)
                .header("x-remote-user", "system:admin")
                .body(Full::default())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(seen.lock().unwrap().len(), n, "nothing reached the app");
    std::fs::remove_dir_all(&dir).ok();
}
