//! The places of short forms (`shortNames`, `categories`), added to
//! the catalog when the configuration sets `names.shortNamePrefix`
//! (without it the catalog, and every byte, stays as it was).
//!
//! A CRD says them in `spec.names` (and the apiserver repeats them in
//! `status.acceptedNames`); discovery repeats them per resource, in the
//! legacy `APIResourceList` and in aggregated discovery's
//! `APIGroupDiscovery`. Each place says where the entry's group is read
//! ([`Slot::ShortForm`]): only a renamed group's names are the copy's.

use regroup_config::field_path::FieldPath;
use regroup_config::Form;

use super::{Place, Selector, Slot};

/// (group, kind, path of the names, path of the group from the object's
/// root, the form the group is written in).
const ROWS: &[(&str, &str, &str, &str, Form)] = &[
    (
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        "spec.names",
        "spec.group",
        Form::Group,
    ),
    (
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        "status.acceptedNames",
        "spec.group",
        Form::Group,
    ),
    (
        "",
        "APIResourceList",
        "resources[]",
        "groupVersion",
        Form::ApiVersion,
    ),
    (
        "apidiscovery.k8s.io",
        "APIGroupDiscovery",
        "versions[].resources[]",
        "metadata.name",
        Form::Group,
    ),
];

/// The places: each row's `shortNames[]` and `categories[]`.
pub(super) fn short_form_places() -> Vec<Place> {
    let mut out = Vec::new();
    for (group, kind, at, group_at, group_form) in ROWS {
        for (list, form) in [
            ("shortNames", Form::ShortName),
            ("categories", Form::Category),
        ] {
            out.push(Place {
                selector: Selector::kinds(&[group], &[kind]),
                path: FieldPath::parse(&format!("{at}.{list}[]"))
                    .expect("short form place paths are valid"),
                slot: Slot::ShortForm {
                    group: group_at,
                    group_form: *group_form,
                    form,
                },
            });
        }
    }
    out
}
