//! The media types of Kubernetes bodies, and how each one's bytes are
//! renamed. One place decides what a `Content-Type` means; every layer asks
//! here.

use http::header::{self, HeaderMap};

/// The kinds of patch kube-apiserver accepts (`PATCH` bodies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/json-patch+json` (RFC 6902): a list of operations.
    Json,
    /// `application/merge-patch+json` (RFC 7386): a partial object.
    Merge,
    /// `application/strategic-merge-patch+json`: a partial object.
    StrategicMerge,
    /// `application/apply-patch+yaml` (server-side apply): a partial object
    /// in YAML (or JSON, which is YAML).
    ApplyYaml,
    /// `application/apply-patch+cbor` (server-side apply in CBOR).
    ApplyCbor,
}

/// A body's media type, from its `Content-Type`, parameters dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MediaType {
    /// No `Content-Type` at all: kube-apiserver reads such a body as JSON
    /// (the Python client sends creates this way).
    Unspecified,
    /// `application/json`.
    Json,
    /// `application/yaml`.
    Yaml,
    /// `application/vnd.kubernetes.protobuf` (also `;stream=watch`).
    Protobuf,
    /// `application/cbor` (KEP-4222).
    Cbor,
    /// `application/cbor-seq` (CBOR watch streams).
    CborSeq,
    /// A patch.
    Patch(PatchKind),
    /// Anything else (`text/plain` logs, `application/octet-stream`, ...).
    Other,
}

/// How a body's bytes are renamed: one codec per wire form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    /// A JSON object (a partial one for merge patches).
    Json,
    /// A JSON Patch: the `path` and `value` of each operation.
    JsonPatch,
    /// A YAML document.
    Yaml,
    /// A Kubernetes protobuf envelope (`k8s\0`).
    Protobuf,
    /// An encoding regroup can't rename (CBOR): never forwarded where a
    /// group could hide in it.
    Unrenamable,
    /// A body that carries no group (logs, binary streams): passed as is.
    Opaque,
}

/// The media types kube-apiserver speaks, by their names.
const KNOWN: &[(&str, MediaType)] = &[
    ("application/json", MediaType::Json),
    ("application/yaml", MediaType::Yaml),
    ("application/vnd.kubernetes.protobuf", MediaType::Protobuf),
    ("application/cbor", MediaType::Cbor),
    ("application/cbor-seq", MediaType::CborSeq),
    (
        "application/json-patch+json",
        MediaType::Patch(PatchKind::Json),
    ),
    (
        "application/merge-patch+json",
        MediaType::Patch(PatchKind::Merge),
    ),
    (
        "application/strategic-merge-patch+json",
        MediaType::Patch(PatchKind::StrategicMerge),
    ),
    (
        "application/apply-patch+yaml",
        MediaType::Patch(PatchKind::ApplyYaml),
    ),
    (
        "application/apply-patch+cbor",
        MediaType::Patch(PatchKind::ApplyCbor),
    ),
];

impl MediaType {
    /// Reads a `Content-Type` value (`None` when the header is absent).
    pub fn parse(content_type: Option<&str>) -> MediaType {
        let Some(v) = content_type else {
            return MediaType::Unspecified;
        };
        let essence = essence_of(v).0;
        if essence.is_empty() {
            return MediaType::Unspecified;
        }
        KNOWN
            .iter()
            .find(|(name, _)| essence.eq_ignore_ascii_case(name))
            .map_or(MediaType::Other, |(_, m)| *m)
    }

    /// The media type of a message's `Content-Type` header.
    pub fn of(headers: &HeaderMap) -> MediaType {
        match headers.get(header::CONTENT_TYPE) {
            None => MediaType::Unspecified,
            Some(v) => match v.to_str() {
                Ok(s) => MediaType::parse(Some(s)),
                Err(_) => MediaType::Other,
            },
        }
    }

    /// How a request body of this type is renamed.
    pub fn request_wire(self) -> Wire {
        match self {
            MediaType::Unspecified | MediaType::Json => Wire::Json,
            MediaType::Patch(PatchKind::Merge | PatchKind::StrategicMerge) => Wire::Json,
            MediaType::Patch(PatchKind::Json) => Wire::JsonPatch,
            MediaType::Yaml | MediaType::Patch(PatchKind::ApplyYaml) => Wire::Yaml,
            MediaType::Protobuf => Wire::Protobuf,
            MediaType::Cbor | MediaType::CborSeq | MediaType::Patch(PatchKind::ApplyCbor) => {
                Wire::Unrenamable
            }
            MediaType::Other => Wire::Opaque,
        }
    }

    /// How a response body of this type is renamed. kube-apiserver always
    /// labels what it answers, so an unlabelled response carries nothing to
    /// rename (an empty 201, a redirect).
    pub fn response_wire(self) -> Wire {
        match self {
            MediaType::Json => Wire::Json,
            MediaType::Yaml => Wire::Yaml,
            MediaType::Protobuf => Wire::Protobuf,
            MediaType::Cbor | MediaType::CborSeq => Wire::Unrenamable,
            _ => Wire::Opaque,
        }
    }

    /// True for a body that is a partial object of the addressed kind
    /// (patches), so its type comes from the URL.
    pub fn is_partial(self) -> bool {
        matches!(self, MediaType::Patch(_))
    }
}

/// True for a media range (or a `Content-Type`) regroup can't rename:
/// CBOR; aggregated discovery in protobuf (the apiserver's
/// `APIGroupDiscoveryList` messages are not in regroup's protobuf subset);
/// OpenAPI v3 in protobuf. With them gone from `Accept` kube-apiserver
/// answers in the next type the client listed (clients list JSON after
/// them), or JSON.
pub fn unrenamable(media_range: &str) -> bool {
    let (essence, params) = essence_of(media_range);
    let mut parts = params.split(';');
    // Compared without a lowercase copy: this runs on every answer.
    let is = |t: &str| essence.eq_ignore_ascii_case(t);
    const OPENAPI_V3_PROTO: &str = "application/com.github.proto-openapi.spec.v3";
    let mut aggregated_discovery = || {
        parts.any(|p| {
            p.trim()
                .strip_prefix("as=")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("APIGroupDiscoveryList"))
        })
    };
    is("application/cbor")
        || is("application/cbor-seq")
        || essence
            .get(..OPENAPI_V3_PROTO.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(OPENAPI_V3_PROTO))
        || (is("application/vnd.kubernetes.protobuf") && aggregated_discovery())
}

/// A media type's essence (`type/subtype`, trimmed) and what follows its
/// first `;` (its parameters, `""` when none). A byte loop, not
/// `str::split`: the value is a few dozen bytes, read for every answer.
fn essence_of(v: &str) -> (&str, &str) {
    match v.as_bytes().iter().position(|&b| b == b';') {
        // `;` is ASCII: both sides are character boundaries.
        Some(i) => (v[..i].trim(), &v[i + 1..]),
        None => (v.trim(), ""),
    }
}

/// `Accept` without the media types regroup can't rename; `None` when
/// nothing is removed. An `Accept` left empty is dropped (JSON is the
/// default).
pub fn accept_without_unrenamable(accept: &str) -> Option<String> {
    let ranges: Vec<&str> = accept.split(',').collect();
    if !ranges.iter().any(|r| unrenamable(r)) {
        return None;
    }
    Some(
        ranges
            .into_iter()
            .filter(|r| !unrenamable(r))
            .map(str::trim)
            .collect::<Vec<_>>()
            .join(", "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_are_read_without_parameters_and_case() {
        assert_eq!(MediaType::parse(None), MediaType::Unspecified);
        assert_eq!(MediaType::parse(Some("")), MediaType::Unspecified);
        assert_eq!(
            MediaType::parse(Some("Application/JSON; charset=utf-8")),
            MediaType::Json
        );
        assert_eq!(
            MediaType::parse(Some("application/vnd.kubernetes.protobuf;stream=watch")),
            MediaType::Protobuf
        );
        assert_eq!(
            MediaType::parse(Some("application/apply-patch+yaml")),
            MediaType::Patch(PatchKind::ApplyYaml)
        );
        assert_eq!(MediaType::parse(Some("text/plain")), MediaType::Other);
    }

    #[test]
    fn a_body_without_content_type_is_renamed_as_json() {
        assert_eq!(MediaType::Unspecified.request_wire(), Wire::Json);
        assert_eq!(MediaType::Unspecified.response_wire(), Wire::Opaque);
    }

    #[test]
    fn cbor_is_never_passed_where_a_group_could_hide() {
        for m in [
            MediaType::Cbor,
            MediaType::CborSeq,
            MediaType::Patch(PatchKind::ApplyCbor),
        ] {
            assert_eq!(m.request_wire(), Wire::Unrenamable);
        }
        assert_eq!(MediaType::Cbor.response_wire(), Wire::Unrenamable);
        assert_eq!(
            accept_without_unrenamable("application/cbor, application/json;q=0.9").as_deref(),
            Some("application/json;q=0.9")
        );
        assert_eq!(
            accept_without_unrenamable("application/cbor").as_deref(),
            Some("")
        );
        assert_eq!(accept_without_unrenamable("application/json, */*"), None);
    }

    #[test]
    fn protobuf_forms_regroup_cannot_rename_leave_accept() {
        let discovery = "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
        assert_eq!(
            accept_without_unrenamable(discovery).as_deref(),
            Some("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList, application/json")
        );
        assert!(unrenamable(
            "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"
        ));
        // Plain protobuf (objects, lists, watches) is renamed.
        assert!(!unrenamable("application/vnd.kubernetes.protobuf"));
        assert!(!unrenamable(
            "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io"
        ));
        // OpenAPI v2 in protobuf is renamed.
        assert!(!unrenamable(
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
        ));
    }
}
