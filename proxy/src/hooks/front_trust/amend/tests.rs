use super::*;
use crate::hooks::front_trust::tests::map;

fn info(path: &str) -> RequestInfo {
    RequestInfo::parse(path, None)
}

#[test]
fn only_json_patches_of_apiservices_of_renamed_groups() {
    let m = map();
    let ours = info("/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.wardle.example.com");
    let jp = MediaType::Patch(PatchKind::Json);
    let to_cluster = Direction::ToCluster;
    assert!(applies(&ours, &Method::PATCH, jp, &m, to_cluster));
    // Other patch types, methods, groups, subresources, resources.
    assert!(!applies(
        &ours,
        &Method::PATCH,
        MediaType::Patch(PatchKind::Merge),
        &m,
        to_cluster
    ));
    assert!(!applies(&ours, &Method::PUT, jp, &m, to_cluster));
    let other = info("/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.k8s.io");
    assert!(!applies(&other, &Method::PATCH, jp, &m, to_cluster));
    let status =
        info("/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.wardle.example.com/status");
    assert!(!applies(&status, &Method::PATCH, jp, &m, to_cluster));
    let crd =
        info("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/flunders.wardle.example.com");
    assert!(!applies(&crd, &Method::PATCH, jp, &m, to_cluster));
    let unnamed = info("/apis/apiregistration.k8s.io/v1/apiservices");
    assert!(!applies(&unnamed, &Method::PATCH, jp, &m, to_cluster));
    // The cluster's name of the group is not the app's.
    let cluster_named =
        info("/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.wardle.team1.example.com");
    assert!(!applies(&cluster_named, &Method::PATCH, jp, &m, to_cluster));
}
