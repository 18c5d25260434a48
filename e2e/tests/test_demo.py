"""examples/demo.sh, the newcomer's first run, tells its story: two copies of
one app side by side, each under its own groups. Run with the suite's binary
and asserted block by block, whole output (nothing in it is volatile)."""
import os
import re
import subprocess

import pytest

from e2e_support import DIRECT, REPO

REAL = bool(os.environ.get("REGROUP_E2E_KUBECONFIG"))

pytestmark = pytest.mark.skipif(REAL or DIRECT, reason="the demo brings its own stand-in cluster with two Foo "
                                                       "groups; it does not use the suite's upstream")

COLUMNS = "-o custom-columns=APIVERSION:.apiVersion,NAME:.metadata.name,REPLICAS:.spec.replicas"


def blocks(out):
    """{'[who] $ kubectl args' (n-th occurrence suffixed): output lines}."""
    found, key = {}, None
    for line in out.splitlines():
        if re.match(r"\[(team-a|team-b|cluster)\] \$ kubectl ", line):
            key = line
            while key in found:
                key += " (again)"
            found[key] = []
        elif line.startswith("==>"):
            key = None
        elif key is not None and line.strip():
            found[key].append(line.rstrip())
    return found


def test_two_copies_side_by_side(regroup_bin):
    env = dict(os.environ, REGROUP_BIN=regroup_bin)
    run = subprocess.run(["bash", str(REPO / "examples" / "demo.sh")], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True,
                         timeout=180)
    assert run.returncode == 0, run.stdout[-3000:]
    # Not a terminal: plain text, and it says what it installs and where.
    assert "\x1b[" not in run.stdout
    assert "==> 1/5 installing the test tools into e2e/.bin and e2e/.venv" in run.stdout
    got = blocks(run.stdout)
    gets = "get foos.v1alpha1.samplecontroller.k8s.io"
    assert got == {
        "[team-a] $ kubectl api-resources --api-group=samplecontroller.k8s.io": [
            "NAME   SHORTNAMES   APIVERSION                        NAMESPACED   KIND",
            "foos   fo           samplecontroller.k8s.io/v1beta1   true         Foo"],
        "[team-a] $ kubectl create -f -": ["foo.samplecontroller.k8s.io/example created"],
        "[team-b] $ kubectl create -f -": ["foo.samplecontroller.k8s.io/example created"],
        f"[team-a] $ kubectl {gets} {COLUMNS}": [
            "APIVERSION                         NAME      REPLICAS",
            "samplecontroller.k8s.io/v1alpha1   example   1"],
        f"[team-b] $ kubectl {gets} {COLUMNS}": [
            "APIVERSION                         NAME      REPLICAS",
            "samplecontroller.k8s.io/v1alpha1   example   3"],
        "[team-b] $ kubectl delete foo.v1alpha1.samplecontroller.k8s.io example": [
            'foo.samplecontroller.k8s.io "example" deleted'],
        f"[team-a] $ kubectl {gets}": [
            "NAME      DEPLOYMENT   REPLICAS   AVAILABLE",
            "example   example      1"],
        f"[team-b] $ kubectl {gets}": ["No resources found in demo namespace."],
        f"[cluster] $ kubectl get foos.v1alpha1.samplecontroller.team1.example.com {COLUMNS}": [
            "APIVERSION                                    NAME      REPLICAS",
            "samplecontroller.team1.example.com/v1alpha1   example   1"],
        "[cluster] $ kubectl get foos.v1alpha1.samplecontroller.team2.example.com": [
            "No resources found in demo namespace."],
    }, run.stdout
