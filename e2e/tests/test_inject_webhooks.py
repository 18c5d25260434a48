"""What `regroup inject` wires for an operator's webhooks works, with real
processes (issue #44).

`regroup inject` is run on an operator in kubebuilder's shape (MANIFEST
below: a Deployment serving its webhooks on 9443 with the certificate
cert-manager writes into the Secret `webhook-server-cert`, the Service its
registrations name, a validating, a mutating and a conversion webhook),
whose webhook paths are the ones e2e/standin/webhook_app.py serves. From
its output this takes the per-workload ConfigMap's `config.yaml` (the one
with the `webhooks:` section inject writes), adapts it to run outside a
pod (`adapt`: only what a pod provides and this machine does not; the
hooks' paths and everything else stay as inject wrote them), and runs
webhook_app.py (the app, which knows only samplecontroller.k8s.io) and
`regroup serve` with that configuration, both serving one certificate, as
the app container and the sidecar serve the one Secret volume in the pod.

Then, as kube-apiserver would: the AdmissionReviews and ConversionReviews
kube-apiserver 1.29 sent (testdata/kube-1.29/webhooks, the cluster's names)
POSTed to regroup's webhook listener at each registration's path, trusting
the CA that signed the app's certificate (what cainjector puts into the
registrations' caBundle): the app sees only its own names (it answers 400
to any body naming team1.example.com) and the answers come back in the
cluster's.

REGROUP_E2E_KUBECONFIG: the registrations of inject's output (already in
the cluster's names) are installed with their clientConfig pointed at the
listener by `url:`, and a real kube-apiserver calls the webhooks, through
regroup, on create of a Foo and on reading a Widget in its other version;
skipped, saying so, when that apiserver can't reach this machine's
loopback or calls no webhook (the stand-in posing as a cluster)."""
import base64
import copy
import functools
import json
import os
import ssl
import subprocess
import sys
from urllib.parse import urlsplit, urlunsplit

import pytest
import yaml

from conftest import start_regroup
from e2e_support import CLUSTER_GROUP, DIRECT, E2E, ORIG_GROUP, Kubectl, free_port, stop, wait_port, write_kubeconfig
from test_webhooks import (client_config, conversion_both_ways_and_a_failed_one, converted, metrics, mutated_and_kept,
                           mutating_patch, refusal, reviews_received, send_review, start, validating_deny_and_allow)

REAL = bool(os.environ.get("REGROUP_E2E_KUBECONFIG"))
WORKLOAD = "controller-manager"
APP_PORT = 9443  # the container's webhook port in MANIFEST (kubebuilder's)
WEBHOOK_PORT = 9444  # inject's default --webhook-port
CERT_DIR = "/etc/regroup/webhook-serving"  # where inject mounts the app's certificate into the sidecar
# The paths webhook_app.py serves, as the registrations name them.
PATHS = {"validatingwebhookconfiguration": "/validate", "mutatingwebhookconfiguration": "/mutate",
         "customresourcedefinition": "/convert"}
# The webhooks' objectSelector key: the registrations only see this run's
# objects on a shared cluster (test_webhooks.py uses another key).
SELECTOR = "e2e.regroup.dev/inject-webhook"

pytestmark = pytest.mark.skipif(DIRECT, reason="REGROUP_E2E_DIRECT: no regroup, so no webhook listener")


def registration_manifest(kind, name, webhook, path):
    """MANIFEST's validating or mutating registration: `webhook` at `path` of
    the operator's Service, for the app's Foos in the test namespace."""
    return f"""\
apiVersion: admissionregistration.k8s.io/v1
kind: {kind}
metadata:
  name: @NS@-{name}
  annotations:
    cert-manager.io/inject-ca-from: foo-system/serving-cert
webhooks:
  - name: {webhook}
    admissionReviewVersions: [v1]
    sideEffects: None
    failurePolicy: Fail
    timeoutSeconds: 10
    objectSelector: {{matchLabels: {{@SELECTOR@: @NS@}}}}
    clientConfig:
      service: {{name: webhook-service, namespace: foo-system, path: {path}}}
    rules:
      - apiGroups: [samplecontroller.k8s.io]
        apiVersions: [v1alpha1]
        operations: [CREATE, UPDATE]
        resources: [foos]
"""


# An operator in kubebuilder's shape (as proxy/tests/inject/webhook-operator.yaml),
# with webhook_app.py's paths. Its registrations carry an objectSelector
# (@NS@: the test namespace) and names of their own per run: they are the
# ones installed on a real cluster, which other runs may share.
MANIFEST = "---\n".join(["""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: controller-manager
  namespace: foo-system
spec:
  selector:
    matchLabels: {control-plane: controller-manager}
  template:
    metadata:
      labels: {control-plane: controller-manager}
    spec:
      containers:
        - name: manager
          image: example.io/foo-operator:v1
          args: [--leader-elect]
          ports:
            - {name: webhook-server, containerPort: 9443, protocol: TCP}
          volumeMounts:
            - {name: cert, mountPath: /tmp/k8s-webhook-server/serving-certs, readOnly: true}
      volumes:
        - name: cert
          secret: {secretName: webhook-server-cert, defaultMode: 0420}
---
apiVersion: v1
kind: Service
metadata:
  name: webhook-service
  namespace: foo-system
spec:
  selector: {control-plane: controller-manager}
  ports:
    - {port: 443, targetPort: webhook-server, protocol: TCP}
""", registration_manifest("ValidatingWebhookConfiguration", "validating-webhook-configuration",
                           "vfoo.samplecontroller.k8s.io", PATHS["validatingwebhookconfiguration"]),
    registration_manifest("MutatingWebhookConfiguration", "mutating-webhook-configuration",
                          "mfoo.samplecontroller.k8s.io", PATHS["mutatingwebhookconfiguration"]), """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.samplecontroller.k8s.io
  annotations:
    cert-manager.io/inject-ca-from: foo-system/serving-cert
spec:
  group: samplecontroller.k8s.io
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig:
        service: {name: webhook-service, namespace: foo-system, path: /convert}
  versions:
    - name: v1alpha1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
    - name: v1beta1
      served: true
      storage: false
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
"""])


class Setup:
    """The processes, inject's output and the adapted configuration of one run."""


def adapt(injected, s):
    """inject's sidecar configuration, run outside a pod: only these edits."""
    cfg = copy.deepcopy(injected)
    # listeners: the app here reaches the cluster over the plain-HTTP
    # listener, as the suite's other tests (`start_regroup` passes --listen,
    # which overrides `listeners.http`). The TLS listener is the pod's way
    # in (KUBERNETES_SERVICE_HOST=127.0.0.1, port 6443, the certificate of
    # the Secret inject generates, mounted at /etc/regroup/serving): that
    # port is the real kube-apiserver's on this machine and nothing is
    # mounted there. Metrics on 0.0.0.0:9090 are the probes' in the pod; a
    # free loopback port here.
    del cfg["listeners"]["tls"]
    cfg["listeners"]["metrics"] = f"127.0.0.1:{s.metrics_port}"
    # upstream stays `inCluster: true`: `start_regroup` passes --kubeconfig
    # (the stand-in's or the cluster's), which comes first (docs/proxy.md,
    # "Upstream"); this machine has no service-account files.
    hooks = cfg["webhooks"]
    # The listener on 0.0.0.0:9444 is what the Service targets in the pod:
    # a free loopback port here, the only address kube-apiserver calls.
    hooks["listen"] = f"127.0.0.1:{s.port}"
    # certFile/keyFile are the app's Secret volume mounted into the sidecar:
    # the same certificate the app serves, here one made for 127.0.0.1.
    hooks["certFile"], hooks["keyFile"] = str(s.cert), str(s.key)
    # The app's port: 9443 in the pod, a free one here (same host, same path).
    for h in hooks["hooks"]:
        u = urlsplit(h["backend"])
        h["backend"] = urlunsplit(u._replace(netloc=f"{u.hostname}:{s.app_port}"))
    return cfg


def differences(a, b, at=""):
    """The paths where two parsed YAML documents differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b), key=str)
                for d in (differences(a[k], b[k], f"{at}.{k}") if k in a and k in b else [f"{at}.{k}"])]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{at}[{i}]")]
    return [] if a == b else [at or "."]


def kind_of(doc):
    return doc["kind"].lower()


@pytest.fixture(scope="module")
def setup(upstream, workdir, regroup_bin, cluster, ns):
    from pki import issue, new_ca
    s = Setup()
    s.ns, s.dir = ns, workdir / "inject-webhooks"
    s.dir.mkdir(exist_ok=True)
    s.port, s.app_port, s.metrics_port = free_port(), free_port(), free_port()
    # The Secret `webhook-server-cert` (cert-manager's) and its CA (what
    # cainjector puts into the registrations' caBundle), for 127.0.0.1.
    ca = new_ca("e2e-inject-webhook-ca")
    ca.write(s.dir, "ca")
    s.cert, s.key = issue(ca, "webhook-service.foo-system.svc", dns=["webhook-service.foo-system.svc", "localhost"],
                          ips=["127.0.0.1"]).write(s.dir, "webhook-server-cert")
    s.bundle = base64.b64encode(ca.cert_pem).decode()
    s.ca_file = s.dir / "ca.crt"

    inject_into(s, regroup_bin, MANIFEST.replace("@SELECTOR@", SELECTOR).replace("@NS@", ns), WORKLOAD)
    s.config = adapt(s.injected, s)
    # The mutation makes the object a dependent of Foo alpha: with alpha's
    # real uid, or the cluster's garbage collector deletes it at once.
    s.alpha_uid = cluster.json("get", f"foos.{CLUSTER_GROUP}", "alpha")["metadata"]["uid"]
    procs = []
    try:
        run_app_and_sidecar(s, procs, regroup_bin, upstream, cluster, (s.cert, s.key), s.alpha_uid, "inject")
        yield s
    finally:
        for p in reversed(procs):
            stop(p)


def inject_into(s, regroup_bin, manifest_text, workload):
    """`regroup inject` of `manifest_text` (rules: the suite's group to the
    cluster's), into `s`: its stderr, documents and the sidecar
    configuration it wrote for `workload`."""
    rules = s.dir / "rules.yaml"
    rules.write_text(f"rules:\n  - from: {ORIG_GROUP}\n    to: {CLUSTER_GROUP}\n")
    manifest = s.dir / "manifest.yaml"
    manifest.write_text(manifest_text)
    p = subprocess.run([regroup_bin, "inject", "-c", str(rules), "-f", str(manifest)], capture_output=True,
                       text=True, timeout=60)
    if p.returncode != 0:
        pytest.fail(f"regroup inject failed ({p.returncode}):\n{p.stderr}")
    s.inject_stderr = p.stderr
    s.docs = [d for d in yaml.safe_load_all(p.stdout) if d]
    s.configmap = next(d for d in s.docs if d["kind"] == "ConfigMap"
                       and d["metadata"]["name"] == f"regroup-config-{workload}")
    s.injected = yaml.safe_load(s.configmap["data"]["config.yaml"])


def run_app_and_sidecar(s, procs, regroup_bin, upstream, cluster, app_cert, owner_uid, what):
    """webhook_app.py (the app, serving `app_cert`) and `regroup serve` with
    `s.config` (inject's, adapted), started into `procs`; the app's kubectl
    through the sidecar and the cluster's into `s`."""
    config = s.dir / "regroup.yaml"
    config.write_text(yaml.safe_dump(s.config, sort_keys=False))
    s.app_log = s.dir / "webhook-app.log"
    procs.append(start([sys.executable, str(E2E / "standin" / "webhook_app.py"), "--port", str(s.app_port),
                        "--tls-cert", str(app_cert[0]), "--tls-key", str(app_cert[1]), "--owner-uid", owner_uid],
                       s.app_log, f"webhook app ({what})"))
    proc, s.sidecar_port, s.regroup_log = start_regroup(regroup_bin, s.dir, f"regroup-{what}", config,
                                                        upstream.kubeconfig)
    procs.append(proc)
    wait_port(s.port, proc, 20, f"regroup serve ({what}: the webhook listener)", s.regroup_log)
    s.app = Kubectl(write_kubeconfig(s.dir / "app.kubeconfig", f"http://127.0.0.1:{s.sidecar_port}", s.ns),
                    s.dir / "cache-app", s.ns, [s.regroup_log, s.app_log])
    s.cluster = Kubectl(cluster.kubeconfig, s.dir / "cache-cluster", s.ns, cluster.logs + [s.regroup_log])


def test_inject_sends_the_webhooks_through_the_sidecar(setup):
    """What the rest relies on: inject found the Service, the workload, the
    app's port and its certificate, and wrote the workload its own config."""
    by = {(d["kind"], d["metadata"]["name"]): d for d in setup.docs}
    svc = by[("Service", "webhook-service")]
    assert svc["spec"]["ports"][0]["targetPort"] == WEBHOOK_PORT
    pod = by[("Deployment", WORKLOAD)]["spec"]["template"]["spec"]
    sidecar = next(c for c in pod.get("initContainers", []) + pod["containers"] if c["name"] == "regroup")
    assert {"name": "cert", "mountPath": CERT_DIR, "readOnly": True} in sidecar["volumeMounts"]
    assert {"name": "regroup-hooks", "containerPort": WEBHOOK_PORT} in sidecar["ports"]
    volume = next(v for v in pod["volumes"] if v["name"] == "regroup-config")
    assert volume["configMap"]["name"] == f"regroup-config-{WORKLOAD}"
    assert setup.configmap["metadata"]["namespace"] == "foo-system"
    hooks = setup.injected["webhooks"]
    assert {k: v for k, v in hooks.items() if k != "hooks"} == {
        "listen": f"0.0.0.0:{WEBHOOK_PORT}", "certFile": f"{CERT_DIR}/tls.crt", "keyFile": f"{CERT_DIR}/tls.key",
        "dangerousInsecureBackend": True}
    assert sorted((h["path"], h["backend"]) for h in hooks["hooks"]) == sorted(
        (p, f"https://127.0.0.1:{APP_PORT}{p}") for p in PATHS.values())
    assert setup.injected["rules"] == [{"from": ORIG_GROUP, "to": CLUSTER_GROUP}]
    # The registrations still name the app's Service (cainjector keeps their
    # caBundle), in the cluster's names.
    for kind, path in PATHS.items():
        reg = registration(setup, kind)
        cc = client_config(kind, reg)
        assert cc == {"service": {"name": "webhook-service", "namespace": "foo-system", "path": path}}, kind
    assert f"Deployment foo-system/{WORKLOAD}" in setup.inject_stderr


def test_the_config_run_is_injects_but_for_what_a_pod_provides(setup):
    changed = differences(setup.injected, setup.config)
    hooks = [f".webhooks.hooks[{i}].backend" for i in range(len(PATHS))]
    assert sorted(changed) == sorted([".listeners.tls", ".listeners.metrics", ".webhooks.listen",
                                      ".webhooks.certFile", ".webhooks.keyFile", *hooks])
    for before, after in zip(setup.injected["webhooks"]["hooks"], setup.config["webhooks"]["hooks"]):
        assert after["backend"] == before["backend"].replace(f":{APP_PORT}/", f":{setup.app_port}/")


def registration(setup, kind):
    """inject's output of a registration (the cluster's names)."""
    return next(d for d in setup.docs if kind_of(d) == kind)


def post(setup, kind, case):
    """POSTs a captured review (the cluster's names) to regroup's listener at
    the path of inject's registration, over TLS trusting the caBundle's CA,
    as kube-apiserver does."""
    path = client_config(kind, registration(setup, kind))["service"]["path"]
    return send_review(f"https://127.0.0.1:{setup.port}{path}", ssl.create_default_context(cafile=str(setup.ca_file)),
                       case)


def app_calls(setup, path):
    """The app's own log: one line per call it answered 200, by path."""
    return sum(f'"POST {path}?' in line and '" 200 ' in line for line in setup.app_log.read_text().splitlines())


# The app answers 400 to any body naming team1.example.com or a group not
# its own, so a 200 below is the app having seen its own names only; the
# groups in its answers (it names what it saw) are the cluster's again.

def test_validating_deny_and_allow_in_the_clusters_names(setup):
    before = app_calls(setup, "/validate")
    validating_deny_and_allow(functools.partial(post, setup))
    assert app_calls(setup, "/validate") == before + 3


def test_mutating_patch_in_the_clusters_names(setup):
    mutating_patch(functools.partial(post, setup), setup.alpha_uid)
    assert app_calls(setup, "/mutate") >= 1


def test_conversion_in_the_clusters_names(setup):
    conversion_both_ways_and_a_failed_one(functools.partial(post, setup))
    assert app_calls(setup, "/convert") >= 3


def test_metrics_name_the_hooks_inject_named(setup):
    post(setup, "validatingwebhookconfiguration", "083-webhook-validating-v1-create")
    post(setup, "mutatingwebhookconfiguration", "075-webhook-mutating-v1-create")
    post(setup, "customresourcedefinition", "112-webhook-convert-create-to-v1beta1")
    text = metrics(setup)
    for kind, path in PATHS.items():
        review = "ConversionReview" if kind == "customresourcedefinition" else "AdmissionReview"
        name = next(h["name"] for h in setup.injected["webhooks"]["hooks"] if h["path"] == path)
        assert f'regroup_webhook_requests_total{{webhook="{name}",kind="{review}"}}' in text, name
    assert "rejected-v1" not in setup.regroup_log.read_text(), "no body in the log"


def test_the_sidecar_of_the_same_config_serves_the_app(setup):
    """The config's other half, as adapted: the app's kubectl through it."""
    names = setup.app("get", "foos", "-o", "name").split()
    assert f"foo.{ORIG_GROUP}/alpha" in names


# --- a real kube-apiserver calls them ---------------------------------------------------------

def installed(setup, kind):
    """inject's registration with its clientConfig pointed at the listener.

    This machine has no Service network: kube-apiserver runs as a process
    with no kube-proxy and no pods, so `webhook-service.foo-system.svc`
    (which inject pointed at the sidecar's 9444) leads nowhere. kube-apiserver
    reaches the listener by `url:` on loopback instead, at the same path,
    trusting the same CA cainjector would have put into the caBundle (the
    CA of the certificate the listener serves, the app's). Nothing else of
    the registration changes."""
    obj = copy.deepcopy(registration(setup, kind))
    cc = client_config(kind, obj)
    path = cc.pop("service")["path"]
    cc.update(url=f"https://127.0.0.1:{setup.port}{path}", caBundle=setup.bundle)
    return obj


@pytest.mark.skipif(not REAL, reason="the stand-in never calls webhooks; kube-apiserver's calls are replayed above")
def test_a_real_apiserver_calls_the_injected_webhooks_through_regroup(setup):
    objs = {kind: installed(setup, kind) for kind in PATHS}
    for kind, obj in objs.items():  # what an interrupted run may have left behind
        setup.cluster.run("delete", kind, obj["metadata"]["name"], "--ignore-not-found", check=False)
    try:
        for obj in objs.values():
            setup.cluster("create", "-f", "-", input=json.dumps(obj))
        real_apiserver_calls(setup)
    finally:
        for kind, obj in objs.items():
            setup.cluster.run("delete", kind, obj["metadata"]["name"], "--ignore-not-found", "--wait=false",
                              check=False)


def real_apiserver_calls(setup):
    labels = {SELECTOR: setup.ns}
    foo = {"apiVersion": f"{ORIG_GROUP}/v1alpha1", "kind": "Foo",
           "metadata": {"name": "rejected-by-injected-webhook", "labels": labels},
           "spec": {"deploymentName": "x", "replicas": 1}}
    stderr, before = refusal(setup, foo, "validate")
    assert f"the app refuses {ORIG_GROUP}/v1alpha1, Kind=Foo named rejected-by-injected-webhook" in stderr
    # Straight at the cluster, in its names: kube-apiserver's own view of the
    # refusal, renamed back by regroup's listener.
    on_cluster = dict(foo, apiVersion=f"{CLUSTER_GROUP}/v1alpha1")
    stderr = setup.cluster.fails("create", "--dry-run=server", "-f", "-", input=json.dumps(on_cluster))
    assert (f'admission webhook "vfoo.{ORIG_GROUP}" denied the request: '
            f"the app refuses {CLUSTER_GROUP}/v1alpha1, Kind=Foo named rejected-by-injected-webhook") in stderr
    assert ORIG_GROUP + "/" not in stderr
    mutated_and_kept(setup, foo, "mutated-by-injected-webhook")
    converted(setup, "Widget", "widgets")
    assert reviews_received(setup, "convert", "ConversionReview") >= 1
    assert reviews_received(setup, "mutate") >= 1 and reviews_received(setup, "validate") > before
