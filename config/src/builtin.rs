//! The API groups kube-apiserver serves (or defines) itself.
//!
//! These can never be renamed, nor be the target of a rename: the apiserver
//! owns them and every client hard-codes them. An app's CRD group that merely
//! ends in `.k8s.io` (sample-controller's `samplecontroller.k8s.io`) is *not*
//! in this list and may be renamed.

/// Groups owned by kube-apiserver, as of Kubernetes 1.24–1.31. `""` is the
/// core (legacy `/api/v1`) group. `meta.k8s.io` (Status, Table, WatchEvent,
/// PartialObjectMetadata), `admission.k8s.io` (AdmissionReview) and
/// `audit.k8s.io` are not served as resources but name wire types.
pub const BUILTIN_GROUPS: &[&str] = &[
    "",
    "apps",
    "autoscaling",
    "batch",
    "extensions",
    "policy",
    "admission.k8s.io",
    "admissionregistration.k8s.io",
    "apidiscovery.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "audit.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "certificates.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "imagepolicy.k8s.io",
    "internal.apiserver.k8s.io",
    "meta.k8s.io",
    "networking.k8s.io",
    "node.k8s.io",
    "rbac.authorization.k8s.io",
    "resource.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
    "storagemigration.k8s.io",
];

/// True when `group` is one kube-apiserver owns.
pub fn is_builtin(group: &str) -> bool {
    BUILTIN_GROUPS.contains(&group)
}

/// The first built-in group that `suffix` covers on a label boundary
/// (`k8s.io` covers `rbac.authorization.k8s.io`), if any.
pub fn builtin_under_suffix(suffix: &str) -> Option<&'static str> {
    BUILTIN_GROUPS
        .iter()
        .copied()
        .find(|g| !g.is_empty() && crate::dns::has_label_suffix(g, suffix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_groups_ending_in_k8s_io_are_not_builtin() {
        assert!(!is_builtin("samplecontroller.k8s.io"));
        assert!(!is_builtin("metrics.k8s.io"));
        assert!(is_builtin("rbac.authorization.k8s.io"));
        assert!(is_builtin(""));
        assert!(is_builtin("apps"));
    }

    #[test]
    fn suffix_coverage_is_on_label_boundaries() {
        assert_eq!(builtin_under_suffix("k8s.io"), Some("admission.k8s.io"));
        assert_eq!(
            builtin_under_suffix("authorization.k8s.io"),
            Some("authorization.k8s.io")
        );
        assert_eq!(builtin_under_suffix("ization.k8s.io"), None);
        assert_eq!(builtin_under_suffix("example.com"), None);
    }
}
