//! One replica at a time copies the connection Secrets: the replicas of the
//! remote side elect it with a `coordination.k8s.io/v1` Lease in the remote
//! cluster, as Kubernetes controllers elect their leader. The holder renews
//! the Lease every third of its duration; another replica takes it once it
//! has not been renewed for its whole duration. Every write names the
//! resourceVersion read, so two replicas never both win. A holder acts as
//! one only until its last renewal is two thirds of the duration old, on
//! its own clock: one paused or cut off longer than that (another may
//! take the Lease at the whole duration) copies nothing more until it has
//! read the Lease again. The front itself answers from every replica.

use std::time::{Duration, Instant, SystemTime};

use http::{HeaderValue, Method, StatusCode};
use serde_json::{json, Value as Json};

use crate::upstream::own_client::OwnClient;

/// The Lease and who this replica is.
pub(crate) struct Elector {
    pub remote: OwnClient,
    pub namespace: String,
    pub name: String,
    /// This replica's identity (its pod name, else a random one).
    pub identity: String,
    pub duration: Duration,
}

/// What a read Lease says, for the decision.
#[derive(Debug, PartialEq)]
pub(crate) struct Held {
    pub holder: Option<String>,
    /// When it was last renewed.
    pub renewed: Option<SystemTime>,
    pub duration: Duration,
}

/// Until when a replica whose renewal (or take-over) was sent at `sent`
/// acts as the holder: a round (`every`) before another may take it.
pub(crate) fn held_until(sent: Instant, duration: Duration, every: Duration) -> Instant {
    sent + duration.saturating_sub(every)
}

/// Whether the Lease, held until `until` (`None`: not held), is held `now`.
pub(crate) fn holds(until: Option<Instant>, now: Instant) -> bool {
    until.is_some_and(|u| now < u)
}

/// Whether `me` may take (or keep) a Lease `held` as read `now`.
pub(crate) fn may_take(held: &Held, me: &str, now: SystemTime) -> bool {
    match (&held.holder, held.renewed) {
        (None, _) => true,
        (Some(h), _) if h == me => true,
        (Some(_), None) => true,
        (Some(_), Some(at)) => now.duration_since(at).is_ok_and(|age| age >= held.duration),
    }
}

impl Elector {
    /// Runs for the life of the process, saying on `leading` until when
    /// this replica holds the Lease (`None`: it does not).
    pub(crate) async fn run(self, leading: tokio::sync::watch::Sender<Option<Instant>>) {
        let every = (self.duration / 3).max(Duration::from_secs(1));
        loop {
            let sent = Instant::now();
            let now_leading = match self.try_hold().await {
                Ok(held) => held,
                Err(why) => {
                    tracing::warn!(lease = %self.name, "leader election: {why}");
                    // Not renewed: another replica may take over.
                    false
                }
            };
            if leading.borrow().is_some() != now_leading {
                tracing::info!(
                    lease = %format!("{}/{}", self.namespace, self.name),
                    identity = %self.identity,
                    leading = now_leading,
                    "connection Secret copier leadership"
                );
            }
            let until = now_leading.then(|| held_until(sent, self.duration, every));
            let _ = leading.send(until);
            tokio::time::sleep(every).await;
        }
    }

    /// One round: read the Lease, take or renew it when allowed. Whether
    /// this replica holds it now.
    async fn try_hold(&self) -> Result<bool, String> {
        let path = format!(
            "/apis/coordination.k8s.io/v1/namespaces/{}/leases/{}",
            self.namespace, self.name
        );
        let accept = HeaderValue::from_static("application/json");
        let (status, _, body) = self
            .remote
            .request(Method::GET, &path, accept.clone(), None)
            .await
            .map_err(|e| e.to_string())?;
        let now = SystemTime::now();
        let spec = json!({
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.duration.as_secs(),
            "renewTime": micro_time(now),
        });
        let ctype = HeaderValue::from_static("application/json");
        if status == StatusCode::NOT_FOUND {
            let lease = json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": spec,
            });
            let create = format!(
                "/apis/coordination.k8s.io/v1/namespaces/{}/leases",
                self.namespace
            );
            let body = serde_json::to_vec(&lease).expect("values serialize").into();
            let (s, _, _) = self
                .remote
                .request(Method::POST, &create, accept, Some((ctype, body)))
                .await
                .map_err(|e| e.to_string())?;
            // 409: another replica created it first.
            return Ok(s.is_success());
        }
        if status == StatusCode::FORBIDDEN {
            // Deployed before the Lease: one replica copies as before, but
            // two would both copy. Said at every round.
            tracing::warn!(
                lease = %format!("{}/{}", self.namespace, self.name),
                "regroup may not read its Lease (403): copying without election; give its ServiceAccount get, create and update on leases there (`regroup publish-manifests` prints the Role)"
            );
            return Ok(true);
        }
        if !status.is_success() {
            return Err(format!("reading the Lease: {status}"));
        }
        let mut lease: Json =
            serde_json::from_slice(&body).map_err(|_| "the Lease is not JSON".to_owned())?;
        let held = Held {
            holder: lease["spec"]["holderIdentity"].as_str().map(str::to_owned),
            renewed: lease["spec"]["renewTime"].as_str().and_then(rfc3339),
            duration: lease["spec"]["leaseDurationSeconds"]
                .as_u64()
                .map(Duration::from_secs)
                .unwrap_or(self.duration),
        };
        if !may_take(&held, &self.identity, now) {
            return Ok(false);
        }
        if held.holder.as_deref() != Some(&self.identity) {
            let transitions = lease["spec"]["leaseTransitions"].as_u64().unwrap_or(0);
            lease["spec"]["leaseTransitions"] = (transitions + 1).into();
            lease["spec"]["acquireTime"] = micro_time(now).into();
        }
        for (k, v) in spec.as_object().expect("an object") {
            lease["spec"][k] = v.clone();
        }
        // The resourceVersion read stays: a replica that wrote since wins.
        let body = serde_json::to_vec(&lease).expect("values serialize").into();
        let (s, _, _) = self
            .remote
            .request(Method::PUT, &path, accept, Some((ctype, body)))
            .await
            .map_err(|e| e.to_string())?;
        Ok(s.is_success())
    }
}

/// A Kubernetes MicroTime (RFC 3339 with microseconds, UTC).
fn micro_time(t: SystemTime) -> String {
    let t = time::OffsetDateTime::from(t);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.microsecond()
    )
}

/// A MicroTime or Time read back.
fn rfc3339(s: &str) -> Option<SystemTime> {
    time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .ok()
        .map(SystemTime::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_taken_when_free_ours_or_expired_only() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let d = Duration::from_secs(15);
        let held = |holder: Option<&str>, ago: Option<u64>| Held {
            holder: holder.map(str::to_owned),
            renewed: ago.map(|a| now - Duration::from_secs(a)),
            duration: d,
        };
        assert!(may_take(&held(None, None), "a", now));
        assert!(may_take(&held(Some("a"), Some(1)), "a", now));
        assert!(!may_take(&held(Some("b"), Some(1)), "a", now));
        assert!(!may_take(&held(Some("b"), Some(14)), "a", now));
        assert!(may_take(&held(Some("b"), Some(15)), "a", now));
        assert!(may_take(&held(Some("b"), None), "a", now));
    }

    #[test]
    fn a_holder_stops_a_round_before_another_may_take_over() {
        let sent = Instant::now();
        let (d, every) = (Duration::from_secs(3), Duration::from_secs(1));
        let until = held_until(sent, d, every);
        assert_eq!(until, sent + Duration::from_secs(2));
        assert!(holds(Some(until), sent));
        assert!(holds(Some(until), until - Duration::from_millis(1)));
        // Paused past it (SIGSTOP, a partition): not the holder, whatever it last heard.
        assert!(!holds(Some(until), until));
        assert!(!holds(Some(until), sent + d));
        assert!(!holds(None, sent));
    }

    #[test]
    fn micro_times_round_trip_as_kube_apiserver_writes_them() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_micros(1_764_860_400_123_456);
        let s = micro_time(t);
        assert_eq!(s, "2025-12-04T15:00:00.123456Z");
        assert_eq!(rfc3339(&s), Some(t));
        assert_eq!(
            rfc3339("2025-12-04T15:00:00Z"),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_860_400))
        );
        assert_eq!(rfc3339("yesterday"), None);
    }
}
