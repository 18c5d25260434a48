//! kubeconfig impersonation (`as`, `as-uid`, `as-groups`, `as-user-extra`)
//! as the headers client-go sends.

use http::header::HeaderName;
use http::HeaderValue;

use super::Impersonate;

/// A kubeconfig impersonation field that can't be sent as a header.
#[derive(Debug, thiserror::Error)]
pub enum ImpersonateError {
    /// A user, uid, group or extra value.
    #[error("impersonation value `{0}` is not a valid header value")]
    Value(String),
    /// An `as-user-extra` key.
    #[error("as-user-extra key `{0}` can't be a header name")]
    ExtraKey(String),
}

/// `Impersonate-User`, `-Uid`, `-Group` (one each), `-Extra-<key>` (the
/// key percent-encoded, one header per value), as client-go sends them.
pub(super) fn impersonation_headers(
    i: &Impersonate,
) -> Result<Vec<(HeaderName, HeaderValue)>, ImpersonateError> {
    let value =
        |s: &str| HeaderValue::from_str(s).map_err(|_| ImpersonateError::Value(s.to_owned()));
    let mut out = vec![(HeaderName::from_static("impersonate-user"), value(&i.user)?)];
    if let Some(uid) = &i.uid {
        out.push((HeaderName::from_static("impersonate-uid"), value(uid)?));
    }
    for g in &i.groups {
        out.push((HeaderName::from_static("impersonate-group"), value(g)?));
    }
    for (k, vs) in &i.extra {
        let key = percent_encoding::utf8_percent_encode(k, EXTRA_KEY).to_string();
        let name = HeaderName::try_from(format!("impersonate-extra-{key}"))
            .map_err(|_| ImpersonateError::ExtraKey(k.clone()))?;
        for v in vs {
            out.push((name.clone(), value(v)?));
        }
    }
    Ok(out)
}

/// What client-go escapes in an `Impersonate-Extra-` key (everything but
/// RFC 7230 token characters).
const EXTRA_KEY: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'!')
    .remove(b'#')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'*')
    .remove(b'+')
    .remove(b'-')
    .remove(b'.')
    .remove(b'^')
    .remove(b'_')
    .remove(b'`')
    .remove(b'|')
    .remove(b'~');
