"""An HTTPS upstream that wants a bearer token, like a real apiserver: the
proxy reads the server, certificate-authority-data and token from its
kubeconfig; the app's kubeconfig still has plain HTTP and no credentials."""
import base64
import json
import secrets
import ssl
import urllib.error
import urllib.request

import pytest

from conftest import start_regroup, start_standin
from e2e_support import APP_GROUP, CLUSTER_GROUP, DIRECT, Kubectl, stop, write_kubeconfig


def make_ca_and_server_cert(workdir):
    """ca.crt, tls.crt/tls.key for 127.0.0.1 and localhost; returns the CA PEM."""
    from pki import issue, new_ca
    ca = new_ca("regroup-e2e-ca")
    ca.write(workdir, "ca")
    issue(ca, "127.0.0.1", dns=["localhost"], ips=["127.0.0.1"]).write(workdir, "tls")
    return ca.cert_pem


@pytest.fixture(scope="module")
def tls_upstream(workdir):
    ca_pem = make_ca_and_server_cert(workdir)
    token = secrets.token_hex(16)
    env = {"REGROUP_STANDIN_HIDE_ORIG": "1"} if DIRECT else {}
    proc, port, log = start_standin(workdir, "upstream-tls", "--tls-cert", workdir / "tls.crt", "--tls-key",
                                    workdir / "tls.key", "--token", token, env=env)
    kc = write_kubeconfig(workdir / "upstream-tls.kubeconfig", f"https://127.0.0.1:{port}", "e2e",
                          user={"token": token},
                          cluster_extra={"certificate-authority-data": base64.b64encode(ca_pem).decode()})
    yield kc, port, log
    stop(proc)


@pytest.fixture(scope="module")
def tls_app(tls_upstream, workdir, config_file, request):
    kc, _, log = tls_upstream
    if DIRECT:
        yield Kubectl(kc, workdir / "cache-tls", "e2e", [log])
        return
    proc, port, plog = start_regroup(request.getfixturevalue("regroup_bin"), workdir, "proxy-tls", config_file, kc)
    app_kc = write_kubeconfig(workdir / "app-tls.kubeconfig", f"http://127.0.0.1:{port}", "e2e")
    yield Kubectl(app_kc, workdir / "cache-tls", "e2e", [plog, log])
    stop(proc)


def test_standin_refuses_requests_without_the_token(tls_upstream, workdir):
    """So that the next test shows the proxy sent the kubeconfig's token."""
    _, port, _ = tls_upstream
    ctx = ssl.create_default_context(cafile=str(workdir / "ca.crt"))
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"https://127.0.0.1:{port}/apis/{CLUSTER_GROUP}/v1alpha1/namespaces/e2e/foos",
                               context=ctx, timeout=10)
    assert e.value.code == 401


def test_proxy_reads_foos_from_a_tls_upstream_with_token(tls_app):
    foo = tls_app.json("get", f"foo.v1alpha1.{APP_GROUP}", "alpha")
    assert foo["apiVersion"] == f"{APP_GROUP}/v1alpha1" and foo["metadata"]["name"] == "alpha"
    out = tls_app("get", "foos", "-o", "name")
    assert f"foo.{APP_GROUP}/alpha" in out.split()
    missing = tls_app.fails("get", "foo", "missing")
    assert f'foos.{APP_GROUP} "missing" not found' in missing
    assert json.loads(tls_app("get", "--raw", "/version"))["gitVersion"].startswith("v1.24.")
