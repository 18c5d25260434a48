"""An HTTPS upstream that wants a bearer token, like a real apiserver: the
proxy reads the server, certificate-authority-data and token from its
kubeconfig; the app's kubeconfig still has plain HTTP and no credentials."""
import base64
import datetime
import ipaddress
import json
import secrets
import ssl
import urllib.error
import urllib.request

import pytest

from conftest import start_regroup, start_standin
from e2e_support import APP_GROUP, CLUSTER_GROUP, DIRECT, Kubectl, stop, write_kubeconfig


def make_ca_and_server_cert(workdir):
    x509 = pytest.importorskip("cryptography.x509", reason="the cryptography package makes the test certificates")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def cert(subject, key, issuer, issuer_key, ca):
        b = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
             .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if not ca:
            b = b.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                             x509.DNSName("localhost")]), critical=False)
        return b.sign(issuer_key, hashes.SHA256())

    ca_key, srv_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = cert("regroup-e2e-ca", ca_key, "regroup-e2e-ca", ca_key, True)
    srv = cert("127.0.0.1", srv_key, "regroup-e2e-ca", ca_key, False)
    pem = lambda c: c.public_bytes(serialization.Encoding.PEM)  # noqa: E731
    (workdir / "tls.crt").write_bytes(pem(srv))
    (workdir / "tls.key").write_bytes(srv_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    (workdir / "ca.crt").write_bytes(pem(ca))
    return pem(ca)


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
