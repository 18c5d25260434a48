"""Two copies of one Kopf operator on the same ConfigMaps of one namespace
(test_metadata_keys.py, test_kopf_peers.py): copy A straight to the cluster,
copy B through a regroup with metadata rules. The cluster, copy B's regroup
and the running copies, each a generator a module's fixture yields from."""
import json
import os
import subprocess
import sys

import pytest

from conftest import start_regroup, start_standin
from e2e_support import CLUSTER_GROUP, ORIG_GROUP, REAL, Kubectl, stop, write_kubeconfig

KOPF = "kopf.zalando.org"  # Kopf's prefix: its bookkeeping annotations and its finalizer
FINALIZER = "KopfFinalizerMarker"
SHADOW = "regroup-shadow."  # before another copy's keys, as copy B is shown them


class Side:
    """A kubeconfig and a kubectl on it, in the module's namespace."""

    def __init__(self, kubeconfig, kubectl):
        self.kubeconfig, self.kubectl = kubeconfig, kubectl


def operator_source(selected, handlers):
    """The operator both copies run (E2E_COPY tells them apart, nothing else
    differs): `handlers` (which record their calls with `record`) on the
    ConfigMaps labelled `selected=yes` (SELECTED), and a delete handler that
    makes Kopf put its finalizer on them and remove it on deletion. Each call
    is recorded in the copy's file (E2E_RECORD), one line per call."""
    return f'''
import os
import kopf

COPY, RECORD = os.environ["E2E_COPY"], os.environ["E2E_RECORD"]
SELECTED = {{"{selected}": "yes"}}


def record(what, name):
    with open(RECORD, "a") as f:
        f.write(f"{{what}} {{name}}\\n")


@kopf.on.startup()
def configure(settings, **_):
    settings.watching.server_timeout = 30
    # ConfigMaps have no status: Kopf keeps its progress in annotations.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage()


{handlers}

@kopf.on.delete("", "v1", "configmaps", labels=SELECTED)
def deleted(name, **_):
    record("delete", name)
'''


def shared_cluster(d, ns, real_kubeconfig, delete_flags=(), delete_timeout=30):
    """The cluster: in stand-in mode a stand-in of its own in `d` with
    finalizers (`--finalizers`), else the real cluster (REGROUP_E2E_KUBECONFIG,
    `real_kubeconfig`); namespace `ns` created there and deleted at the end
    (`kubectl delete namespace --ignore-not-found` with `delete_flags`, after
    removing the finalizers a failed test left, so that it goes). Yields a
    Side."""
    d.mkdir(exist_ok=True)
    proc = None
    if REAL:
        kc = real_kubeconfig
    else:
        proc, port, _ = start_standin(d, "standin", "--seed-namespace", "", "--finalizers")
        kc = write_kubeconfig(d / "cluster.kubeconfig", f"http://127.0.0.1:{port}", ns)
    k = Kubectl(kc, d / "cache-cluster", ns, [d / "standin.log"] if proc else [])
    k("create", "namespace", ns)
    try:
        yield Side(kc, k)
    finally:
        listed = k.run("get", "configmaps", "-o", "json", check=False)
        if listed.returncode == 0:
            for cm in json.loads(listed.stdout)["items"]:
                if cm["metadata"].get("finalizers"):
                    k.run("patch", "configmap", cm["metadata"]["name"], "--type=merge", "-p",
                          '{"metadata":{"finalizers":null}}', check=False)
        k.run("delete", "namespace", ns, "--ignore-not-found", *delete_flags, timeout=delete_timeout, check=False)
        if proc:
            stop(proc)


def copy_b_config(prefixes):
    """Copy B's configuration: its metadata rules, `prefixes` (from, to). A
    configuration needs one group rule: the suite's (no group of it is used)."""
    return (f"rules:\n  - {{from: {ORIG_GROUP}, to: {CLUSTER_GROUP}}}\nmetadata:\n  prefixes:\n"
            + "".join(f"    - {{from: {a}, to: {b}}}\n" for a, b in prefixes))


def copy_b_regroup(regroup_bin, d, name, prefixes, cluster, ns):
    """regroup `name` with copy B's metadata rules `prefixes` (copy_b_config)
    in front of `cluster` (a Side); yields the app's Side (no credentials,
    namespace `ns`)."""
    config = d / "copy-b.yaml"
    config.write_text(copy_b_config(prefixes))
    proc, port, log = start_regroup(regroup_bin, d, name, config, cluster.kubeconfig)
    kc = write_kubeconfig(d / "copy-b.kubeconfig", f"http://127.0.0.1:{port}", ns)
    yield Side(kc, Kubectl(kc, d / "cache-copy-b", ns, [log]))
    stop(proc)


def run_copies(d, source, sides, ns):
    """The operator `source` run once per (copy name, Side) of `sides` with
    `kopf run --standalone`, on that side's kubeconfig, watching namespace
    `ns`; yields {copy: (process, record file, log file)} and stops them."""
    pytest.importorskip("kopf", reason="kopf is in e2e/requirements.txt; run e2e/install.sh")
    op = d / "operator.py"
    op.write_text(source)
    procs = {}
    try:
        for name, side in sides:
            record = d / f"handled-{name}.txt"
            record.write_text("")
            log = d / f"kopf-{name}.log"
            env = dict(os.environ, KUBECONFIG=str(side.kubeconfig), E2E_COPY=name, E2E_RECORD=str(record))
            proc = subprocess.Popen([sys.executable, "-m", "kopf", "run", str(op), "--standalone",
                                     f"--namespace={ns}", "--verbose"],
                                    stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env)
            procs[name] = (proc, record, log)
        yield procs
    finally:
        for proc, _, _ in procs.values():
            stop(proc, 15)
