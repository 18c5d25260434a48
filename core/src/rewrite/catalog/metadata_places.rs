//! The places of label, annotation and finalizer keys and of label
//! selectors, added to the catalog when the configuration has `metadata:`
//! rules (without them the catalog, and every byte, stays as it was).
//!
//! Every `ObjectMeta` (the object's own, and the templates a workload
//! carries), every `LabelSelector` of the built-in kinds (workloads, PDBs,
//! NetworkPolicies, pod affinity and topology spread terms, webhook and
//! admission policy selectors), the map selectors of Services and
//! ReplicationControllers, the label keys of affinity and spread terms,
//! a SubjectAccessReview's label selector, the strategic-merge directives
//! on finalizers, and the managed fields that record who owns each key.

use regroup_config::field_path::FieldPath;
use regroup_config::Form;

use super::{Place, Selector, Slot};

const CORE: &str = "";
const APPS: &str = "apps";
const BATCH: &str = "batch";
const POLICY: &str = "policy";
const NETWORKING: &str = "networking.k8s.io";
const ADMREG: &str = "admissionregistration.k8s.io";
const AUTHZ: &str = "authorization.k8s.io";

/// Workloads whose pod template is `spec.template`.
const TEMPLATED: &[(&str, &str)] = &[
    (APPS, "Deployment"),
    (APPS, "ReplicaSet"),
    (APPS, "StatefulSet"),
    (APPS, "DaemonSet"),
    (BATCH, "Job"),
    (CORE, "ReplicationController"),
];

/// Workloads whose `spec.selector` is a `LabelSelector`.
const SELECTED: &[(&str, &str)] = &[
    (APPS, "Deployment"),
    (APPS, "ReplicaSet"),
    (APPS, "StatefulSet"),
    (APPS, "DaemonSet"),
    (BATCH, "Job"),
    (POLICY, "PodDisruptionBudget"),
    (CORE, "PersistentVolumeClaim"),
];

/// Where a pod spec sits in each kind that has one.
const POD_SPECS: &[(&str, &str, &str)] = &[
    (CORE, "Pod", "spec"),
    (CORE, "PodTemplate", "template.spec"),
    (APPS, "Deployment", "spec.template.spec"),
    (APPS, "ReplicaSet", "spec.template.spec"),
    (APPS, "StatefulSet", "spec.template.spec"),
    (APPS, "DaemonSet", "spec.template.spec"),
    (BATCH, "Job", "spec.template.spec"),
    (CORE, "ReplicationController", "spec.template.spec"),
    (BATCH, "CronJob", "spec.jobTemplate.spec.template.spec"),
];

/// Where a metadata slot is, for the managed-fields walk: the slots whose
/// keys field ownership records.
pub fn is_metadata_slot(slot: &Slot) -> bool {
    matches!(
        slot,
        Slot::Labels
            | Slot::Keys(Form::MetadataKey)
            | Slot::Value(Form::MetadataKey)
            | Slot::Value(Form::LabelSelector)
            | Slot::LabelRequirement { .. }
            | Slot::FieldsV1
    )
}

struct Out(Vec<Place>);

impl Out {
    fn push(&mut self, selector: &Selector, path: &str, slot: Slot) {
        self.0.push(Place {
            selector: selector.clone(),
            path: FieldPath::parse(path).expect("metadata place paths are valid"),
            slot,
        });
    }

    /// An `ObjectMeta` at `at` (`""`: the object's own).
    fn object_meta(&mut self, s: &Selector, at: &str) {
        let m = if at.is_empty() {
            "metadata".to_owned()
        } else {
            format!("{at}.metadata")
        };
        self.push(s, &format!("{m}.labels"), Slot::Labels);
        self.push(
            s,
            &format!("{m}.annotations"),
            Slot::Keys(Form::MetadataKey),
        );
        self.push(
            s,
            &format!("{m}.finalizers[]"),
            Slot::Value(Form::MetadataKey),
        );
        // A strategic merge patch's directives on the finalizers list.
        for d in ["$deleteFromPrimitiveList", "$setElementOrder"] {
            self.push(
                s,
                &format!("{m}[\"{d}/finalizers\"][]"),
                Slot::Value(Form::MetadataKey),
            );
        }
    }

    /// A `LabelSelector` at `at`.
    fn label_selector(&mut self, s: &Selector, at: &str) {
        self.push(s, &format!("{at}.matchLabels"), Slot::Labels);
        self.push(
            s,
            &format!("{at}.matchExpressions[]"),
            Slot::LabelRequirement {
                key: "key",
                values: "values",
            },
        );
    }

    /// A pod spec at `at`: its affinity and spread terms.
    fn pod_spec(&mut self, s: &Selector, at: &str) {
        for aff in ["podAffinity", "podAntiAffinity"] {
            let base = format!("{at}.affinity.{aff}");
            for term in [
                format!("{base}.requiredDuringSchedulingIgnoredDuringExecution[]"),
                format!("{base}.preferredDuringSchedulingIgnoredDuringExecution[].podAffinityTerm"),
            ] {
                self.label_selector(s, &format!("{term}.labelSelector"));
                self.label_selector(s, &format!("{term}.namespaceSelector"));
                for keys in ["matchLabelKeys", "mismatchLabelKeys"] {
                    self.push(
                        s,
                        &format!("{term}.{keys}[]"),
                        Slot::Value(Form::MetadataKey),
                    );
                }
            }
        }
        let spread = format!("{at}.topologySpreadConstraints[]");
        self.label_selector(s, &format!("{spread}.labelSelector"));
        self.push(
            s,
            &format!("{spread}.matchLabelKeys[]"),
            Slot::Value(Form::MetadataKey),
        );
    }
}

fn kind(group: &str, kind: &str) -> Selector {
    Selector::Kinds {
        groups: vec![group.to_owned()],
        kinds: vec![kind.to_owned()],
    }
}

/// The metadata places.
pub(super) fn metadata_places() -> Vec<Place> {
    let mut out = Out(Vec::new());
    let any = Selector::AnyObject;
    out.object_meta(&any, "");
    out.push(&any, "metadata.managedFields[].fieldsV1", Slot::FieldsV1);
    for (g, k) in TEMPLATED {
        out.object_meta(&kind(g, k), "spec.template");
    }
    out.object_meta(&kind(CORE, "PodTemplate"), "template");
    let cron = kind(BATCH, "CronJob");
    out.object_meta(&cron, "spec.jobTemplate");
    out.object_meta(&cron, "spec.jobTemplate.spec.template");
    out.label_selector(&cron, "spec.jobTemplate.spec.selector");
    out.object_meta(&kind(APPS, "StatefulSet"), "spec.volumeClaimTemplates[]");
    for (g, k) in SELECTED {
        out.label_selector(&kind(g, k), "spec.selector");
    }
    for k in ["Service", "ReplicationController"] {
        out.push(&kind(CORE, k), "spec.selector", Slot::Labels);
    }
    for (g, k, at) in POD_SPECS {
        out.pod_spec(&kind(g, k), at);
    }
    let netpol = kind(NETWORKING, "NetworkPolicy");
    out.label_selector(&netpol, "spec.podSelector");
    for peers in ["spec.ingress[].from[]", "spec.egress[].to[]"] {
        out.label_selector(&netpol, &format!("{peers}.podSelector"));
        out.label_selector(&netpol, &format!("{peers}.namespaceSelector"));
    }
    for k in [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ] {
        out.label_selector(&kind(ADMREG, k), "webhooks[].objectSelector");
        out.label_selector(&kind(ADMREG, k), "webhooks[].namespaceSelector");
    }
    for (k, at) in [
        ("ValidatingAdmissionPolicy", "spec.matchConstraints"),
        ("MutatingAdmissionPolicy", "spec.matchConstraints"),
        ("ValidatingAdmissionPolicyBinding", "spec.matchResources"),
        ("MutatingAdmissionPolicyBinding", "spec.matchResources"),
    ] {
        out.label_selector(&kind(ADMREG, k), &format!("{at}.objectSelector"));
        out.label_selector(&kind(ADMREG, k), &format!("{at}.namespaceSelector"));
    }
    for k in [
        "SubjectAccessReview",
        "LocalSubjectAccessReview",
        "SelfSubjectAccessReview",
    ] {
        let at = "spec.resourceAttributes.labelSelector";
        out.push(
            &kind(AUTHZ, k),
            &format!("{at}.rawSelector"),
            Slot::Value(Form::LabelSelector),
        );
        out.push(
            &kind(AUTHZ, k),
            &format!("{at}.requirements[]"),
            Slot::LabelRequirement {
                key: "key",
                values: "values",
            },
        );
    }
    out.0
}
