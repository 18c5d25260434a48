"""Watches through the proxy: kubectl get --watch (JSON and Table output), and
WatchList (streaming lists) as client-go 1.35+ informers start."""
import json

import pytest

from e2e_support import (APP_GROUP, HIDDEN_GROUP, INITIAL_EVENTS_END, REAL, Stream, foo_watchlist,
                         initial_events_end)

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


def watchlist_events(pyclient, ns):
    status, body = foo_watchlist(pyclient, ns)
    assert status == 200, body[:500]
    events = [json.loads(line) for line in body.splitlines() if line.strip()]
    end = initial_events_end(events)
    if end is None and REAL:
        pytest.skip("this cluster does not serve WatchList (no initial-events-end bookmark: gate off)")
    assert end is not None, [e["type"] for e in events]
    return events, end, body


def test_watchlist_initial_events_and_their_end_bookmark_come_in_the_original_group(pyclient, ns):
    """WatchList, as client-go 1.35+ informers start: the objects as ADDED
    events, then a BOOKMARK whose annotation ends the initial events; every
    object (the bookmark's too) in the original group, the annotation as sent."""
    events, end, body = watchlist_events(pyclient, ns)
    initial = events[:end]
    assert {e["type"] for e in initial} == {"ADDED"}, [e["type"] for e in initial]
    assert {"alpha", "beta", "gamma"} <= {name_of(e) for e in initial}
    bookmark = events[end]["object"]
    assert (bookmark["apiVersion"], bookmark["kind"]) == (f"{APP_GROUP}/v1alpha1", "Foo")
    assert bookmark["metadata"]["annotations"] == {INITIAL_EVENTS_END: "true"}
    assert bookmark["metadata"]["resourceVersion"]
    assert {e["object"]["apiVersion"] for e in events} == {f"{APP_GROUP}/v1alpha1"}
    assert HIDDEN_GROUP.encode() not in body


@pytest.mark.skipif(REAL, reason="whether a cluster refuses these depends on its WatchList gate")
def test_watchlist_requests_the_apiserver_refuses_are_refused_through_the_proxy(pyclient, ns):
    """As kube-apiserver 1.29 answered (testdata/kube-1.29 renamed/022, 024):
    sendInitialEvents needs resourceVersionMatch=NotOlderThan, and a list
    can't have it; 422 Status, passed on (its group, meta.k8s.io, isn't mapped)."""
    for query, field in ([("watch", "1"), ("sendInitialEvents", "true"), ("allowWatchBookmarks", "true")],
                         "resourceVersionMatch"), ([("sendInitialEvents", "true")], "sendInitialEvents"):
        status, body = foo_watchlist(pyclient, ns, query)
        st = json.loads(body)
        assert (status, st["kind"], st["reason"]) == (422, "Status", "Invalid"), body
        assert st["details"]["group"] == "meta.k8s.io" and st["details"]["causes"][0]["field"] == field
