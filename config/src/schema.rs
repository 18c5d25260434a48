//! The YAML configuration file, as written by users. Unknown keys are errors.
//!
//! See `docs/config.md` for the reference. Validation of what the types
//! can't express lives in [`mod@crate::load`].

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;
use serde_saphyr::Spanned;

/// The whole file.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConfigFile {
    /// Rename rules, applied as one bijection (order never matters).
    #[serde(default)]
    pub rules: Vec<Spanned<RuleSpec>>,
    /// Known operators whose fields, key prefixes and Leases are added
    /// (see [`crate::profiles`]).
    #[serde(default)]
    pub profiles: Vec<Spanned<String>>,
    /// App-specific group-bearing fields of custom kinds.
    #[serde(default)]
    pub fields: Vec<Spanned<FieldSpec>>,
    /// Names of cluster-scoped objects renamed per copy (a prefix or a
    /// suffix), for the kinds listed. Absent: a prefix derived from the
    /// rules, for the default kinds (`names: {kinds: []}` turns it off).
    #[serde(default)]
    pub names: Option<Spanned<NamesSpec>>,
    /// Label, annotation and finalizer keys (and label values) renamed per
    /// copy.
    #[serde(default)]
    pub metadata: Option<MetadataSpec>,
    /// Where the sidecar listens for the app.
    #[serde(default)]
    pub listeners: Listeners,
    /// The kube-apiserver regroup forwards to.
    #[serde(default)]
    pub upstream: Upstream,
    /// Which credentials regroup sends upstream.
    #[serde(default)]
    pub credentials: Credentials,
    /// The aggregated-API front, when the app is itself an aggregated server.
    #[serde(default)]
    pub front: Option<Front>,
    /// Publish mode: the front's backend is another cluster (the central
    /// one), whose groups this cluster's users reach through the front.
    #[serde(default)]
    pub publish: Option<Publish>,
    /// The webhook listener, when the app serves admission or conversion
    /// webhooks that kube-apiserver calls.
    #[serde(default)]
    pub webhooks: Option<Webhooks>,
    /// Log level and format.
    #[serde(default)]
    pub logging: Logging,
    /// Sizes and timeouts (see [`crate::Limits`]).
    #[serde(default)]
    pub limits: crate::Limits,
}

/// One rule as written: either `from`/`to` or `fromSuffix`/`toSuffix`.
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RuleSpec {
    /// Exact group, as the app knows it.
    pub from: Option<String>,
    /// Exact group on the cluster.
    pub to: Option<String>,
    /// DNS suffix (on a label boundary) of the app's groups.
    pub from_suffix: Option<String>,
    /// DNS suffix that replaces it on the cluster.
    pub to_suffix: Option<String>,
    /// Rename string values of keys named `apiGroup`/`apiVersion` anywhere in
    /// an object (default true).
    pub reference_keys: Option<bool>,
}

/// The `names:` section as written (see [`crate::object_names`]).
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NamesSpec {
    /// Put in front of every renamed name on the cluster (`team1-`).
    pub prefix: Option<String>,
    /// Or appended to it (`-team1`).
    pub suffix: Option<String>,
    /// The kinds whose names are renamed (`ClusterRole`, ...); absent:
    /// [`crate::object_names::DEFAULT_KINDS`]; `[]`: none (all shared).
    #[serde(default)]
    pub kinds: Option<Vec<String>>,
    /// Names never renamed, besides `system:*` and the default ClusterRoles.
    #[serde(default)]
    pub keep: Vec<String>,
    /// Put in front of the renamed groups' CRD `shortNames` and
    /// `categories` on the cluster (`t1-`); absent: they stay as they are
    /// (see [`crate::short_names`]).
    pub short_name_prefix: Option<String>,
    /// Categories never prefixed; absent: `[all]`.
    pub keep_categories: Option<Vec<String>>,
    /// Fixed names of namespaced kinds renamed per copy (a leader-election
    /// Lease).
    pub namespaced: Option<NamespacedNamesSpec>,
    /// Namespaces the app shares with other copies (absent:
    /// `[kube-system]`): `render` and `inject` give the Roles,
    /// RoleBindings, Leases and ConfigMaps a manifest puts there the
    /// copy's mark, and the Leases those Roles name.
    pub shared_namespaces: Option<Vec<String>>,
}

/// `names.namespaced`: these names, in objects of these kinds.
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NamespacedNamesSpec {
    /// `Lease`, `ConfigMap`.
    #[serde(default)]
    pub kinds: Vec<String>,
    /// `foo-operator-lock`.
    #[serde(default)]
    pub names: Vec<String>,
}

/// The `metadata:` section as written (see [`crate::metadata`]).
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MetadataSpec {
    /// Key prefixes: `{from: cert-manager.io, to: cert-manager.team-b.example.com}`.
    #[serde(default)]
    pub prefixes: Vec<Spanned<PairSpec>>,
    /// Whole keys: `{from: example.io/owner, to: example.io/owner-team-b}`.
    #[serde(default)]
    pub keys: Vec<Spanned<PairSpec>>,
    /// Label values under one key: `{key: app.kubernetes.io/managed-by,
    /// from: foo-operator, to: foo-operator-team-b}`.
    #[serde(default)]
    pub values: Vec<Spanned<ValueSpec>>,
    /// Objects whose metadata is never renamed: `{kind: Secret, name: x}`.
    #[serde(default)]
    pub exclude: Vec<Spanned<ExcludeSpec>>,
    /// Also a prefix rule per group rule, with the same names (opt-in).
    #[serde(default)]
    pub from_rules: bool,
}

/// `from` (the app's) and `to` (the cluster's).
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct PairSpec {
    /// As the app names it.
    pub from: String,
    /// As the cluster names it.
    pub to: String,
}

/// A label value rule as written.
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct ValueSpec {
    /// The label key, as the app names it.
    pub key: String,
    /// The app's value.
    pub from: String,
    /// The cluster's value.
    pub to: String,
}

/// An exclusion as written.
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct ExcludeSpec {
    /// The kind (`Secret`).
    pub kind: String,
    /// Only the object of this name.
    pub name: Option<String>,
    /// Only objects whose labels match this label selector
    /// (`team=a,!kopf.zalando.org/x`).
    pub selector: Option<String>,
}

/// An app-specific field that holds a group reference.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FieldSpec {
    /// The kind's group, as the app knows it.
    pub group: String,
    /// The kind (`TokenCredentialRequest`).
    pub kind: String,
    /// Path inside the object: `spec.identityProviders[].objectRef.apiGroup`.
    pub path: String,
    /// How the value names a group.
    pub form: FieldForm,
}

/// The forms a configured field's value may take.
#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
pub enum FieldForm {
    /// A bare group.
    #[serde(rename = "group")]
    Group,
    /// `group/version`.
    #[serde(rename = "apiVersion")]
    ApiVersion,
    /// `resource.group` (also `plural.group`, `version.group`).
    #[serde(rename = "resource.group")]
    ResourceGroup,
}

/// Listeners for the app (the sidecar side).
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Listeners {
    /// Plain-HTTP listener, like `kubectl proxy` (loopback only; `:PORT`
    /// is 127.0.0.1).
    #[serde(default, deserialize_with = "crate::addr::loopback_opt")]
    pub http: Option<SocketAddr>,
    /// TLS listener for apps that use in-cluster config.
    pub tls: Option<TlsListener>,
    /// Prometheus `/metrics` and `/healthz` (`:PORT`: every interface).
    #[serde(default, deserialize_with = "crate::addr::any_opt")]
    pub metrics: Option<SocketAddr>,
    /// Host names (no port) a request to a loopback listener may carry in
    /// `Host` (or HTTP/2 `:authority`), like `kubectl proxy --accept-hosts`:
    /// anything else is refused with 403 (DNS rebinding). IPv6 addresses
    /// with or without brackets. Default `localhost`, `127.0.0.1`, `::1`.
    #[serde(default = "default_allowed_hosts")]
    pub allowed_hosts: Vec<String>,
}

impl Default for Listeners {
    fn default() -> Self {
        Listeners {
            http: None,
            tls: None,
            metrics: None,
            allowed_hosts: default_allowed_hosts(),
        }
    }
}

/// The hosts `kubectl proxy` accepts by default.
pub fn default_allowed_hosts() -> Vec<String> {
    vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]
}

/// A TLS listener: either certificate files or a generated CA.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TlsListener {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// PEM serving certificate chain (with `keyFile`).
    pub cert_file: Option<PathBuf>,
    /// PEM private key (with `certFile`).
    pub key_file: Option<PathBuf>,
    /// Without cert files: generate a CA and a serving certificate for
    /// 127.0.0.1/localhost, and write the CA certificate here (for a projected
    /// service-account volume's `ca.crt`).
    pub generated_ca_file: Option<PathBuf>,
    /// When `listen` is not loopback: also serve callers that bring no
    /// `Authorization` of their own, with regroup's credential. Anyone who
    /// can reach the port then acts as regroup. Default false: such callers
    /// get 401.
    #[serde(default)]
    pub dangerous_lend_credentials: bool,
}

/// The kube-apiserver to forward to. With nothing set: `$KUBECONFIG`, then
/// `~/.kube/config`, then in-cluster.
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Upstream {
    /// Kubeconfig file to read the server, CA and credentials from.
    pub kubeconfig: Option<PathBuf>,
    /// Context in that kubeconfig (default: its current context).
    pub context: Option<String>,
    /// Use in-cluster config (service-account token and CA).
    #[serde(default)]
    pub in_cluster: bool,
    /// Where in-cluster config reads `ca.crt` and `token` (default
    /// `/var/run/secrets/kubernetes.io/serviceaccount`).
    pub service_account_dir: Option<PathBuf>,
    /// Skip verification of the apiserver's certificate. Insecure; for
    /// throwaway test clusters only, and logged loudly.
    #[serde(default)]
    pub dangerous_insecure_skip_tls_verify: bool,
    /// Whether regroup speaks HTTP/2 to a TLS apiserver (see [`Http2`]).
    #[serde(default)]
    pub http2: Http2,
}

/// `upstream.http2`: the protocol regroup offers a TLS apiserver by ALPN.
#[derive(Debug, Deserialize, Default, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum Http2 {
    /// h2 and HTTP/1.1 offered, the apiserver chooses (h2, as client-go
    /// speaks): one multiplexed connection carries every request.
    Auto,
    /// HTTP/1.1 only: a pool of connections, one per request in flight
    /// (an open watch holds one).
    Never,
    /// Short requests on the HTTP/1.1 pool (ALPN offers HTTP/1.1 only),
    /// the requests the apiserver holds open (watches, `log` and `proxy`
    /// subresources) on connections offering h2 and HTTP/1.1: they share
    /// one multiplexed connection, the short requests skip h2's cost. The
    /// default: as correct as `auto` on a real kube-apiserver 1.36 (docs/
    /// config.md, "Upstream protocol") and cheaper per short request.
    #[default]
    Watches,
}

/// How regroup authenticates upstream.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Credentials {
    /// Forward the app's own `Authorization` header when it sends one
    /// (default true: the apiserver sees the app's identity).
    #[serde(default = "yes")]
    pub pass_through: bool,
}

impl Default for Credentials {
    fn default() -> Self {
        Credentials { pass_through: true }
    }
}

fn yes() -> bool {
    true
}

/// The aggregated-API front listener.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Front {
    /// Address the APIService's Service points at.
    pub listen: SocketAddr,
    /// PEM serving certificate (reloaded when it changes).
    pub cert_file: Option<PathBuf>,
    /// PEM private key.
    pub key_file: Option<PathBuf>,
    /// PEM CA that signed `certFile`: what the cluster's APIService
    /// `caBundle` must hold so the aggregator trusts regroup.
    pub ca_file: Option<PathBuf>,
    /// Without cert files: DNS names of the generated serving certificate
    /// (the Service the APIService points at, e.g. `api.team1.svc`), besides
    /// localhost.
    #[serde(default)]
    pub generated_dns_names: Vec<String>,
    /// The app's own aggregated server, e.g. `https://127.0.0.1:8443`.
    /// Left out in publish mode (`publish.central` is the backend).
    #[serde(default)]
    pub backend: String,
    /// CA that signs the backend's serving certificate.
    pub backend_ca_file: Option<PathBuf>,
    /// Don't verify the backend's certificate (loopback backends only).
    #[serde(default)]
    pub dangerous_insecure_backend: bool,
    /// How callers (the cluster's aggregator) are authenticated.
    #[serde(default)]
    pub request_header: RequestHeader,
}

/// The webhook listener: kube-apiserver calls the app's admission and
/// conversion webhooks here, in the cluster's names; regroup renames the
/// review for the app, forwards it to the app's own webhook server, and
/// renames the answer back.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Webhooks {
    /// Address the cluster's webhook calls reach.
    pub listen: SocketAddr,
    /// PEM serving certificate (reloaded when it changes).
    pub cert_file: Option<PathBuf>,
    /// PEM private key.
    pub key_file: Option<PathBuf>,
    /// PEM CA that signed `certFile`: what the webhook registrations'
    /// `caBundle` must hold so kube-apiserver trusts regroup.
    pub ca_file: Option<PathBuf>,
    /// Instead of `certFile`/`keyFile`: a serving certificate regroup
    /// issues itself from the app's own CA (files of a Secret volume), for
    /// an app that makes its webhook certificate from a CA it keeps in a
    /// Secret (cert-manager's webhook).
    pub issue_from: Option<IssueFrom>,
    /// Without cert files: DNS names of the generated serving certificate
    /// (the Service in front of this listener, e.g. `app.team1.svc`),
    /// besides localhost and the loopback addresses.
    #[serde(default)]
    pub generated_dns_names: Vec<String>,
    /// PEM CA bundle that callers' client certificates must chain to (the
    /// certificate kube-apiserver presents per its
    /// `--admission-control-config-file` kubeconfig). Unset: no client
    /// certificate is asked for, as most webhook servers do.
    pub client_ca_file: Option<PathBuf>,
    /// CA that signs the app's webhook server certificate.
    pub backend_ca_file: Option<PathBuf>,
    /// Don't verify the app's webhook certificate (loopback backends only).
    #[serde(default)]
    pub dangerous_insecure_backend: bool,
    /// Where the cluster reaches this listener: what regroup writes into
    /// the `clientConfig` of the registrations it fronts.
    pub reach_at: Option<ReachAt>,
    /// The fronted webhooks: one path of this listener each.
    pub hooks: Vec<Spanned<Webhook>>,
}

/// The app's CA regroup issues the webhook listener's certificate from.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct IssueFrom {
    /// PEM CA certificate (a Secret's `tls.crt` or `ca.crt`).
    pub ca_cert_file: PathBuf,
    /// PEM PKCS#8 key of that CA (the Secret's `tls.key`).
    pub ca_key_file: PathBuf,
    /// The names kube-apiserver calls the listener by (the Service's
    /// `NAME.NAMESPACE.svc`, ...).
    pub dns_names: Vec<String>,
}

/// How kube-apiserver reaches the webhook listener: a URL (`https://host:port`,
/// a webhook `url:` clientConfig; loopback works without a service network)
/// or a Service (`service:` clientConfig).
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReachAt {
    /// Base URL; each webhook's path is appended.
    pub url: Option<String>,
    /// A Service in front of the listener.
    pub service: Option<ServiceRef>,
}

/// A Service, as a webhook `clientConfig.service` names it.
#[derive(Debug, Deserialize, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ServiceRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its port (default 443, as in a clientConfig).
    pub port: Option<u16>,
    /// Only when matching the app's registration: the path it names.
    pub path: Option<String>,
}

/// Which registration written by the app (through the sidecar) is this
/// webhook's: regroup points its `clientConfig` at the listener and puts its
/// own CA in `caBundle`, and the app reads back what it wrote. Exactly one of
/// `url`, `service`, `configuration`.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Registration {
    /// The app's `clientConfig.url`.
    pub url: Option<String>,
    /// The app's `clientConfig.service` (namespace, name, and `path` when
    /// given).
    pub service: Option<ServiceRef>,
    /// A Validating/MutatingWebhookConfiguration's name ...
    pub configuration: Option<String>,
    /// ... and, optionally, the name of one of its `webhooks`.
    pub webhook: Option<String>,
}

/// One fronted webhook.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Webhook {
    /// A name for logs and metrics (`validate-foo`).
    pub name: String,
    /// The path regroup serves it at (default `/` + name).
    pub path: Option<String>,
    /// The app's own webhook: `https://127.0.0.1:9443/validate-foo`.
    pub backend: String,
    /// The app's registration of it, when regroup is to amend it.
    pub registration: Option<Registration>,
}

impl Webhook {
    /// The path regroup serves this webhook at.
    pub fn served_path(&self) -> String {
        self.path
            .clone()
            .unwrap_or_else(|| format!("/{}", self.name))
    }
}

/// Request-header (front-proxy) authentication of callers, as kube-apiserver's.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RequestHeader {
    /// Read CA, allowed names and header names from
    /// `kube-system/extension-apiserver-authentication` (default true).
    #[serde(default = "yes")]
    pub from_cluster: bool,
    /// PEM CA bundle that front-proxy client certificates must chain to.
    pub client_ca_file: Option<PathBuf>,
    /// Allowed client certificate common names (empty: any).
    #[serde(default)]
    pub allowed_names: Vec<String>,
    /// Headers carrying the user name.
    #[serde(default = "default_user_headers")]
    pub username_headers: Vec<String>,
    /// Headers carrying groups.
    #[serde(default = "default_group_headers")]
    pub group_headers: Vec<String>,
    /// Prefixes of headers carrying extra attributes.
    #[serde(default = "default_extra_prefixes")]
    pub extra_headers_prefixes: Vec<String>,
}

impl Default for RequestHeader {
    fn default() -> Self {
        RequestHeader {
            from_cluster: true,
            client_ca_file: None,
            allowed_names: Vec::new(),
            username_headers: default_user_headers(),
            group_headers: default_group_headers(),
            extra_headers_prefixes: default_extra_prefixes(),
        }
    }
}

fn default_user_headers() -> Vec<String> {
    vec!["X-Remote-User".into()]
}
fn default_group_headers() -> Vec<String> {
    vec!["X-Remote-Group".into()]
}
fn default_extra_prefixes() -> Vec<String> {
    vec!["X-Remote-Extra-".into()]
}

/// Logging.
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Logging {
    /// `error`, `warn`, `info` (default), `debug` or `trace`.
    #[serde(default)]
    pub level: LogLevel,
    /// `text` (default) or `json`.
    #[serde(default)]
    pub format: LogFormat,
}

/// Log level.
#[derive(Debug, Deserialize, Default, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Errors only.
    Error,
    /// Warnings and errors.
    Warn,
    /// The default.
    #[default]
    Info,
    /// Per-request detail (never bodies or credentials).
    Debug,
    /// Everything.
    Trace,
}

/// Log line format.
#[derive(Debug, Deserialize, Default, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Publish mode (docs/publish.md): a central cluster's API groups served
/// in this (the remote) cluster through the aggregated front. `upstream`
/// is the remote cluster (regroup's own reads: access reviews, Namespaces,
/// connection Secrets); `central` the cluster whose objects the front
/// reads and writes, with its own credential.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Publish {
    /// The central cluster, in `upstream`'s form (kubeconfig, context,
    /// in-cluster, ...).
    pub central: Upstream,
    /// The central cluster's groups to publish (central names; `rules`
    /// may rename them on the way).
    pub groups: Vec<String>,
    /// The central namespace a remote namespace's objects go to unless
    /// its Namespace says otherwise.
    #[serde(default)]
    pub target_namespace: Option<String>,
    /// Each remote namespace goes to the central namespace of the same
    /// name (unless its Namespace says otherwise).
    #[serde(default)]
    pub match_namespaces: bool,
    /// This cluster's id on the central objects (default: the uid of the
    /// remote `kube-system` Namespace).
    #[serde(default)]
    pub cluster_id: Option<String>,
    /// The connection Secrets copied from the central cluster.
    #[serde(default)]
    pub connection_secrets: ConnectionSecrets,
    /// Whose credential requests act with in the central cluster: a
    /// remote namespace's own Secret (its annotation), else this default.
    #[serde(default)]
    pub credentials: PublishCredentials,
    /// Read-only federation: remote clusters read the central objects of
    /// their target namespaces (every source's) and receive their
    /// connection Secrets; every write is refused.
    #[serde(default)]
    pub read_only: bool,
    /// Replicas of the remote side elect the one that copies connection
    /// Secrets with this Lease, in the remote cluster.
    #[serde(default)]
    pub leader_election: LeaderElection,
}

/// `publish.credentials`.
#[derive(Debug, Deserialize, Clone, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PublishCredentials {
    /// The Secret (in the remote cluster) whose `kubeconfig` or `token`
    /// every namespace without its own acts with; unset: regroup's own
    /// central credential (`publish.central`).
    #[serde(default)]
    pub default_secret: Option<SecretName>,
}

/// A Secret by namespace and name.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SecretName {
    pub namespace: String,
    pub name: String,
}

/// `publish.leaderElection`: the Lease replicas elect the Secret copier
/// with.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LeaderElection {
    /// The Lease's namespace (unset: the namespace of the pod's service
    /// account, else `default`).
    #[serde(default)]
    pub namespace: Option<String>,
    /// The Lease's name (unset: derived from the publisher's id).
    #[serde(default)]
    pub name: Option<String>,
    /// How long a leader holds the Lease without renewing it.
    #[serde(default = "fifteen")]
    pub lease_seconds: u64,
}

impl Default for LeaderElection {
    fn default() -> Self {
        LeaderElection {
            namespace: None,
            name: None,
            lease_seconds: fifteen(),
        }
    }
}

fn fifteen() -> u64 {
    15
}

/// `publish.connectionSecrets`: which fields of a published object name a
/// Secret of its central namespace to copy into its remote namespace.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConnectionSecrets {
    /// Dotted paths to a Secret name in a published object, e.g.
    /// `spec.writeConnectionSecretToRef.name`.
    #[serde(default = "connection_secret_fields")]
    pub fields: Vec<String>,
    /// How often the copies are brought in line with the central cluster.
    #[serde(default = "ten")]
    pub resync_seconds: u64,
    /// Copy a Secret only when the object naming it owns it (an
    /// `ownerReference` with the object's uid, as Crossplane writes them):
    /// otherwise one remote namespace could name, and read, a Secret of
    /// another sharing its central namespace.
    #[serde(default = "yes")]
    pub require_owner: bool,
}

impl Default for ConnectionSecrets {
    fn default() -> Self {
        ConnectionSecrets {
            fields: connection_secret_fields(),
            resync_seconds: ten(),
            require_owner: true,
        }
    }
}

fn connection_secret_fields() -> Vec<String> {
    vec!["spec.writeConnectionSecretToRef.name".into()]
}

fn ten() -> u64 {
    10
}
