use super::*;

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("regroup-kc-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn current_context_resolves_server_ca_and_token() {
    let dir = tmp("basic");
    std::fs::write(dir.join("ca.pem"), b"PEM").unwrap();
    let kc = dir.join("config");
    std::fs::write(
            &kc,
            "apiVersion: v1\nkind: Config\ncurrent-context: a\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443/\n    certificate-authority: ca.pem\n    extensions: []\ncontexts:\n- name: a\n  context: {cluster: c, user: u, namespace: x}\n- name: b\n  context: {cluster: c, user: v}\nusers:\n- name: u\n  user: {token: abc}\n- name: v\n  user:\n    auth-provider: {name: gcp}\npreferences: {}\n",
        )
        .unwrap();
    let r = load(&kc, None).unwrap();
    assert_eq!(r.server, "https://127.0.0.1:6443");
    assert_eq!(r.ca_pem.as_deref(), Some(&b"PEM"[..]));
    assert_eq!(r.token.as_deref(), Some("abc"));
    let e = load(&kc, Some("b")).unwrap_err();
    assert!(e.to_string().contains("gke-gcloud-auth-plugin"), "{e}");
    let e = load(&kc, Some("zzz")).unwrap_err();
    assert!(e.to_string().contains("`zzz` not found"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn token_file_is_kubectls_camel_case_field_relative_to_the_file() {
    let dir = tmp("tokenfile");
    let kc = dir.join("config");
    std::fs::write(
            &kc,
            "current-context: a\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\ncontexts: [{name: a, context: {cluster: c, user: u}}, {name: b, context: {cluster: c, user: v}}]\nusers:\n- {name: u, user: {tokenFile: tok}}\n- {name: v, user: {token-file: tok}}\n",
        )
        .unwrap();
    let r = load(&kc, None).unwrap();
    assert_eq!(r.token_file, Some(dir.join("tok")));
    let e = load(&kc, Some("b")).unwrap_err();
    assert!(e.to_string().contains("`tokenFile`"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn kubeconfig_lists_merge_first_file_wins() {
    let dir = tmp("merge");
    let a = dir.join("a");
    let b = dir.join("b");
    // a: no current-context; its cluster `c` wins over b's.
    std::fs::write(
            &a,
            "clusters: [{name: c, cluster: {server: 'http://a:1'}}]\nusers: [{name: u, user: {token: from-a}}]\n",
        )
        .unwrap();
    std::fs::write(
            &b,
            "current-context: x\nclusters: [{name: c, cluster: {server: 'http://b:1'}}, {name: d, cluster: {server: 'http://b:2'}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}, {name: y, context: {cluster: d, user: w}}]\nusers: [{name: u, user: {token: from-b}}, {name: w, user: {tokenFile: t}}]\n",
        )
        .unwrap();
    let paths = vec![a.clone(), dir.join("missing"), b.clone()];
    let r = load_merged(&paths, None).unwrap();
    assert_eq!(r.server, "http://a:1");
    assert_eq!(r.token.as_deref(), Some("from-a"));
    let r = load_merged(&paths, Some("y")).unwrap();
    assert_eq!(r.server, "http://b:2");
    assert_eq!(r.token_file, Some(dir.join("t")));
    // The first file that sets current-context wins.
    std::fs::write(&a, "current-context: y\n").unwrap();
    let r = load_merged(&paths, None).unwrap();
    assert_eq!(r.server, "http://b:2");
    assert!(load_merged(&[dir.join("nope")], None).is_err());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn impersonation_proxy_url_and_exec_are_read() {
    let dir = tmp("exec");
    let kc = dir.join("config");
    std::fs::write(
        &kc,
        r#"current-context: a
clusters:
- name: c
  cluster:
    server: https://k:6443
    insecure-skip-tls-verify: true
    proxy-url: http://proxy:3128
    disable-compression: true
    extensions:
    - name: client.authentication.k8s.io/exec
      extension: {audience: foo}
contexts: [{name: a, context: {cluster: c, user: u}}, {name: b, context: {cluster: c, user: v}}]
users:
- name: u
  user:
    as: jane
    as-uid: "42"
    as-groups: [dev, ops]
    as-user-extra: {scopes: [a, b]}
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./plugin.sh
      args: [get-token]
      env: [{name: FOO, value: bar}]
      installHint: install it
      provideClusterInfo: true
      interactiveMode: Never
- name: v
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: x, interactiveMode: Always}
"#,
    )
    .unwrap();
    let r = load(&kc, None).unwrap();
    assert_eq!(r.proxy_url.as_deref(), Some("http://proxy:3128"));
    assert!(r.disable_compression);
    let i = r.impersonate.unwrap();
    assert_eq!(i.user, "jane");
    assert_eq!(i.uid.as_deref(), Some("42"));
    assert_eq!(i.groups, ["dev", "ops"]);
    assert_eq!(i.extra["scopes"], ["a", "b"]);
    let x = r.exec.unwrap();
    assert_eq!(x.command, dir.join("./plugin.sh").display().to_string());
    assert_eq!(x.env, [("FOO".to_string(), "bar".to_string())]);
    assert_eq!(x.interactive_mode, InteractiveMode::Never);
    assert_eq!(x.cluster["server"], "https://k:6443");
    assert_eq!(x.cluster["config"]["audience"], "foo");
    let e = load(&kc, Some("b")).unwrap_err();
    assert!(e.to_string().contains("Always"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn in_cluster_at_reads_the_given_directory() {
    let dir = tmp("sa");
    std::fs::write(dir.join("ca.crt"), b"CA").unwrap();
    // The environment is process-wide: only read here, never set.
    match in_cluster_at(&dir) {
        Ok(r) => {
            assert_eq!(r.token_file, Some(dir.join("token")));
            assert_eq!(r.ca_pem.as_deref(), Some(&b"CA"[..]));
        }
        Err(e) => assert!(e.to_string().contains("KUBERNETES_SERVICE"), "{e}"),
    }
    std::fs::remove_dir_all(&dir).ok();
}
