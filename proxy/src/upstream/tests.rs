use super::*;

#[test]
fn impersonation_is_added_as_client_go_sends_it() {
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
    // The caller's own Impersonate-* never reach here with regroup's
    // credential: the pipeline's headers step leaves them out.
    assert!(up.impersonates());
    let mut h = HeaderMap::new();
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

#[test]
fn a_long_running_request_is_told_apart_below_the_server_urls_path() {
    let w = |uri: &str, prefix: &str| is_long_running(&uri.parse::<Uri>().unwrap(), prefix);
    for prefix in ["", "/k8s"] {
        let u = |pq: &str| format!("https://h{prefix}{pq}");
        assert!(w(&u("/apis/g.io/v1/foos?watch=true"), prefix));
        assert!(w(&u("/api/v1/pods?labelSelector=a&watch=1"), prefix));
        assert!(w(&u("/apis/g.io/v1/watch/namespaces/n/foos"), prefix));
        assert!(w(&u("/api/v1/watch/pods"), prefix));
        assert!(!w(&u("/apis/g.io/v1/foos"), prefix));
        assert!(!w(&u("/api/v1/pods?watch=false"), prefix));
        assert!(!w(&u("/apis/g.io/v1/namespaces/n/foos/watch"), prefix));
        assert!(w(&u("/api/v1/namespaces/n/pods/p/log?follow=true"), prefix));
        assert!(w(
            &u("/api/v1/namespaces/n/services/s/proxy/healthz"),
            prefix
        ));
        assert!(!w(&u("/api/v1/namespaces/n/pods/p"), prefix));
    }
}

#[test]
fn each_http2_mode_is_named_in_the_description() {
    let r = Resolved {
        server: "https://127.0.0.1:1".into(),
        token: Some("t".into()),
        ..Resolved::default()
    };
    let desc = |m| {
        Upstream::with_protocol(&r, false, Timeouts::default(), m)
            .unwrap()
            .describe()
            .to_owned()
    };
    assert_eq!(desc(Http2::Auto), "https://127.0.0.1:1 (bearer token)");
    assert!(desc(Http2::Never).ends_with(", HTTP/1.1 only)"));
    assert!(desc(Http2::Watches).ends_with(", h2 for watches, logs and proxies only)"));
}

#[test]
fn a_request_uri_keeps_the_server_urls_path_before_its_own() {
    let upstream = |server: &str| {
        Upstream::new(
            &Resolved {
                server: server.into(),
                ..Resolved::default()
            },
            false,
        )
        .unwrap()
    };
    let pq = "/apis/samplecontroller.k8s.io/v1alpha1/foos?limit=5";
    let bare = upstream("http://127.0.0.1:1");
    let prefixed = upstream("https://example.test:6443/k8s/clusters/c1/");
    for up in [&bare, &prefixed] {
        // A renamed path arrives as a string built for it; the caller's
        // own as an already parsed path: both give one URI.
        let owned = up.uri_owned(pq.to_owned()).unwrap();
        let parsed = up.uri_of(&pq.parse().unwrap()).unwrap();
        assert_eq!(owned, parsed);
        assert_eq!(up.uri(pq).unwrap(), owned);
    }
    assert_eq!(
        bare.uri_owned(pq.to_owned()).unwrap().to_string(),
        format!("http://127.0.0.1:1{pq}")
    );
    assert_eq!(
        prefixed.uri_owned(pq.to_owned()).unwrap().to_string(),
        format!("https://example.test:6443/k8s/clusters/c1{pq}")
    );
    // A string that is no path is refused, not sent.
    assert!(bare.uri_owned("/a b".to_owned()).is_err());
    assert!(prefixed.uri_owned("/a\u{7f}".to_owned()).is_err());
}
