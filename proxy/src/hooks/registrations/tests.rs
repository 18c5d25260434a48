//! On the webhook registrations kube-apiserver 1.29 accepted in the capture
//! (`testdata/kube-1.29/webhooks`, `072` and `110`).

use super::*;
use regroup_config::schema::ServiceRef;

fn fixture(case: &str) -> Json {
    let p = format!(
        "{}/../testdata/kube-1.29/webhooks/orig/{case}/request.body",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

fn registration(reach_at: ReachAt, registration: Registration) -> WebhookRegistration {
    WebhookRegistration {
        reach_at,
        ca_bundle: "UkVHUk9VUA==".into(),
        fronted: vec![Fronted::new("/mutate-foo".into(), registration, None)],
    }
}

fn by_url(url: &str) -> Registration {
    Registration {
        url: Some(url.into()),
        service: None,
        configuration: None,
        webhook: None,
    }
}

fn loopback() -> ReachAt {
    ReachAt {
        url: Some("https://127.0.0.1:9444".into()),
        service: None,
    }
}

#[test]
fn a_fronted_webhook_points_at_regroup_and_the_app_reads_back_what_it_wrote() {
    let written = fixture("072-create-mutatingwebhookconfiguration-v1");
    let r = registration(loopback(), by_url("https://127.0.0.1:18443/mutate/orig/v1"));
    let info = RequestInfo::parse(
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        None,
    );
    let mut stored = written.clone();
    assert!(r.to_cluster(&mut stored, &info));
    assert_eq!(
        stored["webhooks"][0]["clientConfig"],
        serde_json::json!({"url": "https://127.0.0.1:9444/mutate-foo", "caBundle": "UkVHUk9VUA=="})
    );
    // Everything else as written.
    let mut rest = stored.clone();
    rest["webhooks"][0]["clientConfig"] = written["webhooks"][0]["clientConfig"].clone();
    rest["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove(APP_CLIENT_CONFIGS_ANNOTATION);
    rest["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("annotations");
    assert_eq!(rest, written);
    // Writing it again changes nothing more; reading it gives the app's.
    let mut again = stored.clone();
    assert!(!r.to_cluster(&mut again, &info));
    let mut read = stored.clone();
    assert!(r.to_app(&mut read));
    assert_eq!(read, written);
    // In a list and a watch event too.
    let mut list = serde_json::json!({"kind": "MutatingWebhookConfigurationList",
        "apiVersion": "admissionregistration.k8s.io/v1", "items": [stored.clone()]});
    assert!(r.to_app(&mut list));
    assert_eq!(list["items"][0], written);
    let mut ev = serde_json::json!({"type": "ADDED", "object": stored});
    assert!(r.to_app(&mut ev));
    assert_eq!(ev["object"], written);
}

#[test]
fn webhooks_the_configuration_does_not_front_are_left_alone() {
    let written = fixture("072-create-mutatingwebhookconfiguration-v1");
    let info = RequestInfo::parse(
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        None,
    );
    for other in [
        by_url("https://127.0.0.1:18443/other"),
        Registration {
            configuration: Some("another-configuration".into()),
            ..by_url("x")
        },
    ] {
        let other = Registration {
            url: other.url.filter(|u| u != "x"),
            ..other
        };
        let mut doc = written.clone();
        assert!(!registration(loopback(), other).to_cluster(&mut doc, &info));
        assert_eq!(doc, written);
    }
    // By configuration and webhook name, pointed at a Service.
    let r = registration(
        ReachAt {
            url: None,
            service: Some(ServiceRef {
                namespace: "team1".into(),
                name: "regroup-webhooks".into(),
                port: Some(9444),
                path: None,
            }),
        },
        Registration {
            url: None,
            service: None,
            configuration: Some("foo-mutate-orig-v1".into()),
            webhook: Some("mutate-v1.foo.regroup-fixtures.example.org".into()),
        },
    );
    let mut doc = written.clone();
    assert!(r.to_cluster(&mut doc, &info));
    assert_eq!(
        doc["webhooks"][0]["clientConfig"]["service"],
        serde_json::json!({"namespace": "team1", "name": "regroup-webhooks", "path": "/mutate-foo", "port": 9444})
    );
}

#[test]
fn a_crd_conversion_webhook_and_a_merge_patch_of_it() {
    let written = fixture("110-create-crd-bars-conversion-webhook");
    let r = registration(loopback(), by_url("https://127.0.0.1:18443/convert/orig"));
    let info = RequestInfo::parse(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        None,
    );
    let mut stored = written.clone();
    assert!(r.to_cluster(&mut stored, &info));
    assert_eq!(
        stored["spec"]["conversion"]["webhook"]["clientConfig"]["url"],
        "https://127.0.0.1:9444/mutate-foo"
    );
    let mut read = stored.clone();
    assert!(r.to_app(&mut read));
    assert_eq!(read, written);
    // A merge patch of the CRD (its kind only in the URL).
    let info = RequestInfo::parse(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/bars.samplecontroller.team1.example.com",
        None,
    );
    let mut patch = serde_json::json!({"spec": {"conversion": {"webhook": {"clientConfig":
        {"url": "https://127.0.0.1:18443/convert/orig", "caBundle": "TkVX"}}}}});
    assert!(r.to_cluster(&mut patch, &info));
    assert_eq!(
        patch["metadata"]["annotations"][APP_CLIENT_CONFIGS_ANNOTATION],
        r#"{"conversion":{"url":"https://127.0.0.1:18443/convert/orig","caBundle":"TkVX"}}"#
    );
}

#[test]
fn to_cluster_leaves_a_partial_client_config_to_amend_patch() {
    let info = RequestInfo::parse(
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/foo-mutate-orig-v1",
        None,
    );
    let r = registration(
        loopback(),
        Registration {
            url: None,
            service: None,
            configuration: Some("foo-mutate-orig-v1".into()),
            webhook: None,
        },
    );
    let patch = serde_json::json!({"webhooks": [{"name": "mutate-v1.foo.regroup-fixtures.example.org",
        "clientConfig": {"caBundle": "TkVX"}}]});
    let mut doc = patch.clone();
    assert!(!r.to_cluster(&mut doc, &info));
    assert_eq!(doc, patch);
}

/// The captured 072 as the cluster stores it once written through regroup
/// (with the fixture's `url` fronted), and the registration.
fn stored_072() -> (WebhookRegistration, Json, Json) {
    let written = fixture("072-create-mutatingwebhookconfiguration-v1");
    let r = registration(loopback(), by_url("https://127.0.0.1:18443/mutate/orig/v1"));
    let info = RequestInfo::parse(
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        None,
    );
    let mut stored = written.clone();
    assert!(r.to_cluster(&mut stored, &info));
    (r, written, stored)
}

fn patch_info() -> RequestInfo {
    RequestInfo::parse(
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/foo-mutate-orig-v1",
        None,
    )
}

const HOOK: &str = "mutate-v1.foo.regroup-fixtures.example.org";

fn kept(doc: &Json) -> Map<String, Json> {
    serde_json::from_str(
        doc["metadata"]["annotations"][APP_CLIENT_CONFIGS_ANNOTATION]
            .as_str()
            .unwrap(),
    )
    .unwrap()
}

#[test]
fn a_patch_of_a_fronted_webhooks_ca_bundle_alone_keeps_regroups_ca_in_the_cluster() {
    let (r, written, stored) = stored_072();
    // A strategic-merge patch of the bundle alone (a rotator's).
    let mut patch =
        serde_json::json!({"webhooks": [{"name": HOOK, "clientConfig": {"caBundle": "TkVX"}}]});
    assert!(r.amend_patch(&mut patch, &patch_info(), &stored).unwrap());
    assert_eq!(
        patch["webhooks"][0]["clientConfig"],
        serde_json::json!({"caBundle": "UkVHUk9VUA=="})
    );
    let mut app = written["webhooks"][0]["clientConfig"].clone();
    app["caBundle"] = "TkVX".into();
    assert_eq!(kept(&patch)[HOOK], app);
    // The cluster merges it (as kube-apiserver merges by webhook name):
    // the app reads back its url and its new bundle.
    let mut merged = stored.clone();
    merged["metadata"]["annotations"][APP_CLIENT_CONFIGS_ANNOTATION] =
        patch["metadata"]["annotations"][APP_CLIENT_CONFIGS_ANNOTATION].clone();
    assert_eq!(
        merged["webhooks"][0]["clientConfig"]["caBundle"],
        "UkVHUk9VUA=="
    );
    assert!(r.to_app(&mut merged));
    assert_eq!(merged["webhooks"][0]["clientConfig"], app);
    // Removing the bundle (null) removes it from what the app reads.
    let mut patch =
        serde_json::json!({"webhooks": [{"name": HOOK, "clientConfig": {"caBundle": null}}]});
    assert!(r.amend_patch(&mut patch, &patch_info(), &stored).unwrap());
    assert!(kept(&patch)[HOOK].get("caBundle").is_none());
}

#[test]
fn a_partial_client_config_regroup_cant_keep_whole_is_refused() {
    let (r, _, stored) = stored_072();
    let mut patch = serde_json::json!({"webhooks": [{"name": HOOK,
        "clientConfig": {"caBundle": "TkVX", "$patch": "replace"}}]});
    let e = r
        .amend_patch(&mut patch, &patch_info(), &stored)
        .unwrap_err()
        .to_string();
    assert!(e.contains(HOOK) && e.contains("$patch"), "{e}");
}

#[test]
fn a_patch_of_webhooks_regroup_does_not_front_goes_as_written() {
    let (r, _, stored) = stored_072();
    // Another webhook's bundle: nothing kept for it.
    let patch =
        serde_json::json!({"webhooks": [{"name": "other", "clientConfig": {"caBundle": "TkVX"}}]});
    let mut doc = patch.clone();
    assert!(!r.amend_patch(&mut doc, &patch_info(), &stored).unwrap());
    assert_eq!(doc, patch);
    // A configuration written before regroup fronted it: no annotation.
    let written = fixture("072-create-mutatingwebhookconfiguration-v1");
    let patch =
        serde_json::json!({"webhooks": [{"name": HOOK, "clientConfig": {"caBundle": "TkVX"}}]});
    let mut doc = patch.clone();
    assert!(!r.amend_patch(&mut doc, &patch_info(), &written).unwrap());
    assert_eq!(doc, patch);
}

#[test]
fn a_whole_client_config_in_a_patch_is_pointed_at_regroup_and_the_others_stay_kept() {
    let (r, written, mut stored) = stored_072();
    // A second fronted-then-kept webhook the patch does not name.
    let mut both = kept(&stored);
    both.insert(
        "second".into(),
        serde_json::json!({"url": "https://app/second"}),
    );
    stored["metadata"]["annotations"][APP_CLIENT_CONFIGS_ANNOTATION] =
        serde_json::to_string(&both).unwrap().into();
    let app = written["webhooks"][0]["clientConfig"].clone();
    let mut patch = serde_json::json!({"webhooks": [{"name": HOOK, "clientConfig": app}]});
    assert!(r.amend_patch(&mut patch, &patch_info(), &stored).unwrap());
    assert_eq!(
        patch["webhooks"][0]["clientConfig"]["url"],
        "https://127.0.0.1:9444/mutate-foo"
    );
    let k = kept(&patch);
    assert_eq!(k[HOOK], app);
    assert_eq!(
        k["second"],
        serde_json::json!({"url": "https://app/second"})
    );
    // Pointed somewhere regroup does not front: the cluster stores the
    // app's, the entry kept for it goes, and a stale one never shows.
    let elsewhere = serde_json::json!({"url": "https://elsewhere/hook", "caBundle": "TkVX"});
    let mut patch = serde_json::json!({"webhooks": [{"name": HOOK, "clientConfig": elsewhere}]});
    assert!(r.amend_patch(&mut patch, &patch_info(), &stored).unwrap());
    assert_eq!(patch["webhooks"][0]["clientConfig"], elsewhere);
    assert!(!kept(&patch).contains_key(HOOK));
    let mut stale = stored.clone();
    stale["webhooks"][0]["clientConfig"] = elsewhere.clone();
    r.to_app(&mut stale);
    assert_eq!(stale["webhooks"][0]["clientConfig"], elsewhere);
}

#[test]
fn a_merge_patch_of_a_crds_conversion_ca_bundle() {
    let written = fixture("110-create-crd-bars-conversion-webhook");
    let r = registration(loopback(), by_url("https://127.0.0.1:18443/convert/orig"));
    let info = RequestInfo::parse(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        None,
    );
    let mut stored = written.clone();
    assert!(r.to_cluster(&mut stored, &info));
    let info = RequestInfo::parse(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/bars.samplecontroller.team1.example.com",
        None,
    );
    let mut patch = serde_json::json!({"spec": {"conversion": {"webhook": {"clientConfig": {"caBundle": "TkVX"}}}}});
    assert!(r.amend_patch(&mut patch, &info, &stored).unwrap());
    assert_eq!(
        patch["spec"]["conversion"]["webhook"]["clientConfig"],
        serde_json::json!({"caBundle": "UkVHUk9VUA=="})
    );
    assert_eq!(
        kept(&patch)["conversion"]["url"],
        "https://127.0.0.1:18443/convert/orig"
    );
    assert_eq!(kept(&patch)["conversion"]["caBundle"], "TkVX");
    // The annotation the CRD already had is untouched by the patch.
    assert!(patch["metadata"]["annotations"]
        .get("api-approved.kubernetes.io")
        .is_none());
}

#[test]
fn metadata_only_reads_in_json_show_the_app_no_regroup_annotation() {
    let (r, _, stored) = stored_072();
    let item = |meta: &Json| serde_json::json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta});
    let mut list = serde_json::json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
        "items": [item(&stored["metadata"])]});
    assert!(r.to_app(&mut list));
    let mut expected = stored["metadata"].clone();
    expected.as_object_mut().unwrap().remove("annotations");
    assert_eq!(list["items"][0], item(&expected));
}

/// With `names:` renaming webhook configurations, the sidecar sees the
/// configuration under the cluster's name (the body is renamed first) or
/// the app's (a patch's URL): a registration by configuration name matches
/// both.
#[test]
fn a_registration_by_configuration_name_matches_the_renamed_configuration() {
    let names = ObjectNames::new(
        Some("team1-"),
        None,
        &["MutatingWebhookConfiguration".into()],
        &[],
    )
    .unwrap();
    let written = fixture("072-create-mutatingwebhookconfiguration-v1");
    let app_name = written["metadata"]["name"].as_str().unwrap().to_owned();
    let r = WebhookRegistration {
        reach_at: loopback(),
        ca_bundle: "UkVHUk9VUA==".into(),
        fronted: vec![Fronted::new(
            "/mutate-foo".into(),
            Registration {
                url: None,
                service: None,
                configuration: Some(app_name.clone()),
                webhook: None,
            },
            Some(&names),
        )],
    };
    let info = RequestInfo::parse(
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        None,
    );
    for name in [format!("team1-{app_name}"), app_name.clone()] {
        let mut stored = written.clone();
        stored["metadata"]["name"] = Json::String(name.clone());
        assert!(r.to_cluster(&mut stored, &info), "{name}");
        assert_eq!(
            stored["webhooks"][0]["clientConfig"]["url"],
            "https://127.0.0.1:9444/mutate-foo"
        );
    }
    // Another copy's configuration is not this one.
    let mut stored = written.clone();
    stored["metadata"]["name"] = Json::String(format!("team2-{app_name}"));
    assert!(!r.to_cluster(&mut stored, &info));
}
