"""What the publish-mode tests (test_publish.py, test_publish_more.py) share:
the names of the published kind, the manifests they write, and the pieces
of a publish deployment made with real processes: a central cluster (a
stand-in with --rbac --custom-resources, or REGROUP_E2E_CENTRAL_KUBECONFIG)
serving the CRD, a remote cluster (a stand-in playing the aggregator, or
REGROUP_E2E_KUBECONFIG), `regroup serve` with `publish:` as its aggregated
front, and the Service, Endpoints and APIService that point the remote
aggregator at it (docs/publish.md; e2e/README.md, "Publish mode")."""
import base64
import json
import os
import subprocess
import time

import pytest

from conftest import LOGS, start_standin
from e2e_support import DIRECT, E2E, free_port, stop, wait_port, write_kubeconfig

REAL = bool(os.environ.get("REGROUP_E2E_KUBECONFIG"))
CENTRAL_KUBECONFIG = os.environ.get("REGROUP_E2E_CENTRAL_KUBECONFIG")
GROUP, VERSION = "database.acmeco.org", "v1alpha1"
PLURAL, KIND = "mysqlinstancerequirements", "MySQLInstanceRequirement"
RESOURCE = f"{PLURAL}.{GROUP}"
CRD = f"customresourcedefinition/{RESOURCE}"
APISERVICE = f"{VERSION}.{GROUP}"
SERVICE = "regroup-publish"
SOURCE_NS, SOURCE_CLUSTER = "regroup.dev/source-namespace", "regroup.dev/source-cluster"
TARGET_ANNOTATION = "regroup.dev/publish-target-namespace"
CREDENTIALS_ANNOTATION = "regroup.dev/publish-credentials-secret"
AGENT_CREDENTIALS_ANNOTATION = "agent.crossplane.io/credentials-secret-name"
COPY_LABEL, COPY_OF = "regroup.dev/connection-secret", "regroup.dev/connection-secret-of"
SECRET = "sql-creds"
# What `kubectl -o name` prints for one requirement.
NAME_PREFIX = f"{KIND.lower()}.{GROUP}/"

# The Role `regroup publish-manifests` prints for the agent: the published
# groups and reading Secrets (connection Secrets).
AGENT_RULES = [{"apiGroups": [GROUP], "resources": ["*"], "verbs": ["*"]},
               {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]}]
READER_RULES = [{"apiGroups": [GROUP], "resources": ["*"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]}]

PUBLISH_SKIPS = [
    pytest.mark.skipif(DIRECT, reason="REGROUP_E2E_DIRECT: no regroup, so no publish mode"),
    pytest.mark.skipif(REAL and not CENTRAL_KUBECONFIG,
                       reason="publish mode needs a second, central cluster: REGROUP_E2E_KUBECONFIG is the remote "
                              "one; set REGROUP_E2E_CENTRAL_KUBECONFIG to the central cluster's admin kubeconfig"),
]


# ---- manifests ------------------------------------------------------------------------------

def role(name, ns, rules):
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name, "namespace": ns},
            "rules": rules}


def binding(name, ns, subject):
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": ns}, "subjects": [subject],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}}


def grant(central, ns, name, sa_namespace, sa, rules=AGENT_RULES):
    """A Role `name` in central namespace `ns` and its binding to the
    ServiceAccount `sa_namespace/sa`."""
    central("apply", "-n", ns, "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        role(name, ns, rules),
        binding(name, ns, {"kind": "ServiceAccount", "name": sa, "namespace": sa_namespace})]}))


def requirement(ns, name="sqldb", storage=20, labels=None, secret=SECRET):
    md = dict({"name": name, "namespace": ns}, **({"labels": labels} if labels else {}))
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": md,
            "spec": {"version": "5.7", "storageGB": storage, "writeConnectionSecretToRef": {"name": secret}}}


def namespace(name, annotations=None):
    md = dict({"name": name}, **({"annotations": annotations} if annotations else {}))
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": md}


def secret(name, ns, data, labels=None):
    md = dict({"name": name, "namespace": ns}, **({"labels": labels} if labels else {}))
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": md,
            "data": {k: base64.b64encode(v if isinstance(v, bytes) else v.encode()).decode() for k, v in data.items()}}


def b64(text):
    return base64.b64encode(text.encode()).decode()


def write_connection_secret(central, ns, owner, name=SECRET, password="s3cret"):
    """What the central cluster's controller does (Crossplane): the Secret
    `name` in central namespace `ns`, owned by the requirement `owner` (its
    central object)."""
    doc = secret(name, ns, {"username": "admin", "password": password})
    doc["metadata"]["ownerReferences"] = [{"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
                                           "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                                           "controller": True}]
    central("apply", "-n", ns, "-f", "-", input=json.dumps(doc))
    return central.json("get", "secret", name, "-n", ns)


def set_ready(central, ns, name, value):
    """What the central cluster's controller does: writes the status."""
    central("patch", RESOURCE, name, "-n", ns, "--subresource=status", "--type=merge", "-p",
            json.dumps({"status": {"ready": value}}))


def remote_secret(remote, ns, name=SECRET):
    """A Secret of the remote cluster, or None (a raw GET: no discovery,
    which waits on an aggregated API that does not answer)."""
    got = remote.run("get", "--raw", f"/api/v1/namespaces/{ns}/secrets/{name}", check=False)
    return json.loads(got.stdout) if got.returncode == 0 else None


# ---- clusters -------------------------------------------------------------------------------

def delete_namespaces(kubectl, names):
    """Deletes namespaces and waits for them (60 s at most). One that is still
    Terminating after 10 s without a condition (no namespace controller: a
    cluster without kube-controller-manager, where nothing removes the
    `kubernetes` finalizer) is finalized, its objects having been deleted."""
    kubectl.run("delete", "namespace", *names, "--ignore-not-found", "--wait=false", check=False)
    start, left = time.monotonic(), list(names)
    while left and time.monotonic() < start + 60:
        time.sleep(1)
        for n in list(left):
            got = kubectl.run("get", "namespace", n, "-o", "json", check=False)
            if got.returncode != 0:
                left.remove(n)
                continue
            ns = json.loads(got.stdout)
            if time.monotonic() > start + 10 and not (ns.get("status") or {}).get("conditions"):
                ns["spec"]["finalizers"] = []
                kubectl.run("replace", "--raw", f"/api/v1/namespaces/{n}/finalize", "-f", "-",
                            input=json.dumps(ns), check=False)


def server_of(kubeconfig):
    """The cluster entry (server, CA) of a kubeconfig's current context."""
    out = subprocess.run([str(E2E / ".bin" / "kubectl"), "--kubeconfig", str(kubeconfig), "config", "view", "--minify",
                          "--raw", "-o", "json"], capture_output=True, text=True, timeout=30, check=True).stdout
    return json.loads(out)["clusters"][0]["cluster"]


def start_remote_standin(workdir, name):
    """A remote cluster's stand-in: `--rbac` (SubjectAccessReviews and `--as`
    answered by the RBAC it stores) and the aggregator (the session's
    front-proxy PKI, `front_proxy_pki`). Returns (proc, kubeconfig, log)."""
    proc, port, log = start_standin(
        workdir, name, "--seed-namespace", "", "--rbac", "--requestheader-ca", workdir / "front-proxy-ca.crt",
        "--proxy-client-cert", workdir / "front-proxy-client.crt", "--proxy-client-key",
        workdir / "front-proxy-client.key", env={"REGROUP_STANDIN_HIDE_ORIG": "1"})
    kc = write_kubeconfig(workdir / f"{name}.kubeconfig", f"http://127.0.0.1:{port}", "default")
    return proc, kc, log


def start_central_standin(workdir, name):
    """The central cluster's stand-in: `--rbac` (the tokens it issues are held
    to their Roles) and `--custom-resources` (it serves the CRD). Returns
    (proc, kubeconfig, log)."""
    proc, port, log = start_standin(workdir, name, "--seed-namespace", "", "--rbac", "--custom-resources",
                                    env={"REGROUP_STANDIN_HIDE_ORIG": "1"})
    kc = write_kubeconfig(workdir / f"{name}.kubeconfig", f"http://127.0.0.1:{port}", "default")
    return proc, kc, log


def ensure_crd(central):
    """The CRD in the central cluster, Established; a callable that deletes
    it when this call made it, else None (a CRD already there is kept)."""
    made = central.run("get", CRD, check=False).returncode != 0
    if made:
        central("apply", "-f", E2E / "manifests" / "publish-crd.yaml")
    central("wait", "--for=condition=Established", CRD, "--timeout=60s", timeout=90)
    if made:
        return lambda: central.run("delete", CRD, "--ignore-not-found", "--wait=false", check=False)
    return None


def service_account_kubeconfig(central, central_kc, path, ns, sa, bound_secret=None, duration="2h"):
    """A kubeconfig acting as the central ServiceAccount `ns/sa` with a token
    of `kubectl create token` (bound to the Secret `bound_secret` when given:
    deleting it revokes the token); returns (path, token)."""
    args = ["create", "token", sa, "-n", ns, f"--duration={duration}"]
    if bound_secret:
        args += ["--bound-object-kind=Secret", f"--bound-object-name={bound_secret}"]
    token = central(*args).strip()
    cluster = server_of(central_kc)
    write_kubeconfig(path, cluster["server"], ns, {"token": token}, {k: v for k, v in cluster.items() if k != "server"})
    return path, token


def kubeconfig_text(central_kc, ns, token):
    """An inline kubeconfig (as a credentials Secret holds it) for the
    central server with this token."""
    cluster = server_of(central_kc)
    return json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": "c",
                       "clusters": [{"name": "c", "cluster": cluster}],
                       "users": [{"name": "u", "user": {"token": token}}],
                       "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u", "namespace": ns}}]})


# ---- regroup, the remote side's front -------------------------------------------------------------

def front_certificate(directory, svc_ns, host):
    """The front's serving certificate (for `regroup-publish.SVC_NS.svc` and
    `host`) and its CA, written to directory/front.{crt,key} and
    front-ca.crt; returns the CA."""
    from pki import issue, new_ca
    ca = new_ca("e2e-publish-front-ca")
    ca.write(directory, "front-ca")
    issue(ca, SERVICE, dns=[f"{SERVICE}.{svc_ns}.svc"], ips=[host]).write(directory, "front")
    return ca


class Front:
    """One `regroup serve` with `publish:`: the front on `port`, its log."""

    def __init__(self, regroup_bin, directory, name, remote_kc, publish, listen_host="127.0.0.1", env=None):
        self.name, self.dir = name, directory
        self.port, self.http_port, self.metrics_port = free_port(), free_port(), free_port()
        self.config = directory / f"{name}.yaml"
        self.log = directory / f"{name}.log"
        # JSON is YAML: the configuration as regroup reads it.
        self.config.write_text(json.dumps({
            "upstream": {"kubeconfig": str(remote_kc)},
            "listeners": {"http": f"127.0.0.1:{self.http_port}", "metrics": f"127.0.0.1:{self.metrics_port}"},
            "front": {"listen": f"{listen_host}:{self.port}", "certFile": str(directory / "front.crt"),
                      "keyFile": str(directory / "front.key"), "caFile": str(directory / "front-ca.crt"),
                      "requestHeader": {"fromCluster": True}},
            "publish": publish}, indent=1))
        self.proc = subprocess.Popen([regroup_bin, "serve", "-c", str(self.config)], stdout=open(self.log, "w"),
                                     stderr=subprocess.STDOUT, env=dict(os.environ, **(env or {})))
        LOGS.append((f"regroup {name}", self.log))
        try:
            wait_port(self.http_port, self.proc, 30, f"regroup serve ({name}, sidecar)", self.log)
            wait_port(self.port, self.proc, 30, f"regroup serve ({name}, front)", self.log)
        except BaseException:
            stop(self.proc)
            raise

    def text(self):
        return self.log.read_text(errors="replace")

    def stop(self):
        stop(self.proc)


def publish_section(central_kc, target, **extra):
    """A `publish:` section: the published group, `target` the default
    central namespace, connection Secrets every second; `extra` in the
    configuration's own spelling (clusterId, credentials, readOnly, ...)."""
    return dict({"central": {"kubeconfig": str(central_kc)}, "groups": [GROUP], "targetNamespace": target,
                 "connectionSecrets": {"resyncSeconds": 1}}, **extra)


def point_endpoints(remote, svc_ns, host, port):
    """The Service `regroup-publish` (443) and its manual Endpoints: `host:port`."""
    remote("apply", "-n", svc_ns, "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": SERVICE, "namespace": svc_ns},
         "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}},
        {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": SERVICE, "namespace": svc_ns},
         "subsets": [{"addresses": [{"ip": host}], "ports": [{"name": "https", "port": port}]}]}]}))


def register_front(remote, svc_ns, host, port, ca):
    """Points the remote cluster's APIService `v1alpha1.database.acmeco.org`
    at the front (through the Service and Endpoints); returns the callable
    that undoes it (an APIService that was there is restored, else deleted)."""
    point_endpoints(remote, svc_ns, host, port)
    spec = {"group": GROUP, "version": VERSION, "groupPriorityMinimum": 1000, "versionPriority": 15,
            "caBundle": base64.b64encode(ca.cert_pem).decode(),
            "service": {"namespace": svc_ns, "name": SERVICE, "port": 443}}
    found = remote.run("get", "apiservice", APISERVICE, "-o", "json", check=False)
    if found.returncode == 0:  # someone else's: pointed at this run's front, and back at the end
        saved = json.loads(found.stdout)["spec"]
        restore = dict(saved, caBundle=saved.get("caBundle"), insecureSkipTLSVerify=saved.get("insecureSkipTLSVerify"))
        remote("patch", "apiservice", APISERVICE, "--type=merge", "-p", json.dumps({"spec": spec}))
        return lambda: remote.run("patch", "apiservice", APISERVICE, "--type=merge", "-p",
                                  json.dumps({"spec": restore}), check=False)
    remote("create", "-f", "-", input=json.dumps({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": APISERVICE},
        "spec": spec}))
    return lambda: remote.run("delete", "apiservice", APISERVICE, "--ignore-not-found", check=False)


def wait_for_aggregator(remote, where, timeout=90):
    """Until the remote cluster serves the group through the front at
    `where` (a real aggregator first checks availability, which takes
    seconds) and lists it in discovery, which a real aggregator updates a
    moment after it first proxies to the front."""
    deadline = time.monotonic() + timeout
    while True:
        got = remote.run("get", "--raw", f"/apis/{GROUP}/{VERSION}", check=False)
        if got.returncode == 0 and PLURAL in remote.run("api-resources", f"--api-group={GROUP}",
                                                        check=False).stdout:
            return
        if time.monotonic() > deadline:
            status = remote.run("get", "apiservice", APISERVICE, "-o", "jsonpath={.status.conditions}",
                                check=False).stdout
            pytest.fail(f"the remote cluster did not reach the front ({where}) within {timeout}s: "
                        f"{got.stderr}\nAPIService conditions: {status}{remote.log_tails()}")
        time.sleep(1)


def front_host(remote, standin):
    """The address the remote cluster reaches the front at: loopback for a
    stand-in, else REGROUP_E2E_FRONT_HOST or the one test_front.py finds."""
    if standin:
        return "127.0.0.1"
    from test_front import reachable_address
    return reachable_address(remote)
