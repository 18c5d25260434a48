"""`kubectl exec` through regroup over WebSocket (`v5.channel.k8s.io`), the
transport kubectl uses first since 1.30: the upgrade is spliced untouched.
The stand-in serves exec over WebSocket only (a fallback to SPDY would fail
there), and its log shows the 101."""
import os

import pytest

pytestmark = pytest.mark.skipif(bool(os.environ.get("REGROUP_E2E_KUBECONFIG")),
                                reason="execs into the stand-in's Pod (a real cluster would need a running one)")


def test_kubectl_exec_over_websocket_through_the_proxy(app, cluster, ns):
    out = app("exec", "exec-target", "--", "echo", "hello", "through", "regroup")
    assert out == "hello through regroup\n"
    with open(cluster.logs[0]) as log:
        upgrades = [line for line in log if f"/api/v1/namespaces/{ns}/pods/exec-target/exec?" in line]
    assert upgrades and all(line.startswith("GET ") and line.rstrip().endswith(" 101") for line in upgrades), \
        upgrades
    # A failing command: its exit code, from the Status on the error channel.
    p = app.run("exec", "exec-target", "--", "false", check=False)
    assert p.returncode == 127, (p.returncode, p.stderr)
