//! `profiles:`: what a known operator needs besides its group rules, added
//! as if written, each following the rules.

use regroup_config::rule::{Direction, Form};

const CERT_MANAGER: &str = "rules:\n  - {from: cert-manager.io, to: cert-manager.team-b.example.com}\n  - {fromSuffix: acme.cert-manager.io, toSuffix: acme.cert-manager.team-b.example.com}\nnames: {prefix: team-b-}\nprofiles: [cert-manager]\n";

#[test]
fn cert_manager_adds_its_issuer_refs_key_prefix_and_leases() {
    let s = regroup_config::load(CERT_MANAGER).unwrap();
    let issuer_refs: Vec<(&str, &str)> = s
        .fields
        .iter()
        .filter(|f| f.path.to_string() == "spec.issuerRef.group")
        .map(|f| (f.group.as_str(), f.kind.as_str()))
        .collect();
    assert_eq!(
        issuer_refs,
        [
            ("cert-manager.io", "Certificate"),
            ("cert-manager.io", "CertificateRequest"),
            ("acme.cert-manager.io", "Order"),
            ("acme.cert-manager.io", "Challenge"),
        ]
    );
    assert!(s.fields.iter().all(|f| f.form == Form::Group));
    let md = s.map.metadata().expect("the profile's key prefix");
    assert_eq!(
        md.map_key("cert-manager.io/certificate-name", Direction::ToCluster)
            .as_deref(),
        Some("cert-manager.team-b.example.com/certificate-name")
    );
    assert_eq!(
        md.map_key("acme.cert-manager.io/http01-solver", Direction::ToCluster)
            .as_deref(),
        Some("acme.cert-manager.team-b.example.com/http01-solver")
    );
    let names = s.map.object_names().unwrap();
    for lease in [
        "cert-manager-controller",
        "cert-manager-cainjector-leader-election",
        "cert-manager-cainjector-leader-election-core",
    ] {
        assert_eq!(
            names.fixed_to_cluster(lease),
            Some(format!("team-b-{lease}"))
        );
    }
}

#[test]
fn what_the_user_wrote_wins_and_nothing_is_added_twice() {
    let text = format!(
        "{CERT_MANAGER}metadata:\n  prefixes:\n    - {{from: cert-manager.io, to: cm-keys.team-b.example.com}}\n"
    );
    let s = regroup_config::load(&text).unwrap();
    let md = s.map.metadata().unwrap();
    assert_eq!(
        md.map_key("cert-manager.io/x", Direction::ToCluster)
            .as_deref(),
        Some("cm-keys.team-b.example.com/x")
    );
    assert_eq!(md.prefixes().len(), 1);
}

#[test]
fn kopf_nests_its_keys_under_its_own_family_with_the_copys_mark() {
    let s = regroup_config::load(
        "rules:\n  - {from: demo.example.io, to: demo.team-b.example.com}\nnames: {prefix: team-b-}\nprofiles: [kopf]\n",
    )
    .unwrap();
    let md = s.map.metadata().unwrap();
    assert_eq!(
        md.map_key(
            "kopf.zalando.org/last-handled-configuration",
            Direction::ToCluster
        )
        .as_deref(),
        Some("team-b.kopf.zalando.org/last-handled-configuration")
    );
}

#[test]
fn an_unknown_profile_or_one_without_its_groups_is_refused() {
    let e = regroup_config::load(
        "rules:\n  - {from: a.example.io, to: b.example.io}\nprofiles: [cert-manger, argo-cd]\n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("`cert-manger` is not known"), "{e}");
    assert!(
        e.contains("cert-manager, external-secrets, argo-cd, kopf"),
        "{e}"
    );
    assert!(
        e.contains("`argo-cd` needs a rule for its groups (argoproj.io)"),
        "{e}"
    );
}
