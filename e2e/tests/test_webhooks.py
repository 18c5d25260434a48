"""The app's admission and conversion webhooks through regroup, with real
processes: the app's webhook server (e2e/standin/webhook_app.py, HTTPS, it
knows only samplecontroller.k8s.io) behind `regroup serve` with a
`webhooks` listener, the same regroup as the app's sidecar.

The app registers its webhooks itself, through the sidecar, with its own
clientConfig and caBundle (as Kopf with `settings.admission.managed` or a
controller-runtime operator does): the cluster stores regroup's address and
CA, the app reads back exactly what it wrote. Then a caller does what
kube-apiserver does: it reads the registration from the cluster, trusts its
caBundle, and POSTs the AdmissionReviews and ConversionReviews
kube-apiserver 1.29 sent in the capture (testdata/kube-1.29/webhooks,
renamed world) to its URL: validating deny and allow, mutating patch,
conversion between two versions and a failed conversion, each answered in
the cluster's names.

Then the app rotates its CA as controllers do, through the sidecar with the
real kubectl: a JSON Patch of one webhook's caBundle, a strategic-merge
patch of another's caBundle alone, a merge patch of the CRD's conversion
caBundle, and a server-side apply (YAML) of a whole configuration: each
time the cluster keeps regroup's address and CA, and the app reads back its
new bundle.

REGROUP_E2E_KUBECONFIG: also a real kube-apiserver calling the webhooks on
create of a Foo and on reading a Bar in the other version, through the
`url:` clientConfig on 127.0.0.1; skipped, saying so, when that
apiserver can't reach this machine's loopback (it runs elsewhere)."""
import base64
import functools
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from conftest import LOGS
from e2e_support import (CLUSTER_GROUP, CONFIG_YAML, DIRECT, E2E, ORIG_GROUP, REPO, Kubectl, free_port, poll, stop,
                         tail, wait_port, write_kubeconfig)

REAL = bool(os.environ.get("REGROUP_E2E_KUBECONFIG"))
CAPTURED = REPO / "testdata" / "kube-1.29" / "webhooks" / "renamed"
HOOKS = ("validate", "mutate", "convert")

pytestmark = pytest.mark.skipif(DIRECT, reason="REGROUP_E2E_DIRECT: no regroup, so no webhook listener")


class Setup:
    """The processes, names and registrations of one run."""


def start(argv, log, what):
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=open(log, "w"), text=True)
    LOGS.append((what, log))
    first = proc.stdout.readline()
    if not first.startswith("LISTENING "):
        stop(proc)
        pytest.fail(f"{what} did not start (first line {first!r}):\n{tail(log)}")
    return proc


def registrations(s):
    """What the app writes, in its own group, pointing at its own server."""
    cc = {h: {"url": f"https://127.0.0.1:{s.app_port}/{h}", "caBundle": s.app_bundle} for h in HOOKS}
    hook = {"admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
            "timeoutSeconds": 5, "matchPolicy": "Equivalent",
            "objectSelector": {"matchLabels": {"e2e.regroup.dev/webhook": s.ns}},
            "rules": [{"apiGroups": [ORIG_GROUP], "apiVersions": ["v1alpha1"], "operations": ["CREATE", "UPDATE"],
                       "resources": ["foos"], "scope": "Namespaced"}]}
    validating = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                  "metadata": {"name": f"e2e-validate-{s.ns}"},
                  "webhooks": [dict(hook, name="validate.foo.e2e.regroup.dev", clientConfig=cc["validate"])]}
    mutating = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": f"e2e-mutate-{s.ns}"},
                "webhooks": [dict(hook, name="mutate.foo.e2e.regroup.dev", clientConfig=cc["mutate"],
                                  reinvocationPolicy="Never")]}
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"bars.{ORIG_GROUP}"},
           "spec": {"group": ORIG_GROUP, "scope": "Namespaced",
                    "names": {"plural": "bars", "singular": "bar", "kind": "Bar", "listKind": "BarList"},
                    "versions": [{"name": "v1alpha1", "served": True, "storage": True, "schema": schema},
                                 {"name": "v1beta1", "served": True, "storage": False, "schema": schema}],
                    "conversion": {"strategy": "Webhook", "webhook": {
                        "conversionReviewVersions": ["v1"], "clientConfig": cc["convert"]}}}}
    return {"validatingwebhookconfiguration": validating, "mutatingwebhookconfiguration": mutating,
            "customresourcedefinition": crd}


# The prefix regroup gives the app's webhook configurations on the cluster
# (no `names:` in the config: derived from the rules), as `regroup check`
# prints it; set by `setup`.
NAMES_PREFIX = {"prefix": ""}


def cluster_name(kind, obj):
    name = obj["metadata"]["name"]
    if kind == "customresourcedefinition":
        return name.replace(ORIG_GROUP, CLUSTER_GROUP)
    return NAMES_PREFIX["prefix"] + name


def names_prefix(regroup_bin, config):
    out = subprocess.run([regroup_bin, "check", "-c", str(config)], capture_output=True, text=True, check=True).stdout
    line = next(line for line in out.splitlines() if line.startswith("NAMES  NAME -> "))
    return line.split(" -> ")[1].removesuffix("NAME")


@pytest.fixture(scope="module")
def setup(upstream, workdir, regroup_bin, cluster, ns):
    from pki import issue, new_ca
    s = Setup()
    s.ns, s.dir = ns, workdir / "webhooks"
    s.dir.mkdir(exist_ok=True)
    s.port, s.app_port, s.sidecar_port, s.metrics_port = free_port(), free_port(), free_port(), free_port()
    app_ca = new_ca("e2e-webhook-app-ca")  # the app's own serving CA
    app_ca.write(s.dir, "app-ca")
    issue(app_ca, "webhook-app", dns=["localhost"], ips=["127.0.0.1"]).write(s.dir, "app")
    s.app_bundle = base64.b64encode(app_ca.cert_pem).decode()
    hooks = "".join(f"""    - name: {h}-e2e
      backend: https://127.0.0.1:{s.app_port}/{h}
      registration:
        url: https://127.0.0.1:{s.app_port}/{h}
""" for h in HOOKS)
    config = s.dir / "regroup.yaml"
    config.write_text(CONFIG_YAML + f"""listeners:
  http: 127.0.0.1:{s.sidecar_port}
  metrics: 127.0.0.1:{s.metrics_port}
webhooks:
  listen: 127.0.0.1:{s.port}
  backendCaFile: {s.dir / "app-ca.crt"}
  reachAt:
    url: https://127.0.0.1:{s.port}
  hooks:
{hooks}""")
    NAMES_PREFIX["prefix"] = names_prefix(regroup_bin, config)
    s.regroup_log, s.app_log = s.dir / "regroup.log", s.dir / "webhook-app.log"
    regroup = subprocess.Popen([regroup_bin, "serve", "-c", str(config), "--kubeconfig", str(upstream.kubeconfig)],
                               stdout=open(s.regroup_log, "w"), stderr=subprocess.STDOUT)
    LOGS.append(("regroup with webhooks", s.regroup_log))
    procs = [regroup]
    s.objects = {}
    try:
        wait_port(s.sidecar_port, regroup, 20, "regroup serve (sidecar)", s.regroup_log)
        wait_port(s.port, regroup, 20, "regroup serve (webhooks)", s.regroup_log)
        # The mutation makes the object a dependent of Foo alpha: with alpha's
        # real uid, or the cluster's garbage collector deletes it at once.
        s.alpha_uid = cluster.json("get", f"foos.{CLUSTER_GROUP}", "alpha")["metadata"]["uid"]
        procs.append(start([sys.executable, str(E2E / "standin" / "webhook_app.py"), "--port", str(s.app_port),
                            "--tls-cert", str(s.dir / "app.crt"), "--tls-key", str(s.dir / "app.key"),
                            "--owner-uid", s.alpha_uid], s.app_log, "webhook app"))
        s.app = Kubectl(write_kubeconfig(s.dir / "app.kubeconfig", f"http://127.0.0.1:{s.sidecar_port}", ns),
                        s.dir / "cache-app", ns, [s.regroup_log, s.app_log])
        s.cluster = Kubectl(cluster.kubeconfig, s.dir / "cache-cluster", ns, cluster.logs + [s.regroup_log])
        s.written = registrations(s)
        for kind, obj in s.written.items():  # what an interrupted run may have left behind
            s.cluster.run("delete", kind, cluster_name(kind, obj), "--ignore-not-found", check=False)
        for kind, obj in s.written.items():
            s.app("create", "-f", "-", input=json.dumps(obj))
        yield s
    finally:
        for kind, obj in s.__dict__.get("written", {}).items():
            cluster.run("delete", kind, cluster_name(kind, obj), "--ignore-not-found", "--wait=false", check=False)
        for p in reversed(procs):
            stop(p)


def stored(s, kind):
    return s.cluster.json("get", kind, cluster_name(kind, s.written[kind]))


def client_config(kind, obj):
    if kind == "customresourcedefinition":
        return obj["spec"]["conversion"]["webhook"]["clientConfig"]
    return obj["webhooks"][0]["clientConfig"]


def test_the_app_reads_back_the_registrations_it_wrote(setup):
    for kind, written in setup.written.items():
        seen = setup.app.json("get", kind, written["metadata"]["name"])
        assert client_config(kind, seen) == client_config(kind, written), kind
        assert "regroup.dev/app-client-configs" not in seen["metadata"].get("annotations", {})
        if kind != "customresourcedefinition":
            assert seen["webhooks"][0]["rules"][0]["apiGroups"] == [ORIG_GROUP]
        # A list and an update of what it read (its controller re-applying) too.
        listed = setup.app.json("get", kind)["items"]
        mine = [o for o in listed if o["metadata"]["name"] == written["metadata"]["name"]]
        assert client_config(kind, mine[0]) == client_config(kind, written), kind
        setup.app("replace", "-f", "-", input=json.dumps(seen))
        again = setup.app.json("get", kind, written["metadata"]["name"])
        assert client_config(kind, again) == client_config(kind, written), kind


def test_the_cluster_stores_regroups_address_and_ca(setup):
    for kind, written in setup.written.items():
        obj = stored(setup, kind)
        cc = client_config(kind, obj)
        hook = {"validatingwebhookconfiguration": "validate", "mutatingwebhookconfiguration": "mutate",
                "customresourcedefinition": "convert"}[kind]
        assert cc["url"] == f"https://127.0.0.1:{setup.port}/{hook}-e2e"
        assert cc["caBundle"] != setup.app_bundle
        if kind != "customresourcedefinition":
            assert obj["webhooks"][0]["rules"][0]["apiGroups"] == [CLUSTER_GROUP]


def send_review(url, ctx, case):
    """POSTs the captured review `case` to `url` over TLS with `ctx`, as
    kube-apiserver does; the answer's `response` (for the review's uid)."""
    body = (CAPTURED / case / "request.body").read_bytes()
    req = urllib.request.Request(url + "?timeout=10s", data=body, method="POST",
                                 headers={"Content-Type": "application/json", "Accept": "application/json, */*",
                                          "User-Agent": "kube-apiserver-admission"})
    with urllib.request.urlopen(req, context=ctx, timeout=20) as r:
        assert r.status == 200
        answer = json.loads(r.read())
    assert answer["response"]["uid"] == json.loads(body)["request"]["uid"]
    return answer["response"]


def call(setup, kind, case):
    """POSTs a captured review to the webhook URL the cluster stored, over
    TLS trusting the caBundle it stored, as kube-apiserver does."""
    cc = client_config(kind, stored(setup, kind))
    return send_review(cc["url"], ssl.create_default_context(cadata=base64.b64decode(cc["caBundle"]).decode()), case)


# kube-apiserver 1.29's captured reviews, sent by `send(kind, case)` (the
# registration's kind): the answers in the cluster's names (also
# test_inject_webhooks.py's).

def validating_deny_and_allow(send):
    denied = send("validatingwebhookconfiguration", "083-webhook-validating-v1-create")
    assert denied["allowed"] is False
    assert denied["status"]["message"] == f"the app refuses {CLUSTER_GROUP}/v1alpha1, Kind=Foo named rejected-v1"
    allowed = send("validatingwebhookconfiguration", "076-webhook-validating-v1-create")
    assert allowed["allowed"] is True
    assert allowed["warnings"] == [f"the app checked {CLUSTER_GROUP}/v1alpha1, Kind=Foo hooked-v1 (CREATE)"]
    # admission.k8s.io/v1beta1 reviews too.
    old = send("validatingwebhookconfiguration", "102-webhook-validating-v1beta1-create")
    assert old["allowed"] is False and CLUSTER_GROUP in old["status"]["message"]


def mutating_patch(send, alpha_uid):
    answer = send("mutatingwebhookconfiguration", "075-webhook-mutating-v1-create")
    assert answer["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(answer["patch"]))
    owners = [op for op in patch if op["path"] == "/metadata/ownerReferences"][0]
    assert owners["value"] == [{"apiVersion": f"{CLUSTER_GROUP}/v1alpha1", "kind": "Foo", "name": "alpha",
                                "uid": alpha_uid}]
    label = [op for op in patch if op["path"].startswith("/metadata/labels/")][0]
    assert label["value"] == ORIG_GROUP, "a label value that looks like a group stays"


def conversion_both_ways_and_a_failed_one(send):
    answer = send("customresourcedefinition", "112-webhook-convert-create-to-v1beta1")
    assert answer["result"]["status"] == "Success"
    obj = answer["convertedObjects"][0]
    assert obj["apiVersion"] == f"{CLUSTER_GROUP}/v1beta1"
    assert obj["spec"]["replicas"] == 3 and "size" not in obj["spec"]
    assert obj["spec"]["fooRef"]["apiVersion"] == f"{CLUSTER_GROUP}/v1alpha1"
    back = send("customresourcedefinition", "116-webhook-convert-create-to-v1alpha1")
    assert back["convertedObjects"][0]["apiVersion"] == f"{CLUSTER_GROUP}/v1alpha1"
    failed = send("customresourcedefinition", "135-webhook-convert-get-to-v1beta1")
    assert failed["result"] == {"status": "Failure",
                                "message": f"the app will not convert fail to {CLUSTER_GROUP}/v1beta1"}


def test_validating_deny_and_allow_in_the_clusters_names(setup):
    validating_deny_and_allow(functools.partial(call, setup))


def test_mutating_patch_in_the_clusters_names(setup):
    mutating_patch(functools.partial(call, setup), setup.alpha_uid)


def test_conversion_between_two_versions_in_the_clusters_names(setup):
    conversion_both_ways_and_a_failed_one(functools.partial(call, setup))


def test_a_caller_without_the_stored_ca_fails_the_handshake(setup):
    cc = client_config("validatingwebhookconfiguration", stored(setup, "validatingwebhookconfiguration"))
    ctx = ssl.create_default_context(cadata=base64.b64decode(setup.app_bundle).decode())
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(urllib.request.Request(cc["url"], data=b"{}", method="POST"), context=ctx, timeout=10)


def test_metrics_count_reviews_and_rejections(setup):
    call(setup, "validatingwebhookconfiguration", "083-webhook-validating-v1-create")
    text = metrics(setup)
    assert 'regroup_webhook_requests_total{webhook="validate-e2e",kind="AdmissionReview"}' in text
    assert 'regroup_webhook_rejections_total{webhook="validate-e2e"}' in text
    log = setup.regroup_log.read_text()
    assert "rejected-v1" not in log and "managedFields" not in log, "no body in the log"


def until(pred, timeout, what):
    return poll(pred, timeout, 1, lambda: f"{what} within {timeout}s")


def unreachable(stderr):
    """kube-apiserver could not connect to the webhook URL."""
    return "failed calling webhook" in stderr and any(
        m in stderr for m in ("connection refused", "dial tcp", "i/o timeout", "no route to host"))


def metrics(setup):
    """regroup's /metrics (setup.metrics_port)."""
    return urllib.request.urlopen(f"http://127.0.0.1:{setup.metrics_port}/metrics", timeout=10).read().decode()


def reviews_received(setup, hook, kind="AdmissionReview"):
    """How many reviews of `kind` regroup's webhook listener got for `hook`."""
    prefix = f'regroup_webhook_requests_total{{webhook="{hook}",kind="{kind}"}} '
    return sum(float(line[len(prefix):]) for line in metrics(setup).splitlines() if line.startswith(prefix))


# A real kube-apiserver calling the webhooks through regroup (REGROUP_E2E_KUBECONFIG):
# `setup` has the app's kubectl (`app`, through the sidecar), the cluster's
# (`cluster`), regroup's `metrics_port` and Foo alpha's uid (`alpha_uid`).

def refusal(setup, foo, hook):
    """The app's server-side dry-run create of `foo`, tried until the
    validating webhook `hook` (regroup's name) refuses it: (kubectl's
    stderr, the hook's AdmissionReviews counted before). Skipped, saying why,
    when that apiserver can't reach this machine's loopback or admits the Foo
    without calling any webhook."""
    started, before = time.monotonic(), reviews_received(setup, hook)

    def refused():
        p = setup.app.run("create", "--dry-run=server", "-f", "-", input=json.dumps(foo), check=False)
        if unreachable(p.stderr):
            pytest.skip("this cluster's kube-apiserver can't reach 127.0.0.1 of this machine (it runs elsewhere), "
                        f"so the url: clientConfig on loopback can't be served: {p.stderr.strip()[:300]}")
        if p.returncode == 0 and time.monotonic() - started > 20 and reviews_received(setup, hook) == before:
            pytest.skip("this cluster admitted the Foo without calling any webhook in 20 s (the stand-in posing "
                        "as a cluster in e2e/real-mode-selfcheck.sh never calls webhooks)")
        return p.returncode != 0 and "denied the request" in p.stderr and p.stderr
    # A new configuration takes a moment to be in force.
    return until(refused, 30, "the validating webhook did not refuse"), before


def mutated_and_kept(setup, foo, name):
    """`foo` created by the app as `name`: the mutating webhook labelled it
    and made it a dependent of Foo alpha, in the app's names, and the
    cluster holds it in its own."""
    foo["metadata"]["name"] = name
    made = json.loads(setup.app("create", "-o", "json", "-f", "-", input=json.dumps(foo)))
    assert made["metadata"]["labels"]["e2e.regroup.dev/mutated-by"] == ORIG_GROUP
    owner = {"kind": "Foo", "name": "alpha", "uid": setup.alpha_uid}
    assert made["metadata"]["ownerReferences"] == [dict(owner, apiVersion=f"{ORIG_GROUP}/v1alpha1")]
    # The owner exists on the cluster under the renamed group: the garbage
    # collector keeps the Foo (it deletes a dependent whose owner is gone).
    time.sleep(3)
    on_cluster = setup.cluster.json("get", f"foos.{CLUSTER_GROUP}", name)
    assert on_cluster["metadata"]["ownerReferences"] == [dict(owner, apiVersion=f"{CLUSTER_GROUP}/v1alpha1")]


def converted(setup, kind, plural):
    """Conversion: a `kind` (its CRD's conversion webhook the app's) written
    in v1alpha1, read in v1beta1."""
    obj = {"apiVersion": f"{ORIG_GROUP}/v1alpha1", "kind": kind, "metadata": {"name": "one"}, "spec": {"size": 3}}
    until(lambda: setup.app.run("create", "-f", "-", input=json.dumps(obj), check=False).returncode == 0, 60,
          f"the {kind} CRD was not served")
    got = setup.app.json("get", f"{plural}.v1beta1.{ORIG_GROUP}", "one")
    assert got["apiVersion"] == f"{ORIG_GROUP}/v1beta1" and got["spec"] == {"replicas": 3}


@pytest.mark.skipif(not REAL, reason="the stand-in never calls webhooks; kube-apiserver's calls are replayed above")
def test_a_real_apiserver_calls_the_apps_webhooks_through_regroup(setup):
    labels = {"e2e.regroup.dev/webhook": setup.ns}
    foo = {"apiVersion": f"{ORIG_GROUP}/v1alpha1", "kind": "Foo",
           "metadata": {"name": "rejected-by-webhook", "labels": labels},
           "spec": {"deploymentName": "x", "replicas": 1}}
    stderr, _ = refusal(setup, foo, "validate-e2e")
    assert f"the app refuses {ORIG_GROUP}/v1alpha1, Kind=Foo named rejected-by-webhook" in stderr
    mutated_and_kept(setup, foo, "mutated-by-webhook")
    converted(setup, "Bar", "bars")


# --- the app rotates its CA: patches and server-side apply through the sidecar --------------------

def rotated_bundle():
    from pki import new_ca
    return base64.b64encode(new_ca("e2e-webhook-app-ca-rotated").cert_pem).decode()


def assert_rotated(setup, kind, bundle):
    """The app reads back its new bundle and its own url; the cluster still
    holds regroup's, and the caller kube-apiserver is still served."""
    written = setup.written[kind]
    seen = setup.app.json("get", kind, written["metadata"]["name"])
    app_cc = client_config(kind, seen)
    assert app_cc == dict(client_config(kind, written), caBundle=bundle), kind
    assert "regroup.dev/app-client-configs" not in seen["metadata"].get("annotations", {})
    cluster_cc = client_config(kind, stored(setup, kind))
    assert cluster_cc["url"].startswith(f"https://127.0.0.1:{setup.port}/"), kind
    assert cluster_cc["caBundle"] not in (bundle, setup.app_bundle), kind
    client_config(kind, written)["caBundle"] = bundle  # what the app now expects to read


def test_a_json_patch_of_the_ca_bundle_keeps_regroups_in_the_cluster(setup):
    kind, bundle = "validatingwebhookconfiguration", rotated_bundle()
    ops = [{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": bundle}]
    setup.app("patch", kind, setup.written[kind]["metadata"]["name"], "--type=json", "-p", json.dumps(ops))
    assert_rotated(setup, kind, bundle)
    assert call(setup, kind, "083-webhook-validating-v1-create")["allowed"] is False


def test_a_strategic_merge_patch_of_the_ca_bundle_alone_keeps_regroups_in_the_cluster(setup):
    kind, bundle = "mutatingwebhookconfiguration", rotated_bundle()
    patch = {"webhooks": [{"name": "mutate.foo.e2e.regroup.dev", "clientConfig": {"caBundle": bundle}}]}
    setup.app("patch", kind, setup.written[kind]["metadata"]["name"], "--type=strategic", "-p", json.dumps(patch))
    assert_rotated(setup, kind, bundle)
    assert call(setup, kind, "075-webhook-mutating-v1-create")["patchType"] == "JSONPatch"


def test_a_merge_patch_of_the_conversion_ca_bundle_keeps_regroups_in_the_cluster(setup):
    kind, bundle = "customresourcedefinition", rotated_bundle()
    patch = {"spec": {"conversion": {"webhook": {"clientConfig": {"caBundle": bundle}}}}}
    setup.app("patch", kind, setup.written[kind]["metadata"]["name"], "--type=merge", "-p", json.dumps(patch))
    assert_rotated(setup, kind, bundle)
    assert call(setup, kind, "112-webhook-convert-create-to-v1beta1")["result"]["status"] == "Success"


def test_server_side_apply_of_a_registration_keeps_regroups_in_the_cluster(setup):
    import yaml
    kind, bundle = "validatingwebhookconfiguration", rotated_bundle()
    applied = json.loads(json.dumps(setup.written[kind]))
    client_config(kind, applied)["caBundle"] = bundle
    setup.app("apply", "--server-side", "--force-conflicts", "--field-manager=e2e-operator", "-f", "-",
              input=yaml.safe_dump(applied))
    assert_rotated(setup, kind, bundle)
    assert call(setup, kind, "076-webhook-validating-v1-create")["allowed"] is True
