//! [`GroupMap`]: every wire form a group takes, in both directions.
//!
//! Two maps are used throughout, one per kind of rule:
//!
//! - [`exact_map`]: `samplecontroller.k8s.io -> samplecontroller.team1.example.com`
//!   and `wardle.example.com -> wardle.team1.example.com` (exact rules);
//! - [`suffix_map`]: `pinniped.dev -> team1.example.com` (a suffix rule).
//!
//! They can't be one map: `samplecontroller.team1.example.com` lies under the
//! suffix rule's target, so `samplecontroller.pinniped.dev` and
//! `samplecontroller.k8s.io` would both become it
//! (see [`exact_target_inside_a_suffix_target_is_not_a_bijection`]).

use std::sync::LazyLock;

use proptest::prelude::*;

use super::*;
use crate::dns::has_label_suffix;
use Direction::{ToApp, ToCluster};

fn exact(from: &str, to: &str) -> MapRule {
    MapRule {
        rule: Rule::Exact {
            from: from.into(),
            to: to.into(),
        },
        reference_keys: true,
    }
}

fn suffix(from: &str, to: &str) -> MapRule {
    MapRule {
        rule: Rule::Suffix {
            from: from.into(),
            to: to.into(),
        },
        reference_keys: true,
    }
}

fn without_reference_keys(mut r: MapRule) -> MapRule {
    r.reference_keys = false;
    r
}

static EXACT: LazyLock<GroupMap> = LazyLock::new(|| {
    GroupMap::new(vec![
        exact(
            "samplecontroller.k8s.io",
            "samplecontroller.team1.example.com",
        ),
        exact("wardle.example.com", "wardle.team1.example.com"),
    ])
    .expect("exact rules are valid")
});

static SUFFIX: LazyLock<GroupMap> = LazyLock::new(|| {
    GroupMap::new(vec![suffix("pinniped.dev", "team1.example.com")]).expect("suffix rule is valid")
});

/// Exact rules: sample-controller's CRD group and the wardle aggregated API.
fn exact_map() -> &'static GroupMap {
    &EXACT
}

/// One suffix rule: Pinniped's groups.
fn suffix_map() -> &'static GroupMap {
    &SUFFIX
}

/// `f(app, ToCluster) == cluster` and `f(cluster, ToApp) == app`.
#[track_caller]
fn both_ways(f: impl Fn(&str, Direction) -> Option<String>, app: &str, cluster: &str) {
    assert_eq!(
        f(app, ToCluster).as_deref(),
        Some(cluster),
        "{app:?} to the cluster"
    );
    assert_eq!(
        f(cluster, ToApp).as_deref(),
        Some(app),
        "{cluster:?} to the app"
    );
}

/// `f(s, dir)` is `None` in both directions.
#[track_caller]
fn untouched(f: impl Fn(&str, Direction) -> Option<String>, s: &str) {
    assert_eq!(f(s, ToCluster), None, "{s:?} to the cluster");
    assert_eq!(f(s, ToApp), None, "{s:?} to the app");
}

// ---------------------------------------------------------------- group

#[test]
fn exact_rule_maps_its_group_both_ways() {
    let m = exact_map();
    let f = |s: &str, d| m.map_group(s, d);
    both_ways(
        f,
        "samplecontroller.k8s.io",
        "samplecontroller.team1.example.com",
    );
    both_ways(f, "wardle.example.com", "wardle.team1.example.com");
}

#[test]
fn exact_rule_maps_only_in_its_own_direction() {
    let m = exact_map();
    // The cluster name is not an app name, and the other way round.
    assert_eq!(
        m.map_group("samplecontroller.team1.example.com", ToCluster),
        None
    );
    assert_eq!(m.map_group("samplecontroller.k8s.io", ToApp), None);
}

#[test]
fn exact_rule_does_not_cover_subgroups_or_parents() {
    let m = exact_map();
    let f = |s: &str, d| m.map_group(s, d);
    for g in [
        "foo.samplecontroller.k8s.io",
        "k8s.io",
        "xsamplecontroller.k8s.io",
        "samplecontroller.k8s.io.evil.com",
        "foo.samplecontroller.team1.example.com",
        "team1.example.com",
    ] {
        untouched(f, g);
    }
}

#[test]
fn suffix_rule_maps_groups_under_the_suffix_both_ways() {
    let m = suffix_map();
    let f = |s: &str, d| m.map_group(s, d);
    both_ways(
        f,
        "login.concierge.pinniped.dev",
        "login.concierge.team1.example.com",
    );
    both_ways(
        f,
        "authentication.concierge.pinniped.dev",
        "authentication.concierge.team1.example.com",
    );
    both_ways(
        f,
        "config.supervisor.pinniped.dev",
        "config.supervisor.team1.example.com",
    );
}

#[test]
fn suffix_rule_maps_the_suffix_itself() {
    let m = suffix_map();
    both_ways(
        |s, d| m.map_group(s, d),
        "pinniped.dev",
        "team1.example.com",
    );
}

#[test]
fn suffix_rule_matches_only_on_a_label_boundary() {
    let m = suffix_map();
    let f = |s: &str, d| m.map_group(s, d);
    for g in [
        "xpinniped.dev",
        "pinniped.devx",
        "pinniped.dev.evil.com",
        "dev",
        "xteam1.example.com",
        "example.com",
        "team1.example.com.evil",
    ] {
        untouched(f, g);
    }
}

#[test]
fn groups_no_rule_touches_pass_through() {
    for m in [exact_map(), suffix_map()] {
        let f = |s: &str, d| m.map_group(s, d);
        for g in [
            "",
            "apps",
            "batch",
            "rbac.authorization.k8s.io",
            "apiextensions.k8s.io",
            "metrics.k8s.io",
            "samplecontroller.team2.example.com",
        ] {
            untouched(f, g);
        }
    }
}

#[test]
fn group_names_are_case_sensitive() {
    untouched(
        |s, d| exact_map().map_group(s, d),
        "SampleController.k8s.io",
    );
    untouched(|s, d| suffix_map().map_group(s, d), "login.Pinniped.dev");
}

#[test]
fn direction_flip_swaps_directions() {
    assert_eq!(ToCluster.flip(), ToApp);
    assert_eq!(ToApp.flip(), ToCluster);
}

#[test]
fn exact_target_inside_a_suffix_target_is_not_a_bijection() {
    // `samplecontroller.pinniped.dev` (suffix rule) and
    // `samplecontroller.k8s.io` (exact rule) would both become
    // `samplecontroller.team1.example.com`.
    let problems = GroupMap::new(vec![
        exact(
            "samplecontroller.k8s.io",
            "samplecontroller.team1.example.com",
        ),
        suffix("pinniped.dev", "team1.example.com"),
    ])
    .expect_err("two app groups map to one cluster group");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].rules, vec![0, 1]);
    assert!(
        problems[0]
            .message
            .contains("`samplecontroller.pinniped.dev`"),
        "{}",
        problems[0].message
    );
}

#[test]
fn exact_rule_wins_over_an_agreeing_suffix_rule() {
    // Agreeing overlap is allowed; the exact rule's switches apply to its group.
    let m = GroupMap::new(vec![
        suffix("pinniped.dev", "team1.example.com"),
        without_reference_keys(exact(
            "login.concierge.pinniped.dev",
            "login.concierge.team1.example.com",
        )),
    ])
    .expect("agreeing overlap is valid");
    for dir in [ToCluster, ToApp] {
        let (login, other) = match dir {
            ToCluster => (
                "login.concierge.pinniped.dev",
                "identity.concierge.pinniped.dev",
            ),
            ToApp => (
                "login.concierge.team1.example.com",
                "identity.concierge.team1.example.com",
            ),
        };
        assert!(m.rule_for(login, dir).is_some_and(|r| !r.rule.is_suffix()));
        assert!(m.rule_for(other, dir).is_some_and(|r| r.rule.is_suffix()));
        assert!(m.map_group(login, dir).is_some());
        assert_eq!(m.map_group_by_reference_key(login, dir), None);
        assert!(m.map_group_by_reference_key(other, dir).is_some());
    }
    both_ways(
        |s, d| m.map_group(s, d),
        "login.concierge.pinniped.dev",
        "login.concierge.team1.example.com",
    );
}

// ----------------------------------------------------------- apiVersion

#[test]
fn api_version_maps_the_group_and_keeps_the_version() {
    let f = |s: &str, d| exact_map().map_api_version(s, d);
    both_ways(
        f,
        "samplecontroller.k8s.io/v1alpha1",
        "samplecontroller.team1.example.com/v1alpha1",
    );
    both_ways(
        f,
        "wardle.example.com/v1beta1",
        "wardle.team1.example.com/v1beta1",
    );
    let f = |s: &str, d| suffix_map().map_api_version(s, d);
    both_ways(
        f,
        "login.concierge.pinniped.dev/v1alpha1",
        "login.concierge.team1.example.com/v1alpha1",
    );
    both_ways(f, "pinniped.dev/v1", "team1.example.com/v1");
}

#[test]
fn api_version_of_core_and_builtin_groups_is_untouched() {
    for m in [exact_map(), suffix_map()] {
        let f = |s: &str, d| m.map_api_version(s, d);
        for v in [
            "v1",
            "",
            "/v1",
            "apps/v1",
            "batch/v1",
            "rbac.authorization.k8s.io/v1",
            "meta.k8s.io/v1",
            "apiextensions.k8s.io/v1",
        ] {
            untouched(f, v);
        }
    }
}

#[test]
fn api_version_needs_the_exact_group_before_the_slash() {
    let f = |s: &str, d| exact_map().map_api_version(s, d);
    untouched(f, "foo.samplecontroller.k8s.io/v1alpha1");
    untouched(f, "xsamplecontroller.k8s.io/v1alpha1");
    // A bare group is not an apiVersion.
    untouched(f, "samplecontroller.k8s.io");
    let f = |s: &str, d| suffix_map().map_api_version(s, d);
    untouched(f, "xpinniped.dev/v1");
}

#[test]
fn api_version_into_a_buffer_is_the_mapping_appended() {
    for m in [exact_map(), suffix_map()] {
        for v in [
            "samplecontroller.k8s.io/v1alpha1",
            "samplecontroller.team1.example.com/v1alpha1",
            "wardle.example.com/v1beta1",
            "login.concierge.pinniped.dev/v1alpha1",
            "login.concierge.team1.example.com/v1alpha1",
            "pinniped.dev/v1",
            "team1.example.com/",
            "apps/v1",
            "v1",
            "",
            "xpinniped.dev/v1",
        ] {
            for d in [ToCluster, ToApp] {
                let mut out = String::from("kept");
                let mapped = m.map_api_version_into(v, d, &mut out);
                match m.map_api_version(v, d) {
                    Some(want) => {
                        assert!(mapped, "{v}");
                        assert_eq!(out, format!("kept{want}"), "{v}");
                    }
                    None => {
                        assert!(!mapped, "{v}");
                        assert_eq!(out, "kept", "{v}");
                    }
                }
            }
        }
    }
}

// ---------------------------------------------- plural.group, version.group

#[test]
fn plural_group_maps_crd_names() {
    let f = |s: &str, d| exact_map().map_plural_group(s, d);
    both_ways(
        f,
        "foos.samplecontroller.k8s.io",
        "foos.samplecontroller.team1.example.com",
    );
    let f = |s: &str, d| suffix_map().map_plural_group(s, d);
    both_ways(
        f,
        "tokencredentialrequests.login.concierge.pinniped.dev",
        "tokencredentialrequests.login.concierge.team1.example.com",
    );
    both_ways(
        f,
        "jwtauthenticators.authentication.concierge.pinniped.dev",
        "jwtauthenticators.authentication.concierge.team1.example.com",
    );
}

#[test]
fn plural_group_reads_exactly_one_leading_label() {
    let f = |s: &str, d| exact_map().map_plural_group(s, d);
    // The group of `samplecontroller.k8s.io` read as a CRD name is `k8s.io`.
    untouched(f, "samplecontroller.k8s.io");
    // Two leading labels leave `bar.samplecontroller.k8s.io` as the group.
    untouched(f, "foos.bar.samplecontroller.k8s.io");
    untouched(f, "foos");
    untouched(f, "foos.");
    untouched(f, "deployments.apps");
    untouched(f, "customresourcedefinitions.apiextensions.k8s.io");
}

#[test]
fn version_group_maps_apiservice_names() {
    let f = |s: &str, d| exact_map().map_version_group(s, d);
    both_ways(
        f,
        "v1alpha1.wardle.example.com",
        "v1alpha1.wardle.team1.example.com",
    );
    both_ways(
        f,
        "v1beta1.wardle.example.com",
        "v1beta1.wardle.team1.example.com",
    );
    untouched(f, "v1.apps");
    untouched(f, "v1beta1.metrics.k8s.io");
    let f = |s: &str, d| suffix_map().map_version_group(s, d);
    both_ways(
        f,
        "v1alpha1.login.concierge.pinniped.dev",
        "v1alpha1.login.concierge.team1.example.com",
    );
}

#[test]
fn qualified_name_form_dispatches_to_map_qualified_name() {
    let m = exact_map();
    both_ways(
        |s, d| m.map(Form::QualifiedName, s, d),
        "foos.samplecontroller.k8s.io",
        "foos.samplecontroller.team1.example.com",
    );
}

// ----------------------------------------------------------------- text

#[test]
fn text_maps_resource_group_in_not_found_message() {
    let f = |s: &str, d| exact_map().map_text(s, d);
    both_ways(
        f,
        r#"foos.samplecontroller.k8s.io "missing" not found"#,
        r#"foos.samplecontroller.team1.example.com "missing" not found"#,
    );
}

#[test]
fn text_maps_kind_group_in_invalid_message() {
    let f = |s: &str, d| exact_map().map_text(s, d);
    both_ways(
        f,
        r#"Foo.samplecontroller.k8s.io "x" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"#,
        r#"Foo.samplecontroller.team1.example.com "x" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"#,
    );
}

#[test]
fn text_maps_quoted_group_in_no_matches_message() {
    let f = |s: &str, d| exact_map().map_text(s, d);
    both_ways(
        f,
        r#"no matches for kind "Foo" in group "samplecontroller.k8s.io""#,
        r#"no matches for kind "Foo" in group "samplecontroller.team1.example.com""#,
    );
}

#[test]
fn text_maps_suffix_groups_in_messages() {
    let f = |s: &str, d| suffix_map().map_text(s, d);
    both_ways(
        f,
        r#"tokencredentialrequests.login.concierge.pinniped.dev is forbidden: User "bob" cannot create resource "tokencredentialrequests" in API group "login.concierge.pinniped.dev" at the cluster scope"#,
        r#"tokencredentialrequests.login.concierge.team1.example.com is forbidden: User "bob" cannot create resource "tokencredentialrequests" in API group "login.concierge.team1.example.com" at the cluster scope"#,
    );
}

#[test]
fn text_maps_every_occurrence_and_keeps_the_rest_byte_for_byte() {
    let f = |s: &str, d| exact_map().map_text(s, d);
    both_ways(
        f,
        "«é» samplecontroller.k8s.io/v1alpha1, Kind=Foo; v1alpha1.wardle.example.com — foos.samplecontroller.k8s.io.\n\t(end)",
        "«é» samplecontroller.team1.example.com/v1alpha1, Kind=Foo; v1alpha1.wardle.team1.example.com — foos.samplecontroller.team1.example.com.\n\t(end)",
    );
}

#[test]
fn text_trailing_period_is_not_part_of_the_group() {
    let f = |s: &str, d| exact_map().map_text(s, d);
    both_ways(
        f,
        "the server could not find group samplecontroller.k8s.io.",
        "the server could not find group samplecontroller.team1.example.com.",
    );
    both_ways(
        f,
        "group samplecontroller.k8s.io...",
        "group samplecontroller.team1.example.com...",
    );
}

#[test]
fn text_without_a_mapped_group_is_none() {
    for m in [exact_map(), suffix_map()] {
        let f = |s: &str, d| m.map_text(s, d);
        for t in [
            "",
            r#"deployments.apps "web" not found"#,
            r#"no matches for kind "Deployment" in group "apps""#,
            "the server could not find the requested resource",
        ] {
            untouched(f, t);
        }
    }
}

#[test]
fn text_does_not_map_a_group_inside_a_longer_name() {
    let f = |s: &str, d| exact_map().map_text(s, d);
    for t in [
        r#"xsamplecontroller.k8s.io "a" not found"#,
        "see samplecontroller.k8s.io.evil.com",
        "samplecontroller.k8s.io-extra and extra-samplecontroller.k8s.io",
        "xsamplecontroller.team1.example.com",
    ] {
        untouched(f, t);
    }
    let f = |s: &str, d| suffix_map().map_text(s, d);
    for t in [
        "xpinniped.dev is not a group",
        "pinniped.devx",
        "login.pinniped.dev.evil.com",
        "xteam1.example.com",
    ] {
        untouched(f, t);
    }
}

// ------------------------------------------------------------ reverse DNS

#[test]
fn reverse_dns_maps_crd_definition_names() {
    let f = |s: &str, d| exact_map().map_reverse_dns(s, d);
    both_ways(
        f,
        "io.k8s.samplecontroller.v1alpha1.Foo",
        "com.example.team1.samplecontroller.v1alpha1.Foo",
    );
    both_ways(
        f,
        "io.k8s.samplecontroller.v1alpha1.FooList",
        "com.example.team1.samplecontroller.v1alpha1.FooList",
    );
    both_ways(
        f,
        "com.example.wardle.v1beta1.Flunder",
        "com.example.team1.wardle.v1beta1.Flunder",
    );
    let f = |s: &str, d| suffix_map().map_reverse_dns(s, d);
    both_ways(
        f,
        "dev.pinniped.concierge.login.v1alpha1.TokenCredentialRequest",
        "com.example.team1.concierge.login.v1alpha1.TokenCredentialRequest",
    );
    both_ways(f, "dev.pinniped.v1.Thing", "com.example.team1.v1.Thing");
}

#[test]
fn reverse_dns_leaves_builtin_definitions_untouched() {
    for m in [exact_map(), suffix_map()] {
        let f = |s: &str, d| m.map_reverse_dns(s, d);
        for name in [
            "io.k8s.api.apps.v1.Deployment",
            "io.k8s.api.core.v1.Pod",
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
            "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
            "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIService",
        ] {
            untouched(f, name);
        }
    }
}

#[test]
fn reverse_dns_needs_a_version_label_after_the_group() {
    let f = |s: &str, d| exact_map().map_reverse_dns(s, d);
    untouched(f, "io.k8s.samplecontroller.Foo");
    untouched(f, "io.k8s.samplecontroller");
    untouched(f, "v1.Foo");
    untouched(f, "");
    // `v1alpha` is not a version, so the group would be `v1alpha.samplecontroller.k8s.io`.
    untouched(f, "io.k8s.samplecontroller.v1alpha.Foo");
    // Not a label-boundary match: the group read is `xsamplecontroller.k8s.io`.
    untouched(f, "io.k8s.xsamplecontroller.v1.Foo");
}

// -------------------------------------------------------------- API paths

#[test]
fn api_path_maps_the_group_after_apis() {
    let f = |s: &str, d| exact_map().map_api_path(s, d);
    for (app, cluster) in [
        (
            "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/x/foos",
            "/apis/samplecontroller.team1.example.com/v1alpha1/namespaces/x/foos",
        ),
        (
            "/apis/samplecontroller.k8s.io/v1alpha1/watch/namespaces/x/foos/a",
            "/apis/samplecontroller.team1.example.com/v1alpha1/watch/namespaces/x/foos/a",
        ),
        (
            "/apis/samplecontroller.k8s.io/v1alpha1",
            "/apis/samplecontroller.team1.example.com/v1alpha1",
        ),
        (
            "/apis/samplecontroller.k8s.io",
            "/apis/samplecontroller.team1.example.com",
        ),
        (
            "/apis/samplecontroller.k8s.io?timeout=32s",
            "/apis/samplecontroller.team1.example.com?timeout=32s",
        ),
        (
            "apis/samplecontroller.k8s.io/v1alpha1",
            "apis/samplecontroller.team1.example.com/v1alpha1",
        ),
        (
            "/openapi/v3/apis/samplecontroller.k8s.io/v1alpha1",
            "/openapi/v3/apis/samplecontroller.team1.example.com/v1alpha1",
        ),
        (
            "/openapi/v3/apis/wardle.example.com/v1alpha1?hash=ABC",
            "/openapi/v3/apis/wardle.team1.example.com/v1alpha1?hash=ABC",
        ),
    ] {
        both_ways(f, app, cluster);
    }
    let f = |s: &str, d| suffix_map().map_api_path(s, d);
    both_ways(
        f,
        "/apis/login.concierge.pinniped.dev/v1alpha1/tokencredentialrequests",
        "/apis/login.concierge.team1.example.com/v1alpha1/tokencredentialrequests",
    );
}

#[test]
fn api_path_without_a_mapped_group_is_untouched() {
    let f = |s: &str, d| exact_map().map_api_path(s, d);
    for p in [
        "",
        "/",
        "/api",
        "/api/v1/namespaces/x/pods",
        "/api/v1/namespaces/apis/samplecontroller.k8s.io",
        "/apis",
        "/apis/",
        "/apis/apps/v1/deployments",
        "/apisx/samplecontroller.k8s.io/v1alpha1",
        "/foo/apis/samplecontroller.k8s.io/v1alpha1",
        "/openapi/v2",
        "/openapi/v3",
        "/openapi/v3/api/v1",
        "/version",
        "/healthz",
        "/apis/foo.samplecontroller.k8s.io/v1",
    ] {
        untouched(f, p);
    }
}

// ------------------------------------------------------ Form dispatching

#[test]
fn map_dispatches_on_form() {
    let m = exact_map();
    for (form, app, cluster) in [
        (
            Form::Group,
            "samplecontroller.k8s.io",
            "samplecontroller.team1.example.com",
        ),
        (
            Form::ApiVersion,
            "samplecontroller.k8s.io/v1alpha1",
            "samplecontroller.team1.example.com/v1alpha1",
        ),
        (
            Form::Text,
            r#"foos.samplecontroller.k8s.io "a" not found"#,
            r#"foos.samplecontroller.team1.example.com "a" not found"#,
        ),
        (
            Form::ReverseDns,
            "io.k8s.samplecontroller.v1alpha1.Foo",
            "com.example.team1.samplecontroller.v1alpha1.Foo",
        ),
        (
            Form::ApiPath,
            "/apis/samplecontroller.k8s.io/v1alpha1",
            "/apis/samplecontroller.team1.example.com/v1alpha1",
        ),
        (
            Form::FieldSelector,
            "involvedObject.apiVersion=samplecontroller.k8s.io/v1alpha1,x.apiGroup!=samplecontroller.k8s.io,metadata.name=foos.samplecontroller.k8s.io",
            "involvedObject.apiVersion=samplecontroller.team1.example.com/v1alpha1,x.apiGroup!=samplecontroller.team1.example.com,metadata.name=foos.samplecontroller.k8s.io",
        ),
        (
            Form::GroupKinds,
            "Foo.samplecontroller.k8s.io,Deployment.apps,ConfigMap",
            "Foo.samplecontroller.team1.example.com,Deployment.apps,ConfigMap",
        ),
        (
            Form::ObjectCount,
            "count/foos.samplecontroller.k8s.io",
            "count/foos.samplecontroller.team1.example.com",
        ),
    ] {
        both_ways(|s, d| m.map(form, s, d), app, cluster);
    }
}

#[test]
fn only_group_bearing_selector_keys_and_quota_keys_are_mapped() {
    let m = exact_map();
    // A selector naming the group elsewhere than an apiVersion/apiGroup key.
    assert_eq!(
        m.map(
            Form::FieldSelector,
            "spec.x=samplecontroller.k8s.io",
            ToCluster
        ),
        None
    );
    // Extended resources and plain quota keys name no group.
    for key in [
        "requests.samplecontroller.k8s.io/gpu",
        "pods",
        "count/pods",
        "foos.samplecontroller.k8s.io",
    ] {
        assert_eq!(m.map(Form::ObjectCount, key, ToCluster), None, "{key}");
    }
    assert_eq!(
        m.map(Form::GroupKinds, "Deployment.apps,Pod", ToCluster),
        None
    );
}

// ------------------------------------------------------ shadowing, needles

#[test]
fn upstream_groups_named_like_originals_are_shadowed_for_the_app() {
    let m = exact_map();
    assert!(m.is_shadowed("samplecontroller.k8s.io", ToApp));
    assert!(m.is_shadowed("wardle.example.com", ToApp));
    assert!(!m.is_shadowed("samplecontroller.team1.example.com", ToApp));
    assert!(!m.is_shadowed("apps", ToApp));
    assert!(!m.is_shadowed("foo.samplecontroller.k8s.io", ToApp));

    let m = suffix_map();
    assert!(m.is_shadowed("pinniped.dev", ToApp));
    assert!(m.is_shadowed("login.concierge.pinniped.dev", ToApp));
    assert!(!m.is_shadowed("login.concierge.team1.example.com", ToApp));
    assert!(!m.is_shadowed("xpinniped.dev", ToApp));
}

#[test]
fn groups_named_like_cluster_names_are_shadowed_toward_the_cluster() {
    let m = exact_map();
    assert!(m.is_shadowed("samplecontroller.team1.example.com", ToCluster));
    assert!(m.is_shadowed("wardle.team1.example.com", ToCluster));
    assert!(!m.is_shadowed("samplecontroller.k8s.io", ToCluster));
    assert!(!m.is_shadowed("apps", ToCluster));

    let m = suffix_map();
    assert!(m.is_shadowed("team1.example.com", ToCluster));
    assert!(m.is_shadowed("login.concierge.team1.example.com", ToCluster));
    assert!(!m.is_shadowed("login.concierge.pinniped.dev", ToCluster));
    assert!(!m.is_shadowed("xteam1.example.com", ToCluster));
}

#[test]
fn needles_are_the_source_names_of_each_direction() {
    assert_eq!(
        exact_map().needles(ToCluster),
        ["samplecontroller.k8s.io", "wardle.example.com"]
    );
    assert_eq!(
        exact_map().needles(ToApp),
        [
            "samplecontroller.team1.example.com",
            "wardle.team1.example.com"
        ]
    );
    assert_eq!(suffix_map().needles(ToCluster), ["pinniped.dev"]);
    assert_eq!(suffix_map().needles(ToApp), ["team1.example.com"]);
}

#[test]
fn every_mapped_input_contains_a_needle() {
    for (m, inputs) in [
        (
            exact_map(),
            &[
                "/apis/samplecontroller.k8s.io/v1alpha1",
                "v1alpha1.wardle.example.com",
            ][..],
        ),
        (
            suffix_map(),
            &["tokencredentialrequests.login.concierge.pinniped.dev"][..],
        ),
    ] {
        for s in inputs {
            let mapped = m.map_text(s, ToCluster).expect("mapped");
            assert!(m.needles(ToCluster).iter().any(|n| s.contains(n)));
            assert!(m.needles(ToApp).iter().any(|n| mapped.contains(n)));
        }
    }
}

// --------------------------------------------------------- reference keys

#[test]
fn reference_key_mapping_honors_reference_keys_false() {
    let m = GroupMap::new(vec![
        without_reference_keys(exact(
            "samplecontroller.k8s.io",
            "samplecontroller.team1.example.com",
        )),
        exact("wardle.example.com", "wardle.team1.example.com"),
    ])
    .unwrap();
    let (app, cluster) = (
        "samplecontroller.k8s.io",
        "samplecontroller.team1.example.com",
    );
    // Still renamed where the catalog says it is a group...
    both_ways(|s, d| m.map_group(s, d), app, cluster);
    // ...but not as the value of an `apiGroup`/`apiVersion` key.
    untouched(|s, d| m.map_group_by_reference_key(s, d), app);
    untouched(|s, d| m.map_group_by_reference_key(s, d), cluster);
    untouched(
        |s, d| m.map_api_version_by_reference_key(s, d),
        &format!("{app}/v1alpha1"),
    );
    untouched(
        |s, d| m.map_api_version_by_reference_key(s, d),
        &format!("{cluster}/v1alpha1"),
    );
    both_ways(
        |s, d| m.map_group_by_reference_key(s, d),
        "wardle.example.com",
        "wardle.team1.example.com",
    );
    both_ways(
        |s, d| m.map_api_version_by_reference_key(s, d),
        "wardle.example.com/v1alpha1",
        "wardle.team1.example.com/v1alpha1",
    );
}

#[test]
fn reference_key_mapping_defaults_to_map_group() {
    let m = suffix_map();
    both_ways(
        |s, d| m.map_group_by_reference_key(s, d),
        "login.concierge.pinniped.dev",
        "login.concierge.team1.example.com",
    );
    untouched(|s, d| m.map_group_by_reference_key(s, d), "apps");
    untouched(|s, d| m.map_api_version_by_reference_key(s, d), "v1");
}

// --------------------------------------------------------- version labels

#[test]
fn version_labels_are_kubernetes_versions() {
    for v in [
        "v1",
        "v2",
        "v10",
        "v1alpha1",
        "v1beta1",
        "v2beta3",
        "v1alpha10",
        "v12beta2",
    ] {
        assert!(is_version_label(v), "{v}");
    }
    for v in [
        "",
        "v",
        "v0",
        "v01",
        "1",
        "V1",
        "v1alpha",
        "v1beta",
        "v1alpha0",
        "v1beta01",
        "v1gamma1",
        "v1alpha1x",
        "vv1",
        "v1-alpha1",
        "apps",
        "valpha1",
    ] {
        assert!(!is_version_label(v), "{v}");
    }
}

// ------------------------------------------------------------ properties

fn reverse_labels_of(group: &str) -> String {
    group.split('.').rev().collect::<Vec<_>>().join(".")
}

fn dns_label() -> impl Strategy<Value = String> {
    "[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?"
}

fn version() -> impl Strategy<Value = String> {
    "v[1-9][0-9]?((alpha|beta)[1-9])?"
}

fn plural() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9]{0,12}"
}

fn kind() -> impl Strategy<Value = String> {
    "[A-Z][A-Za-z0-9]{0,12}"
}

/// A group in a map's domain (toward the cluster), with that map.
fn in_domain() -> impl Strategy<Value = (&'static GroupMap, String)> {
    prop_oneof![
        prop::sample::select(vec!["samplecontroller.k8s.io", "wardle.example.com"])
            .prop_map(|g| (exact_map(), g.to_owned())),
        prop::collection::vec(dns_label(), 0..4).prop_map(|mut labels| {
            labels.push("pinniped.dev".into());
            (suffix_map(), labels.join("."))
        }),
    ]
}

/// Every name either map reads, in either direction.
fn source_names() -> Vec<&'static str> {
    let mut out = Vec::new();
    for m in [exact_map(), suffix_map()] {
        for dir in [ToCluster, ToApp] {
            out.extend(m.needles(dir));
        }
    }
    out
}

/// A DNS name equal to or under no source name, built partly from the
/// rules' own labels so near misses (`xpinniped.dev`, `k8s.io`) are common.
fn out_of_domain() -> impl Strategy<Value = String> {
    let label = prop_oneof![
        dns_label(),
        prop::sample::select(vec![
            "samplecontroller",
            "xsamplecontroller",
            "k8s",
            "io",
            "pinniped",
            "xpinniped",
            "dev",
            "wardle",
            "team1",
            "xteam1",
            "example",
            "com",
            "apps",
            "v1",
        ])
        .prop_map(str::to_owned),
    ];
    prop::collection::vec(label, 1..5)
        .prop_map(|labels| labels.join("."))
        .prop_filter("in some map's domain", |name| {
            source_names().iter().all(|s| !has_label_suffix(name, s))
        })
}

proptest! {
    #[test]
    fn group_round_trips((m, g) in in_domain()) {
        let c = m.map_group(&g, ToCluster).expect("in domain");
        prop_assert_ne!(&c, &g);
        prop_assert_eq!(m.map_group(&c, ToApp), Some(g));
    }

    #[test]
    fn api_version_round_trips((m, g) in in_domain(), v in version()) {
        let av = format!("{g}/{v}");
        let c = m.map_api_version(&av, ToCluster).expect("in domain");
        let tail = format!("/{v}");
        prop_assert!(c.ends_with(&tail));
        prop_assert_eq!(m.map_api_version(&c, ToApp), Some(av));
    }

    #[test]
    fn plural_group_round_trips((m, g) in in_domain(), p in plural()) {
        let name = format!("{p}.{g}");
        let c = m.map_plural_group(&name, ToCluster).expect("in domain");
        let head = format!("{p}.");
        prop_assert!(c.starts_with(&head));
        prop_assert_eq!(m.map_plural_group(&c, ToApp), Some(name));
    }

    #[test]
    fn reverse_dns_round_trips((m, g) in in_domain(), v in version(), k in kind()) {
        let name = format!("{}.{v}.{k}", reverse_labels_of(&g));
        let c = m.map_reverse_dns(&name, ToCluster).expect("in domain");
        let tail = format!(".{v}.{k}");
        prop_assert!(c.ends_with(&tail));
        prop_assert_eq!(m.map_reverse_dns(&c, ToApp), Some(name));
    }

    #[test]
    fn api_path_round_trips((m, g) in in_domain(), v in version(), p in plural()) {
        let path = format!("/apis/{g}/{v}/namespaces/default/{p}");
        let c = m.map_api_path(&path, ToCluster).expect("in domain");
        prop_assert_eq!(m.map_api_path(&c, ToApp), Some(path));
    }

    #[test]
    fn text_round_trips((m, g) in in_domain(), p in plural()) {
        let text = format!(r#"{p}.{g} "missing" not found (group "{g}")"#);
        let c = m.map_text(&text, ToCluster).expect("in domain");
        prop_assert_eq!(m.map_text(&c, ToApp), Some(text));
    }

    #[test]
    fn names_outside_the_domain_are_never_mapped(
        x in out_of_domain(),
        v in version(),
        p in plural(),
        k in kind(),
    ) {
        for m in [exact_map(), suffix_map()] {
            for dir in [ToCluster, ToApp] {
                prop_assert_eq!(m.map_group(&x, dir), None);
                prop_assert_eq!(m.map_group_by_reference_key(&x, dir), None);
                prop_assert_eq!(m.map_api_version(&format!("{x}/{v}"), dir), None);
                prop_assert_eq!(m.map_plural_group(&format!("{p}.{x}"), dir), None);
                prop_assert_eq!(m.map_version_group(&format!("{v}.{x}"), dir), None);
                prop_assert_eq!(m.map_text(&x, dir), None);
                prop_assert_eq!(
                    m.map_text(&format!(r#"no matches for kind "{k}" in group "{x}""#), dir),
                    None
                );
                prop_assert_eq!(
                    m.map_reverse_dns(&format!("{}.{v}.{k}", reverse_labels_of(&x)), dir),
                    None
                );
                prop_assert_eq!(m.map_api_path(&format!("/apis/{x}/{v}/{p}"), dir), None);
                prop_assert_eq!(
                    m.map_api_path(&format!("/openapi/v3/apis/{x}/{v}"), dir),
                    None
                );
                prop_assert!(!m.is_shadowed(&x, dir));
            }
        }
    }
}

#[test]
fn many_exact_rules_are_looked_up_as_a_few_are() {
    // Past ExactNames::FEW names the lookup is a hash map: every name
    // still maps both ways, and names of a mapped name's length that no
    // rule has stay unmapped.
    for n in [1, 8, 9, 20] {
        let rules: Vec<MapRule> = (0..n)
            .map(|i| {
                exact(
                    &format!("g{i:02}.example.io"),
                    &format!("g{i:02}.team1.example.com"),
                )
            })
            .collect();
        let map = GroupMap::new(rules).expect("distinct groups");
        for i in 0..n {
            both_ways(
                |g, d| map.map_group(g, d),
                &format!("g{i:02}.example.io"),
                &format!("g{i:02}.team1.example.com"),
            );
            assert_eq!(
                map.map_group_cow(&format!("g{i:02}.team1.example.com"), ToApp)
                    .as_deref(),
                Some(format!("g{i:02}.example.io").as_str())
            );
        }
        assert_eq!(
            map.map_group("g99.example.io", ToCluster),
            None,
            "{n} rules"
        );
        assert_eq!(map.map_group("x", ToCluster), None, "{n} rules");
        assert_eq!(map.map_api_version("g00.example.io", ToCluster), None);
    }
}

#[test]
fn the_borrowed_group_map_answers_as_map_group() {
    for (map, groups) in [
        (
            exact_map(),
            [
                "samplecontroller.k8s.io",
                "samplecontroller.team1.example.com",
                "apps",
            ],
        ),
        (
            suffix_map(),
            [
                "login.concierge.pinniped.dev",
                "login.concierge.team1.example.com",
                "apps",
            ],
        ),
    ] {
        for g in groups {
            for d in [ToCluster, ToApp] {
                assert_eq!(
                    map.map_group_cow(g, d).map(Cow::into_owned),
                    map.map_group(g, d),
                    "{g} {d:?}"
                );
            }
        }
    }
}
