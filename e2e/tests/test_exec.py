"""`kubectl exec` through regroup over WebSocket (`v5.channel.k8s.io`, what
kubectl 1.30+ tries first): the upgrade is spliced untouched, stdout, stdin
and the exit status cross it. The stand-in answers exec over WebSocket only
(a SPDY fallback is refused), so these pass only if the WebSocket upgrade
went through regroup."""
import json
import os

import pytest

from e2e_support import DIRECT

pytestmark = pytest.mark.skipif(bool(os.environ.get("REGROUP_E2E_KUBECONFIG")) or DIRECT,
                                reason="needs the stand-in's exec (a real cluster would need a running pod, "
                                       "so a node and an image, which the suite does not assume)")

POD = "exec-target"


@pytest.fixture(scope="module")
def pod(cluster):
    cluster("create", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": POD},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]}}))
    yield POD
    cluster("delete", "pod", POD, "--ignore-not-found")


def exec_lines(cluster):
    """The stand-in's log lines for the exec subresource."""
    return [line for line in cluster.logs[0].read_text().splitlines() if f"/pods/{POD}/exec" in line]


def test_exec_stdout_over_websocket(app, cluster, pod):
    assert app("exec", pod, "--", "echo", "hello", "through", "regroup") == "hello through regroup\n"
    lines = exec_lines(cluster)
    assert lines and lines[-1].startswith("GET ") and lines[-1].endswith(" 101"), lines[-3:]


def test_exec_stdin_over_websocket(app, pod):
    assert app("exec", "-i", pod, "--", "cat", input="line one\nline two\n") == "line one\nline two\n"


def test_exec_exit_code_over_websocket(app, pod):
    p = app.run("exec", pod, "--", "false", check=False)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert "command terminated with exit code 1" in p.stderr
    p = app.run("exec", pod, "--", "no-such-command", check=False)
    assert p.returncode == 127, (p.returncode, p.stderr)
