"""Writes from manifests in the original group: create, apply (client-side,
twice), apply --server-side, delete. The cluster stores the renamed group."""
import json

import pytest

from e2e_support import APP_GROUP, CLUSTER_GROUP, HIDDEN_GROUP

FOO = """apiVersion: {group}/v1alpha1
kind: Foo
metadata:
  name: {name}
  labels:
    app: {name}
spec:
  deploymentName: {name}-deploy
  replicas: {replicas}
"""


def manifest(tmp_path, name, replicas):
    path = tmp_path / f"{name}.yaml"
    path.write_text(FOO.format(group=APP_GROUP, name=name, replicas=replicas))
    return path


def app_foo(app, name):
    return app.json("get", f"foo.v1alpha1.{APP_GROUP}", name, "--show-managed-fields")


def stored_foo(cluster, name):
    return cluster.json("get", f"foo.v1alpha1.{CLUSTER_GROUP}", name, "--show-managed-fields")


@pytest.fixture
def cleanup(app):
    names = []
    yield names
    for name in names:
        app.run("delete", f"foos.{APP_GROUP}", name, "--ignore-not-found", check=False)


def test_create_from_manifest_then_delete(app, cluster, tmp_path, cleanup):
    path = manifest(tmp_path, "created", 2)
    cleanup.append("created")
    assert app("create", "-f", path).strip() == f"foo.{APP_GROUP}/created created"
    foo = app_foo(app, "created")
    assert foo["apiVersion"] == f"{APP_GROUP}/v1alpha1"
    assert foo["spec"] == {"deploymentName": "created-deploy", "replicas": 2}
    assert foo["metadata"]["uid"]
    stored = stored_foo(cluster, "created")
    assert stored["apiVersion"] == f"{CLUSTER_GROUP}/v1alpha1"
    assert stored["metadata"]["uid"] == foo["metadata"]["uid"]
    assert stored["spec"] == foo["spec"]
    # kubectl 1.36 adds the namespace.
    assert app("delete", "-f", path).strip() in (f'foo.{APP_GROUP} "created" deleted',
                                                 f'foo.{APP_GROUP} "created" deleted from {app.namespace} namespace')
    err = cluster.fails("get", f"foo.v1alpha1.{CLUSTER_GROUP}", "created")
    assert f'foos.{CLUSTER_GROUP} "created" not found' in err


def test_client_side_apply_twice_patches_the_second_time(app, cluster, tmp_path, cleanup):
    cleanup.append("applied")
    out = app("apply", "-f", manifest(tmp_path, "applied", 1))
    assert out.strip() == f"foo.{APP_GROUP}/applied created"
    out = app("apply", "-f", manifest(tmp_path, "applied", 2))
    assert out.strip() == f"foo.{APP_GROUP}/applied configured"
    foo = app_foo(app, "applied")
    assert foo["spec"]["replicas"] == 2
    # The last-applied annotation is free text written by kubectl: it holds the
    # app's manifest (original group) and is not a group reference.
    last = json.loads(foo["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert last["apiVersion"] == f"{APP_GROUP}/v1alpha1" and last["spec"]["replicas"] == 2
    stored = stored_foo(cluster, "applied")
    assert stored["apiVersion"] == f"{CLUSTER_GROUP}/v1alpha1" and stored["spec"]["replicas"] == 2
    # a third apply with no change is a no-op for kubectl
    out = app("apply", "-f", manifest(tmp_path, "applied", 2))
    assert out.strip() == f"foo.{APP_GROUP}/applied unchanged"


def test_server_side_apply_creates_and_updates(app, cluster, tmp_path, cleanup):
    cleanup.append("ssa")
    out = app("apply", "--server-side", "-f", manifest(tmp_path, "ssa", 1))
    assert out.strip() == f"foo.{APP_GROUP}/ssa serverside-applied"
    out = app("apply", "--server-side", "-f", manifest(tmp_path, "ssa", 5))
    assert out.strip() == f"foo.{APP_GROUP}/ssa serverside-applied"
    foo = app_foo(app, "ssa")
    assert foo["apiVersion"] == f"{APP_GROUP}/v1alpha1" and foo["spec"]["replicas"] == 5
    applies = [m for m in foo["metadata"]["managedFields"] if m["operation"] == "Apply"]
    assert [(m["manager"], m["apiVersion"]) for m in applies] == [("kubectl", f"{APP_GROUP}/v1alpha1")]
    stored = stored_foo(cluster, "ssa")
    assert [m["apiVersion"] for m in stored["metadata"]["managedFields"] if m["operation"] == "Apply"] == \
        [f"{CLUSTER_GROUP}/v1alpha1"]


def test_server_side_apply_after_client_side_apply_migrates_managed_fields(app, cluster, tmp_path, cleanup):
    """kubectl apply --server-side over a client-side-applied object also sends
    a JSON Patch replacing /metadata/managedFields: its values carry apiVersions."""
    cleanup.append("migrated")
    app("apply", "-f", manifest(tmp_path, "migrated", 1))
    # kube-apiserver reads the last-applied object to hand client-side
    # apply's fields to server-side apply: the cluster must store it in its
    # own group (the app reads it in the app's).
    key = "kubectl.kubernetes.io/last-applied-configuration"
    stored_applied = json.loads(stored_foo(cluster, "migrated")["metadata"]["annotations"][key])
    assert stored_applied["apiVersion"] == f"{CLUSTER_GROUP}/v1alpha1"
    assert stored_applied["metadata"]["name"] == "migrated"
    seen_applied = json.loads(app_foo(app, "migrated")["metadata"]["annotations"][key])
    assert seen_applied["apiVersion"] == f"{APP_GROUP}/v1alpha1"
    out = app("apply", "--server-side", "-f", manifest(tmp_path, "migrated", 3))
    assert out.strip() == f"foo.{APP_GROUP}/migrated serverside-applied"
    foo = app_foo(app, "migrated")
    assert foo["spec"]["replicas"] == 3
    assert {m["apiVersion"] for m in foo["metadata"]["managedFields"]} == {f"{APP_GROUP}/v1alpha1"}
    stored = stored_foo(cluster, "migrated")
    assert {m["apiVersion"] for m in stored["metadata"]["managedFields"]} == {f"{CLUSTER_GROUP}/v1alpha1"}
    assert HIDDEN_GROUP not in json.dumps(foo)
