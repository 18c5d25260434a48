"""Errors: Status messages and details name the app's group."""
import json

from e2e_support import APP_GROUP, HIDDEN_GROUP


def test_get_missing_foo_is_not_found_in_the_original_group(app):
    err = app.fails("get", "foo", "missing")
    assert f'foos.{APP_GROUP} "missing" not found' in err
    assert "NotFound" in err
    assert HIDDEN_GROUP not in err


def test_create_duplicate_foo_already_exists_in_the_original_group(app):
    foo = {"apiVersion": f"{APP_GROUP}/v1alpha1", "kind": "Foo", "metadata": {"name": "alpha"},
           "spec": {"deploymentName": "alpha-deploy", "replicas": 1}}
    err = app.fails("create", "-f", "-", input=json.dumps(foo))
    assert f'foos.{APP_GROUP} "alpha" already exists' in err
    assert HIDDEN_GROUP not in err


def test_update_with_stale_resource_version_conflicts_in_the_original_group(app):
    foo = app.json("get", f"foo.v1alpha1.{APP_GROUP}", "beta")
    foo["metadata"]["resourceVersion"] = "1"  # older than any write in this run
    err = app.fails("replace", "-f", "-", input=json.dumps(foo))
    assert f'Operation cannot be fulfilled on foos.{APP_GROUP} "beta"' in err
    assert HIDDEN_GROUP not in err
