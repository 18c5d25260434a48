//! The chart's webhooks, sent through regroup's webhook listener.
//!
//! kube-apiserver calls an operator's admission and conversion webhooks in
//! the cluster's names; the app knows only its own. For every webhook
//! configuration and CRD conversion webhook of the manifests whose
//! `clientConfig` names a Service, `inject` finds the Service, the
//! workload behind it and the app container's port, and:
//!
//! - points the Service's port at regroup's webhook listener in that pod
//!   (the registration, its `caBundle` and whatever keeps it, cainjector,
//!   Helm or the app, are untouched);
//! - has regroup serve the listener with the certificate the app mounts
//!   (the same Secret volume), so the `caBundle` still verifies it; or, for
//!   an app that makes its certificate itself from a CA it keeps in a
//!   Secret (cert-manager's webhook, `--dynamic-serving-ca-secret-name`),
//!   has regroup issue its own from that CA (mounted from the Secret), which
//!   the `caBundle` injected from that Secret verifies as well;
//! - forwards each webhook's path to the app's own port on loopback.
//!
//! What it can't wire it refuses, saying why (a Service or workload not in
//! the manifests, an app with no serving certificate regroup can find),
//! unless told to leave the webhooks alone.

use serde_json::{json, Value as Json};

use super::InjectError;
use crate::render::each_object as each;

/// Where regroup mounts the app's serving certificate (or its CA).
pub const CERT_DIR: &str = "/etc/regroup/webhook-serving";

/// The pod volume of the app's CA Secret, which regroup adds.
pub const CA_VOLUME: &str = "regroup-webhook-ca";

/// What regroup's listener presents.
#[derive(Debug, Clone, PartialEq)]
pub enum ServingCert {
    /// The app's own certificate: the pod's Secret volume that holds it.
    Volume(String),
    /// A certificate regroup issues from the app's CA, kept in this Secret
    /// of the pod's namespace, for these names of the Service.
    FromCa {
        secret: String,
        dns_names: Vec<String>,
    },
}

impl std::fmt::Display for ServingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServingCert::Volume(v) => write!(f, "the app's certificate (volume {v})"),
            ServingCert::FromCa { secret, .. } => {
                write!(
                    f,
                    "a certificate issued from the app's CA (Secret {secret})"
                )
            }
        }
    }
}

/// One workload's webhooks, wired through its sidecar.
#[derive(Debug, Clone, PartialEq)]
pub struct Wiring {
    /// The workload: kind, namespace, name.
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    /// The Service kube-apiserver calls, and which of its ports.
    pub service: String,
    pub service_port: u16,
    /// What regroup's listener presents.
    pub cert: ServingCert,
    /// The app's webhook port, and the paths it serves there.
    pub app_port: u16,
    pub paths: Vec<String>,
}

/// A webhook's Service reference: namespace, name, port, path.
type ServiceRef = (String, String, u16, String);

/// Every `clientConfig.service` of the manifests' webhook configurations
/// and CRD conversion webhooks, with what names it (for messages).
fn service_refs(docs: &[Json]) -> Vec<(String, ServiceRef)> {
    let mut out = Vec::new();
    let svc = |cc: &Json| -> Option<ServiceRef> {
        let s = cc.get("service")?;
        Some((
            s.get("namespace")?.as_str()?.to_owned(),
            s.get("name")?.as_str()?.to_owned(),
            s.get("port").and_then(Json::as_u64).unwrap_or(443) as u16,
            s.get("path")
                .and_then(Json::as_str)
                .unwrap_or("/")
                .to_owned(),
        ))
    };
    for doc in each(docs) {
        let kind = doc.get("kind").and_then(Json::as_str).unwrap_or("");
        let name = doc
            .pointer("/metadata/name")
            .and_then(Json::as_str)
            .unwrap_or("");
        match kind {
            "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => {
                for w in doc
                    .get("webhooks")
                    .and_then(Json::as_array)
                    .into_iter()
                    .flatten()
                {
                    if let Some(r) = w.get("clientConfig").and_then(svc) {
                        let hook = w.get("name").and_then(Json::as_str).unwrap_or("");
                        out.push((format!("{kind} {name} webhook {hook}"), r));
                    }
                }
            }
            "CustomResourceDefinition" => {
                if let Some(r) = doc
                    .pointer("/spec/conversion/webhook/clientConfig")
                    .and_then(svc)
                {
                    out.push((format!("the conversion webhook of CRD {name}"), r));
                }
            }
            _ => {}
        }
    }
    out
}

fn is(doc: &Json, kind: &str, ns: &str, name: &str) -> bool {
    doc.get("kind").and_then(Json::as_str) == Some(kind)
        && doc.pointer("/metadata/name").and_then(Json::as_str) == Some(name)
        && doc
            .pointer("/metadata/namespace")
            .and_then(Json::as_str)
            .is_none_or(|n| n == ns)
}

/// The pod template spec and labels of a workload document.
fn template(doc: &Json) -> Option<(&Json, &Json)> {
    let kind = doc.get("kind")?.as_str()?;
    let t = match kind {
        "Pod" => return Some((doc.get("spec")?, doc.pointer("/metadata/labels")?)),
        "CronJob" => doc.pointer("/spec/jobTemplate/spec/template")?,
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => {
            doc.pointer("/spec/template")?
        }
        _ => return None,
    };
    Some((t.get("spec")?, t.pointer("/metadata/labels")?))
}

/// The webhooks of `docs` to wire, by workload, or why one can't be.
pub fn plan(docs: &[Json], listen_port: u16) -> (Vec<Wiring>, Vec<String>) {
    let mut wirings: Vec<Wiring> = Vec::new();
    let mut refused = Vec::new();
    let all = each(docs);
    for (what, (ns, svc_name, port, path)) in service_refs(docs) {
        let why = |w: String| format!("{what}: {w}");
        let Some(svc) = all.iter().find(|d| is(d, "Service", &ns, &svc_name)) else {
            refused.push(why(format!(
                "its Service {ns}/{svc_name} is not in the manifests"
            )));
            continue;
        };
        let Some(sp) = svc
            .pointer("/spec/ports")
            .and_then(Json::as_array)
            .and_then(|ps| {
                ps.iter()
                    .find(|p| p.get("port").and_then(Json::as_u64) == Some(u64::from(port)))
            })
        else {
            refused.push(why(format!("Service {ns}/{svc_name} has no port {port}")));
            continue;
        };
        let Some(selector) = svc.pointer("/spec/selector").and_then(Json::as_object) else {
            refused.push(why(format!("Service {ns}/{svc_name} selects no pods")));
            continue;
        };
        let workload = all.iter().find(|d| {
            d.pointer("/metadata/namespace")
                .and_then(Json::as_str)
                .is_none_or(|n| n == ns)
                && template(d).is_some_and(|(_, labels)| {
                    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
                })
        });
        let Some(workload) = workload else {
            refused.push(why(format!(
                "no workload in the manifests has the pods Service {ns}/{svc_name} selects"
            )));
            continue;
        };
        let (spec, _) = template(workload).expect("found by its template");
        let target = sp.get("targetPort").unwrap_or(&sp["port"]);
        if target.as_u64() == Some(u64::from(listen_port)) && serves_listener(spec, listen_port) {
            // Wired by an earlier `inject`: its configuration stays.
            continue;
        }
        let containers: Vec<&Json> = spec
            .get("containers")
            .and_then(Json::as_array)
            .map(|c| c.iter().collect())
            .unwrap_or_default();
        let by_port = |c: &&Json| -> Option<u16> {
            c.get("ports")?.as_array()?.iter().find_map(|p| {
                let n = p.get("containerPort")?.as_u64()?;
                let named = target
                    .as_str()
                    .is_some_and(|t| p.get("name").and_then(Json::as_str) == Some(t));
                (named || target.as_u64() == Some(n)).then_some(n as u16)
            })
        };
        let found = containers.iter().find_map(|c| by_port(c).map(|p| (*c, p)));
        let (container, app_port) = match (found, target.as_u64()) {
            (Some(f), _) => f,
            // A numeric targetPort a container does not declare: the
            // first container's.
            (None, Some(n)) if !containers.is_empty() => (containers[0], n as u16),
            _ => {
                refused.push(why(format!(
                    "no container declares the port Service {ns}/{svc_name} targets ({target})"
                )));
                continue;
            }
        };
        let cert = match (
            serving_cert_volume(spec, container),
            dynamic_ca_secret(container, &ns),
        ) {
            (Some(v), _) => ServingCert::Volume(v),
            (None, Ok(Some(secret))) => ServingCert::FromCa {
                secret,
                dns_names: service_names(&svc_name, &ns),
            },
            (None, Err(e)) => {
                refused.push(why(e.to_string()));
                continue;
            }
            (None, Ok(None)) => {
                refused.push(why(format!(
                    "the container `{}` mounts no Secret that could hold its serving \
                     certificate, and names no CA Secret it makes one from \
                     (--dynamic-serving-ca-secret-name)",
                    container.get("name").and_then(Json::as_str).unwrap_or("")
                )));
                continue;
            }
        };
        if app_port == listen_port {
            refused.push(why(format!(
                "the app serves it on port {app_port}, the port regroup's webhook listener takes \
                 (pass another --webhook-port)"
            )));
            continue;
        }
        let kind = workload["kind"].as_str().unwrap_or("").to_owned();
        let name = workload
            .pointer("/metadata/name")
            .and_then(Json::as_str)
            .unwrap_or("")
            .to_owned();
        match wirings
            .iter_mut()
            .find(|w| w.kind == kind && w.name == name && w.namespace.as_deref() == Some(&ns))
        {
            Some(w) if w.app_port != app_port || w.cert != cert => {
                refused.push(why(format!(
                    "{kind} {ns}/{name} serves webhooks on two ports or with two certificates"
                )));
            }
            Some(w) => {
                if !w.paths.contains(&path) {
                    w.paths.push(path);
                }
            }
            None => wirings.push(Wiring {
                kind,
                namespace: Some(ns.clone()),
                name,
                service: svc_name.clone(),
                service_port: port,
                cert,
                app_port,
                paths: vec![path],
            }),
        }
    }
    (wirings, refused)
}

/// True when the pod's regroup container already exposes the webhook
/// listener's port.
fn serves_listener(spec: &Json, listen_port: u16) -> bool {
    ["initContainers", "containers"].iter().any(|k| {
        spec.get(*k).and_then(Json::as_array).is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("name").and_then(Json::as_str) == Some("regroup")
                    && c.get("ports").and_then(Json::as_array).is_some_and(|ps| {
                        ps.iter().any(|p| {
                            p.get("containerPort").and_then(Json::as_u64)
                                == Some(u64::from(listen_port))
                        })
                    })
            })
        })
    })
}

/// The pod's Secret volume the container mounts whose files could be its
/// serving certificate: the one mounted where a webhook server keeps it
/// (a path naming `cert`, `tls`, `webhook` or `serving`), else the only
/// Secret it mounts.
fn serving_cert_volume(spec: &Json, container: &Json) -> Option<String> {
    let secrets: Vec<&str> = spec
        .get("volumes")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v.get("secret").is_some())
        .filter_map(|v| v.get("name").and_then(Json::as_str))
        .collect();
    let mounts: Vec<(&str, &str)> = container
        .get("volumeMounts")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(|m| Some((m.get("name")?.as_str()?, m.get("mountPath")?.as_str()?)))
        .filter(|(n, _)| secrets.contains(n))
        .collect();
    let likely = mounts.iter().find(|(_, p)| {
        ["cert", "tls", "webhook", "serving"]
            .iter()
            .any(|w| p.contains(w))
    });
    match (likely, mounts.as_slice()) {
        (Some((n, _)), _) => Some(n.to_string()),
        (None, [(n, _)]) => Some(n.to_string()),
        _ => None,
    }
}

/// The CA Secret an app makes its serving certificate from, as
/// cert-manager's webhook names it (`--dynamic-serving-ca-secret-name`,
/// `--dynamic-serving-ca-secret-namespace`), in the container's command and
/// args. A Secret volume can only be of the pod's own namespace: another
/// namespace is refused.
fn dynamic_ca_secret(container: &Json, ns: &str) -> Result<Option<String>, InjectError> {
    let words: Vec<&str> = ["command", "args"]
        .iter()
        .filter_map(|k| container.get(*k).and_then(Json::as_array))
        .flatten()
        .filter_map(Json::as_str)
        .collect();
    let flag = |name: &str| -> Option<String> {
        let long = format!("--{name}");
        words.iter().enumerate().find_map(|(i, w)| {
            if let Some(v) = w.strip_prefix(&format!("{long}=")) {
                Some(v.to_owned())
            } else if *w == long {
                words.get(i + 1).map(|v| v.to_string())
            } else {
                None
            }
        })
    };
    let Some(secret) = flag("dynamic-serving-ca-secret-name") else {
        return Ok(None);
    };
    match flag("dynamic-serving-ca-secret-namespace") {
        // `$(POD_NAMESPACE)`, the kubelet's expansion of the pod's own.
        Some(n) if n != ns && !n.starts_with("$(") => Err(InjectError::CaSecretElsewhere {
            secret,
            namespace: n,
            pod_namespace: ns.to_owned(),
        }),
        _ => Ok(Some(secret)),
    }
}

/// The names kube-apiserver calls a Service by.
fn service_names(svc: &str, ns: &str) -> Vec<String> {
    vec![
        format!("{svc}.{ns}.svc"),
        format!("{svc}.{ns}.svc.cluster.local"),
        format!("{svc}.{ns}"),
        svc.to_owned(),
    ]
}

/// The configuration's `webhooks:` section for one wiring.
pub fn config_section(w: &Wiring, listen_port: u16) -> Json {
    let hooks: Vec<Json> = w
        .paths
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let name = p
                .trim_matches('/')
                .replace(['/', '?', '#', ' '], "-");
            let name = if name.is_empty() {
                format!("webhook-{i}")
            } else {
                name
            };
            json!({"name": name, "path": p, "backend": format!("https://127.0.0.1:{}{p}", w.app_port)})
        })
        .collect();
    let mut section = json!({
        "listen": format!("0.0.0.0:{listen_port}"),
        // The app's certificate names its Service, not 127.0.0.1: the
        // loopback hop inside the pod is not verified.
        "dangerousInsecureBackend": true,
        "hooks": hooks,
    });
    match &w.cert {
        ServingCert::Volume(_) => {
            section["certFile"] = json!(format!("{CERT_DIR}/tls.crt"));
            section["keyFile"] = json!(format!("{CERT_DIR}/tls.key"));
        }
        ServingCert::FromCa { dns_names, .. } => {
            section["issueFrom"] = json!({
                "caCertFile": format!("{CERT_DIR}/tls.crt"),
                "caKeyFile": format!("{CERT_DIR}/tls.key"),
                "dnsNames": dns_names,
            });
        }
    }
    section
}

/// Points the Service's port at regroup's listener.
pub fn retarget_service(docs: &mut [Json], w: &Wiring, listen_port: u16) {
    let ns = w.namespace.clone().unwrap_or_default();
    for d in docs.iter_mut() {
        if let Some(items) = d.get_mut("items").and_then(Json::as_array_mut) {
            retarget_service(items, w, listen_port);
            continue;
        }
        if !is(d, "Service", &ns, &w.service) {
            continue;
        }
        for p in d
            .pointer_mut("/spec/ports")
            .and_then(Json::as_array_mut)
            .into_iter()
            .flatten()
        {
            if p.get("port").and_then(Json::as_u64) == Some(u64::from(w.service_port)) {
                p["targetPort"] = json!(listen_port);
            }
        }
    }
}

/// In the workload's wrapped pod spec: regroup mounts the certificate
/// volume, exposes the listener's port, and reads `config_map`.
pub fn wire_pod(docs: &mut [Json], w: &Wiring, listen_port: u16, config_map: &str, hash: &str) {
    let ns = w.namespace.clone().unwrap_or_default();
    for d in docs.iter_mut() {
        if let Some(items) = d.get_mut("items").and_then(Json::as_array_mut) {
            wire_pod(items, w, listen_port, config_map, hash);
            continue;
        }
        if !is(d, &w.kind, &ns, &w.name) {
            continue;
        }
        let (at, meta) = match w.kind.as_str() {
            "Pod" => ("/spec", "/metadata/annotations"),
            "CronJob" => (
                "/spec/jobTemplate/spec/template/spec",
                "/spec/jobTemplate/spec/template/metadata/annotations",
            ),
            _ => ("/spec/template/spec", "/spec/template/metadata/annotations"),
        };
        // Its own configuration: the pods roll when it changes.
        if let Some(Json::Object(a)) = d.pointer_mut(meta) {
            a.insert("regroup.dev/config-hash".into(), json!(hash));
        }
        let Some(spec) = d.pointer_mut(at) else {
            continue;
        };
        for key in ["initContainers", "containers"] {
            for c in spec
                .get_mut(key)
                .and_then(Json::as_array_mut)
                .into_iter()
                .flatten()
            {
                if c.get("name").and_then(Json::as_str) != Some("regroup") {
                    continue;
                }
                let volume = match &w.cert {
                    ServingCert::Volume(v) => v.as_str(),
                    ServingCert::FromCa { .. } => CA_VOLUME,
                };
                push(
                    c,
                    "volumeMounts",
                    json!({"name": volume, "mountPath": CERT_DIR, "readOnly": true}),
                );
                push(
                    c,
                    "ports",
                    json!({"name": "regroup-hooks", "containerPort": listen_port}),
                );
            }
        }
        if let ServingCert::FromCa { secret, .. } = &w.cert {
            // Optional: the app creates the Secret once it runs; the
            // kubelet fills the volume then.
            push(
                spec,
                "volumes",
                json!({"name": CA_VOLUME, "secret": {"secretName": secret, "optional": true}}),
            );
        }
        for v in spec
            .get_mut("volumes")
            .and_then(Json::as_array_mut)
            .into_iter()
            .flatten()
        {
            if v.get("name").and_then(Json::as_str) == Some("regroup-config") {
                if let Some(cm) = v.get_mut("configMap") {
                    cm["name"] = json!(config_map);
                }
            }
        }
    }
}

fn push(obj: &mut Json, key: &str, v: Json) {
    let list = obj
        .as_object_mut()
        .map(|o| o.entry(key).or_insert_with(|| json!([])));
    if let Some(Json::Array(list)) = list {
        if !list.contains(&v) {
            list.push(v);
        }
    }
}
