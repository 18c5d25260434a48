//! A pooled keep-alive connection the apiserver closes just as regroup
//! sends on it: a safe, bodyless request is sent again on a new connection
//! (the app never sees the race); a request that may have had an effect is
//! not, and gets a 503 Status.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use http::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const BODY: &str = r#"{"kind":"Status","apiVersion":"v1","status":"Success"}"#;

/// The request heads an upstream received, in order.
type Heads = Arc<Mutex<Vec<String>>>;

/// Reads one request's head (these requests carry no body) into `heads`.
async fn read_head(s: &mut TcpStream, heads: &Heads) -> bool {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut b).await {
            Ok(1) => head.push(b[0]),
            _ => return false,
        }
    }
    heads
        .lock()
        .unwrap()
        .push(String::from_utf8_lossy(&head).into_owned());
    true
}

async fn answer(s: &mut TcpStream) {
    let resp = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{BODY}",
        BODY.len()
    );
    s.write_all(resp.as_bytes()).await.unwrap();
}

/// An upstream whose first connection answers one request, keeps the
/// connection open (keep-alive), then closes it when the second request
/// arrives, unanswered; later connections answer normally. Returns its URL,
/// the number of connections it accepted and the request heads it read.
async fn closing_upstream() -> (String, Arc<AtomicUsize>, Heads) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    let heads = Heads::default();
    let read = heads.clone();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            let n = count.fetch_add(1, Ordering::SeqCst);
            let heads = read.clone();
            tokio::spawn(async move {
                if n == 0 {
                    if read_head(&mut s, &heads).await {
                        answer(&mut s).await;
                    }
                    read_head(&mut s, &heads).await;
                    return; // closed with the request unanswered
                }
                while read_head(&mut s, &heads).await {
                    answer(&mut s).await;
                }
            });
        }
    });
    (format!("http://{addr}"), accepted, heads)
}

/// One request on its own connection to regroup; its status.
async fn request(addr: &str, method: &str) -> StatusCode {
    request_with(addr, method, "").await
}

/// [`request`] with these header lines too (each ending in CRLF).
async fn request_with(addr: &str, method: &str, more: &str) -> StatusCode {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "{method} /api/v1/namespaces/default/configmaps?limit=5 HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n{more}Connection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let line = String::from_utf8_lossy(&out);
    StatusCode::from_bytes(line.split(' ').nth(1).unwrap().as_bytes()).unwrap()
}

#[tokio::test]
async fn a_get_on_a_connection_closed_under_it_is_sent_again() {
    let (server, accepted, heads) = closing_upstream().await;
    let addr = common::sidecar(server, None).await.to_string();
    assert_eq!(request(&addr, "GET").await, StatusCode::OK);
    // Headers regroup forwards, filters and drops: the request sent again
    // is made again from the caller's, so it must be the same bytes.
    let more = "Accept: application/json, application/cbor\r\nAuthorization: Bearer app\r\n\
                X-Trace: abc\r\nX-Remote-User: mallory\r\nTE: trailers\r\n";
    assert_eq!(request_with(&addr, "GET", more).await, StatusCode::OK);
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        2,
        "the second GET went out again on a new connection"
    );
    let heads = heads.lock().unwrap();
    assert_eq!(heads.len(), 3, "{heads:?}");
    let (swallowed, again) = (&heads[1], &heads[2]);
    assert_eq!(swallowed, again, "sent again as it was sent first");
    assert!(
        again.contains("limit=5") && again.contains("x-trace: abc"),
        "{again}"
    );
    assert!(again.contains("authorization: Bearer app"), "{again}");
    assert!(
        !again.contains("mallory") && !again.contains("cbor"),
        "{again}"
    );
}

#[tokio::test]
async fn a_post_on_a_connection_closed_under_it_is_not_sent_again() {
    let (server, accepted, _) = closing_upstream().await;
    let addr = common::sidecar(server, None).await.to_string();
    assert_eq!(request(&addr, "GET").await, StatusCode::OK);
    assert_eq!(
        request(&addr, "POST").await,
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "a POST may have had an effect: never sent twice"
    );
}
