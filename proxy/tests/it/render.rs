//! `regroup render`, through the real binary: golden output, the way back,
//! real captured objects, and errors that leave stdout empty.

use crate::common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::Value as Json;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/render")
}

fn regroup(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_regroup"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run regroup");
    let mut pipe = child.stdin.take().unwrap();
    // regroup may exit (a bad config) before reading its input.
    if let Err(e) = pipe.write_all(stdin.unwrap_or_default()) {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
    }
    drop(pipe);
    child.wait_with_output().unwrap()
}

fn config() -> String {
    dir().join("config.yaml").display().to_string()
}

fn yaml_docs(s: &[u8]) -> Vec<Json> {
    serde_saphyr::from_multiple(std::str::from_utf8(s).unwrap()).expect("valid YAML")
}

#[test]
fn render_matches_the_golden_file() {
    let input = dir().join("input.yaml").display().to_string();
    let out = regroup(&["render", "-c", &config(), "-f", &input], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let golden = dir().join("cluster.yaml");
    if std::env::var_os("REGROUP_BLESS").is_some() {
        std::fs::write(&golden, &out.stdout).unwrap();
    }
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        std::fs::read_to_string(golden).unwrap()
    );
}

#[test]
fn render_to_app_from_stdin_gives_back_the_input_documents() {
    let golden = std::fs::read(dir().join("cluster.yaml")).unwrap();
    let out = regroup(&["render", "-c", &config(), "--to-app"], Some(&golden));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let input = std::fs::read(dir().join("input.yaml")).unwrap();
    assert_eq!(yaml_docs(&out.stdout), yaml_docs(&input));
}

/// Metadata identity in manifests (cert-manager's and Kopf's keys): the
/// golden `metadata.cluster.yaml`, and back to the app's documents.
#[test]
fn render_renames_an_operators_metadata_keys_as_the_golden_file_says() {
    let config = dir().join("metadata-config.yaml").display().to_string();
    let input = dir().join("metadata.yaml");
    let out = regroup(
        &["render", "-c", &config, "-f", &input.display().to_string()],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let golden = dir().join("metadata.cluster.yaml");
    if std::env::var_os("REGROUP_BLESS").is_some() {
        std::fs::write(&golden, &out.stdout).unwrap();
    }
    let want = std::fs::read_to_string(&golden).unwrap();
    let got = String::from_utf8(out.stdout).unwrap();
    assert_eq!(got, want);
    // Only the bytes renamed changed: every line of the input is in the
    // output, the same or with a name of the copy in place of the app's
    // (comments, flow style, quoting and numbers as written).
    let input_text = std::fs::read_to_string(&input).unwrap();
    assert_eq!(got.lines().count(), input_text.lines().count());
    for (a, b) in input_text.lines().zip(got.lines()) {
        if a != b {
            assert!(b.contains("team-b"), "{a:?} became {b:?}");
            let back = b
                .replace("cert-manager.team-b.example.com", "cert-manager.io")
                .replace("kopf.team-b.example.com", "kopf.zalando.org");
            assert!(
                back == a || b.contains("team-b-") || b.contains("foo-operator-team-b"),
                "{a:?} became {b:?}"
            );
        }
    }
    // What the golden must say, whatever its layout.
    for key in [
        "cert-manager.team-b.example.com/cluster-issuer: letsencrypt-prod",
        "cert-manager.team-b.example.com/certificate-name: web",
        "controller.cert-manager.team-b.example.com/fao: \"true\"",
        "cert-manager.team-b.example.com/inject-ca-from: cert-manager/cert-manager-webhook-ca",
        "key: controller.cert-manager.team-b.example.com/fao",
        "acme.cert-manager.team-b.example.com/http01-solver: \"true\"",
        "app.kubernetes.io/managed-by: foo-operator-team-b",
        "kopf.team-b.example.com/last-handled-configuration:",
        "- kopf.team-b.example.com/KopfFinalizerMarker",
        "'acme.cert-manager.team-b.example.com'",
        // The Secret the selector excludes keeps its keys.
        "cert-manager.io/certificate-name: shared-ca",
    ] {
        assert!(want.contains(key), "{key}");
    }
    assert!(!want.contains(" cert-manager.io/cluster-issuer: "));
    let back = regroup(
        &["render", "-c", &config, "--to-app"],
        Some(want.as_bytes()),
    );
    assert!(back.status.success());
    assert_eq!(
        yaml_docs(&back.stdout),
        yaml_docs(&std::fs::read(&input).unwrap())
    );
}

/// The orig world's captured request bodies (CRD, Foo, ClusterRole, VWC,
/// APIService, Role, RoleBinding, ...), as one YAML stream, render to the
/// renamed world's request bodies.
#[test]
fn render_turns_captured_orig_objects_into_the_renamed_worlds() {
    let cases = [
        "001-create-crd",
        "002-create-foo-alpha",
        "007-create-deployment",
        "010-create-role",
        "011-create-rolebinding",
        "012-create-event-core",
        "013-create-event-eventsv1",
        "014-create-pvc",
        "015-create-hpa-v2",
        "016-create-clusterrole",
        "017-create-validatingwebhookconfiguration",
        "018-create-apiservice",
        "019-create-subjectaccessreview-jane-get",
    ];
    let world_stream = |world: &str| -> Vec<u8> {
        let mut s = Vec::new();
        for c in cases {
            let case = common::Case::load(world, c);
            s.extend_from_slice(b"---\n");
            s.extend_from_slice(case.request.as_deref().expect("request body"));
            s.push(b'\n');
        }
        s
    };
    // The worlds were captured with groups renamed and names not (the
    // ClusterRoles' names differ by world): `names:` off.
    let config_path =
        std::env::temp_dir().join(format!("regroup-render-{}.yaml", std::process::id()));
    std::fs::write(
        &config_path,
        "rules:\n- from: samplecontroller.k8s.io\n  to: samplecontroller.team1.example.com\n\
         - from: wardle.example.com\n  to: wardle.team1.example.com\n\
         names:\n  kinds: []\n",
    )
    .unwrap();
    let out = regroup(
        &["render", "-c", config_path.to_str().unwrap()],
        Some(&world_stream("orig")),
    );
    std::fs::remove_file(&config_path).ok();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = yaml_docs(&out.stdout);
    let want = yaml_docs(&world_stream("renamed"));
    assert_eq!(got.len(), cases.len());
    for ((g, w), case) in got.iter().zip(&want).zip(cases) {
        // The worlds differ only by group, the world's name and owner uids.
        let g = without_uids(g)
            .replace("\"orig\"", "\"renamed\"")
            .replace("-orig\"", "-renamed\"");
        assert_eq!(g, without_uids(w), "{case}");
    }
}

fn without_uids(v: &Json) -> String {
    fn mask(v: &mut Json) {
        match v {
            Json::Object(m) => {
                for (k, c) in m.iter_mut() {
                    if k == "uid" {
                        *c = Json::Null;
                    } else {
                        mask(c);
                    }
                }
            }
            Json::Array(a) => a.iter_mut().for_each(mask),
            _ => {}
        }
    }
    let mut v = v.clone();
    mask(&mut v);
    serde_json::to_string(&v).unwrap()
}

#[test]
fn render_accepts_a_json_stream_and_a_json_array() {
    let json = br#"{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo","metadata":{"name":"a"}}
[{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"r"},"rules":[{"apiGroups":["samplecontroller.k8s.io"]}]}]"#;
    let out = regroup(&["render", "-c", &config(), "-f", "-"], Some(json));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docs = yaml_docs(&out.stdout);
    assert_eq!(docs.len(), 2);
    assert_eq!(
        docs[0]["apiVersion"],
        "samplecontroller.team1.example.com/v1alpha1"
    );
    assert_eq!(
        docs[1]["rules"][0]["apiGroups"][0],
        "samplecontroller.team1.example.com"
    );
}

fn assert_fails(input: &str, expect: &[&str]) {
    let out = regroup(&["render", "-c", &config()], Some(input.as_bytes()));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "should fail");
    assert!(
        out.stdout.is_empty(),
        "nothing partial on stdout: {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    for e in expect {
        assert!(err.contains(e), "stderr should mention {e:?}:\n{err}");
    }
}

#[test]
fn render_rejects_invalid_yaml_naming_document_and_line() {
    let input = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\n---\nkind: Foo\nmetadata: [unclosed\n";
    assert_fails(input, &["document 3", "line 9"]);
}

#[test]
fn render_rejects_documents_that_are_not_objects() {
    assert_fails(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n- just\n- a list\n",
        &["document 2", "line 5", "expected a Kubernetes object"],
    );
    assert_fails(
        "apiVersion: v1\nkind: ConfigMap\n---\nmetadata: {name: a}\n",
        &["document 2", "`apiVersion` and `kind` are required"],
    );
}

#[test]
fn render_rejects_invalid_json_naming_document() {
    assert_fails(
        "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\"}\n{\"apiVersion\": \n",
        &["document 2", "invalid JSON"],
    );
}

#[test]
fn render_fails_on_a_bad_config() {
    let path = std::env::temp_dir().join(format!("regroup-bad-{}.yaml", std::process::id()));
    std::fs::write(&path, "rules:\n- from: apps\n  to: apps.example.com\n").unwrap();
    let out = regroup(&["render", "-c", path.to_str().unwrap()], Some(b"{}"));
    std::fs::remove_file(&path).ok();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 2"));
}

#[test]
fn check_prints_the_effective_table_or_fails_with_status_1() {
    let out = regroup(&["check", "-c", &config()], None);
    assert!(out.status.success());
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("samplecontroller.k8s.io"));
    assert!(table.contains("*.pinniped.team1.example.com"));
    assert!(table.contains("spec.identityProviders[].objectRef.apiGroup"));

    let path = std::env::temp_dir().join(format!("regroup-check-{}.yaml", std::process::id()));
    std::fs::write(
        &path,
        "rules:\n- from: a.example.com\n  to: b.example.com\n  bogus: 1\n",
    )
    .unwrap();
    let out = regroup(&["check", "-c", path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bogus"));

    // `names:`: the table says which names change and which never do; a
    // kind it can't rename is refused with the ones it can.
    let names = "rules:\n- from: a.example.com\n  to: b.example.com\nnames:\n  prefix: team1-\n  kinds: [ClusterRole]\n  keep: [shared]\n";
    std::fs::write(&path, names).unwrap();
    let out = regroup(&["check", "-c", path.to_str().unwrap()], None);
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success());
    assert!(
        table.contains("\nNAMES  NAME -> team1-NAME\nrbac.authorization.k8s.io/ClusterRole\n(kept as they are: system:*, cluster-admin, admin, edit, view, system-cluster-critical, system-node-critical, shared)\n"),
        "{table}"
    );
    std::fs::write(&path, names.replace("ClusterRole]", "StorageClass]")).unwrap();
    let out = regroup(&["check", "-c", path.to_str().unwrap()], None);
    std::fs::remove_file(&path).ok();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 5: names.kinds: `StorageClass` is not supported; the supported kinds are ClusterRole, ClusterRoleBinding,"),
        "{err}"
    );
}

#[test]
fn render_changes_only_the_group_bearing_scalars() {
    // YAML 1.1 and 1.2 readers disagree on `n`, `y`, `0644` and `1e3`:
    // render must leave them, and comments and flow style, as written.
    let input = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: n}\nspec:\n  template:\n    spec:\n      containers:\n      - name: c\n        env:\n        - {name: A, value: y}\n        - name: B\n          value: 1e3\n      volumes:\n      - secret: {secretName: s, defaultMode: 0644}\n---\n# the app's role\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: r   # a comment\nrules:\n- apiGroups: [\"samplecontroller.k8s.io\", 'wardle.example.com', apps]\n  resources: [foos]\n  verbs: [get]\n";
    let out = regroup(&["render", "-c", &config()], Some(input.as_bytes()));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = input
        .replace(
            "\"samplecontroller.k8s.io\"",
            "\"samplecontroller.team1.example.com\"",
        )
        .replace("'wardle.example.com'", "'wardle.team1.example.com'");
    assert_ne!(want, input);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), want);
}

/// CEL string literals that are exactly a mapped name are renamed
/// (docs/config.md, "CRD values, CEL, short names and categories");
/// `render` and `check -f` say where an expression still names a mapped
/// group another way, on standard error; the output is still rendered, and
/// text that merely looks like CEL elsewhere (a ConfigMap's `expression`
/// key) is not reported.
#[test]
fn cel_expressions_naming_mapped_groups_are_warned_about() {
    let input = dir().join("cel.yaml").display().to_string();
    let expected = [
        "document 3 (line 34): CustomResourceDefinition foos.samplecontroller.k8s.io: spec.versions[0].schema.openAPIV3Schema.properties.spec.x-kubernetes-validations[0].rule names wardle.example.com",
    ];
    for args in [
        vec!["render", "-c", &config(), "-f", &input],
        vec!["check", "-c", &config(), "-f", &input],
    ] {
        let out = regroup(&args, None);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stderr = String::from_utf8(out.stderr).unwrap();
        let warnings: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("warning: "))
            .collect();
        assert_eq!(warnings.len(), expected.len(), "{args:?}: {stderr}");
        for (w, e) in warnings.iter().zip(expected) {
            let want = format!("warning: {input}: {e}");
            assert!(w.starts_with(&want), "{w}\nwanted {want}");
        }
        assert!(!stderr.contains("plain"), "{stderr}");
    }
    // Rendered all the same: whole literals renamed, the rest as written.
    let out = regroup(&["render", "-c", &config(), "-f", &input], None);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("apiGroups: [samplecontroller.team1.example.com]"));
    for want in [
        "o.apiVersion == 'samplecontroller.team1.example.com/v1alpha1'",
        "authorizer.group('login.concierge.pinniped.team1.example.com')",
        "request.resource.group == 'samplecontroller.team1.example.com'",
        "startsWith('wardle.example.com/')",
        "in ['wardle.team1.example.com/v1alpha1', \\\"v1\\\"]",
        "enum: [samplecontroller.team1.example.com, wardle.team1.example.com, apps, samplecontroller.k8s.io.old]",
        "default: wardle.team1.example.com",
        "'owner must be a Foo'",
    ] {
        assert!(text.contains(want), "{want}\n{text}");
    }
    // A manifest without CEL naming a group: no warning.
    let plain = dir().join("input.yaml").display().to_string();
    let out = regroup(&["render", "-c", &config(), "-f", &plain], None);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("warning"));
}

/// `names.shortNamePrefix`: the renamed group's CRD gets the copy's short
/// names and categories (`all` kept), another operator's CRD is left, as
/// the golden `short-names.cluster.yaml` says; rendering it again changes
/// nothing, and `--to-app` gives back the input documents.
#[test]
fn render_gives_the_copys_crd_its_own_short_names_and_categories() {
    let config = dir().join("short-names-config.yaml").display().to_string();
    let input = dir().join("short-names.yaml");
    let out = regroup(
        &["render", "-c", &config, "-f", &input.display().to_string()],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let golden = dir().join("short-names.cluster.yaml");
    if std::env::var_os("REGROUP_BLESS").is_some() {
        std::fs::write(&golden, &out.stdout).unwrap();
    }
    let want = std::fs::read_to_string(&golden).unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), want);
    let docs = yaml_docs(want.as_bytes());
    let names = |i: usize| docs[i]["spec"]["names"].clone();
    assert_eq!(
        names(0)["shortNames"],
        serde_json::json!(["t1-fo", "t1-foos-short"])
    );
    assert_eq!(
        names(0)["categories"],
        serde_json::json!(["all", "t1-samplecontroller"])
    );
    assert_eq!(names(1)["shortNames"], serde_json::json!(["cert", "certs"]));
    assert_eq!(names(1)["categories"], serde_json::json!(["cert-manager"]));
    let again = regroup(&["render", "-c", &config], Some(want.as_bytes()));
    assert!(again.status.success());
    assert_eq!(String::from_utf8(again.stdout).unwrap(), want);
    let back = regroup(
        &["render", "-c", &config, "--to-app"],
        Some(want.as_bytes()),
    );
    assert!(back.status.success());
    assert_eq!(
        yaml_docs(&back.stdout),
        yaml_docs(&std::fs::read(&input).unwrap())
    );
}

/// A CRD in External Secrets' shape (a label under a ruled metadata
/// prefix, comments, long descriptions, flow style) and a workload with an
/// octal mode: `render` changes only the renamed bytes, every other byte of
/// the document kept.
#[test]
fn render_changes_only_the_renamed_bytes_of_a_crd_and_a_workload() {
    let config = "rules:\n  - from: external-secrets.io\n    to: external-secrets.team-b.example.com\nmetadata:\n  fromRules: true\n";
    let input = r#"# Source: external-secrets/templates/crds/externalsecret.yaml
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  annotations:
    controller-gen.kubebuilder.io/version: v0.16.4
  labels:
    external-secrets.io/component: controller   # what the chart's selector picks
  name: "externalsecrets.external-secrets.io"
spec:
  group: external-secrets.io
  names: {kind: ExternalSecret, plural: externalsecrets, shortNames: [es]}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          description: >-
            ExternalSecret is the Schema for the external-secrets API. It
            fetches secrets from a provider and writes them to a Secret.
          type: object
          x-kubernetes-preserve-unknown-fields: true
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: external-secrets
  labels: {external-secrets.io/component: controller, app: eso}
spec:
  selector: {matchLabels: {app: eso}}
  template:
    metadata: {labels: {app: eso}}
    spec:
      containers: [{name: eso, image: "ghcr.io/external-secrets/external-secrets:v0.10.0"}]
      volumes:
        - name: certs
          secret: {secretName: eso-webhook, defaultMode: 0644}
"#;
    let want = input
        .replace(
            "    external-secrets.io/component: controller   #",
            "    external-secrets.team-b.example.com/component: controller   #",
        )
        .replace(
            "  name: \"externalsecrets.external-secrets.io\"",
            "  name: \"externalsecrets.external-secrets.team-b.example.com\"",
        )
        .replace(
            "  group: external-secrets.io\n",
            "  group: external-secrets.team-b.example.com\n",
        )
        .replace(
            "labels: {external-secrets.io/component: controller, app: eso}",
            "labels: {external-secrets.team-b.example.com/component: controller, app: eso}",
        );
    let dir = std::env::temp_dir().join(format!("regroup-render-bytes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("config.yaml");
    std::fs::write(&cfg, config).unwrap();
    let out = regroup(
        &["render", "-c", cfg.to_str().unwrap(), "-f", "-"],
        Some(input.as_bytes()),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap(), want);
    let _ = std::fs::remove_dir_all(&dir);
}
