//! `regroup inject`: an app's manifests, renamed and wrapped.
//!
//! Every document goes through `regroup render`'s renaming (towards the
//! cluster); then every pod template of the kinds asked for (Deployment,
//! StatefulSet, DaemonSet, ReplicaSet, Job, CronJob, Pod; inside `List`s
//! too) gets regroup as a sidecar in in-cluster mode (the app
//! reads its in-cluster config, which points at regroup; docs/deploy.md, way 2),
//! exactly as the Helm chart (`charts/regroup`) builds it:
//!
//! - regroup, a native sidecar (an init container with `restartPolicy:
//!   Always`, Kubernetes >= 1.29) or an ordinary container, reading its
//!   config from the ConfigMap `PREFIX-config` and the real service-account
//!   token and CA from its own projected volume at the standard path;
//! - each app container (and init container, with a native sidecar):
//!   `KUBERNETES_SERVICE_HOST=127.0.0.1`,
//!   `KUBERNETES_SERVICE_PORT(_HTTPS)=<regroup's TLS port>`, and at the
//!   standard path a projected volume with the pod's own token and, as
//!   `ca.crt`, the CA of regroup's loopback certificate (Secret
//!   `PREFIX-serving`, generated here unless it exists or `tls_secret`
//!   names one);
//! - the pod's `automountServiceAccountToken: false` (each container gets
//!   exactly its volume).
//!
//! Idempotent: a pod template that already has a container named `regroup`
//! is left alone, an existing `PREFIX-config` ConfigMap is updated in
//! place, an existing `PREFIX-serving` Secret kept. Reads and writes
//! multi-document YAML, so it works as a Helm post-renderer (stdin to
//! stdout).

use regroup_config::{Direction, Settings};
use serde_json::{json, Map, Value as Json};

use crate::render::{to_yaml, RenderError};

mod container;
pub mod webhooks;
pub use container::{
    app_container_env, app_container_mounts, chart_template, pod_volumes, sidecar_container,
};

/// The kinds whose pod templates are wrapped by default.
pub const KINDS: &[&str] = &[
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "Job",
    "CronJob",
    "Pod",
];

const SA_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
const OVERRIDDEN_ENV: &[&str] = &[
    "KUBERNETES_SERVICE_HOST",
    "KUBERNETES_SERVICE_PORT",
    "KUBERNETES_SERVICE_PORT_HTTPS",
];

/// What to inject, and where.
#[derive(Debug, Clone)]
pub struct Options {
    /// regroup's image.
    pub image: String,
    /// Names of the ConfigMap (`PREFIX-config`) and Secret (`PREFIX-serving`).
    pub prefix: String,
    /// Kinds to wrap (default [`KINDS`]).
    pub kinds: Vec<String>,
    /// Only objects with these names (empty: all).
    pub names: Vec<String>,
    /// regroup's loopback TLS port (the app's `KUBERNETES_SERVICE_PORT`).
    pub tls_port: u16,
    /// regroup's loopback plain-HTTP port.
    pub http_port: u16,
    /// The metrics/health port (probes); `None`: no metrics listener, no probes.
    pub metrics_port: Option<u16>,
    /// regroup as a native sidecar (Kubernetes >= 1.29).
    pub native_sidecar: bool,
    /// An existing Secret (`tls.crt`, `tls.key`, `ca.crt`) for the loopback
    /// listener; `None`: `PREFIX-serving`, generated when not in the input.
    pub tls_secret: Option<String>,
    /// Refuse (instead of warning about) a container that reaches the
    /// cluster around regroup (`KUBECONFIG`, `--kubeconfig`, `--server`).
    pub strict: bool,
    /// Also wrap Helm test hooks (`helm.sh/hook: test`), left alone by
    /// default.
    pub helm_tests: bool,
    /// regroup's webhook listener's port, in a pod whose app serves
    /// webhooks ([`webhooks`]).
    pub webhook_port: u16,
    /// Leave webhooks that can't be wired through regroup alone (a warning
    /// each) instead of refusing.
    pub skip_unwired_webhooks: bool,
}

/// The annotation that opts a workload or pod template out, as `linkerd
/// inject`'s `linkerd.io/inject: disabled`.
pub const OPT_OUT: &str = "regroup.dev/inject";

impl Default for Options {
    fn default() -> Self {
        Options {
            image: crate::IMAGE.to_string(),
            prefix: "regroup".into(),
            kinds: KINDS.iter().map(|k| k.to_string()).collect(),
            names: Vec::new(),
            tls_port: 6443,
            http_port: 8001,
            metrics_port: Some(9090),
            native_sidecar: true,
            tls_secret: None,
            strict: false,
            helm_tests: false,
            webhook_port: 9444,
            skip_unwired_webhooks: false,
        }
    }
}

/// Why manifests could not be injected.
#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    /// The manifests could not be read, renamed or written back.
    #[error(transparent)]
    Render(#[from] RenderError),
    /// The configuration file is not YAML.
    #[error("reading the configuration: {0}")]
    ReadConfig(#[source] Box<serde_saphyr::Error>),
    /// The sidecar's configuration could not be written.
    #[error("writing the configuration: {0}")]
    WriteConfig(#[source] serde_saphyr::SerializeError),
    /// The sidecar's configuration, as written, does not load.
    #[error("the sidecar's configuration is not valid:\n{0}")]
    SidecarConfig(#[source] regroup_config::ConfigError),
    /// The loopback listener's certificate could not be made.
    #[error(transparent)]
    Tls(#[from] crate::net::tls::TlsError),
    /// Webhooks that can't go through regroup, without
    /// `--skip-unwired-webhooks`: why, for each.
    #[error(
        "webhooks that can't be sent through regroup (kube-apiserver would call the app \
         in the cluster's names):\n  {}\nwire them by hand (docs/deploy.md, \"the \
         app's webhooks\") or pass --skip-unwired-webhooks to leave them as they are",
        .0.join("\n  ")
    )]
    UnwiredWebhooks(Vec<String>),
    /// A pod spec without `containers`.
    #[error("the pod spec has no containers")]
    NoContainers,
    /// Containers of the pod declare ports regroup listens on.
    #[error(
        "port clash in the pod (its containers share one network): {}",
        PortClash::join(.0)
    )]
    PortClashes(Vec<PortClash>),
    /// A container that reaches the cluster around regroup, with `--strict`.
    #[error("{0}; refused with --strict")]
    Bypass(Bypass),
    /// A field that must be a mapping is something else.
    #[error("{0} is not a mapping")]
    NotMapping(String),
    /// A field that must be a list is something else.
    #[error("{0} is not a list")]
    NotList(&'static str),
    /// An object of a wrapped kind without its pod spec (the path).
    #[error("no {0} in it")]
    NoPodSpec(String),
    /// A webhook app's CA Secret is in another namespace than its pod's,
    /// where no volume can mount it.
    #[error(
        "its CA Secret {secret} is in namespace {namespace}, not the pod's ({pod_namespace}): \
         regroup can't mount it"
    )]
    CaSecretElsewhere {
        /// The Secret.
        secret: String,
        /// Its namespace.
        namespace: String,
        /// The pod's.
        pod_namespace: String,
    },
    /// Where in the input the error is: a document, an item of a list, an
    /// object.
    #[error("{at}: {source}")]
    At {
        /// `document N`, `items[I]` or `Kind name`.
        at: String,
        /// The error there.
        source: Box<InjectError>,
    },
}

impl InjectError {
    /// This error, found at `at`.
    fn at(self, at: impl Into<String>) -> Self {
        InjectError::At {
            at: at.into(),
            source: Box::new(self),
        }
    }
}

/// A port of regroup's that a container of the pod declares (they share
/// one network namespace).
#[derive(Debug)]
pub struct PortClash {
    /// The container.
    pub container: String,
    /// The port.
    pub port: u64,
    /// What regroup listens on it for.
    pub what: &'static str,
    /// The flag that moves regroup's listener (none for the plain-HTTP one).
    pub flag: &'static str,
}

impl PortClash {
    fn join(clashes: &[PortClash]) -> String {
        let each: Vec<String> = clashes.iter().map(PortClash::to_string).collect();
        each.join("; ")
    }
}

impl std::fmt::Display for PortClash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let PortClash {
            container,
            port,
            what,
            flag,
        } = self;
        write!(
            f,
            "container `{container}` declares containerPort {port}, which is regroup's {what}"
        )?;
        if !flag.is_empty() {
            write!(f, " (pass {flag} with a free port)")?;
        }
        Ok(())
    }
}

/// A container that may reach the cluster around regroup: a warning, or
/// refused with `--strict`.
#[derive(Debug)]
pub struct Bypass {
    /// The container.
    pub container: String,
    /// How: `sets KUBECONFIG`, or the flag it passes.
    pub how: String,
}

impl std::fmt::Display for Bypass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "container `{}` {}: it may talk to the API server directly, under the original \
             groups, bypassing regroup (remove it, or point it at regroup)",
            self.container, self.how
        )
    }
}

/// Renames `input` and wraps its pod templates; `config_text` is the
/// configuration file (its `rules`, `fields`, `names`, `metadata`, `logging`
/// and `limits` go into the sidecar's ConfigMap).
pub fn inject(
    input: &str,
    config_text: &str,
    settings: &Settings,
    opts: &Options,
) -> Result<String, InjectError> {
    inject_with_warnings(input, config_text, settings, opts).map(|(out, _)| out)
}

/// [`inject`], also returning the warnings for standard error (a
/// container that bypasses regroup, without `strict`).
pub fn inject_with_warnings(
    input: &str,
    config_text: &str,
    settings: &Settings,
    opts: &Options,
) -> Result<(String, Vec<String>), InjectError> {
    let mut warnings = Vec::new();
    let (renderer, derived) =
        crate::render::Renderer::for_manifests(settings, Direction::ToCluster, &[input])?;
    let mut docs = renderer.render_values(input)?;
    warnings.extend(crate::render::derived_lines(&derived));
    let config = sidecar_config(config_text, opts, &derived)?;
    let secret = container::serving_secret(opts);
    let mut namespaces: Vec<Option<String>> = Vec::new();
    let wrap = Wrap {
        opts,
        config_hash: format!("{:016x}", fnv1a(config.as_bytes())),
    };
    for (i, doc) in docs.iter_mut().enumerate() {
        wrap_object(doc, &wrap, &mut namespaces, &mut warnings)
            .map_err(|e| e.at(format!("document {}", i + 1)))?;
    }
    wire_webhooks(&mut docs, config_text, opts, &derived, &mut warnings)?;
    let config_name = format!("{}-config", opts.prefix);
    for ns in &namespaces {
        let cm = config_map(&config_name, ns.as_deref(), &config);
        match docs
            .iter_mut()
            .find(|d| is_named(d, "ConfigMap", &config_name, ns.as_deref()))
        {
            Some(existing) => *existing = cm,
            None => docs.push(cm),
        }
        if opts.tls_secret.is_none()
            && !docs
                .iter()
                .any(|d| is_named(d, "Secret", &secret, ns.as_deref()))
        {
            docs.push(serving_secret(&secret, ns.as_deref())?);
        }
    }
    Ok((to_yaml(&docs)?, warnings))
}

/// Sends the manifests' webhooks through regroup's webhook listener in the
/// pod that serves them ([`webhooks`]): a ConfigMap of that workload's own
/// (the namespace's configuration and a `webhooks:` section), its sidecar
/// mounting the app's certificate, its Service pointed at the listener.
fn wire_webhooks(
    docs: &mut Vec<Json>,
    config_text: &str,
    opts: &Options,
    derived: &crate::render::Derived,
    warnings: &mut Vec<String>,
) -> Result<(), InjectError> {
    let port = opts.webhook_port;
    let (wirings, mut refused) = webhooks::plan(docs, port);
    let mut wired = Vec::new();
    for w in wirings {
        let ns = w.namespace.clone().unwrap_or_default();
        let wrapped = docs.iter().any(|d| {
            d.get("kind").and_then(Json::as_str) == Some(w.kind.as_str())
                && d.pointer("/metadata/name").and_then(Json::as_str) == Some(w.name.as_str())
                && serde_json::to_string(d).is_ok_and(|t| t.contains("\"name\":\"regroup\""))
        });
        if !wrapped {
            refused.push(format!(
                "{} {ns}/{}: serves webhooks but is not wrapped (--kind, --name or {OPT_OUT})",
                w.kind, w.name
            ));
            continue;
        }
        wired.push(w);
    }
    if !refused.is_empty() {
        if !opts.skip_unwired_webhooks {
            return Err(InjectError::UnwiredWebhooks(refused));
        }
        for r in refused {
            warnings.push(format!(
                "webhook left calling the app directly: {r}; kube-apiserver sends it the \
                 cluster's group names, which the app does not know (a webhook that decodes \
                 its own kinds, as cert-manager's, then refuses every write of them)"
            ));
        }
    }
    for w in &wired {
        let ns = w.namespace.as_deref();
        let section = webhooks::config_section(w, port);
        let config = sidecar_config_with(config_text, opts, derived, Some(section))?;
        let name = format!("{}-config-{}", opts.prefix, w.name);
        webhooks::wire_pod(
            docs,
            w,
            port,
            &name,
            &format!("{:016x}", fnv1a(config.as_bytes())),
        );
        webhooks::retarget_service(docs, w, port);
        let cm = config_map(&name, ns, &config);
        match docs
            .iter_mut()
            .find(|d| is_named(d, "ConfigMap", &name, ns))
        {
            Some(existing) => *existing = cm,
            None => docs.push(cm),
        }
        warnings.push(format!(
            "webhooks of {} {}/{} ({}) go through regroup: Service {} port {} now targets \
             regroup's listener on {port}, which serves {} and forwards to 127.0.0.1:{}",
            w.kind,
            ns.unwrap_or(""),
            w.name,
            w.paths.join(", "),
            w.service,
            w.service_port,
            w.cert,
            w.app_port
        ));
    }
    Ok(())
}

/// The path of the pod spec in an object of `kind`, from the object.
fn pod_spec_path(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "Pod" => &["spec"],
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => {
            &["spec", "template", "spec"]
        }
        "CronJob" => &["spec", "jobTemplate", "spec", "template", "spec"],
        _ => return None,
    })
}

/// What every wrapped pod template gets.
struct Wrap<'a> {
    opts: &'a Options,
    /// Of the sidecar's config, as a pod-template annotation: the pods roll
    /// when the rules change.
    config_hash: String,
}

/// FNV-1a, 64 bits: a stable fingerprint (not a security measure).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn wrap_object(
    doc: &mut Json,
    wrap: &Wrap,
    namespaces: &mut Vec<Option<String>>,
    warnings: &mut Vec<String>,
) -> Result<(), InjectError> {
    let opts = wrap.opts;
    let kind = doc
        .get("kind")
        .and_then(Json::as_str)
        .unwrap_or_default()
        .to_string();
    if kind.ends_with("List") {
        if let Some(items) = doc.get_mut("items").and_then(Json::as_array_mut) {
            for (i, item) in items.iter_mut().enumerate() {
                wrap_object(item, wrap, namespaces, warnings)
                    .map_err(|e| e.at(format!("items[{i}]")))?;
            }
        }
        return Ok(());
    }
    if !opts.kinds.contains(&kind) {
        return Ok(());
    }
    let name = doc
        .pointer("/metadata/name")
        .and_then(Json::as_str)
        .unwrap_or_default()
        .to_string();
    if !opts.names.is_empty() && !opts.names.contains(&name) {
        return Ok(());
    }
    let Some(path) = pod_spec_path(&kind) else {
        return Ok(());
    };
    let annotation = |at: &[&str], key: &str| -> Option<String> {
        let mut v = &*doc;
        for k in at {
            v = v.get(*k)?;
        }
        v.get("metadata")?
            .get("annotations")?
            .get(key)?
            .as_str()
            .map(str::to_owned)
    };
    let template_at = &path[..path.len() - 1];
    if [&[][..], template_at]
        .iter()
        .any(|at| annotation(at, OPT_OUT).is_some_and(|v| v.trim() == "disabled"))
    {
        return Ok(());
    }
    if !opts.helm_tests
        && annotation(&[], "helm.sh/hook")
            .is_some_and(|h| h.split(',').any(|h| h.trim().starts_with("test")))
    {
        return Ok(());
    }
    let ns = doc
        .pointer("/metadata/namespace")
        .and_then(Json::as_str)
        .map(str::to_string);
    let at = format!("{kind} {name}");
    let wrapped = wrap_template(doc, path, wrap, &mut |w| {
        warnings.push(format!("{at}: {w}"))
    });
    wrapped.map_err(|e| e.at(at))?;
    if !namespaces.contains(&ns) {
        namespaces.push(ns);
    }
    Ok(())
}

/// Wraps the pod template at `path` (its spec's) in `doc` and marks it
/// with the config's hash.
fn wrap_template(
    doc: &mut Json,
    path: &[&str],
    wrap: &Wrap,
    warn: &mut dyn FnMut(String),
) -> Result<(), InjectError> {
    // the pod template's metadata: next to its spec
    let meta_path: Vec<&str> = path[..path.len() - 1]
        .iter()
        .copied()
        .chain(["metadata"])
        .collect();
    let mut spec = &mut *doc;
    for key in path {
        spec = spec
            .get_mut(*key)
            .ok_or_else(|| InjectError::NoPodSpec(path.join(".")))?;
    }
    let spec = spec
        .as_object_mut()
        .ok_or_else(|| InjectError::NotMapping(path.join(".")))?;
    if !wrap_pod_spec(spec, wrap.opts, warn)? {
        return Ok(());
    }
    let mut meta = &mut *doc;
    for key in &meta_path {
        meta = meta
            .as_object_mut()
            .ok_or_else(|| InjectError::NotMapping(key.to_string()))?
            .entry(key.to_string())
            .or_insert_with(|| json!({}));
    }
    let annotations = meta
        .as_object_mut()
        .ok_or_else(|| InjectError::NotMapping("metadata".into()))?
        .entry("annotations")
        .or_insert_with(|| json!({}));
    annotations
        .as_object_mut()
        .ok_or_else(|| InjectError::NotMapping("annotations".into()))?
        .insert("regroup.dev/config-hash".into(), json!(wrap.config_hash));
    Ok(())
}

fn has_regroup(spec: &Map<String, Json>) -> bool {
    ["containers", "initContainers"].iter().any(|k| {
        spec.get(*k)
            .and_then(Json::as_array)
            .is_some_and(|cs| cs.iter().any(|c| c.get("name") == Some(&json!("regroup"))))
    })
}

/// The ports regroup listens on in the pod, and what for.
fn regroup_ports(opts: &Options) -> Vec<(u16, &'static str, &'static str)> {
    let mut ports = vec![
        (opts.tls_port, "TLS listener", "--tls-port"),
        (opts.http_port, "plain-HTTP listener", ""),
    ];
    if let Some(m) = opts.metrics_port {
        ports.push((m, "metrics listener", "--metrics-port"));
    }
    ports
}

/// Every container and init container of the pod, by name.
fn all_containers(spec: &Map<String, Json>) -> Vec<(&str, &Map<String, Json>)> {
    ["initContainers", "containers"]
        .iter()
        .filter_map(|k| spec.get(*k).and_then(Json::as_array))
        .flatten()
        .filter_map(Json::as_object)
        .map(|c| (c.get("name").and_then(Json::as_str).unwrap_or("?"), c))
        .collect()
}

/// A port of regroup's that a container of the pod declares (they share
/// one network namespace): an error saying which and what to pass.
fn port_clashes(spec: &Map<String, Json>, opts: &Options) -> Result<(), InjectError> {
    let mut clashes = Vec::new();
    for (name, c) in all_containers(spec) {
        let ports = c
            .get("ports")
            .and_then(Json::as_array)
            .into_iter()
            .flatten();
        for port in ports.filter_map(|p| p.get("containerPort").and_then(Json::as_u64)) {
            for (ours, what, flag) in regroup_ports(opts) {
                if u64::from(ours) == port {
                    clashes.push(PortClash {
                        container: name.to_owned(),
                        port,
                        what,
                        flag,
                    });
                }
            }
        }
    }
    if clashes.is_empty() {
        Ok(())
    } else {
        Err(InjectError::PortClashes(clashes))
    }
}

/// What in a container reaches the cluster around regroup: a `KUBECONFIG`
/// of its own, `--kubeconfig`, `--server` (kubectl's and client-go's flags).
fn bypasses(c: &Map<String, Json>) -> Vec<String> {
    let mut found = Vec::new();
    let env = c.get("env").and_then(Json::as_array).into_iter().flatten();
    if env
        .filter_map(|e| e.get("name").and_then(Json::as_str))
        .any(|n| n == "KUBECONFIG")
    {
        found.push("sets KUBECONFIG".to_owned());
    }
    let words = ["command", "args"]
        .iter()
        .filter_map(|k| c.get(*k).and_then(Json::as_array))
        .flatten()
        .filter_map(Json::as_str);
    for w in words {
        for flag in ["--kubeconfig", "--server", "-kubeconfig", "-server"] {
            let hit = w
                .split_whitespace()
                .any(|t| t == flag || t.starts_with(&format!("{flag}=")));
            if hit && !found.iter().any(|f: &String| f.contains(flag)) {
                found.push(format!("passes `{flag}`"));
            }
        }
    }
    found
}

/// Wraps one pod spec; false when it was already wrapped.
fn wrap_pod_spec(
    spec: &mut Map<String, Json>,
    opts: &Options,
    warn: &mut dyn FnMut(String),
) -> Result<bool, InjectError> {
    if has_regroup(spec) {
        return Ok(false); // already wrapped
    }
    if spec.get("containers").and_then(Json::as_array).is_none() {
        return Err(InjectError::NoContainers);
    }
    port_clashes(spec, opts)?;
    for (name, c) in all_containers(spec) {
        for how in bypasses(c) {
            let bypass = Bypass {
                container: name.to_owned(),
                how,
            };
            if opts.strict {
                return Err(InjectError::Bypass(bypass));
            }
            warn(bypass.to_string());
        }
    }
    // The app's containers, and its init containers when regroup starts
    // before them (native sidecar).
    let mut app: Vec<&mut Json> = Vec::new();
    for (key, list) in spec.iter_mut() {
        if key == "containers" || (key == "initContainers" && opts.native_sidecar) {
            if let Some(list) = list.as_array_mut() {
                app.extend(list.iter_mut());
            }
        }
    }
    for c in app {
        let c = c
            .as_object_mut()
            .ok_or_else(|| InjectError::NotMapping("a container".into()))?;
        let mut env = app_container_env(opts);
        if let Some(Json::Array(old)) = c.remove("env") {
            env.extend(old.into_iter().filter(|e| {
                !e.get("name")
                    .and_then(Json::as_str)
                    .is_some_and(|n| OVERRIDDEN_ENV.contains(&n))
            }));
        }
        c.insert("env".into(), Json::Array(env));
        let mut mounts = app_container_mounts(opts);
        if let Some(Json::Array(old)) = c.remove("volumeMounts") {
            mounts.extend(
                old.into_iter()
                    .filter(|m| m.get("mountPath") != Some(&json!(SA_PATH))),
            );
        }
        c.insert("volumeMounts".into(), Json::Array(mounts));
    }
    let sidecar = sidecar_container(opts);
    if opts.native_sidecar {
        let init = spec
            .entry("initContainers")
            .or_insert_with(|| Json::Array(Vec::new()));
        init.as_array_mut()
            .ok_or(InjectError::NotList("initContainers"))?
            .insert(0, sidecar);
    } else {
        spec.get_mut("containers")
            .and_then(Json::as_array_mut)
            .expect("checked above")
            .push(sidecar);
    }
    spec.insert("automountServiceAccountToken".into(), json!(false));
    let volumes = spec
        .entry("volumes")
        .or_insert_with(|| Json::Array(Vec::new()))
        .as_array_mut()
        .ok_or(InjectError::NotList("volumes"))?;
    // The pod's own volumes of those names (an earlier injection's) go.
    let ours = pod_volumes(opts);
    let name = |v: &Json| v.get("name").cloned();
    volumes.retain(|v| !ours.iter().any(|o| name(o) == name(v)));
    for (i, v) in ours.into_iter().enumerate() {
        volumes.insert(i, v);
    }
    Ok(true)
}

/// regroup's configuration in the pod: the file's rules, fields, names,
/// metadata rules, logging and limits; the listeners and upstream of
/// in-cluster mode.
fn sidecar_config(
    config_text: &str,
    opts: &Options,
    derived: &crate::render::Derived,
) -> Result<String, InjectError> {
    sidecar_config_with(config_text, opts, derived, None)
}

/// [`sidecar_config`] with a `webhooks:` section.
fn sidecar_config_with(
    config_text: &str,
    opts: &Options,
    derived: &crate::render::Derived,
    webhooks: Option<Json>,
) -> Result<String, InjectError> {
    let shared = &derived.shared;
    let file: Json =
        serde_saphyr::from_str(config_text).map_err(|e| InjectError::ReadConfig(Box::new(e)))?;
    let mut out = Map::new();
    // Everything that decides what is renamed goes along: the sidecar must
    // rename exactly as the manifests were rendered.
    for key in ["rules", "profiles", "fields", "names", "metadata"] {
        if let Some(v) = file.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    // And the fields the CRDs' enums say hold a group: the objects the app
    // writes at run time are renamed as the manifests' were.
    if !derived.fields.is_empty() {
        let fields = out.entry("fields").or_insert_with(|| json!([]));
        if let Some(list) = fields.as_array_mut() {
            for f in &derived.fields {
                list.push(
                    json!({"group": f.group, "kind": f.kind, "path": f.path, "form": "group"}),
                );
            }
        }
    }
    // A prefix derived from the rules is pinned: the copy keeps the names
    // its objects are stored under when its rules (or regroup's
    // derivation) change later.
    if let Ok(settings) = regroup_config::load(config_text) {
        if let Some(n) = settings.map.object_names().filter(|n| n.is_derived()) {
            if let regroup_config::object_names::Affix::Prefix(p) = n.affix() {
                let names = out.entry("names").or_insert_with(|| json!({}));
                if names.is_null() {
                    *names = json!({});
                }
                names["prefix"] = json!(p);
            }
        }
    }
    // And the fixed names found in the shared namespaces: the Leases the
    // app takes there at run time get the mark their Role now names.
    if !shared.names.is_empty() {
        let names = out.entry("names").or_insert_with(|| json!({}));
        if names.is_null() {
            *names = json!({});
        }
        let namespaced = &mut names["namespaced"];
        if namespaced.is_null() {
            *namespaced = json!({"kinds": [], "names": []});
        }
        for (key, add) in [
            (
                "kinds",
                shared
                    .kinds
                    .iter()
                    .map(|k| k.to_string())
                    .collect::<Vec<_>>(),
            ),
            ("names", shared.names.clone()),
        ] {
            let list = &mut namespaced[key];
            if !list.is_array() {
                *list = json!([]);
            }
            let list = list.as_array_mut().expect("made an array");
            for v in add {
                if !list.iter().any(|x| x.as_str() == Some(v.as_str())) {
                    list.push(Json::String(v));
                }
            }
        }
    }
    let mut listeners = Map::new();
    listeners.insert(
        "http".into(),
        json!(format!("127.0.0.1:{}", opts.http_port)),
    );
    listeners.insert(
        "tls".into(),
        json!({"listen": format!("127.0.0.1:{}", opts.tls_port),
               "certFile": "/etc/regroup/serving/tls.crt",
               "keyFile": "/etc/regroup/serving/tls.key"}),
    );
    if let Some(p) = opts.metrics_port {
        listeners.insert("metrics".into(), json!(format!("0.0.0.0:{p}")));
    }
    out.insert("listeners".into(), Json::Object(listeners));
    out.insert("upstream".into(), json!({"inCluster": true}));
    out.insert("credentials".into(), json!({"passThrough": true}));
    let mut logging = json!({"level": "info", "format": "json"});
    if let Some(Json::Object(l)) = file.get("logging") {
        for (k, v) in l {
            logging[k] = v.clone();
        }
    }
    out.insert("logging".into(), logging);
    let mut limits = json!({"shutdownGracePeriod": "25s"});
    if let Some(Json::Object(l)) = file.get("limits") {
        for (k, v) in l {
            limits[k] = v.clone();
        }
    }
    out.insert("limits".into(), limits);
    if let Some(w) = webhooks {
        out.insert("webhooks".into(), w);
    }
    let text = serde_saphyr::to_string(&Json::Object(out)).map_err(InjectError::WriteConfig)?;
    regroup_config::load(&text).map_err(InjectError::SidecarConfig)?;
    Ok(text)
}

fn metadata(name: &str, ns: Option<&str>) -> Json {
    let mut m = json!({"name": name, "labels": {"app.kubernetes.io/managed-by": "regroup-inject"}});
    if let Some(ns) = ns {
        m["namespace"] = json!(ns);
    }
    m
}

fn config_map(name: &str, ns: Option<&str>, config: &str) -> Json {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata(name, ns),
           "data": {"config.yaml": config}})
}

fn serving_secret(name: &str, ns: Option<&str>) -> Result<Json, InjectError> {
    use base64::Engine as _;
    let id = crate::net::tls::generate()?;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    Ok(
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": metadata(name, ns), "type": "Opaque",
              "data": {"ca.crt": b64(id.ca_pem.as_deref().unwrap_or_default()),
                       "tls.crt": b64(&id.cert_pem), "tls.key": b64(&id.key_pem)}}),
    )
}

fn is_named(doc: &Json, kind: &str, name: &str, ns: Option<&str>) -> bool {
    doc.get("kind") == Some(&json!(kind))
        && doc.pointer("/metadata/name") == Some(&json!(name))
        && doc.pointer("/metadata/namespace").and_then(Json::as_str) == ns
}
