"""The aggregated front end to end, with real processes: the app's own
aggregated API server (e2e/standin/aggregated.py, group wardle.example.com)
behind `regroup serve` with a `front`, the same regroup as the app's sidecar,
and the cluster's aggregator calling the front with its front-proxy
certificate under the renamed group wardle.team1.example.com.

Nothing about regroup is configured in the app: it reads the request-header
trust from kube-system/extension-apiserver-authentication through the sidecar
and writes its own APIService (with its own caBundle) through it, as a real
aggregated server does. kubectl, as an admin of the cluster, then lists,
creates and watches Flunders through the aggregator.

Stand-in mode: the stand-in apiserver plays the aggregator (e2e/standin/
server.py, "aggregation"). REGROUP_E2E_KUBECONFIG: the real aggregator; the
front then listens on an address of this machine that the cluster can reach
(REGROUP_E2E_FRONT_HOST, else the local address on the route to the cluster's
nodes), behind a Service with manual Endpoints."""
import base64
import ipaddress
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit

import pytest

from conftest import LOGS
from e2e_support import (CLUSTER_AGG_GROUP, CLUSTER_GROUP, CONFIG_YAML, DIRECT, E2E, ORIG_AGG_GROUP, ORIG_GROUP,
                         Kubectl, Stream, free_port, stop, tail, wait_port, write_kubeconfig)

REAL = bool(os.environ.get("REGROUP_E2E_KUBECONFIG"))
SERVICE = "regroup-front"
FLUNDERS = f"flunders.v1alpha1.{CLUSTER_AGG_GROUP}"
CREATED_BY = "e2e.regroup.dev/created-by"

pytestmark = pytest.mark.skipif(DIRECT, reason="REGROUP_E2E_DIRECT: no regroup, so no front")


def reachable_address(cluster):
    """An address of this machine the cluster's apiserver can connect to."""
    if os.environ.get("REGROUP_E2E_FRONT_HOST"):
        return os.environ["REGROUP_E2E_FRONT_HOST"]
    server = json.loads(cluster("config", "view", "--minify", "--raw", "-o", "json"))["clusters"][0]["cluster"]
    hosts = [urlsplit(server["server"]).hostname]
    got = cluster.run("get", "nodes", "-o", "json", check=False)  # may be forbidden: then the server only
    nodes = json.loads(got.stdout)["items"] if got.returncode == 0 else []
    hosts += [a["address"] for n in nodes for a in n["status"].get("addresses", []) if a["type"] == "InternalIP"]
    for host in hosts:
        try:
            ip = ipaddress.ip_address(socket.getaddrinfo(host, 443, proto=socket.IPPROTO_TCP)[0][4][0])
        except (OSError, ValueError):
            continue
        if ip.is_loopback:
            continue
        with socket.socket(socket.AF_INET6 if ip.version == 6 else socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((str(ip), 443))  # no packet is sent: this only picks the route's local address
            local = s.getsockname()[0]
        if not ipaddress.ip_address(local).is_loopback:
            return local
    pytest.skip("no address of this machine that the cluster can reach was found (the apiserver and the nodes "
                "are on loopback): set REGROUP_E2E_FRONT_HOST")


class Front:
    """The processes and names of one front deployment."""


def start(argv, log, what):
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=open(log, "w"), text=True)
    LOGS.append((what, log))
    first = proc.stdout.readline()
    if not first.startswith("LISTENING "):
        stop(proc)
        pytest.fail(f"{what} did not start (first line {first!r}):\n{tail(log)}")
    return proc


@pytest.fixture(scope="module")
def front(upstream, workdir, regroup_bin, cluster, ns):
    """regroup (sidecar + front) and the app's aggregated server behind it; the
    app's APIService registered through the sidecar; the Service the
    APIService names pointing at the front. Yields a Front."""
    from pki import issue, new_ca
    f = Front()
    f.ns, f.dir = ns, workdir / "front"
    f.dir.mkdir(exist_ok=True)
    f.host = reachable_address(cluster) if REAL else "127.0.0.1"
    f.port, f.app_port, f.sidecar_port, f.metrics_port = free_port(), free_port(), free_port(), free_port()
    app_ca = new_ca("e2e-app-ca")  # the app's own serving CA, as its own controller would make it
    app_ca.write(f.dir, "app-ca")
    issue(app_ca, "aggregated-app", dns=["localhost"], ips=["127.0.0.1"]).write(f.dir, "app")
    config = f.dir / "regroup.yaml"
    config.write_text(CONFIG_YAML + f"""listeners:
  http: 127.0.0.1:{f.sidecar_port}
  metrics: 127.0.0.1:{f.metrics_port}
front:
  listen: {"0.0.0.0" if REAL else "127.0.0.1"}:{f.port}
  generatedDnsNames: [{SERVICE}.{ns}.svc]
  backend: https://127.0.0.1:{f.app_port}
  backendCaFile: {f.dir / "app-ca.crt"}
  requestHeader:
    fromCluster: true
""")
    f.regroup_log, f.app_log = f.dir / "regroup.log", f.dir / "aggregated.log"
    regroup = subprocess.Popen([regroup_bin, "serve", "-c", str(config), "--kubeconfig", str(upstream.kubeconfig)],
                               stdout=open(f.regroup_log, "w"), stderr=subprocess.STDOUT)
    LOGS.append(("regroup with a front", f.regroup_log))
    procs = [regroup]
    try:
        wait_port(f.sidecar_port, regroup, 20, "regroup serve (sidecar)", f.regroup_log)
        wait_port(f.port, regroup, 20, "regroup serve (front)", f.regroup_log)
        f.sidecar = f"http://127.0.0.1:{f.sidecar_port}"
        procs.append(start([sys.executable, str(E2E / "standin" / "aggregated.py"), "--port", str(f.app_port),
                            "--tls-cert", str(f.dir / "app.crt"), "--tls-key", str(f.dir / "app.key"),
                            "--kube", f.sidecar, "--seed-namespace", ns], f.app_log, "aggregated app"))
        f.app = Kubectl(write_kubeconfig(f.dir / "app.kubeconfig", f.sidecar, ns), f.dir / "cache-app", ns,
                        [f.regroup_log, f.app_log])
        f.cluster = Kubectl(cluster.kubeconfig, f.dir / "cache-cluster", ns, cluster.logs + [f.regroup_log, f.app_log])
        # The Service the APIService names: no selector, manual Endpoints to the front.
        f.cluster("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": SERVICE, "namespace": ns},
             "spec": {"ports": [{"name": "https", "port": 443, "targetPort": f.port}]}},
            {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": SERVICE, "namespace": ns},
             "subsets": [{"addresses": [{"ip": f.host}], "ports": [{"name": "https", "port": f.port}]}]}]}))
        # The app registers its APIService, in its own group and with its own CA
        # (after removing one an interrupted run may have left behind).
        f.cluster("delete", "apiservice", f"v1alpha1.{CLUSTER_AGG_GROUP}", "--ignore-not-found")
        f.app_bundle = base64.b64encode(app_ca.cert_pem).decode()
        f.app("create", "-f", "-", input=json.dumps({
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": f"v1alpha1.{ORIG_AGG_GROUP}"},
            "spec": {"group": ORIG_AGG_GROUP, "version": "v1alpha1", "groupPriorityMinimum": 1000,
                     "versionPriority": 15, "caBundle": f.app_bundle,
                     "service": {"namespace": ns, "name": SERVICE, "port": 443}}}))
        wait_for_aggregator(f)
        yield f
    finally:
        cluster.run("delete", "apiservice", f"v1alpha1.{CLUSTER_AGG_GROUP}", "--ignore-not-found", check=False)
        cluster.run("delete", "service,endpoints", SERVICE, "--ignore-not-found", check=False)
        for p in reversed(procs):
            stop(p)


def wait_for_aggregator(f, timeout=90):
    """Until the aggregator serves the group's discovery through the front
    (a real aggregator first checks availability, which takes seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        p = f.cluster.run("get", "--raw", f"/apis/{CLUSTER_AGG_GROUP}/v1alpha1", check=False)
        if p.returncode == 0:
            return
        if time.monotonic() > deadline:
            status = f.cluster.run("get", "apiservice", f"v1alpha1.{CLUSTER_AGG_GROUP}", "-o",
                                   "jsonpath={.status.conditions}", check=False).stdout
            hint = (f"\nThe front listens on {f.host}:{f.port}; if the cluster can't reach that address, set "
                    "REGROUP_E2E_FRONT_HOST to one it can.") if REAL else ""
            pytest.fail(f"the aggregator did not reach the front within {timeout}s: {p.stderr}\n"
                        f"APIService conditions: {status}{hint}{f.cluster.log_tails()}")
        time.sleep(1)


def test_the_app_reads_its_own_bundle_and_the_cluster_stores_regroups(front):
    stored = front.cluster.json("get", "apiservice", f"v1alpha1.{CLUSTER_AGG_GROUP}")
    assert stored["spec"]["group"] == CLUSTER_AGG_GROUP
    assert stored["metadata"]["annotations"]["regroup.dev/app-ca-bundle"] == front.app_bundle
    assert stored["spec"]["caBundle"] != front.app_bundle
    # What the cluster stores is the CA that verifies the front's serving
    # certificate for the Service's name.
    ctx = ssl.create_default_context(cadata=base64.b64decode(stored["spec"]["caBundle"]).decode())
    with socket.create_connection(("127.0.0.1", front.port), timeout=10) as s:
        with ctx.wrap_socket(s, server_hostname=f"{SERVICE}.{front.ns}.svc") as tls:
            assert tls.version()
    seen = front.app.json("get", "apiservice", f"v1alpha1.{ORIG_AGG_GROUP}")
    assert seen["spec"]["caBundle"] == front.app_bundle
    assert seen["spec"]["group"] == ORIG_AGG_GROUP
    assert "regroup.dev/app-ca-bundle" not in (seen["metadata"].get("annotations") or {})


def test_the_app_trusts_regroup_through_the_authentication_configmap(front):
    seen = front.app.json("get", "configmap", "extension-apiserver-authentication", "-n", "kube-system")
    stored = front.cluster.json("get", "configmap", "extension-apiserver-authentication", "-n", "kube-system")
    app_ca, cluster_ca = seen["data"]["requestheader-client-ca-file"], stored["data"]["requestheader-client-ca-file"]
    assert app_ca.startswith(cluster_ca.rstrip("\n")) and app_ca.count("BEGIN CERTIFICATE") == \
        cluster_ca.count("BEGIN CERTIFICATE") + 1
    names = json.loads(seen["data"]["requestheader-allowed-names"])
    if json.loads(stored["data"]["requestheader-allowed-names"]):
        assert "regroup-front-proxy" in names


def test_discovery_through_the_aggregator_names_the_cluster_group(front):
    doc = json.loads(front.cluster("get", "--raw", f"/apis/{CLUSTER_AGG_GROUP}/v1alpha1"))
    assert doc["groupVersion"] == f"{CLUSTER_AGG_GROUP}/v1alpha1"
    assert [r["name"] for r in doc["resources"]] == ["flunders"]
    p = front.cluster.run("api-resources", f"--api-group={CLUSTER_AGG_GROUP}", "-o", "name", check=False)
    assert p.stdout.split() == [f"flunders.{CLUSTER_AGG_GROUP}"], p.stderr
    # kubectl reports every group whose discovery failed. None may be ours. The
    # stand-in lists the original Foo group in /apis without serving it (its
    # /apis is the capture of a cluster with both worlds), so there that group
    # is reported, and only that one; a real cluster may have broken
    # aggregated APIs of its own.
    errors = [line for line in p.stderr.splitlines() if "unable to retrieve" in line or "couldn't get" in line]
    assert not [line for line in errors if "wardle." in line], p.stderr
    assert REAL or all(ORIG_GROUP in line for line in errors), p.stderr


def test_list_through_the_aggregator(front):
    lst = front.cluster.json("get", FLUNDERS)
    assert lst["apiVersion"] in ("v1", f"{CLUSTER_AGG_GROUP}/v1alpha1")  # kubectl wraps items in a v1 List
    seed = next(i for i in lst["items"] if i["metadata"]["name"] == "seed-flunder")
    assert seed["apiVersion"] == f"{CLUSTER_AGG_GROUP}/v1alpha1"
    assert seed["metadata"]["ownerReferences"][0]["apiVersion"] == f"{CLUSTER_GROUP}/v1alpha1"
    assert ORIG_AGG_GROUP not in json.dumps(lst).replace(CLUSTER_AGG_GROUP, "")
    table = front.cluster("get", FLUNDERS)
    assert re.search(r"^seed-flunder\s", table, re.M), table


def test_create_get_delete_through_the_aggregator(front):
    """The body arrives in the app's names (the app refuses cluster names) with
    the identity the aggregator authenticated."""
    flunder = {"apiVersion": f"{CLUSTER_AGG_GROUP}/v1alpha1", "kind": "Flunder",
               "metadata": {"name": "created", "ownerReferences": [{
                   "apiVersion": f"{CLUSTER_GROUP}/v1alpha1", "kind": "Foo", "name": "beta",
                   "uid": "9f0c3d2e-0000-4000-8000-000000000002"}]},
               "spec": {"reference": "seed-flunder", "referenceType": "Flunder"}}
    made = json.loads(front.cluster("create", "-f", "-", "-o", "json", input=json.dumps(flunder)))
    assert made["apiVersion"] == f"{CLUSTER_AGG_GROUP}/v1alpha1"
    assert made["metadata"]["ownerReferences"][0]["apiVersion"] == f"{CLUSTER_GROUP}/v1alpha1"
    creator = made["metadata"]["annotations"][CREATED_BY]
    if REAL:
        assert creator and creator != "regroup-front-proxy"
    else:
        assert creator == "standin-admin"  # the stand-in aggregator's caller
    got = front.cluster.json("get", FLUNDERS, "created")
    assert got["metadata"]["uid"] == made["metadata"]["uid"]
    front.cluster("delete", FLUNDERS, "created")
    assert "NotFound" in front.cluster.fails("get", FLUNDERS, "created")


def test_watch_through_the_aggregator(front):
    w = Stream(front.cluster.argv("get", FLUNDERS, "--watch", "-o", "json"))
    try:
        seen = []
        w.until(lambda d: d.get("metadata", {}).get("name") == "seed-flunder", 30, seen)
        front.cluster("create", "-f", "-", input=json.dumps({
            "apiVersion": f"{CLUSTER_AGG_GROUP}/v1alpha1", "kind": "Flunder", "metadata": {"name": "watched"},
            "spec": {"reference": "seed-flunder"}}))
        ev = w.until(lambda d: d.get("metadata", {}).get("name") == "watched", 30, seen)
        assert ev["apiVersion"] == f"{CLUSTER_AGG_GROUP}/v1alpha1"
    finally:
        w.close()
        front.cluster.run("delete", FLUNDERS, "watched", "--ignore-not-found", check=False)


# ---- callers the front must refuse, over real TLS ----------------------------------------

def call_front(front, path, cert=None, headers=None, ca=None):
    """(status, body, TLS error) of a GET straight to the front."""
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # the front's identity is tested above
    if cert:
        ctx.load_cert_chain(*cert)
    req = urllib.request.Request(f"https://127.0.0.1:{front.port}{path}", headers=headers or {})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=15) as r:
            return r.status, r.read(), None
    except urllib.error.HTTPError as e:
        return e.code, e.read(), None
    except (urllib.error.URLError, ssl.SSLError, ConnectionError) as e:
        return None, b"", e


def app_requests(front):
    return [line for line in front.app_log.read_text().splitlines() if not line.startswith("GET /healthz")]


def rejections(front, reason):
    text = urllib.request.urlopen(f"http://127.0.0.1:{front.metrics_port}/metrics", timeout=10).read().decode()
    m = re.search(r'^regroup_front_rejections_total\{reason="' + reason + r'"\} (\d+)', text, re.M)
    return int(m.group(1)) if m else 0


PATH = "/apis/%s/v1alpha1/namespaces/%s/flunders"


def test_no_certificate_and_a_spoofed_user_get_401_and_reach_nothing(front):
    before, n = rejections(front, "no_client_certificate"), len(app_requests(front))
    code, body, err = call_front(front, PATH % (CLUSTER_AGG_GROUP, front.ns),
                                 headers={"X-Remote-User": "system:admin", "X-Remote-Group": "system:masters"})
    assert err is None and code == 401, (code, err)
    status = json.loads(body)
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Unauthorized", 401)
    assert rejections(front, "no_client_certificate") == before + 1
    assert len(app_requests(front)) == n, "a rejected caller reached the app"


def test_a_bearer_token_alone_goes_to_the_app_untouched(front):
    code, body, err = call_front(front, PATH % (CLUSTER_AGG_GROUP, front.ns),
                                 headers={"Authorization": "Bearer e2e-not-a-real-token"})
    assert err is None and code == 401
    # The app's answer, not regroup's: the token reached it for its own review.
    assert "a bearer token arrived" in json.loads(body)["message"]
    assert "bearer-token" in app_requests(front)[-1]


def test_a_certificate_from_another_ca_fails_the_handshake(front):
    from pki import issue, new_ca
    stranger = issue(new_ca("not-the-front-proxy-ca"), "front-proxy-client", client=True)
    code, _, err = call_front(front, PATH % (CLUSTER_AGG_GROUP, front.ns),
                              cert=stranger.write(front.dir, "stranger"), headers={"X-Remote-User": "system:admin"})
    assert code is None and err is not None, f"a foreign certificate got an HTTP answer {code}"


def test_a_name_not_allowed_gets_401(front, request):
    if REAL:
        pytest.skip("signing a front-proxy certificate needs the cluster's front-proxy CA key, which the suite "
                    "doesn't have on a real cluster")
    ca, _ = request.getfixturevalue("front_proxy_pki")
    from pki import issue
    other = issue(ca, "not-an-allowed-name", client=True).write(front.dir, "not-allowed")
    before = rejections(front, "common_name_not_allowed")
    code, _, err = call_front(front, PATH % (CLUSTER_AGG_GROUP, front.ns), cert=other,
                              headers={"X-Remote-User": "system:admin"})
    assert err is None and code == 401
    assert rejections(front, "common_name_not_allowed") == before + 1


def test_a_front_proxy_caller_lists_directly(front, request, workdir):
    """The same certificate as the aggregator's, straight to the front: the
    list comes back in the cluster's names."""
    if REAL:
        pytest.skip("the cluster's front-proxy client key is not available to the suite on a real cluster")
    request.getfixturevalue("front_proxy_pki")
    cert = (workdir / "front-proxy-client.crt", workdir / "front-proxy-client.key")
    code, body, err = call_front(front, PATH % (CLUSTER_AGG_GROUP, front.ns), cert=cert,
                                 headers={"X-Remote-User": "e2e-direct", "X-Remote-Group": "system:authenticated"})
    assert err is None and code == 200, (code, body[:300])
    lst = json.loads(body)
    assert lst["apiVersion"] == f"{CLUSTER_AGG_GROUP}/v1alpha1"
    assert ORIG_AGG_GROUP not in body.decode().replace(CLUSTER_AGG_GROUP, "")
    assert "user=e2e-direct" in app_requests(front)[-1]


def test_aggregated_discovery_from_the_app_arrives_in_the_cluster_names(front, request, workdir):
    """What aggregators since 1.27 ask a backend's /apis for: the app's
    APIGroupDiscoveryList, renamed on its way out of the front."""
    if REAL:
        pytest.skip("the cluster's front-proxy client key is not available to the suite on a real cluster")
    request.getfixturevalue("front_proxy_pki")
    cert = (workdir / "front-proxy-client.crt", workdir / "front-proxy-client.key")
    accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
    code, body, err = call_front(front, "/apis", cert=cert,
                                 headers={"X-Remote-User": "system:kube-aggregator", "Accept": accept})
    assert err is None and code == 200, (code, body[:300])
    doc = json.loads(body)
    assert doc["kind"] == "APIGroupDiscoveryList"
    assert [g["metadata"]["name"] for g in doc["items"]] == [CLUSTER_AGG_GROUP]
    res = doc["items"][0]["versions"][0]["resources"][0]
    assert res["resource"] == "flunders" and res["responseKind"]["group"] == CLUSTER_AGG_GROUP


def test_the_apps_subject_access_review_is_renamed(front, upstream):
    """The app authorizes in its own group (wardle.example.com) through the
    sidecar; the cluster has only the renamed group. The stand-in denies
    reviews of groups it doesn't have, so there an un-renamed review fails
    (checked straight against it); a real cluster's admin is allowed both."""
    sar = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
           "spec": {"user": "standin-admin", "groups": ["system:masters", "system:authenticated"],
                    "resourceAttributes": {"group": ORIG_AGG_GROUP, "version": "v1alpha1", "resource": "flunders",
                                           "verb": "list", "namespace": front.ns}}}

    def review(base):
        req = urllib.request.Request(base + "/apis/authorization.k8s.io/v1/subjectaccessreviews", method="POST",
                                     data=json.dumps(sar).encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=15) as r:
            return json.loads(r.read())

    through = review(front.sidecar)
    assert through["status"]["allowed"] is True, through["status"]
    assert through["spec"]["resourceAttributes"]["group"] == ORIG_AGG_GROUP  # the app sees its own group back
    if not REAL:
        direct = review(upstream.url)
        assert direct["status"]["allowed"] is False, "the stand-in would allow an un-renamed review"


def test_the_front_follows_the_clusters_request_header_settings(front, request):
    """The front watches kube-system/extension-apiserver-authentication: a name
    the cluster adds to requestheader-allowed-names is accepted within seconds
    (the stand-in only: a real cluster's ConfigMap belongs to kube-apiserver)."""
    if REAL:
        pytest.skip("kube-apiserver owns the real cluster's extension-apiserver-authentication")
    ca, _ = request.getfixturevalue("front_proxy_pki")
    from pki import issue
    cert = issue(ca, "late-addition", client=True).write(front.dir, "late-addition")
    path, headers = PATH % (CLUSTER_AGG_GROUP, front.ns), {"X-Remote-User": "e2e-late"}
    assert call_front(front, path, cert=cert, headers=headers)[0] == 401
    cm = ["configmap", "extension-apiserver-authentication", "-n", "kube-system"]
    names = json.loads(front.cluster.json("get", *cm)["data"]["requestheader-allowed-names"])
    patch = {"data": {"requestheader-allowed-names": json.dumps(names + ["late-addition"])}}
    front.cluster("patch", *cm, "--type", "merge", "-p", json.dumps(patch))
    try:
        deadline, code = time.monotonic() + 10, None
        while time.monotonic() < deadline and code != 200:
            time.sleep(0.2)
            code = call_front(front, path, cert=cert, headers=headers)[0]
        assert code == 200, "the front did not pick up the new allowed name within 10 s"
    finally:
        patch = {"data": {"requestheader-allowed-names": json.dumps(names)}}
        front.cluster("patch", *cm, "--type", "merge", "-p", json.dumps(patch))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and call_front(front, path, cert=cert, headers=headers)[0] != 401:
        time.sleep(0.2)
    assert call_front(front, path, cert=cert, headers=headers)[0] == 401
