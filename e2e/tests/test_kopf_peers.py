"""Two copies of one Kopf operator handling THE SAME object (issue #44 item 4;
docs/config.md, "Kopf: one object handled by both copies (peers
recognised)"). Copy A talks straight to the cluster, copy B through regroup
whose one metadata rule nests Kopf's prefix in itself:

    kopf.zalando.org -> team-b.kopf.zalando.org

On the cluster copy B's bookkeeping is `team-b.kopf.zalando.org/...`, which
copy A's Kopf takes for a peer's (the prefix ends in `.kopf.zalando.org`);
copy B is shown copy A's as `regroup-shadow.kopf.zalando.org/...`, which
copy B's Kopf takes for a peer's too. So each leaves the other's
`last-handled-configuration` out of what it compares, and the two settle:
the shared ConfigMap stops changing, each copy's handler ran a bounded
number of times, both finalizers are there, and on deletion both delete
handlers run, both finalizers go and so does the object.

What failing looked like (no binary before the change is built here, so this
is not re-run): with the earlier shadow form
`kopf.zalando.org.shadowed.regroup.invalid/...` and a target outside Kopf's
family (`kopf.team-b.example.com`; a nested target was refused then), neither
copy recognised the other's keys, so each took the other's newly stored
`last-handled-configuration` for a change of the object, ran its update
handler and stored its own again, embedding the other's: round after round,
the resourceVersion never stopped moving and the annotations grew (each
round's JSON escaping the previous one's) until the apiserver refused them.
The checks below (resourceVersion stable for 10 s, annotations small, no
bookkeeping of the other copy inside either `last-handled-configuration`,
at most 3 handler calls per copy) each fail on that.

The module brings its own namespace (created, then deleted) and, in stand-in
mode, its own stand-in with `--finalizers`; with REGROUP_E2E_KUBECONFIG, the
real cluster (only a namespace is created there)."""
import json
import os
import time
import uuid
from pathlib import Path

import pytest

from e2e_support import DIRECT, REAL, tail, wait_for
from kopf_support import FINALIZER, KOPF, SHADOW, copy_b_regroup, operator_source, run_copies, shared_cluster

pytestmark = pytest.mark.skipif(DIRECT, reason="REGROUP_E2E_DIRECT: no regroup, so no metadata keys renamed")

RUN = uuid.uuid4().hex[:6]
NS = f"regroup-peers-{RUN}"
KOPF_B = "team-b.kopf.zalando.org"
LHC = "last-handled-configuration"
WATCHED = "peers.example.io/watched"  # no rule renames it: both copies select the same objects
HANDLED_BY = "peers.example.io/handled-by-"  # + the copy's name, written by its handler
NAME = "shared"
PREFIXES_B = [(KOPF, KOPF_B)]  # copy B's one metadata rule
MAX_CALLS = 3  # create + at most one update for its own annotation and one for the other copy's

# One operator, run twice (kopf_support.operator_source). Its create/update
# handler annotates the ConfigMaps labelled `peers.example.io/watched=yes`
# with `peers.example.io/handled-by-<copy>`.
OPERATOR = operator_source(WATCHED, f'''\
@kopf.on.create("", "v1", "configmaps", labels=SELECTED)
@kopf.on.update("", "v1", "configmaps", labels=SELECTED)
def handled(name, reason, patch, **_):
    record(reason.value, name)
    patch.metadata.annotations["{HANDLED_BY}" + COPY] = "yes"
''')


@pytest.fixture(scope="module")
def peers_cluster(workdir):
    """The cluster: in stand-in mode a stand-in of its own with finalizers,
    else the real cluster (REGROUP_E2E_KUBECONFIG); the module's namespace
    created there and deleted at the end (finalizers a failed test left
    removed first, so that it goes)."""
    yield from shared_cluster(workdir / "kopf-peers", NS, Path(os.environ["REGROUP_E2E_KUBECONFIG"]) if REAL else None,
                              ("--timeout=60s",), delete_timeout=90)


@pytest.fixture(scope="module")
def copy_b(peers_cluster, workdir, regroup_bin):
    """regroup with copy B's metadata rule in front of the cluster; the app's
    kubeconfig (no credentials, the module's namespace)."""
    yield from copy_b_regroup(regroup_bin, workdir / "kopf-peers", "regroup-kopf-peers", PREFIXES_B, peers_cluster, NS)


@pytest.fixture
def operators(peers_cluster, copy_b, workdir):
    """Both copies of the operator running (copy A on the cluster's kubeconfig,
    copy B on regroup's), each watching the module's namespace."""
    yield from run_copies(workdir / "kopf-peers", OPERATOR, (("a", peers_cluster), ("b", copy_b)), NS)


def records(path):
    return [line.split()[:2] for line in path.read_text().splitlines()]


def calls(path, *what):
    return [r for r in records(path) if r[0] in what]


def test_two_kopf_copies_settle_on_one_shared_configmap(operators, peers_cluster, copy_b):
    def diag():
        return "\n".join(f"--- kopf {n} ({records(rec)}) ---\n{tail(log, 40)}"
                         for n, (_, rec, log) in operators.items()) + f"\n--- object ---\n{json.dumps(get())}"

    def alive():
        for n, (proc, _, log) in operators.items():
            assert proc.poll() is None, f"kopf {n} exited:\n{tail(log, 60)}"

    def get():
        p = peers_cluster.kubectl.run("get", "configmap", NAME, "-o", "json", check=False)
        return json.loads(p.stdout) if p.returncode == 0 else None

    # Both copies watching before the object exists.
    wait_for("both copies' watch on ConfigMaps", lambda: alive() or all(
        "Starting the watch-stream for configmaps" in log.read_text() for _, _, log in operators.values()),
        timeout=60, diag=diag)

    created_at = time.monotonic()
    peers_cluster.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"},
        "metadata": {"name": NAME, "labels": {WATCHED: "yes"}}}))

    def handled_by_both():
        alive()
        obj = get()
        md = obj["metadata"]
        ann, fins = md.get("annotations") or {}, md.get("finalizers") or []
        done = all(f"{HANDLED_BY}{c}" in ann for c in "ab") and \
            all(f"{p}/{LHC}" in ann and f"{p}/{FINALIZER}" in fins for p in (KOPF, KOPF_B))
        return obj if done else None

    wait_for("both copies' handlers, bookkeeping and finalizers on the shared ConfigMap", handled_by_both,
             timeout=30, diag=diag)
    handled_at = time.monotonic()

    # Steady: read it every 5 s until its resourceVersion has not moved for
    # >= 10 s (bounded: two copies in ping-pong never get there), the
    # annotations staying small all along.
    reads = []  # (time, resourceVersion)
    while True:
        alive()
        obj = get()
        now = time.monotonic()
        size = len(json.dumps(obj["metadata"].get("annotations") or {}))
        assert size < 4096, f"annotations of {size} bytes: the copies write each other's bookkeeping\n{diag()}"
        reads.append((now, obj["metadata"]["resourceVersion"]))
        steady_since = next(t for i, (t, rv) in enumerate(reads) if all(r == rv for _, r in reads[i:]))
        if len(reads) >= 3 and now - steady_since >= 10:
            break
        assert now - created_at < 60, f"still changing 60 s after creation: {reads}\n{diag()}"
        time.sleep(5)
    settled_in = steady_since - created_at
    print(f"handled by both {handled_at - created_at:.1f}s after creation; resourceVersion unchanged from "
          f"the read at {settled_in:.1f}s to the one at {now - created_at:.1f}s: {[rv for _, rv in reads]}")
    assert settled_in <= 30, f"steady only {settled_in:.1f}s after creation: {reads}"

    # On the cluster: each copy's bookkeeping under its own prefix, both finalizers.
    md = obj["metadata"]
    ann, fins = md["annotations"], md["finalizers"]
    assert sorted(fins) == sorted([f"{KOPF}/{FINALIZER}", f"{KOPF_B}/{FINALIZER}"]), fins
    assert ann[f"{HANDLED_BY}a"] == ann[f"{HANDLED_BY}b"] == "yes", ann
    assert SHADOW not in json.dumps(md), md
    # Kopf removes its progress annotations once its handlers succeeded: only
    # the two diff bases are left of either copy's bookkeeping.
    assert sorted(k for k in ann if k.startswith((f"{KOPF}/", f"{KOPF_B}/"))) == \
        sorted([f"{KOPF}/{LHC}", f"{KOPF_B}/{LHC}"]), ann
    # Each copy's last handled state is what it sees now (else it would
    # handle again), without the other copy's bookkeeping in it: both took the
    # other's keys for a peer's. Copy B's is in its own names (regroup renames
    # keys, not this annotation's value), where copy A's keys are shadowed.
    expected = {"data": {"k": "v"}, "metadata": {
        "labels": {WATCHED: "yes"}, "annotations": {f"{HANDLED_BY}a": "yes", f"{HANDLED_BY}b": "yes"}}}
    for prefix in (KOPF, KOPF_B):
        assert json.loads(ann[f"{prefix}/{LHC}"]) == expected, (prefix, ann[f"{prefix}/{LHC}"])

    # Copy B's view through regroup: its own keys in Kopf's names, copy A's
    # shadowed in Kopf's DNS family (`regroup-shadow.kopf.zalando.org`).
    seen = copy_b.kubectl.json("get", "configmap", NAME)["metadata"]
    assert seen["finalizers"] == [f"{SHADOW}{KOPF}/{FINALIZER}" if f.startswith(f"{KOPF}/") else f"{KOPF}/{FINALIZER}"
                                  for f in fins], (seen["finalizers"], fins)
    assert seen["annotations"][f"{SHADOW}{KOPF}/{LHC}"] == ann[f"{KOPF}/{LHC}"], seen
    assert seen["annotations"][f"{KOPF}/{LHC}"] == ann[f"{KOPF_B}/{LHC}"], seen
    assert KOPF_B not in json.dumps(seen), seen
    assert seen["resourceVersion"] == md["resourceVersion"], (seen, md)

    # No ping-pong: each copy's handler ran once for the creation and at
    # most twice more (its own annotation, the other copy's), and not again
    # while the object stood still.
    for copy, (_, record, _) in operators.items():
        got = records(record)
        assert calls(record, "create") == [["create", NAME]], (copy, got)
        assert len(got) <= MAX_CALLS and all(r == ["update", NAME] for r in got[1:]), (copy, got)
    counts = {c: len(records(rec)) for c, (_, rec, _) in operators.items()}
    print(f"handler calls: {counts}")

    # Deleting it: both delete handlers run, both finalizers go, then the object.
    deleted_at = time.monotonic()
    peers_cluster.kubectl("delete", "configmap", NAME, "--wait=false")
    wait_for("the shared ConfigMap released by both copies and deleted", lambda: alive() or get() is None,
             timeout=30, diag=diag)
    print(f"deleted {time.monotonic() - deleted_at:.1f}s after the DELETE")
    for copy, (_, record, _) in operators.items():
        got = records(record)
        assert calls(record, "delete") == [["delete", NAME]], (copy, got)
        assert len(calls(record, "create", "update")) == counts[copy], (copy, got)
    for copy, (_, _, log) in operators.items():
        text = log.read_text()
        assert "Traceback" not in text, f"kopf {copy}:\n{text[-4000:]}"
        assert "inconsistencies" not in text, f"kopf {copy}:\n{text[-4000:]}"
        assert "Handler 'deleted' succeeded" in text, f"kopf {copy}:\n{text[-4000:]}"
