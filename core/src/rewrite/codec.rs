//! The one interface every body codec offers the engine: rename these
//! bytes, given what the request was about. One implementation per wire
//! form (`kube::Wire`); the engine picks it and passes the direction by
//! choosing the codec built for it.

use super::error::RewriteError;
use super::json::{json_patch, JsonRewriter};
use super::openapi::OpenApiRewriter;
use super::openapi_proto::OpenApiProtoRewriter;
use super::protobuf::ProtoRewriter;
use super::yaml;

/// What a body is about, beyond its bytes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Context<'c> {
    /// `apiVersion` and `kind` (in the input's names) standing in for the
    /// members a partial object lacks: a patch's target, from the URL.
    pub hint: Option<(&'c str, &'c str)>,
    /// The group and kind (app names) the request addressed: metadata-only
    /// forms lose their kind, but their names may carry a group.
    pub addressed: Option<(&'c str, &'c str)>,
}

/// A codec of one wire form, in one direction.
pub trait Codec {
    /// Renames `bytes`. `Ok(None)`: nothing to rename; forward them as
    /// they are.
    fn rewrite(&self, cx: Context<'_>, bytes: &[u8]) -> Result<Option<Vec<u8>>, RewriteError>;
}

impl Codec for JsonRewriter<'_> {
    fn rewrite(&self, cx: Context<'_>, bytes: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        self.rewrite_bytes_with(bytes, cx.hint, cx.addressed)
    }
}

impl Codec for ProtoRewriter<'_> {
    fn rewrite(&self, cx: Context<'_>, bytes: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        self.rewrite_bytes_with(bytes, cx.addressed)
    }
}

impl Codec for OpenApiRewriter<'_> {
    fn rewrite(&self, _: Context<'_>, bytes: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        self.rewrite_bytes(bytes)
    }
}

impl Codec for OpenApiProtoRewriter<'_> {
    fn rewrite(&self, _: Context<'_>, bytes: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        self.rewrite_bytes(bytes)
    }
}

/// JSON Patch (RFC 6902) bodies, through the JSON codec: each operation's
/// value renamed as the part of an object of the hinted kind it lands in.
pub struct JsonPatch<'r, 'a>(pub &'r JsonRewriter<'a>);

impl Codec for JsonPatch<'_, '_> {
    fn rewrite(&self, cx: Context<'_>, bytes: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        let (api_version, kind) = cx.hint.unwrap_or_default();
        json_patch::rewrite(self.0, bytes, api_version, kind)
    }
}

/// YAML bodies, through the JSON codec, edited in place.
pub struct Yaml<'r, 'a>(pub &'r JsonRewriter<'a>);

impl Codec for Yaml<'_, '_> {
    fn rewrite(&self, cx: Context<'_>, bytes: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        yaml::rewrite(self.0, bytes, cx.hint, cx.addressed)
    }
}

/// Bodies in an encoding regroup can't rename (CBOR): always an error, so
/// they are never forwarded where a group could hide in them.
pub struct Refused;

impl Codec for Refused {
    fn rewrite(&self, _: Context<'_>, _: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        Err(RewriteError::Malformed(
            "an encoding regroup can't rename".into(),
        ))
    }
}

/// Bodies that carry no group (logs, binary streams): never renamed.
pub struct Untouched;

impl Codec for Untouched {
    fn rewrite(&self, _: Context<'_>, _: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        Ok(None)
    }
}
