//! The h2 connection's health check, as client-go's transport runs it: a
//! connection that read no frame for `limits.upstreamReadIdleTimeout` is
//! pinged, and closed when no answer comes within
//! `limits.upstreamPingTimeout`. A connection that dies silently (a node
//! gone, packets dropped without a RST or FIN) would otherwise hold every
//! request and watch on it until TCP gives up, minutes later.
//!
//! hyper runs the ping (its h2 client's keep-alive): it stamps the time of
//! every frame read and checks the stamp once per interval, so a busy
//! connection is never pinged and no timer is reset per frame. The pings go
//! out on an idle connection too, so a dead one is found before a request
//! is sent on it.

use std::time::Duration;

use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use super::tallies::Tallies;

/// The h2 connection's ping: after `read_idle` without a frame read, a
/// ping; no answer within `timeout`, the connection is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthCheck {
    /// `None`: no pings (`limits.upstreamReadIdleTimeout: 0`).
    pub read_idle: Option<Duration>,
    pub timeout: Duration,
}

impl From<&regroup_config::Limits> for HealthCheck {
    fn from(l: &regroup_config::Limits) -> Self {
        HealthCheck {
            read_idle: Some(l.upstream_read_idle_timeout).filter(|d| !d.is_zero()),
            timeout: l.upstream_ping_timeout,
        }
    }
}

impl HealthCheck {
    /// The h2 client builder, with the pings when they are on.
    pub(super) fn builder(&self) -> http2::Builder<TokioExecutor> {
        let mut b = http2::Builder::new(TokioExecutor::new());
        if let Some(idle) = self.read_idle {
            b.timer(TokioTimer::new())
                .keep_alive_interval(idle)
                .keep_alive_timeout(self.timeout)
                .keep_alive_while_idle(true);
        }
        b
    }

    /// Logs why the h2 connection ended: a warning when its ping went
    /// unanswered (every request and watch on it ended with it).
    pub(super) fn ended(&self, e: &hyper::Error, tallies: &Tallies) {
        if self.read_idle.is_some() && e.is_timeout() {
            tallies.ping_closed();
            tracing::warn!(
                "upstream h2 connection closed: no answer to a ping within {}s after {}s \
                 without a frame from the apiserver (limits.upstreamPingTimeout, \
                 upstreamReadIdleTimeout); its requests and watches end, the next request \
                 opens a new connection",
                self.timeout.as_secs_f64(),
                self.read_idle.unwrap_or_default().as_secs_f64(),
            );
        } else {
            tracing::debug!("upstream h2 connection ended: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_read_idle_turns_the_pings_off_defaults_are_client_gos() {
        let d = HealthCheck::from(&regroup_config::Limits::default());
        assert_eq!(d.read_idle, Some(Duration::from_secs(30)));
        assert_eq!(d.timeout, Duration::from_secs(15));
        let off = HealthCheck::from(&regroup_config::Limits {
            upstream_read_idle_timeout: Duration::ZERO,
            ..Default::default()
        });
        assert_eq!(off.read_idle, None);
    }
}
