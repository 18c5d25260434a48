"""Watches through the proxy: kubectl get --watch (JSON and Table output)."""
import json

from e2e_support import APP_GROUP, HIDDEN_GROUP, Stream

FOO = """apiVersion: {group}/v1alpha1
kind: Foo
metadata:
  name: {name}
  labels: {{app: {name}}}
spec:
  deploymentName: {name}-deploy
  replicas: 1
"""


def name_of(doc):
    return (doc.get("object") or {}).get("metadata", {}).get("name")


def test_kubectl_watch_json_sees_added_modified_deleted_in_the_original_group(app):
    name = "watched-json"
    resource = f"foos.v1alpha1.{APP_GROUP}"
    s = Stream(app.argv("get", resource, "--watch", "--output-watch-events", "-o", "json"))
    seen = []
    try:
        s.until(lambda d: name_of(d) == "alpha", 20, seen)  # the initial list, as ADDED
        app("create", "-f", "-", input=FOO.format(group=APP_GROUP, name=name))
        s.until(lambda d: d["type"] == "ADDED" and name_of(d) == name, 20, seen)
        app("patch", resource, name, "--type", "merge", "-p", '{"spec":{"replicas":3}}')
        mod = s.until(lambda d: d["type"] == "MODIFIED" and name_of(d) == name, 20, seen)
        assert mod["object"]["spec"]["replicas"] == 3
        app("delete", resource, name)
        s.until(lambda d: d["type"] == "DELETED" and name_of(d) == name, 20, seen)
    finally:
        s.close()
        app.run("delete", resource, name, "--ignore-not-found", check=False)
    assert {d["object"]["apiVersion"] for d in seen} == {f"{APP_GROUP}/v1alpha1"}
    assert HIDDEN_GROUP not in json.dumps(seen)


def test_kubectl_watch_table_output_shows_new_foo(app):
    """Human output makes kubectl watch with Accept as=Table: rows carry
    PartialObjectMetadata (with managedFields apiVersions)."""
    name = "watched-table"
    s = Stream(app.argv("get", "foos", "--watch"), lines=True)
    seen = []
    try:
        s.until(lambda line: line.split()[:1] == ["alpha"], 20, seen)
        app("create", "-f", "-", input=FOO.format(group=APP_GROUP, name=name))
        row = s.until(lambda line: line.split()[:1] == [name], 20, seen)
        assert row.split()[1:3] == [f"{name}-deploy", "1"]
    finally:
        s.close()
        app.run("delete", "foos", name, "--ignore-not-found", check=False)
    assert seen[0].split() == ["NAME", "DEPLOYMENT", "REPLICAS", "AVAILABLE"]
