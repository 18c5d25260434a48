"""kubectl patch: JSON Patch and merge patch on a Foo; strategic merge patch on
a ConfigMap owned by Foos (ownerReferences in the app's group)."""
import json

import pytest

from e2e_support import APP_GROUP, CLUSTER_GROUP, HIDDEN_GROUP

FOO = {"apiVersion": f"{APP_GROUP}/v1alpha1", "kind": "Foo",
       "metadata": {"name": "patched", "labels": {"app": "patched"}},
       "spec": {"deploymentName": "patched-deploy", "replicas": 1}}


@pytest.fixture
def patched(app):
    app("create", "-f", "-", input=json.dumps(FOO))
    yield f"foo.v1alpha1.{APP_GROUP}"
    app.run("delete", f"foos.{APP_GROUP}", "patched", "--ignore-not-found", check=False)


def test_json_patch_on_a_foo(app, cluster, patched):
    # The "test" op compares the apiVersion VALUE on the server: the proxy
    # must rename inside JSON Patch values, not only in objects.
    ops = [{"op": "test", "path": "/apiVersion", "value": f"{APP_GROUP}/v1alpha1"},
           {"op": "replace", "path": "/spec/replicas", "value": 4},
           {"op": "add", "path": "/metadata/labels/patched", "value": "json"}]
    out = app("patch", patched, "patched", "--type", "json", "-p", json.dumps(ops))
    assert out.strip() == f"foo.{APP_GROUP}/patched patched"
    foo = app.json("get", patched, "patched")
    assert foo["apiVersion"] == f"{APP_GROUP}/v1alpha1"
    assert foo["spec"]["replicas"] == 4 and foo["metadata"]["labels"]["patched"] == "json"
    assert cluster.json("get", f"foo.v1alpha1.{CLUSTER_GROUP}", "patched")["spec"]["replicas"] == 4


def test_merge_patch_on_a_foo(app, cluster, patched):
    out = app("patch", patched, "patched", "--type", "merge",
              "-p", '{"spec":{"deploymentName":"other-deploy"},"metadata":{"labels":{"patched":"merge"}}}')
    assert out.strip() == f"foo.{APP_GROUP}/patched patched"
    foo = app.json("get", patched, "patched")
    assert foo["spec"] == {"deploymentName": "other-deploy", "replicas": 1}
    assert foo["metadata"]["labels"] == {"app": "patched", "patched": "merge"}
    stored = cluster.json("get", f"foo.v1alpha1.{CLUSTER_GROUP}", "patched")
    assert stored["apiVersion"] == f"{CLUSTER_GROUP}/v1alpha1" and stored["spec"]["deploymentName"] == "other-deploy"


def test_strategic_merge_patch_on_a_foo_is_refused_like_the_apiserver(app, patched):
    """Custom resources do not take strategic merge patch: 415, passed through."""
    err = app.fails("patch", patched, "patched", "--type", "strategic", "-p", '{"spec":{"replicas":2}}')
    # kubectl words it as "error: application/strategic-merge-patch+json is not
    # supported by <group>/v1alpha1, Kind=Foo: <the server's 415 message>"
    assert f"not supported by {APP_GROUP}/v1alpha1, Kind=Foo" in err, err
    assert "accepted media types include: application/json-patch+json, application/merge-patch+json" in err


def test_strategic_merge_patch_on_a_configmap_owned_by_foos(app, cluster):
    alpha = app.json("get", f"foo.v1alpha1.{APP_GROUP}", "alpha")
    beta = app.json("get", f"foo.v1alpha1.{APP_GROUP}", "beta")
    ref = lambda foo, **kw: dict({"apiVersion": f"{APP_GROUP}/v1alpha1", "kind": "Foo",  # noqa: E731
                                  "name": foo["metadata"]["name"], "uid": foo["metadata"]["uid"]}, **kw)
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "owned-cm", "ownerReferences": [ref(alpha, controller=True, blockOwnerDeletion=True)]},
          "data": {"deploymentName": "alpha-deploy"}}
    app("create", "-f", "-", input=json.dumps(cm))
    try:
        # SMP merges ownerReferences by uid: beta's reference is added, alpha's
        # kept. Their order is the merge's, not a promise of the API (a real
        # kube-apiserver puts beta first, see smp_order in the stand-in), so
        # the references are compared as sets, each by name, uid and apiVersion.
        patch = {"metadata": {"labels": {"samplecontroller.k8s.io/owner": "beta"}, "ownerReferences": [ref(beta)]},
                 "data": {"extra": "yes"}}
        out = app("patch", "configmap", "owned-cm", "--type", "strategic", "-p", json.dumps(patch))
        assert out.strip() == "configmap/owned-cm patched"
        got = app.json("get", "configmap", "owned-cm")
        owners = lambda obj: {(r["name"], r["uid"], r["apiVersion"]) for r in obj["metadata"]["ownerReferences"]}  # noqa: E731
        uids = {"alpha": alpha["metadata"]["uid"], "beta": beta["metadata"]["uid"]}
        assert len(got["metadata"]["ownerReferences"]) == 2
        assert owners(got) == {(n, u, f"{APP_GROUP}/v1alpha1") for n, u in uids.items()}
        assert got["data"] == {"deploymentName": "alpha-deploy", "extra": "yes"}
        # a label KEY that contains the group is not a group reference
        assert got["metadata"]["labels"] == {"samplecontroller.k8s.io/owner": "beta"}
        assert HIDDEN_GROUP not in json.dumps(got["metadata"]["ownerReferences"])
        stored = cluster.json("get", "configmap", "owned-cm")
        assert len(stored["metadata"]["ownerReferences"]) == 2
        assert owners(stored) == {(n, u, f"{CLUSTER_GROUP}/v1alpha1") for n, u in uids.items()}
        # alpha's stays the controller reference, beta's is not one
        assert {r["name"]: r.get("controller", False) for r in stored["metadata"]["ownerReferences"]} == \
            {"alpha": True, "beta": False}
        assert stored["metadata"]["labels"] == {"samplecontroller.k8s.io/owner": "beta"}
    finally:
        app.run("delete", "configmap", "owned-cm", "--ignore-not-found", check=False)
