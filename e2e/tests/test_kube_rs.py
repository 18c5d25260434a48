"""kube-rs (the `kube` crate) through the proxy: e2e/kube-client, a small
binary doing what a kube-rs controller does (discovery, a dynamic Api, a typed
Api<ConfigMap>, create / merge patch / server-side apply / delete, and
kube::runtime::watcher), in the app's group; each step prints JSON lines."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from e2e_support import (APP_GROUP, CLUSTER_GROUP, HIDDEN_GROUP, REAL, REPO, Stream, foo_watchlist,
                         initial_events_end)

CRATE = "regroup-e2e-kube"
MANAGER = "regroup-e2e-kube"  # the binary's server-side apply field manager


@pytest.fixture(scope="session")
def kube_rs_bin():
    """`cargo build -p regroup-e2e-kube` (a no-op when up to date), in the
    target dir the regroup binary is built in."""
    p = subprocess.run(["cargo", "build", "-p", CRATE], cwd=REPO, capture_output=True, text=True, timeout=1500)
    if p.returncode != 0:
        pytest.fail(f"cargo build -p {CRATE} failed:\n{p.stderr[-4000:]}")
    target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    return str((REPO / target) / "debug" / CRATE)


@pytest.fixture(scope="session")
def kube_rs(kube_rs_bin, regroup, ns, app):
    """Runs a subcommand with the app's kubeconfig; returns (parsed lines, stdout)."""

    def argv(*args):
        return [kube_rs_bin, "--kubeconfig", str(regroup), "-n", ns, "--group", APP_GROUP, *map(str, args)]

    def run(*args, timeout=60):
        try:
            p = subprocess.run(argv(*args), capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"{CRATE} {' '.join(args)} timed out after {timeout}s\nstderr:\n{e.stderr or ''}"
                        f"{app.log_tails()}")
        if p.returncode != 0:
            pytest.fail(f"{CRATE} {' '.join(args)} failed ({p.returncode})\nstderr:\n{p.stderr}\n"
                        f"stdout:\n{p.stdout[-2000:]}{app.log_tails()}")
        return [json.loads(line) for line in p.stdout.splitlines()], p.stdout

    run.argv = argv
    return run


@pytest.fixture
def cleanup(cluster):
    names = []
    yield names
    for name in names:
        cluster.run("delete", f"foos.{CLUSTER_GROUP}", name, "--ignore-not-found", check=False)


def stored_foo(cluster, name):
    return cluster.json("get", f"foo.v1alpha1.{CLUSTER_GROUP}", name, "--show-managed-fields")


def test_kube_rs_discovery_finds_foo_under_the_original_group_only(kube_rs):
    lines, out = kube_rs("discovery")
    groups = {line["group"]: line for line in lines}
    assert APP_GROUP in groups and HIDDEN_GROUP not in groups, sorted(groups)
    group = groups[APP_GROUP]
    assert sorted(group["versions"]) == ["v1alpha1", "v1beta1"] and group["preferredVersion"] == "v1beta1"
    foos = {r["version"]: r for r in group["resources"] if r["kind"] == "Foo"}
    assert sorted(foos) == ["v1alpha1", "v1beta1"]
    for version, r in foos.items():
        assert r["apiVersion"] == f"{APP_GROUP}/{version}" and r["group"] == APP_GROUP
        assert r["plural"] == "foos" and r["namespaced"]
        assert {"get", "list", "watch", "create", "patch", "delete"} <= set(r["verbs"])
    # Foo exists once, under that group; the cluster's name appears nowhere.
    everywhere = [(line["group"], r["version"]) for line in lines for r in line["resources"] if r["plural"] == "foos"]
    assert sorted(everywhere) == [(APP_GROUP, "v1alpha1"), (APP_GROUP, "v1beta1")]
    assert HIDDEN_GROUP not in out


def test_kube_rs_lists_foos_in_the_original_group(kube_rs):
    lines, out = kube_rs("list")
    assert lines[0] == {"resolved": {"apiVersion": f"{APP_GROUP}/v1alpha1", "kind": "Foo", "plural": "foos",
                                     "namespaced": True}}
    assert lines[1] == {"list": {"apiVersion": f"{APP_GROUP}/v1alpha1", "kind": "FooList"}}
    items = [line["item"] for line in lines[2:]]
    assert {"alpha", "beta", "gamma"} <= {i["name"] for i in items}
    assert {(i["apiVersion"], i["kind"]) for i in items} == {(f"{APP_GROUP}/v1alpha1", "Foo")}
    assert HIDDEN_GROUP not in out


def test_kube_rs_configmap_owner_references_name_the_original_group(kube_rs, cluster):
    lines, out = kube_rs("get-configmap", "alpha-cm")
    assert len(lines) == 1 and lines[0]["name"] == "alpha-cm"
    refs = lines[0]["ownerReferences"]
    assert refs and {(r["apiVersion"], r["kind"]) for r in refs} == {(f"{APP_GROUP}/v1alpha1", "Foo")}
    assert HIDDEN_GROUP not in out
    stored = cluster.json("get", "configmap", "alpha-cm")["metadata"]["ownerReferences"]
    assert {(r["apiVersion"], r["kind"]) for r in stored} == {(f"{CLUSTER_GROUP}/v1alpha1", "Foo")}
    assert [(r["name"], r["uid"]) for r in refs] == [(r["name"], r["uid"]) for r in stored]


def test_kube_rs_create_patch_apply_delete_land_in_the_cluster_group(kube_rs, cluster, cleanup):
    name = "kube-rs-written"
    cleanup.append(name)
    cluster.run("delete", f"foos.{CLUSTER_GROUP}", name, "--ignore-not-found")

    [created], out = kube_rs("create", name)
    assert HIDDEN_GROUP not in out
    obj = created["object"]
    assert created["step"] == "create" and obj["apiVersion"] == f"{APP_GROUP}/v1alpha1" and obj["kind"] == "Foo"
    assert obj["spec"] == {"deploymentName": f"{name}-deploy", "replicas": 1}
    stored = stored_foo(cluster, name)
    assert stored["apiVersion"] == f"{CLUSTER_GROUP}/v1alpha1"
    assert stored["metadata"]["uid"] == obj["metadata"]["uid"] and stored["spec"] == obj["spec"]

    (merge, apply), out = kube_rs("patch", name)
    assert HIDDEN_GROUP not in out
    assert merge["step"] == "merge" and merge["object"]["apiVersion"] == f"{APP_GROUP}/v1alpha1"
    assert merge["object"]["spec"]["replicas"] == 2
    obj = apply["object"]
    assert apply["step"] == "apply" and obj["apiVersion"] == f"{APP_GROUP}/v1alpha1"
    assert obj["spec"]["replicas"] == 3 and obj["metadata"]["labels"]["e2e.regroup.dev/applied-by"] == MANAGER
    applied = [m for m in obj["metadata"]["managedFields"] if m["manager"] == MANAGER and m["operation"] == "Apply"]
    assert [m["apiVersion"] for m in applied] == [f"{APP_GROUP}/v1alpha1"]
    stored = stored_foo(cluster, name)
    assert stored["spec"] == {"deploymentName": f"{name}-deploy", "replicas": 3}
    assert stored["metadata"]["labels"]["e2e.regroup.dev/applied-by"] == MANAGER
    assert [m["apiVersion"] for m in stored["metadata"]["managedFields"]
            if m["manager"] == MANAGER and m["operation"] == "Apply"] == [f"{CLUSTER_GROUP}/v1alpha1"]

    [deleted], out = kube_rs("delete", name)
    assert HIDDEN_GROUP not in out
    body = deleted["object"]  # the deleted Foo, or (the stand-in) a Success Status naming it
    if "status" in body and "details" in body:
        assert body["status"] == "Success" and body["details"]["group"] == APP_GROUP, body
        assert (body["details"]["name"], body["details"]["kind"]) == (name, "foos"), body
    else:
        assert (body["apiVersion"], body["kind"], body["metadata"]["name"]) == (f"{APP_GROUP}/v1alpha1", "Foo", name)
    err = cluster.fails("get", f"foo.v1alpha1.{CLUSTER_GROUP}", name)
    assert f'foos.{CLUSTER_GROUP} "{name}" not found' in err


def test_kube_rs_watcher_sees_a_foo_created_by_kubectl(kube_rs, app, cleanup):
    name = "kube-rs-watched"
    cleanup.append(name)
    stream = Stream(kube_rs.argv("watch", name, "--timeout", "30"), lines=True)
    seen = []
    try:
        stream.until(lambda line: json.loads(line)["event"] == "InitDone", 30, seen)
        manifest = {"apiVersion": f"{APP_GROUP}/v1alpha1", "kind": "Foo", "metadata": {"name": name},
                    "spec": {"deploymentName": f"{name}-deploy", "replicas": 1}}
        app("create", "-f", "-", input=json.dumps(manifest))
        stream.until(lambda line: json.loads(line) == {"event": "Apply", "object": {
            "apiVersion": f"{APP_GROUP}/v1alpha1", "kind": "Foo", "name": name, "ownerReferences": []}}, 30, seen)
        assert stream.proc.wait(10) == 0, "".join(stream.stderr)
    finally:
        stream.close()
    events = [json.loads(line) for line in seen]
    assert events[0] == {"event": "Init", "object": None}
    assert {"alpha", "beta", "gamma"} <= {e["object"]["name"] for e in events if e["event"] == "InitApply"}
    objects = [e["object"] for e in events if e["object"]]
    assert {(o["apiVersion"], o["kind"]) for o in objects} == {(f"{APP_GROUP}/v1alpha1", "Foo")}
    assert HIDDEN_GROUP not in "\n".join(seen)


def test_kube_rs_streaming_list_watcher_ends_its_initial_events_at_the_bookmark(kube_rs, app, cleanup, pyclient, ns):
    """`watcher::Config::streaming_lists()` (WatchList): one watch with
    sendInitialEvents=true; kube-rs reports InitDone only on the bookmark
    annotated k8s.io/initial-events-end, so that bookmark must come through."""
    if REAL:
        status, body = foo_watchlist(pyclient, ns)
        events = [json.loads(line) for line in body.splitlines() if line.strip()] if status == 200 else []
        if initial_events_end(events) is None:
            pytest.skip("this cluster does not serve WatchList (no initial-events-end bookmark: gate off)")
    name = "kube-rs-streamed"
    cleanup.append(name)
    stream = Stream(kube_rs.argv("watch", name, "--timeout", "30", "--streaming-list"), lines=True)
    seen = []
    try:
        stream.until(lambda line: json.loads(line)["event"] == "InitDone", 30, seen)
        manifest = {"apiVersion": f"{APP_GROUP}/v1alpha1", "kind": "Foo", "metadata": {"name": name},
                    "spec": {"deploymentName": f"{name}-deploy", "replicas": 1}}
        app("create", "-f", "-", input=json.dumps(manifest))
        stream.until(lambda line: json.loads(line)["event"] == "Apply"
                     and json.loads(line)["object"]["name"] == name, 30, seen)
        assert stream.proc.wait(10) == 0, "".join(stream.stderr)
    finally:
        stream.close()
    events = [json.loads(line) for line in seen]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "Init" and "InitDone" in kinds, kinds
    initial = [e["object"]["name"] for e in events[:kinds.index("InitDone")] if e["event"] == "InitApply"]
    assert {"alpha", "beta", "gamma"} <= set(initial), kinds
    objects = [e["object"] for e in events if e["object"]]
    assert {(o["apiVersion"], o["kind"]) for o in objects} == {(f"{APP_GROUP}/v1alpha1", "Foo")}
    assert HIDDEN_GROUP not in "\n".join(seen)
