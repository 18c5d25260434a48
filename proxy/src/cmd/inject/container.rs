//! The regroup container and what it needs of its pod (the volumes, the
//! app containers' mounts and env), defined once and read two ways:
//!
//! - as JSON, for `regroup inject`: its options decide every switch (an
//!   injected pod is in-cluster mode, without a front or webhooks);
//! - as the Helm template the chart includes
//!   (`charts/regroup/templates/_container.tpl`, written by `regroup inject
//!   --emit-chart-container`: `regroup.container`, `regroup.volumes`,
//!   `regroup.appMounts`, `regroup.appEnv`): every switch becomes an `if` on the chart's
//!   values. A test regenerates the file and compares it byte for byte.
//!
//! The defaults both use (probes, resources, security context, pull
//! policy) are the chart's `values.yaml`, compiled in: one place to change.

use std::sync::OnceLock;

use serde_json::{json, Map, Value as Json};

use super::{Options, SA_PATH};

/// The chart's `values.yaml`, the defaults of both readings.
const VALUES_YAML: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../charts/regroup/values.yaml"
));

/// A switch: an `if` in the chart, a decision from the options in inject.
#[derive(Clone, Copy)]
enum Cond {
    /// A native sidecar (an init container with `restartPolicy: Always`).
    Native,
    /// The metrics and health listener (the probes need it).
    Metrics,
    /// In-cluster mode (regroup's loopback TLS listener).
    InCluster,
    /// Kubeconfig mode (the app reads a kubeconfig naming regroup).
    Kubeconfig,
    Front,
    FrontBackendCa,
    Webhooks,
    WebhooksClientCa,
    WebhooksBackendCa,
}

impl Cond {
    fn template(self) -> &'static str {
        match self {
            Cond::Native => r#"include "regroup.native" ."#,
            Cond::Metrics => ".Values.regroup.metrics.enabled",
            Cond::InCluster => r#"eq .Values.mode "inCluster""#,
            Cond::Kubeconfig => r#"ne .Values.mode "inCluster""#,
            Cond::Front => ".Values.front.enabled",
            Cond::FrontBackendCa => ".Values.front.backendCaSecret",
            Cond::Webhooks => ".Values.webhooks.enabled",
            Cond::WebhooksClientCa => ".Values.webhooks.clientCaSecret",
            Cond::WebhooksBackendCa => ".Values.webhooks.backendCaSecret",
        }
    }

    fn holds(self, opts: &Options) -> bool {
        match self {
            Cond::Native => opts.native_sidecar,
            Cond::Metrics => opts.metrics_port.is_some(),
            Cond::InCluster => true,
            // inject wraps apps in in-cluster mode only, without a front
            // or webhooks (docs/deploy.md).
            Cond::Kubeconfig
            | Cond::Front
            | Cond::FrontBackendCa
            | Cond::Webhooks
            | Cond::WebhooksClientCa
            | Cond::WebhooksBackendCa => false,
        }
    }
}

/// A value: a template expression in the chart, the options' or the
/// defaults' value in inject.
#[derive(Clone, Copy)]
enum Val {
    Image,
    PullPolicy,
    MetricsPort,
    FrontPort,
    WebhooksPort,
    /// regroup's loopback TLS port, as a string (an env value).
    TlsPortText,
    /// The ConfigMap of regroup's configuration.
    ConfigMap,
    /// The Secret of regroup's loopback serving certificate.
    ServingSecret,
    /// The ConfigMap of the app's kubeconfig (kubeconfig mode).
    AppKubeconfig,
    FrontSecret,
    FrontBackendCaSecret,
    WebhooksSecret,
    WebhooksClientCaSecret,
    WebhooksBackendCaSecret,
    /// A whole mapping of the chart's values (`regroup.<key>`), written
    /// with `toYaml`.
    Values(&'static str),
}

impl Val {
    fn template(self) -> String {
        match self {
            Val::Image => r#""{{ include "regroup.image" . }}""#.into(),
            Val::PullPolicy => "{{ .Values.regroup.image.pullPolicy }}".into(),
            Val::MetricsPort => "{{ .Values.regroup.metrics.port }}".into(),
            Val::FrontPort => "{{ .Values.front.port }}".into(),
            Val::WebhooksPort => "{{ .Values.webhooks.port }}".into(),
            Val::TlsPortText => "{{ .Values.regroup.tlsPort | quote }}".into(),
            Val::ConfigMap => r#"{{ include "regroup.fullname" . }}-config"#.into(),
            Val::ServingSecret => r#"{{ include "regroup.tlsSecretName" . }}"#.into(),
            Val::AppKubeconfig => r#"{{ include "regroup.fullname" . }}-app-kubeconfig"#.into(),
            Val::FrontSecret => r#"{{ include "regroup.frontSecretName" . }}"#.into(),
            Val::FrontBackendCaSecret => "{{ .Values.front.backendCaSecret }}".into(),
            Val::WebhooksSecret => r#"{{ include "regroup.webhooksSecretName" . }}"#.into(),
            Val::WebhooksClientCaSecret => "{{ .Values.webhooks.clientCaSecret }}".into(),
            Val::WebhooksBackendCaSecret => "{{ .Values.webhooks.backendCaSecret }}".into(),
            Val::Values(key) => format!(".Values.regroup.{key}"),
        }
    }

    fn value(self, opts: &Options) -> Json {
        match self {
            Val::Image => json!(opts.image),
            Val::PullPolicy => defaults()["image"]["pullPolicy"].clone(),
            Val::MetricsPort => json!(opts.metrics_port),
            Val::TlsPortText => json!(opts.tls_port.to_string()),
            Val::ConfigMap => json!(format!("{}-config", opts.prefix)),
            Val::ServingSecret => json!(serving_secret(opts)),
            // Never read: inject has no kubeconfig mode, front or webhooks
            // (`Cond::holds`).
            Val::FrontPort
            | Val::WebhooksPort
            | Val::AppKubeconfig
            | Val::FrontSecret
            | Val::FrontBackendCaSecret
            | Val::WebhooksSecret
            | Val::WebhooksClientCaSecret
            | Val::WebhooksBackendCaSecret => Json::Null,
            Val::Values(key) => defaults()[key].clone(),
        }
    }
}

/// The Secret of the loopback listener's certificate: the one given, or
/// `PREFIX-serving` (generated when not in the input).
pub(super) fn serving_secret(opts: &Options) -> String {
    opts.tls_secret
        .clone()
        .unwrap_or_else(|| format!("{}-serving", opts.prefix))
}

/// The chart's `regroup:` values.
fn defaults() -> &'static Json {
    static D: OnceLock<Json> = OnceLock::new();
    D.get_or_init(|| {
        let all: Json =
            serde_saphyr::from_str(VALUES_YAML).expect("the chart's values.yaml is YAML");
        all["regroup"].clone()
    })
}

/// The container's shape.
enum Node {
    Map(Vec<(&'static str, Node)>),
    List(Vec<Node>),
    Lit(Json),
    Val(Val),
    /// A mapping of the chart's values (`Val::Values`), whole.
    Values(Val),
    /// These entries, then the chart's values (`Val::Values`) merged in.
    MapWith(Vec<(&'static str, Node)>, Val),
    /// A map entry or list item present only when the switch is on.
    When(Cond, Box<Node>),
}

fn when(c: Cond, n: Node) -> Node {
    Node::When(c, Box::new(n))
}

fn lit(v: Json) -> Node {
    Node::Lit(v)
}

fn port(name: &'static str, v: Val) -> Node {
    Node::Map(vec![
        ("name", lit(json!(name))),
        ("containerPort", Node::Val(v)),
        ("protocol", lit(json!("TCP"))),
    ])
}

fn probe(path: &'static str, values: &'static str) -> Node {
    Node::MapWith(
        vec![(
            "httpGet",
            lit(json!({"path": path, "port": "regroup-metrics"})),
        )],
        Val::Values(values),
    )
}

fn mount(name: &'static str, path: &'static str, read_only: bool) -> Node {
    let mut m = vec![("name", lit(json!(name))), ("mountPath", lit(json!(path)))];
    if read_only {
        m.push(("readOnly", lit(json!(true))));
    }
    Node::Map(m)
}

/// The regroup container.
fn container() -> Node {
    use Cond::*;
    Node::Map(vec![
        ("name", lit(json!("regroup"))),
        ("image", Node::Val(Val::Image)),
        ("imagePullPolicy", Node::Val(Val::PullPolicy)),
        (
            "args",
            lit(json!(["serve", "-c", "/etc/regroup/config/config.yaml"])),
        ),
        ("restartPolicy", when(Native, lit(json!("Always")))),
        (
            "ports",
            Node::List(vec![
                when(Metrics, port("regroup-metrics", Val::MetricsPort)),
                when(Front, port("regroup-front", Val::FrontPort)),
                when(Webhooks, port("regroup-hooks", Val::WebhooksPort)),
            ]),
        ),
        (
            "startupProbe",
            when(Metrics, probe("/livez", "startupProbe")),
        ),
        (
            "livenessProbe",
            when(Metrics, probe("/livez", "livenessProbe")),
        ),
        (
            "readinessProbe",
            when(Metrics, probe("/readyz", "readinessProbe")),
        ),
        ("resources", Node::Values(Val::Values("resources"))),
        (
            "securityContext",
            Node::Values(Val::Values("securityContext")),
        ),
        (
            "volumeMounts",
            Node::List(vec![
                mount("regroup-config", "/etc/regroup/config", true),
                // The root is read-only: a protobuf list larger than its
                // look-ahead spills here (limits.spillDir unset: the
                // system temp dir).
                mount("regroup-spill", "/tmp", false),
                mount("regroup-upstream-sa", SA_PATH, true),
                when(
                    InCluster,
                    mount("regroup-serving", "/etc/regroup/serving", true),
                ),
                when(
                    Front,
                    mount("regroup-front-tls", "/etc/regroup/front", true),
                ),
                when(
                    FrontBackendCa,
                    when(
                        Front,
                        mount("regroup-backend-ca", "/etc/regroup/backend", true),
                    ),
                ),
                when(
                    Webhooks,
                    mount("regroup-webhooks-tls", "/etc/regroup/webhooks", true),
                ),
                when(
                    Webhooks,
                    when(
                        WebhooksClientCa,
                        mount(
                            "regroup-webhooks-client-ca",
                            "/etc/regroup/webhooks-client-ca",
                            true,
                        ),
                    ),
                ),
                when(
                    Webhooks,
                    when(
                        WebhooksBackendCa,
                        mount(
                            "regroup-webhooks-backend-ca",
                            "/etc/regroup/webhooks-backend",
                            true,
                        ),
                    ),
                ),
            ]),
        ),
    ])
}

/// A volume `name` of a Secret, with only `ca.crt` when `ca_only`.
fn secret_volume(name: &'static str, secret: Val, ca_only: bool) -> Node {
    let mut s = vec![("secretName", Node::Val(secret))];
    if ca_only {
        s.push(("items", lit(json!([{"key": "ca.crt", "path": "ca.crt"}]))));
    }
    Node::Map(vec![("name", lit(json!(name))), ("secret", Node::Map(s))])
}

/// A service-account volume: the pod's token, the namespace, and `ca.crt`
/// from the cluster (`kube-root-ca.crt`) or, with `ca_secret`, from
/// regroup's serving Secret (the app trusts regroup's loopback listener).
fn service_account_volume(name: &'static str, ca_secret: Option<Val>) -> Node {
    let ca_items = json!([{"key": "ca.crt", "path": "ca.crt"}]);
    let ca = match ca_secret {
        Some(v) => Node::Map(vec![(
            "secret",
            Node::Map(vec![("name", Node::Val(v)), ("items", lit(ca_items))]),
        )]),
        None => lit(json!({"configMap": {"name": "kube-root-ca.crt", "items": ca_items}})),
    };
    Node::Map(vec![
        ("name", lit(json!(name))),
        (
            "projected",
            Node::Map(vec![
                ("defaultMode", lit(json!(0o444))),
                (
                    "sources",
                    Node::List(vec![
                        lit(
                            json!({"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}),
                        ),
                        ca,
                        lit(json!({"downwardAPI": {"items": [{"path": "namespace",
                            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}})),
                    ]),
                ),
            ]),
        ),
    ])
}

/// The pod's volumes regroup brings (the container's mounts name them).
fn volumes() -> Node {
    use Cond::*;
    Node::List(vec![
        Node::Map(vec![
            ("name", lit(json!("regroup-config"))),
            (
                "configMap",
                Node::Map(vec![("name", Node::Val(Val::ConfigMap))]),
            ),
        ]),
        // limits.maxSpillBytes (1 GiB) for one list at a time.
        lit(json!({"name": "regroup-spill", "emptyDir": {"sizeLimit": "1Gi"}})),
        service_account_volume("regroup-upstream-sa", None),
        when(
            InCluster,
            Node::Map(vec![
                ("name", lit(json!("regroup-serving"))),
                (
                    "secret",
                    Node::Map(vec![
                        ("secretName", Node::Val(Val::ServingSecret)),
                        (
                            "items",
                            lit(json!([{"key": "tls.crt", "path": "tls.crt"},
                                       {"key": "tls.key", "path": "tls.key"}])),
                        ),
                    ]),
                ),
            ]),
        ),
        when(
            InCluster,
            service_account_volume("regroup-app-sa", Some(Val::ServingSecret)),
        ),
        when(
            Kubeconfig,
            Node::Map(vec![
                ("name", lit(json!("regroup-app-kubeconfig"))),
                (
                    "configMap",
                    Node::Map(vec![("name", Node::Val(Val::AppKubeconfig))]),
                ),
            ]),
        ),
        when(
            Front,
            secret_volume("regroup-front-tls", Val::FrontSecret, false),
        ),
        when(
            Front,
            when(
                FrontBackendCa,
                secret_volume("regroup-backend-ca", Val::FrontBackendCaSecret, true),
            ),
        ),
        when(
            Webhooks,
            secret_volume("regroup-webhooks-tls", Val::WebhooksSecret, false),
        ),
        when(
            Webhooks,
            when(
                WebhooksClientCa,
                secret_volume(
                    "regroup-webhooks-client-ca",
                    Val::WebhooksClientCaSecret,
                    true,
                ),
            ),
        ),
        when(
            Webhooks,
            when(
                WebhooksBackendCa,
                secret_volume(
                    "regroup-webhooks-backend-ca",
                    Val::WebhooksBackendCaSecret,
                    true,
                ),
            ),
        ),
    ])
}

/// What each app container mounts of them: how it reaches regroup
/// (in-cluster: the service account naming regroup's CA; kubeconfig mode:
/// the kubeconfig).
fn app_mounts() -> Node {
    Node::List(vec![
        when(Cond::InCluster, mount("regroup-app-sa", SA_PATH, true)),
        when(
            Cond::Kubeconfig,
            mount("regroup-app-kubeconfig", "/etc/regroup-app", true),
        ),
    ])
}

/// What each app container finds first in its env: how to reach regroup
/// (in-cluster: the Kubernetes service variables naming regroup's loopback
/// listener; kubeconfig mode: the kubeconfig naming it).
fn app_env() -> Node {
    let var = |name: &'static str, value: Node| {
        Node::Map(vec![("name", lit(json!(name))), ("value", value)])
    };
    Node::List(vec![
        when(
            Cond::InCluster,
            var("KUBERNETES_SERVICE_HOST", lit(json!("127.0.0.1"))),
        ),
        when(
            Cond::InCluster,
            var("KUBERNETES_SERVICE_PORT", Node::Val(Val::TlsPortText)),
        ),
        when(
            Cond::InCluster,
            var("KUBERNETES_SERVICE_PORT_HTTPS", Node::Val(Val::TlsPortText)),
        ),
        when(
            Cond::Kubeconfig,
            var("KUBECONFIG", lit(json!("/etc/regroup-app/kubeconfig"))),
        ),
    ])
}

/// The env `regroup inject` puts first in each app container, for `opts`.
pub fn app_container_env(opts: &Options) -> Vec<Json> {
    list_json(&app_env(), opts)
}

/// The pod volumes `regroup inject` adds, for `opts`.
pub fn pod_volumes(opts: &Options) -> Vec<Json> {
    list_json(&volumes(), opts)
}

/// The mounts `regroup inject` adds to each app container, for `opts`.
pub fn app_container_mounts(opts: &Options) -> Vec<Json> {
    list_json(&app_mounts(), opts)
}

fn list_json(n: &Node, opts: &Options) -> Vec<Json> {
    match to_json(n, opts) {
        Some(Json::Array(items)) => items,
        _ => Vec::new(),
    }
}

/// The regroup container `regroup inject` adds, for `opts`.
pub fn sidecar_container(opts: &Options) -> Json {
    to_json(&container(), opts).unwrap_or(Json::Null)
}

/// `None`: a switch that is off (or a list left empty).
fn to_json(n: &Node, opts: &Options) -> Option<Json> {
    match n {
        Node::Lit(v) => Some(v.clone()),
        Node::Val(v) | Node::Values(v) => Some(v.value(opts)),
        Node::When(c, inner) => c.holds(opts).then(|| to_json(inner, opts)).flatten(),
        Node::List(items) => {
            let out: Vec<Json> = items.iter().filter_map(|i| to_json(i, opts)).collect();
            (!out.is_empty()).then_some(Json::Array(out))
        }
        Node::Map(entries) => Some(Json::Object(entries_json(entries, opts))),
        Node::MapWith(entries, values) => {
            let mut m = entries_json(entries, opts);
            if let Json::Object(more) = values.value(opts) {
                m.extend(more);
            }
            Some(Json::Object(m))
        }
    }
}

fn entries_json(entries: &[(&'static str, Node)], opts: &Options) -> Map<String, Json> {
    entries
        .iter()
        .filter_map(|(k, n)| to_json(n, opts).map(|v| ((*k).to_owned(), v)))
        .collect()
}

/// The chart's `regroup.container` template, as
/// `charts/regroup/templates/_container.tpl` holds it.
pub fn chart_template() -> String {
    let mut out = String::from(
        "{{/* Generated by `regroup inject --emit-chart-container` from\n   \
         proxy/src/cmd/inject/container.rs: edit that, then regenerate. */}}\n\
         {{/* The regroup container. */}}\n\
         {{- define \"regroup.container\" -}}\n",
    );
    // One list item: `- name: regroup`, the rest under it.
    let mut body = String::new();
    template_node_entries(&container(), 2, &mut body);
    out.push_str("- ");
    out.push_str(body.trim_start_matches(' '));
    out.push_str("{{- end }}\n");
    for (name, what, list) in [
        (
            "regroup.volumes",
            "The pod's volumes regroup brings.",
            volumes(),
        ),
        (
            "regroup.appMounts",
            "What each app container mounts of them.",
            app_mounts(),
        ),
        (
            "regroup.appEnv",
            "What each app container finds first in its env.",
            app_env(),
        ),
    ] {
        out.push_str(&format!(
            "\n{{{{/* {what} */}}}}\n{{{{- define \"{name}\" -}}}}\n"
        ));
        let Node::List(items) = list else {
            unreachable!("a list")
        };
        for i in &items {
            template_item(i, 0, &mut out);
        }
        out.push_str("{{- end }}\n");
    }
    out
}

/// The entries of a map node at `indent`.
fn template_node_entries(n: &Node, indent: usize, out: &mut String) {
    let Node::Map(entries) = n else {
        unreachable!("a map")
    };
    for (k, v) in entries {
        template_entry(k, v, indent, out);
    }
}

fn template_entry(key: &str, n: &Node, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match n {
        Node::When(c, inner) => {
            out.push_str(&format!("{{{{- if {} }}}}\n", c.template()));
            template_entry(key, inner, indent, out);
            out.push_str("{{- end }}\n");
        }
        Node::Lit(v) => out.push_str(&format!("{pad}{key}: {v}\n")),
        Node::Val(v) => out.push_str(&format!("{pad}{key}: {}\n", v.template())),
        Node::Values(v) => out.push_str(&format!(
            "{pad}{key}:\n{pad}  {{{{- toYaml {} | nindent {} }}}}\n",
            v.template(),
            indent + 2
        )),
        Node::MapWith(entries, v) => {
            out.push_str(&format!("{pad}{key}:\n"));
            for (k, e) in entries {
                template_entry(k, e, indent + 2, out);
            }
            out.push_str(&format!(
                "{pad}  {{{{- toYaml {} | nindent {} }}}}\n",
                v.template(),
                indent + 2
            ));
        }
        Node::Map(_) => {
            out.push_str(&format!("{pad}{key}:\n"));
            template_node_entries(n, indent + 2, out);
        }
        Node::List(items) => {
            out.push_str(&format!("{pad}{key}:\n"));
            for i in items {
                template_item(i, indent + 2, out);
            }
        }
    }
}

/// A list item (a map) at `indent`: `- first: ...`, the rest under it.
fn template_item(n: &Node, indent: usize, out: &mut String) {
    match n {
        // A literal item: JSON is YAML's flow style.
        Node::Lit(v) => out.push_str(&format!("{}- {v}\n", " ".repeat(indent))),
        Node::When(c, inner) => {
            out.push_str(&format!("{{{{- if {} }}}}\n", c.template()));
            template_item(inner, indent, out);
            out.push_str("{{- end }}\n");
        }
        _ => {
            let mut item = String::new();
            template_node_entries(n, indent + 2, &mut item);
            out.push_str(&" ".repeat(indent));
            out.push_str("- ");
            out.push_str(&item[indent + 2..]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The chart includes exactly what this definition generates.
    #[test]
    fn the_charts_container_template_is_generated_from_this_definition() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../charts/regroup/templates/_container.tpl"
        );
        let on_disk = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            on_disk == chart_template(),
            "{path} is stale: run `regroup inject --emit-chart-container > {path}`"
        );
    }

    #[test]
    fn inject_reads_the_charts_defaults() {
        let c = sidecar_container(&Options::default());
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
        assert_eq!(c["resources"]["limits"]["memory"], "256Mi");
        assert_eq!(c["securityContext"]["runAsUser"], 65532);
        assert_eq!(
            c["startupProbe"],
            json!({"httpGet": {"path": "/livez", "port": "regroup-metrics"},
                   "periodSeconds": 1, "failureThreshold": 60})
        );
        assert_eq!(c["restartPolicy"], "Always");
        let mounts: Vec<&str> = c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            mounts,
            [
                "regroup-config",
                "regroup-spill",
                "regroup-upstream-sa",
                "regroup-serving"
            ]
        );
        let plain = sidecar_container(&Options {
            metrics_port: None,
            native_sidecar: false,
            ..Options::default()
        });
        for absent in [
            "ports",
            "startupProbe",
            "livenessProbe",
            "readinessProbe",
            "restartPolicy",
        ] {
            assert!(plain.get(absent).is_none(), "{absent}");
        }
    }
}
