"""Metadata identity (issue #26) with real clients through the real binary:
two copies of one Kopf operator on the same ConfigMaps in one namespace,
copy A straight to the cluster, copy B through regroup whose `metadata:`
rules rename the operator's own prefix and Kopf's:

    demo.kopf.example.io -> demo.team-b.example.com   (the operator's labels, annotations)
    kopf.zalando.org     -> kopf.team-b.example.com   (Kopf's bookkeeping, its finalizer)

On the cluster, copy A's keys are in the original prefixes and copy B's in
the renamed ones; copy B sees its own keys under the original names and
copy A's under `regroup-shadow.<prefix>`, so neither takes the
other's objects, bookkeeping or finalizer for its own. Also: kubectl `-l` /
`--selector` (every kubectl version of the suite) and the Python client's
`label_selector` through regroup, lists and watches; copy B's writes to an
object carrying copy A's keys (kubectl label/annotate, server-side apply, a
PUT of the whole object), which keep copy A's byte for byte.

The module brings its own namespace (created, then deleted) and, in
stand-in mode, its own stand-in with `--finalizers`: deletion waits for
finalizers as on a real cluster (REGROUP_E2E_KUBECONFIG), where the real
apiserver does it."""
import json
import uuid

import pytest

from e2e_support import DIRECT, KUBECTLS, Kubectl, tail, wait_for
from kopf_support import FINALIZER, KOPF, SHADOW, copy_b_regroup, operator_source, run_copies, shared_cluster

pytestmark = pytest.mark.skipif(DIRECT, reason="REGROUP_E2E_DIRECT: no regroup, so no metadata keys renamed")

RUN = uuid.uuid4().hex[:6]
NS = f"regroup-meta-{RUN}"
OWN, OWN_B = "demo.kopf.example.io", "demo.team-b.example.com"
KOPF_B = "kopf.team-b.example.com"
PREFIXES_B = [(OWN, OWN_B), (KOPF, KOPF_B)]  # copy B's metadata rules

# One operator, run twice (kopf_support.operator_source). It handles the
# ConfigMaps labelled `demo.kopf.example.io/managed=yes` (in its own names):
# the first try of its create handler fails on purpose, so Kopf keeps its
# progress in annotations between the tries; the second annotates the object.
OPERATOR = operator_source(f"{OWN}/managed", f'''\
@kopf.on.create("", "v1", "configmaps", labels=SELECTED)
def created(name, patch, retry, **_):
    record(f"create#{{retry}}", name)
    if retry == 0:
        raise kopf.TemporaryError("first try fails on purpose", delay=1)
    patch.metadata.annotations["{OWN}/handled-by"] = COPY
''')

# The test's ConfigMaps, as the cluster holds them: whose label each carries.
# No object is handled by both copies: each copy's Kopf would take the
# other's bookkeeping for a change of the object and the two would write in
# turn forever (docs/config.md, "Metadata": one object handled by both copies).
KOPF_OBJECTS = {
    "cm-a": {f"{OWN}/managed": "yes", "app": "demo"},  # copy A's
    "cm-b": {f"{OWN_B}/managed": "yes", "app": "demo"},  # copy B's
    "cm-none": {f"{OWN}/managed": "no", f"{OWN_B}/managed": "no", "app": "demo"},  # neither's
}
HANDLED = {"a": {"cm-a"}, "b": {"cm-b"}}


def configmap(name, labels=None, annotations=None, finalizers=None, data=None):
    md = {"name": name, "labels": labels or {}}
    if annotations:
        md["annotations"] = annotations
    if finalizers:
        md["finalizers"] = finalizers
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": data or {"k": "v"}})


@pytest.fixture(scope="module")
def meta_cluster(upstream, workdir):
    """The cluster: in stand-in mode a stand-in of its own with finalizers
    (`--finalizers`), else the real cluster; the module's namespace created
    there, and deleted at the end (finalizers left by a failed test removed
    first, so that it goes)."""
    yield from shared_cluster(workdir / "metadata-keys", NS, upstream.kubeconfig, ("--wait=false",))


@pytest.fixture(scope="module")
def copy_b(meta_cluster, workdir, regroup_bin):
    """regroup with copy B's metadata rules in front of the cluster; the
    app's kubeconfig (no credentials, the module's namespace)."""
    yield from copy_b_regroup(regroup_bin, workdir / "metadata-keys", "regroup-copy-b", PREFIXES_B, meta_cluster, NS)


def cluster_cm(cluster, name):
    p = cluster.kubectl.run("get", "configmap", name, "-o", "json", check=False)
    return json.loads(p.stdout) if p.returncode == 0 else None


# ---- two copies of a Kopf operator ------------------------------------------------------

@pytest.fixture
def operators(meta_cluster, copy_b, workdir):
    yield from run_copies(workdir / "metadata-keys", OPERATOR, (("a", meta_cluster), ("b", copy_b)), NS)


def records(path):
    return [line.split() for line in path.read_text().splitlines()]


def test_two_kopf_copies_handle_only_their_own_configmaps(operators, meta_cluster, copy_b):
    def diag():
        return "\n".join(f"--- kopf {n} ---\n{tail(log, 40)}" for n, (_, _, log) in operators.items())

    for name, labels in KOPF_OBJECTS.items():
        meta_cluster.kubectl("create", "-f", "-", input=configmap(name, labels))

    def own_keys(obj, own, kopf_prefix, copy):
        md = obj["metadata"]
        ann = md.get("annotations") or {}
        return (ann.get(f"{own}/handled-by") == copy and f"{kopf_prefix}/last-handled-configuration" in ann
                and f"{kopf_prefix}/{FINALIZER}" in (md.get("finalizers") or []))

    def all_handled():
        for _, (proc, _, log) in operators.items():
            assert proc.poll() is None, f"kopf exited:\n{tail(log, 60)}"
        objs = {n: cluster_cm(meta_cluster, n) for n in KOPF_OBJECTS}
        done = all(own_keys(objs[n], OWN, KOPF, "a") for n in HANDLED["a"]) and \
            all(own_keys(objs[n], OWN_B, KOPF_B, "b") for n in HANDLED["b"])
        # Kopf removes its progress annotations once the handler succeeded.
        settled = not any(k.endswith("/created") for o in objs.values()
                          for k in (o["metadata"].get("annotations") or {}))
        return objs if done and settled else None

    objs = wait_for("both copies' handlers on their ConfigMaps", all_handled, timeout=60, diag=diag)

    # Read from the cluster: each copy's keys under its own names, both on the shared one.
    for name, obj in objs.items():
        md = obj["metadata"]
        ann, fins = md.get("annotations") or {}, md.get("finalizers") or []
        for copy, own, kopf_prefix in (("a", OWN, KOPF), ("b", OWN_B, KOPF_B)):
            mine = name in HANDLED[copy]
            assert (ann.get(f"{own}/handled-by") == copy) == mine, (name, copy, ann)
            assert (f"{kopf_prefix}/last-handled-configuration" in ann) == mine, (name, copy, ann)
            assert fins.count(f"{kopf_prefix}/{FINALIZER}") == int(mine), (name, copy, fins)
        # Nothing the app side should never write reached the cluster.
        assert SHADOW not in json.dumps(md), md
        assert not [f for f in fins if f not in (f"{KOPF}/{FINALIZER}", f"{KOPF_B}/{FINALIZER}")], fins
    # Each copy's bookkeeping is its own, in the names that copy sees: the
    # labels it was handled with, in the operator's original prefix.
    for name, kopf_prefix in (("cm-a", KOPF), ("cm-b", KOPF_B)):
        handled = json.loads(objs[name]["metadata"]["annotations"][f"{kopf_prefix}/last-handled-configuration"])
        assert handled["metadata"]["labels"] == {f"{OWN}/managed": "yes", "app": "demo"}, (name, handled)
    # Copy B's view of copy A's object: A's keys shadowed, never its own.
    seen = copy_b.kubectl.json("get", "configmap", "cm-a")["metadata"]
    assert seen["labels"] == {f"{SHADOW}{OWN}/managed": "yes", "app": "demo"}, seen
    assert seen["finalizers"] == [f"{SHADOW}{KOPF}/{FINALIZER}"], seen
    assert seen["annotations"][f"{SHADOW}{OWN}/handled-by"] == "a", seen
    seen = copy_b.kubectl.json("get", "configmap", "cm-b")["metadata"]
    assert seen["labels"] == {f"{OWN}/managed": "yes", "app": "demo"}, seen
    assert seen["finalizers"] == [f"{KOPF}/{FINALIZER}"], seen
    assert OWN_B not in json.dumps(seen) and KOPF_B not in json.dumps(seen), seen

    # Each handler ran for its copy's objects only: a failed first try and a
    # second that succeeded, once per object.
    for copy, (_, record, _) in operators.items():
        calls = records(record)
        assert sorted(calls) == sorted([["create#0", n] for n in HANDLED[copy]] +
                                       [["create#1", n] for n in HANDLED[copy]]), (copy, calls)

    # Deleting each object: the copies that put a finalizer on it remove it
    # (their delete handler runs), then it is gone.
    for name in KOPF_OBJECTS:
        meta_cluster.kubectl("delete", "configmap", name, "--wait=false")
    wait_for("the ConfigMaps released and deleted",
             lambda: all(cluster_cm(meta_cluster, n) is None for n in KOPF_OBJECTS), timeout=60, diag=diag)
    for copy, (_, record, _) in operators.items():
        deletes = sorted(n for what, n in records(record) if what == "delete")
        assert deletes == sorted(HANDLED[copy]), (copy, records(record))
    for copy, (_, _, log) in operators.items():
        text = log.read_text()
        assert "Traceback" not in text, f"kopf {copy}:\n{text[-4000:]}"
        assert "inconsistencies" not in text, f"kopf {copy}:\n{text[-4000:]}"
        assert "Handler 'created' succeeded" in text, f"kopf {copy}:\n{text[-4000:]}"


# ---- label selectors through regroup -----------------------------------------------------

# ConfigMaps as the cluster holds them (all carry e2e.regroup.dev/sel=yes, a
# key no rule renames, so that the queries see only these).
SEL = "e2e.regroup.dev/sel"
SELECTED_CMS = {
    "sel-web": {f"{OWN_B}/tier": "web", f"{OWN_B}/team": "x"},  # copy B's: app sees demo.kopf.example.io/tier=web
    "sel-db": {f"{OWN_B}/tier": "db"},
    "sel-a-web": {f"{OWN}/tier": "web"},  # copy A's: app sees regroup-shadow.demo.kopf.example.io/tier
    "sel-plain": {},
}
# (selector as the app writes it, the same on the cluster's side, the names it selects)
SELECTORS = [
    (f"{OWN}/tier=web", f"{OWN_B}/tier=web", {"sel-web"}),
    (f"{OWN}/tier==db", f"{OWN_B}/tier==db", {"sel-db"}),
    (f"{OWN}/tier", f"{OWN_B}/tier", {"sel-web", "sel-db"}),
    (f"!{OWN}/tier", f"!{OWN_B}/tier", {"sel-a-web", "sel-plain"}),
    (f"{OWN}/tier in (web,db)", f"{OWN_B}/tier in (web,db)", {"sel-web", "sel-db"}),
    (f"{OWN}/tier notin (web)", f"{OWN_B}/tier notin (web)", {"sel-db", "sel-a-web", "sel-plain"}),
    (f"{OWN}/tier!=web", f"{OWN_B}/tier!=web", {"sel-db", "sel-a-web", "sel-plain"}),
    (f"{OWN}/tier=web,{OWN}/team", f"{OWN_B}/tier=web,{OWN_B}/team", {"sel-web"}),
    (f"{SHADOW}{OWN}/tier=web", f"{OWN}/tier=web", {"sel-a-web"}),  # copy A's key, addressed as shown
]


@pytest.fixture(scope="module")
def selector_objects(meta_cluster):
    for name, labels in SELECTED_CMS.items():
        meta_cluster.kubectl("create", "-f", "-", input=configmap(name, dict(labels, **{SEL: "yes"})))
    yield SELECTED_CMS
    meta_cluster.kubectl("delete", "configmap", *SELECTED_CMS, "--ignore-not-found", "--wait=false")


def names(listed):
    return {i["metadata"]["name"] for i in listed["items"]}


@pytest.mark.parametrize("version", list(KUBECTLS), ids=[f"kubectl-{v}" for v in KUBECTLS])
def test_kubectl_label_selectors_are_renamed(version, selector_objects, meta_cluster, copy_b, workdir):
    app = Kubectl(copy_b.kubeconfig, workdir / "metadata-keys" / f"cache-copy-b-{version}", NS,
                  copy_b.kubectl.logs, binary=KUBECTLS[version])
    for i, (mine, theirs, expected) in enumerate(SELECTORS):
        flag = ("-l", "--selector")[i % 2]
        got = app.json("get", "configmaps", flag, f"{SEL}=yes,{mine}")
        assert names(got) == expected, (version, mine, names(got))
        # Exactly what the cluster answers to the renamed selector.
        assert names(meta_cluster.kubectl.json("get", "configmaps", "-l", f"{SEL}=yes,{theirs}")) == expected, theirs
        for item in got["items"]:  # and shown in the app's names
            assert OWN_B not in json.dumps(item["metadata"]), item["metadata"]
    # The human output (a Table whose rows carry the objects' metadata) shows
    # the labels in the app's names too.
    shown = app("get", "configmaps", "-l", f"{SEL}=yes,{OWN}/tier", "--show-labels")
    rows = {line.split()[0]: line.split()[-1] for line in shown.splitlines()[1:]}
    assert set(rows) == {"sel-web", "sel-db"}, shown
    assert f"{OWN}/tier=web" in rows["sel-web"] and f"{OWN}/team=x" in rows["sel-web"], shown
    assert OWN_B not in shown, shown
    # A selector regroup can't parse is refused, not passed on unrenamed.
    err = app.fails("get", "configmaps", "-l", f"{OWN}/tier in (web")
    assert "(BadRequest)" in err and "regroup:" in err, err


def test_python_client_label_selector_list_and_watch(selector_objects, meta_cluster, copy_b):
    from kubernetes import client, config, watch
    api = client.CoreV1Api(config.new_client_from_config(config_file=str(copy_b.kubeconfig)))
    for mine, theirs, expected in SELECTORS:
        got = api.list_namespaced_config_map(NS, label_selector=f"{SEL}=yes,{mine}")
        assert {i.metadata.name for i in got.items} == expected, (mine, [i.metadata.name for i in got.items])
    # A watch with a selector: the ADDED events of what exists, filtered on
    # the cluster by the renamed selector (bounded by timeout_seconds).
    for mine, _, expected in (SELECTORS[0], SELECTORS[3], SELECTORS[4]):
        w = watch.Watch()
        seen = set()
        for ev in w.stream(api.list_namespaced_config_map, NS, label_selector=f"{SEL}=yes,{mine}",
                           timeout_seconds=2, _request_timeout=30):
            assert ev["type"] == "ADDED", ev["type"]
            seen.add(ev["object"].metadata.name)
            if seen >= expected:
                w.stop()
        assert seen == expected, (mine, seen)


@pytest.mark.parametrize("version", list(KUBECTLS), ids=[f"kubectl-{v}" for v in KUBECTLS])
def test_kubectl_label_and_annotate_write_the_copys_own_keys(version, meta_cluster, copy_b, workdir):
    """`kubectl label` / `annotate` (merge patches of metadata) by copy B on a
    ConfigMap that carries copy A's keys: B's land under its cluster names,
    removing "its" key removes B's, A's stay as they were."""
    name = f"labelled-{version}"
    meta_cluster.kubectl("create", "-f", "-", input=configmap(
        name, labels={f"{OWN}/tier": "web"}, annotations={f"{OWN}/note": "a's"}))
    app = Kubectl(copy_b.kubeconfig, workdir / "metadata-keys" / f"cache-copy-b-{version}", NS,
                  copy_b.kubectl.logs, binary=KUBECTLS[version])
    try:
        app("label", "configmap", name, f"{OWN}/tier=db")
        app("annotate", "configmap", name, f"{OWN}/note=b's")
        md = cluster_cm(meta_cluster, name)["metadata"]
        assert md["labels"] == {f"{OWN}/tier": "web", f"{OWN_B}/tier": "db"}, md
        assert md["annotations"] == {f"{OWN}/note": "a's", f"{OWN_B}/note": "b's"}, md
        app("label", "configmap", name, f"{OWN}/tier-")
        app("annotate", "configmap", name, f"{OWN}/note-")
        md = cluster_cm(meta_cluster, name)["metadata"]
        assert md["labels"] == {f"{OWN}/tier": "web"}, md
        assert md.get("annotations") == {f"{OWN}/note": "a's"}, md
        # Copy A's key, addressed as copy B is shown it, is copy A's on the cluster.
        app("label", "configmap", name, "--overwrite", f"{SHADOW}{OWN}/tier=web2")
        assert cluster_cm(meta_cluster, name)["metadata"]["labels"] == {f"{OWN}/tier": "web2"}
    finally:
        meta_cluster.kubectl("delete", "configmap", name, "--ignore-not-found", "--wait=false")


def test_python_client_watch_with_a_renamed_selector_sees_objects_come_and_go(meta_cluster, copy_b):
    """A watch from a resourceVersion with `demo.kopf.example.io/phase=b`
    (the cluster's `demo.team-b.example.com/phase=b`): a ConfigMap relabelled
    into the selection is ADDED, relabelled out of it DELETED (in its last
    matching state), as the apiserver's watch cache sends them."""
    from kubernetes import client, config, watch
    api = client.CoreV1Api(config.new_client_from_config(config_file=str(copy_b.kubeconfig)))
    selector = f"{OWN}/phase=b"
    meta_cluster.kubectl("create", "-f", "-", input=configmap("wt-1", {f"{OWN_B}/phase": "a"}))
    try:
        rv = api.list_namespaced_config_map(NS, label_selector=selector).metadata.resource_version
        meta_cluster.kubectl("label", "configmap", "wt-1", "--overwrite", f"{OWN_B}/phase=b")
        meta_cluster.kubectl("label", "configmap", "wt-1", "--overwrite", f"{OWN_B}/phase=c")
        meta_cluster.kubectl("create", "-f", "-", input=configmap("wt-2", {f"{OWN_B}/phase": "b"}))
        meta_cluster.kubectl("create", "-f", "-", input=configmap("wt-3", {f"{OWN}/phase": "b"}))  # copy A's
        meta_cluster.kubectl("delete", "configmap", "wt-2")
        events = []
        for ev in watch.Watch().stream(api.list_namespaced_config_map, NS, label_selector=selector,
                                       resource_version=rv, timeout_seconds=2, _request_timeout=30):
            events.append((ev["type"], ev["object"].metadata.name, ev["object"].metadata.labels))
        assert events == [("ADDED", "wt-1", {f"{OWN}/phase": "b"}), ("DELETED", "wt-1", {f"{OWN}/phase": "b"}),
                          ("ADDED", "wt-2", {f"{OWN}/phase": "b"}), ("DELETED", "wt-2", {f"{OWN}/phase": "b"})], events
    finally:
        meta_cluster.kubectl("delete", "configmap", "wt-1", "wt-2", "wt-3", "--ignore-not-found", "--wait=false")


def test_server_side_apply_by_copy_b_keeps_copy_as_keys(meta_cluster, copy_b):
    """`kubectl apply --server-side` by copy B of a ConfigMap copy A's keys are
    on: copy B's keys land under its cluster names, copy A's stay, and the
    managed fields copy B reads back name its keys as it wrote them."""
    name = "applied"
    meta_cluster.kubectl("create", "-f", "-", input=configmap(
        name, labels={f"{OWN}/tier": "web"}, annotations={f"{KOPF}/last-handled-configuration": "{}\n"}))
    try:
        manifest = configmap(name, labels={f"{OWN}/tier": "db"}, annotations={f"{OWN}/note": "b"})
        copy_b.kubectl("apply", "--server-side", "--field-manager=copy-b", "-f", "-", input=manifest)
        md = cluster_cm(meta_cluster, name)["metadata"]
        assert md["labels"] == {f"{OWN}/tier": "web", f"{OWN_B}/tier": "db"}, md
        assert md["annotations"] == {f"{KOPF}/last-handled-configuration": "{}\n", f"{OWN_B}/note": "b"}, md
        mine = copy_b.kubectl.json("get", "configmap", name, "--show-managed-fields")["metadata"]
        entry = next(m for m in mine["managedFields"] if m["manager"] == "copy-b")
        fields = entry["fieldsV1"]["f:metadata"]
        assert f"f:{OWN}/tier" in fields["f:labels"] and f"f:{OWN}/note" in fields["f:annotations"], entry
        assert OWN_B not in json.dumps(mine) and KOPF_B not in json.dumps(mine), mine
        assert mine["labels"] == {f"{SHADOW}{OWN}/tier": "web", f"{OWN}/tier": "db"}, mine
    finally:
        meta_cluster.kubectl("delete", "configmap", name, "--ignore-not-found", "--wait=false")


# ---- a PUT round trip keeps the other copy's keys ------------------------------------------

A_KEYS = {
    "labels": {f"{OWN}/managed": "yes", f"{OWN}/tier": "web"},
    "annotations": {f"{KOPF}/last-handled-configuration": '{"data":{"k":"v"},"metadata":{"labels":'
                                                          f'{{"{OWN}/managed":"yes"}}}}}}\n',
                    f"{OWN}/handled-by": "a"},
}
B_KEYS = {
    "labels": {f"{OWN_B}/managed": "yes"},
    "annotations": {f"{KOPF_B}/last-handled-configuration": '{"data":{"k":"v"}}\n', f"{OWN_B}/handled-by": "b"},
}


def a_keys(md):
    """Copy A's keys of a stored object's metadata, as JSON text (the bytes compared)."""
    return json.dumps({
        "labels": {k: v for k, v in md["labels"].items() if k.startswith(f"{OWN}/")},
        "annotations": {k: v for k, v in md["annotations"].items() if k.startswith((f"{OWN}/", f"{KOPF}/"))},
        "finalizers": [f for f in md["finalizers"] if f.startswith(f"{KOPF}/")],
    }, sort_keys=True)


@pytest.mark.parametrize("client_name", ["kubectl", "python"])
def test_put_round_trip_keeps_the_other_copys_keys(client_name, meta_cluster, copy_b):
    name = f"shared-{client_name}"
    meta_cluster.kubectl("create", "-f", "-", input=configmap(
        name, labels={**A_KEYS["labels"], **B_KEYS["labels"], "app": "shared"},
        annotations={**A_KEYS["annotations"], **B_KEYS["annotations"]},
        finalizers=[f"{KOPF}/{FINALIZER}", f"{KOPF_B}/{FINALIZER}"]))
    try:
        before = cluster_cm(meta_cluster, name)
        assert a_keys(before["metadata"]) == a_keys({**A_KEYS, "finalizers": [f"{KOPF}/{FINALIZER}"]})
        # Copy B reads it: its own keys in the original names, A's shadowed.
        obj = copy_b.kubectl.json("get", "configmap", name)
        md = obj["metadata"]
        assert md["labels"][f"{OWN}/managed"] == "yes" and md["labels"][f"{SHADOW}{OWN}/managed"] == "yes", md
        assert md["finalizers"] == [f"{SHADOW}{KOPF}/{FINALIZER}", f"{KOPF}/{FINALIZER}"], md
        assert OWN_B not in json.dumps(md) and KOPF_B not in json.dumps(md), md
        # ... edits its own keys and data, drops its finalizer, and PUTs the whole object back.
        md["annotations"][f"{OWN}/handled-by"] = "b-edited"
        md["labels"][f"{OWN}/edited"] = "yes"
        md["finalizers"].remove(f"{KOPF}/{FINALIZER}")
        obj["data"]["b"] = "2"
        if client_name == "kubectl":
            copy_b.kubectl("replace", "-f", "-", input=json.dumps(obj))
        else:
            from kubernetes import client, config
            api = client.CoreV1Api(config.new_client_from_config(config_file=str(copy_b.kubeconfig)))
            api.replace_namespaced_config_map(name, NS, obj)
        after = cluster_cm(meta_cluster, name)
        amd = after["metadata"]
        # Not one byte of copy A's keys lost or changed ...
        assert a_keys(amd) == a_keys(before["metadata"]), (a_keys(amd), a_keys(before["metadata"]))
        # ... and copy B's edits landed under its cluster names.
        assert amd["annotations"][f"{OWN_B}/handled-by"] == "b-edited", amd
        assert amd["labels"][f"{OWN_B}/edited"] == "yes", amd
        assert amd["annotations"][f"{KOPF_B}/last-handled-configuration"] == B_KEYS["annotations"][
            f"{KOPF_B}/last-handled-configuration"], amd
        assert amd["finalizers"] == [f"{KOPF}/{FINALIZER}"], amd
        assert after["data"] == {"k": "v", "b": "2"}, after["data"]
        assert SHADOW not in json.dumps(amd), amd
    finally:
        meta_cluster.kubectl.run("patch", "configmap", name, "--type=merge", "-p", '{"metadata":{"finalizers":null}}',
                                 check=False)
        meta_cluster.kubectl.run("delete", "configmap", name, "--ignore-not-found", "--wait=false", check=False)
