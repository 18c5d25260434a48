//! The places a group lives on 1.25–1.36 wires (and a few older ones the
//! catalog missed), in JSON and in protobuf, both ways.
//!
//! No capture has them filled (kube-apiserver never writes discovery's
//! `acceptedTypes`, the 1.29 captures hold no quota, SAR selector, IPAddress
//! or FlowSchema), so the bodies are built here with the schema: JSON with
//! Kubernetes' JSON names, protobuf by hand with the field numbers of
//! Kubernetes' `generated.proto` (written out below, independent of
//! `core/proto/`). Each test states the bytes the app and the cluster see
//! and checks both directions byte for byte.

use crate::common::EngineJson;
use regroup::rewrite::protobuf::test_wire as wire;
use regroup::rewrite::{Catalog, ProtoRewriter};
use regroup_config::{Direction, GroupMap, MapRule, Rule};
use serde_json::{json, Value as Json};
use wire::{cat, envelope, ld, vi};

const APP: &str = "samplecontroller.k8s.io";
const CLUSTER: &str = "samplecontroller.team1.example.com";

fn map() -> GroupMap {
    GroupMap::new(vec![MapRule {
        rule: Rule::Exact {
            from: APP.into(),
            to: CLUSTER.into(),
        },
        reference_keys: true,
    }])
    .unwrap()
}

/// `app` renamed for the cluster is `cluster`, and back.
fn json_both_ways(app: Json, cluster: Json) {
    let (map, catalog) = (map(), Catalog::new(&[]));
    let bytes = serde_json::to_vec(&app).unwrap();
    let out = EngineJson::new(&map, &catalog, Direction::ToCluster)
        .rewrite_bytes(&bytes)
        .unwrap()
        .expect("renamed for the cluster");
    assert_eq!(
        serde_json::from_slice::<Json>(&out).unwrap(),
        cluster,
        "to the cluster"
    );
    let back = EngineJson::new(&map, &catalog, Direction::ToApp)
        .rewrite_bytes(&out)
        .unwrap()
        .expect("renamed for the app");
    assert_eq!(back, bytes, "back to the app, byte for byte");
}

/// The same in protobuf: `app` and `cluster` are whole enveloped bodies.
fn proto_both_ways(app: &[u8], cluster: &[u8]) {
    let (map, catalog) = (map(), Catalog::new(&[]));
    let out = ProtoRewriter::new(&map, &catalog, Direction::ToCluster)
        .rewrite_bytes(app)
        .unwrap()
        .expect("renamed for the cluster");
    assert_eq!(out, cluster, "to the cluster");
    let back = ProtoRewriter::new(&map, &catalog, Direction::ToApp)
        .rewrite_bytes(cluster)
        .unwrap()
        .expect("renamed for the app");
    assert_eq!(back, app, "to the app");
}

// Wire-format builders: wire (core/src/rewrite/protobuf/test_wire.rs) and these.

/// ObjectMeta{name=1, namespace=3, annotations=12 (map entries key=1,
/// value=2)}.
fn metadata(name: &str, annotations: &[(&str, &str)]) -> Vec<u8> {
    let mut parts = vec![ld(1, name), ld(3, "default")];
    for (k, v) in annotations {
        parts.push(ld(12, cat(&[ld(1, k), ld(2, v)])));
    }
    cat(&parts)
}

// ---------------------------------------------------------------- discovery

/// `subresources[].acceptedTypes[].group`: an aggregated server may fill it
/// (kube-apiserver leaves it empty). Protobuf aggregated discovery is not
/// served to the app: regroup removes its media ranges from `Accept`.
#[test]
fn aggregated_discovery_accepted_types_name_the_group() {
    let doc = |g: &str| {
        json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
          "metadata": {}, "items": [{"metadata": {"name": g}, "versions": [{"version": "v1alpha1",
            "resources": [{"resource": "foos",
              "responseKind": {"group": g, "version": "v1alpha1", "kind": "Foo"},
              "scope": "Namespaced", "verbs": ["get"],
              "subresources": [{"subresource": "scale",
                "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                "acceptedTypes": [{"group": "autoscaling", "version": "v1", "kind": "Scale"},
                                  {"group": g, "version": "v1alpha1", "kind": "FooScale"}],
                "verbs": ["get", "update"]}]}],
            "freshness": "Current"}]}]})
    };
    json_both_ways(doc(APP), doc(CLUSTER));
}

// ------------------------------------------------- StorageVersionMigration

#[test]
fn storage_version_migration_resource_group_is_renamed() {
    // v1alpha1: spec.resource is a GroupVersionResource; v1beta1 a GroupResource.
    for (version, resource) in [
        (
            "v1alpha1",
            json!({"version": "v1alpha1", "resource": "foos"}),
        ),
        ("v1beta1", json!({"resource": "foos"})),
    ] {
        let svm = |g: &str| {
            let mut r = resource.clone();
            r["group"] = json!(g);
            json!({"apiVersion": format!("storagemigration.k8s.io/{version}"),
                   "kind": "StorageVersionMigration", "metadata": {"name": "foos"},
                   "spec": {"resource": r}})
        };
        json_both_ways(svm(APP), svm(CLUSTER));
    }
    // generated.proto: StorageVersionMigration{metadata=1, spec=2},
    // spec{resource=1}; v1alpha1 GroupVersionResource{group=1, version=2,
    // resource=3}; v1beta1 meta.v1.GroupResource{group=1, resource=2}.
    let v1alpha1 = |g: &str| {
        let gvr = cat(&[ld(1, g), ld(2, "v1alpha1"), ld(3, "foos")]);
        let spec = cat(&[ld(1, gvr), ld(2, "continue-token")]);
        envelope(
            "storagemigration.k8s.io/v1alpha1",
            "StorageVersionMigration",
            &cat(&[ld(1, metadata("foos", &[])), ld(2, spec)]),
        )
    };
    proto_both_ways(&v1alpha1(APP), &v1alpha1(CLUSTER));
    let v1beta1 = |g: &str| {
        let gr = cat(&[ld(1, g), ld(2, "foos")]);
        envelope(
            "storagemigration.k8s.io/v1beta1",
            "StorageVersionMigration",
            &cat(&[ld(1, metadata("foos", &[])), ld(2, ld(1, gr))]),
        )
    };
    proto_both_ways(&v1beta1(APP), &v1beta1(CLUSTER));
}

// ------------------------------------------------ SubjectAccessReview selectors

/// As a query's `fieldSelector`: values of requirements on `*.apiVersion`
/// and `*.apiGroup` keys, and the same requirements in `rawSelector`.
/// Label selectors are not renamed (a query's `labelSelector` isn't
/// either, so a delegated authorizer's copy stays consistent), nor are
/// user groups.
#[test]
fn access_review_field_selectors_rename_api_version_and_api_group_values() {
    for kind in [
        "SubjectAccessReview",
        "LocalSubjectAccessReview",
        "SelfSubjectAccessReview",
    ] {
        let sar = |g: &str| {
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": kind,
              "spec": {"user": "alice", "groups": [APP],
                "resourceAttributes": {"verb": "list", "group": "", "version": "v1", "resource": "events",
                  "fieldSelector": {"requirements": [
                      {"key": "involvedObject.apiVersion", "operator": "In", "values": [format!("{g}/v1alpha1"), "apps/v1"]},
                      {"key": "related.apiGroup", "operator": "NotIn", "values": [g]},
                      {"key": "involvedObject.name", "operator": "In", "values": [APP]},
                      {"key": "involvedObject.kind", "operator": "Exists"}]},
                  "labelSelector": {"requirements": [
                      {"key": "x.apiVersion", "operator": "In", "values": [format!("{APP}/v1")]}]}}}})
        };
        json_both_ways(sar(APP), sar(CLUSTER));
        let raw = |g: &str| {
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": kind,
              "spec": {"resourceAttributes": {"verb": "watch", "resource": "events",
                "fieldSelector": {"rawSelector": format!("involvedObject.apiVersion={g}/v1alpha1,involvedObject.name={APP}")},
                "labelSelector": {"rawSelector": format!("x.apiVersion={APP}/v1")}}}})
        };
        json_both_ways(raw(APP), raw(CLUSTER));
    }
    // generated.proto: SubjectAccessReview{spec=2}; spec{resourceAttributes=1,
    // user=3, groups=4}; ResourceAttributes{verb=2, group=3, resource=5,
    // fieldSelector=8, labelSelector=9}; FieldSelectorAttributes /
    // LabelSelectorAttributes{rawSelector=1, requirements=2};
    // requirement{key=1, operator=2, values=3}. The key may follow the values.
    let sar = |g: &str| {
        let fs = cat(&[
            ld(
                2,
                cat(&[
                    ld(2, "In"),
                    ld(3, format!("{g}/v1alpha1")),
                    ld(3, "v1"),
                    ld(1, "involvedObject.apiVersion"),
                ]),
            ),
            ld(
                2,
                cat(&[ld(1, "regarding.apiGroup"), ld(2, "In"), ld(3, g)]),
            ),
            ld(2, cat(&[ld(1, "metadata.name"), ld(2, "In"), ld(3, APP)])),
        ]);
        let ls = ld(2, cat(&[ld(1, "x.apiGroup"), ld(2, "In"), ld(3, APP)]));
        let attrs = cat(&[
            ld(2, "list"),
            ld(3, ""),
            ld(5, "events"),
            ld(8, fs),
            ld(9, ls),
        ]);
        let spec = cat(&[ld(1, attrs), ld(3, "alice"), ld(4, APP)]);
        envelope(
            "authorization.k8s.io/v1",
            "SubjectAccessReview",
            &cat(&[ld(1, metadata("", &[])), ld(2, spec)]),
        )
    };
    proto_both_ways(&sar(APP), &sar(CLUSTER));
    let raw = |g: &str| {
        let attrs = cat(&[
            ld(2, "watch"),
            ld(8, ld(1, format!("involvedObject.apiVersion={g}/v1"))),
        ]);
        envelope(
            "authorization.k8s.io/v1",
            "SelfSubjectAccessReview",
            &cat(&[ld(1, metadata("", &[])), ld(2, ld(1, attrs))]),
        )
    };
    proto_both_ways(&raw(APP), &raw(CLUSTER));
}

// ---------------------------------------------------------------- IPAddress

#[test]
fn ip_address_parent_ref_group_is_renamed() {
    for version in ["v1", "v1beta1"] {
        let ip = |g: &str| {
            json!({"apiVersion": format!("networking.k8s.io/{version}"), "kind": "IPAddress",
                   "metadata": {"name": "10.0.0.7"},
                   "spec": {"parentRef": {"group": g, "resource": "foos", "namespace": "default", "name": "alpha"}}})
        };
        json_both_ways(ip(APP), ip(CLUSTER));
        // generated.proto: IPAddress{metadata=1, spec=2}; spec{parentRef=1};
        // ParentReference{group=1, resource=2, namespace=3, name=4}.
        let ip = |g: &str| {
            let parent = cat(&[ld(1, g), ld(2, "foos"), ld(3, "default"), ld(4, "alpha")]);
            envelope(
                &format!("networking.k8s.io/{version}"),
                "IPAddress",
                &cat(&[ld(1, metadata("10.0.0.7", &[])), ld(2, ld(1, parent))]),
            )
        };
        proto_both_ways(&ip(APP), &ip(CLUSTER));
    }
}

// --------------------------------------------------------------- FlowSchema

/// `resourceRules[].apiGroups`; `subjects[].group.name` is a user group.
#[test]
fn flow_schema_resource_rule_groups_are_renamed_but_not_subject_groups() {
    for version in ["v1", "v1beta3"] {
        let fs = |g: &str| {
            json!({"apiVersion": format!("flowcontrol.apiserver.k8s.io/{version}"), "kind": "FlowSchema",
              "metadata": {"name": "foo-controller"},
              "spec": {"priorityLevelConfiguration": {"name": "workload-high"}, "matchingPrecedence": 800,
                "rules": [{"subjects": [{"kind": "Group", "group": {"name": APP}}],
                  "resourceRules": [{"verbs": ["*"], "apiGroups": [g, "apps"], "resources": ["foos"],
                                     "clusterScope": true, "namespaces": ["*"]}]}]}})
        };
        json_both_ways(fs(APP), fs(CLUSTER));
        // generated.proto: FlowSchema{metadata=1, spec=2}; spec{
        // priorityLevelConfiguration=1, matchingPrecedence=2, rules=4};
        // PolicyRulesWithSubjects{subjects=1, resourceRules=2};
        // Subject{kind=1, group=3{name=1}}; ResourcePolicyRule{verbs=1,
        // apiGroups=2, resources=3, clusterScope=4, namespaces=5}.
        let fs = |g: &str| {
            let subject = cat(&[ld(1, "Group"), ld(3, ld(1, APP))]);
            let rule = cat(&[
                ld(1, "*"),
                ld(2, g),
                ld(2, "apps"),
                ld(3, "foos"),
                vi(4, 1),
                ld(5, "*"),
            ]);
            let spec = cat(&[
                ld(1, ld(1, "workload-high")),
                vi(2, 800),
                ld(4, cat(&[ld(1, subject), ld(2, rule)])),
            ]);
            envelope(
                &format!("flowcontrol.apiserver.k8s.io/{version}"),
                "FlowSchema",
                &cat(&[ld(1, metadata("foo-controller", &[])), ld(2, spec)]),
            )
        };
        proto_both_ways(&fs(APP), &fs(CLUSTER));
    }
}

// ------------------------------------------------------------ ResourceQuota

/// `count/<resource>.<group>` keys; other keys (extended resources under a
/// domain, `requests.storage`) and every value stay.
#[test]
fn resource_quota_object_count_keys_are_renamed() {
    let quota = |g: &str| {
        let hard = json!({format!("count/foos.{g}"): "10", "count/deployments.apps": "5",
                          format!("requests.{APP}/gpu"): "2", "pods": "20"});
        let mut used = hard.clone();
        for v in used.as_object_mut().unwrap().values_mut() {
            *v = json!("1");
        }
        json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "default"},
               "spec": {"hard": hard.clone()}, "status": {"hard": hard, "used": used}})
    };
    json_both_ways(quota(APP), quota(CLUSTER));
    // A list, as `kubectl get quota` reads it.
    let list = |g: &str| {
        json!({"apiVersion": "v1", "kind": "ResourceQuotaList", "metadata": {},
               "items": [{"metadata": {"name": "q"}, "spec": {"hard": {format!("count/foos.{g}"): "1"}}}]})
    };
    json_both_ways(list(APP), list(CLUSTER));
    // generated.proto: ResourceQuota{metadata=1, spec=2, status=3};
    // spec{hard=1}; status{hard=1, used=2}: map<string, Quantity{string=1}>.
    let quota = |g: &str| {
        // The entries of a map field numbered `n`.
        let entries = |n: u32, value: &str| {
            cat(&[
                ld(
                    n,
                    cat(&[ld(1, format!("count/foos.{g}")), ld(2, ld(1, value))]),
                ),
                ld(
                    n,
                    cat(&[ld(1, format!("requests.{APP}/gpu")), ld(2, ld(1, value))]),
                ),
                ld(n, cat(&[ld(1, "pods"), ld(2, ld(1, value))])),
            ])
        };
        let status = cat(&[entries(1, "10"), entries(2, "1")]);
        envelope(
            "v1",
            "ResourceQuota",
            &cat(&[
                ld(1, metadata("q", &[])),
                ld(2, entries(1, "10")),
                ld(3, status),
            ]),
        )
    };
    proto_both_ways(&quota(APP), &quota(CLUSTER));
}

// ------------------------------------------------------------------ ApplySet

/// The parent's `contains-group-kinds` lists `Kind.group` of its members;
/// `additional-namespaces` lists namespaces and stays.
#[test]
fn applyset_contains_group_kinds_annotation_is_renamed() {
    let parent = |g: &str| {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "set", "namespace": "default",
          "labels": {"applyset.kubernetes.io/id": "applyset-0eFHV8ySqp7XoShsGvyWFQD3s96yqwHmzc4e0HR1dsY-v1"},
          "annotations": {
            "applyset.kubernetes.io/contains-group-kinds": format!("ConfigMap,Deployment.apps,Foo.{g}"),
            "applyset.kubernetes.io/additional-namespaces": "ns1,ns2",
            "applyset.kubernetes.io/tooling": "kubectl/v1.36.3"}}})
    };
    json_both_ways(parent(APP), parent(CLUSTER));
    // A custom resource as the parent.
    let cr = |g: &str| {
        json!({"apiVersion": format!("{g}/v1alpha1"), "kind": "Foo", "metadata": {"name": "set",
          "annotations": {"applyset.kubernetes.io/contains-group-kinds": format!("Foo.{g}")}}})
    };
    json_both_ways(cr(APP), cr(CLUSTER));
    let cm = |g: &str| {
        let meta = metadata(
            "set",
            &[
                (
                    "applyset.kubernetes.io/contains-group-kinds",
                    &format!("Deployment.apps,Foo.{g}"),
                ),
                ("applyset.kubernetes.io/additional-namespaces", "ns1"),
            ],
        );
        envelope("v1", "ConfigMap", &ld(1, meta))
    };
    proto_both_ways(&cm(APP), &cm(CLUSTER));
}

// ------------------------------------------------------------ ResourceClaim

#[test]
fn resource_claim_reserved_for_api_group_is_renamed_in_protobuf() {
    for version in ["v1", "v1beta1", "v1beta2"] {
        let claim = |g: &str| {
            json!({"apiVersion": format!("resource.k8s.io/{version}"), "kind": "ResourceClaim",
                   "metadata": {"name": "gpu"}, "spec": {},
                   "status": {"reservedFor": [{"apiGroup": g, "resource": "foos", "name": "alpha", "uid": "u1"},
                                              {"resource": "pods", "name": "p", "uid": "u2"}]}})
        };
        json_both_ways(claim(APP), claim(CLUSTER));
        // generated.proto: ResourceClaim{metadata=1, spec=2, status=3};
        // status{allocation=1, reservedFor=2}; ResourceClaimConsumerReference
        // {apiGroup=1, resource=3, name=4, uid=5}.
        let claim = |g: &str| {
            let r1 = cat(&[ld(1, g), ld(3, "foos"), ld(4, "alpha"), ld(5, "u1")]);
            let r2 = cat(&[ld(3, "pods"), ld(4, "p"), ld(5, "u2")]);
            envelope(
                &format!("resource.k8s.io/{version}"),
                "ResourceClaim",
                &cat(&[
                    ld(1, metadata("gpu", &[])),
                    ld(2, ""),
                    ld(3, cat(&[ld(2, r1), ld(2, r2)])),
                ]),
            )
        };
        proto_both_ways(&claim(APP), &claim(CLUSTER));
    }
}

// ------------------------------------------- MutatingAdmissionPolicy (v1)

/// GA in 1.36: v1 MAP and its binding in protobuf, as v1alpha1/v1beta1.
#[test]
fn mutating_admission_policy_and_binding_are_renamed_in_protobuf_in_every_version() {
    for version in ["v1", "v1beta1", "v1alpha1"] {
        // generated.proto: MutatingAdmissionPolicy{metadata=1, spec=2};
        // spec{paramKind=1{apiVersion=1, kind=2}, matchConstraints=2,
        // variables=3, mutations=4, failurePolicy=5}; MatchResources{
        // resourceRules=3}; NamedRuleWithOperations{resourceNames=1,
        // ruleWithOperations=2{operations=1, rule=2{apiGroups=1,
        // apiVersions=2, resources=3}}}.
        let rules = |g: &str| {
            let rule = cat(&[ld(1, g), ld(2, "v1alpha1"), ld(3, "foos")]);
            ld(3, ld(2, cat(&[ld(1, "CREATE"), ld(2, rule)])))
        };
        let map_ = |g: &str| {
            let spec = cat(&[
                ld(
                    1,
                    cat(&[ld(1, format!("{g}/v1alpha1")), ld(2, "FooParams")]),
                ),
                ld(2, rules(g)),
                ld(5, "Fail"),
            ]);
            envelope(
                &format!("admissionregistration.k8s.io/{version}"),
                "MutatingAdmissionPolicy",
                &cat(&[ld(1, metadata("p", &[])), ld(2, spec)]),
            )
        };
        proto_both_ways(&map_(APP), &map_(CLUSTER));
        // Binding{metadata=1, spec=2}; spec{policyName=1, paramRef=2,
        // matchResources=3}.
        let binding = |g: &str| {
            let spec = cat(&[ld(1, "p"), ld(2, ld(1, "params")), ld(3, rules(g))]);
            envelope(
                &format!("admissionregistration.k8s.io/{version}"),
                "MutatingAdmissionPolicyBinding",
                &cat(&[ld(1, metadata("b", &[])), ld(2, spec)]),
            )
        };
        proto_both_ways(&binding(APP), &binding(CLUSTER));
    }
}

// ------------------------------------------------ CertificateSigningRequest

/// A signer named after a renamed group (cert-manager's
/// `issuers.cert-manager.io/NAMESPACE.NAME`) is the copy's: the CSR's
/// `spec.signerName` and the `signers` an RBAC rule lets a controller sign
/// for follow the group, so two copies never sign each other's requests.
/// Kubernetes' own signers and plain resource names stay.
#[test]
fn signer_names_follow_the_group_in_csrs_and_rbac_rules() {
    let csr = |g: &str| {
        json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
               "metadata": {"name": "demo"},
               "spec": {"request": "LS0t", "signerName": format!("issuers.{g}/team-b.ca"),
                        "usages": ["server auth"]}})
    };
    json_both_ways(csr(APP), csr(CLUSTER));
    let role = |g: &str| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "signer"},
               "rules": [{"apiGroups": ["certificates.k8s.io"], "resources": ["signers"],
                          "verbs": ["sign"],
                          "resourceNames": [format!("issuers.{g}/*"), format!("{g}/*"),
                                            "kubernetes.io/kube-apiserver-client", "my-lease"]}]})
    };
    json_both_ways(role(APP), role(CLUSTER));
    // generated.proto: CertificateSigningRequest{metadata=1, spec=2},
    // spec{request=1, signerName=7, usages=5}.
    let proto = |g: &str| {
        let spec = cat(&[
            ld(1, "-----BEGIN"),
            ld(5, "server auth"),
            ld(7, format!("clusterissuers.{g}/ca")),
        ]);
        envelope(
            "certificates.k8s.io/v1",
            "CertificateSigningRequest",
            &cat(&[ld(1, metadata("demo", &[])), ld(2, spec)]),
        )
    };
    proto_both_ways(&proto(APP), &proto(CLUSTER));
}

/// With `names.namespaced` (whose fixed names a rule's `resourceNames`
/// also follow), both kinds of resource name in one list are renamed.
#[test]
fn signer_names_and_fixed_names_share_resource_names() {
    let settings = regroup_config::load(&format!(
        "rules:\n  - from: {APP}\n    to: {CLUSTER}\nnames:\n  prefix: team1-\n  namespaced: {{kinds: [Lease, Role], names: [foo-lock]}}\n"
    ))
    .unwrap();
    let catalog = Catalog::for_map(&[], &settings.map);
    let role = |g: &str, lock: &str| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "r", "namespace": "kube-system"},
               "rules": [{"apiGroups": ["", "coordination.k8s.io", "certificates.k8s.io"],
                          "resources": ["leases", "signers"], "verbs": ["get"],
                          "resourceNames": [lock, format!("issuers.{g}/*")]}]})
    };
    let out = EngineJson::new(&settings.map, &catalog, Direction::ToCluster)
        .rewrite_bytes(&serde_json::to_vec(&role(APP, "foo-lock")).unwrap())
        .unwrap()
        .expect("renamed");
    assert_eq!(
        serde_json::from_slice::<Json>(&out).unwrap(),
        role(CLUSTER, "team1-foo-lock")
    );
}
