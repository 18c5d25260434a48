//! `regroup inject`: golden files (`tests/inject/NAME.yaml` in,
//! `tests/inject/NAME.out.yaml` expected; `REGROUP_BLESS=1` rewrites them),
//! idempotence, and the generated serving Secret.

use std::path::PathBuf;

use regroup::cmd::inject::{inject, Options};
use serde_json::Value as Json;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/inject")
}

fn config_text() -> String {
    std::fs::read_to_string(dir().join("config.yaml")).unwrap()
}

fn run(input: &str, opts: &Options) -> String {
    run_with(input, &config_text(), opts)
}

fn run_with(input: &str, text: &str, opts: &Options) -> String {
    let settings = regroup_config::load(text).unwrap();
    inject(input, text, &settings, opts).unwrap()
}

/// The goldens name an existing Secret, so that nothing random is written.
fn golden_opts() -> Options {
    Options {
        tls_secret: Some("team-b-regroup-serving".into()),
        ..Options::default()
    }
}

fn docs(yaml: &str) -> Vec<Json> {
    serde_saphyr::from_multiple::<Json>(yaml)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

fn golden(name: &str) {
    golden_with(name, &config_text());
}

/// [`golden`] with another configuration.
fn golden_with(name: &str, config: &str) {
    golden_with_opts(name, config, golden_opts());
}

fn golden_with_opts(name: &str, config: &str, opts: Options) {
    let golden_opts = || opts.clone();
    let run = |input: &str, opts: &Options| run_with(input, config, opts);
    let input = std::fs::read_to_string(dir().join(format!("{name}.yaml"))).unwrap();
    let out = run(&input, &golden_opts());
    let path = dir().join(format!("{name}.out.yaml"));
    if std::env::var_os("REGROUP_BLESS").is_some() {
        std::fs::write(&path, &out).unwrap();
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (REGROUP_BLESS=1 writes it)", path.display()));
    assert_eq!(out, want, "{name}: output differs from {}", path.display());
    // Idempotent: injecting the output again changes nothing.
    assert_eq!(run(&out, &golden_opts()), out, "{name}: not idempotent");
}

#[test]
fn golden_deployment() {
    golden("deployment");
}

#[test]
fn golden_statefulset() {
    golden("statefulset");
}

#[test]
fn golden_cronjob() {
    golden("cronjob");
}

#[test]
fn golden_list() {
    golden("list");
}

/// With `metadata:` rules (cert-manager's and Kopf's keys): the pod
/// template's labels, the selectors, the Service's selector and the keys of
/// the objects beside the workload.
#[test]
fn golden_cert_manager_with_metadata_rules() {
    let config = std::fs::read_to_string(dir().join("metadata-config.yaml")).unwrap();
    // cert-manager's webhook makes its own certificate and its Service is
    // not in these manifests: it can't be wired through regroup.
    let opts = Options {
        skip_unwired_webhooks: true,
        ..golden_opts()
    };
    golden_with_opts("cert-manager", &config, opts);
    let out = std::fs::read_to_string(dir().join("cert-manager.out.yaml")).unwrap();
    let d = docs(&out);
    let deploy = d.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let template = &deploy["spec"]["template"]["metadata"];
    assert_eq!(
        template["labels"]["controller.cert-manager.team-b.example.com/fao"],
        "true"
    );
    assert_eq!(
        deploy["spec"]["selector"]["matchLabels"]["app.kubernetes.io/managed-by"],
        "foo-operator-team-b"
    );
    assert!(template["annotations"]
        .get("kopf.team-b.example.com/last-handled-configuration")
        .is_some());
    let svc = d.iter().find(|d| d["kind"] == "Service").unwrap();
    assert_eq!(
        svc["spec"]["selector"]["controller.cert-manager.team-b.example.com/fao"],
        "true"
    );
    let hook = d
        .iter()
        .find(|d| d["kind"] == "MutatingWebhookConfiguration")
        .unwrap();
    assert!(hook["metadata"]["annotations"]
        .get("cert-manager.team-b.example.com/inject-ca-from")
        .is_some());
    // The sidecar renames as the manifests were: same names and metadata.
    let cm = d
        .iter()
        .find(|d| d["metadata"]["name"] == "regroup-config")
        .unwrap();
    let sidecar = regroup_config::load(cm["data"]["config.yaml"].as_str().unwrap()).unwrap();
    let m = sidecar.map.metadata().unwrap();
    assert_eq!(m.prefixes().len(), 2);
    assert_eq!(m.exclusions().len(), 1);
    assert_eq!(
        sidecar
            .map
            .object_names()
            .unwrap()
            .to_cluster("x")
            .as_deref(),
        Some("team-b-x")
    );
}

fn pod_spec<'a>(doc: &'a Json, path: &str) -> &'a Json {
    doc.pointer(path).unwrap()
}

#[test]
fn deployment_is_wrapped_renamed_and_overridden() {
    let input = std::fs::read_to_string(dir().join("deployment.yaml")).unwrap();
    let out = docs(&run(&input, &golden_opts()));
    let kinds: Vec<&str> = out.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "ServiceAccount",
            "ClusterRole",
            "Deployment",
            "Foo",
            "ConfigMap"
        ]
    );
    assert_eq!(
        out[1]["rules"][0]["apiGroups"][0],
        "samplecontroller.team-b.example.com"
    );
    assert_eq!(
        out[3]["apiVersion"],
        "samplecontroller.team-b.example.com/v1alpha1"
    );
    let spec = pod_spec(&out[2], "/spec/template/spec");
    assert_eq!(spec["automountServiceAccountToken"], false);
    assert_eq!(spec["initContainers"][0]["name"], "regroup");
    assert_eq!(spec["initContainers"][0]["restartPolicy"], "Always");
    let app = &spec["containers"][0];
    let env: Vec<(String, String)> = app["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["value"].as_str().unwrap_or("<from>").to_string(),
            )
        })
        .collect();
    assert_eq!(
        env,
        [
            ("KUBERNETES_SERVICE_HOST".into(), "127.0.0.1".into()),
            ("KUBERNETES_SERVICE_PORT".into(), "6443".into()),
            ("KUBERNETES_SERVICE_PORT_HTTPS".into(), "6443".into()),
            ("WATCH_NAMESPACE".into(), "<from>".into()),
        ]
    );
    // the app's own service-account mount is replaced by regroup's volume
    let mounts = app["volumeMounts"].as_array().unwrap();
    assert_eq!(mounts.len(), 2);
    assert_eq!(mounts[0]["name"], "regroup-app-sa");
    assert_eq!(
        mounts[0]["mountPath"],
        "/var/run/secrets/kubernetes.io/serviceaccount"
    );
    let cm = &out[4];
    assert_eq!(cm["metadata"]["namespace"], "team-b");
    let config = cm["data"]["config.yaml"].as_str().unwrap();
    let settings = regroup_config::load(config).expect("the sidecar's config is valid");
    assert!(settings.file.upstream.in_cluster);
    assert!(config.contains("level: debug"), "{config}");
}

#[test]
fn generates_a_serving_secret_once_per_namespace() {
    let input = std::fs::read_to_string(dir().join("list.yaml")).unwrap()
        + "\n---\n"
        + &std::fs::read_to_string(dir().join("statefulset.yaml")).unwrap();
    let out = run(&input, &Options::default());
    let all = docs(&out);
    let secrets: Vec<&Json> = all.iter().filter(|d| d["kind"] == "Secret").collect();
    assert_eq!(secrets.len(), 2, "one for team-b, one for no namespace");
    assert_eq!(secrets[0]["metadata"]["namespace"], "team-b");
    assert!(secrets[1]["metadata"].get("namespace").is_none());
    use base64::Engine as _;
    for s in &secrets {
        assert_eq!(s["metadata"]["name"], "regroup-serving");
        for key in ["ca.crt", "tls.crt", "tls.key"] {
            let pem = base64::engine::general_purpose::STANDARD
                .decode(s["data"][key].as_str().unwrap())
                .unwrap();
            assert!(pem.starts_with(b"-----BEGIN "), "{key}");
        }
    }
    // the second pass keeps the Secrets (and everything else) as they are
    assert_eq!(run(&out, &Options::default()), out);
}

#[test]
fn only_the_kinds_and_names_asked_for() {
    let input = std::fs::read_to_string(dir().join("list.yaml")).unwrap();
    let opts = Options {
        kinds: vec!["Pod".into()],
        ..golden_opts()
    };
    let out = docs(&run(&input, &opts));
    let items = out[0]["items"].as_array().unwrap();
    assert!(items[0]["spec"]["template"]["spec"]
        .get("initContainers")
        .is_none());
    assert_eq!(items[1]["spec"]["initContainers"][0]["name"], "regroup");
    let opts = Options {
        names: vec!["nothing-by-this-name".into()],
        ..golden_opts()
    };
    let out = docs(&run(&input, &opts));
    assert_eq!(out.len(), 1, "nothing wrapped, no ConfigMap");
}

#[test]
fn without_native_sidecars_regroup_is_the_last_container() {
    let input = std::fs::read_to_string(dir().join("cronjob.yaml")).unwrap();
    let opts = Options {
        native_sidecar: false,
        metrics_port: None,
        ..golden_opts()
    };
    let out = docs(&run(&input, &opts));
    let spec = pod_spec(&out[0], "/spec/jobTemplate/spec/template/spec");
    assert!(spec.get("initContainers").is_none());
    let regroup = &spec["containers"][1];
    assert_eq!(regroup["name"], "regroup");
    assert!(regroup.get("restartPolicy").is_none());
    assert!(regroup.get("livenessProbe").is_none());
}

#[test]
fn the_binary_reads_files_directories_and_stdin() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let tmp = std::env::temp_dir().join(format!("regroup-inject-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    for name in ["cronjob", "statefulset"] {
        std::fs::copy(
            dir().join(format!("{name}.yaml")),
            tmp.join(format!("{name}.yaml")),
        )
        .unwrap();
    }
    std::fs::write(tmp.join("README.md"), "not a manifest").unwrap();
    let bin = env!("CARGO_BIN_EXE_regroup");
    let config = dir().join("config.yaml");
    let from_dir = Command::new(bin)
        .args(["inject", "--tls-secret", "x", "-c"])
        .arg(&config)
        .arg("-f")
        .arg(&tmp)
        .output()
        .unwrap();
    assert!(
        from_dir.status.success(),
        "{}",
        String::from_utf8_lossy(&from_dir.stderr)
    );
    let out = docs(std::str::from_utf8(&from_dir.stdout).unwrap());
    let kinds: Vec<&str> = out.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["CronJob", "StatefulSet", "ConfigMap", "ConfigMap"]);

    let mut child = Command::new(bin)
        .args(["inject", "--tls-secret", "x", "-c"])
        .arg(&config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&std::fs::read(dir().join("cronjob.yaml")).unwrap())
        .unwrap();
    let piped = child.wait_with_output().unwrap();
    assert!(piped.status.success());
    let files = Command::new(bin)
        .args(["inject", "--tls-secret", "x", "-c"])
        .arg(&config)
        .arg("-f")
        .arg(dir().join("cronjob.yaml"))
        .output()
        .unwrap();
    assert_eq!(piped.stdout, files.stdout);
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn golden_helm_create_chart() {
    golden("helm-create");
}

fn input(name: &str) -> String {
    std::fs::read_to_string(dir().join(format!("{name}.yaml"))).unwrap()
}

fn inject_err(name: &str, opts: &Options) -> String {
    let text = config_text();
    let settings = regroup_config::load(&text).unwrap();
    inject(&input(name), &text, &settings, opts)
        .unwrap_err()
        .to_string()
}

#[test]
fn a_port_clash_with_any_container_or_init_container_is_refused_and_named() {
    let err = inject_err("port-clash", &golden_opts());
    assert!(err.contains("Deployment clash: port clash"), "{err}");
    assert!(
        err.contains("container `setup` declares containerPort 6443, which is regroup's TLS listener (pass --tls-port with a free port)"),
        "{err}"
    );
    assert!(
        err.contains("container `app` declares containerPort 9090, which is regroup's metrics listener (pass --metrics-port with a free port)"),
        "{err}"
    );
    assert!(!err.contains("8080"), "{err}");
    // Moved out of the way, it is wrapped.
    let opts = Options {
        tls_port: 7443,
        metrics_port: Some(9091),
        ..golden_opts()
    };
    let out = docs(&run(&input("port-clash"), &opts));
    assert_eq!(
        pod_spec(&out[0], "/spec/template/spec")["initContainers"][0]["name"],
        "regroup"
    );
}

#[test]
fn golden_bypass_warns_and_strict_refuses() {
    golden("bypass");
    let text = config_text();
    let settings = regroup_config::load(&text).unwrap();
    let (_, warnings) = regroup::cmd::inject::inject_with_warnings(
        &input("bypass"),
        &text,
        &settings,
        &golden_opts(),
    )
    .unwrap();
    let expect = [
        "Deployment bypass: container `controller` sets KUBECONFIG",
        "Deployment bypass: container `kubectl` passes `--server`",
        "Deployment bypass: container `script` passes `--kubeconfig`",
    ];
    assert_eq!(warnings.len(), expect.len(), "{warnings:?}");
    for (w, e) in warnings.iter().zip(expect) {
        assert!(w.starts_with(e) && w.contains("bypassing regroup"), "{w}");
    }
    let strict = Options {
        strict: true,
        ..golden_opts()
    };
    let err = inject_err("bypass", &strict);
    assert!(
        err.contains("container `controller` sets KUBECONFIG") && err.contains("--strict"),
        "{err}"
    );
}

#[test]
fn golden_opt_out_annotation_on_the_workload_or_the_pod_template() {
    golden("opt-out");
    let out = docs(&run(&input("opt-out"), &golden_opts()));
    assert!(pod_spec(&out[0], "/spec/template/spec")
        .get("initContainers")
        .is_none());
    assert!(pod_spec(&out[1], "/spec/jobTemplate/spec/template/spec")
        .get("initContainers")
        .is_none());
    assert_eq!(out[2]["spec"]["initContainers"][0]["name"], "regroup");
    assert_eq!(
        out[3]["apiVersion"],
        "samplecontroller.team-b.example.com/v1alpha1"
    );
}

#[test]
fn helm_test_hooks_are_left_alone_unless_asked() {
    let find_test_pod = |out: &[Json]| -> Json {
        out.iter()
            .find(|d| d.pointer("/metadata/annotations/helm.sh~1hook") == Some(&Json::from("test")))
            .cloned()
            .expect("the chart's test pod")
    };
    let out = docs(&run(&input("helm-create"), &golden_opts()));
    assert!(find_test_pod(&out)["spec"].get("initContainers").is_none());
    let opts = Options {
        helm_tests: true,
        ..golden_opts()
    };
    let out = docs(&run(&input("helm-create"), &opts));
    assert_eq!(
        find_test_pod(&out)["spec"]["initContainers"][0]["name"],
        "regroup"
    );
}

/// The sidecar renames exactly as the manifests were rendered: a
/// configuration's `names:` and `metadata:` reach the sidecar's ConfigMap,
/// and the configuration it loads there has the same rules.
#[test]
fn the_sidecar_config_keeps_names_and_metadata() {
    let text = "
rules:
  - {from: cert-manager.io, to: cert-manager.team-b.example.com}
names:
  prefix: team-b-
  keep: [shared-reader]
metadata:
  prefixes:
    - {from: cert-manager.io, to: cert-manager.team-b.example.com}
  values:
    - {key: app.kubernetes.io/managed-by, from: cert-manager, to: cert-manager-team-b}
  exclude:
    - {kind: Secret, name: keep-me}
";
    let settings = regroup_config::load(text).unwrap();
    let input = std::fs::read_to_string(dir().join("deployment.yaml")).unwrap();
    let out = inject(&input, text, &settings, &golden_opts()).unwrap();
    let all = docs(&out);
    let cm = all
        .iter()
        .find(|d| d["kind"] == "ConfigMap")
        .expect("the sidecar's ConfigMap");
    let inner = cm["data"]["config.yaml"].as_str().unwrap();
    let loaded = regroup_config::load(inner).unwrap();
    assert_eq!(loaded.map.metadata(), settings.map.metadata());
    assert!(
        loaded.map.metadata().is_some(),
        "metadata rules reached the sidecar"
    );
    let rename = |s: &regroup_config::Settings| {
        let names = s.map.object_names().expect("names are on");
        (
            names.to_cluster("foo-viewer"),
            names.to_cluster("shared-reader"),
        )
    };
    assert_eq!(rename(&loaded), rename(&settings));
    assert_eq!(
        rename(&loaded),
        (Some("team-b-foo-viewer".to_owned()), None)
    );
}

/// A pod's `defaultMode: 0644` is octal as kubectl and Helm read YAML
/// (420): `inject`, which writes the documents it wraps anew, must not
/// turn it into `644.0`, which the apiserver refuses.
#[test]
fn an_octal_mode_stays_the_mode_it_means() {
    let input = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x, namespace: a}\nspec:\n  selector: {matchLabels: {app: x}}\n  template:\n    metadata: {labels: {app: x}}\n    spec:\n      containers: [{name: c, image: i}]\n      volumes:\n        - name: v\n          secret: {secretName: s, defaultMode: 0644}\n";
    let out = run(input, &golden_opts());
    let d = docs(&out);
    let deploy = d.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let vols = deploy["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap();
    let v = vols.iter().find(|v| v["name"] == "v").unwrap();
    assert_eq!(v["secret"]["defaultMode"], 420, "{out}");
    assert!(!out.contains("644.0"), "{out}");
}

/// An operator's webhooks go through regroup's webhook listener: its
/// Service targets the listener, the sidecar serves the certificate the app
/// mounts and forwards each path to the app on loopback, from a
/// configuration of the workload's own; the registrations (and their
/// caBundle, kept by cainjector) are renamed only as `render` renames them.
#[test]
fn an_operators_webhooks_are_sent_through_regroup() {
    let input = std::fs::read_to_string(dir().join("webhook-operator.yaml")).unwrap();
    let settings = regroup_config::load(&config_text()).unwrap();
    let (out, warnings) = regroup::cmd::inject::inject_with_warnings(
        &input,
        &config_text(),
        &settings,
        &golden_opts(),
    )
    .unwrap();
    let d = docs(&out);
    let svc = d.iter().find(|d| d["kind"] == "Service").unwrap();
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], 9444, "{out}");
    let deploy = d.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let spec = &deploy["spec"]["template"]["spec"];
    let regroup = spec["initContainers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "regroup")
        .unwrap();
    assert!(regroup["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["name"] == "cert" && m["mountPath"] == "/etc/regroup/webhook-serving"));
    assert!(regroup["ports"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["containerPort"] == 9444));
    let config_volume = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "regroup-config")
        .unwrap();
    assert_eq!(
        config_volume["configMap"]["name"],
        "regroup-config-controller-manager"
    );
    let cm = d
        .iter()
        .find(|d| {
            d["kind"] == "ConfigMap" && d["metadata"]["name"] == "regroup-config-controller-manager"
        })
        .expect("the workload's own configuration");
    let text = cm["data"]["config.yaml"].as_str().unwrap();
    let sidecar = regroup_config::load(text).expect("a valid sidecar configuration");
    let w = sidecar.file.webhooks.as_ref().unwrap();
    assert_eq!(w.listen.port(), 9444);
    let hooks: Vec<(String, String)> = w
        .hooks
        .iter()
        .map(|h| (h.value.served_path(), h.value.backend.clone()))
        .collect();
    assert_eq!(
        hooks,
        [
            (
                "/validate-samplecontroller-k8s-io-v1alpha1-foo".to_string(),
                "https://127.0.0.1:9443/validate-samplecontroller-k8s-io-v1alpha1-foo".to_string()
            ),
            (
                "/mutate-samplecontroller-k8s-io-v1alpha1-foo".to_string(),
                "https://127.0.0.1:9443/mutate-samplecontroller-k8s-io-v1alpha1-foo".to_string()
            ),
            (
                "/convert".to_string(),
                "https://127.0.0.1:9443/convert".to_string()
            ),
        ]
    );
    // The registrations are renamed as render renames them; the Service
    // they name is the same.
    let vwc = d
        .iter()
        .find(|d| d["kind"] == "ValidatingWebhookConfiguration")
        .unwrap();
    assert_eq!(
        vwc["webhooks"][0]["clientConfig"]["service"]["name"],
        "webhook-service"
    );
    assert_eq!(
        vwc["webhooks"][0]["rules"][0]["apiGroups"][0],
        "samplecontroller.team-b.example.com"
    );
    assert!(
        warnings.iter().any(|w| w.contains("go through regroup")),
        "{warnings:?}"
    );
    // Injecting the output again changes nothing.
    assert_eq!(run(&out, &golden_opts()), out);
}

/// A webhook regroup can't front (the app makes its own certificate, its
/// Service is elsewhere) is refused, naming it, unless told to leave it.
#[test]
fn a_webhook_that_cant_be_wired_is_refused_or_left_with_a_warning() {
    let input = std::fs::read_to_string(dir().join("cert-manager.yaml")).unwrap();
    let config = std::fs::read_to_string(dir().join("metadata-config.yaml")).unwrap();
    let settings = regroup_config::load(&config).unwrap();
    let e = regroup::cmd::inject::inject_with_warnings(&input, &config, &settings, &golden_opts())
        .unwrap_err()
        .to_string();
    assert!(e.contains("webhook.cert-manager.io"), "{e}");
    assert!(e.contains("--skip-unwired-webhooks"), "{e}");
    let opts = Options {
        skip_unwired_webhooks: true,
        ..golden_opts()
    };
    let (_, warnings) =
        regroup::cmd::inject::inject_with_warnings(&input, &config, &settings, &opts).unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("webhook left calling the app directly")),
        "{warnings:?}"
    );
}

/// An app that makes its serving certificate itself from a CA it keeps in
/// a Secret (cert-manager's webhook): regroup's listener gets a certificate
/// it issues from that CA, mounted from the Secret (optional: the app
/// creates it once it runs), for the names kube-apiserver calls the
/// Service by; the caBundle injected from the Secret verifies it.
#[test]
fn a_webhook_that_makes_its_certificate_from_a_ca_secret_is_wired_through_regroup() {
    let input = std::fs::read_to_string(dir().join("dynamic-ca-webhook.yaml")).unwrap();
    let settings = regroup_config::load(&config_text()).unwrap();
    let (out, warnings) = regroup::cmd::inject::inject_with_warnings(
        &input,
        &config_text(),
        &settings,
        &golden_opts(),
    )
    .unwrap();
    let d = docs(&out);
    let svc = d.iter().find(|d| d["kind"] == "Service").unwrap();
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], 9444, "{out}");
    let deploy = d.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let spec = &deploy["spec"]["template"]["spec"];
    let ca_volume = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "regroup-webhook-ca")
        .expect("the CA Secret as a volume");
    assert_eq!(ca_volume["secret"]["secretName"], "cm-webhook-ca");
    assert_eq!(ca_volume["secret"]["optional"], true);
    let regroup = spec["initContainers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "regroup")
        .unwrap();
    assert!(regroup["volumeMounts"].as_array().unwrap().iter().any(|m| {
        m["name"] == "regroup-webhook-ca" && m["mountPath"] == "/etc/regroup/webhook-serving"
    }));
    let cm = d
        .iter()
        .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == "regroup-config-cm-webhook")
        .expect("the workload's own configuration");
    let sidecar = regroup_config::load(cm["data"]["config.yaml"].as_str().unwrap())
        .expect("a valid sidecar configuration");
    let w = sidecar.file.webhooks.as_ref().unwrap();
    assert!(w.cert_file.is_none());
    let from = w.issue_from.as_ref().expect("issued from the app's CA");
    assert_eq!(
        from.ca_cert_file,
        PathBuf::from("/etc/regroup/webhook-serving/tls.crt")
    );
    assert!(from
        .dns_names
        .contains(&"cm-webhook.cm-team-b.svc".to_string()));
    assert_eq!(w.hooks[0].value.backend, "https://127.0.0.1:10250/validate");
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("issued from the app's CA (Secret cm-webhook-ca)")),
        "{warnings:?}"
    );
    // Injecting the output again changes nothing.
    assert_eq!(run(&out, &golden_opts()), out);

    // A CA Secret of another namespace can't be mounted: refused, said why.
    let elsewhere = input.replace(
        "--dynamic-serving-ca-secret-namespace=$(POD_NAMESPACE)",
        "--dynamic-serving-ca-secret-namespace=cert-manager",
    );
    let e = regroup::cmd::inject::inject_with_warnings(
        &elsewhere,
        &config_text(),
        &settings,
        &golden_opts(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("is in namespace cert-manager"), "{e}");
}
