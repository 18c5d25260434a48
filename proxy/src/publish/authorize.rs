//! The remote cluster decides what a remote caller may do: a
//! SubjectAccessReview per request, sent with regroup's remote credential,
//! as an aggregated API server's delegated authorization does. A denial
//! is kube-apiserver's `403 Forbidden`, worded as it words it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::HeaderValue;
use serde_json::{json, Value as Json};

use crate::front::auth::Identity;
use crate::status::Failure;
use crate::upstream::own_client::OwnClient;

/// What is asked: a resource request (in the remote cluster's names and
/// namespace) or a path that is no resource.
pub(crate) enum Attributes<'a> {
    Resource {
        verb: &'a str,
        group: &'a str,
        version: &'a str,
        resource: &'a str,
        subresource: Option<&'a str>,
        namespace: Option<&'a str>,
        name: Option<&'a str>,
    },
    NonResource {
        verb: &'a str,
        path: &'a str,
    },
}

/// How long an answer is used again, allowed or denied: as an aggregated
/// API server's delegated authorizer keeps them.
const KEPT: Duration = Duration::from_secs(10);
/// Answers kept at most; beyond, all are forgotten at once.
const MOST: usize = 4096;

/// The remote cluster's answers, asked with regroup's remote credential
/// and kept [`KEPT`].
pub(crate) struct Reviewer {
    remote: OwnClient,
    /// The review's spec (JSON) → when asked, and the denial's reason
    /// (`None`: allowed).
    kept: Mutex<HashMap<String, (Instant, Option<String>)>>,
}

impl Reviewer {
    pub fn new(remote: OwnClient) -> Reviewer {
        Reviewer {
            remote,
            kept: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `who` may do `what`: `Ok` when allowed, kube-apiserver's
    /// `403` when not.
    pub async fn review(&self, who: &Identity, what: &Attributes<'_>) -> Result<(), Failure> {
        let sar = request(who, what);
        let key = sar["spec"].to_string();
        let kept = self
            .lock()
            .get(&key)
            .filter(|(at, _)| at.elapsed() < KEPT)
            .cloned();
        let denied = match kept {
            Some((_, denied)) => denied,
            None => {
                let denied = ask(&self.remote, &sar).await?;
                let mut k = self.lock();
                if k.len() >= MOST {
                    k.clear();
                }
                k.insert(key, (Instant::now(), denied.clone()));
                denied
            }
        };
        match denied {
            None => Ok(()),
            Some(reason) => {
                tracing::info!(user = %who.user, groups = ?who.groups, reason, "denied by this cluster's authorization");
                Err(Failure::forbidden(forbidden_message(who, what, &reason)))
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, Option<String>)>> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Sends one SubjectAccessReview: `None` when allowed, else the reason.
async fn ask(remote: &OwnClient, sar: &Json) -> Result<Option<String>, Failure> {
    let body = serde_json::to_vec(sar).expect("values serialize");
    let (status, _, answer) = remote
        .request(
            http::Method::POST,
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            HeaderValue::from_static("application/json"),
            Some((
                HeaderValue::from_static("application/json"),
                Bytes::from(body),
            )),
        )
        .await
        .map_err(|e| Failure::unavailable(format!("authorizing with this cluster: {e}")))?;
    if !status.is_success() {
        return Err(Failure::unavailable(format!(
            "authorizing with this cluster: SubjectAccessReview answered {status} (regroup's own credential needs system:auth-delegator)"
        )));
    }
    let answer: Json = serde_json::from_slice(&answer).map_err(|_| {
        Failure::bad_gateway("authorizing with this cluster: the SubjectAccessReview is not JSON")
    })?;
    if answer["status"]["allowed"].as_bool() == Some(true) {
        return Ok(None);
    }
    Ok(Some(
        answer["status"]["reason"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    ))
}

/// The SubjectAccessReview asking about `what` for `who`.
fn request(who: &Identity, what: &Attributes<'_>) -> Json {
    let mut spec = json!({"user": who.user, "groups": groups(who)});
    if let Some(uid) = &who.uid {
        spec["uid"] = uid.clone().into();
    }
    if !who.extra.is_empty() {
        spec["extra"] = who
            .extra
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect::<serde_json::Map<_, _>>()
            .into();
    }
    match what {
        Attributes::Resource {
            verb,
            group,
            version,
            resource,
            subresource,
            namespace,
            name,
        } => {
            let mut a =
                json!({"verb": verb, "group": group, "version": version, "resource": resource});
            for (k, v) in [
                ("subresource", subresource),
                ("namespace", namespace),
                ("name", name),
            ] {
                if let Some(v) = v {
                    a[k] = (*v).into();
                }
            }
            spec["resourceAttributes"] = a;
        }
        Attributes::NonResource { verb, path } => {
            spec["nonResourceAttributes"] = json!({"verb": verb, "path": path});
        }
    }
    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
}

/// The caller's groups as an API server authenticating it holds them:
/// every authenticated caller is also in `system:authenticated` (what
/// grants discovery and OpenAPI), which the request headers don't carry.
fn groups(who: &Identity) -> Vec<&str> {
    let mut g: Vec<&str> = who.groups.iter().map(String::as_str).collect();
    let anonymous = who.user == "system:anonymous" || g.contains(&"system:unauthenticated");
    if !anonymous && !g.contains(&"system:authenticated") {
        g.push("system:authenticated");
    }
    g
}

/// kube-apiserver's wording of a denial.
fn forbidden_message(who: &Identity, what: &Attributes<'_>, reason: &str) -> String {
    let tail = if reason.is_empty() {
        String::new()
    } else {
        format!(": {reason}")
    };
    match what {
        Attributes::Resource {
            verb,
            group,
            resource,
            subresource,
            namespace,
            name,
            ..
        } => {
            let qualified = if group.is_empty() {
                (*resource).to_owned()
            } else {
                format!("{resource}.{group}")
            };
            let object = match name {
                Some(n) => format!("{qualified} {n:?}"),
                None => qualified,
            };
            let full = match subresource {
                Some(s) => format!("{resource}/{s}"),
                None => (*resource).to_owned(),
            };
            let scope = match namespace {
                Some(ns) => format!(" in the namespace {ns:?}"),
                None => " at the cluster scope".into(),
            };
            format!(
                "{object} is forbidden: User {:?} cannot {verb} resource {full:?} in API group {group:?}{scope}{tail}",
                who.user
            )
        }
        Attributes::NonResource { verb, path } => format!(
            "forbidden: User {:?} cannot {verb} path {path:?}{tail}",
            who.user
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> Identity {
        Identity {
            user: "alice".into(),
            uid: Some("u1".into()),
            groups: vec!["devs".into(), "system:authenticated".into()],
            extra: vec![("scopes".into(), vec!["a".into()])],
        }
    }

    #[test]
    fn a_resource_review_names_everything_the_caller_asked() {
        let what = Attributes::Resource {
            verb: "get",
            group: "database.acmeco.org",
            version: "v1alpha1",
            resource: "mysqlinstancerequirements",
            subresource: Some("status"),
            namespace: Some("foo"),
            name: Some("sqldb"),
        };
        let r = request(&alice(), &what);
        assert_eq!(r["spec"]["user"], "alice");
        assert_eq!(r["spec"]["uid"], "u1");
        assert_eq!(r["spec"]["groups"][1], "system:authenticated");
        assert_eq!(r["spec"]["extra"]["scopes"][0], "a");
        let a = &r["spec"]["resourceAttributes"];
        assert_eq!(a["namespace"], "foo");
        assert_eq!(a["subresource"], "status");
        assert_eq!(a["name"], "sqldb");
        assert_eq!(
            forbidden_message(&alice(), &what, ""),
            "mysqlinstancerequirements.database.acmeco.org \"sqldb\" is forbidden: User \"alice\" cannot get resource \"mysqlinstancerequirements/status\" in API group \"database.acmeco.org\" in the namespace \"foo\""
        );
    }

    #[test]
    fn a_list_across_namespaces_and_a_path_are_worded_as_kube_apiserver_words_them() {
        let list = Attributes::Resource {
            verb: "list",
            group: "g.io",
            version: "v1",
            resource: "things",
            subresource: None,
            namespace: None,
            name: None,
        };
        let r = request(&alice(), &list);
        assert!(r["spec"]["resourceAttributes"].get("namespace").is_none());
        assert_eq!(
            forbidden_message(&alice(), &list, "no RBAC policy matched"),
            "things.g.io is forbidden: User \"alice\" cannot list resource \"things\" in API group \"g.io\" at the cluster scope: no RBAC policy matched"
        );
        let path = Attributes::NonResource {
            verb: "get",
            path: "/openapi/v2",
        };
        assert_eq!(
            request(&alice(), &path)["spec"]["nonResourceAttributes"]["path"],
            "/openapi/v2"
        );
    }

    #[test]
    fn an_authenticated_caller_is_in_system_authenticated_once() {
        let mut aggregator = alice();
        aggregator.groups.clear();
        let path = Attributes::NonResource {
            verb: "get",
            path: "/openapi/v2",
        };
        assert_eq!(
            request(&aggregator, &path)["spec"]["groups"],
            json!(["system:authenticated"])
        );
        assert_eq!(
            request(&alice(), &path)["spec"]["groups"],
            json!(["devs", "system:authenticated"])
        );
        let mut anon = alice();
        anon.user = "system:anonymous".into();
        anon.groups = vec!["system:unauthenticated".into()];
        assert_eq!(
            request(&anon, &path)["spec"]["groups"],
            json!(["system:unauthenticated"])
        );
    }
}
