//! `publish:` (docs/publish.md): what a configuration of publish mode must
//! hold, and what it changes in the rest of the configuration.

use regroup_config::load;

const GOOD: &str = r#"
front:
  listen: 0.0.0.0:9443
publish:
  central: {kubeconfig: /etc/regroup/central/kubeconfig}
  groups: [database.acmeco.org]
  targetNamespace: bar
"#;

fn problems(text: &str) -> String {
    match load(text) {
        Ok(_) => String::new(),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_publish_configuration_needs_no_rules_and_gets_the_defaults() {
    let s = load(GOOD).unwrap();
    let p = s.file.publish.as_ref().unwrap();
    assert_eq!(
        p.connection_secrets.fields,
        ["spec.writeConnectionSecretToRef.name"]
    );
    assert_eq!(p.connection_secrets.resync_seconds, 10);
    assert!(!p.match_namespaces);
    // No copy of an app here: no per-copy names of cluster-scoped objects.
    assert!(s.map.object_names().is_none());
    assert!(s
        .effective_table()
        .contains("database.acmeco.org -> database.acmeco.org"));
}

#[test]
fn the_rules_rename_what_is_published() {
    let text = format!(
        "{GOOD}rules:\n  - {{from: database.acmeco.org, to: database.team1.example.com}}\n"
    );
    let s = load(&text).unwrap();
    assert!(s
        .effective_table()
        .contains("database.acmeco.org -> database.team1.example.com"));
}

#[test]
fn what_publish_mode_cannot_do_without_is_said() {
    let no_front = GOOD.replace("front:\n  listen: 0.0.0.0:9443\n", "");
    assert!(problems(&no_front).contains("publish: needs `front:`"));
    let backend = GOOD.replace(
        "listen: 0.0.0.0:9443",
        "listen: 0.0.0.0:9443\n  backend: https://127.0.0.1:8443",
    );
    assert!(problems(&backend).contains("front.backend: leave it out with `publish:`"));
    let no_kubeconfig = GOOD.replace("{kubeconfig: /etc/regroup/central/kubeconfig}", "{}");
    assert!(problems(&no_kubeconfig).contains("publish.central.kubeconfig is required"));
    let nowhere = GOOD.replace("  targetNamespace: bar\n", "");
    assert!(problems(&nowhere).contains("give `targetNamespace`, or `matchNamespaces: true`"));
    let matching = GOOD.replace("  targetNamespace: bar\n", "  matchNamespaces: true\n");
    assert_eq!(problems(&matching), "");
    let no_groups = GOOD.replace("[database.acmeco.org]", "[]");
    assert!(problems(&no_groups).contains("publish.groups: name at least one group"));
    let bad_id = format!("{GOOD}  clusterId: \"-not a label\"\n");
    assert!(problems(&bad_id).contains("publish.clusterId"));
    let bad_field = format!("{GOOD}  connectionSecrets: {{fields: [spec..name]}}\n");
    assert!(problems(&bad_field).contains("is not a dotted path"));
}

#[test]
fn a_front_without_publish_still_needs_its_backend() {
    let text =
        "rules:\n  - {from: a.example.com, to: b.example.com}\nfront:\n  listen: 0.0.0.0:9443\n";
    assert!(problems(text).contains("front.backend is required"));
}
