//! Where a central object came from: the remote namespace and cluster it
//! was written from, as two labels (labels, so that the central apiserver
//! itself selects one source's objects in lists and watches).

use serde_json::{Map, Value as Json};

/// The remote namespace an object was written from.
pub(crate) const SOURCE_NAMESPACE: &str = "regroup.dev/source-namespace";
/// The remote cluster it was written from (its id).
pub(crate) const SOURCE_CLUSTER: &str = "regroup.dev/source-cluster";

/// One remote namespace of one remote cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Source {
    pub namespace: String,
    pub cluster: String,
}

/// Who holds a name centrally, as its labels say.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Holder {
    /// This source.
    Us,
    /// Another remote namespace or cluster, or nobody regroup knows (an
    /// object made in the central cluster itself).
    Other,
}

impl Source {
    /// The label selector of this source's objects.
    pub fn selector(&self) -> String {
        format!(
            "{SOURCE_NAMESPACE}={},{}",
            self.namespace,
            cluster_selector(&self.cluster)
        )
    }

    /// Who holds `obj` (a central object).
    pub fn holder(&self, obj: &Json) -> Holder {
        let labels = &obj["metadata"]["labels"];
        let is = |k: &str, v: &str| labels.get(k).and_then(Json::as_str) == Some(v);
        if is(SOURCE_NAMESPACE, &self.namespace) && is(SOURCE_CLUSTER, &self.cluster) {
            Holder::Us
        } else {
            Holder::Other
        }
    }

    /// Writes this source's labels into an object (or a patch's object):
    /// whether it was an object at all.
    pub fn label(&self, obj: &mut Json) -> bool {
        let Some(meta) = crate::hooks::metadata_mut(obj) else {
            return false;
        };
        let labels = meta
            .entry("labels")
            .or_insert_with(|| Json::Object(Map::new()));
        if !labels.is_object() {
            // `labels: null` in a merge patch would drop ours: ours instead.
            *labels = Json::Object(Map::new());
        }
        let labels = labels.as_object_mut().expect("made an object above");
        labels.insert(SOURCE_NAMESPACE.into(), self.namespace.clone().into());
        labels.insert(SOURCE_CLUSTER.into(), self.cluster.clone().into());
        true
    }
}

/// The label selector of one cluster's objects, every namespace.
pub(crate) fn cluster_selector(cluster: &str) -> String {
    format!("{SOURCE_CLUSTER}={cluster}")
}

/// The remote namespace a central object belongs to (its label).
pub(crate) fn remote_namespace(obj: &Json) -> Option<&str> {
    obj["metadata"]["labels"][SOURCE_NAMESPACE].as_str()
}

/// `selector` (a caller's `labelSelector`, maybe empty) with `ours` added.
pub(crate) fn and_selector(selector: Option<&str>, ours: &str) -> String {
    match selector.map(str::trim).filter(|s| !s.is_empty()) {
        Some(s) => format!("{s},{ours}"),
        None => ours.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn foo() -> Source {
        Source {
            namespace: "foo".into(),
            cluster: "c1".into(),
        }
    }

    #[test]
    fn an_object_is_ours_only_with_both_labels() {
        let s = foo();
        let ours = json!({"metadata": {"labels": {SOURCE_NAMESPACE: "foo", SOURCE_CLUSTER: "c1"}}});
        let other_ns =
            json!({"metadata": {"labels": {SOURCE_NAMESPACE: "baz", SOURCE_CLUSTER: "c1"}}});
        let other_cluster =
            json!({"metadata": {"labels": {SOURCE_NAMESPACE: "foo", SOURCE_CLUSTER: "c2"}}});
        let central = json!({"metadata": {"name": "x"}});
        assert_eq!(s.holder(&ours), Holder::Us);
        assert_eq!(s.holder(&other_ns), Holder::Other);
        assert_eq!(s.holder(&other_cluster), Holder::Other);
        assert_eq!(s.holder(&central), Holder::Other);
    }

    #[test]
    fn labels_are_added_kept_and_replace_a_null() {
        let s = foo();
        let mut o = json!({"metadata": {"name": "x", "labels": {"app": "a"}}});
        assert!(s.label(&mut o));
        assert_eq!(o["metadata"]["labels"]["app"], "a");
        assert_eq!(s.holder(&o), Holder::Us);
        let mut patch = json!({"metadata": {"labels": null}});
        assert!(s.label(&mut patch));
        assert_eq!(s.holder(&patch), Holder::Us);
        let mut empty = json!({});
        assert!(s.label(&mut empty));
        assert_eq!(remote_namespace(&empty), Some("foo"));
        assert!(!s.label(&mut json!([1])));
    }

    #[test]
    fn selectors_are_joined() {
        let s = foo();
        assert_eq!(
            s.selector(),
            "regroup.dev/source-namespace=foo,regroup.dev/source-cluster=c1"
        );
        assert_eq!(and_selector(None, "a=b"), "a=b");
        assert_eq!(and_selector(Some(" "), "a=b"), "a=b");
        assert_eq!(and_selector(Some("app=x"), "a=b"), "app=x,a=b");
    }
}
