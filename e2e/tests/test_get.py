"""Reading Foos with kubectl: Table, JSON, YAML, one object, both versions."""
import json

from e2e_support import APP_GROUP, CLUSTER_GROUP, HIDDEN_GROUP


def test_get_foos_table_shows_the_crd_printer_columns(app):
    p = app.run("get", "foos")
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["NAME", "DEPLOYMENT", "REPLICAS", "AVAILABLE"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:]}
    assert rows["alpha"][:2] == ["alpha-deploy", "1"]
    assert rows["beta"][:2] == ["beta-deploy", "2"]
    # v1beta1 is the preferred version and deprecated: the server's Warning
    # header names the group, which the app must see in its own name.
    assert f"{APP_GROUP}/v1beta1 Foo is deprecated" in p.stderr
    assert HIDDEN_GROUP not in p.stderr


def test_get_foos_json_uses_the_original_group(app):
    lst = app.json("get", "foos.v1alpha1." + APP_GROUP, "--show-managed-fields")
    items = {i["metadata"]["name"]: i for i in lst["items"]}
    assert {"alpha", "beta", "gamma"} <= set(items)
    for item in items.values():
        assert item["apiVersion"] == f"{APP_GROUP}/v1alpha1"
        assert item["metadata"]["managedFields"]
        assert all(mf["apiVersion"].startswith(APP_GROUP + "/") for mf in item["metadata"]["managedFields"])
    assert HIDDEN_GROUP not in json.dumps(lst)


def test_get_foos_json_preferred_version(app):
    lst = app.json("get", "foos")
    assert lst["items"] and {i["apiVersion"] for i in lst["items"]} == {f"{APP_GROUP}/v1beta1"}


def test_get_foos_yaml_uses_the_original_group(app):
    out = app("get", "foos.v1alpha1." + APP_GROUP, "-o", "yaml")
    assert f"apiVersion: {APP_GROUP}/v1alpha1" in out
    assert "name: alpha" in out
    assert HIDDEN_GROUP not in out


def test_get_one_foo(app):
    foo = app.json("get", "foo.v1alpha1." + APP_GROUP, "alpha")
    assert foo["apiVersion"] == f"{APP_GROUP}/v1alpha1"
    assert foo["kind"] == "Foo"
    assert foo["metadata"]["name"] == "alpha"
    assert foo["spec"] == {"deploymentName": "alpha-deploy", "replicas": 1}
    out = app("get", "foo", "alpha")  # by singular name, human output (Table)
    assert out.splitlines()[1].split()[:3] == ["alpha", "alpha-deploy", "1"]


def test_get_by_short_name_and_fully_qualified_resource(app):
    assert "alpha" in app("get", "fo", "-o", "name")
    names = app("get", f"foos.{APP_GROUP}", "-o", "name").split()
    assert f"foo.{APP_GROUP}/alpha" in names


def test_label_key_containing_the_group_is_not_renamed(app, cluster):
    """alpha-cm carries the label key samplecontroller.k8s.io/owner on the
    cluster too: a label key is not a group reference."""
    cm = app.json("get", "configmap", "alpha-cm")
    assert cm["metadata"]["labels"] == {"samplecontroller.k8s.io/owner": "alpha"}
    assert [r["apiVersion"] for r in cm["metadata"]["ownerReferences"]] == [f"{APP_GROUP}/v1alpha1"]
    stored = cluster.json("get", "configmap", "alpha-cm")
    assert stored["metadata"]["labels"] == {"samplecontroller.k8s.io/owner": "alpha"}
    assert [r["apiVersion"] for r in stored["metadata"]["ownerReferences"]] == [f"{CLUSTER_GROUP}/v1alpha1"]
