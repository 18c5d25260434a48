"""Issue 15's security probes with real clients and the real binary: a
foreign Host (DNS rebinding) gets 403, confusing paths 400, the TLS
listener beyond loopback 401 without the caller's own credential, SIGHUP
does not kill, /readyz and /livez answer, SIGTERM exits 0. Negative cases
first; kubectl keeps working through the same regroup."""
import http.client
import json
import signal
import socket
import ssl
import subprocess
import time

import pytest

from conftest import start_regroup
from e2e_support import APP_GROUP, CONFIG_YAML, DIRECT, Kubectl, free_port, stop, wait_port, write_kubeconfig

pytestmark = pytest.mark.skipif(DIRECT, reason="REGROUP_E2E_DIRECT: no proxy to probe")

FOOS = f"/apis/{APP_GROUP}/v1alpha1/namespaces/{{ns}}/foos"


class Secured:
    def __init__(self, proc, port, log, tls_port, metrics_port, ca_file, app):
        self.proc, self.port, self.log = proc, port, log
        self.tls_port, self.metrics_port, self.ca_file, self.app = tls_port, metrics_port, ca_file, app


@pytest.fixture(scope="module")
def secured(regroup_bin, workdir, upstream):
    """regroup with a TLS listener on 0.0.0.0 (generated CA) and metrics."""
    tls_port, metrics_port = free_port(), free_port()
    ca_file = workdir / "security-ca.crt"
    config = workdir / "security.yaml"
    config.write_text(CONFIG_YAML + f"listeners:\n  metrics: 127.0.0.1:{metrics_port}\n"
                      f"  tls:\n    listen: 0.0.0.0:{tls_port}\n    generatedCaFile: {ca_file}\n")
    proc, port, log = start_regroup(regroup_bin, workdir, "security", config, upstream.kubeconfig)
    wait_port(tls_port, proc, 20, "regroup TLS listener", log)
    wait_port(metrics_port, proc, 20, "regroup metrics listener", log)
    kc = write_kubeconfig(workdir / "security-app.kubeconfig", f"http://127.0.0.1:{port}", upstream.namespace)
    app = Kubectl(kc, workdir / "cache-security", upstream.namespace, [log])
    yield Secured(proc, port, log, tls_port, metrics_port, ca_file, app)
    stop(proc)


def request(port, path, host=None, headers=None, tls_ca=None):
    """One request with exactly this path and Host: (status, parsed JSON or text)."""
    if tls_ca:
        ctx = ssl.create_default_context(cafile=str(tls_ca))
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=20)
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    conn.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
    if host is not None:
        conn.putheader("Host", host)
    for k, v in (headers or {}).items():
        conn.putheader(k, v)
    conn.endheaders()
    resp = conn.getresponse()
    body = resp.read().decode(errors="replace")
    conn.close()
    try:
        return resp.status, json.loads(body)
    except ValueError:
        return resp.status, body


def test_a_foreign_host_gets_403_and_kubectl_still_works(secured, ns):
    for host in (f"evil.example:{secured.port}", "evil.example", f"localhost.evil.example:{secured.port}"):
        status, body = request(secured.port, FOOS.format(ns=ns), host=host)
        assert status == 403, (host, body)
        assert body["kind"] == "Status" and body["reason"] == "Forbidden", body
    for host in (f"localhost:{secured.port}", f"127.0.0.1:{secured.port}"):
        status, body = request(secured.port, FOOS.format(ns=ns), host=host)
        assert status == 200, (host, body)
        assert body["kind"] == "FooList", body
    names = secured.app("get", "foos", "-o", "name").split()
    assert names, "kubectl lists the Foos through the same regroup"


@pytest.mark.parametrize("path", [
    "/api/v1/../../apis/{cluster}/v1alpha1/namespaces/{ns}/foos",
    "/api/v1/%2e%2e/%2e%2e/apis/{cluster}/v1alpha1/namespaces/{ns}/foos",
    "//apis/{cluster}/v1alpha1/namespaces/{ns}/foos",
    "/apis/{cluster}%2Fv1alpha1/namespaces/{ns}/foos",
])
def test_confusing_paths_get_400(secured, ns, path):
    from e2e_support import CLUSTER_GROUP
    status, body = request(secured.port, path.format(cluster=CLUSTER_GROUP, ns=ns), host="localhost")
    assert status == 400, body
    assert body["kind"] == "Status" and body["reason"] == "BadRequest", body


def test_the_tls_listener_beyond_loopback_wants_the_callers_own_credential(secured, ns):
    status, body = request(secured.tls_port, FOOS.format(ns=ns), host="anything.example", tls_ca=secured.ca_file)
    assert status == 401, body
    assert body["kind"] == "Status" and body["reason"] == "Unauthorized", body
    status, body = request(secured.tls_port, FOOS.format(ns=ns), host="anything.example", tls_ca=secured.ca_file,
                           headers={"Authorization": "Bearer the-callers-own-token"})
    assert status == 200, body
    assert body["kind"] == "FooList", body


def test_readyz_and_livez(secured):
    assert request(secured.metrics_port, "/readyz", host="127.0.0.1")[0] == 200
    assert request(secured.metrics_port, "/livez", host="127.0.0.1")[0] == 200
    status, text = request(secured.metrics_port, "/metrics", host="127.0.0.1")
    assert 'reason="foreign_host"' in text and "regroup_build_info" in text, text[:2000]


def test_sighup_keeps_serving_and_sigterm_exits_0(secured, ns):
    secured.proc.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    assert secured.proc.poll() is None, "SIGHUP killed regroup"
    assert request(secured.port, FOOS.format(ns=ns), host="localhost")[0] == 200
    secured.proc.send_signal(signal.SIGTERM)
    assert secured.proc.wait(30) == 0
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", secured.port), timeout=1).close()
