//! Listeners and connections: the one accept loop every listener runs
//! (the sidecar's and the front's in `listen/stacks.rs`,
//! the webhook listener's in `listen/webhook.rs`: each knows its own
//! service, this room none of them). Every connection is bounded (`limits:`): header size,
//! count and read time, idle time, connections per listener; every request
//! passes [`access`] before the stack sees it, and counts as in flight
//! ([`in_flight`]) until its response ends. Each connection is served by
//! hyper's connection-level API ([`connection`]: HTTP/1.1, h2 by ALPN or
//! h2c prior knowledge) and timed by its listener's [`watchdog`].

pub mod access;
pub mod coarse_clock;
pub(crate) mod conn_signal;
pub mod connection;
pub mod in_flight;
pub mod lifecycle;
pub mod path_check;
pub(crate) mod peer_gone;
pub mod stacks;
mod tls_handshake;
pub mod watchdog;
pub mod webhook;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt as _;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::listen::lifecycle::Serving;
use watchdog::Watchdog;

/// Accepts until shutdown, one task per connection, at most
/// `limits.maxConnections` at once (then it stops accepting until one
/// closes: the kernel's backlog holds the rest). The listener's connections
/// share one [`Watchdog`].
pub(crate) async fn accept_loop<F, Fut>(
    listener: TcpListener,
    serving: Serving,
    name: &'static str,
    mut on_connection: F,
) where
    F: FnMut(tokio::net::TcpStream, SocketAddr, Arc<Watchdog>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let max = serving.limits.max_connections;
    let slots = Arc::new(Semaphore::new(max));
    serving.lifecycle.register(slots.clone(), max as u32);
    let mut shutdown = serving.lifecycle.subscribe();
    let watchdog = Watchdog::start(&serving.limits, &serving.lifecycle);
    let mut at_limit = false;
    loop {
        if slots.available_permits() == 0 {
            if !at_limit {
                tracing::warn!(
                    listener = name,
                    max,
                    "connection limit reached (limits.maxConnections): not accepting until one closes"
                );
                serving.metrics.error(name, "connection_limit");
            }
            at_limit = true;
        } else {
            at_limit = false;
        }
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = lifecycle::fired(&mut shutdown) => break,
        };
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    // Out of file descriptors and the like: don't spin.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = lifecycle::fired(&mut shutdown) => break,
        };
        let _ = stream.set_nodelay(true);
        let conn = on_connection(stream, peer, watchdog.clone());
        tokio::spawn(holding(conn, permit));
    }
    tracing::info!(listener = name, "stopped accepting");
}

/// A connection's task: its future, then its slot given back. `map`, not
/// an `async` block awaiting it: the block would hold the future twice
/// (as captured and as awaited), and a watch holds its task for as long
/// as it lasts.
fn holding<F>(conn: F, permit: OwnedSemaphorePermit) -> impl Future<Output = ()> + Send
where
    F: Future<Output = ()> + Send,
{
    conn.map(move |()| drop(permit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_connections_task_holds_its_future_once() {
        let slots = Arc::new(Semaphore::new(1));
        let permit = slots.clone().acquire_owned().await.unwrap();
        // A future whose state is mostly a buffer held across an await.
        let conn = async {
            let buf = [7u8; 4096];
            tokio::task::yield_now().await;
            assert_eq!(buf[4095], 7);
        };
        let own = std::mem::size_of_val(&conn);
        let task = holding(conn, permit);
        assert!(
            std::mem::size_of_val(&task) < own + 64,
            "{} bytes for a future of {own}",
            std::mem::size_of_val(&task)
        );
        assert_eq!(slots.available_permits(), 0);
        task.await;
        assert_eq!(slots.available_permits(), 1, "the slot is given back");
    }
}
