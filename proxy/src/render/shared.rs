//! What a chart puts into a namespace every copy shares (`kube-system`,
//! `names.sharedNamespaces`): cert-manager's leader-election Roles and
//! RoleBindings live there under the same names for every copy, and its
//! controllers take Leases there named in those Roles' `resourceNames`.
//! Read from the manifests, these become fixed names of the copy
//! (`names.namespaced`): `render` and `inject` give them the copy's mark,
//! the RoleBindings' `roleRef` and the Roles' `resourceNames` follow, and
//! `inject` writes them into the sidecar's configuration so that the
//! Leases the app takes at run time get the same mark.

use regroup_config::object_names::ObjectNames;
use serde_json::Value as Json;

/// The kinds whose objects in a shared namespace are the copy's.
const KINDS: &[&str] = &["Role", "RoleBinding", "Lease", "ConfigMap"];

/// Fixed names found in the manifests' shared namespaces.
#[derive(Debug, Default, PartialEq)]
pub struct Shared {
    /// The kinds to list in `names.namespaced.kinds`.
    pub kinds: Vec<&'static str>,
    /// The names to list in `names.namespaced.names`, in order found.
    pub names: Vec<String>,
    /// One line per name, for `check`, `render` and `inject` to say:
    /// `Role kube-system/cert-manager:leaderelection`.
    pub found: Vec<String>,
}

impl Shared {
    fn add(&mut self, kind: &'static str, ns: &str, name: &str, why: &str) {
        if !self.kinds.contains(&kind) {
            self.kinds.push(kind);
        }
        if !self.names.iter().any(|n| n == name) {
            self.names.push(name.to_owned());
        }
        let line = format!("{kind} {ns}/{name}{why}");
        if !self.found.contains(&line) {
            self.found.push(line);
        }
    }
}

/// The objects of `docs` (manifests as JSON values; `List`s looked into)
/// in one of `namespaces`, and the Leases and ConfigMaps their Roles name,
/// that are not already the copy's (`names`' mark) nor the cluster's own.
pub fn find(docs: &[Json], namespaces: &[String], names: &ObjectNames) -> Shared {
    let mut out = Shared::default();
    if namespaces.is_empty() {
        return out;
    }
    for doc in super::each_object(docs) {
        let kind = doc.get("kind").and_then(Json::as_str).unwrap_or("");
        let Some(kind) = KINDS.iter().find(|k| **k == kind) else {
            continue;
        };
        let meta = |k: &str| {
            doc.pointer(&format!("/metadata/{k}"))
                .and_then(Json::as_str)
        };
        let (Some(ns), Some(name)) = (meta("namespace"), meta("name")) else {
            continue;
        };
        if !namespaces.iter().any(|n| n == ns) {
            continue;
        }
        // A name already marked (a manifest rendered or injected before)
        // is the copy's: its bare name is what the app uses, so it is
        // listed too, or injecting the output again would drop it.
        let own = |n: &str| -> Option<(String, &'static str)> {
            if names.is_marked(n) {
                let bare = names.fixed_to_app_unlisted(n)?;
                return (!names.keeps_shared(&bare)).then_some((bare, " (marked already)"));
            }
            (!names.keeps_shared(n)).then(|| (n.to_owned(), ""))
        };
        if let Some((bare, note)) = own(name) {
            out.add(kind, ns, &bare, note);
        }
        if *kind == "Role" {
            for (k, granted) in granted_by_name(doc) {
                if let Some((bare, note)) = own(&granted) {
                    out.add(k, ns, &bare, &format!(" (named in Role {name}){note}"));
                }
            }
        }
    }
    out
}

/// The Leases and ConfigMaps a Role grants by name: `(kind, name)`.
fn granted_by_name(role: &Json) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let strings = |rule: &Json, key: &str| -> Vec<String> {
        rule.get(key)
            .and_then(Json::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Json::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    for rule in role
        .get("rules")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
    {
        let (groups, resources) = (strings(rule, "apiGroups"), strings(rule, "resources"));
        let any_group = |g: &str| groups.iter().any(|x| x == g || x == "*");
        let any_resource = |r: &str| resources.iter().any(|x| x == r || x == "*");
        let mut kinds = Vec::new();
        if any_group("coordination.k8s.io") && any_resource("leases") {
            kinds.push("Lease");
        }
        if any_group("") && any_resource("configmaps") {
            kinds.push("ConfigMap");
        }
        for name in strings(rule, "resourceNames") {
            for k in &kinds {
                out.push((*k, name.clone()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names() -> ObjectNames {
        ObjectNames::new(
            Some("team-a-"),
            None,
            &["ClusterRole".to_owned()],
            &["shared-reader".to_owned()],
        )
        .unwrap()
    }

    /// cert-manager's chart, in its shape: a leader-election Role and
    /// RoleBinding in kube-system naming its Leases, a RoleBinding to the
    /// cluster's own `extension-apiserver-authentication-reader`, and
    /// objects in the app's own namespace.
    fn chart() -> Vec<Json> {
        vec![
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "cert-manager:leaderelection", "namespace": "kube-system"},
                "rules": [
                    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                     "resourceNames": ["cert-manager-controller"], "verbs": ["get", "update", "patch"]},
                    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "cert-manager:leaderelection", "namespace": "kube-system"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cert-manager:leaderelection"},
                "subjects": [{"kind": "ServiceAccount", "name": "cert-manager", "namespace": "cert-manager"}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "cert-manager-webhook:webhook-authentication-reader", "namespace": "kube-system"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "extension-apiserver-authentication-reader"}}),
            json!({"apiVersion": "v1", "kind": "List", "items": [
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                 "metadata": {"name": "system:something", "namespace": "kube-system"}},
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                 "metadata": {"name": "team-a-done", "namespace": "kube-system"}}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "cert-manager:leaderelection", "namespace": "cert-manager"}}),
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "x", "namespace": "kube-system"}}),
        ]
    }

    #[test]
    fn the_charts_objects_in_kube_system_and_the_leases_its_roles_name() {
        let got = find(&chart(), &["kube-system".to_owned()], &names());
        assert_eq!(got.kinds, ["Role", "Lease", "RoleBinding"]);
        assert_eq!(
            got.names,
            [
                "cert-manager:leaderelection",
                "cert-manager-controller",
                "cert-manager-webhook:webhook-authentication-reader",
                "done"
            ]
        );
        assert_eq!(
            got.found,
            [
                "Role kube-system/cert-manager:leaderelection",
                "Lease kube-system/cert-manager-controller (named in Role cert-manager:leaderelection)",
                "RoleBinding kube-system/cert-manager:leaderelection",
                "RoleBinding kube-system/cert-manager-webhook:webhook-authentication-reader",
                // Marked by an earlier render: found by its app name.
                "Role kube-system/done (marked already)",
            ]
        );
    }

    #[test]
    fn no_shared_namespace_finds_nothing() {
        assert_eq!(find(&chart(), &[], &names()), Shared::default());
        let other = find(&chart(), &["elsewhere".to_owned()], &names());
        assert!(other.names.is_empty());
    }
}
