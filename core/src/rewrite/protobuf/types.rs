//! Which protobuf message a Kubernetes kind is: the descriptors compiled from
//! `core/proto/` and the table from `group/version` + kind to a message's
//! full name.

use std::sync::OnceLock;

use prost_reflect::{DescriptorPool, MessageDescriptor};

/// The FileDescriptorSet `build.rs` compiled from `core/proto/*.proto`.
static DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/k8s_descriptors.bin"));

/// regroup's Kubernetes descriptors (`core/proto/`), decoded once.
pub fn descriptor_pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        DescriptorPool::decode(DESCRIPTORS).expect("build.rs wrote a valid descriptor set")
    })
}

pub(super) const RAW_EXTENSION: &str = "k8s.io.apimachinery.pkg.runtime.RawExtension";
pub(super) const WATCH_EVENT: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent";
/// The fallback for kinds without a message of their own: ObjectMeta at 1.
pub(super) const GENERIC_OBJECT: &str = "regroup.v1.GenericObject";
/// The fallback for list kinds without a message: ListMeta 1, items 2.
pub(super) const GENERIC_LIST: &str = "regroup.v1.GenericList";

const META_V1: &str = "k8s.io.apimachinery.pkg.apis.meta.v1";

/// Kinds with a message, per API group and versions: the message is
/// `package.Kind`, and `package.KindList` when it exists.
const KINDS: &[(&str, &[&str], &str, &[&str])] = &[
    (
        "",
        &["v1"],
        "k8s.io.api.core.v1",
        &[
            "ConfigMap",
            "Event",
            "PersistentVolumeClaim",
            "ResourceQuota",
            // Pod spec holders: `names:` renames a PriorityClass or
            // RuntimeClass named in their pod spec.
            "Pod",
            "PodTemplate",
            "ReplicationController",
            // `metadata:`: a Service's selector.
            "Service",
        ],
    ),
    (
        "apps",
        &["v1"],
        "k8s.io.api.apps.v1",
        &["Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"],
    ),
    ("batch", &["v1"], "k8s.io.api.batch.v1", &["Job", "CronJob"]),
    // `metadata:`: a PodDisruptionBudget's selector.
    (
        "policy",
        &["v1"],
        "k8s.io.api.policy.v1",
        &["PodDisruptionBudget"],
    ),
    // Discovery documents are served as `v1`, `/api`'s and `/api/v1`'s
    // with no apiVersion at all.
    (
        "",
        &["v1", ""],
        META_V1,
        &[
            "APIGroupList",
            "APIGroup",
            "APIResourceList",
            "APIVersions",
            "List",
        ],
    ),
    (
        "meta.k8s.io",
        &["v1"],
        META_V1,
        &["PartialObjectMetadata", "PartialObjectMetadataList", "List"],
    ),
    // v1beta1's list puts items at 1 and metadata at 2; its items are v1's.
    (
        "meta.k8s.io",
        &["v1beta1"],
        "k8s.io.apimachinery.pkg.apis.meta.v1beta1",
        &["PartialObjectMetadataList"],
    ),
    (
        "meta.k8s.io",
        &["v1beta1"],
        META_V1,
        &["PartialObjectMetadata"],
    ),
    (
        "rbac.authorization.k8s.io",
        &["v1"],
        "k8s.io.api.rbac.v1",
        &["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"],
    ),
    (
        "authorization.k8s.io",
        &["v1"],
        "k8s.io.api.authorization.v1",
        &[
            "SubjectAccessReview",
            "LocalSubjectAccessReview",
            "SelfSubjectAccessReview",
            "SelfSubjectRulesReview",
        ],
    ),
    (
        "admissionregistration.k8s.io",
        &["v1"],
        "k8s.io.api.admissionregistration.v1",
        &[
            "ValidatingWebhookConfiguration",
            "MutatingWebhookConfiguration",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
            "MutatingAdmissionPolicy",
            "MutatingAdmissionPolicyBinding",
        ],
    ),
    (
        "admissionregistration.k8s.io",
        &["v1beta1"],
        "k8s.io.api.admissionregistration.v1beta1",
        &[
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
            "MutatingAdmissionPolicy",
            "MutatingAdmissionPolicyBinding",
        ],
    ),
    (
        "admissionregistration.k8s.io",
        &["v1alpha1"],
        "k8s.io.api.admissionregistration.v1alpha1",
        &[
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
            "MutatingAdmissionPolicy",
            "MutatingAdmissionPolicyBinding",
        ],
    ),
    (
        "certificates.k8s.io",
        &["v1"],
        "k8s.io.api.certificates.v1",
        &["CertificateSigningRequest"],
    ),
    (
        "storagemigration.k8s.io",
        &["v1alpha1"],
        "k8s.io.api.storagemigration.v1alpha1",
        &["StorageVersionMigration"],
    ),
    (
        "storagemigration.k8s.io",
        &["v1beta1"],
        "k8s.io.api.storagemigration.v1beta1",
        &["StorageVersionMigration"],
    ),
    (
        "networking.k8s.io",
        &["v1"],
        "k8s.io.api.networking.v1",
        &["IPAddress", "NetworkPolicy"],
    ),
    (
        "networking.k8s.io",
        &["v1beta1"],
        "k8s.io.api.networking.v1beta1",
        &["IPAddress"],
    ),
    (
        "flowcontrol.apiserver.k8s.io",
        &["v1"],
        "k8s.io.api.flowcontrol.v1",
        &["FlowSchema"],
    ),
    (
        "flowcontrol.apiserver.k8s.io",
        &["v1beta3"],
        "k8s.io.api.flowcontrol.v1beta3",
        &["FlowSchema"],
    ),
    (
        "resource.k8s.io",
        &["v1"],
        "k8s.io.api.resource.v1",
        &["ResourceClaim"],
    ),
    (
        "resource.k8s.io",
        &["v1beta1"],
        "k8s.io.api.resource.v1beta1",
        &["ResourceClaim"],
    ),
    (
        "resource.k8s.io",
        &["v1beta2"],
        "k8s.io.api.resource.v1beta2",
        &["ResourceClaim"],
    ),
    ("events.k8s.io", &["v1"], "k8s.io.api.events.v1", &["Event"]),
    (
        "events.k8s.io",
        &["v1beta1"],
        "k8s.io.api.events.v1beta1",
        &["Event"],
    ),
    (
        "autoscaling",
        &["v1"],
        "k8s.io.api.autoscaling.v1",
        &["HorizontalPodAutoscaler"],
    ),
    (
        "autoscaling",
        &["v2"],
        "k8s.io.api.autoscaling.v2",
        &["HorizontalPodAutoscaler"],
    ),
    (
        "autoscaling",
        &["v2beta2"],
        "k8s.io.api.autoscaling.v2beta2",
        &["HorizontalPodAutoscaler"],
    ),
    (
        "autoscaling",
        &["v2beta1"],
        "k8s.io.api.autoscaling.v2beta1",
        &["HorizontalPodAutoscaler"],
    ),
    (
        "apiextensions.k8s.io",
        &["v1"],
        "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1",
        &["CustomResourceDefinition"],
    ),
    (
        "apiregistration.k8s.io",
        &["v1"],
        "k8s.io.kube_aggregator.pkg.apis.apiregistration.v1",
        &["APIService"],
    ),
    (
        "apidiscovery.k8s.io",
        &["v2beta1"],
        "k8s.io.api.apidiscovery.v2beta1",
        &["APIGroupDiscovery"],
    ),
    (
        "apidiscovery.k8s.io",
        &["v2"],
        "k8s.io.api.apidiscovery.v2",
        &["APIGroupDiscovery"],
    ),
];

/// Kinds every group version registers, all meta/v1 messages: a
/// DeleteOptions body may say `apps/v1` or even a custom group.
const ANY_GROUP_META_KINDS: &[&str] = &["Status", "DeleteOptions", "WatchEvent"];

/// The message of objects of `group`/`version`/`kind` (app names), if regroup
/// has one. Built-in kinds keep their group on both sides, so the app's and
/// the cluster's names give the same answer.
pub fn message_for(group: &str, version: &str, kind: &str) -> Option<MessageDescriptor> {
    let pool = descriptor_pool();
    if ANY_GROUP_META_KINDS.contains(&kind) {
        return pool.get_message_by_name(&format!("{META_V1}.{kind}"));
    }
    for (g, versions, package, kinds) in KINDS {
        if *g != group || !versions.contains(&version) {
            continue;
        }
        let base = kind.strip_suffix("List").filter(|k| !k.is_empty());
        let listed = kinds.contains(&kind) || base.is_some_and(|b| kinds.contains(&b));
        if listed {
            if let Some(m) = pool.get_message_by_name(&format!("{package}.{kind}")) {
                return Some(m);
            }
        }
    }
    None
}

/// The message to walk objects of `group`/`version`/`kind` as, and whether it
/// is a fallback (a kind regroup has no message for).
pub(super) fn resolve(group: &str, version: &str, kind: &str) -> (MessageDescriptor, bool) {
    if let Some(m) = message_for(group, version, kind) {
        return (m, false);
    }
    let fallback = if kind.len() > 4 && kind.ends_with("List") {
        GENERIC_LIST
    } else {
        GENERIC_OBJECT
    };
    (message(fallback), true)
}

/// A message regroup's descriptors must have.
pub(super) fn message(name: &str) -> MessageDescriptor {
    descriptor_pool()
        .get_message_by_name(name)
        .unwrap_or_else(|| panic!("{name} is in core/proto"))
}

/// Every (group, version, kind) of the table with its message (lists
/// included; the kinds of every group version as `meta.k8s.io/v1`), for
/// tests and documentation.
pub fn known_kinds() -> Vec<(&'static str, &'static str, String, MessageDescriptor)> {
    let mut out = Vec::new();
    for k in ANY_GROUP_META_KINDS {
        if let Some(m) = message_for("meta.k8s.io", "v1", k) {
            out.push(("meta.k8s.io", "v1", k.to_string(), m.clone()));
            out.push(("", "v1", k.to_string(), m));
        }
    }
    for (g, versions, _, kinds) in KINDS {
        for v in *versions {
            for k in *kinds {
                for kind in [k.to_string(), format!("{k}List")] {
                    if kind == "ListList" || kind.ends_with("ListList") {
                        continue;
                    }
                    if let Some(m) = message_for(g, v, &kind) {
                        if !out.iter().any(|(og, ov, ok, _): &(_, _, String, _)| {
                            og == g && ov == v && *ok == kind
                        }) {
                            out.push((*g, *v, kind, m));
                        }
                    }
                }
            }
        }
    }
    out
}
