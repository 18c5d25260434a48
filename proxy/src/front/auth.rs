//! Caller authentication on the aggregated front, as kube-apiserver's
//! request-header authenticator does it (`headerrequest` behind the x509
//! `NewDynamicCAVerifier`):
//!
//! 1. the caller presented a client certificate that chains to the
//!    request-header CA: rustls checked that during the handshake
//!    ([`super::tls`]), so here only its presence is checked;
//! 2. when allowed names are set, the leaf's subject common name is one of
//!    them (exact, case-sensitive comparison; empty list = any verified
//!    certificate);
//! 3. the user is the first non-empty value among the username headers (no
//!    user: not authenticated), the UID likewise, the groups every non-empty
//!    value of every group header, and the extras every value of every
//!    header starting with an extra prefix, keyed by the rest of the header
//!    name lower-cased and percent-decoded (values are not decoded: the
//!    aggregator sends them as they are).
//!
//! A [`Rejection`] says which step failed in words that can be logged and
//! counted: never the certificate, a name from it or a header value.

use std::collections::BTreeMap;

use http::{HeaderMap, HeaderValue, StatusCode};
use rustls::pki_types::CertificateDer;

use crate::status::Failure;

/// kube-apiserver's usual `--requestheader-username-headers`.
pub const DEFAULT_USERNAME_HEADER: &str = "X-Remote-User";
/// kube-apiserver's usual `--requestheader-uid-headers`.
pub const DEFAULT_UID_HEADER: &str = "X-Remote-Uid";
/// kube-apiserver's usual `--requestheader-group-headers`.
pub const DEFAULT_GROUP_HEADER: &str = "X-Remote-Group";
/// kube-apiserver's usual `--requestheader-extra-headers-prefix`.
pub const DEFAULT_EXTRA_HEADERS_PREFIX: &str = "X-Remote-Extra-";

/// The namespace and name of the ConfigMap kube-apiserver publishes its
/// request-header configuration in.
pub const AUTHENTICATION_CONFIGMAP: (&str, &str) =
    ("kube-system", "extension-apiserver-authentication");

/// The request-header authenticator's configuration. Header names and
/// prefixes match case-insensitively.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeaderConfig {
    /// Common names a front-proxy certificate may have; empty: any
    /// certificate that chains to the CA.
    pub allowed_names: Vec<String>,
    /// Headers naming the user, in order; the first with a value wins.
    pub username_headers: Vec<String>,
    /// Headers carrying the user's UID, in order; the first with a value wins.
    pub uid_headers: Vec<String>,
    /// Headers listing groups; every value of every one is a group.
    pub group_headers: Vec<String>,
    /// Prefixes of headers carrying extras.
    pub extra_headers_prefixes: Vec<String>,
}

impl Default for RequestHeaderConfig {
    /// Any verified certificate; `X-Remote-User`, `X-Remote-Uid`,
    /// `X-Remote-Group`, `X-Remote-Extra-`.
    fn default() -> Self {
        RequestHeaderConfig {
            allowed_names: Vec::new(),
            username_headers: vec![DEFAULT_USERNAME_HEADER.into()],
            uid_headers: vec![DEFAULT_UID_HEADER.into()],
            group_headers: vec![DEFAULT_GROUP_HEADER.into()],
            extra_headers_prefixes: vec![DEFAULT_EXTRA_HEADERS_PREFIX.into()],
        }
    }
}

impl RequestHeaderConfig {
    /// Trims header names and prefixes and rejects empty ones, as
    /// kube-apiserver does (an empty extra prefix would match every header).
    pub fn validate(mut self) -> Result<Self, HeaderNameError> {
        for (what, list) in [
            ("username header", &mut self.username_headers),
            ("UID header", &mut self.uid_headers),
            ("group header", &mut self.group_headers),
            ("extra header prefix", &mut self.extra_headers_prefixes),
        ] {
            for h in list.iter_mut() {
                let t = h.trim();
                if t.is_empty() {
                    return Err(HeaderNameError::Empty(what));
                }
                if http::HeaderName::from_bytes(t.as_bytes()).is_err() {
                    return Err(HeaderNameError::Invalid(what));
                }
                *h = t.to_string();
            }
        }
        Ok(self)
    }
}

/// A request-header setting that names no header (`what`: which setting;
/// the name itself is not quoted).
#[derive(Debug, thiserror::Error)]
pub enum HeaderNameError {
    /// Empty once trimmed.
    #[error("empty request-header {0}")]
    Empty(&'static str),
    /// Not a header name.
    #[error("request-header {0} is not a valid header name")]
    Invalid(&'static str),
}

/// Why the cluster's request-header settings can't be used.
#[derive(Debug, thiserror::Error)]
pub enum AuthConfigError {
    /// No CA: the cluster has no request-header authentication.
    #[error(
        "{}/{} has no requestheader-client-ca-file: \
         the cluster has no request-header (front-proxy) authentication",
        AUTHENTICATION_CONFIGMAP.0,
        AUTHENTICATION_CONFIGMAP.1
    )]
    NoClientCa,
    /// The CA bundle is unusable.
    #[error(
        "{}/{} requestheader-client-ca-file: {}",
        AUTHENTICATION_CONFIGMAP.0,
        AUTHENTICATION_CONFIGMAP.1,
        .0
    )]
    ClientCa(#[source] super::tls::FrontTlsError),
    /// A list setting is not a JSON array of strings.
    #[error(
        "{}/{} {key}: not a JSON array of strings: {source}",
        AUTHENTICATION_CONFIGMAP.0,
        AUTHENTICATION_CONFIGMAP.1
    )]
    List {
        /// The ConfigMap key.
        key: String,
        /// The parser's complaint.
        source: serde_json::Error,
    },
    /// A header setting names no header.
    #[error(
        "{}/{}: {}",
        AUTHENTICATION_CONFIGMAP.0,
        AUTHENTICATION_CONFIGMAP.1,
        .0
    )]
    Headers(#[source] HeaderNameError),
    /// A ConfigMap value that is not a string.
    #[error("ConfigMap data {0}: not a string")]
    NotAString(String),
}

/// Who the front proxy says the caller is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// User name.
    pub user: String,
    /// UID, when a UID header carried one.
    pub uid: Option<String>,
    /// Groups, in header order.
    pub groups: Vec<String>,
    /// Extras, by key (sorted), values in header order.
    pub extra: Vec<(String, Vec<String>)>,
}

/// Why a caller was not authenticated. Its text and [`reason`](Self::reason)
/// name the failed check only; they never carry the certificate, a name from
/// it or a header value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// No client certificate was presented (one presented but not verified
    /// fails the TLS handshake before any request).
    #[error("no client certificate")]
    NoClientCertificate,
    /// The verified certificate's subject could not be read.
    #[error("client certificate subject unreadable")]
    UnreadableCertificate,
    /// The certificate's common name is not among the allowed names.
    #[error("client certificate common name not in the allowed names")]
    CommonNameNotAllowed,
    /// None of the username headers has a value.
    #[error("no user in the username headers")]
    NoUser,
    /// An identity header's value is not UTF-8.
    #[error("identity header value not UTF-8")]
    MalformedHeader,
}

impl Rejection {
    /// A short stable label for metrics and structured logs.
    pub fn reason(&self) -> &'static str {
        match self {
            Rejection::NoClientCertificate => "no_client_certificate",
            Rejection::UnreadableCertificate => "unreadable_certificate",
            Rejection::CommonNameNotAllowed => "common_name_not_allowed",
            Rejection::NoUser => "no_user",
            Rejection::MalformedHeader => "malformed_header",
        }
    }

    /// The 401 to answer with: kube-apiserver's own `Status` for a failed
    /// authentication, which doesn't say why.
    pub fn failure(&self) -> Failure {
        Failure {
            code: StatusCode::UNAUTHORIZED,
            reason: "Unauthorized",
            message: "Unauthorized".into(),
        }
    }
}

/// Authenticates a request on the front. `peer_certs` is what the TLS
/// connection verified (`ServerConnection::peer_certificates()`, leaf
/// first); the chain is not checked again here.
pub fn authenticate(
    peer_certs: Option<&[CertificateDer<'_>]>,
    headers: &HeaderMap,
    cfg: &RequestHeaderConfig,
) -> Result<Identity, Rejection> {
    let leaf = peer_certs
        .and_then(|c| c.first())
        .ok_or(Rejection::NoClientCertificate)?;
    if !cfg.allowed_names.is_empty() {
        let cn = common_name(leaf)?;
        if !cfg.allowed_names.contains(&cn) {
            return Err(Rejection::CommonNameNotAllowed);
        }
    }
    let user = first_value(headers, &cfg.username_headers)?.ok_or(Rejection::NoUser)?;
    let uid = first_value(headers, &cfg.uid_headers)?;
    let mut groups = Vec::new();
    for name in &cfg.group_headers {
        for v in headers.get_all(name.as_str()) {
            let v = text(v)?;
            if !v.is_empty() {
                groups.push(v.to_string());
            }
        }
    }
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // Prefixes first, so that values keep the prefixes' order.
    for prefix in prefixes(cfg) {
        for name in headers.keys() {
            // Header names are lower case already.
            let Some(rest) = name.as_str().strip_prefix(prefix.as_str()) else {
                continue;
            };
            let values = extra.entry(unescape_extra_key(rest)).or_default();
            for v in headers.get_all(name) {
                values.push(text(v)?.to_string());
            }
        }
    }
    Ok(Identity {
        user,
        uid,
        groups,
        extra: extra.into_iter().collect(),
    })
}

/// Removes every username, UID and group header and every header starting
/// with an extra prefix (case-insensitively): done to every request from a
/// caller that was not authenticated, and before regroup sets its own.
/// Returns how many header names were removed.
pub fn strip_identity_headers(headers: &mut HeaderMap, cfg: &RequestHeaderConfig) -> usize {
    let mut removed = 0;
    for name in cfg
        .username_headers
        .iter()
        .chain(&cfg.uid_headers)
        .chain(&cfg.group_headers)
    {
        if headers.remove(name.as_str()).is_some() {
            removed += 1;
        }
    }
    let prefixes = prefixes(cfg);
    let doomed: Vec<http::HeaderName> = headers
        .keys()
        .filter(|n| prefixes.iter().any(|p| n.as_str().starts_with(p.as_str())))
        .cloned()
        .collect();
    for name in doomed {
        headers.remove(&name);
        removed += 1;
    }
    removed
}

/// Extra prefixes, lower-cased, empty ones ignored (they would match every
/// header; [`RequestHeaderConfig::validate`] rejects them).
fn prefixes(cfg: &RequestHeaderConfig) -> Vec<String> {
    cfg.extra_headers_prefixes
        .iter()
        .map(|p| p.trim().to_ascii_lowercase())
        .filter(|p| !p.is_empty())
        .collect()
}

/// Go's `http.Header.Get` over the names in order: the first value of each
/// header, the first non-empty one wins.
fn first_value(headers: &HeaderMap, names: &[String]) -> Result<Option<String>, Rejection> {
    for name in names {
        if let Some(v) = headers.get(name.as_str()) {
            let v = text(v)?;
            if !v.is_empty() {
                return Ok(Some(v.to_string()));
            }
        }
    }
    Ok(None)
}

fn text(v: &HeaderValue) -> Result<&str, Rejection> {
    std::str::from_utf8(v.as_bytes()).map_err(|_| Rejection::MalformedHeader)
}

/// Go's `url.PathUnescape`, falling back to the key as it came when it is
/// malformed (or decodes to something not UTF-8), as kube-apiserver records
/// extras "even if malformed/unencoded".
fn unescape_extra_key(encoded: &str) -> String {
    fn hex(b: u8) -> Option<u8> {
        (b as char).to_digit(16).map(|d| d as u8)
    }
    let b = encoded.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let decoded = b
                .get(i + 1)
                .and_then(|&h| hex(h))
                .zip(b.get(i + 2).and_then(|&l| hex(l)));
            let Some((h, l)) = decoded else {
                return encoded.to_string();
            };
            out.push(h << 4 | l);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| encoded.to_string())
}

/// The subject common name as Go's `pkix.Name.CommonName` has it: the last
/// CN attribute, or empty when there is none.
fn common_name(cert: &CertificateDer<'_>) -> Result<String, Rejection> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref())
        .map_err(|_| Rejection::UnreadableCertificate)?;
    let mut cn = String::new();
    for attr in parsed.subject().iter_common_name() {
        cn = attr
            .as_str()
            .map_err(|_| Rejection::UnreadableCertificate)?
            .to_string();
    }
    Ok(cn)
}

/// Reads the request-header configuration kube-apiserver publishes in
/// `kube-system/extension-apiserver-authentication` (its `data`): the CA
/// bundle PEM of `requestheader-client-ca-file`, and the lists in
/// `requestheader-allowed-names`, `requestheader-username-headers`,
/// `requestheader-uid-headers`, `requestheader-group-headers` and
/// `requestheader-extra-headers-prefix`, each a JSON array of strings inside
/// the string value (`'["X-Remote-User"]'`).
///
/// As in kube-apiserver's `RequestHeaderAuthRequestController`, an absent or
/// empty key (or `null`) is an empty list: no username header means nobody
/// authenticates, no allowed names means any certificate from the CA. No
/// CA at all means the cluster has no request-header authentication: an
/// error.
pub fn parse_extension_apiserver_authentication(
    data: &BTreeMap<String, String>,
) -> Result<(Vec<u8>, RequestHeaderConfig), AuthConfigError> {
    let ca = data
        .get("requestheader-client-ca-file")
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .ok_or(AuthConfigError::NoClientCa)?;
    super::tls::client_ca_roots(ca.as_bytes()).map_err(AuthConfigError::ClientCa)?;
    let list = |key: &str| -> Result<Vec<String>, AuthConfigError> {
        match data.get(key).map(|s| s.as_str()) {
            None | Some("") => Ok(Vec::new()),
            Some(s) => serde_json::from_str::<Option<Vec<String>>>(s)
                .map(Option::unwrap_or_default)
                .map_err(|source| AuthConfigError::List {
                    key: key.to_owned(),
                    source,
                }),
        }
    };
    let cfg = RequestHeaderConfig {
        allowed_names: list("requestheader-allowed-names")?,
        username_headers: list("requestheader-username-headers")?,
        uid_headers: list("requestheader-uid-headers")?,
        group_headers: list("requestheader-group-headers")?,
        extra_headers_prefixes: list("requestheader-extra-headers-prefix")?,
    }
    .validate()
    .map_err(AuthConfigError::Headers)?;
    Ok((ca.as_bytes().to_vec(), cfg))
}

/// [`parse_extension_apiserver_authentication`] over the ConfigMap's `data`
/// as JSON (every value must be a string).
pub fn parse_extension_apiserver_authentication_json(
    data: &serde_json::Map<String, serde_json::Value>,
) -> Result<(Vec<u8>, RequestHeaderConfig), AuthConfigError> {
    let data = data
        .iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => Ok((k.clone(), s.clone())),
            _ => Err(AuthConfigError::NotAString(k.clone())),
        })
        .collect::<Result<BTreeMap<_, _>, _>>()?;
    parse_extension_apiserver_authentication(&data)
}
