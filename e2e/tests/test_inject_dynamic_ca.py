"""An app that makes its webhook certificate itself, from a CA it keeps in
a Secret (cert-manager's webhook), sent through regroup by `regroup inject`
(issue #44).

`regroup inject` is run on a webhook in cert-manager's shape (MANIFEST: its
server on 10250 with `--dynamic-serving-ca-secret-name`, no Secret volume
with a serving certificate, the Service its registration names, cainjector
keeping the caBundle from that CA Secret). inject mounts the CA Secret into
the sidecar and has regroup issue its own serving certificate from it.

Here: the CA written as the Secret's files (ECDSA P-384, PKCS#8, as
cert-manager's webhook makes it), the app (e2e/standin/webhook_app.py)
serving a certificate from that CA, as cert-manager's webhook does, and
`regroup serve` with inject's configuration (adapted to run outside a pod:
`adapt` below). Captured AdmissionReviews (the cluster's names) POSTed to
regroup's listener trusting only that CA verify and come back renamed;
after the app rotates its CA, new connections verify with the new CA and
no longer with the old.

REGROUP_E2E_KUBECONFIG: a real kube-apiserver calls the validating webhook
through regroup (clientConfig `url:` on loopback, caBundle the CA) on the
app's create of a Foo."""
import base64
import copy
import datetime
import functools
import json
import os
import ssl
import time
from urllib.parse import urlsplit, urlunsplit

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from e2e_support import DIRECT, ORIG_GROUP, free_port, stop
from pki import issue, new_ca
from test_inject_webhooks import SELECTOR, inject_into, registration_manifest, run_app_and_sidecar
from test_webhooks import refusal, send_review, validating_deny_and_allow

REAL = bool(os.environ.get("REGROUP_E2E_KUBECONFIG"))
APP_PORT = 10250  # the container's webhook port in MANIFEST (cert-manager's)
CERT_DIR = "/etc/regroup/webhook-serving"  # where inject mounts the CA Secret

pytestmark = pytest.mark.skipif(DIRECT, reason="REGROUP_E2E_DIRECT: no regroup, so no webhook listener")

MANIFEST = "---\n".join(["""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: cm-webhook
  namespace: foo-system
spec:
  selector:
    matchLabels: {app.kubernetes.io/name: webhook}
  template:
    metadata:
      labels: {app.kubernetes.io/name: webhook}
    spec:
      containers:
        - name: cert-manager-webhook
          image: example.io/cm-webhook:v1
          args:
            - --secure-port=10250
            - --dynamic-serving-ca-secret-namespace=$(POD_NAMESPACE)
            - --dynamic-serving-ca-secret-name=cm-webhook-ca
          ports:
            - {name: https, containerPort: 10250, protocol: TCP}
          env:
            - name: POD_NAMESPACE
              valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
---
apiVersion: v1
kind: Service
metadata:
  name: webhook-service
  namespace: foo-system
spec:
  selector: {app.kubernetes.io/name: webhook}
  ports:
    - {name: https, port: 443, targetPort: https, protocol: TCP}
""", registration_manifest("ValidatingWebhookConfiguration", "dynamic-ca-validating", "vfoo.samplecontroller.k8s.io",
                           "/validate")])


def cert_manager_ca():
    """A CA in the shape cert-manager's webhook makes (ECDSA P-384, PKCS#8
    files, CN cert-manager-webhook-ca, a year)."""
    return new_ca("cert-manager-webhook-ca", curve=ec.SECP384R1, valid_for=datetime.timedelta(days=365))


def write_secret(directory, ca):
    """The CA Secret's files, as the kubelet writes a Secret volume: tls.crt,
    tls.key and ca.crt (tls.crt and ca.crt the same CA)."""
    directory.mkdir(exist_ok=True)
    for name, data in (("tls.crt", ca.cert_pem), ("ca.crt", ca.cert_pem), ("tls.key", ca.key_pem)):
        tmp = directory / f".{name}.tmp"
        tmp.write_bytes(data)
        tmp.replace(directory / name)


class Setup:
    """The processes, inject's output and the adapted configuration of one run."""


def adapt(injected, s):
    """inject's sidecar configuration, run outside a pod: only these edits
    (as test_inject_webhooks.adapt, with the CA's files for the Secret
    volume)."""
    cfg = copy.deepcopy(injected)
    del cfg["listeners"]["tls"]
    cfg["listeners"]["metrics"] = f"127.0.0.1:{s.metrics_port}"
    hooks = cfg["webhooks"]
    hooks["listen"] = f"127.0.0.1:{s.port}"
    issue_from = hooks["issueFrom"]
    for key in ("caCertFile", "caKeyFile"):
        issue_from[key] = issue_from[key].replace(CERT_DIR, str(s.secret_dir))
    # The names the Service is called by, and the loopback address the real
    # kube-apiserver below calls instead (this machine has no Service network).
    issue_from["dnsNames"] = issue_from["dnsNames"] + ["127.0.0.1"]
    for h in hooks["hooks"]:
        u = urlsplit(h["backend"])
        h["backend"] = urlunsplit(u._replace(netloc=f"{u.hostname}:{s.app_port}"))
    return cfg


@pytest.fixture(scope="module")
def setup(upstream, workdir, regroup_bin, cluster, ns):
    s = Setup()
    s.ns, s.dir = ns, workdir / "inject-dynamic-ca"
    s.dir.mkdir(exist_ok=True)
    s.port, s.app_port, s.metrics_port = free_port(), free_port(), free_port()
    s.secret_dir = s.dir / "cm-webhook-ca"
    s.ca = cert_manager_ca()
    write_secret(s.secret_dir, s.ca)
    # The app's own certificate from its CA, as cert-manager's webhook makes it.
    s.app_cert, s.app_key = issue(s.ca, "webhook-service.foo-system.svc", dns=["webhook-service.foo-system.svc"],
                                  ips=["127.0.0.1"]).write(s.dir, "app")

    inject_into(s, regroup_bin, MANIFEST.replace("@SELECTOR@", SELECTOR).replace("@NS@", ns), "cm-webhook")
    s.config = adapt(s.injected, s)
    procs = []
    try:
        # Only the validating webhook is registered: no mutation names an owner.
        run_app_and_sidecar(s, procs, regroup_bin, upstream, cluster, (s.app_cert, s.app_key),
                            "00000000-0000-0000-0000-000000000000", "dynamic-ca")
        yield s
    finally:
        for p in reversed(procs):
            stop(p)


def trusting(ca):
    ctx = ssl.create_default_context(cadata=ca.cert_pem.decode())
    ctx.check_hostname = False  # the names are checked below, by the certificate's SANs
    return ctx


def post(setup, ca, kind, case):
    return send_review(f"https://127.0.0.1:{setup.port}/validate", trusting(ca), case)


def served_names(setup, ca):
    """The DNS names of the certificate regroup's listener presents, verified
    against `ca`."""
    import socket
    with socket.create_connection(("127.0.0.1", setup.port), timeout=10) as raw:
        with trusting(ca).wrap_socket(raw) as tls:
            der = tls.getpeercert(binary_form=True)
    cert = x509.load_der_x509_certificate(der)
    return cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)


def test_inject_mounts_the_ca_secret_and_issues_from_it(setup):
    by = {(d["kind"], d["metadata"]["name"]): d for d in setup.docs}
    pod = by[("Deployment", "cm-webhook")]["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "regroup-webhook-ca")
    assert volume["secret"] == {"secretName": "cm-webhook-ca", "optional": True}
    assert by[("Service", "webhook-service")]["spec"]["ports"][0]["targetPort"] == 9444
    assert setup.injected["webhooks"]["issueFrom"]["dnsNames"][0] == "webhook-service.foo-system.svc"
    assert "issued from the app's CA (Secret cm-webhook-ca)" in setup.inject_stderr


def test_the_listener_presents_a_certificate_the_apps_ca_verifies(setup):
    names = served_names(setup, setup.ca)
    assert "webhook-service.foo-system.svc" in names


def test_reviews_in_the_clusters_names_through_the_issued_certificate(setup):
    validating_deny_and_allow(functools.partial(post, setup, setup.ca))


def test_a_rotated_ca_is_followed(setup):
    """The app rotates its CA (cert-manager does, at two thirds of its life):
    regroup's next leaf chains to the new CA, and no longer to the old."""
    old, new = setup.ca, cert_manager_ca()
    write_secret(setup.secret_dir, new)
    deadline = time.monotonic() + 10
    while True:
        try:
            served_names(setup, new)
            break
        except ssl.SSLError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)
    with pytest.raises(ssl.SSLError):
        served_names(setup, old)
    validating_deny_and_allow(functools.partial(post, setup, new))
    setup.ca = new


@pytest.mark.skipif(not REAL, reason="the stand-in never calls webhooks; kube-apiserver's calls are replayed above")
def test_a_real_apiserver_calls_it_trusting_the_apps_ca(setup):
    obj = copy.deepcopy(next(d for d in setup.docs if d["kind"] == "ValidatingWebhookConfiguration"))
    cc = obj["webhooks"][0]["clientConfig"]
    path = cc.pop("service")["path"]
    cc.update(url=f"https://127.0.0.1:{setup.port}{path}", caBundle=base64.b64encode(setup.ca.cert_pem).decode())
    name = obj["metadata"]["name"]
    setup.cluster.run("delete", "validatingwebhookconfiguration", name, "--ignore-not-found", check=False)
    try:
        setup.cluster("create", "-f", "-", input=json.dumps(obj))
        foo = {"apiVersion": f"{ORIG_GROUP}/v1alpha1", "kind": "Foo",
               "metadata": {"name": "rejected-by-dynamic-ca-webhook", "labels": {SELECTOR: setup.ns}},
               "spec": {"deploymentName": "x", "replicas": 1}}
        stderr, _ = refusal(setup, foo, "validate")
        assert f"the app refuses {ORIG_GROUP}/v1alpha1, Kind=Foo named rejected-by-dynamic-ca-webhook" in stderr
    finally:
        setup.cluster.run("delete", "validatingwebhookconfiguration", name, "--ignore-not-found", "--wait=false",
                          check=False)
