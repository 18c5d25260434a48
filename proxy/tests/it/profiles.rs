//! Operator profiles and fields from CRD enums, end to end: a Certificate
//! names its issuer's group in `spec.issuerRef.group`, a key no catalog row
//! covers. With `profiles: [cert-manager]` the sidecar renames it both
//! ways; `render` renames it in objects as it renames the CRD's `enum`,
//! found from the CRD alone. Manifests are our own, in cert-manager's
//! shape.

use regroup::rewrite::{Catalog, Context, Engine};
use regroup_config::Direction::{ToApp, ToCluster};
use serde_json::{json, Value as Json};

const RULES: &str = "rules:\n  - {from: cert-manager.io, to: cert-manager.team-b.example.com}\n  - {fromSuffix: acme.cert-manager.io, toSuffix: acme.cert-manager.team-b.example.com}\nnames: {prefix: team-b-}\n";

fn certificate(group: &str, issuer_group: &str) -> Json {
    json!({"apiVersion": format!("{group}/v1"), "kind": "Certificate",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"secretName": "web-tls", "issuerRef": {"group": issuer_group, "kind": "ClusterIssuer", "name": "le"}}})
}

#[test]
fn the_cert_manager_profile_renames_issuer_refs_both_ways() {
    let s = regroup_config::load(&format!("{RULES}profiles: [cert-manager]\n")).unwrap();
    let e = Engine::new(s.map.clone(), Catalog::for_map(&s.fields, &s.map));
    let mut obj = certificate("cert-manager.io", "cert-manager.io");
    assert!(e.value(ToCluster, Context::default(), &mut obj).unwrap());
    assert_eq!(
        obj,
        certificate(
            "cert-manager.team-b.example.com",
            "cert-manager.team-b.example.com"
        )
    );
    assert!(e.value(ToApp, Context::default(), &mut obj).unwrap());
    assert_eq!(obj, certificate("cert-manager.io", "cert-manager.io"));
    // An external issuer's group is not the operator's: it stays.
    let mut ext = certificate("cert-manager.io", "awspca.cert-manager.io");
    e.value(ToCluster, Context::default(), &mut ext).unwrap();
    assert_eq!(ext["spec"]["issuerRef"]["group"], "awspca.cert-manager.io");
    // Without the profile the field is not renamed: what the issue saw.
    let plain = regroup_config::load(RULES).unwrap();
    let e = Engine::new(
        plain.map.clone(),
        Catalog::for_map(&plain.fields, &plain.map),
    );
    let mut obj = certificate("cert-manager.io", "cert-manager.io");
    e.value(ToCluster, Context::default(), &mut obj).unwrap();
    assert_eq!(obj["spec"]["issuerRef"]["group"], "cert-manager.io");
}

const CRD_AND_OBJECT: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: certificates.cert-manager.io
spec:
  group: cert-manager.io
  names: {kind: Certificate, plural: certificates}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                issuerRef:
                  type: object
                  properties:
                    group: {type: string, enum: [cert-manager.io, example.com]}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: web, namespace: shop}
spec:
  issuerRef: {group: cert-manager.io, kind: Issuer, name: ca}
"#;

#[test]
fn render_renames_a_field_in_objects_as_in_its_crds_enum() {
    let s = regroup_config::load(RULES).unwrap();
    let (r, derived) =
        regroup::render::Renderer::for_manifests(&s, ToCluster, &[CRD_AND_OBJECT]).unwrap();
    assert_eq!(derived.fields.len(), 1);
    assert_eq!(derived.fields[0].path, "spec.issuerRef.group");
    let out = r.render(CRD_AND_OBJECT).unwrap();
    assert!(
        out.contains("group: {type: string, enum: [cert-manager.team-b.example.com, example.com]}"),
        "{out}"
    );
    assert!(
        out.contains("issuerRef: {group: cert-manager.team-b.example.com, kind: Issuer, name: ca}"),
        "{out}"
    );
}
