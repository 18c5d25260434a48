use super::*;

#[test]
fn impersonation_replaces_the_apps_headers_as_client_go_sends_them() {
    let mut extra = std::collections::BTreeMap::new();
    extra.insert(
        "scopes.example.com/Key x".to_string(),
        vec!["a".into(), "b".into()],
    );
    let up = Upstream::new(
        &Resolved {
            server: "http://127.0.0.1:1".into(),
            token: Some("t".into()),
            impersonate: Some(Impersonate {
                user: "jane".into(),
                uid: Some("42".into()),
                groups: vec!["dev".into(), "ops".into()],
                extra,
            }),
            ..Resolved::default()
        },
        false,
    )
    .unwrap();
    let mut h = HeaderMap::new();
    h.insert("impersonate-user", HeaderValue::from_static("root"));
    h.insert(
        "impersonate-group",
        HeaderValue::from_static("system:masters"),
    );
    h.insert("accept", HeaderValue::from_static("application/json"));
    up.impersonate(&mut h);
    let all = |n: &str| -> Vec<&str> { h.get_all(n).iter().map(|v| v.to_str().unwrap()).collect() };
    assert_eq!(all("impersonate-user"), ["jane"]);
    assert_eq!(all("impersonate-uid"), ["42"]);
    assert_eq!(all("impersonate-group"), ["dev", "ops"]);
    assert_eq!(
        all("impersonate-extra-scopes.example.com%2fkey%20x"),
        ["a", "b"]
    );
    assert_eq!(all("accept"), ["application/json"]);
    assert!(up.describe().contains("impersonating"), "{}", up.describe());
}
