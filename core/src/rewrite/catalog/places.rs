//! The built-in rows of the catalog: every place a group lives in the
//! objects kube-apiserver serves, and the resources whose kinds have places
//! of their own.

use regroup_config::Form;

use regroup_config::field_path::FieldPath;
use regroup_config::ObjectNames;

use super::{Place, RefMembers, Selector, Slot, TableCell};

/// The built-in places: (selector groups, kinds, path, slot). `None` groups
/// means "any object" (kinds ignored); a `kinds` of `["*List"]` means any list.
pub(super) type Row = (
    &'static [&'static str],
    &'static [&'static str],
    &'static str,
    Slot,
);

const ANY: &[&str] = &[];
const CORE: &[&str] = &[""];
const META: &[&str] = &["", "meta.k8s.io"];
const APIEXT: &[&str] = &["apiextensions.k8s.io"];
const APIREG: &[&str] = &["apiregistration.k8s.io"];
const RBAC: &[&str] = &["rbac.authorization.k8s.io"];
const AUTHZ: &[&str] = &["authorization.k8s.io"];
const ADMREG: &[&str] = &["admissionregistration.k8s.io"];
const ADMISSION: &[&str] = &["admission.k8s.io"];
const EVENTS: &[&str] = &["events.k8s.io"];
const AUTOSCALING: &[&str] = &["autoscaling"];
const DISCOVERY: &[&str] = &["apidiscovery.k8s.io"];
const STORAGEMIGRATION: &[&str] = &["storagemigration.k8s.io"];
const NETWORKING: &[&str] = &["networking.k8s.io"];
const FLOWCONTROL: &[&str] = &["flowcontrol.apiserver.k8s.io"];
const RESOURCE: &[&str] = &["resource.k8s.io"];
const CERTIFICATES: &[&str] = &["certificates.k8s.io"];
const SAR_KINDS: &[&str] = &[
    "SubjectAccessReview",
    "LocalSubjectAccessReview",
    "SelfSubjectAccessReview",
];

use Form::{
    ApiVersion, Cel, FieldSelector, Group, GroupKinds, ObjectCount, QualifiedName, ResourceName,
    Text,
};
use Slot::{
    Base64JsonPatch, DropHidden, DropShadowed, Items, JsonObject, JsonSchema, JsonString, NamedRef,
    Object, Value,
};

/// An owner reference, an Event's `involvedObject`: `apiVersion`, `kind`,
/// `name`.
const API_VERSION_REF: RefMembers = RefMembers {
    api: "apiVersion",
    api_form: ApiVersion,
    kind: "kind",
    name: "name",
};

/// An AdmissionReview's `request`: `kind.group`, `kind.kind`, `name`.
const REVIEW_REF: RefMembers = RefMembers {
    api: "kind.group",
    api_form: Group,
    kind: "kind.kind",
    name: "name",
};

/// A binding's `roleRef`: `apiGroup`, `kind`, `name`.
const ROLE_REF: RefMembers = RefMembers {
    api: "apiGroup",
    api_form: Group,
    kind: "kind",
    name: "name",
};

/// A Status's `details` (also embedded in review answers): its `name` is a
/// qualified name when the resource's names carry a group.
const STATUS_DETAILS_NAME: Slot = Slot::NameOf {
    group: "group",
    resource: "kind",
    name: "name",
};

/// The table. `DropShadowed` and `DropHidden` rows are applied before all
/// others.
pub(super) const BUILTIN: &[Row] = &[
    // Every object.
    (ANY, &["*"], "apiVersion", Value(ApiVersion)),
    (
        ANY,
        &["*"],
        "metadata.ownerReferences[].apiVersion",
        Value(ApiVersion),
    ),
    (
        ANY,
        &["*"],
        "metadata.ownerReferences[]",
        NamedRef(API_VERSION_REF),
    ),
    (
        ANY,
        &["*"],
        "metadata.managedFields[].apiVersion",
        Value(ApiVersion),
    ),
    // kubectl ApplySet's parent (any kind): the kinds of its members.
    // (`applyset.kubernetes.io/additional-namespaces` names namespaces.)
    (
        ANY,
        &["*"],
        "metadata.annotations[\"applyset.kubernetes.io/contains-group-kinds\"]",
        Value(GroupKinds),
    ),
    // Annotations holding a whole object as JSON (docs/config.md, "Objects
    // held in annotations"): kubectl's client-side apply (kube-apiserver
    // reads it to hand its fields to server-side apply) and kapp's copy of
    // the object as deployed.
    (
        ANY,
        &["*"],
        "metadata.annotations[\"kubectl.kubernetes.io/last-applied-configuration\"]",
        JsonObject,
    ),
    (
        ANY,
        &["*"],
        "metadata.annotations[\"kapp.k14s.io/original\"]",
        JsonObject,
    ),
    // Lists, tables, watch events. Hidden objects (a shadowed group's CRD
    // or APIService) are dropped from lists and Tables.
    (ANY, &["*List"], "items", DropHidden),
    (ANY, &["*List"], "items", Items),
    (META, &["Table"], "rows[].object", Object),
    // `kubectl get crd`, `kubectl get apiservice`: the NAME cell.
    (
        META,
        &["Table"],
        "rows",
        Slot::TableRows {
            columns: "columnDefinitions",
            cells: "cells",
            object: "object",
        },
    ),
    (META, &["WatchEvent"], "object", Object),
    // CustomResourceDefinition and APIService names.
    (
        APIEXT,
        &["CustomResourceDefinition"],
        "metadata.name",
        Value(QualifiedName),
    ),
    (
        APIEXT,
        &["CustomResourceDefinition"],
        "spec.group",
        Value(Group),
    ),
    (
        APIREG,
        &["APIService"],
        "metadata.name",
        Value(QualifiedName),
    ),
    (APIREG, &["APIService"], "spec.group", Value(Group)),
    // RBAC.
    (
        RBAC,
        &["Role", "ClusterRole"],
        "rules[].apiGroups[]",
        Value(Group),
    ),
    // What a rule grants by name: the signers a controller may sign for
    // (`signers` of certificates.k8s.io) follow the CertificateSigningRequests'
    // signer names; the objects of `names.namespaced` (the Lease a copy
    // takes, by its fixed name) follow the objects.
    (
        RBAC,
        &["Role", "ClusterRole"],
        "rules[].resourceNames[]",
        Value(ResourceName),
    ),
    (
        CERTIFICATES,
        &["CertificateSigningRequest"],
        "spec.signerName",
        Value(ResourceName),
    ),
    (
        RBAC,
        &["RoleBinding", "ClusterRoleBinding"],
        "subjects[].apiGroup",
        Value(Group),
    ),
    (
        RBAC,
        &["RoleBinding", "ClusterRoleBinding"],
        "roleRef.apiGroup",
        Value(Group),
    ),
    // Authorization reviews.
    (
        AUTHZ,
        SAR_KINDS,
        "spec.resourceAttributes.group",
        Value(Group),
    ),
    // The object a review asks about, by its name: a CRD's or APIService's
    // (`plural.group`), or one `names:` renames (a ClusterRole, a fixed
    // Lease), so `kubectl auth can-i update leases/NAME` asks about the
    // copy's own.
    (
        AUTHZ,
        SAR_KINDS,
        "spec.resourceAttributes",
        Slot::NameOf {
            group: "group",
            resource: "resource",
            name: "name",
        },
    ),
    // Selectors an aggregated server's delegated authorizer copies from the
    // request, renamed as the query's `fieldSelector` is (label selectors
    // are not, in the query either).
    (
        AUTHZ,
        SAR_KINDS,
        "spec.resourceAttributes.fieldSelector.rawSelector",
        Value(FieldSelector),
    ),
    (
        AUTHZ,
        SAR_KINDS,
        "spec.resourceAttributes.fieldSelector.requirements[]",
        Slot::Requirement {
            key: "key",
            values: "values",
        },
    ),
    (
        AUTHZ,
        &["SelfSubjectRulesReview"],
        "status.resourceRules[].apiGroups[]",
        Value(Group),
    ),
    // Admission configuration.
    (
        ADMREG,
        &[
            "ValidatingWebhookConfiguration",
            "MutatingWebhookConfiguration",
        ],
        "webhooks[].rules[].apiGroups[]",
        Value(Group),
    ),
    (
        ADMREG,
        &["ValidatingAdmissionPolicy", "MutatingAdmissionPolicy"],
        "spec.matchConstraints.resourceRules[].apiGroups[]",
        Value(Group),
    ),
    (
        ADMREG,
        &["ValidatingAdmissionPolicy", "MutatingAdmissionPolicy"],
        "spec.matchConstraints.excludeResourceRules[].apiGroups[]",
        Value(Group),
    ),
    (
        ADMREG,
        &["ValidatingAdmissionPolicy", "MutatingAdmissionPolicy"],
        "spec.paramKind.apiVersion",
        Value(ApiVersion),
    ),
    (
        ADMREG,
        &[
            "ValidatingAdmissionPolicyBinding",
            "MutatingAdmissionPolicyBinding",
        ],
        "spec.matchResources.resourceRules[].apiGroups[]",
        Value(Group),
    ),
    (
        ADMREG,
        &[
            "ValidatingAdmissionPolicyBinding",
            "MutatingAdmissionPolicyBinding",
        ],
        "spec.matchResources.excludeResourceRules[].apiGroups[]",
        Value(Group),
    ),
    // CEL: string literals that are exactly a mapped name (`Form::Cel`).
    (
        ADMREG,
        &[
            "ValidatingWebhookConfiguration",
            "MutatingWebhookConfiguration",
        ],
        "webhooks[].matchConditions[].expression",
        Value(Cel),
    ),
    (
        ADMREG,
        &["ValidatingAdmissionPolicy", "MutatingAdmissionPolicy"],
        "spec.matchConditions[].expression",
        Value(Cel),
    ),
    (
        ADMREG,
        &["ValidatingAdmissionPolicy", "MutatingAdmissionPolicy"],
        "spec.variables[].expression",
        Value(Cel),
    ),
    (
        ADMREG,
        &["ValidatingAdmissionPolicy"],
        "spec.validations[].expression",
        Value(Cel),
    ),
    (
        ADMREG,
        &["ValidatingAdmissionPolicy"],
        "spec.validations[].messageExpression",
        Value(Cel),
    ),
    (
        ADMREG,
        &["ValidatingAdmissionPolicy"],
        "spec.auditAnnotations[].valueExpression",
        Value(Cel),
    ),
    (
        ADMREG,
        &["MutatingAdmissionPolicy"],
        "spec.mutations[].applyConfiguration.expression",
        Value(Cel),
    ),
    (
        ADMREG,
        &["MutatingAdmissionPolicy"],
        "spec.mutations[].jsonPatch.expression",
        Value(Cel),
    ),
    // A CRD's schemas: `enum`, `default` and `x-kubernetes-validations`
    // at every depth (`Slot::JsonSchema`).
    (
        APIEXT,
        &["CustomResourceDefinition"],
        "spec.versions[].schema.openAPIV3Schema",
        JsonSchema,
    ),
    // AdmissionReview (webhooks served through the front).
    (
        ADMISSION,
        &["AdmissionReview"],
        "request.kind.group",
        Value(Group),
    ),
    (
        ADMISSION,
        &["AdmissionReview"],
        "request.resource.group",
        Value(Group),
    ),
    (
        ADMISSION,
        &["AdmissionReview"],
        "request.requestKind.group",
        Value(Group),
    ),
    (
        ADMISSION,
        &["AdmissionReview"],
        "request.requestResource.group",
        Value(Group),
    ),
    (ADMISSION, &["AdmissionReview"], "request.object", Object),
    // The reviewed object's name: a CRD's or APIService's carries a group,
    // a kind's listed in `names:` is renamed per copy.
    (
        ADMISSION,
        &["AdmissionReview"],
        "request",
        NamedRef(REVIEW_REF),
    ),
    (ADMISSION, &["AdmissionReview"], "request.oldObject", Object),
    (ADMISSION, &["AdmissionReview"], "request.options", Object),
    // The webhook's answer: the JSON Patch (base64) of the reviewed
    // object, its warnings and the Status of a refusal. `auditAnnotations`
    // are the webhook's own key/value pairs and stay as they are.
    (
        ADMISSION,
        &["AdmissionReview"],
        "response.patch",
        Base64JsonPatch,
    ),
    (
        ADMISSION,
        &["AdmissionReview"],
        "response.warnings[]",
        Value(Text),
    ),
    (
        ADMISSION,
        &["AdmissionReview"],
        "response.status.message",
        Value(Text),
    ),
    (
        ADMISSION,
        &["AdmissionReview"],
        "response.status.details.group",
        Value(Group),
    ),
    (
        ADMISSION,
        &["AdmissionReview"],
        "response.status.details",
        STATUS_DETAILS_NAME,
    ),
    (
        ADMISSION,
        &["AdmissionReview"],
        "response.status.details.causes[].message",
        Value(Text),
    ),
    // ConversionReview (CRD conversion webhooks served through the front).
    (
        APIEXT,
        &["ConversionReview"],
        "request.desiredAPIVersion",
        Value(ApiVersion),
    ),
    (APIEXT, &["ConversionReview"], "request.objects[]", Object),
    (
        APIEXT,
        &["ConversionReview"],
        "response.convertedObjects[]",
        Object,
    ),
    (
        APIEXT,
        &["ConversionReview"],
        "response.result.message",
        Value(Text),
    ),
    (
        APIEXT,
        &["ConversionReview"],
        "response.result.details.group",
        Value(Group),
    ),
    (
        APIEXT,
        &["ConversionReview"],
        "response.result.details",
        STATUS_DETAILS_NAME,
    ),
    (
        APIEXT,
        &["ConversionReview"],
        "response.result.details.causes[].message",
        Value(Text),
    ),
    // References to other objects.
    (
        CORE,
        &["Event"],
        "involvedObject.apiVersion",
        Value(ApiVersion),
    ),
    (CORE, &["Event"], "related.apiVersion", Value(ApiVersion)),
    (
        CORE,
        &["Event"],
        "involvedObject",
        NamedRef(API_VERSION_REF),
    ),
    (CORE, &["Event"], "related", NamedRef(API_VERSION_REF)),
    (
        EVENTS,
        &["Event"],
        "regarding.apiVersion",
        Value(ApiVersion),
    ),
    (EVENTS, &["Event"], "related.apiVersion", Value(ApiVersion)),
    (EVENTS, &["Event"], "regarding", NamedRef(API_VERSION_REF)),
    (EVENTS, &["Event"], "related", NamedRef(API_VERSION_REF)),
    (
        CORE,
        &["PersistentVolumeClaim"],
        "spec.dataSource.apiGroup",
        Value(Group),
    ),
    (
        CORE,
        &["PersistentVolumeClaim"],
        "spec.dataSourceRef.apiGroup",
        Value(Group),
    ),
    (
        STORAGEMIGRATION,
        &["StorageVersionMigration"],
        "spec.resource.group",
        Value(Group),
    ),
    (
        NETWORKING,
        &["IPAddress"],
        "spec.parentRef.group",
        Value(Group),
    ),
    (
        RESOURCE,
        &["ResourceClaim"],
        "status.reservedFor[].apiGroup",
        Value(Group),
    ),
    (
        FLOWCONTROL,
        &["FlowSchema"],
        "spec.rules[].resourceRules[].apiGroups[]",
        Value(Group),
    ),
    // Object-count quotas: `count/foos.example.io`.
    (
        CORE,
        &["ResourceQuota"],
        "spec.hard",
        Slot::Keys(ObjectCount),
    ),
    (
        CORE,
        &["ResourceQuota"],
        "status.hard",
        Slot::Keys(ObjectCount),
    ),
    (
        CORE,
        &["ResourceQuota"],
        "status.used",
        Slot::Keys(ObjectCount),
    ),
    (
        AUTOSCALING,
        &["HorizontalPodAutoscaler"],
        "spec.scaleTargetRef.apiVersion",
        Value(ApiVersion),
    ),
    (
        AUTOSCALING,
        &["HorizontalPodAutoscaler"],
        "spec.metrics[].object.describedObject.apiVersion",
        Value(ApiVersion),
    ),
    (
        AUTOSCALING,
        &["HorizontalPodAutoscaler"],
        "status.currentMetrics[].object.describedObject.apiVersion",
        Value(ApiVersion),
    ),
    // autoscaling/v2beta1 names the object `target`.
    (
        AUTOSCALING,
        &["HorizontalPodAutoscaler"],
        "spec.metrics[].object.target.apiVersion",
        Value(ApiVersion),
    ),
    (
        AUTOSCALING,
        &["HorizontalPodAutoscaler"],
        "status.currentMetrics[].object.target.apiVersion",
        Value(ApiVersion),
    ),
    // autoscaling/v1 carries v2 metrics as JSON in annotations.
    (
        AUTOSCALING,
        &["HorizontalPodAutoscaler"],
        "metadata.annotations[\"autoscaling.alpha.kubernetes.io/metrics\"]",
        JsonString("object.target.apiVersion", ApiVersion),
    ),
    (
        AUTOSCALING,
        &["HorizontalPodAutoscaler"],
        "metadata.annotations[\"autoscaling.alpha.kubernetes.io/current-metrics\"]",
        JsonString("object.target.apiVersion", ApiVersion),
    ),
    // Status errors.
    (META, &["Status"], "details.group", Value(Group)),
    // `apiservices.apiregistration.k8s.io "v1.g" not found`: details.name.
    (META, &["Status"], "details", STATUS_DETAILS_NAME),
    (META, &["Status"], "message", Value(Text)),
    (META, &["Status"], "details.causes[].message", Value(Text)),
    // Discovery. Shadowed upstream groups are dropped before renaming.
    (CORE, &["APIGroupList"], "groups", DropShadowed("name")),
    (CORE, &["APIGroupList"], "groups[].name", Value(Group)),
    (
        CORE,
        &["APIGroupList"],
        "groups[].versions[].groupVersion",
        Value(ApiVersion),
    ),
    (
        CORE,
        &["APIGroupList"],
        "groups[].preferredVersion.groupVersion",
        Value(ApiVersion),
    ),
    (CORE, &["APIGroup"], "name", Value(Group)),
    (
        CORE,
        &["APIGroup"],
        "versions[].groupVersion",
        Value(ApiVersion),
    ),
    (
        CORE,
        &["APIGroup"],
        "preferredVersion.groupVersion",
        Value(ApiVersion),
    ),
    (
        CORE,
        &["APIResourceList"],
        "groupVersion",
        Value(ApiVersion),
    ),
    (
        CORE,
        &["APIResourceList"],
        "resources[].group",
        Value(Group),
    ),
    // Aggregated discovery (v2beta1 and v2): items are APIGroupDiscovery.
    (
        DISCOVERY,
        &["APIGroupDiscoveryList"],
        "items",
        DropShadowed("metadata.name"),
    ),
    (
        DISCOVERY,
        &["APIGroupDiscovery"],
        "metadata.name",
        Value(Group),
    ),
    (
        DISCOVERY,
        &["APIGroupDiscovery"],
        "versions[].resources[].responseKind.group",
        Value(Group),
    ),
    (
        DISCOVERY,
        &["APIGroupDiscovery"],
        "versions[].resources[].subresources[].responseKind.group",
        Value(Group),
    ),
    (
        DISCOVERY,
        &["APIGroupDiscovery"],
        "versions[].resources[].subresources[].acceptedTypes[].group",
        Value(Group),
    ),
];

/// The kinds holding a pod spec, and where: a PriorityClass or RuntimeClass
/// is named by the spec's `priorityClassName` / `runtimeClassName`.
const POD_SPECS: &[(&str, &[&str], &str)] = &[
    ("", &["Pod"], "spec."),
    ("", &["PodTemplate"], "template.spec."),
    ("", &["ReplicationController"], "spec.template.spec."),
    (
        "apps",
        &["Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"],
        "spec.template.spec.",
    ),
    ("batch", &["Job"], "spec.template.spec."),
    (
        "batch",
        &["CronJob"],
        "spec.jobTemplate.spec.template.spec.",
    ),
];

/// The places of the names `names:` renames: each listed kind's own
/// `metadata.name` and `generateName`, and the references to it that are
/// not a generic [`Slot::NamedRef`] everywhere (owner references, Events,
/// above): a binding's `roleRef` (of a ClusterRole), an admission policy
/// binding's `spec.policyName`, and a pod spec's `priorityClassName` and
/// `runtimeClassName` in every kind that holds one.
pub(super) fn name_places(names: &ObjectNames) -> Vec<Place> {
    let place = |group: &str, kinds: &[&str], path: &str, slot: Slot| Place {
        selector: Selector::kinds(&[group], kinds),
        path: FieldPath::parse(path).expect("name place paths are valid"),
        slot,
    };
    let mut out = Vec::new();
    for k in names.kinds() {
        out.push(place(
            k.group,
            &[k.kind],
            "metadata.name",
            Value(Form::ObjectName),
        ));
        out.push(place(
            k.group,
            &[k.kind],
            "metadata.generateName",
            Value(Form::GenerateName),
        ));
        match k.kind {
            "ClusterRole" => out.push(place(
                RBAC[0],
                &["RoleBinding", "ClusterRoleBinding"],
                "roleRef",
                NamedRef(ROLE_REF),
            )),
            "ValidatingAdmissionPolicy" | "MutatingAdmissionPolicy" => {
                let binding = format!("{}Binding", k.kind);
                out.push(place(
                    ADMREG[0],
                    &[binding.as_str()],
                    "spec.policyName",
                    Value(Form::ObjectName),
                ))
            }
            "PriorityClass" | "RuntimeClass" => {
                let field = if k.kind == "PriorityClass" {
                    "priorityClassName"
                } else {
                    "runtimeClassName"
                };
                for (group, kinds, spec) in POD_SPECS {
                    out.push(place(
                        group,
                        kinds,
                        &format!("{spec}{field}"),
                        Value(Form::ObjectName),
                    ));
                }
            }
            _ => {}
        }
    }
    // Namespaced kinds: only their fixed names (`names.namespaced`).
    let fixed = names.fixed().map_or(&[][..], |(kinds, _)| kinds);
    for k in fixed {
        out.push(place(
            k.group,
            &[k.kind],
            "metadata.name",
            Value(Form::FixedName),
        ));
    }
    // A RoleBinding's `roleRef` of a Role with a fixed name (the
    // ClusterRole's place above covers both kinds of reference already).
    let covers_cluster_roles = names.kinds().iter().any(|k| k.kind == "ClusterRole");
    if !covers_cluster_roles && fixed.iter().any(|k| k.kind == "Role") {
        out.push(place(
            RBAC[0],
            &["RoleBinding"],
            "roleRef",
            NamedRef(ROLE_REF),
        ));
    }
    // The objects a Role grants by name follow through the built-in
    // `rules[].resourceNames[]` place (form `ResourceName`).
    out
}

/// Table columns whose cells name an object as `Kind/NAME` (kubectl's
/// `ROLE` column of RoleBindings and ClusterRoleBindings: `ClusterRole/foo`):
/// the NAME is renamed in the form of that kind's `metadata.name` place, as
/// the row's `roleRef` is. Found by the column's name in the Table's
/// definitions, for a Table of the addressed kind.
pub(super) const TABLE_CELLS: &[TableCell] = &[TableCell {
    group: RBAC[0],
    kinds: &["RoleBinding", "ClusterRoleBinding"],
    column: "Role",
    names_of: RBAC[0],
}];

/// Built-in resources whose kinds have places of their own.
pub(super) const RESOURCE_KINDS: &[(&str, &str, &str)] = &[
    (
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        "CustomResourceDefinition",
    ),
    ("apiregistration.k8s.io", "apiservices", "APIService"),
    ("rbac.authorization.k8s.io", "roles", "Role"),
    ("rbac.authorization.k8s.io", "clusterroles", "ClusterRole"),
    ("rbac.authorization.k8s.io", "rolebindings", "RoleBinding"),
    (
        "rbac.authorization.k8s.io",
        "clusterrolebindings",
        "ClusterRoleBinding",
    ),
    (
        "authorization.k8s.io",
        "subjectaccessreviews",
        "SubjectAccessReview",
    ),
    (
        "authorization.k8s.io",
        "localsubjectaccessreviews",
        "LocalSubjectAccessReview",
    ),
    (
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
    ),
    (
        "authorization.k8s.io",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
    ),
    (
        "admissionregistration.k8s.io",
        "mutatingadmissionpolicies",
        "MutatingAdmissionPolicy",
    ),
    (
        "admissionregistration.k8s.io",
        "mutatingadmissionpolicybindings",
        "MutatingAdmissionPolicyBinding",
    ),
    ("", "events", "Event"),
    ("events.k8s.io", "events", "Event"),
    ("", "persistentvolumeclaims", "PersistentVolumeClaim"),
    (
        "autoscaling",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
    ),
    (
        "storagemigration.k8s.io",
        "storageversionmigrations",
        "StorageVersionMigration",
    ),
    ("networking.k8s.io", "ipaddresses", "IPAddress"),
    ("resource.k8s.io", "resourceclaims", "ResourceClaim"),
    ("flowcontrol.apiserver.k8s.io", "flowschemas", "FlowSchema"),
    ("", "resourcequotas", "ResourceQuota"),
    ("", "configmaps", "ConfigMap"),
    // A kind whose fixed names `names.namespaced` may rename.
    ("coordination.k8s.io", "leases", "Lease"),
    ("", "secrets", "Secret"),
    // Kinds whose names `names:` may rename, and the kinds referencing them
    // from a pod spec (a merge patch of a Deployment names no kind).
    ("scheduling.k8s.io", "priorityclasses", "PriorityClass"),
    ("node.k8s.io", "runtimeclasses", "RuntimeClass"),
    ("", "pods", "Pod"),
    ("", "podtemplates", "PodTemplate"),
    ("", "replicationcontrollers", "ReplicationController"),
    ("apps", "deployments", "Deployment"),
    ("apps", "replicasets", "ReplicaSet"),
    ("apps", "statefulsets", "StatefulSet"),
    ("apps", "daemonsets", "DaemonSet"),
    ("batch", "jobs", "Job"),
    ("batch", "cronjobs", "CronJob"),
];
