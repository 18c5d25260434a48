//! `regroup publish-manifests`: everything publish mode needs installed,
//! in the central cluster (a namespace, a ServiceAccount with a token and
//! rights in the target namespace) and in the remote one (regroup's
//! Deployment, RBAC, configuration, serving certificate, Service and one
//! APIService per published group-version, in the remote names), printed
//! as YAML in two sections.

use std::sync::Arc;

use base64::Engine as _;
use regroup_config::{Direction, Settings};
use serde_json::{json, Map, Value as Json};

use crate::upstream::from_settings::{resolve_section, Target};
use crate::upstream::own_client::OwnClient;
use crate::upstream::Upstream;

/// The first line of the central cluster's section.
pub const CENTRAL_HEADER: &str = "# ---- central cluster ----";
/// The first line of the remote cluster's section.
pub const REMOTE_HEADER: &str = "# ---- remote cluster ----";

/// Where the Deployment mounts its volumes; the generated configuration
/// names files under them.
const CONFIG_DIR: &str = "/etc/regroup/config";
const CENTRAL_DIR: &str = "/etc/regroup/central";
const FRONT_DIR: &str = "/etc/regroup/front";
const FRONT_PORT: u16 = 9443;
const METRICS_PORT: u16 = 9090;

/// Every verb on the published groups: the central apiserver, not regroup,
/// decides what a remote caller's request may do there.
const ALL_VERBS: [&str; 8] = [
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];
const READ_VERBS: [&str; 3] = ["get", "list", "watch"];

/// The command line's choices.
#[derive(Clone, Debug)]
pub struct Options {
    /// The name of regroup's objects (ServiceAccounts, Deployment, Service).
    pub name: String,
    /// The remote namespace regroup runs in (and, without
    /// `targetNamespace`, the central ServiceAccount's).
    pub namespace: String,
    /// regroup's image.
    pub image: String,
    /// `GROUP/VERSION`s to publish, central names; empty: ask the central
    /// cluster.
    pub versions: Vec<String>,
    /// Central target namespaces that get a credential of their own.
    pub credential_namespaces: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            name: "regroup-publish".into(),
            namespace: "regroup".into(),
            // The image `regroup inject` uses: the one this binary ships in.
            image: crate::IMAGE.to_string(),
            versions: Vec::new(),
            credential_namespaces: Vec::new(),
        }
    }
}

/// Why no manifests were printed.
#[derive(Debug, thiserror::Error)]
pub enum ManifestsError {
    /// The configuration or the command line is wrong.
    #[error("{0}")]
    Config(String),
    /// The central cluster could not say which versions it serves.
    #[error("{0}")]
    Central(String),
}

impl ManifestsError {
    /// The process's exit code: 2 when the central cluster could not be
    /// asked, as `migrate` exits when it cannot reach its cluster.
    pub fn exit_code(&self) -> u8 {
        match self {
            ManifestsError::Config(_) => 1,
            ManifestsError::Central(_) => 2,
        }
    }
}

/// One published group (central name) and the versions it is served in.
#[derive(Clone, Debug, PartialEq, Eq)]
struct GroupVersions {
    group: String,
    versions: Vec<String>,
    /// Its cluster-scoped resources (read-only when published), from the
    /// central cluster's discovery; unknown (empty) with `--versions`.
    cluster_scoped: Vec<String>,
}

/// The manifests for the configuration `config_text`: the versions from
/// `opts.versions`, else from the central cluster (`publish.central`).
pub fn generate(config_text: &str, opts: &Options) -> Result<String, ManifestsError> {
    check_names(opts)?;
    let settings =
        regroup_config::load(config_text).map_err(|e| ManifestsError::Config(e.to_string()))?;
    let publish = settings.file.publish.as_ref().ok_or_else(|| {
        ManifestsError::Config(
            "the configuration has no `publish:` section: publish-manifests is for publish mode (docs/publish.md)".into(),
        )
    })?;
    let versions = if opts.versions.is_empty() {
        versions_from_central(&settings)?
    } else {
        versions_given(&opts.versions, &publish.groups)?
    };
    build(config_text, &settings, opts, &versions)
}

/// Service and namespace names as Kubernetes takes them.
fn check_names(opts: &Options) -> Result<(), ManifestsError> {
    let label = |s: &str, first_letter: bool| {
        !s.is_empty()
            && s.len() <= 63
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !s.ends_with('-')
            && if first_letter {
                s.as_bytes()[0].is_ascii_lowercase()
            } else {
                !s.starts_with('-')
            }
    };
    if !label(&opts.name, true) {
        return Err(ManifestsError::Config(format!(
            "--name `{}`: must be a Service name (lower-case letters, digits, `-`; a letter first; 63 at most)",
            opts.name
        )));
    }
    if !label(&opts.namespace, false) {
        return Err(ManifestsError::Config(format!(
            "--namespace `{}`: must be a namespace name (lower-case letters, digits, `-`; 63 at most)",
            opts.namespace
        )));
    }
    Ok(())
}

/// `--versions`: every entry of a published group, every published group
/// with a version (an APIService per version, or the group is not served).
fn versions_given(
    list: &[String],
    groups: &[String],
) -> Result<Vec<GroupVersions>, ManifestsError> {
    let mut out: Vec<GroupVersions> = groups
        .iter()
        .map(|g| GroupVersions {
            group: g.clone(),
            versions: Vec::new(),
            cluster_scoped: Vec::new(),
        })
        .collect();
    for entry in list {
        let (group, version) = entry
            .split_once('/')
            .filter(|(g, v)| !g.is_empty() && !v.is_empty() && !v.contains('/'))
            .ok_or_else(|| {
                ManifestsError::Config(format!("--versions: `{entry}` is not GROUP/VERSION"))
            })?;
        let gv = out.iter_mut().find(|gv| gv.group == group).ok_or_else(|| {
            ManifestsError::Config(format!(
                "--versions: `{group}` is not in publish.groups ({}; central names)",
                groups.join(", ")
            ))
        })?;
        if !gv.versions.iter().any(|v| v == version) {
            gv.versions.push(version.to_owned());
        }
    }
    if let Some(gv) = out.iter().find(|gv| gv.versions.is_empty()) {
        return Err(ManifestsError::Config(format!(
            "--versions: no version of published group `{}` (give one, e.g. {}/v1)",
            gv.group, gv.group
        )));
    }
    Ok(out)
}

/// Each published group's versions, as the central cluster's discovery
/// (`/apis/{group}`) lists them, preferred first.
fn versions_from_central(settings: &Settings) -> Result<Vec<GroupVersions>, ManifestsError> {
    let hint = "; give the versions with --versions GROUP/VERSION,... instead";
    let fail = |e: &dyn std::fmt::Display| ManifestsError::Central(format!("{e}{hint}"));
    let upstream = Upstream::central(settings)
        .expect("generate checked `publish:`")
        .map_err(|e| fail(&e))?;
    let server = upstream.describe().to_owned();
    let groups = settings
        .file
        .publish
        .as_ref()
        .expect("checked")
        .groups
        .clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ManifestsError::Config(format!("starting the runtime: {e}")))?;
    let client = OwnClient::new(Arc::new(upstream));
    runtime
        .block_on(async {
            let mut out = Vec::new();
            for group in groups {
                let doc = client.get_json(&format!("/apis/{group}")).await?;
                let mut gv = discovered_versions(&group, &doc)?;
                for v in &gv.versions {
                    let list = client.get_json(&format!("/apis/{group}/{v}")).await?;
                    for r in cluster_scoped(&list) {
                        if !gv.cluster_scoped.contains(&r) {
                            gv.cluster_scoped.push(r);
                        }
                    }
                }
                out.push(gv);
            }
            Ok(out)
        })
        .map_err(|e: DiscoveryError| fail(&format!("central cluster {server}: {e}")))
}

/// Why the central cluster's discovery did not say which versions a group
/// is served in.
#[derive(Debug, thiserror::Error)]
enum DiscoveryError {
    /// The discovery request failed.
    #[error(transparent)]
    Client(#[from] crate::upstream::own_client::OwnClientError),
    /// The group lists no version.
    #[error("/apis/{0} lists no version")]
    NoVersion(String),
}

/// The versions of an `APIGroup` discovery document.
fn discovered_versions(group: &str, doc: &Json) -> Result<GroupVersions, DiscoveryError> {
    let versions: Vec<String> = doc["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["version"].as_str().map(str::to_owned))
        .collect();
    if versions.is_empty() {
        return Err(DiscoveryError::NoVersion(group.to_owned()));
    }
    Ok(GroupVersions {
        group: group.to_owned(),
        versions,
        cluster_scoped: Vec::new(),
    })
}

/// The cluster-scoped resources (not subresources) of an `APIResourceList`.
fn cluster_scoped(list: &Json) -> Vec<String> {
    list["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["namespaced"] == false)
        .filter_map(|r| r["name"].as_str())
        .filter(|n| !n.contains('/'))
        .map(str::to_owned)
        .collect()
}

/// A part of the output: comment lines, or a document.
enum Part {
    Comment(String),
    Doc(Json),
}

fn comment(text: &str) -> Part {
    Part::Comment(
        text.lines()
            .map(|l| format!("# {l}").trim_end().to_owned() + "\n")
            .collect(),
    )
}

/// Everything, once the versions are known.
fn build(
    config_text: &str,
    settings: &Settings,
    opts: &Options,
    versions: &[GroupVersions],
) -> Result<String, ManifestsError> {
    let publish = settings.file.publish.as_ref().expect("checked");
    let mut parts = vec![Part::Comment(format!("{CENTRAL_HEADER}\n"))];
    parts.extend(central(publish, opts));
    parts.extend(central_cluster_reads(publish, opts, versions));
    parts.push(Part::Comment(format!("{REMOTE_HEADER}\n")));
    parts.extend(remote(config_text, settings, opts, versions)?);
    to_text(&parts)
}

/// Documents separated by `---`, each after its comments: a separator
/// before a comment too, so the comment starts the document it explains.
fn to_text(parts: &[Part]) -> Result<String, ManifestsError> {
    let mut out = String::new();
    let mut after_doc = false;
    for p in parts {
        if after_doc {
            out.push_str("---\n");
        }
        match p {
            Part::Comment(c) => {
                out.push_str(c);
                after_doc = false;
            }
            Part::Doc(d) => {
                let yaml = serde_saphyr::to_string(d)
                    .map_err(|e| ManifestsError::Config(format!("writing YAML: {e}")))?;
                out.push_str(&yaml);
                after_doc = true;
            }
        }
    }
    Ok(out)
}

fn labels(opts: &Options) -> Json {
    json!({"app.kubernetes.io/name": "regroup", "app.kubernetes.io/instance": opts.name})
}

fn meta(name: &str, ns: Option<&str>, opts: &Options) -> Json {
    let mut m = json!({"name": name});
    if let Some(ns) = ns {
        m["namespace"] = json!(ns);
    }
    m["labels"] = labels(opts);
    m
}

fn object(api_version: &str, kind: &str, metadata: Json) -> Json {
    json!({"apiVersion": api_version, "kind": kind, "metadata": metadata})
}

fn namespace(name: &str, opts: &Options) -> Json {
    object("v1", "Namespace", meta(name, None, opts))
}

fn service_account(ns: &str, opts: &Options) -> Json {
    object("v1", "ServiceAccount", meta(&opts.name, Some(ns), opts))
}

fn sa_subject(ns: &str, opts: &Options) -> Json {
    json!([{"kind": "ServiceAccount", "name": opts.name, "namespace": ns}])
}

fn binding(kind: &str, metadata: Json, role_kind: &str, role: &str, subjects: Json) -> Json {
    let mut b = object("rbac.authorization.k8s.io/v1", kind, metadata);
    b["roleRef"] =
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role});
    b["subjects"] = subjects;
    b
}

// ---- central cluster ----

/// The central ServiceAccount, its token, and its rights in the target
/// namespace.
fn central(publish: &regroup_config::schema::Publish, opts: &Options) -> Vec<Part> {
    // The ServiceAccount lives in the target namespace; with only
    // `matchNamespaces` there is none, so it gets regroup's namespace.
    let home = publish
        .target_namespace
        .as_deref()
        .unwrap_or(&opts.namespace);
    let token = format!("{}-token", opts.name);
    let mut parts = vec![
        comment("Apply with kubectl's context on the central cluster."),
        Part::Doc(namespace(home, opts)),
        Part::Doc(service_account(home, opts)),
        comment(&kubeconfig_howto(publish, home, &token, opts)),
        Part::Doc(token_secret(home, &token, opts)),
    ];
    if publish.match_namespaces {
        parts.push(comment(&format!(
            "matchNamespaces: each remote namespace's objects go to the central namespace of the\n\
             same name, as do those of a remote Namespace annotated\n\
             regroup.dev/publish-target-namespace: each such central namespace needs this Role and\n\
             RoleBinding (namespace: set to it; the subject stays {}/{}):\n\n{}",
            home,
            opts.name,
            role_and_binding_text("NAMESPACE", home, &publish.groups, opts)
        )));
    }
    if let Some(target) = &publish.target_namespace {
        parts.push(Part::Doc(central_role(target, &publish.groups, opts)));
        parts.push(Part::Doc(central_binding(target, home, opts)));
    }
    for ns in &opts.credential_namespaces {
        parts.extend(namespace_credential(ns, &publish.groups, opts));
    }
    parts
}

/// A central namespace's own credential: a ServiceAccount there, its token,
/// and rights in that namespace only; then how a remote namespace holds it
/// (docs/publish.md, "Credentials per namespace").
fn namespace_credential(ns: &str, groups: &[String], opts: &Options) -> Vec<Part> {
    let token = format!("{}-token", opts.name);
    let secret = format!("{}-{ns}", opts.name);
    vec![
        comment(&format!("The credential of central namespace {ns}: its requests act as {ns}/{}.", opts.name)),
        Part::Doc(namespace(ns, opts)),
        Part::Doc(service_account(ns, opts)),
        Part::Doc(token_secret(ns, &token, opts)),
        Part::Doc(central_role(ns, groups, opts)),
        Part::Doc(central_binding(ns, ns, opts)),
        comment(&format!(
            "In the remote cluster, for each remote namespace REMOTE that goes to {ns}:\n\n  \
             kubectl --context central -n {ns} get secret {token} -o jsonpath='{{.data.token}}' | base64 -d > token\n  \
             kubectl -n REMOTE create secret generic {secret} --from-file=token\n  \
             kubectl annotate namespace REMOTE regroup.dev/publish-target-namespace={ns} regroup.dev/publish-credentials-secret={secret}"
        )),
    ]
}

/// Reading the published groups' cluster-scoped resources (the central
/// cluster's own, read-only through the front: Crossplane's Compositions
/// and definitions), as the seed's `read-for-agents` ClusterRole grants.
fn central_cluster_reads(
    publish: &regroup_config::schema::Publish,
    opts: &Options,
    versions: &[GroupVersions],
) -> Vec<Part> {
    let rules: Vec<Json> = versions
        .iter()
        .filter(|gv| !gv.cluster_scoped.is_empty())
        .map(|gv| json!({"apiGroups": [gv.group], "resources": gv.cluster_scoped, "verbs": ["get", "list", "watch"]}))
        .collect();
    // None published (or --versions given, the central cluster not asked):
    // nothing cluster-wide to read.
    if rules.is_empty() {
        return Vec::new();
    }
    let home = publish
        .target_namespace
        .as_deref()
        .unwrap_or(&opts.namespace);
    let name = format!("{}-read-cluster-scoped", opts.name);
    let mut role = object(
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        meta(&name, None, opts),
    );
    role["rules"] = Json::Array(rules);
    vec![
        comment("The published groups' cluster-scoped resources, read-only through the front."),
        Part::Doc(role),
        Part::Doc(binding(
            "ClusterRoleBinding",
            meta(&name, None, opts),
            "ClusterRole",
            &name,
            sa_subject(home, opts),
        )),
    ]
}

/// The commands that turn the token Secret into the remote cluster's
/// `central.kubeconfig`.
fn kubeconfig_howto(
    publish: &regroup_config::schema::Publish,
    home: &str,
    token: &str,
    opts: &Options,
) -> String {
    // The server publish.central names, when its kubeconfig is readable
    // here; it must be the address the remote cluster's pods reach.
    let server = resolve_section(&publish.central, &Target::default())
        .map(|r| r.server)
        .unwrap_or_else(|_| "https://CENTRAL-APISERVER:6443".into());
    let get = |key: &str| {
        format!("kubectl -n {home} get secret {token} -o jsonpath='{{.data.{key}}}' | base64 -d")
    };
    let name = &opts.name;
    let config = "kubectl config --kubeconfig=central.kubeconfig";
    [
        "The token Secret below holds the ServiceAccount's token and the central CA. Once it is"
            .to_owned(),
        "filled in, make the remote cluster's central.kubeconfig from it (the server: the central"
            .into(),
        "apiserver as pods of the remote cluster reach it):".into(),
        String::new(),
        format!("  {} > central-ca.crt", get("ca\\.crt")),
        format!("  {config} set-cluster central --server={server} --certificate-authority=central-ca.crt --embed-certs"),
        format!("  {config} set-credentials {name} --token=\"$({})\"", get("token")),
        format!("  {config} set-context central --cluster=central --user={name} --namespace={home}"),
        format!("  {config} use-context central"),
    ]
    .join("\n")
}

/// A long-lived token: regroup in another cluster cannot ask for
/// projected ones.
fn token_secret(ns: &str, token: &str, opts: &Options) -> Json {
    let mut m = meta(token, Some(ns), opts);
    m["annotations"] = json!({"kubernetes.io/service-account.name": opts.name});
    let mut s = object("v1", "Secret", m);
    s["type"] = json!("kubernetes.io/service-account-token");
    s
}

fn central_role(ns: &str, groups: &[String], opts: &Options) -> Json {
    let mut role = object(
        "rbac.authorization.k8s.io/v1",
        "Role",
        meta(&opts.name, Some(ns), opts),
    );
    let mut rules: Vec<Json> = groups
        .iter()
        .map(|g| json!({"apiGroups": [g], "resources": ["*"], "verbs": ALL_VERBS}))
        .collect();
    // The connection Secrets regroup copies to the remote namespaces.
    rules.push(json!({"apiGroups": [""], "resources": ["secrets"], "verbs": READ_VERBS}));
    role["rules"] = Json::Array(rules);
    role
}

fn central_binding(ns: &str, home: &str, opts: &Options) -> Json {
    binding(
        "RoleBinding",
        meta(&opts.name, Some(ns), opts),
        "Role",
        &opts.name,
        sa_subject(home, opts),
    )
}

/// The Role and RoleBinding for namespace `ns`, as YAML (for a comment).
fn role_and_binding_text(ns: &str, home: &str, groups: &[String], opts: &Options) -> String {
    let docs = [
        central_role(ns, groups, opts),
        central_binding(ns, home, opts),
    ];
    serde_saphyr::to_string_multiple(&docs).expect("JSON values serialise")
}

// ---- remote cluster ----

/// regroup in the remote cluster, and the APIServices that send the
/// published groups to it.
fn remote(
    config_text: &str,
    settings: &Settings,
    opts: &Options,
    versions: &[GroupVersions],
) -> Result<Vec<Part>, ManifestsError> {
    let ns = opts.namespace.as_str();
    let dns = format!("{}.{ns}.svc", opts.name);
    let id =
        crate::net::tls::generate_for(&format!("regroup publish front CA ({dns})"), &[dns], false)
            .map_err(|e| ManifestsError::Config(e.to_string()))?;
    let ca_pem = id.ca_pem.clone().expect("generate_for makes a CA");
    let mut parts = vec![
        comment("Apply with kubectl's context on the remote cluster."),
        Part::Doc(namespace(ns, opts)),
        Part::Doc(service_account(ns, opts)),
    ];
    parts.extend(remote_rbac(opts).into_iter().map(Part::Doc));
    parts.push(comment(&format!(
        "The central cluster's kubeconfig (made as the central section says), before the Deployment\n\
         can start:\n\n  kubectl create secret generic {}-central --from-file=kubeconfig=central.kubeconfig -n {ns}\n\n\
         The Secret below is generated by this command: running it again makes a new CA, so apply\n\
         this Secret and the APIServices together.",
        opts.name
    )));
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let mut tls = object(
        "v1",
        "Secret",
        meta(&format!("{}-front-tls", opts.name), Some(ns), opts),
    );
    tls["type"] = json!("kubernetes.io/tls");
    tls["data"] =
        json!({"tls.crt": b64(&id.cert_pem), "tls.key": b64(&id.key_pem), "ca.crt": b64(&ca_pem)});
    parts.push(Part::Doc(tls));
    let mut cm = object(
        "v1",
        "ConfigMap",
        meta(&format!("{}-config", opts.name), Some(ns), opts),
    );
    cm["data"] = json!({"config.yaml": remote_config(config_text)?});
    parts.push(Part::Doc(cm));
    parts.push(Part::Doc(deployment(opts)));
    parts.push(Part::Doc(service(opts)));
    for gv in versions {
        let remote_group = settings
            .map
            .map_group(&gv.group, Direction::ToCluster)
            .unwrap_or_else(|| gv.group.clone());
        for v in &gv.versions {
            parts.push(Part::Doc(api_service(
                &remote_group,
                v,
                &b64(&ca_pem),
                opts,
            )));
        }
    }
    Ok(parts)
}

/// The front's rights in the remote cluster: access reviews, the
/// request-header CA, Namespaces (targets, cluster id) and Secrets
/// (connection Secrets, in any namespace).
fn remote_rbac(opts: &Options) -> Vec<Json> {
    let ns = opts.namespace.as_str();
    let name = opts.name.as_str();
    let mut role = object(
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        meta(name, None, opts),
    );
    role["rules"] = json!([
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": READ_VERBS},
        {"apiGroups": [""], "resources": ["secrets"],
         "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
    ]);
    // The Lease its replicas elect the Secret copier with (lease.rs).
    let mut lease_role = object(
        "rbac.authorization.k8s.io/v1",
        "Role",
        meta(&format!("{name}-lease"), Some(ns), opts),
    );
    lease_role["rules"] = json!([
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
         "verbs": ["get", "create", "update"]},
    ]);
    vec![
        binding(
            "ClusterRoleBinding",
            meta(&format!("{name}:system:auth-delegator"), None, opts),
            "ClusterRole",
            "system:auth-delegator",
            sa_subject(ns, opts),
        ),
        binding(
            "RoleBinding",
            meta(
                &format!("{name}:extension-apiserver-authentication-reader"),
                Some("kube-system"),
                opts,
            ),
            "Role",
            "extension-apiserver-authentication-reader",
            sa_subject(ns, opts),
        ),
        role,
        binding(
            "ClusterRoleBinding",
            meta(name, None, opts),
            "ClusterRole",
            name,
            sa_subject(ns, opts),
        ),
        lease_role,
        binding(
            "RoleBinding",
            meta(&format!("{name}-lease"), Some(ns), opts),
            "Role",
            &format!("{name}-lease"),
            sa_subject(ns, opts),
        ),
    ]
}

/// regroup's configuration in the pod, from the file's values as written
/// (the typed settings cannot be written back; editing the text would need
/// a YAML editor): its `publish:` and everything that decides renaming go
/// along unchanged; what names this machine (upstream, the front's files,
/// listeners, `publish.central`'s kubeconfig and context) is replaced by
/// the pod's. The file's comments do not survive.
fn remote_config(config_text: &str) -> Result<String, ManifestsError> {
    let file: Json = serde_saphyr::from_str(config_text)
        .map_err(|e| ManifestsError::Config(format!("reading the configuration: {e}")))?;
    let mut out = Map::new();
    out.insert("upstream".into(), json!({"inCluster": true}));
    out.insert(
        "front".into(),
        json!({
            "listen": format!("0.0.0.0:{FRONT_PORT}"),
            "certFile": format!("{FRONT_DIR}/tls.crt"),
            "keyFile": format!("{FRONT_DIR}/tls.key"),
            "caFile": format!("{FRONT_DIR}/ca.crt"),
            "requestHeader": {"fromCluster": true},
        }),
    );
    out.insert(
        "listeners".into(),
        json!({"metrics": format!("0.0.0.0:{METRICS_PORT}")}),
    );
    let mut publish = file["publish"].clone();
    let mut central = json!({"kubeconfig": format!("{CENTRAL_DIR}/kubeconfig")});
    // The protocol is the central apiserver's, wherever regroup runs.
    if let Some(h) = file["publish"]["central"].get("http2") {
        central["http2"] = h.clone();
    }
    publish["central"] = central;
    out.insert("publish".into(), publish);
    for key in [
        "rules", "profiles", "fields", "names", "metadata", "logging", "limits",
    ] {
        if let Some(v) = file.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    let text = serde_saphyr::to_string(&Json::Object(out))
        .map_err(|e| ManifestsError::Config(format!("writing the configuration: {e}")))?;
    regroup_config::load(&text).map_err(|e| {
        ManifestsError::Config(format!("the pod's configuration is not valid:\n{e}"))
    })?;
    Ok(text)
}

fn volume(name: &str, source: Json) -> Json {
    let mut v = json!({"name": name});
    if let (Some(v), Json::Object(source)) = (v.as_object_mut(), source) {
        v.extend(source);
    }
    v
}

fn mount(name: &str, path: &str) -> Json {
    json!({"name": name, "mountPath": path, "readOnly": true})
}

fn deployment(opts: &Options) -> Json {
    let ns = opts.namespace.as_str();
    let probe = |path: &str| json!({"httpGet": {"path": path, "port": "metrics"}});
    let container = json!({
        "name": "regroup",
        "image": opts.image,
        "args": ["serve", "-c", format!("{CONFIG_DIR}/config.yaml")],
        "ports": [
            {"name": "https", "containerPort": FRONT_PORT},
            {"name": "metrics", "containerPort": METRICS_PORT},
        ],
        "readinessProbe": probe("/readyz"),
        "livenessProbe": probe("/livez"),
        "securityContext": {
            "runAsNonRoot": true,
            "readOnlyRootFilesystem": true,
            "allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            mount("config", CONFIG_DIR),
            mount("central", CENTRAL_DIR),
            mount("front-tls", FRONT_DIR),
            // The root is read-only: a large protobuf list spills here.
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    });
    let mut d = object("apps/v1", "Deployment", meta(&opts.name, Some(ns), opts));
    d["spec"] = json!({
        "replicas": 1,
        "selector": {"matchLabels": labels(opts)},
        "template": {
            "metadata": {"labels": labels(opts)},
            "spec": {
                "serviceAccountName": opts.name,
                "containers": [container],
                "volumes": [
                    volume("config", json!({"configMap": {"name": format!("{}-config", opts.name)}})),
                    volume("central", json!({"secret": {"secretName": format!("{}-central", opts.name)}})),
                    volume("front-tls", json!({"secret": {"secretName": format!("{}-front-tls", opts.name)}})),
                    volume("tmp", json!({"emptyDir": {}})),
                ],
            },
        },
    });
    d
}

fn service(opts: &Options) -> Json {
    let mut s = object(
        "v1",
        "Service",
        meta(&opts.name, Some(&opts.namespace), opts),
    );
    s["spec"] = json!({
        "selector": labels(opts),
        "ports": [{"name": "https", "port": 443, "targetPort": "https"}],
    });
    s
}

/// The remote apiserver's aggregator sends `group/version` to regroup.
fn api_service(group: &str, version: &str, ca_b64: &str, opts: &Options) -> Json {
    let mut a = object(
        "apiregistration.k8s.io/v1",
        "APIService",
        meta(&format!("{version}.{group}"), None, opts),
    );
    a["spec"] = json!({
        "group": group,
        "version": version,
        "service": {"namespace": opts.namespace, "name": opts.name, "port": 443},
        "caBundle": ca_b64,
        "groupPriorityMinimum": 1000,
        "versionPriority": 15,
    });
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::client::danger::ServerCertVerifier as _;
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

    const CONFIG: &str = "\
upstream: {inCluster: true}
front:
  listen: 0.0.0.0:9443
  generatedDnsNames: [regroup-publish.regroup.svc]
  requestHeader: {fromCluster: true}
publish:
  central:
    kubeconfig: /nonexistent/central.kubeconfig
    context: platform
  groups: [database.acmeco.org, network.acmeco.org]
  targetNamespace: bar
  connectionSecrets:
    resyncSeconds: 30
rules:
  - {from: database.acmeco.org, to: database.team1.example.com}
logging: {level: debug}
";

    fn opts(versions: &[&str]) -> Options {
        Options {
            versions: versions.iter().map(|v| v.to_string()).collect(),
            ..Options::default()
        }
    }

    fn versions() -> Options {
        opts(&[
            "database.acmeco.org/v1alpha1",
            "database.acmeco.org/v1",
            "network.acmeco.org/v1",
        ])
    }

    /// The output's two sections, each parsed.
    fn sections(out: &str) -> (Vec<Json>, Vec<Json>) {
        let (central, remote) = out
            .split_once(&format!("\n{REMOTE_HEADER}\n"))
            .expect("remote header");
        let parse = |t: &str| -> Vec<Json> {
            serde_saphyr::from_multiple::<Json>(t)
                .expect("valid YAML")
                .into_iter()
                .filter(|d| !d.is_null())
                .collect()
        };
        (parse(central), parse(remote))
    }

    fn ids(docs: &[Json]) -> Vec<String> {
        docs.iter()
            .map(|d| {
                let ns = d["metadata"]["namespace"]
                    .as_str()
                    .map(|n| format!("{n}/"))
                    .unwrap_or_default();
                format!(
                    "{} {ns}{}",
                    d["kind"].as_str().unwrap(),
                    d["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect()
    }

    fn find<'a>(docs: &'a [Json], kind: &str, name: &str) -> &'a Json {
        docs.iter()
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
    }

    fn decode(b64: &Json) -> String {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().unwrap())
            .unwrap();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn a_namespace_of_its_own_credential_gets_its_account_token_and_role() {
        let mut opts = versions();
        opts.credential_namespaces = vec!["team-a".into()];
        let out = generate(CONFIG, &opts).unwrap();
        let (central, remote) = sections(&out);
        let ids = ids(&central);
        for want in [
            "Namespace team-a",
            "ServiceAccount team-a/regroup-publish",
            "Secret team-a/regroup-publish-token",
            "Role team-a/regroup-publish",
            "RoleBinding team-a/regroup-publish",
        ] {
            assert!(ids.iter().any(|i| i == want), "{want} in {ids:?}");
        }
        let rb = central
            .iter()
            .find(|d| d["kind"] == "RoleBinding" && d["metadata"]["namespace"] == "team-a")
            .unwrap();
        assert_eq!(rb["subjects"][0]["namespace"], "team-a");
        assert!(out.contains("regroup.dev/publish-credentials-secret=regroup-publish-team-a"));
        let lease = find(&remote, "Role", "regroup-publish-lease");
        assert_eq!(lease["rules"][0]["resources"], json!(["leases"]));
    }

    #[test]
    fn each_section_has_its_objects() {
        let out = generate(CONFIG, &versions()).unwrap();
        assert!(out.starts_with(&format!("{CENTRAL_HEADER}\n")));
        // Split where the docs say: the separator, then the header.
        assert!(out.contains(&format!("\n---\n{REMOTE_HEADER}\n")));
        let (central, remote) = sections(&out);
        assert_eq!(
            ids(&central),
            [
                "Namespace bar",
                "ServiceAccount bar/regroup-publish",
                "Secret bar/regroup-publish-token",
                "Role bar/regroup-publish",
                "RoleBinding bar/regroup-publish",
            ]
        );
        assert_eq!(
            ids(&remote),
            [
                "Namespace regroup",
                "ServiceAccount regroup/regroup-publish",
                "ClusterRoleBinding regroup-publish:system:auth-delegator",
                "RoleBinding kube-system/regroup-publish:extension-apiserver-authentication-reader",
                "ClusterRole regroup-publish",
                "ClusterRoleBinding regroup-publish",
                "Role regroup/regroup-publish-lease",
                "RoleBinding regroup/regroup-publish-lease",
                "Secret regroup/regroup-publish-front-tls",
                "ConfigMap regroup/regroup-publish-config",
                "Deployment regroup/regroup-publish",
                "Service regroup/regroup-publish",
                "APIService v1alpha1.database.team1.example.com",
                "APIService v1.database.team1.example.com",
                "APIService v1.network.acmeco.org",
            ]
        );
        let token = find(&central, "Secret", "regroup-publish-token");
        assert_eq!(token["type"], "kubernetes.io/service-account-token");
        assert_eq!(
            token["metadata"]["annotations"]["kubernetes.io/service-account.name"],
            "regroup-publish"
        );
        assert!(out.contains(
            "kubectl create secret generic regroup-publish-central --from-file=kubeconfig=central.kubeconfig -n regroup"
        ));
        assert!(out.contains(
            "kubectl -n bar get secret regroup-publish-token -o jsonpath='{.data.token}'"
        ));
    }

    #[test]
    fn central_role_grants_the_published_groups_and_reads_secrets() {
        let (central, _) = sections(&generate(CONFIG, &versions()).unwrap());
        let role = find(&central, "Role", "regroup-publish");
        assert_eq!(
            role["rules"],
            json!([
                {"apiGroups": ["database.acmeco.org"], "resources": ["*"], "verbs": ALL_VERBS},
                {"apiGroups": ["network.acmeco.org"], "resources": ["*"], "verbs": ALL_VERBS},
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]},
            ])
        );
        let rb = find(&central, "RoleBinding", "regroup-publish");
        assert_eq!(rb["roleRef"]["kind"], "Role");
        assert_eq!(rb["roleRef"]["name"], "regroup-publish");
        assert_eq!(
            rb["subjects"],
            json!([{"kind": "ServiceAccount", "name": "regroup-publish", "namespace": "bar"}])
        );
    }

    #[test]
    fn remote_rbac_reviews_reads_the_ca_and_writes_secrets() {
        let (_, remote) = sections(&generate(CONFIG, &versions()).unwrap());
        let subject =
            json!([{"kind": "ServiceAccount", "name": "regroup-publish", "namespace": "regroup"}]);
        let delegator = find(
            &remote,
            "ClusterRoleBinding",
            "regroup-publish:system:auth-delegator",
        );
        assert_eq!(delegator["roleRef"]["name"], "system:auth-delegator");
        assert_eq!(delegator["subjects"], subject);
        let reader = find(
            &remote,
            "RoleBinding",
            "regroup-publish:extension-apiserver-authentication-reader",
        );
        assert_eq!(reader["metadata"]["namespace"], "kube-system");
        assert_eq!(
            reader["roleRef"],
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "extension-apiserver-authentication-reader"})
        );
        let role = find(&remote, "ClusterRole", "regroup-publish");
        assert_eq!(role["rules"][0]["resources"], json!(["namespaces"]));
        assert_eq!(role["rules"][1]["resources"], json!(["secrets"]));
        assert_eq!(role["rules"][1]["verbs"].as_array().unwrap().len(), 7);
        assert_eq!(
            find(&remote, "ClusterRoleBinding", "regroup-publish")["subjects"],
            subject
        );
    }

    #[test]
    fn api_services_are_renamed_and_trust_the_generated_ca() {
        let (_, remote) = sections(&generate(CONFIG, &versions()).unwrap());
        let tls = find(&remote, "Secret", "regroup-publish-front-tls");
        let ca_pem = decode(&tls["data"]["ca.crt"]);
        let cert_pem = decode(&tls["data"]["tls.crt"]);
        assert!(decode(&tls["data"]["tls.key"]).contains("PRIVATE KEY"));
        for (group, version) in [
            ("database.team1.example.com", "v1alpha1"),
            ("database.team1.example.com", "v1"),
            ("network.acmeco.org", "v1"),
        ] {
            let a = find(&remote, "APIService", &format!("{version}.{group}"));
            assert_eq!(a["spec"]["group"], group);
            assert_eq!(a["spec"]["version"], version);
            assert_eq!(
                a["spec"]["service"],
                json!({"namespace": "regroup", "name": "regroup-publish", "port": 443})
            );
            assert_eq!(a["spec"]["groupPriorityMinimum"], 1000);
            assert_eq!(a["spec"]["versionPriority"], 15);
            assert_eq!(decode(&a["spec"]["caBundle"]), ca_pem);
        }
        verify_serving_cert(&ca_pem, &cert_pem, "regroup-publish.regroup.svc");
        // The CA is the certificate's issuer.
        let der = |pem: &str| CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
        let (ca_der, cert_der) = (der(&ca_pem), der(&cert_pem));
        let (_, ca) = x509_parser::parse_x509_certificate(&ca_der).unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(&cert_der).unwrap();
        assert_eq!(cert.issuer(), ca.subject());
        assert!(ca.is_ca());
    }

    /// As the aggregator does: the chain to the caBundle and the Service's
    /// DNS name.
    fn verify_serving_cert(ca_pem: &str, cert_pem: &str, dns: &str) {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
            .unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap();
        let cert = CertificateDer::from_pem_slice(cert_pem.as_bytes()).unwrap();
        let name = ServerName::try_from(dns.to_owned()).unwrap();
        verifier
            .verify_server_cert(&cert, &[], &name, &[], UnixTime::now())
            .expect("the serving certificate verifies against the caBundle");
        let other = ServerName::try_from("other.regroup.svc").unwrap();
        assert!(verifier
            .verify_server_cert(&cert, &[], &other, &[], UnixTime::now())
            .is_err());
    }

    #[test]
    fn configmap_config_loads_and_names_the_mounted_files() {
        let (_, remote) = sections(&generate(CONFIG, &versions()).unwrap());
        let text = find(&remote, "ConfigMap", "regroup-publish-config")["data"]["config.yaml"]
            .as_str()
            .unwrap()
            .to_owned();
        let settings = regroup_config::load(&text).unwrap();
        assert_eq!(settings.warnings(), Vec::<String>::new());
        let f = &settings.file;
        assert!(f.upstream.in_cluster);
        assert_eq!(f.listeners.metrics, Some("0.0.0.0:9090".parse().unwrap()));
        let front = f.front.as_ref().unwrap();
        assert_eq!(front.listen, "0.0.0.0:9443".parse().unwrap());
        assert!(front.request_header.from_cluster);
        let p = f.publish.as_ref().unwrap();
        assert_eq!(
            p.central.kubeconfig.as_deref(),
            Some(std::path::Path::new("/etc/regroup/central/kubeconfig"))
        );
        assert_eq!(
            p.central.context, None,
            "the made kubeconfig has one context"
        );
        assert_eq!(p.groups, ["database.acmeco.org", "network.acmeco.org"]);
        assert_eq!(p.target_namespace.as_deref(), Some("bar"));
        assert_eq!(p.connection_secrets.resync_seconds, 30);
        assert_eq!(
            settings
                .map
                .map_group("database.acmeco.org", Direction::ToCluster)
                .as_deref(),
            Some("database.team1.example.com")
        );
        assert_eq!(f.logging.level, regroup_config::schema::LogLevel::Debug);

        // Every file it names is in the volume the Deployment mounts there.
        let d = find(&remote, "Deployment", "regroup-publish");
        let pod = &d["spec"]["template"]["spec"];
        let c = &pod["containers"][0];
        assert_eq!(
            c["args"],
            json!(["serve", "-c", "/etc/regroup/config/config.yaml"])
        );
        assert_eq!(
            c["readinessProbe"]["httpGet"],
            json!({"path": "/readyz", "port": "metrics"})
        );
        assert_eq!(pod["serviceAccountName"], "regroup-publish");
        let source = |path: &std::path::Path| -> (Json, String) {
            let path = path.to_str().unwrap();
            let m = c["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| path.starts_with(&format!("{}/", m["mountPath"].as_str().unwrap())))
                .unwrap_or_else(|| panic!("nothing mounted at {path}"));
            let v = pod["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["name"] == m["name"])
                .unwrap();
            let key = path.rsplit('/').next().unwrap().to_owned();
            (v.clone(), key)
        };
        let (v, key) = source(front.cert_file.as_deref().unwrap());
        assert_eq!(
            (v["secret"]["secretName"].as_str(), key.as_str()),
            (Some("regroup-publish-front-tls"), "tls.crt")
        );
        let tls = find(&remote, "Secret", "regroup-publish-front-tls");
        for file in [&front.cert_file, &front.key_file, &front.ca_file] {
            let (v, key) = source(file.as_deref().unwrap());
            assert_eq!(v["secret"]["secretName"], "regroup-publish-front-tls");
            assert!(tls["data"][&key].is_string(), "{key} not in the Secret");
        }
        let (v, key) = source(p.central.kubeconfig.as_deref().unwrap());
        assert_eq!(
            (v["secret"]["secretName"].as_str(), key.as_str()),
            (Some("regroup-publish-central"), "kubeconfig")
        );
        let (v, key) = source(std::path::Path::new("/etc/regroup/config/config.yaml"));
        assert_eq!(
            (v["configMap"]["name"].as_str(), key.as_str()),
            (Some("regroup-publish-config"), "config.yaml")
        );

        let svc = find(&remote, "Service", "regroup-publish");
        assert_eq!(
            svc["spec"]["ports"],
            json!([{"name": "https", "port": 443, "targetPort": "https"}])
        );
        assert_eq!(
            svc["spec"]["selector"],
            d["spec"]["selector"]["matchLabels"]
        );
        assert_eq!(
            d["spec"]["template"]["metadata"]["labels"],
            d["spec"]["selector"]["matchLabels"]
        );
    }

    #[test]
    fn options_name_the_objects() {
        let o = Options {
            name: "pub".into(),
            namespace: "infra".into(),
            image: "example.com/regroup:1".into(),
            ..versions()
        };
        let (central, remote) = sections(&generate(CONFIG, &o).unwrap());
        assert_eq!(
            find(&central, "ServiceAccount", "pub")["metadata"]["namespace"],
            "bar"
        );
        let d = find(&remote, "Deployment", "pub");
        assert_eq!(d["metadata"]["namespace"], "infra");
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["image"],
            "example.com/regroup:1"
        );
        assert_eq!(
            find(&remote, "APIService", "v1.network.acmeco.org")["spec"]["service"]["namespace"],
            "infra"
        );
        let tls = find(&remote, "Secret", "pub-front-tls");
        verify_serving_cert(
            &decode(&tls["data"]["ca.crt"]),
            &decode(&tls["data"]["tls.crt"]),
            "pub.infra.svc",
        );
    }

    #[test]
    fn match_namespaces_prints_the_role_as_a_template() {
        let config = CONFIG.replace("targetNamespace: bar", "matchNamespaces: true");
        let out = generate(&config, &versions()).unwrap();
        let (central, _) = sections(&out);
        assert_eq!(
            ids(&central),
            [
                "Namespace regroup",
                "ServiceAccount regroup/regroup-publish",
                "Secret regroup/regroup-publish-token"
            ]
        );
        assert!(out.contains("# kind: Role\n"));
        assert!(out.contains("#   namespace: NAMESPACE\n"));
        assert!(out.contains(
            "# - kind: ServiceAccount\n#   name: regroup-publish\n#   namespace: regroup\n"
        ));

        // With a target namespace too: the template and the Role for it.
        let config = CONFIG.replace(
            "targetNamespace: bar",
            "targetNamespace: bar\n  matchNamespaces: true",
        );
        let out = generate(&config, &versions()).unwrap();
        assert!(out.contains("#   namespace: NAMESPACE\n"));
        let (central, _) = sections(&out);
        assert_eq!(
            find(&central, "Role", "regroup-publish")["metadata"]["namespace"],
            "bar"
        );
    }

    #[test]
    fn a_config_without_publish_is_refused() {
        let config = "front: {listen: 0.0.0.0:9443, backend: https://127.0.0.1:8443}\n\
                      rules: [{from: a.example.io, to: a.team1.example.com}]\n";
        let e = generate(config, &versions()).unwrap_err();
        assert!(matches!(e, ManifestsError::Config(_)), "{e}");
        assert!(e.to_string().contains("no `publish:`"), "{e}");
        assert_eq!(e.exit_code(), 1);
        assert!(matches!(
            generate("publish: [", &versions()),
            Err(ManifestsError::Config(_))
        ));
    }

    #[test]
    fn versions_must_name_the_published_groups() {
        let refused = |vs: &[&str], says: &str| {
            let e = generate(CONFIG, &opts(vs)).unwrap_err();
            assert!(
                matches!(e, ManifestsError::Config(_)) && e.to_string().contains(says),
                "{vs:?}: {e}"
            );
        };
        refused(
            &["database.team1.example.com/v1", "network.acmeco.org/v1"],
            "not in publish.groups",
        );
        refused(
            &["database.acmeco.org/v1"],
            "no version of published group `network.acmeco.org`",
        );
        refused(&["database.acmeco.org"], "is not GROUP/VERSION");
        refused(&["database.acmeco.org/v1/x"], "is not GROUP/VERSION");
        // A version given twice is one APIService.
        let vs = [
            "database.acmeco.org/v1",
            "database.acmeco.org/v1",
            "network.acmeco.org/v1",
        ];
        let (_, remote) = sections(&generate(CONFIG, &opts(&vs)).unwrap());
        assert_eq!(
            remote.iter().filter(|d| d["kind"] == "APIService").count(),
            2
        );
    }

    #[test]
    fn names_must_be_kubernetes_names() {
        for (name, namespace) in [
            ("Regroup", "regroup"),
            ("1pub", "regroup"),
            ("pub", "re_group"),
            ("pub-", "x"),
        ] {
            let o = Options {
                name: name.into(),
                namespace: namespace.into(),
                ..versions()
            };
            assert!(
                matches!(generate(CONFIG, &o), Err(ManifestsError::Config(_))),
                "{name} {namespace}"
            );
        }
    }

    #[test]
    fn versions_come_from_central_discovery() {
        let doc = json!({"kind": "APIGroup", "name": "database.acmeco.org",
            "versions": [{"groupVersion": "database.acmeco.org/v1", "version": "v1"},
                         {"groupVersion": "database.acmeco.org/v1alpha1", "version": "v1alpha1"}],
            "preferredVersion": {"groupVersion": "database.acmeco.org/v1", "version": "v1"}});
        assert_eq!(
            discovered_versions("database.acmeco.org", &doc).unwrap(),
            GroupVersions {
                group: "database.acmeco.org".into(),
                versions: vec!["v1".into(), "v1alpha1".into()],
                cluster_scoped: Vec::new(),
            }
        );
        assert!(discovered_versions("x.io", &json!({"kind": "APIGroup"})).is_err());
    }

    #[test]
    fn cluster_scoped_resources_get_a_read_only_cluster_role() {
        let list = json!({"kind": "APIResourceList", "resources": [
            {"name": "compositions", "namespaced": false},
            {"name": "compositions/status", "namespaced": false},
            {"name": "mysqlinstancerequirements", "namespaced": true}]});
        assert_eq!(cluster_scoped(&list), ["compositions"]);
        let text = "front: {listen: 0.0.0.0:9443}\npublish:\n  central: {kubeconfig: /k}\n  groups: [apiextensions.crossplane.io]\n  targetNamespace: bar\n";
        let settings = regroup_config::load(text).unwrap();
        let versions = [GroupVersions {
            group: "apiextensions.crossplane.io".into(),
            versions: vec!["v1".into()],
            cluster_scoped: vec!["compositions".into()],
        }];
        let out = build(text, &settings, &Options::default(), &versions).unwrap();
        let (central, _) = sections(&out);
        let role = find(
            &central,
            "ClusterRole",
            "regroup-publish-read-cluster-scoped",
        );
        assert_eq!(
            role["rules"],
            json!([{"apiGroups": ["apiextensions.crossplane.io"], "resources": ["compositions"], "verbs": ["get", "list", "watch"]}])
        );
        let b = find(
            &central,
            "ClusterRoleBinding",
            "regroup-publish-read-cluster-scoped",
        );
        assert_eq!(b["subjects"][0]["namespace"], "bar");
    }

    #[test]
    fn an_unreachable_central_cluster_without_versions_exits_2() {
        // A port nothing listens on: refused at once.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut kubeconfig = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(
            &mut kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
                 clusters: [{{name: c, cluster: {{server: \"https://127.0.0.1:{port}\"}}}}]\n\
                 users: [{{name: u, user: {{token: t}}}}]\n\
                 contexts: [{{name: c, context: {{cluster: c, user: u}}}}]\n"
            )
            .as_bytes(),
        )
        .unwrap();
        let config = CONFIG
            .replace(
                "/nonexistent/central.kubeconfig",
                kubeconfig.path().to_str().unwrap(),
            )
            .replace("    context: platform\n", "");
        let e = generate(&config, &Options::default()).unwrap_err();
        assert!(matches!(e, ManifestsError::Central(_)), "{e}");
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("--versions"), "{e}");
        assert!(e.to_string().contains(&format!("127.0.0.1:{port}")), "{e}");
        // Its server is the one the kubeconfig commands name.
        let out = generate(&config, &versions()).unwrap();
        assert!(
            out.contains(&format!("--server=https://127.0.0.1:{port} ")),
            "{out}"
        );
        // No kubeconfig at all: the same error.
        let e = generate(CONFIG, &Options::default()).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
    }
}
