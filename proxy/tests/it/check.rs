//! `regroup check` reports every error `regroup serve` would stop at that
//! the configuration alone decides: the chart's webhooks without a
//! backend CA (an https backend, the system roots) passes both; a backend
//! URL that `load` accepts but `serve` can't build is refused by both.

use std::path::PathBuf;
use std::process::Command;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/check")
}

fn chart_config() -> String {
    std::fs::read_to_string(dir().join("chart-webhooks-no-backend-ca.yaml")).unwrap()
}

fn check(text: &str) -> std::process::Output {
    let path = std::env::temp_dir().join(format!(
        "regroup-check-{}-{}.yaml",
        std::process::id(),
        text.len()
    ));
    std::fs::write(&path, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_regroup"))
        .args(["check", "-c", path.to_str().unwrap()])
        .output()
        .unwrap();
    std::fs::remove_file(&path).ok();
    out
}

#[test]
fn webhooks_without_a_backend_ca_use_the_system_roots_in_check_and_serve() {
    let settings = regroup_config::load(&chart_config()).unwrap();
    // What `serve` builds at start: no "no certificate-authority" any more.
    assert_eq!(
        regroup::cmd::serve::preflight(&settings),
        Vec::<String>::new()
    );
    let out = check(&chart_config());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains(": OK"));
}

#[test]
fn a_backend_serve_cant_build_is_refused_by_check() {
    let bad = chart_config().replace("https://127.0.0.1:9443/v", "https://127.0.0.1:9443 /v");
    let settings = regroup_config::load(&bad).expect("load alone accepts it");
    let problems = regroup::cmd::serve::preflight(&settings);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("webhooks.hooks v: backend:"),
        "{problems:?}"
    );
    let out = check(&bad);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("webhooks.hooks v: backend:"), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("OK"));
}
