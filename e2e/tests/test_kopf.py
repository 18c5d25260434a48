"""A real Kopf operator (unmodified, its own aiohttp client and login)
behind regroup: it knows only the original group, the cluster only the
renamed one. Kopf discovers the resource (and that it has a status
subresource), lists and watches it, runs its handler, patches the object
(an annotation through the main resource, status through /status) and posts
an Event about it; each of these must reach the cluster in the cluster's
group.

The Foo CRD (e2e/manifests/crd-foos.yaml) is what a real kube-apiserver
enforces: a status subresource (status is ignored in writes of the main
resource) and a structural schema without x-kubernetes-preserve-unknown-fields
(fields it does not declare are pruned; status declares only
availableReplicas). So the operator is written as one for this CRD must be:
its handler's result goes where the schema keeps it (status.availableReplicas,
an annotation), it returns nothing (Kopf would store a return value in
status.created, which is pruned), and Kopf keeps its progress in annotations
only (its default also writes status.kopf, pruned too). The stand-in prunes
and ignores status as kube-apiserver does (e2e/README.md), so a result the
cluster would drop fails here too, as "Merge-patching finished with
inconsistencies" in Kopf's log or a missing field on the cluster."""
import os
import subprocess
import sys
import time

import pytest

from e2e_support import APP_GROUP, CLUSTER_GROUP, HIDDEN_GROUP

OPERATOR = f'''
import kopf

@kopf.on.startup()
def configure(settings, **_):
    settings.watching.server_timeout = 30
    # The CRD's schema prunes what it does not declare, status.kopf included.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage()

# Only the test's Foo: the suite's other Foos stay as the other tests expect.
@kopf.on.create("{APP_GROUP}", "v1alpha1", "foos", labels={{"e2e-kopf": "yes"}})
def created(body, spec, name, patch, **_):
    kopf.info(body, reason="Handled", message=f"kopf-e2e saw {{name}}")
    patch.metadata.annotations["e2e.regroup.dev/handled-by"] = "kopf"
    patch.status["availableReplicas"] = spec.get("replicas")
'''


def wait_for(what, check, timeout=40):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.3)
    pytest.fail(f"timed out waiting for {what}")


@pytest.fixture
def kopf_operator(regroup, ns, workdir):
    pytest.importorskip("kopf", reason="kopf is in e2e/requirements.txt; run e2e/install.sh")
    op = workdir / "kopf_operator.py"
    op.write_text(OPERATOR)
    log = open(workdir / "kopf.log", "w")
    env = dict(os.environ, KUBECONFIG=str(regroup))
    proc = subprocess.Popen([sys.executable, "-m", "kopf", "run", str(op), "--standalone",
                             f"--namespace={ns}", "--verbose"],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    yield proc, workdir / "kopf.log"
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def test_a_kopf_operator_handles_its_foo_through_regroup(kopf_operator, app, cluster, ns):
    proc, log = kopf_operator
    manifest = (f"apiVersion: {APP_GROUP}/v1alpha1\nkind: Foo\nmetadata:\n  name: kopf-foo\n"
                f"  labels:\n    e2e-kopf: \"yes\"\n"
                f"spec:\n  deploymentName: kopf-deploy\n  replicas: 2\n")
    app("apply", "-f", "-", input=manifest)
    try:
        def handled():
            assert proc.poll() is None, f"kopf exited:\n{log.read_text()[-3000:]}"
            obj = cluster.json("get", f"foos.{CLUSTER_GROUP}", "kopf-foo")
            return obj if obj.get("status", {}).get("availableReplicas") == 2 else None
        obj = wait_for("Kopf's status patch on the cluster's Foo", handled)
        # On the cluster: the handler's result (status through the status
        # subresource, an annotation through the main resource) and Kopf's own
        # bookkeeping, written through regroup onto the renamed object.
        assert obj["apiVersion"].startswith(f"{CLUSTER_GROUP}/")
        assert obj["status"] == {"availableReplicas": 2}
        annotations = obj["metadata"]["annotations"]
        assert annotations["e2e.regroup.dev/handled-by"] == "kopf"
        assert "kopf.zalando.org/last-handled-configuration" in annotations
        managed = cluster.json("get", f"foos.{CLUSTER_GROUP}", "kopf-foo", "--show-managed-fields")
        assert [m for m in managed["metadata"]["managedFields"] if m.get("subresource") == "status"], \
            "the status was written through the status subresource"
        # Kopf's Event names the Foo in the cluster's group.
        def event():
            evs = cluster.json("get", "events")["items"]
            return [e for e in evs if e["involvedObject"].get("name") == "kopf-foo"
                    and "kopf-e2e saw kopf-foo" in e.get("message", "")]
        ev = wait_for("Kopf's Event about the Foo", event)[0]
        assert ev["involvedObject"]["apiVersion"] == f"{CLUSTER_GROUP}/v1alpha1", ev["involvedObject"]
        # The Foos without the label were left alone.
        alpha = cluster.json("get", f"foos.{CLUSTER_GROUP}", "alpha")
        assert "kopf.zalando.org/last-handled-configuration" not in alpha["metadata"].get("annotations", {})
        assert ev["involvedObject"]["kind"] == "Foo"
        # The app reads back its own group, the status Kopf wrote included.
        mine = app.json("get", f"foos.{APP_GROUP}", "kopf-foo")
        assert mine["apiVersion"].startswith(f"{APP_GROUP}/") and mine["status"] == {"availableReplicas": 2}
        assert mine["metadata"]["annotations"]["e2e.regroup.dev/handled-by"] == "kopf"
        assert HIDDEN_GROUP not in str(mine)
    finally:
        app("delete", f"foos.{APP_GROUP}", "kopf-foo", "--ignore-not-found", "--wait=false")
    text = log.read_text()
    assert "Handler 'created' succeeded" in text, text[-3000:]
    assert "Traceback" not in text and "ERROR" not in text, text[-3000:]
    # Everything Kopf patched is what the cluster kept (nothing pruned or ignored).
    assert "inconsistencies" not in text, text[-3000:]
