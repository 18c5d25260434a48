//! Front authentication: the verifier and the request-header authenticator
//! on rcgen certificates, then the same over real TLS on loopback (peer
//! certificates read on the server side), HTTP 401s, and reloading.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, CertifiedIssuer, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::auth::{
    authenticate, parse_extension_apiserver_authentication,
    parse_extension_apiserver_authentication_json, strip_identity_headers, Identity, Rejection,
    RequestHeaderConfig,
};
use super::tls::{
    client_ca_roots, client_verifier, server_config, ClientCaSource, ReloadingConfig, ServingSource,
};
use crate::net::tls::{generate, Identity as Serving};

// ---------------------------------------------------------------- PKI

type Ca = CertifiedIssuer<'static, KeyPair>;

fn ca_params(name: &str) -> CertificateParams {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name.push(DnType::CommonName, name);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    p
}

fn ca(name: &str) -> Ca {
    CertifiedIssuer::self_signed(ca_params(name), KeyPair::generate().unwrap()).unwrap()
}

fn intermediate(parent: &Ca, name: &str) -> Ca {
    CertifiedIssuer::signed_by(ca_params(name), KeyPair::generate().unwrap(), parent).unwrap()
}

/// A client certificate (chain leaf first) and its key.
struct Client {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

#[derive(Clone, Copy)]
enum Validity {
    Now,
    Expired,
    NotYetValid,
}

fn client_with(ca: &Ca, cn: &str, validity: Validity, eku: Vec<ExtendedKeyUsagePurpose>) -> Client {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name.push(DnType::CommonName, cn);
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = eku;
    match validity {
        Validity::Now => {}
        Validity::Expired => {
            p.not_before = date_time_ymd(2000, 1, 1);
            p.not_after = date_time_ymd(2001, 1, 1);
        }
        Validity::NotYetValid => {
            p.not_before = date_time_ymd(2090, 1, 1);
            p.not_after = date_time_ymd(2091, 1, 1);
        }
    }
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, ca).unwrap();
    Client {
        chain: vec![cert.der().clone()],
        key: PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).unwrap(),
    }
}

fn client(ca: &Ca, cn: &str, validity: Validity) -> Client {
    client_with(ca, cn, validity, vec![ExtendedKeyUsagePurpose::ClientAuth])
}

/// A CA bundle PEM with these CAs.
fn bundle(cas: &[&Ca]) -> Vec<u8> {
    cas.iter().map(|c| c.pem()).collect::<String>().into_bytes()
}

fn serving() -> Serving {
    generate().unwrap()
}

fn allowed(names: &[&str]) -> RequestHeaderConfig {
    RequestHeaderConfig {
        allowed_names: names.iter().map(|s| s.to_string()).collect(),
        ..RequestHeaderConfig::default()
    }
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    h
}

// ---------------------------------------------------------------- verifier

fn verify(ca_pem: &[u8], c: &Client) -> Result<(), rustls::Error> {
    client_verifier(ca_pem)
        .unwrap()
        .verify_client_cert(&c.chain[0], &c.chain[1..], UnixTime::now())
        .map(|_| ())
}

#[test]
fn verifier_accepts_a_certificate_from_the_request_header_ca() {
    let ca = ca("front-proxy-ca");
    verify(
        &bundle(&[&ca]),
        &client(&ca, "front-proxy-client", Validity::Now),
    )
    .unwrap();
}

#[test]
fn verifier_accepts_a_chain_through_an_intermediate() {
    let root = ca("front-proxy-root");
    let inter = intermediate(&root, "front-proxy-intermediate");
    let mut c = client(&inter, "front-proxy-client", Validity::Now);
    c.chain.push(inter.der().clone());
    verify(&bundle(&[&root]), &c).unwrap();
}

#[test]
fn verifier_accepts_any_ca_of_a_bundle() {
    let (a, b) = (ca("ca-a"), ca("ca-b"));
    verify(&bundle(&[&a, &b]), &client(&b, "x", Validity::Now)).unwrap();
}

#[test]
fn verifier_rejects_another_ca() {
    let (ours, theirs) = (ca("front-proxy-ca"), ca("some-other-ca"));
    let c = client(&theirs, "front-proxy-client", Validity::Now);
    assert!(verify(&bundle(&[&ours]), &c).is_err());
}

#[test]
fn verifier_rejects_expired_and_not_yet_valid() {
    let ca = ca("front-proxy-ca");
    for v in [Validity::Expired, Validity::NotYetValid] {
        let c = client(&ca, "front-proxy-client", v);
        let err = verify(&bundle(&[&ca]), &c).unwrap_err();
        assert!(
            matches!(
                err,
                rustls::Error::InvalidCertificate(rustls::CertificateError::Expired)
                    | rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidYet)
                    | rustls::Error::InvalidCertificate(
                        rustls::CertificateError::ExpiredContext { .. }
                    )
                    | rustls::Error::InvalidCertificate(
                        rustls::CertificateError::NotValidYetContext { .. }
                    )
            ),
            "{err:?}"
        );
    }
}

#[test]
fn verifier_rejects_a_server_only_certificate() {
    // Go's x509 verify options in kube-apiserver require ExtKeyUsageClientAuth.
    let ca = ca("front-proxy-ca");
    let c = client_with(
        &ca,
        "front-proxy-client",
        Validity::Now,
        vec![ExtendedKeyUsagePurpose::ServerAuth],
    );
    assert!(verify(&bundle(&[&ca]), &c).is_err());
}

#[test]
fn verifier_lets_callers_without_a_certificate_through_the_handshake() {
    let ca = ca("front-proxy-ca");
    let v = client_verifier(&bundle(&[&ca])).unwrap();
    assert!(v.offer_client_auth());
    assert!(!v.client_auth_mandatory());
}

#[test]
fn ca_bundle_errors_do_not_quote_the_bundle() {
    assert!(client_ca_roots(b"").is_err());
    let e = client_ca_roots(b"not a pem at all")
        .unwrap_err()
        .to_string();
    assert!(!e.contains("not a pem"), "{e}");
    let garbage = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    assert!(client_ca_roots(garbage).is_err());
}

// ---------------------------------------------------------------- authenticator

#[test]
fn valid_certificate_with_an_allowed_cn_is_authenticated() {
    let ca = ca("front-proxy-ca");
    let c = client(&ca, "front-proxy-client", Validity::Now);
    let h = headers(&[
        ("X-Remote-User", "alice"),
        ("X-Remote-Uid", "1234"),
        ("X-Remote-Group", "system:authenticated"),
        ("X-Remote-Group", "admins"),
        ("X-Remote-Extra-Scopes", "view"),
        ("X-Remote-Extra-Scopes", "edit"),
        ("Authorization", "Bearer keep-me"),
    ]);
    let id = authenticate(
        Some(&c.chain),
        &h,
        &allowed(&["other", "front-proxy-client"]),
    )
    .unwrap();
    assert_eq!(
        id,
        Identity {
            user: "alice".into(),
            uid: Some("1234".into()),
            groups: vec!["system:authenticated".into(), "admins".into()],
            extra: vec![("scopes".into(), vec!["view".into(), "edit".into()])],
        }
    );
}

#[test]
fn cn_not_in_the_allowed_names_is_rejected_without_naming_it() {
    let ca = ca("front-proxy-ca");
    let c = client(&ca, "mallory-proxy", Validity::Now);
    let h = headers(&[("X-Remote-User", "alice")]);
    let r = authenticate(Some(&c.chain), &h, &allowed(&["front-proxy-client"])).unwrap_err();
    assert_eq!(r, Rejection::CommonNameNotAllowed);
    assert_eq!(r.reason(), "common_name_not_allowed");
    assert!(!r.to_string().contains("mallory"));
    assert!(!r.to_string().contains("alice"));
    // Exact and case-sensitive, as Go's comparison.
    let r = authenticate(Some(&c.chain), &h, &allowed(&["Mallory-Proxy"])).unwrap_err();
    assert_eq!(r, Rejection::CommonNameNotAllowed);
}

#[test]
fn empty_allowed_names_accept_any_verified_certificate() {
    let ca = ca("front-proxy-ca");
    let c = client(&ca, "whoever", Validity::Now);
    let h = headers(&[("X-Remote-User", "alice")]);
    let id = authenticate(Some(&c.chain), &h, &allowed(&[])).unwrap();
    assert_eq!(id.user, "alice");
    assert_eq!(id.uid, None);
    assert!(id.groups.is_empty() && id.extra.is_empty());
}

#[test]
fn no_certificate_is_rejected_and_spoofed_identity_headers_stripped() {
    let cfg = RequestHeaderConfig::default();
    let mut h = headers(&[
        ("X-Remote-User", "system:admin"),
        ("x-remote-uid", "0"),
        ("X-REMOTE-GROUP", "system:masters"),
        ("X-Remote-Extra-Acme", "1"),
        ("x-remote-extra-other%2fkey", "2"),
        ("Authorization", "Bearer passed-to-the-app"),
        ("X-Remote-Userish", "not an identity header"),
    ]);
    for certs in [None, Some(&[][..])] {
        let r = authenticate(certs, &h, &cfg).unwrap_err();
        assert_eq!(r, Rejection::NoClientCertificate);
        assert!(!r.to_string().contains("admin"));
    }
    assert_eq!(strip_identity_headers(&mut h, &cfg), 5);
    let mut left: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
    left.sort();
    assert_eq!(left, ["authorization", "x-remote-userish"]);
    assert_eq!(h["authorization"], "Bearer passed-to-the-app");
}

#[test]
fn certificate_without_a_user_header_is_not_authenticated() {
    let ca = ca("front-proxy-ca");
    let c = client(&ca, "front-proxy-client", Validity::Now);
    let h = headers(&[("X-Remote-Group", "admins"), ("X-Remote-User", "")]);
    assert_eq!(
        authenticate(Some(&c.chain), &h, &allowed(&[])),
        Err(Rejection::NoUser)
    );
}

#[test]
fn first_username_header_with_a_value_wins() {
    let ca = ca("front-proxy-ca");
    let c = client(&ca, "p", Validity::Now);
    let cfg = RequestHeaderConfig {
        username_headers: vec!["X-First".into(), "X-Second".into(), "X-Third".into()],
        ..RequestHeaderConfig::default()
    };
    let h = headers(&[
        ("X-First", ""),
        ("X-Third", "third"),
        ("X-Second", "second"),
    ]);
    assert_eq!(
        authenticate(Some(&c.chain), &h, &cfg).unwrap().user,
        "second"
    );
}

#[test]
fn groups_skip_empty_values_and_follow_header_order() {
    let ca = ca("front-proxy-ca");
    let c = client(&ca, "p", Validity::Now);
    let cfg = RequestHeaderConfig {
        group_headers: vec!["X-G1".into(), "X-G2".into()],
        ..RequestHeaderConfig::default()
    };
    let h = headers(&[
        ("X-Remote-User", "u"),
        ("X-G2", "c"),
        ("X-G1", "a"),
        ("X-G1", ""),
        ("X-G1", "b"),
    ]);
    let id = authenticate(Some(&c.chain), &h, &cfg).unwrap();
    assert_eq!(id.groups, ["a", "b", "c"]);
}

#[test]
fn extra_keys_are_lower_cased_and_percent_decoded_values_kept() {
    let ca = ca("front-proxy-ca");
    let c = client(&ca, "p", Validity::Now);
    let h = headers(&[
        ("X-Remote-User", "u"),
        ("X-Remote-Extra-Example.com%2FScopes", "a%2Fb"),
        ("X-Remote-Extra-Bad%zzKey", "v"),
        ("X-Remote-Extra-Empty", ""),
        ("X-Remote-Extra-%61", "via-escape"),
        ("X-Remote-Extra-A", "plain"),
    ]);
    let id = authenticate(Some(&c.chain), &h, &allowed(&[])).unwrap();
    assert_eq!(
        id.extra,
        vec![
            (
                "a".to_string(),
                vec!["via-escape".to_string(), "plain".into()]
            ),
            ("bad%zzkey".into(), vec!["v".into()]),
            ("empty".into(), vec!["".into()]),
            ("example.com/scopes".into(), vec!["a%2Fb".into()]),
        ]
    );
}

#[test]
fn extra_values_follow_prefix_order() {
    let ca = ca("front-proxy-ca");
    let c = client(&ca, "p", Validity::Now);
    let cfg = RequestHeaderConfig {
        extra_headers_prefixes: vec!["X-Second-".into(), "X-First-".into(), "  ".into()],
        ..RequestHeaderConfig::default()
    };
    let h = headers(&[
        ("X-Remote-User", "u"),
        ("X-First-K", "from-first"),
        ("X-Second-K", "from-second"),
    ]);
    let id = authenticate(Some(&c.chain), &h, &cfg).unwrap();
    // The blank prefix is ignored rather than matching every header.
    assert_eq!(
        id.extra,
        vec![("k".into(), vec!["from-second".into(), "from-first".into()])]
    );
}

#[test]
fn non_utf8_identity_header_is_rejected() {
    let ca = ca("front-proxy-ca");
    let c = client(&ca, "p", Validity::Now);
    let mut h = HeaderMap::new();
    h.insert(
        "x-remote-user",
        HeaderValue::from_bytes(b"caf\xe9").unwrap(),
    );
    let r = authenticate(Some(&c.chain), &h, &allowed(&[])).unwrap_err();
    assert_eq!(r, Rejection::MalformedHeader);
    // UTF-8 is fine.
    h.insert(
        "x-remote-user",
        HeaderValue::from_bytes("café".as_bytes()).unwrap(),
    );
    assert_eq!(
        authenticate(Some(&c.chain), &h, &allowed(&[]))
            .unwrap()
            .user,
        "café"
    );
}

#[test]
fn rejection_answers_kube_apiservers_401() {
    let f = Rejection::CommonNameNotAllowed.failure();
    assert_eq!(f.code, StatusCode::UNAUTHORIZED);
    let v: serde_json::Value = serde_json::from_str(&f.status_json()).unwrap();
    assert_eq!(
        v,
        serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Unauthorized", "reason": "Unauthorized", "code": 401
        })
    );
}

// ---------------------------------------------------------------- ConfigMap

/// `kube-system/extension-apiserver-authentication` as kube-apiserver
/// writes it (kubeadm's flags).
fn configmap(ca_pem: &str) -> BTreeMap<String, String> {
    [
        ("client-ca-file", "-----BEGIN CERTIFICATE-----\n(cluster client CA, unused here)\n-----END CERTIFICATE-----\n"),
        ("requestheader-allowed-names", r#"["front-proxy-client"]"#),
        ("requestheader-client-ca-file", ca_pem),
        ("requestheader-extra-headers-prefix", r#"["X-Remote-Extra-"]"#),
        ("requestheader-group-headers", r#"["X-Remote-Group"]"#),
        ("requestheader-username-headers", r#"["X-Remote-User"]"#),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

#[test]
fn configmap_as_kube_apiserver_writes_it() {
    let ca = ca("front-proxy-ca");
    let (pem, cfg) = parse_extension_apiserver_authentication(&configmap(&ca.pem())).unwrap();
    assert_eq!(pem, ca.pem().trim().as_bytes());
    assert_eq!(
        cfg,
        RequestHeaderConfig {
            allowed_names: vec!["front-proxy-client".into()],
            username_headers: vec!["X-Remote-User".into()],
            uid_headers: vec![],
            group_headers: vec!["X-Remote-Group".into()],
            extra_headers_prefixes: vec!["X-Remote-Extra-".into()],
        }
    );
    // And the CA it returns is the one certificates are verified against.
    verify(&pem, &client(&ca, "front-proxy-client", Validity::Now)).unwrap();
}

#[test]
fn configmap_header_names_are_honored() {
    let ca = ca("front-proxy-ca");
    let mut data = configmap(&ca.pem());
    data.insert(
        "requestheader-username-headers".into(),
        r#"["X-Custom-User"]"#.into(),
    );
    data.insert(
        "requestheader-uid-headers".into(),
        r#"["X-Custom-Uid"]"#.into(),
    );
    data.insert(
        "requestheader-group-headers".into(),
        r#"["X-Custom-Group"]"#.into(),
    );
    data.insert(
        "requestheader-extra-headers-prefix".into(),
        r#"["X-Custom-Extra-"]"#.into(),
    );
    data.insert(
        "requestheader-allowed-names".into(),
        r#"["aggregator", "front-proxy-client"]"#.into(),
    );
    let (_, cfg) = parse_extension_apiserver_authentication(&data).unwrap();
    let c = client(&ca, "aggregator", Validity::Now);
    let mut h = headers(&[
        ("X-Remote-User", "ignored"),
        ("X-Remote-Group", "ignored"),
        ("X-Custom-User", "bob"),
        ("X-Custom-Uid", "42"),
        ("X-Custom-Group", "devs"),
        ("X-Custom-Extra-Team", "blue"),
    ]);
    let id = authenticate(Some(&c.chain), &h, &cfg).unwrap();
    assert_eq!(id.user, "bob");
    assert_eq!(id.uid.as_deref(), Some("42"));
    assert_eq!(id.groups, ["devs"]);
    assert_eq!(id.extra, vec![("team".into(), vec!["blue".into()])]);
    // Only the configured headers are the identity: the default names mean
    // nothing here.
    h.remove("x-custom-user");
    assert_eq!(
        authenticate(Some(&c.chain), &h, &cfg),
        Err(Rejection::NoUser)
    );
    assert_eq!(strip_identity_headers(&mut h, &cfg), 3);
    assert!(h.contains_key("x-remote-user"));
}

#[test]
fn configmap_absent_empty_and_null_lists_are_empty() {
    let ca = ca("front-proxy-ca");
    let mut data = BTreeMap::new();
    data.insert("requestheader-client-ca-file".to_string(), ca.pem());
    data.insert("requestheader-allowed-names".into(), "".into());
    data.insert("requestheader-group-headers".into(), "null".into());
    data.insert("requestheader-username-headers".into(), "[]".into());
    let (_, cfg) = parse_extension_apiserver_authentication(&data).unwrap();
    assert!(cfg.allowed_names.is_empty());
    assert!(cfg.username_headers.is_empty());
    assert!(cfg.uid_headers.is_empty());
    assert!(cfg.group_headers.is_empty());
    assert!(cfg.extra_headers_prefixes.is_empty());
    // Nobody authenticates without a username header, as in kube-apiserver.
    let c = client(&ca, "p", Validity::Now);
    let h = headers(&[("X-Remote-User", "alice")]);
    assert_eq!(
        authenticate(Some(&c.chain), &h, &cfg),
        Err(Rejection::NoUser)
    );
}

#[test]
fn configmap_errors() {
    let ca = ca("front-proxy-ca");
    let missing = BTreeMap::from([(
        "requestheader-username-headers".to_string(),
        r#"["X-Remote-User"]"#.to_string(),
    )]);
    let e = parse_extension_apiserver_authentication(&missing)
        .unwrap_err()
        .to_string();
    assert!(e.contains("requestheader-client-ca-file"), "{e}");

    let mut bad_json = configmap(&ca.pem());
    bad_json.insert(
        "requestheader-allowed-names".into(),
        "front-proxy-client".into(),
    );
    let e = parse_extension_apiserver_authentication(&bad_json)
        .unwrap_err()
        .to_string();
    assert!(e.contains("requestheader-allowed-names"), "{e}");

    let mut empty_name = configmap(&ca.pem());
    empty_name.insert(
        "requestheader-extra-headers-prefix".into(),
        r#"[" "]"#.into(),
    );
    assert!(parse_extension_apiserver_authentication(&empty_name).is_err());

    let mut bad_ca = configmap(&ca.pem());
    bad_ca.insert("requestheader-client-ca-file".into(), "garbage".into());
    assert!(parse_extension_apiserver_authentication(&bad_ca).is_err());
}

#[test]
fn configmap_header_names_are_trimmed() {
    let ca = ca("front-proxy-ca");
    let mut data = configmap(&ca.pem());
    data.insert(
        "requestheader-username-headers".into(),
        r#"[" X-Remote-User "]"#.into(),
    );
    let (_, cfg) = parse_extension_apiserver_authentication(&data).unwrap();
    assert_eq!(cfg.username_headers, ["X-Remote-User"]);
}

#[test]
fn configmap_from_json_data() {
    let ca = ca("front-proxy-ca");
    let json = serde_json::to_value(configmap(&ca.pem())).unwrap();
    let (_, cfg) =
        parse_extension_apiserver_authentication_json(json.as_object().unwrap()).unwrap();
    assert_eq!(cfg.allowed_names, ["front-proxy-client"]);
    let mut obj = json.as_object().unwrap().clone();
    obj.insert(
        "requestheader-allowed-names".into(),
        serde_json::json!(["x"]),
    );
    assert!(parse_extension_apiserver_authentication_json(&obj).is_err());
}

// ---------------------------------------------------------------- real TLS

fn client_config(trust_pem: &str, c: Option<&Client>, tls12_only: bool) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(trust_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let versions: &[&rustls::SupportedProtocolVersion] = if tls12_only {
        &[&rustls::version::TLS12]
    } else {
        rustls::DEFAULT_VERSIONS
    };
    let b = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots);
    let mut cfg = match c {
        Some(c) => b
            .with_client_auth_cert(c.chain.clone(), c.key.clone_key())
            .unwrap(),
        None => b.with_no_client_auth(),
    };
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Arc::new(cfg)
}

/// What the server saw of a handshake.
struct Accepted {
    peer_certs: Option<Vec<CertificateDer<'static>>>,
    alpn: Option<Vec<u8>>,
    /// The serving certificate, as the client saw it.
    served: CertificateDer<'static>,
}

/// One TLS handshake over loopback: `Err` with the server's error when the
/// server refused it.
async fn handshake(
    server: Arc<ServerConfig>,
    trust_pem: &str,
    c: Option<&Client>,
    tls12_only: bool,
) -> Result<Accepted, String> {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accept = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let tls = TlsAcceptor::from(server)
            .accept(tcp)
            .await
            .map_err(|e| e.to_string())?;
        let conn = tls.get_ref().1;
        Ok::<_, String>((
            conn.peer_certificates().map(|c| c.to_vec()),
            conn.alpn_protocol().map(|p| p.to_vec()),
        ))
    });
    let connector = TlsConnector::from(client_config(trust_pem, c, tls12_only));
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let work = async {
        // With TLS 1.3 the client is done before the server has checked its
        // certificate: hold the connection until the server has decided.
        let client = connector.connect(name, tcp).await;
        let (peer_certs, alpn) = accept.await.unwrap()?;
        let client = client.map_err(|e| format!("client: {e}"))?;
        let served = client.get_ref().1.peer_certificates().unwrap()[0].clone();
        Ok(Accepted {
            peer_certs,
            alpn,
            served,
        })
    };
    tokio::time::timeout(Duration::from_secs(20), work)
        .await
        .expect("handshake timed out")
}

fn front(ca_pem: &[u8]) -> (Arc<ServerConfig>, String) {
    let s = serving();
    let trust = s.ca_pem.clone().unwrap();
    (server_config(&s, ca_pem).unwrap(), trust)
}

#[tokio::test]
async fn tls_valid_certificate_with_allowed_cn_is_authenticated() {
    let ca = ca("front-proxy-ca");
    let (server, trust) = front(&bundle(&[&ca]));
    let c = client(&ca, "front-proxy-client", Validity::Now);
    for tls12 in [false, true] {
        let a = handshake(server.clone(), &trust, Some(&c), tls12)
            .await
            .unwrap();
        assert_eq!(a.alpn.as_deref(), Some(&b"h2"[..]));
        let certs = a.peer_certs.expect("server saw the client certificate");
        assert_eq!(certs[0], c.chain[0]);
        let h = headers(&[("X-Remote-User", "alice"), ("X-Remote-Group", "devs")]);
        let id = authenticate(Some(&certs), &h, &allowed(&["front-proxy-client"])).unwrap();
        assert_eq!(
            (id.user.as_str(), id.groups.as_slice()),
            ("alice", &["devs".to_string()][..])
        );
    }
}

#[tokio::test]
async fn tls_chain_through_an_intermediate_is_authenticated() {
    let root = ca("front-proxy-root");
    let inter = intermediate(&root, "front-proxy-intermediate");
    let mut c = client(&inter, "front-proxy-client", Validity::Now);
    c.chain.push(inter.der().clone());
    let (server, trust) = front(&bundle(&[&root]));
    let a = handshake(server, &trust, Some(&c), false).await.unwrap();
    let certs = a.peer_certs.unwrap();
    let h = headers(&[("X-Remote-User", "alice")]);
    authenticate(Some(&certs), &h, &allowed(&["front-proxy-client"])).unwrap();
}

#[tokio::test]
async fn tls_without_a_certificate_completes_then_is_rejected() {
    let ca = ca("front-proxy-ca");
    let (server, trust) = front(&bundle(&[&ca]));
    let a = handshake(server, &trust, None, false).await.unwrap();
    assert_eq!(a.peer_certs, None);
    let mut h = headers(&[
        ("X-Remote-User", "system:admin"),
        ("X-Remote-Group", "system:masters"),
    ]);
    assert_eq!(
        authenticate(a.peer_certs.as_deref(), &h, &RequestHeaderConfig::default()),
        Err(Rejection::NoClientCertificate)
    );
    strip_identity_headers(&mut h, &RequestHeaderConfig::default());
    assert!(h.is_empty());
}

#[tokio::test]
async fn tls_certificate_from_another_ca_fails_the_handshake() {
    let (ours, theirs) = (ca("front-proxy-ca"), ca("attacker-ca"));
    let (server, trust) = front(&bundle(&[&ours]));
    let c = client(&theirs, "front-proxy-client", Validity::Now);
    for tls12 in [false, true] {
        let e = handshake(server.clone(), &trust, Some(&c), tls12)
            .await
            .err()
            .expect("handshake refused");
        assert!(
            e.to_lowercase().contains("unknown") || e.contains("issuer"),
            "{e}"
        );
    }
}

#[tokio::test]
async fn tls_expired_and_not_yet_valid_certificates_fail_the_handshake() {
    let ca = ca("front-proxy-ca");
    let (server, trust) = front(&bundle(&[&ca]));
    for v in [Validity::Expired, Validity::NotYetValid] {
        let c = client(&ca, "front-proxy-client", v);
        let e = handshake(server.clone(), &trust, Some(&c), false)
            .await
            .err()
            .expect("handshake refused");
        assert!(e.contains("xpired") || e.contains("valid"), "{e}");
    }
}

#[tokio::test]
async fn tls_cn_not_allowed_is_rejected_after_the_handshake() {
    let ca = ca("front-proxy-ca");
    let (server, trust) = front(&bundle(&[&ca]));
    let c = client(&ca, "not-the-aggregator", Validity::Now);
    let a = handshake(server, &trust, Some(&c), false).await.unwrap();
    let h = headers(&[("X-Remote-User", "alice")]);
    assert_eq!(
        authenticate(
            a.peer_certs.as_deref(),
            &h,
            &allowed(&["front-proxy-client"])
        ),
        Err(Rejection::CommonNameNotAllowed)
    );
}

/// A front-like HTTP server: authenticate, strip, answer 401 or echo what
/// would reach the app.
async fn serve_one(listener: TcpListener, server: Arc<ServerConfig>, cfg: RequestHeaderConfig) {
    let (tcp, _) = listener.accept().await.unwrap();
    let Ok(tls) = TlsAcceptor::from(server).accept(tcp).await else {
        return;
    };
    let certs: Option<Vec<CertificateDer<'static>>> =
        tls.get_ref().1.peer_certificates().map(|c| c.to_vec());
    let svc = service_fn(move |mut req: Request<Incoming>| {
        let result = authenticate(certs.as_deref(), req.headers(), &cfg);
        strip_identity_headers(req.headers_mut(), &cfg);
        let resp = match result {
            Ok(id) => {
                let mut forwarded: Vec<String> = req
                    .headers()
                    .keys()
                    .map(|k| k.as_str().to_string())
                    .collect();
                forwarded.sort();
                Response::new(crate::body::full(format!(
                    "{} {:?} {}",
                    id.user,
                    id.groups,
                    forwarded.join(",")
                )))
            }
            Err(r) => r.failure().into_response(),
        };
        async move { Ok::<_, Infallible>(resp) }
    });
    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(tls), svc)
        .await;
}

async fn get(
    addr: std::net::SocketAddr,
    trust: &str,
    c: Option<&Client>,
    hdrs: &[(&str, &str)],
) -> (StatusCode, String) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut cfg = (*client_config(trust, c, false)).clone();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tls = TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut req = Request::get("/apis/wardle.example.com/v1alpha1/flunders")
        .header("host", "localhost")
        .body(Empty::<Bytes>::new())
        .unwrap();
    for (k, v) in hdrs {
        req.headers_mut().append(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    let resp = send.send_request(req).await.unwrap();
    let status = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

#[tokio::test]
async fn http_spoofed_remote_user_without_certificate_gets_401() {
    let ca = ca("front-proxy-ca");
    let (server, trust) = front(&bundle(&[&ca]));
    let cfg = allowed(&["front-proxy-client"]);
    let spoof = [
        ("X-Remote-User", "system:admin"),
        ("X-Remote-Group", "system:masters"),
        ("Authorization", "Bearer for-the-app"),
    ];

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(serve_one(listener, server.clone(), cfg.clone()));
    let (status, body) = get(addr, &trust, None, &spoof).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(body.contains(r#""reason":"Unauthorized""#), "{body}");
    assert!(!body.contains("system:admin"));
    task.abort();

    // The aggregator's certificate: the same headers are the identity, and
    // none of them is left in what would be forwarded.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(serve_one(listener, server, cfg));
    let c = client(&ca, "front-proxy-client", Validity::Now);
    let (status, body) = get(addr, &trust, Some(&c), &spoof).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        r#"system:admin ["system:masters"] authorization,host"#
    );
    task.abort();
}

// ---------------------------------------------------------------- reloading

static DIRS: AtomicU64 = AtomicU64::new(0);

struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "regroup-front-{}-{}",
            std::process::id(),
            DIRS.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

static TICK: AtomicU64 = AtomicU64::new(1_000_000);

/// Writes a file with an mtime never seen before, so that the change is
/// noticed however coarse the file system's timestamps.
fn write(path: &Path, contents: impl AsRef<[u8]>) {
    std::fs::write(path, contents).unwrap();
    let t = UNIX_EPOCH + Duration::from_secs(TICK.fetch_add(1, Ordering::Relaxed));
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

#[tokio::test]
async fn reloading_config_follows_its_files() {
    let dir = TempDir::new();
    let (cert, key, ca_file) = (
        dir.0.join("tls.crt"),
        dir.0.join("tls.key"),
        dir.0.join("front-proxy-ca.crt"),
    );
    let s1 = serving();
    let (ca1, ca2) = (ca("front-proxy-ca-1"), ca("front-proxy-ca-2"));
    write(&cert, &s1.cert_pem);
    write(&key, &s1.key_pem);
    write(&ca_file, ca1.pem());
    let rc = ReloadingConfig::new(
        ServingSource::Files {
            cert: cert.clone(),
            key: key.clone(),
        },
        ClientCaSource::File(ca_file.clone()),
    )
    .unwrap()
    .with_interval(Duration::ZERO);
    let (c1, c2) = (
        client(&ca1, "front-proxy-client", Validity::Now),
        client(&ca2, "front-proxy-client", Validity::Now),
    );
    let trust1 = s1.ca_pem.clone().unwrap();

    let first = rc.current();
    assert!(Arc::ptr_eq(&first, &rc.current()), "nothing changed");
    handshake(rc.current(), &trust1, Some(&c1), false)
        .await
        .unwrap();
    assert!(handshake(rc.current(), &trust1, Some(&c2), false)
        .await
        .is_err());

    // The CA bundle is rotated.
    write(&ca_file, ca2.pem());
    let second = rc.current();
    assert!(!Arc::ptr_eq(&first, &second));
    assert!(handshake(rc.current(), &trust1, Some(&c1), false)
        .await
        .is_err());
    handshake(rc.current(), &trust1, Some(&c2), false)
        .await
        .unwrap();

    // A new key before its certificate: kept the previous configuration.
    let s2 = serving();
    write(&key, &s2.key_pem);
    assert!(rc.reload_if_changed().is_err());
    assert!(Arc::ptr_eq(&second, &rc.current()));
    // Then the certificate: the new pair is served.
    write(&cert, &s2.cert_pem);
    let third = rc.current();
    assert!(!Arc::ptr_eq(&second, &third));
    let trust2 = s2.ca_pem.clone().unwrap();
    let a = handshake(rc.current(), &trust2, Some(&c2), false)
        .await
        .unwrap();
    let s2_leaf = CertificateDer::pem_slice_iter(s2.cert_pem.as_bytes())
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(a.served, s2_leaf);

    // A broken CA file keeps the last good configuration.
    write(&ca_file, "garbage");
    assert!(Arc::ptr_eq(&third, &rc.current()));
    assert!(rc.reload_if_changed().is_err());
    // A missing one too.
    std::fs::remove_file(&ca_file).unwrap();
    assert!(Arc::ptr_eq(&third, &rc.current()));
    handshake(rc.current(), &trust2, Some(&c2), false)
        .await
        .unwrap();
}

#[test]
fn reloading_is_throttled_to_the_interval() {
    let dir = TempDir::new();
    let ca_file = dir.0.join("ca.crt");
    let (ca1, ca2) = (ca("ca-1"), ca("ca-2"));
    write(&ca_file, ca1.pem());
    let rc = ReloadingConfig::new(
        ServingSource::fixed(&serving()),
        ClientCaSource::File(ca_file.clone()),
    )
    .unwrap()
    .with_interval(Duration::from_secs(3600));
    let first = rc.current();
    write(&ca_file, ca2.pem());
    assert!(Arc::ptr_eq(&first, &rc.current()), "not looked at yet");
    assert!(rc.reload_if_changed().unwrap());
    assert!(!Arc::ptr_eq(&first, &rc.current()));
    assert!(!rc.reload_if_changed().unwrap());
}

#[tokio::test]
async fn client_ca_from_the_configmap_is_replaced_in_place() {
    let s = serving();
    let trust = s.ca_pem.clone().unwrap();
    let (ca1, ca2) = (ca("ca-1"), ca("ca-2"));
    let rc = ReloadingConfig::new(
        ServingSource::fixed(&s),
        ClientCaSource::Pem(bundle(&[&ca1])),
    )
    .unwrap()
    .with_interval(Duration::ZERO);
    let c2 = client(&ca2, "front-proxy-client", Validity::Now);
    assert!(handshake(rc.current(), &trust, Some(&c2), false)
        .await
        .is_err());
    let before = rc.current();
    assert!(rc.set_client_ca_pem(b"garbage".to_vec()).is_err());
    assert!(Arc::ptr_eq(&before, &rc.current()));
    rc.set_client_ca_pem(bundle(&[&ca1, &ca2])).unwrap();
    handshake(rc.current(), &trust, Some(&c2), false)
        .await
        .unwrap();
    // Nothing on disk to follow: checks change nothing.
    assert!(!rc.reload_if_changed().unwrap());
}

#[test]
fn invalid_configured_header_names_match_nothing() {
    // `validate` (and so the ConfigMap parser) rejects them; a config built
    // by hand with them still neither panics nor matches.
    let ca = ca("front-proxy-ca");
    let c = client(&ca, "p", Validity::Now);
    let cfg = RequestHeaderConfig {
        username_headers: vec!["X Bad".into(), "X-Remote-User".into()],
        group_headers: vec!["".into()],
        ..RequestHeaderConfig::default()
    };
    assert!(cfg.clone().validate().is_err());
    let mut h = headers(&[("X-Remote-User", "alice"), ("X-Remote-Group", "g")]);
    let id = authenticate(Some(&c.chain), &h, &cfg).unwrap();
    assert_eq!((id.user.as_str(), id.groups.len()), ("alice", 0));
    assert_eq!(strip_identity_headers(&mut h, &cfg), 1);
    assert!(h.contains_key("x-remote-group"));
}
