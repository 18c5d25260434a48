//! Protocol upgrades (exec, attach, port-forward over SPDY or WebSocket)
//! carry no group: once both sides switched, the bytes are spliced.

use bytes::Bytes;
use http::header::HeaderMap;
use http::{Method, Request, Response, StatusCode, Uri};
use hyper::body::Incoming;

use super::errors;
use super::exchange::Forward;
use crate::body::Body;
use crate::body::{full, pass};
use crate::status::Failure;
use crate::upstream::Upstream;

/// Forwards the upgrade request; on `101` splices the two connections.
pub(crate) async fn splice(
    fwd: &Forward,
    upstream: &Upstream,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Incoming,
    on_upgrade: Option<hyper::upgrade::OnUpgrade>,
) -> Result<Response<Body>, Failure> {
    let mut up = Request::builder()
        .method(method)
        .uri(uri)
        .body(pass(body))
        .expect("parts are valid");
    *up.headers_mut() = headers;
    let mut resp = upstream
        .send_upgrade(up)
        .await
        .map_err(|e| errors::upstream(fwd, &e))?;
    if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        let (parts, body) = resp.into_parts();
        return Ok(Response::from_parts(parts, pass(body)));
    }
    let upstream_io = hyper::upgrade::on(&mut resp);
    let Some(client_io) = on_upgrade else {
        return Err(Failure::bad_request("this connection can't be upgraded"));
    };
    tokio::spawn(async move {
        match tokio::try_join!(client_io, upstream_io) {
            Ok((c, u)) => {
                let mut c = hyper_util::rt::TokioIo::new(c);
                let mut u = hyper_util::rt::TokioIo::new(u);
                if let Err(e) = tokio::io::copy_bidirectional(&mut c, &mut u).await {
                    tracing::debug!("upgraded stream ended: {e}");
                }
            }
            Err(e) => tracing::warn!("protocol upgrade failed: {e}"),
        }
    });
    let (parts, _) = resp.into_parts();
    Ok(Response::from_parts(parts, full(Bytes::new())))
}
