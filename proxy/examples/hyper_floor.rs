//! The floor under regroup's cost per request: a pass-through proxy built
//! from the same parts regroup serves with, and nothing else. Same runtime
//! (tokio multi-thread, one worker per core), same server (hyper-util's
//! `auto` builder, HTTP/1.1 and h2c, with upgrades and a header timer), same
//! client (hyper-util's pooled client over hyper-rustls and `HttpConnector`,
//! no Nagle). No routing, renaming, access checks, credentials, metrics or
//! logging.
//!
//! `bench/load.py` and `bench/instructions.sh` measure it beside regroup, so
//! a result splits into what the parts cost (this floor, against nginx) and
//! what regroup adds on top (regroup against this floor).
//!
//! `cargo build --release -p regroup --example hyper_floor`, then
//! `target/release/examples/hyper_floor LISTEN_ADDR UPSTREAM_URL [per-core]`
//! (e.g. `127.0.0.1:8001 http://127.0.0.1:8080`). Stops on SIGINT/SIGTERM.
//! An `https` upstream is verified with the CAs in `FLOOR_CA_FILE` and
//! spoken to in h2 or HTTP/1.1 as ALPN chooses, as regroup does.
//! With `per-core`, one current-thread runtime per core, each with its own
//! `SO_REUSEPORT` listener and its own pooled client: the layout that keeps a
//! request, its client connection and its upstream connection on one thread.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use http::{Request, Response, Uri};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

type Body = BoxBody<Bytes, hyper::Error>;

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(listen), Some(upstream)) = (args.next(), args.next()) else {
        eprintln!("usage: hyper_floor LISTEN_ADDR UPSTREAM_URL");
        std::process::exit(2);
    };
    let listen: SocketAddr = listen.parse().expect("LISTEN_ADDR is host:port");
    let upstream: Uri = upstream.parse().expect("UPSTREAM_URL is a URL");
    if args.next().as_deref() == Some("per-core") {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads: Vec<_> = (0..cores)
            .map(|_| {
                let upstream = upstream.clone();
                std::thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("runtime");
                    runtime.block_on(async move {
                        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
                        socket.set_reuseport(true).expect("SO_REUSEPORT");
                        socket.set_reuseaddr(true).expect("SO_REUSEADDR");
                        socket.bind(listen).expect("bind");
                        serve(socket.listen(1024).expect("listen"), upstream).await
                    })
                })
            })
            .collect();
        for t in threads {
            let _ = t.join();
        }
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        serve(TcpListener::bind(listen).await.expect("bind"), upstream).await
    });
}

async fn serve(listener: TcpListener, upstream: Uri) {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    let tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_root_certificates(roots())
    .with_no_client_auth();
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_all_versions()
        .wrap_connector(http);
    let client: Client<_, Body> = Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .build(connector);
    let stop = async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    };
    tokio::pin!(stop);
    loop {
        let (tcp, _) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(_) => continue,
            },
            _ = &mut stop => return,
        };
        let _ = tcp.set_nodelay(true);
        let (client, upstream) = (client.clone(), upstream.clone());
        tokio::spawn(async move {
            let svc = service_fn(move |req| forward(client.clone(), upstream.clone(), req));
            let mut b = auto::Builder::new(TokioExecutor::new());
            b.http1()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(30));
            b.http2().timer(TokioTimer::new());
            let _ = b
                .serve_connection_with_upgrades(TokioIo::new(tcp), svc)
                .await;
        });
    }
}

/// The CAs an `https` upstream is verified with: the PEM file named by
/// `FLOOR_CA_FILE` (`bench/load.py --tls`), else none.
fn roots() -> rustls::RootCertStore {
    use rustls::pki_types::{pem::PemObject, CertificateDer};
    let mut roots = rustls::RootCertStore::empty();
    if let Some(path) = std::env::var_os("FLOOR_CA_FILE") {
        for cert in CertificateDer::pem_file_iter(&path).expect("FLOOR_CA_FILE: a PEM file") {
            roots
                .add(cert.expect("FLOOR_CA_FILE: a certificate"))
                .expect("a CA certificate");
        }
    }
    roots
}

async fn forward(
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Body>,
    upstream: Uri,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let (mut parts, body) = req.into_parts();
    let mut uri = upstream.into_parts();
    uri.path_and_query = parts.uri.path_and_query().cloned();
    parts.uri = Uri::from_parts(uri).expect("upstream URL with a path");
    parts.headers.remove(http::header::HOST);
    let req = Request::from_parts(parts, body.boxed());
    Ok(match client.request(req).await {
        Ok(resp) => resp.map(BodyExt::boxed),
        Err(e) => Response::builder()
            .status(502)
            .body(
                Full::new(Bytes::from(format!("upstream: {e}\n")))
                    .map_err(|never| match never {})
                    .boxed(),
            )
            .expect("static response"),
    })
}
