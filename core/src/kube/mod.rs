//! Pure Kubernetes API machinery regroup reasons about: what a request
//! addresses, the media types of bodies, the `Status` error document. No
//! I/O here: the proxy (`serve`) and the codecs (`rewrite`) both read it.

pub mod media;
pub mod path;
pub mod request;
pub mod status;

pub use media::{MediaType, PatchKind, Wire};
pub use request::RequestInfo;

/// The group of an `apiVersion` (`group/version`), empty for the core
/// group's bare `version`. Built-in groups are short (`apps/v1`): a
/// plain loop; a CRD's (`samplecontroller.k8s.io/v1alpha1`) is found
/// sooner by `memchr`. `split_once` sets up a substring search that
/// costs more than either (~265 instructions a call, callgrind).
#[inline]
pub fn group_of(api_version: &str) -> &str {
    let slash = if api_version.len() < 16 {
        api_version.bytes().position(|b| b == b'/')
    } else {
        memchr::memchr(b'/', api_version.as_bytes())
    };
    slash.map_or("", |i| &api_version[..i])
}

#[cfg(test)]
mod tests {
    use super::group_of;

    #[test]
    fn the_group_is_what_comes_before_the_first_slash_short_or_long() {
        for (api_version, group) in [
            ("v1", ""),
            ("", ""),
            ("apps/v1", "apps"),
            ("/v1", ""),
            (
                "samplecontroller.k8s.io/v1alpha1",
                "samplecontroller.k8s.io",
            ),
            ("samplecontroller.team1.example.com", ""),
            ("a.b.example.com/v1/extra", "a.b.example.com"),
            ("fifteen-bytes/v", "fifteen-bytes"),
            ("sixteen-bytes/v1", "sixteen-bytes"),
        ] {
            assert_eq!(group_of(api_version), group, "{api_version}");
            let split = api_version.split_once('/').map_or("", |(g, _)| g);
            assert_eq!(group_of(api_version), split, "{api_version}");
        }
    }
}
