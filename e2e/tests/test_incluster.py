"""In-cluster mode (docs/deploy.md, way 2) on one machine, as the chart and
`regroup inject` lay it out in a pod:

- the cluster: the stand-in over HTTPS with a bearer token;
- regroup: `upstream.inCluster`, its service-account directory (the real
  token and CA) from `--service-account-dir`, the real
  KUBERNETES_SERVICE_HOST/PORT pointing at the stand-in, a loopback TLS
  listener;
- the app: the official Python client's in-cluster loader
  (`InClusterConfigLoader`, what `load_incluster_config()` runs) with its
  paths pointed at a stand-in for the projected volume (the pod's token,
  `ca.crt` = regroup's serving CA) and KUBERNETES_SERVICE_HOST/PORT =
  regroup's TLS listener; it lists, watches and creates Foos in the original
  group, and they live on the cluster in the renamed one.

Also: regroup's own token file rewritten (kubelet's rotation) is picked up
without a restart.

With REGROUP_E2E_KUBECONFIG the cluster is the real one (its server and CA),
the pod's and regroup's tokens are service-account tokens of their own."""
import base64
import json
import os
import secrets
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit

import pytest
from kubernetes import client, watch
from kubernetes.config.incluster_config import InClusterConfigLoader

from conftest import LOGS, start_standin
from e2e_support import CLUSTER_GROUP, DIRECT, ORIG_GROUP, free_port, stop, tail, wait_port
from pki import issue, new_ca

REAL = bool(os.environ.get("REGROUP_E2E_KUBECONFIG"))
pytestmark = pytest.mark.skipif(DIRECT, reason="REGROUP_E2E_DIRECT: no regroup")
NS = "e2e"  # the stand-in's seed namespace


class Pod:
    """Paths, ports and tokens of one in-cluster layout."""


def standin_cluster(d, p):
    """Stand-in mode: the stand-in over HTTPS with a private CA, requiring one
    bearer token (the pod's and regroup's: one service account)."""
    p.token = p.regroup_token = secrets.token_hex(16)
    cluster_ca = new_ca("e2e-cluster-ca")
    cluster_ca.write(d, "cluster-ca")
    issue(cluster_ca, "127.0.0.1", dns=["localhost"], ips=["127.0.0.1"]).write(d, "cluster")
    proc, port, _ = start_standin(d, "incluster-upstream", "--tls-cert", d / "cluster.crt", "--tls-key",
                                  d / "cluster.key", "--token", p.token)
    p.host, p.port, p.ns = "127.0.0.1", port, NS
    p.cluster_ca = d / "cluster-ca.crt"
    return proc


def real_cluster(d, p, upstream):
    """REGROUP_E2E_KUBECONFIG: the cluster's own server and CA; the pod's and
    regroup's tokens are service-account tokens (`kubectl create token`) of
    two service accounts that may read and write Foos in the test namespace."""
    up, p.ns = upstream.kubectl, upstream.namespace
    cluster = json.loads(up("config", "view", "--raw", "--minify", "--flatten", "-o", "json"))["clusters"][0]["cluster"]
    url = urlsplit(cluster["server"])
    if url.scheme != "https":
        pytest.skip(f"in-cluster mode needs an HTTPS cluster (KUBERNETES_SERVICE_HOST/PORT), not {url.scheme}")
    p.host, p.port = url.hostname, url.port or 443
    p.cluster_ca = d / "cluster-ca.crt"
    if cluster.get("certificate-authority-data"):
        p.cluster_ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    else:
        p.cluster_ca.write_bytes(open(cluster["certificate-authority"], "rb").read())
    tokens = []
    for sa in ("regroup-e2e-incluster-app", "regroup-e2e-incluster-sidecar"):
        up("create", "serviceaccount", sa)
        up("create", "role", sa, "--verb=get,list,watch,create,delete", f"--resource=foos.{CLUSTER_GROUP}")
        up("create", "rolebinding", sa, f"--role={sa}", f"--serviceaccount={p.ns}:{sa}")
        tokens.append(up("create", "token", sa, "--duration=1h").strip())
    p.token, p.regroup_token = tokens


@pytest.fixture(scope="module")
def pod(tmp_path_factory, regroup_bin, request):
    """The cluster (the stand-in, or a real one), regroup in in-cluster mode,
    and the app's service-account directory."""
    d = tmp_path_factory.mktemp("incluster")
    p, proc_up = Pod(), None
    if REAL:
        real_cluster(d, p, request.getfixturevalue("upstream"))
    else:
        proc_up = standin_cluster(d, p)
    # regroup's service-account directory: the real CA and (at first) a stale token
    regroup_sa = d / "regroup-sa"
    regroup_sa.mkdir()
    (regroup_sa / "ca.crt").write_bytes(p.cluster_ca.read_bytes())
    (regroup_sa / "token").write_text(p.regroup_token + "-stale")
    # regroup's loopback serving certificate and the app's projected volume
    serving_ca = new_ca("regroup-loopback-ca")
    issue(serving_ca, "regroup", dns=["localhost"], ips=["127.0.0.1"]).write(d, "serving")
    app_sa = d / "app-sa"
    app_sa.mkdir()
    (app_sa / "ca.crt").write_bytes(serving_ca.cert_pem)
    (app_sa / "token").write_text(p.token)  # the pod's token: the app's own identity
    (app_sa / "namespace").write_text(p.ns)
    http_port, tls_port = free_port(), free_port()
    config = d / "regroup.yaml"
    config.write_text(f"rules:\n  - from: {ORIG_GROUP}\n    to: {CLUSTER_GROUP}\n"
                      f"listeners:\n  http: 127.0.0.1:{http_port}\n"
                      f"  tls:\n    listen: 127.0.0.1:{tls_port}\n"
                      f"    certFile: {d / 'serving.crt'}\n    keyFile: {d / 'serving.key'}\n"
                      "upstream:\n  inCluster: true\n")
    log = d / "regroup-incluster.log"
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG",)}
    env.update(KUBERNETES_SERVICE_HOST=p.host, KUBERNETES_SERVICE_PORT=str(p.port), HOME=str(d))
    proc = subprocess.Popen([regroup_bin, "serve", "-c", str(config), "--service-account-dir", str(regroup_sa)],
                            stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env)
    LOGS.append(("regroup in-cluster", log))
    try:
        wait_port(tls_port, proc, 20, "regroup serve (in-cluster)", log)
        p.dir, p.regroup_sa, p.app_sa = d, regroup_sa, app_sa
        p.tls_port, p.http_port, p.log = tls_port, http_port, log
        yield p
    finally:
        stop(proc)
        if proc_up:
            stop(proc_up)


def app_client(pod):
    """What load_incluster_config() sets up, with its paths pointed at the
    app's projected-volume stand-in."""
    cfg = client.Configuration()
    InClusterConfigLoader(token_filename=str(pod.app_sa / "token"), cert_filename=str(pod.app_sa / "ca.crt"),
                          environ={"KUBERNETES_SERVICE_HOST": "127.0.0.1",
                                   "KUBERNETES_SERVICE_PORT": str(pod.tls_port)},
                          try_refresh_token=False).load_and_set(cfg)
    assert cfg.host == f"https://127.0.0.1:{pod.tls_port}"
    assert cfg.ssl_ca_cert == str(pod.app_sa / "ca.crt")
    # The loader writes "bearer TOKEN"; kube-apiserver takes the scheme in any
    # case, the stand-in only "Bearer" (e2e/standin/server.py): same token.
    scheme, token = cfg.api_key["authorization"].split(" ", 1)
    assert scheme.lower() == "bearer" and token == pod.token
    cfg.api_key["authorization"] = f"Bearer {token}"
    return client.ApiClient(cfg)


def cluster_get(pod, path):
    """Straight to the cluster, with the pod's token."""
    ctx = ssl.create_default_context(cafile=str(pod.cluster_ca))
    req = urllib.request.Request(f"https://{pod.host}:{pod.port}{path}",
                                 headers={"Authorization": f"Bearer {pod.token}"})
    with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
        return json.loads(r.read())


def test_incluster_client_lists_watches_and_creates_through_the_rename(pod):
    api = client.CustomObjectsApi(app_client(pod))
    lst = api.list_namespaced_custom_object(ORIG_GROUP, "v1alpha1", pod.ns, "foos")
    assert lst["apiVersion"] == f"{ORIG_GROUP}/v1alpha1"
    assert {"alpha", "beta", "gamma"} <= {i["metadata"]["name"] for i in lst["items"]}
    assert CLUSTER_GROUP not in json.dumps(lst)

    events, errors, done = [], [], threading.Event()

    def run():
        w = watch.Watch()
        try:
            for ev in w.stream(api.list_namespaced_custom_object, ORIG_GROUP, "v1alpha1", pod.ns, "foos",
                               timeout_seconds=10):
                events.append(ev)
                if ev["type"] == "ADDED" and ev["object"]["metadata"]["name"] == "incluster-made":
                    w.stop()
        except Exception as e:
            errors.append(e)
        finally:
            done.set()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    deadline = time.monotonic() + 10
    while not any(e["object"]["metadata"]["name"] == "alpha" for e in events) and time.monotonic() < deadline:
        assert not errors, f"watch failed: {errors[0]}"
        time.sleep(0.05)
    body = {"apiVersion": f"{ORIG_GROUP}/v1alpha1", "kind": "Foo", "metadata": {"name": "incluster-made"},
            "spec": {"deploymentName": "d", "replicas": 1}}
    created = api.create_namespaced_custom_object(ORIG_GROUP, "v1alpha1", pod.ns, "foos", body)
    assert created["apiVersion"] == f"{ORIG_GROUP}/v1alpha1"
    assert done.wait(15) and not errors, f"no ADDED event: {errors or [e['type'] for e in events]}"
    assert {e["object"]["apiVersion"] for e in events} == {f"{ORIG_GROUP}/v1alpha1"}
    # on the cluster it is the renamed group's object
    stored = cluster_get(pod, f"/apis/{CLUSTER_GROUP}/v1alpha1/namespaces/{pod.ns}/foos/incluster-made")
    assert stored["apiVersion"] == f"{CLUSTER_GROUP}/v1alpha1"
    api.delete_namespaced_custom_object(ORIG_GROUP, "v1alpha1", pod.ns, "foos", "incluster-made")


def test_app_must_trust_regroup_through_its_projected_ca(pod):
    """The app's ca.crt is regroup's CA, not the cluster's: a client that
    trusts only the cluster's CA can't talk to regroup's listener."""
    cfg = client.Configuration()
    InClusterConfigLoader(token_filename=str(pod.app_sa / "token"), cert_filename=str(pod.cluster_ca),
                          environ={"KUBERNETES_SERVICE_HOST": "127.0.0.1",
                                   "KUBERNETES_SERVICE_PORT": str(pod.tls_port)}).load_and_set(cfg)
    cfg.retries = 0
    api = client.CustomObjectsApi(client.ApiClient(cfg))
    with pytest.raises(Exception) as e:
        api.list_namespaced_custom_object(ORIG_GROUP, "v1alpha1", pod.ns, "foos")
    assert "CERTIFICATE_VERIFY_FAILED" in str(e.value) or "certificate" in str(e.value).lower()


def test_regroup_picks_up_its_rotated_token_without_a_restart(pod):
    """A caller without a token (loopback: regroup lends its own) is served
    with regroup's service-account token; rewriting the token file (as the
    kubelet rotates it) takes effect without a restart."""
    url = f"http://127.0.0.1:{pod.http_port}/apis/{ORIG_GROUP}/v1alpha1/namespaces/{pod.ns}/foos"
    # the file still holds a stale token: the cluster says 401
    (pod.regroup_sa / "token").write_text(pod.regroup_token + "-stale")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url, timeout=10)
    assert e.value.code == 401, tail(pod.log)
    # rotated: regroup re-reads the file on the 401 and retries
    (pod.regroup_sa / "token").write_text(pod.regroup_token)
    with urllib.request.urlopen(url, timeout=10) as r:
        lst = json.loads(r.read())
    assert lst["apiVersion"] == f"{ORIG_GROUP}/v1alpha1" and lst["items"]
