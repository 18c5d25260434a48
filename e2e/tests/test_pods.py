"""regroup's image in real pods on a real node (issue #54): the archive
dist/build-image.sh makes, imported onto the node, run as a pod, and the
chart installed twice around an unmodified controller.

Real-cluster mode only; each requirement missing skips, saying which:

  REGROUP_E2E_KUBECONFIG       a cluster (admin rights) with a Ready node
  REGROUP_E2E_IMAGE_ARCHIVE    the image archive (dist/build-image.sh's,
                               tagged regroup:VERSION, the chart's default)
  REGROUP_E2E_IMPORT_IMAGE     a command that imports an archive onto every
                               node that may run the pods, given the
                               archive's path as its last argument (`kind
                               load image-archive --name NAME`, or a script
                               running `ctr -n k8s.io images import` there)
  REGROUP_E2E_CONTROLLER_IMAGE (the two-copies tests) an unmodified
                               k8s.io/sample-controller image on the nodes
                               or pullable by them; its entrypoint runs the
                               controller (extra arguments:
                               REGROUP_E2E_CONTROLLER_ARGS, split as a shell
                               would; an archive of it to import first:
                               REGROUP_E2E_CONTROLLER_ARCHIVE)
  REGROUP_E2E_SCHEDULER_IMAGE  (the leader-election test) an unmodified
                               kube-scheduler image on the nodes, its
                               entrypoint the binary
  REGROUP_E2E_KUBECTL_IMAGE    (the in-cluster token test) an image with
                               kubectl at /kubectl, its entrypoint a process
                               that keeps running (pause)
  REGROUP_E2E_CENTRAL_KUBECONFIG (the publish-mode test) a central cluster;
                               REGROUP_E2E_CENTRAL_SERVER_FOR_PODS the URL
                               the pods reach its apiserver at (default: the
                               kubeconfig's server; a loopback one skips)

What runs:
  - regroup's image as a pod: `--version` with `imagePullPolicy: Never` (so
    only the imported image can run), `runAsNonRoot` with no `runAsUser`
    (the kubelet runs it only because the image's user is a numeric
    non-root one), `readOnlyRootFilesystem`, no capabilities: it completes,
    printing the archive's version and commit, from the archive's image,
    as uid and gid 65532 where the kubelet reports the process's identity
    (`status.containerStatuses[].user`, 1.31+: without the image's
    /etc/passwd the group was 0).
  - the chart, with no image values (its default, regroup:appVersion, is
    the archive's tag), installed twice in one namespace around the same
    controller image, each copy under its own groups
    (samplecontroller.rgRUNa/b.example.com, CRDs `regroup render`ed from
    e2e/manifests/crd-foos.yaml with `replicas` allowed to be 0 so that the
    controller's Deployments start no pods): both pods Ready, regroup a
    native sidecar; each copy's Foo gets its Deployment, controlled by that
    Foo (uid), and its status written; with one copy scaled to zero, a Foo
    made in its group gets no Deployment while the other copy's new Foo
    gets one, and once it is back its Foo is reconciled.
  - recovery: the regroup container alone restarted by the kubelet (its
    image changed in place to the same image under its full name: the
    kubelet restarts a native sidecar whose definition changed), the app
    container left running; then the pod deleted. Each time the pod is
    Ready again and the app reconciles again (a Deployment it owns,
    deleted, comes back).
  - regroup's own token re-read when the kubelet swaps its volume's
    `..data` (a Secret volume holding a bound token, replaced, the old one
    revoked); the app starting after regroup serves and stopping before it
    (logs, container times); publish-manifests' remote side at 2 replicas
    (Lease, Service, APIService, a connection Secret copied once; the pod
    serving a client's watch deleted, the client watching again through
    the other with nothing lost); the configuration ConfigMap edited in
    place (reloaded by the running regroup) and changed by `helm upgrade`
    (rolled); a pod's readiness following its upstream (a Service whose
    EndpointSlice the test deletes and makes again).
  - a rolling update (`kubectl rollout restart` of a release): the old
    pod stops as a deleted one does (app first, its last requests through
    regroup, no error line), the new pod reconciles.
  - in-cluster mode's app token passed through: the app (kubectl, its
    token another ServiceAccount's) seen by the apiserver as itself through
    regroup's TLS port, as the pod's ServiceAccount through the plain one.
  - an operator's own manifests (OPERATOR: controller Deployment, webhook
    Service and ValidatingWebhookConfiguration, CRD, kube-system
    leader-election Role/RoleBinding) wrapped with `regroup inject` twice
    and once as a chart with Helm 4's `--post-renderer regroup-inject`:
    pods Ready, Foos reconciled, kube-apiserver's webhook calls counted by
    each copy's regroup alone, the kube-system names per copy.
  - a leader-electing app, kube-scheduler as an operator would ship it
    (in-cluster config, a KubeSchedulerConfiguration electing on a Lease in
    kube-system, its one profile a scheduler name no pod uses; kube-system
    Role/RoleBindings under fixed names), wrapped with `regroup inject`
    twice: both pods Ready, two Leases in kube-system, each named with its
    copy's mark, held by its own copy's pod and renewed.
  - the aggregated front as a pod (examples/front.yaml's values, the app's
    readinessProbe; REGROUP_E2E_APISERVER_IMAGE, REGROUP_E2E_ETCD_IMAGE,
    default the test bed's realk8s.local images): the APIService Available
    on the chart's ClusterIP Service, Flunders created, listed and watched
    through the real aggregator.

Everything is made in a namespace of the run's and cluster-scoped objects
named by the run; all are deleted at the end."""
import base64
import datetime
import http.client
import ipaddress
import json
import os
import re
import select
import shlex
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml

from e2e_support import E2E, REPO, Kubectl, poll
from image_archive_check import Bad, verify
from pki import issue, new_ca

KUBECONFIG = os.environ.get("REGROUP_E2E_KUBECONFIG")
pytestmark = pytest.mark.skipif(
    not KUBECONFIG, reason="real pods need a real cluster: REGROUP_E2E_KUBECONFIG is not set")

HELM = Path(os.environ.get("REGROUP_E2E_HELM") or E2E / ".bin" / "helm")
CHART = REPO / "charts" / "regroup"
RUN = uuid.uuid4().hex[:6]
NS = f"regroup-e2e-pods-{RUN}"
ORIG = "samplecontroller.k8s.io"
GROUPS = {"a": f"samplecontroller.rg{RUN}a.example.com", "b": f"samplecontroller.rg{RUN}b.example.com"}
# The single releases' groups (credentials, start and stop order): not among the two copies.
SINGLE = {c: f"samplecontroller.rg{RUN}{c}.example.com" for c in "tsrow"}
# The two copies `regroup inject` wraps (an operator's own manifests, not the chart).
INJECTED = {c: f"samplecontroller.rg{RUN}{c}.example.com" for c in "ij"}
POST_RENDERED = {"h": f"samplecontroller.rg{RUN}h.example.com"}  # the same as a chart, Helm 4's post-renderer plugin
# The release whose configuration changes: its group, then the ConfigMap's (edited in place), then the upgrade's.
RELOAD = {c: f"samplecontroller.rg{RUN}{c}.example.com" for c in "cde"}
ALL_GROUPS = {**GROUPS, **SINGLE, **INJECTED, **POST_RENDERED, **RELOAD}
PLUGIN = REPO / "charts" / "plugins" / "regroup-inject"
READY_WAIT = 240  # seconds: an image imported, a pod scheduled, started and Ready
RECONCILE_WAIT = 120  # seconds: a controller's informers re-listed through a restarted regroup, its queue retried


def require_env(name, why):
    value = os.environ.get(name)
    if not value:
        pytest.skip(f"{name} is not set: {why}")
    return value


def run(argv, timeout=600, what=None):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        pytest.fail(f"{what or ' '.join(map(str, argv))} failed ({p.returncode}):\n{p.stdout[-3000:]}\n"
                    f"{p.stderr[-3000:]}")
    return p.stdout


def import_archive(path):
    command = shlex.split(os.environ["REGROUP_E2E_IMPORT_IMAGE"])
    run([*command, str(path)], what=f"REGROUP_E2E_IMPORT_IMAGE ({' '.join(command)}) {path}")


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory):
    return Kubectl(KUBECONFIG, tmp_path_factory.mktemp("pods-cache"), NS)


@pytest.fixture(scope="module")
def image(kubectl):
    """The archive, checked (image_archive_check) and imported onto the
    node(s); returns what it holds (tag, digests, config)."""
    archive = require_env("REGROUP_E2E_IMAGE_ARCHIVE", "the regroup image archive to run (dist/build-image.sh)")
    require_env("REGROUP_E2E_IMPORT_IMAGE", "a command that imports an image archive onto the nodes")
    nodes = kubectl.json("get", "nodes")["items"]
    ready = [n["metadata"]["name"] for n in nodes
             if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))]
    if not ready:
        pytest.skip(f"the cluster has no Ready node (nodes: {[n['metadata']['name'] for n in nodes] or 'none'})")
    try:
        held = verify(archive)
    except (Bad, OSError) as e:
        pytest.fail(f"REGROUP_E2E_IMAGE_ARCHIVE {archive}: {e}")
    import_archive(archive)
    return held


@pytest.fixture(scope="module")
def namespace(kubectl):
    kubectl("create", "namespace", NS)
    yield NS
    kubectl.run("delete", "namespace", NS, "--ignore-not-found", "--wait=false", check=False)


def diagnose(kubectl, selector=None):
    """What a failing wait shows: the pods, their containers' states, recent
    events and the regroup containers' last lines."""
    sel = ["-l", selector] if selector else []
    out = [kubectl.run("get", "pods", "-o", "wide", *sel, check=False).stdout]
    listed = kubectl.run("get", "pods", "-o", "json", *sel, check=False)
    for pod in json.loads(listed.stdout)["items"] if listed.returncode == 0 else []:
        st = pod.get("status", {})
        for c in st.get("initContainerStatuses", []) + st.get("containerStatuses", []):
            out.append(f"{pod['metadata']['name']}/{c['name']}: ready={c.get('ready')} "
                       f"restarts={c.get('restartCount')} state={json.dumps(c.get('state'))}")
        if any(c["name"] == "regroup" for c in pod["spec"].get("initContainers", []) + pod["spec"]["containers"]):
            out.append(kubectl.run("logs", pod["metadata"]["name"], "-c", "regroup", "--tail", "20",
                                   check=False).stdout)
    out.append(kubectl.run("get", "events", "--sort-by=.lastTimestamp", check=False).stdout[-3000:])
    return "\n".join(out)


def wait(kubectl, what, check, timeout, selector=None):
    return poll(check, timeout, 2, lambda: f"timed out after {timeout}s waiting for {what}\n"
                                           f"{diagnose(kubectl, selector)}")


def condition(obj, kind):
    return any(c["type"] == kind and c["status"] == "True" for c in obj.get("status", {}).get("conditions", []))


# --- regroup's image, alone -------------------------------------------------------------------------------------


def test_image_runs_as_a_pod(kubectl, image, namespace):
    """`regroup --version` in a pod from the imported image: non-root by the
    image's own user, read-only root filesystem, no capabilities, no pull."""
    labels = image["config"]["config"]["Labels"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "regroup-version", "namespace": namespace},
           "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False,
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{"name": "regroup", "image": image["tag"], "imagePullPolicy": "Never",
                                    "args": ["--version"],
                                    "securityContext": {"readOnlyRootFilesystem": True,
                                                        "allowPrivilegeEscalation": False,
                                                        "capabilities": {"drop": ["ALL"]}}}]}}
    kubectl("apply", "-f", "-", input=json.dumps(pod))

    def finished():
        p = kubectl.json("get", "pod", "regroup-version")
        return p if p["status"].get("phase") in ("Succeeded", "Failed") else None
    done = wait(kubectl, "pod regroup-version to finish", finished, READY_WAIT)
    (status,) = done["status"]["containerStatuses"]
    logs = kubectl("logs", "regroup-version").strip()
    assert done["status"]["phase"] == "Succeeded", f"{json.dumps(status)}\n{logs}\n{diagnose(kubectl)}"
    assert status["state"]["terminated"]["exitCode"] == 0
    assert logs == (f"regroup {labels['org.opencontainers.image.version']} "
                    f"(commit {labels['org.opencontainers.image.revision']})")
    # The archive's image ran: the runtime names it by its manifest (repo
    # digest) or its config (image id) digest.
    assert image["manifest_digest"] in status["imageID"] or image["config_digest"] in status["imageID"], \
        (status["imageID"], image["manifest_digest"], image["config_digest"])
    # Kubernetes 1.31+ reports the process's identity when the runtime does (SupplementalGroupsPolicy).
    if status.get("user", {}).get("linux"):
        assert (status["user"]["linux"]["uid"], status["user"]["linux"]["gid"]) == (65532, 65532)
    spec = done["spec"]["containers"][0]
    assert spec["securityContext"]["readOnlyRootFilesystem"] is True and "runAsUser" not in spec["securityContext"]


# --- the chart, twice, around an unmodified controller ------------------------------------------------------------


class Copies:
    """The two releases: kubectl, the Foos made, helpers to read them."""

    def __init__(self, kubectl, regroup_bin):
        self.kubectl, self.regroup_bin = kubectl, regroup_bin

    def foo(self, copy, name, deployment):
        """A Foo made straight on the cluster, in the copy's group; returns its uid."""
        obj = {"apiVersion": f"{ALL_GROUPS[copy]}/v1alpha1", "kind": "Foo",
               "metadata": {"name": name, "namespace": NS},
               "spec": {"deploymentName": deployment, "replicas": 0}}
        return json.loads(self.kubectl("create", "-f", "-", "-o", "json", input=json.dumps(obj)))["metadata"]["uid"]

    def deployment(self, name):
        p = self.kubectl.run("get", "deployment", name, "-o", "json", check=False)
        return json.loads(p.stdout) if p.returncode == 0 else None

    def owned(self, name, copy, uid):
        """The Deployment `name` once it exists, checked to be controlled by the copy's Foo `uid`."""
        d = self.deployment(name)
        if not d:
            return None
        (ref,) = d["metadata"].get("ownerReferences", [None])
        assert ref and (ref["apiVersion"], ref["kind"], ref["uid"], ref.get("controller")) == \
            (f"{ALL_GROUPS[copy]}/v1alpha1", "Foo", uid, True), f"{name}: {d['metadata']}"
        return d

    def wait_owned(self, name, copy, uid, timeout=RECONCILE_WAIT):
        return wait(self.kubectl, f"Deployment {name}, controlled by copy {copy}'s Foo",
                    lambda: self.owned(name, copy, uid), timeout, f"app.kubernetes.io/instance=rg-{copy}")

    def pods(self, copy):
        items = self.kubectl.json("get", "pods", "-l", f"app.kubernetes.io/instance=rg-{copy}")["items"]
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]

    def ready_pod(self, copy):
        def one_ready():
            pods = self.pods(copy)
            return pods[0] if len(pods) == 1 and condition(pods[0], "Ready") else None
        return wait(self.kubectl, f"copy {copy}'s pod Ready", one_ready, READY_WAIT,
                    f"app.kubernetes.io/instance=rg-{copy}")


def crd_for(regroup_bin, copy, tmp):
    """e2e/manifests/crd-foos.yaml renamed into the copy's group, `replicas`
    allowed to be 0 (the controller's Deployments then start no pod)."""
    rules = tmp / f"rules-{copy}.yaml"
    rules.write_text(yaml.safe_dump({"rules": [{"from": ORIG, "to": ALL_GROUPS[copy]}]}))
    out = run([regroup_bin, "render", "-c", str(rules), "-f", str(E2E / "manifests" / "crd-foos.yaml")])
    (crd,) = [d for d in yaml.safe_load_all(out) if d]
    for version in crd["spec"]["versions"]:
        version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"]["minimum"] = 0
    return crd


def values_for(copy, controller):
    container = {"name": "controller", "image": controller, "imagePullPolicy": "IfNotPresent",
                 "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "readOnlyRootFilesystem": True,
                                     "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}
    args = shlex.split(os.environ.get("REGROUP_E2E_CONTROLLER_ARGS", ""))
    if args:
        container["args"] = args
    return {"rules": [{"from": ORIG, "to": ALL_GROUPS[copy]}],
            "app": {"containers": [container]},
            # What sample-controller needs, in the app's names (the chart renames the group).
            "rbac": {"rules": [
                {"apiGroups": [ORIG], "resources": ["foos"], "verbs": ["get", "list", "watch", "update"]},
                {"apiGroups": [ORIG], "resources": ["foos/status"], "verbs": ["update"]},
                {"apiGroups": ["apps"], "resources": ["deployments"],
                 "verbs": ["get", "list", "watch", "create", "update", "delete"]},
                {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]}]}}


@pytest.fixture(scope="module")
def controller(image):
    """The unmodified controller's image, imported first when given as an archive."""
    name = require_env("REGROUP_E2E_CONTROLLER_IMAGE",
                       "an unmodified sample-controller image (k8s.io/sample-controller) to run twice")
    if os.environ.get("REGROUP_E2E_CONTROLLER_ARCHIVE"):
        import_archive(os.environ["REGROUP_E2E_CONTROLLER_ARCHIVE"])
    return name


@pytest.fixture(scope="module")
def copies(kubectl, image, controller, namespace, regroup_bin, tmp_path_factory):
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    if image["tag"] != f"regroup:{chart['appVersion']}":
        pytest.fail(f"the archive is tagged {image['tag']} but the chart defaults to regroup:{chart['appVersion']}: "
                    "make the archive from this checkout (dist/build-image.sh)")
    tmp = tmp_path_factory.mktemp("pods-chart")
    env = dict(os.environ, HELM_CONFIG_HOME=str(tmp / "helm-config"), HELM_CACHE_HOME=str(tmp / "helm-cache"),
               HELM_DATA_HOME=str(tmp / "helm-data"))
    crds = [crd_for(regroup_bin, copy, tmp) for copy in GROUPS]
    installed = []
    try:
        kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": crds}))
        for crd in crds:
            kubectl("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}", "--timeout=60s",
                    timeout=90)
        for copy in GROUPS:
            path = tmp / f"values-{copy}.yaml"
            path.write_text(yaml.safe_dump(values_for(copy, controller)))
            p = subprocess.run([str(HELM), "install", f"rg-{copy}", str(CHART), "-n", NS, "--kubeconfig", KUBECONFIG,
                                "-f", str(path)], capture_output=True, text=True, timeout=300, env=env)
            if p.returncode != 0:
                pytest.fail(f"helm install rg-{copy} failed:\n{p.stdout}\n{p.stderr}")
            installed.append(copy)
        c = Copies(kubectl, regroup_bin)
        for copy in GROUPS:
            c.ready_pod(copy)
        yield c
    finally:
        for copy in installed:
            subprocess.run([str(HELM), "uninstall", f"rg-{copy}", "-n", NS, "--kubeconfig", KUBECONFIG],
                           capture_output=True, text=True, timeout=300, env=env)
        kubectl.run("delete", "-f", "-", "--ignore-not-found", "--wait=false", check=False,
                    input=json.dumps({"apiVersion": "v1", "kind": "List", "items": crds}))


def test_two_copies_ready_with_regroup_as_native_sidecar(copies):
    """Both releases' pods Ready, from the chart's default image (the
    archive's), regroup a native sidecar running as the image's user with a
    read-only root."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    for copy in GROUPS:
        template = copies.kubectl.json("get", "deployment", f"rg-{copy}-regroup")["spec"]["template"]
        (regroup,) = [c for c in template["spec"]["initContainers"] if c["name"] == "regroup"]
        assert regroup["image"] == f"regroup:{chart['appVersion']}"
        assert regroup["imagePullPolicy"] == "IfNotPresent"
        assert regroup["restartPolicy"] == "Always"
        sc = regroup["securityContext"]
        assert sc["runAsNonRoot"] is True and sc["readOnlyRootFilesystem"] is True
        pod = copies.ready_pod(copy)
        statuses = {s["name"]: s for s in pod["status"]["initContainerStatuses"] + pod["status"]["containerStatuses"]}
        assert statuses["regroup"]["ready"] and statuses["regroup"]["started"]
        assert statuses["controller"]["ready"]


def test_each_copy_reconciles_its_own_foo(copies):
    uids = {copy: copies.foo(copy, f"foo-{copy}", f"dep-{copy}") for copy in GROUPS}
    for copy in GROUPS:
        copies.wait_owned(f"dep-{copy}", copy, uids[copy])

    def status_written(copy):
        foo = copies.kubectl.json("get", f"foos.{GROUPS[copy]}", f"foo-{copy}")
        return "availableReplicas" in foo.get("status", {})
    for copy in GROUPS:
        wait(copies.kubectl, f"copy {copy}'s Foo status", lambda: status_written(copy), RECONCILE_WAIT)
    # Each Foo's one Deployment, controlled by it alone.
    by_foo = {d["metadata"]["name"]: [r["uid"] for r in d["metadata"].get("ownerReferences", [])]
              for d in copies.kubectl.json("get", "deployments")["items"]
              if d["metadata"]["name"].startswith("dep-")}
    assert by_foo == {"dep-a": [uids["a"]], "dep-b": [uids["b"]]}


def scale(copies, copy, replicas):
    copies.kubectl("scale", f"deployment/rg-{copy}-regroup", f"--replicas={replicas}")


def test_a_copy_does_not_reconcile_the_others(copies):
    """Copy b stopped: its new Foo gets no Deployment while copy a's new Foo
    gets one (copy a sees only its own group); copy b back: its Foo is reconciled."""
    scale(copies, "b", 0)
    try:
        # Gone, not only terminating: a terminating pod's app still reconciles until it is stopped.
        wait(copies.kubectl, "copy b's pod gone", lambda: not copies.kubectl.json(
            "get", "pods", "-l", "app.kubernetes.io/instance=rg-b")["items"], READY_WAIT)
        uid_b = copies.foo("b", "late-b", "late-dep-b")
        uid_a = copies.foo("a", "late-a", "late-dep-a")
        copies.wait_owned("late-dep-a", "a", uid_a)
        time.sleep(10)  # past copy a's reconcile of its own Foo, made after b's
        assert copies.deployment("late-dep-b") is None, "copy a reconciled copy b's Foo"
    finally:
        scale(copies, "b", 1)
    copies.ready_pod("b")
    copies.wait_owned("late-dep-b", "b", uid_b)


def restart_ids(pod):
    st = pod["status"]
    return {s["name"]: (s.get("containerID"), s["restartCount"])
            for s in st.get("initContainerStatuses", []) + st["containerStatuses"]}


def reconciles_again(copies, copy, name):
    """A Deployment the copy's app controls, deleted, comes back (a new uid, the same owner)."""
    before = copies.deployment(name)
    assert before, f"{name} is missing before the check"
    owner = before["metadata"]["ownerReferences"][0]["uid"]
    copies.kubectl("delete", "deployment", name, "--wait=true", timeout=90)
    again = copies.wait_owned(name, copy, owner)
    assert again["metadata"]["uid"] != before["metadata"]["uid"]


def test_regroup_container_restarted_app_recovers(copies):
    """The kubelet restarts the regroup container alone (its image changed in
    place to the same image's full name: a native sidecar whose definition
    changed is restarted); the app container keeps running, the pod is
    Ready again and the app reconciles through the new regroup."""
    uid = copies.foo("a", "restart-a", "restart-dep-a")
    copies.wait_owned("restart-dep-a", "a", uid)
    pod = copies.ready_pod("a")
    name = pod["metadata"]["name"]
    before = restart_ids(pod)
    index = [c["name"] for c in pod["spec"]["initContainers"]].index("regroup")
    image = pod["spec"]["initContainers"][index]["image"]
    full = image if "/" in image else f"docker.io/library/{image}"
    assert full != image, f"{image} is already a full name: nothing to change it to"
    copies.kubectl("patch", "pod", name, "--type=json",
                   "-p", json.dumps([{"op": "replace", "path": f"/spec/initContainers/{index}/image", "value": full}]))

    def restarted():
        p = copies.kubectl.json("get", "pod", name)
        ids = restart_ids(p)
        return p if ids["regroup"][0] != before["regroup"][0] and condition(p, "Ready") else None
    after = restart_ids(wait(copies.kubectl, f"{name}'s regroup container restarted and the pod Ready", restarted,
                             READY_WAIT, "app.kubernetes.io/instance=rg-a"))
    assert after["regroup"][1] > before["regroup"][1], (before, after)
    assert after["controller"] == before["controller"], f"the app container was restarted too: {before} {after}"
    reconciles_again(copies, "a", "restart-dep-a")


def test_pod_deleted_app_recovers(copies):
    """Copy a's pod deleted: its replacement is Ready and the app reconciles again."""
    uid = copies.foo("a", "deleted-a", "deleted-dep-a")
    copies.wait_owned("deleted-dep-a", "a", uid)
    old = copies.ready_pod("a")["metadata"]["name"]
    copies.kubectl("delete", "pod", old, "--wait=true", timeout=120)
    new = copies.ready_pod("a")
    assert new["metadata"]["name"] != old
    reconciles_again(copies, "a", "deleted-dep-a")


# --- one release at a time: regroup's credential files, start and stop order ------------------------------------


def helm_env(tmp):
    return dict(os.environ, HELM_CONFIG_HOME=str(tmp / "helm-config"), HELM_CACHE_HOME=str(tmp / "helm-cache"),
                HELM_DATA_HOME=str(tmp / "helm-data"))


class Singles:
    """Releases installed one per test (rg-t, rg-s), each around the
    controller under its own group (SINGLE), all uninstalled at the end."""

    def __init__(self, kubectl, regroup_bin, controller, tmp):
        self.kubectl, self.regroup_bin, self.controller, self.tmp = kubectl, regroup_bin, controller, tmp
        self.env, self.installed, self.crds = helm_env(tmp), [], []
        self.copies = Copies(kubectl, regroup_bin)

    def install(self, copy, app_args=(), **values):
        """The CRD in the copy's group, then the chart with values_for's values
        updated by `values` (top-level keys; `app` merged one level down), the
        controller given `app_args` too."""
        crd = crd_for(self.regroup_bin, copy, self.tmp)
        self.crds.append(crd)
        self.kubectl("apply", "-f", "-", input=json.dumps(crd))
        self.kubectl("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}", "--timeout=60s",
                     timeout=90)
        v = values_for(copy, self.controller)
        container = v["app"]["containers"][0]
        container["args"] = [*container.get("args", []), *app_args]
        for key, value in values.items():
            v[key] = {**v[key], **value} if key == "app" else value
        path = self.tmp / f"values-{copy}.yaml"
        path.write_text(yaml.safe_dump(v))
        run([str(HELM), "install", f"rg-{copy}", str(CHART), "-n", NS, "--kubeconfig", KUBECONFIG, "-f", str(path)],
            timeout=300, what=f"helm install rg-{copy}")
        self.installed.append(copy)

    def close(self):
        for copy in self.installed:
            subprocess.run([str(HELM), "uninstall", f"rg-{copy}", "-n", NS, "--kubeconfig", KUBECONFIG],
                           capture_output=True, text=True, timeout=300, env=self.env)
        if self.crds:
            self.kubectl.run("delete", "-f", "-", "--ignore-not-found", "--wait=false", check=False,
                             input=json.dumps({"apiVersion": "v1", "kind": "List", "items": self.crds}))


@pytest.fixture(scope="module")
def singles(kubectl, image, controller, namespace, regroup_bin, tmp_path_factory):
    s = Singles(kubectl, regroup_bin, controller, tmp_path_factory.mktemp("pods-singles"))
    try:
        yield s
    finally:
        s.close()


def metrics(kubectl, pod, name, **labels):
    """The sum of the series `name` with these labels in regroup's /metrics,
    read through the apiserver's pod proxy (the chart's metrics port)."""
    text = kubectl("get", "--raw", f"/api/v1/namespaces/{NS}/pods/{pod}:9090/proxy/metrics")
    total = 0.0
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)", line)
        if m and m.group(1) == name:
            have = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"', m.group(3) or ""))
            if all(have.get(k) == v for k, v in labels.items()):
                total += float(m.group(4))
    return total


def status_with_token(kubectl, path, token):
    """The status the cluster (the admin kubeconfig's server and CA) answers
    to a GET of `path` with this bearer token alone."""
    cluster = json.loads(kubectl("config", "view", "--raw", "--minify", "--flatten", "-o", "json"))
    cluster = cluster["clusters"][0]["cluster"]
    ctx = ssl.create_default_context()
    if cluster.get("certificate-authority-data"):
        ctx.load_verify_locations(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    if cluster.get("insecure-skip-tls-verify"):
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    req = urllib.request.Request(cluster["server"].rstrip("/") + path, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def api_client(kubectl, tmp):
    """The kubeconfig's server, an SSL context trusting its CA and holding
    its client certificate (written to `tmp`, owner-only), and its token as
    headers: for requests kubectl can't make (a watch read event by event,
    an error status's body)."""
    view = json.loads(kubectl("config", "view", "--raw", "--minify", "--flatten", "-o", "json"))
    cluster, user = view["clusters"][0]["cluster"], view["users"][0]["user"]
    ctx = ssl.create_default_context()
    if cluster.get("certificate-authority-data"):
        ctx.load_verify_locations(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    if cluster.get("insecure-skip-tls-verify"):
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    if user.get("client-certificate-data"):
        files = []
        for key in ("client-certificate-data", "client-key-data"):
            path = tmp / f"api-client-{key}"
            path.touch(mode=0o600)
            path.write_bytes(base64.b64decode(user[key]))
            files.append(path)
        ctx.load_cert_chain(*files)
    headers = {"Authorization": f"Bearer {user['token']}"} if user.get("token") else {}
    return cluster["server"].rstrip("/"), ctx, headers


def api_get(client, path, timeout=15):
    """(status, body) of a GET through the cluster, an error status's too."""
    server, ctx, headers = client
    try:
        with urllib.request.urlopen(urllib.request.Request(server + path, headers=headers), timeout=timeout,
                                    context=ctx) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


class Watcher(threading.Thread):
    """A client watching `path` as client-go's reflector does: from a
    resourceVersion, and whenever a stream ends, again from the last one it
    got (a failed attempt retried after half a second). Records every
    event's type and name, the streams opened, the ERROR events (a 410 Gone
    means events were lost) and the failed attempts."""

    def __init__(self, client, path, rv):
        super().__init__(daemon=True)
        self.client, self.path, self.rv = client, path, rv
        self.events, self.errors, self.failures, self.streams = [], [], [], 0
        self.stopped = threading.Event()

    def run(self):
        server, ctx, headers = self.client
        while not self.stopped.is_set():
            url = f"{server}{self.path}?watch=1&resourceVersion={self.rv}&timeoutSeconds=600"
            try:
                with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=660,
                                            context=ctx) as r:
                    self.streams += 1
                    for line in r:
                        event = json.loads(line)
                        if event["type"] == "ERROR":
                            self.errors.append(event["object"])
                            self.stopped.set()  # a reflector would list again: this client stops, saying so
                            break
                        self.events.append((event["type"], event["object"]["metadata"]["name"]))
                        self.rv = event["object"]["metadata"]["resourceVersion"]
            except (OSError, ValueError, http.client.HTTPException) as e:
                self.failures.append(f"{type(e).__name__}: {str(e)[:200]}")
                self.stopped.wait(0.5)

    def added(self):
        return [name for kind, name in self.events if kind == "ADDED"]


def test_regroup_rereads_its_token_swapped_by_the_kubelet(singles):
    """regroup's own credential as the kubelet lays it out and replaces it:
    release rg-t in kubeconfig mode (the app holds no token; every request
    it makes goes out with regroup's), regroup's service-account directory
    a Secret volume holding `token`, `ca.crt` and `namespace`, which the
    kubelet writes, and rewrites, the way it writes a projected
    service-account volume (its atomic writer: a timestamped directory and
    the `..data` symlink swapped to it). The token is a TokenRequest token
    bound to a Secret (deleting that Secret revokes it). The test puts a
    second token into the volume's Secret: once the kubelet has swapped
    `..data`, regroup re-reads the file (`regroup_credential_refreshes_total
    {source="token_file"}`); the first token is then revoked (the cluster
    answers it 401) and the app keeps reconciling through regroup, with no
    401 from the cluster passed to it and neither container restarted.

    Not a projected token rotated by the kubelet itself: the shortest
    `expirationSeconds` the apiserver accepts is 600 s, rotated at 80 % of
    its lifetime (8 minutes)."""
    k, c = singles.kubectl, singles.copies
    # The ServiceAccount's tokens, each bound to a Secret of its own.
    def token(n):
        k("create", "secret", "generic", f"rg-t-bound-{n}")
        return k("create", "token", "rg-t-regroup", "--bound-object-kind=Secret", f"--bound-object-name=rg-t-bound-{n}",
                 "--duration=10m").strip()

    def credentials(tok):
        return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "rg-t-credentials", "namespace": NS},
                "stringData": {"token": tok, "ca.crt": ca, "namespace": NS}}
    ca = k.json("get", "configmap", "kube-root-ca.crt")["data"]["ca.crt"]
    # Installed with no pod; its regroup's service-account volume then replaced by the Secret's, and one pod started.
    # sample-controller reads no KUBECONFIG variable, only its --kubeconfig (the chart's file, named by the variable).
    singles.install("t", app_args=["--kubeconfig=$(KUBECONFIG)"], mode="kubeconfig", app={"replicas": 0})
    template = k.json("get", "deployment", "rg-t-regroup")["spec"]["template"]
    assert template["spec"]["serviceAccountName"] == "rg-t-regroup"
    first = token(1)
    k("apply", "-f", "-", input=json.dumps(credentials(first)))
    volumes = k.json("get", "deployment", "rg-t-regroup")["spec"]["template"]["spec"]["volumes"]
    index = [v["name"] for v in volumes].index("regroup-upstream-sa")
    assert "projected" in volumes[index], volumes[index]
    k("patch", "deployment", "rg-t-regroup", "--type=json", "-p", json.dumps([
        {"op": "replace", "path": f"/spec/template/spec/volumes/{index}",
         "value": {"name": "regroup-upstream-sa", "secret": {"secretName": "rg-t-credentials", "defaultMode": 0o444}}},
        {"op": "replace", "path": "/spec/replicas", "value": 1}]))
    pod = c.ready_pod("t")
    name = pod["metadata"]["name"]
    assert [v for v in pod["spec"]["volumes"] if v["name"] == "regroup-upstream-sa"][0]["secret"]["secretName"] == \
        "rg-t-credentials"
    uid = c.foo("t", "token-1", "token-dep-1")
    c.wait_owned("token-dep-1", "t", uid)
    before = restart_ids(pod)
    read = metrics(k, name, "regroup_credential_refreshes_total", source="token_file")
    # (The read at start is not counted: the series appears with the first re-read.)
    refused = metrics(k, name, "regroup_requests_total", code="401")

    # The second token into the volume: the kubelet swaps `..data`; each Foo made meanwhile sends the app's
    # requests through regroup, which checks the file's stamp before using it.
    second = token(2)
    k("apply", "-f", "-", input=json.dumps(credentials(second)))
    made = []

    def reread():
        if metrics(k, name, "regroup_credential_refreshes_total", source="token_file") > read:
            return True
        made.append(c.foo("t", f"swap-{len(made)}", f"swap-dep-{len(made)}"))
        return False
    wait(k, "regroup to re-read its token file after the kubelet's swap", reread, 180,
         "app.kubernetes.io/instance=rg-t")
    # The first token revoked: the cluster refuses it ...
    k("delete", "secret", "rg-t-bound-1")
    path = f"/apis/{ALL_GROUPS['t']}/v1alpha1/namespaces/{NS}/foos"
    wait(k, "the cluster to refuse the first token", lambda: status_with_token(k, path, first) == 401, 60)
    assert status_with_token(k, path, second) == 200
    # ... and the app keeps working through regroup: a new Foo reconciled, a Deployment it owns deleted comes back.
    uid = c.foo("t", "token-2", "token-dep-2")
    c.wait_owned("token-dep-2", "t", uid)
    reconciles_again(c, "t", "token-dep-1")
    assert metrics(k, name, "regroup_requests_total", code="401") == refused, "the cluster refused regroup's token"
    after = k.json("get", "pod", name)
    assert restart_ids(after) == before, "a container restarted"
    logs = k("logs", name, "-c", "regroup")
    assert first not in logs and second not in logs, "a token in regroup's log"


@pytest.mark.skipif(not os.environ.get("REGROUP_E2E_SLOW"),
                    reason="about 12 minutes (a 600 s projected token renewed by the kubelet at 80 %, then expired): "
                           "set REGROUP_E2E_SLOW=1")
def test_regroup_follows_the_kubelets_own_token_rotation(singles):
    """The kubelet's own rotation, no Secret in between: release rg-r in
    kubeconfig mode (every request with regroup's token), regroup's
    projected service-account token at the shortest `expirationSeconds`
    the apiserver allows (600). The kubelet renews it at 80 % of its life
    and swaps `..data`: regroup re-reads it (the refresh counter rises
    while Foos made every 20 s send the app's requests through it); once
    the first token has expired (its pod's start + 600 s + the apiserver's
    one-minute leeway), the app still reconciles, with no 401 passed to it
    and no restart."""
    k, c = singles.kubectl, singles.copies
    singles.install("r", app_args=["--kubeconfig=$(KUBECONFIG)"], mode="kubeconfig", app={"replicas": 0})
    volumes = k.json("get", "deployment", "rg-r-regroup")["spec"]["template"]["spec"]["volumes"]
    index = [v["name"] for v in volumes].index("regroup-upstream-sa")
    (source,) = [i for i, src in enumerate(volumes[index]["projected"]["sources"]) if "serviceAccountToken" in src]
    path = f"/spec/template/spec/volumes/{index}/projected/sources/{source}/serviceAccountToken/expirationSeconds"
    k("patch", "deployment", "rg-r-regroup", "--type=json", "-p", json.dumps([
        {"op": "replace", "path": path, "value": 600},
        {"op": "replace", "path": "/spec/replicas", "value": 1}]))
    pod = c.ready_pod("r")
    name = pod["metadata"]["name"]
    uid = c.foo("r", "rotate-0", "rotate-dep-0")
    c.wait_owned("rotate-dep-0", "r", uid)
    before = restart_ids(pod)
    read = metrics(k, name, "regroup_credential_refreshes_total", source="token_file")
    refused = metrics(k, name, "regroup_requests_total", code="401")
    made = []

    def reread():
        if metrics(k, name, "regroup_credential_refreshes_total", source="token_file") > read:
            return True
        made.append(c.foo("r", f"rotate-{len(made) + 1}", f"rotate-dep-{len(made) + 1}"))
        return False
    poll(reread, 660, 20, lambda: f"regroup did not re-read its projected token within 660 s\n{diagnose(k)}")
    expired = instant(pod["status"]["startTime"]) + datetime.timedelta(seconds=600 + 75)
    left = (expired - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
    if left > 0:
        time.sleep(left)
    uid = c.foo("r", "rotate-after", "rotate-dep-after")
    c.wait_owned("rotate-dep-after", "r", uid)
    for i, u in enumerate(made, 1):
        c.wait_owned(f"rotate-dep-{i}", "r", u)
    assert metrics(k, name, "regroup_requests_total", code="401") == refused, "the cluster refused regroup's token"
    assert restart_ids(k.json("get", "pod", name)) == before, "a container restarted"


def stamped(text):
    """`kubectl logs --timestamps` lines as (the runtime's time of the line, the line)."""
    out = []
    for line in text.splitlines():
        ts, _, rest = line.partition(" ")
        out.append((instant(ts), rest))
    return out


def instant(ts):
    """An RFC 3339 time (nanoseconds or none) as a datetime, to the microsecond."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z", ts)
    assert m, ts
    return datetime.datetime.fromisoformat(m.group(1) + "." + (m.group(2) or "0")[:6].ljust(6, "0") + "+00:00")


def request_lines(log):
    """regroup's request log lines (JSON, target regroup::request) as (time, fields)."""
    out = []
    for t, line in log:
        if '"regroup::request"' in line:
            out.append((t, json.loads(line)["fields"]))
    return out


def klog_errors(log):
    """The app's klog lines of severity E or F (`E1204 17:03:36.661724 ...`)."""
    return [line for _, line in log if re.match(r"^[EF]\d{4} ", line)]


def test_app_starts_after_regroup_serves_and_stops_before_it(singles):
    """Release rg-s, the chart as it is (in-cluster mode, regroup a native
    sidecar). Start: regroup logs "regroup serving" before the app's first
    log line, its container started no later than the app's, and neither
    restarted (the app never ran without regroup). Stop: the pod deleted,
    the app's container finishes first (exit 0) and regroup's after it
    (exit 0; finish times from the pod's last status, the watch's DELETED
    event); regroup begins its shutdown only after the app's last log line,
    and logs the app's last requests (its watches, ended by the app) after
    the pod's deletion; no E or F line in the app's log while it
    stops, and before that none but 409 Conflicts on a Foo's update (the
    controller's stale informer copy, retried, as without regroup)."""
    k, c = singles.kubectl, singles.copies
    singles.install("s")
    pod = c.ready_pod("s")
    name = pod["metadata"]["name"]
    uid = c.foo("s", "order-1", "order-dep-1")
    c.wait_owned("order-dep-1", "s", uid)
    pod = k.json("get", "pod", name)
    st = {s["name"]: s for s in pod["status"]["initContainerStatuses"] + pod["status"]["containerStatuses"]}
    assert st["regroup"]["restartCount"] == 0 and st["controller"]["restartCount"] == 0, restart_ids(pod)
    assert instant(st["regroup"]["state"]["running"]["startedAt"]) <= \
        instant(st["controller"]["state"]["running"]["startedAt"])
    regroup_log = stamped(k("logs", name, "-c", "regroup", "--timestamps"))
    app_log = stamped(k("logs", name, "-c", "controller", "--timestamps"))
    (serving,) = [t for t, line in regroup_log if '"message":"regroup serving' in line and '"listen":"127.0.0.1:8001"'
                  not in line][:1] or [None]
    assert serving and app_log, f"regroup:\n{regroup_log[:10]}\napp:\n{app_log[:10]}"
    assert serving < app_log[0][0], (serving, app_log[0])

    stopped_in_order(k, name, lambda: k("delete", "pod", name, "--wait=true", timeout=120))


def stopped_in_order(k, name, stop):
    """Pod `name` (the chart's, sample-controller as its app) stopped by
    `stop()`, which returns once the pod is gone: its states followed
    through a watch (its DELETED event holds the last status), both
    containers' logs to the end. The app's container finished first
    (exit 0), regroup's after it (exit 0); regroup began its shutdown after
    the app's last log line and logged requests of the app between the
    pod's deletion and that, a watch the app ended among them; no E or F line in the app's
    log while stopping, none before but 409 Conflicts. Returns the app's
    requests regroup logged while it stopped."""
    watch = subprocess.Popen(k.argv("get", "pod", name, "--watch", "--output-watch-events", "-o", "json"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    follow = {n: subprocess.Popen(k.argv("logs", name, "-c", n, "--timestamps", "-f"), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for n in ("regroup", "controller")}
    try:
        time.sleep(2)
        stop()
        logs = {n: p.communicate(timeout=60)[0] for n, p in follow.items()}
        time.sleep(3)  # the watch's last events
    finally:
        for p in (watch, *follow.values()):
            if p.poll() is None:
                p.terminate()
        out, err = watch.communicate(timeout=30)
    events, dec, i = [], json.JSONDecoder(), 0
    while i < len(out):
        if out[i].isspace():
            i += 1
            continue
        e, i = dec.raw_decode(out, i)
        events.append(e)
    # The last status the kubelet wrote (the DELETED event's, when the watch got it before it stopped).
    assert events and events[-1]["object"]["metadata"].get("deletionTimestamp"), \
        f"{[e['type'] for e in events]}\n{err}"
    last = events[-1]["object"]["status"]
    done = {s["name"]: s["state"].get("terminated") for s in last["initContainerStatuses"] + last["containerStatuses"]}
    assert done["controller"] and done["regroup"], json.dumps(last, indent=1)
    assert done["controller"]["exitCode"] == 0, done
    assert done["regroup"]["exitCode"] == 0, done
    assert instant(done["regroup"]["finishedAt"]) >= instant(done["controller"]["finishedAt"]), done
    regroup_log, app_log = stamped(logs["regroup"]), stamped(logs["controller"])
    (stopping,) = [t for t, line in regroup_log if '"message":"shutting down' in line]
    assert stopping >= app_log[-1][0], (stopping, app_log[-1])
    # The app's last requests went through regroup: lines regroup logged between the pod's deletion (its first
    # deletionTimestamp less the grace period: whole seconds) and its own shutdown, among them a watch the app
    # ended (its informers stopping: "end":"client"). Not from the app's first "Shutting down" line: the app
    # cancels its watches and logs that line at once, either first (seen: its watches ended 1.9 ms before it).
    app_stops = [t for t, line in app_log if "Shutting down" in line]
    assert app_stops, app_log[-10:]
    # (The first event with a deletionTimestamp: the kubelet's final delete, grace 0, moves it to its own time.)
    meta = [e["object"]["metadata"] for e in events if e["object"]["metadata"].get("deletionTimestamp")][0]
    deleted = instant(meta["deletionTimestamp"]) - datetime.timedelta(seconds=meta["deletionGracePeriodSeconds"])
    last_requests = [f for t, f in request_lines(regroup_log) if deleted <= t <= stopping]
    assert [f for f in last_requests if f.get("end") == "client"], \
        f"regroup logged no request the app ended after {deleted}:\n{regroup_log[-15:]}"
    # No error line while stopping; before it, none but optimistic-concurrency conflicts (sample-controller updates a
    # Foo's status from its informer's copy, which a second update event can find stale: 409, retried at once, as
    # straight on a cluster).
    assert klog_errors([(t, line) for t, line in app_log if t >= app_stops[0]]) == []
    errors = [line for line in klog_errors(app_log) if "the object has been modified" not in line]
    assert errors == [], errors
    return last_requests


def test_rolling_update_old_pod_stops_in_order_new_pod_reconciles(singles):
    """Release rg-o (the chart as it is: in-cluster mode, regroup a native
    sidecar), its Deployment rolled by `kubectl rollout restart` (the
    chart's RollingUpdate strategy: the new pod started and Ready before
    the old one is stopped). The old pod stops as a deleted one does
    (stopped_in_order): the app's container first, exit 0; regroup after
    it, exit 0, having logged the app's last requests after the app began
    stopping; no error line in the old app's log. The rollout completes,
    one pod left, a new one, and it reconciles a new Foo and a Deployment
    the old pod's app made, deleted."""
    k, c = singles.kubectl, singles.copies
    singles.install("o")
    old = c.ready_pod("o")["metadata"]["name"]
    uid = c.foo("o", "roll-1", "roll-dep-1")
    c.wait_owned("roll-dep-1", "o", uid)
    t0 = time.monotonic()

    def rolled():
        k("rollout", "restart", "deployment/rg-o-regroup")
        k("wait", "--for=delete", f"pod/{old}", "--timeout=180s", timeout=200)
    requests = stopped_in_order(k, old, rolled)
    k("rollout", "status", "deployment/rg-o-regroup", "--timeout=180s", timeout=200)
    took = time.monotonic() - t0
    new = c.ready_pod("o")
    assert new["metadata"]["name"] != old
    assert "kubectl.kubernetes.io/restartedAt" in new["metadata"].get("annotations", {}), new["metadata"]
    uid = c.foo("o", "roll-2", "roll-dep-2")
    c.wait_owned("roll-dep-2", "o", uid)
    reconciles_again(c, "o", "roll-dep-1")
    print(f"rolling update: {old} -> {new['metadata']['name']} in {took:.0f}s; the old app's last requests "
          f"through regroup while it stopped: {[(r.get('verb'), r.get('path'), r.get('status')) for r in requests]}")


def test_in_cluster_mode_passes_the_apps_own_token_through(singles, tmp_path):
    """docs/deploy.md, "2. in-cluster (way 2)": the API server sees the
    app's identity, regroup passes its token through. Release rg-w
    (in-cluster mode), its app a container of kubectl (an image of the
    static binary, REGROUP_E2E_KUBECTL_IMAGE; its entrypoint a process
    that waits) using its in-cluster configuration: regroup's loopback TLS
    port and CA, the token at the standard path. That token is made not
    the pod's: the app's service-account volume's token source replaced
    by a Secret holding a token of another ServiceAccount, rg-w-app (the
    chart's RBAC, a list of ConfigMaps, is granted to the pod's own
    ServiceAccount, regroup's, only). From the app container:
    `kubectl auth whoami` (a SelfSubjectReview, through regroup: its
    request line says so) answers rg-w-app, and listing ConfigMaps is
    refused naming rg-w-app; the same two through regroup's plain
    loopback listener with no token (regroup adds its own) answer the
    pod's ServiceAccount, bound to this pod, and the list is allowed."""
    kubectl_image = require_env("REGROUP_E2E_KUBECTL_IMAGE",
                                "an image with kubectl at /kubectl whose entrypoint keeps running (the app)")
    k, c = singles.kubectl, singles.copies
    app = {"name": "app", "image": kubectl_image, "imagePullPolicy": "IfNotPresent",
           "env": [{"name": "HOME", "value": "/tmp"}],
           "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "allowPrivilegeEscalation": False,
                               "capabilities": {"drop": ["ALL"]}}}
    singles.install("w", app={"containers": [app], "replicas": 0},
                    rbac={"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]})
    k("create", "serviceaccount", "rg-w-app")
    k("create", "secret", "generic", "rg-w-app-token",
      f"--from-literal=token={k('create', 'token', 'rg-w-app', '--duration=1h').strip()}")
    volumes = k.json("get", "deployment", "rg-w-regroup")["spec"]["template"]["spec"]["volumes"]
    index = [v["name"] for v in volumes].index("regroup-app-sa")
    (source,) = [i for i, src in enumerate(volumes[index]["projected"]["sources"]) if "serviceAccountToken" in src]
    k("patch", "deployment", "rg-w-regroup", "--type=json", "-p", json.dumps([
        {"op": "replace", "path": f"/spec/template/spec/volumes/{index}/projected/sources/{source}",
         "value": {"secret": {"name": "rg-w-app-token", "items": [{"key": "token", "path": "token"}]}}},
        {"op": "replace", "path": "/spec/replicas", "value": 1}]))
    pod = c.ready_pod("w")
    name = pod["metadata"]["name"]
    env = {e["name"]: e.get("value") for e in [x for x in pod["spec"]["containers"] if x["name"] == "app"][0]["env"]}
    assert env.get("KUBERNETES_SERVICE_HOST") == "127.0.0.1", env

    def in_app(*args):
        return k.run("exec", name, "-c", "app", "--", "/kubectl", *args, timeout=60, check=False)
    through_tls = in_app("auth", "whoami", "-o", "json")
    assert through_tls.returncode == 0, through_tls.stderr
    user = json.loads(through_tls.stdout)["status"]["userInfo"]
    assert user["username"] == f"system:serviceaccount:{NS}:rg-w-app", user
    assert "authentication.kubernetes.io/pod-name" not in user.get("extra", {}), user  # not the pod's token
    refused = in_app("get", "configmaps", "-o", "name")
    denied = f'User "system:serviceaccount:{NS}:rg-w-app" cannot list resource "configmaps"'
    assert refused.returncode != 0 and denied in refused.stderr, (refused.stdout, refused.stderr)
    # The same through regroup's plain listener, no token: regroup's own, the pod's.
    plain = ("--server=http://127.0.0.1:8001",)
    own = in_app(*plain, "auth", "whoami", "-o", "json")
    assert own.returncode == 0, own.stderr
    own_user = json.loads(own.stdout)["status"]["userInfo"]
    assert own_user["username"] == f"system:serviceaccount:{NS}:rg-w-regroup", own_user
    assert own_user["extra"]["authentication.kubernetes.io/pod-name"] == [name], own_user
    listed = in_app(*plain, "get", "configmaps", "-o", "name")
    assert listed.returncode == 0 and "configmap/rg-w-regroup-config" in listed.stdout, (listed.stdout, listed.stderr)
    # Both reviews went through regroup (its request lines; both listeners log as the sidecar's).
    lines = request_lines(stamped(k("logs", name, "-c", "regroup", "--timestamps")))
    reviews = [(f["listener"], f["method"], f["status"]) for _, f in lines
               if f["path"] == "/apis/authentication.k8s.io/v1/selfsubjectreviews"]
    assert [s for _, _, s in reviews] == [201, 201], reviews
    assert "Bearer" not in k("logs", name, "-c", "regroup")
    print(f"in-cluster token: whoami through regroup's TLS port {user['username']}, through its plain listener "
          f"{own_user['username']} (pod {name}); requests {reviews}")


class PortForward:
    """`kubectl port-forward` to a pod's port (which may be bound to the
    pod's loopback only): `local` is the port on this host's 127.0.0.1."""

    def __init__(self, kubectl, pod, port):
        self.proc = subprocess.Popen(kubectl.argv("port-forward", f"pod/{pod}", f":{port}"), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline() if ready else ""
        m = re.search(r"127\.0\.0\.1:(\d+) ->", line)
        if not m:
            self.close()
            pytest.fail(f"kubectl port-forward pod/{pod} :{port}: {line!r} {self.proc.stderr.read()[-2000:]}")
        self.local = int(m.group(1))

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(timeout=30)


def foos_through(forward):
    """The names of the Foos regroup's plain listener lists in the app's
    group (samplecontroller.k8s.io), with regroup's own credential."""
    url = f"http://127.0.0.1:{forward.local}/apis/{ORIG}/v1alpha1/namespaces/{NS}/foos"
    try:
        with urllib.request.urlopen(url, timeout=15) as r:
            return sorted(i["metadata"]["name"] for i in json.load(r)["items"])
    except (OSError, ValueError) as e:
        return f"{type(e).__name__}: {str(e)[:200]}"


def json_lines(text):
    """regroup's JSON log lines, as dicts (other lines left out)."""
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def test_config_map_changed_reloaded_in_place_then_rolled_by_an_upgrade(singles):
    """What docs/config.md ("Reloading") and docs/deploy.md ("Upgrading")
    say regroup and the chart do when the configuration changes, in a pod.
    Release rg-c, its rule the app's group -> group c. Its ConfigMap edited
    in place (`kubectl patch`, no rollout): the rule now to group d, and
    `logging.level` debug. The kubelet updates the mounted file and regroup
    reloads it in the same container: a list in the app's group through
    regroup's listener (port-forwarded to the pod's loopback) shows group
    d's Foo instead of group c's; `regroup_config_reloads_total{result="ok"}`
    counts it; regroup logs that `logging` takes effect only at restart and
    writes no debug line; no container restarted, the pod template and its
    checksum annotation unchanged. Then `helm upgrade` with the rule to
    group e: Helm 4 (server-side apply) refuses it, the ConfigMap's
    config.yaml now kubectl-patch's; with `--force-conflicts` the checksum
    annotation changes, the Deployment rolls (a new pod, the old one gone)
    and the new pod lists group e's Foo."""
    k, c = singles.kubectl, singles.copies
    for copy in "de":
        crd = crd_for(singles.regroup_bin, copy, singles.tmp)
        singles.crds.append(crd)
        k("apply", "-f", "-", input=json.dumps(crd))
        k("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}", "--timeout=60s", timeout=90)
    singles.install("c")
    # regroup's own credential (the release's ServiceAccount) may list group d's Foos too: the chart grants group c.
    grant = [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": f"{NS}-rg-c-d"},
              "rules": [{"apiGroups": [RELOAD["d"]], "resources": ["foos"], "verbs": ["get", "list", "watch"]}]},
             {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
              "metadata": {"name": f"{NS}-rg-c-d"},
              "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"{NS}-rg-c-d"},
              "subjects": [{"kind": "ServiceAccount", "name": "rg-c-regroup", "namespace": NS}]}]
    k("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": grant}))
    forward = None
    try:
        for copy in "cde":
            c.foo(copy, f"cm-{copy}", f"cm-dep-{copy}")
        pod = c.ready_pod("c")
        name = pod["metadata"]["name"]
        before = restart_ids(pod)
        template = k.json("get", "deployment", "rg-c-regroup")["spec"]["template"]
        checksum = template["metadata"]["annotations"]["checksum/regroup-config"]
        forward = PortForward(k, name, 8001)
        assert foos_through(forward) == ["cm-c"]

        # The ConfigMap edited in place.
        cm = k.json("get", "configmap", "rg-c-regroup-config")
        config = yaml.safe_load(cm["data"]["config.yaml"])
        assert [r["to"] for r in config["rules"]] == [RELOAD["c"]], config["rules"]
        assert config["logging"]["level"] == "info", config["logging"]
        config["rules"][0]["to"] = RELOAD["d"]
        config["logging"]["level"] = "debug"
        k("patch", "configmap", "rg-c-regroup-config", "--type=merge",
          "-p", json.dumps({"data": {"config.yaml": yaml.safe_dump(config)}}))
        t0 = time.monotonic()
        wait(k, "regroup to list group d's Foo after the ConfigMap's change", lambda: foos_through(forward) ==
             ["cm-d"], 240, "app.kubernetes.io/instance=rg-c")
        took = time.monotonic() - t0
        assert metrics(k, name, "regroup_config_reloads_total", result="ok") >= 1
        assert metrics(k, name, "regroup_config_reloads_total", result="failed") == 0
        assert restart_ids(k.json("get", "pod", name)) == before, "a container restarted"
        assert k.json("get", "deployment", "rg-c-regroup")["spec"]["template"] == template, "the pod template changed"
        lines = json_lines(k("logs", name, "-c", "regroup"))
        reloaded = [line for line in lines if line.get("fields", {}).get("message", "").startswith(
            "configuration reloaded")]
        restart = [line["fields"].get("sections", "") for line in lines
                   if "take effect only at restart" in line.get("fields", {}).get("message", "")]
        assert reloaded, lines[-10:]
        assert any("logging" in sections for sections in restart), restart
        assert not [line for line in lines if line.get("level") in ("DEBUG", "TRACE")], "the log level changed"
        forward.close()
        forward = None
        print(f"config: ConfigMap edit in force in pod {name} after {took:.0f}s, no restart")

        # The upgrade: a new checksum, a new pod.
        values = values_for("c", singles.controller)
        values["rules"] = [{"from": ORIG, "to": RELOAD["e"]}]
        path = singles.tmp / "values-c-upgrade.yaml"
        path.write_text(yaml.safe_dump(values))
        # Helm 4 applies server-side: the hand edit made kubectl-patch an owner of the ConfigMap's config.yaml, so a
        # plain upgrade is refused (a conflict naming it) and the chart's values win only with --force-conflicts.
        upgrade = [str(HELM), "upgrade", "rg-c", str(CHART), "-n", NS, "--kubeconfig", KUBECONFIG, "-f", str(path)]
        refused = subprocess.run(upgrade, capture_output=True, text=True, timeout=300)
        assert refused.returncode != 0 and "conflict" in refused.stderr and "kubectl-patch" in refused.stderr, \
            (refused.returncode, refused.stderr[-2000:])
        t0 = time.monotonic()
        run([*upgrade, "--force-conflicts"], timeout=300, what="helm upgrade rg-c --force-conflicts")
        upgraded = k.json("get", "deployment", "rg-c-regroup")["spec"]["template"]
        assert upgraded["metadata"]["annotations"]["checksum/regroup-config"] != checksum

        def rolled():
            pods = c.pods("c")
            ok = len(pods) == 1 and pods[0]["metadata"]["name"] != name and condition(pods[0], "Ready")
            return pods[0] if ok and k.run("get", "pod", name, check=False).returncode != 0 else None
        new = wait(k, "the Deployment rolled: a new pod Ready, the old one gone", rolled, READY_WAIT,
                   "app.kubernetes.io/instance=rg-c")
        took = time.monotonic() - t0
        assert new["metadata"]["annotations"]["checksum/regroup-config"] == \
            upgraded["metadata"]["annotations"]["checksum/regroup-config"]
        forward = PortForward(k, new["metadata"]["name"], 8001)
        assert foos_through(forward) == ["cm-e"]
        print(f"config: helm upgrade rolled {name} -> {new['metadata']['name']} in {took:.0f}s")
    finally:
        if forward:
            forward.close()
        k.run("delete", "-f", "-", "--ignore-not-found", "--wait=false", check=False,
              input=json.dumps({"apiVersion": "v1", "kind": "List", "items": grant}))


# --- publish mode's remote side as deployed, two replicas --------------------------------------------------------

CENTRAL_KUBECONFIG = os.environ.get("REGROUP_E2E_CENTRAL_KUBECONFIG")
PUB_GROUP, PUB_VERSION = "database.acmeco.org", "v1alpha1"
PUB_RESOURCE, PUB_KIND = f"mysqlinstancerequirements.{PUB_GROUP}", "MySQLInstanceRequirement"


def central_server_for_pods(central):
    """The URL pods of the remote cluster reach the central apiserver at:
    REGROUP_E2E_CENTRAL_SERVER_FOR_PODS, else the central kubeconfig's
    server unless it is a loopback address (skipped then, saying so)."""
    given = os.environ.get("REGROUP_E2E_CENTRAL_SERVER_FOR_PODS")
    if given:
        return given
    view = json.loads(central("config", "view", "--raw", "--minify", "-o", "json"))
    server = view["clusters"][0]["cluster"]["server"]
    host = urllib.parse.urlsplit(server).hostname
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if loopback:
        pytest.skip(f"the central apiserver is at {server}, a loopback address pods can't reach; set "
                    "REGROUP_E2E_CENTRAL_SERVER_FOR_PODS to an https URL they reach it at (its serving certificate "
                    "must name that host)")
    return server


def by_namespace(k, verb, docs, *args, check=True):
    """`kubectl VERB -f -` of docs, one call per namespace they name (the
    helper's `-n` would refuse any other), cluster-scoped ones with the first."""
    groups = {}
    for d in docs:
        groups.setdefault(d["metadata"].get("namespace") or k.namespace, []).append(d)
    for ns, items in groups.items():
        k.run(verb, "-n", ns, "-f", "-", *args, check=check,
              input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))


def test_publish_remote_side_two_replicas(kubectl, image, namespace, regroup_bin, tmp_path):
    """`regroup publish-manifests` applied as docs/publish.md ("Deploying")
    says, the Deployment at 2 replicas: the central section on the central
    cluster (REGROUP_E2E_CENTRAL_KUBECONFIG), its token made into the
    central kubeconfig Secret (at REGROUP_E2E_CENTRAL_SERVER_FOR_PODS, or
    the kubeconfig's server if not loopback), the remote section on this
    cluster. Both pods running, the Lease held by one of them and renewed;
    both pods Ready and behind the Service, the APIService Available, the
    group served through the remote cluster, the same holder; an object
    applied remotely created centrally, the Secret it owns there copied
    into its remote namespace once (its resourceVersion unchanged over
    several resync rounds: the other replica does not write it too). Then
    the pod serving a client's watch (through the remote cluster) deleted
    while objects are made: the client watches again from its last
    resourceVersion through the other replica and gets every event once,
    in order, no 410 Gone. The Lease's holder deleted too when that was
    not it: the Lease taken over by a live pod, which copies a second
    connection Secret, once."""
    if not CENTRAL_KUBECONFIG:
        pytest.skip("REGROUP_E2E_CENTRAL_KUBECONFIG is not set: publish mode needs a central cluster")
    name, target, source = f"rg-pub-{RUN}", f"rg-pods-pub-{RUN}", f"{NS}-src"
    central = Kubectl(CENTRAL_KUBECONFIG, tmp_path / "central-cache", target)
    server = central_server_for_pods(central)
    remote = Kubectl(KUBECONFIG, tmp_path / "remote-cache", namespace)
    apiservice = f"{PUB_VERSION}.{PUB_GROUP}"
    if remote.run("get", "apiservice", apiservice, check=False).returncode == 0:
        pytest.skip(f"the remote cluster already has the APIService {apiservice} (another publisher's): not replaced")
    config = tmp_path / "publish.yaml"
    config.write_text(yaml.safe_dump({
        "upstream": {"inCluster": True},
        "front": {"listen": "0.0.0.0:9443", "requestHeader": {"fromCluster": True}},
        "publish": {"central": {"kubeconfig": CENTRAL_KUBECONFIG}, "groups": [PUB_GROUP], "targetNamespace": target,
                    "connectionSecrets": {"resyncSeconds": 1}}}))
    made_crd = central.run("get", f"crd/{PUB_RESOURCE}", check=False).returncode != 0
    remote_docs, central_docs = [], []
    try:
        if made_crd:
            central("apply", "-f", E2E / "manifests" / "publish-crd.yaml")
        central("wait", "--for=condition=Established", f"crd/{PUB_RESOURCE}", "--timeout=60s", timeout=90)
        out = run([regroup_bin, "publish-manifests", "-c", str(config), "--namespace", namespace, "--name", name])
        head, _, tail = out.partition("# ---- remote cluster ----")
        central_docs = [d for d in yaml.safe_load_all(head) if d]
        remote_docs = [d for d in yaml.safe_load_all(tail) if d and d["kind"] != "Namespace"]
        for d in remote_docs:
            if d["kind"] == "Deployment":
                d["spec"]["replicas"] = 2
                selector = ",".join(f"{k}={v}" for k, v in d["spec"]["selector"]["matchLabels"].items())
                (container,) = d["spec"]["template"]["spec"]["containers"]
                container["imagePullPolicy"] = "Never"  # the imported archive, never a registry
                central_mount = [m for m in container["volumeMounts"] if m["mountPath"] == "/etc/regroup/central"][0]
                (volume,) = [v for v in d["spec"]["template"]["spec"]["volumes"] if v["name"] == central_mount["name"]]
                central_secret = volume["secret"]["secretName"]
        by_namespace(central, "apply", central_docs)
        # The central kubeconfig from the token Secret, as the central section's comment says, at the pods' address.
        token_secret = [d for d in central_docs if d["kind"] == "Secret"][0]["metadata"]["name"]
        data = wait(central, f"the central token Secret {token_secret} filled in",
                    lambda: central.json("get", "secret", token_secret, "-n", target).get("data", {}).get("token")
                    and central.json("get", "secret", token_secret, "-n", target)["data"], 60)
        kc = {"apiVersion": "v1", "kind": "Config", "current-context": "central",
              "clusters": [{"name": "central", "cluster": {"server": server,
                                                           "certificate-authority-data": data["ca.crt"]}}],
              "users": [{"name": name, "user": {"token": base64.b64decode(data["token"]).decode()}}],
              "contexts": [{"name": "central", "context": {"cluster": "central", "user": name, "namespace": target}}]}
        remote("create", "secret", "generic", central_secret, "--from-file=kubeconfig=/dev/stdin",
               input=yaml.safe_dump(kc))
        by_namespace(remote, "apply", remote_docs)

        # Two pods; the Lease held by one of them, and kept (before the central cluster is needed: the copier's
        # election is in the remote cluster).
        def two_pods():
            items = [p for p in remote.json("get", "pods", "-l", selector)["items"]
                     if not p["metadata"].get("deletionTimestamp")]
            return items if len(items) == 2 and all(p.get("status", {}).get("podIP") for p in items) else None
        pods = wait(remote, f"{name}'s two pods", two_pods, READY_WAIT, selector)
        names = {p["metadata"]["name"] for p in pods}

        def held():
            leases = [l for l in remote.json("get", "leases")["items"]
                      if any(n in (l["spec"].get("holderIdentity") or "") for n in names)]
            return leases[0] if len(leases) == 1 else None
        lease = wait(remote, "a Lease held by one of the pods", held, 60)
        holder = lease["spec"]["holderIdentity"]
        assert sum(n in holder for n in names) == 1, (holder, names)
        time.sleep(2 * lease["spec"].get("leaseDurationSeconds", 15) / 3 + 1)
        again = remote.json("get", "lease", lease["metadata"]["name"])
        assert again["spec"]["holderIdentity"] == holder and \
            again["spec"]["renewTime"] != lease["spec"]["renewTime"], (lease["spec"], again["spec"])

        # Available behind its Service, the group served through the remote cluster.
        remote("wait", "--for=condition=Available", f"deployment/{name}", f"--timeout={READY_WAIT}s",
               timeout=READY_WAIT + 30)
        pods = two_pods()
        assert pods and all(condition(p, "Ready") for p in pods), [p["metadata"]["name"] for p in pods or []]
        assert {p["metadata"]["name"] for p in pods} == names, "a pod was replaced"
        ips = sorted(p["status"]["podIP"] for p in pods)
        wait(remote, f"the Service {name}'s endpoints: both pods", lambda: sorted(
            a for s in remote.json("get", "endpointslices", "-l", f"kubernetes.io/service-name={name}")["items"]
            for e in s.get("endpoints") or [] if (e.get("conditions") or {}).get("ready") for a in e["addresses"])
            == ips, 60)
        wait(remote, f"the APIService {apiservice} Available",
             lambda: condition(remote.json("get", "apiservice", apiservice), "Available"), 120)
        wait(remote, f"{PUB_GROUP} served through the remote cluster",
             lambda: remote.run("get", "--raw", f"/apis/{PUB_GROUP}/{PUB_VERSION}", check=False).returncode == 0, 60)
        assert remote.json("get", "lease", lease["metadata"]["name"])["spec"]["holderIdentity"] == holder

        # An object applied remotely, created centrally; the Secret it owns there copied once.
        remote("create", "namespace", source)
        remote("apply", "-n", source, "-f", "-", input=json.dumps({
            "apiVersion": f"{PUB_GROUP}/{PUB_VERSION}", "kind": PUB_KIND,
            "metadata": {"name": "sqldb", "namespace": source},
            "spec": {"version": "5.7", "storageGB": 20, "writeConnectionSecretToRef": {"name": "sql-creds"}}}))
        def copied_once(owner_name, secret, password, what):
            """The central Secret `secret` owned by `owner_name`, copied into the
            remote namespace once: the same resourceVersion after six resync
            rounds of the copier (a second copier would write it again)."""
            owner = central.json("get", PUB_RESOURCE, owner_name, "-n", target)
            central("apply", "-n", target, "-f", "-", input=json.dumps({
                "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": secret, "namespace": target, "ownerReferences": [{
                    "apiVersion": f"{PUB_GROUP}/{PUB_VERSION}", "kind": PUB_KIND, "name": owner_name,
                    "uid": owner["metadata"]["uid"], "controller": True}]},
                "stringData": {"username": "admin", "password": password}}))

            def copied():
                got = remote.run("get", "secret", secret, "-n", source, "-o", "json", check=False)
                return json.loads(got.stdout) if got.returncode == 0 else None
            copy = wait(remote, what, copied, 60)
            assert base64.b64decode(copy["data"]["password"]) == password.encode()
            time.sleep(6)
            assert copied()["metadata"]["resourceVersion"] == copy["metadata"]["resourceVersion"]

        copied_once("sqldb", "sql-creds", "s3cret", "the connection Secret copied into the remote namespace")
        assert remote.json("get", "lease", lease["metadata"]["name"])["spec"]["holderIdentity"] == holder

        # A replica deleted mid-watch: a client watching through the remote cluster (its aggregator, the Service)
        # is served by one pod; that pod deleted, its stream ends, the client watches again from its last
        # resourceVersion through the other replica and gets every object made meanwhile, each once, in order.
        base = f"/apis/{PUB_GROUP}/{PUB_VERSION}/namespaces/{source}/mysqlinstancerequirements"
        listed = json.loads(remote("get", "--raw", base))
        assert [i["metadata"]["name"] for i in listed["items"]] == ["sqldb"], listed["items"]

        def make(obj):
            remote("apply", "-n", source, "-f", "-", input=json.dumps({
                "apiVersion": f"{PUB_GROUP}/{PUB_VERSION}", "kind": PUB_KIND,
                "metadata": {"name": obj, "namespace": source},
                "spec": {"version": "5.7", "storageGB": 20, "writeConnectionSecretToRef": {"name": f"{obj}-creds"}}}))

        def open_watches():
            return {n: metrics(remote, n, "regroup_open_watches") for n in names}
        # The cluster's own controllers (garbage collector, quota) watch the group too: the pod serving this
        # client's watch is the one whose open watches rose by one when it started.
        before_watch = open_watches()
        watcher = Watcher(api_client(remote, tmp_path), base, listed["metadata"]["resourceVersion"])
        watcher.start()
        try:
            make("w1")
            wait(remote, "the watch's ADDED w1", lambda: "w1" in watcher.added(), 60)

            def serving():
                now = open_watches()
                rose = [n for n in names if now[n] == before_watch[n] + 1]
                return rose[0] if len(rose) == 1 and sum(now.values()) == sum(before_watch.values()) + 1 else None
            victim = wait(remote, "the one pod serving the watch", serving, 30)
            other = (names - {victim}).pop()
            streams, t0 = watcher.streams, time.monotonic()
            remote("delete", "pod", victim, "--wait=false")
            made = ["w2", "w3"]
            for obj in made:  # while it stops
                make(obj)
            wait(remote, f"{victim} gone", lambda: remote.run("get", "pod", victim, check=False).returncode != 0,
                 120)
            make("w4")
            wait(remote, "the watch's ADDED w2, w3, w4",
                 lambda: {"w2", "w3", "w4"} <= set(watcher.added()) or watcher.stopped.is_set(), 90)
            resumed = time.monotonic() - t0
            assert watcher.errors == [], watcher.errors  # no 410 Gone: nothing had to be listed again
            assert watcher.added() == ["w1", "w2", "w3", "w4"], watcher.events
            assert watcher.streams > streams, "the deleted pod's stream did not end: it was not serving the watch"
            assert remote.run("get", "pod", other, check=False).returncode == 0, f"{other} is gone too"
        finally:
            watcher.stopped.set()
        print(f"publish: {victim} deleted mid-watch; streams {watcher.streams}, failed attempts "
              f"{len(watcher.failures)} ({watcher.failures[:3]}), w2..w4 seen after {resumed:.1f}s")

        # The copier after the deletion: the Lease held by a live pod (the other one, if the deleted pod held it),
        # a second connection Secret copied, once.
        def live_holder():
            h = remote.json("get", "lease", lease["metadata"]["name"])["spec"].get("holderIdentity") or ""
            live = {p["metadata"]["name"] for p in remote.json("get", "pods", "-l", selector)["items"]
                    if not p["metadata"].get("deletionTimestamp")}
            return h if any(n in h for n in live) else None
        new_holder = wait(remote, "the Lease held by a live pod", live_holder, 90, selector)
        assert (victim not in holder) or (other in new_holder), (holder, new_holder)
        handed = "the deleted pod's"
        if victim not in holder:
            # The watch's pod did not hold the Lease: its holder deleted too, so that the hand-over is seen each run.
            (holder_pod,) = [n for n in names if n in holder]
            remote("delete", "pod", holder_pod, "--wait=false")
            new_holder = wait(remote, f"the Lease taken over from {holder_pod} by another live pod",
                              lambda: (lambda h: h if h and holder_pod not in h else None)(live_holder()), 120,
                              selector)
            handed = f"{holder_pod}'s, deleted next"
        print(f"publish: the Lease ({handed}) now held by {new_holder}")
        copied_once("w4", "w4-creds", "s3cret-4", "the second connection Secret copied")
    finally:
        # The source namespace first, while the front still serves it (its objects are deleted through it).
        remote.run("delete", "namespace", source, "--ignore-not-found", "--timeout=60s", check=False, timeout=90)
        if remote_docs:
            by_namespace(remote, "delete", remote_docs, "--ignore-not-found", "--wait=false", check=False)
        central.run("delete", "namespace", target, "--ignore-not-found", "--wait=false", check=False)
        if made_crd:
            central.run("delete", f"crd/{PUB_RESOURCE}", "--ignore-not-found", "--wait=false", check=False)


# --- an operator's own manifests, wrapped with `regroup inject`, twice ------------------------------------------

# An operator in the shape charts have: its controller Deployment (the unmodified sample-controller as the
# manager, declaring kubebuilder's webhook port and mounting the Secret cert-manager would write), the
# Service its ValidatingWebhookConfiguration names, its CRD, its RBAC, and a leader-election Role and
# RoleBinding in kube-system naming a Lease, with fixed names as charts give them (@REL@: the release's
# prefix, as a chart's fullname; the kube-system objects and the registration keep the same names in
# both copies: `inject` marks them per copy).
OPERATOR = """\
apiVersion: v1
kind: ServiceAccount
metadata: {name: @REL@-controller, namespace: @NS@}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: @NS@-@REL@-manager}
rules:
  - {apiGroups: [samplecontroller.k8s.io], resources: [foos], verbs: [get, list, watch, update]}
  - {apiGroups: [samplecontroller.k8s.io], resources: [foos/status], verbs: [update]}
  - {apiGroups: [apps], resources: [deployments], verbs: [get, list, watch, create, update, delete]}
  - {apiGroups: [""], resources: [events], verbs: [create, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: @NS@-@REL@-manager}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: @NS@-@REL@-manager}
subjects: [{kind: ServiceAccount, name: @REL@-controller, namespace: @NS@}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: foo-operator-leader-election, namespace: kube-system}
rules:
  - {apiGroups: [coordination.k8s.io], resources: [leases], resourceNames: [foo-operator-lock],
     verbs: [get, update, patch]}
  - {apiGroups: [coordination.k8s.io], resources: [leases], verbs: [create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: foo-operator-leader-election, namespace: kube-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: foo-operator-leader-election}
subjects: [{kind: ServiceAccount, name: @REL@-controller, namespace: @NS@}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: @REL@-controller, namespace: @NS@}
spec:
  selector: {matchLabels: {app: @REL@}}
  template:
    metadata: {labels: {app: @REL@}}
    spec:
      serviceAccountName: @REL@-controller
      securityContext: {runAsNonRoot: true, runAsUser: 65532}
      containers:
        - name: manager
          image: @IMAGE@
          imagePullPolicy: IfNotPresent
          @ARGS@
          securityContext: {readOnlyRootFilesystem: true, allowPrivilegeEscalation: false,
                            capabilities: {drop: [ALL]}}
          ports: [{name: webhook-server, containerPort: 9443, protocol: TCP}]
          volumeMounts: [{name: cert, mountPath: /tmp/k8s-webhook-server/serving-certs, readOnly: true}]
      volumes: [{name: cert, secret: {secretName: @REL@-webhook-server-cert}}]
---
apiVersion: v1
kind: Service
metadata: {name: @REL@-webhook-service, namespace: @NS@}
spec:
  selector: {app: @REL@}
  ports: [{port: 443, targetPort: webhook-server, protocol: TCP}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: @NS@-validating-webhook-configuration}
webhooks:
  - name: vfoo.samplecontroller.k8s.io
    admissionReviewVersions: [v1]
    sideEffects: None
    failurePolicy: Fail
    timeoutSeconds: 10
    objectSelector: {matchLabels: {e2e.regroup.dev/pods-webhook: @REL@}}
    clientConfig:
      caBundle: @CABUNDLE@
      service: {name: @REL@-webhook-service, namespace: @NS@, path: /validate}
    rules:
      - {apiGroups: [samplecontroller.k8s.io], apiVersions: [v1alpha1], operations: [CREATE, UPDATE],
         resources: [foos]}
"""


def operator_for(kubectl, rel, controller, tmp, ns=NS, name=None):
    """OPERATOR for release `rel` (`rel` and `ns` may be Helm template
    expressions) and the Secret cert-manager would write for it, made in the
    namespace (its CA is what cainjector would put into the caBundle)."""
    name = name or rel
    ca = new_ca(f"e2e-pods-{name}-webhook-ca")
    svc = f"{name}-webhook-service.{NS}.svc"
    crt, key = issue(ca, svc, dns=[svc, f"{svc}.cluster.local"]).write(tmp, f"{name}-tls")
    kubectl("create", "secret", "generic", f"{name}-webhook-server-cert", f"--from-file=tls.crt={crt}",
            f"--from-file=tls.key={key}", f"--from-literal=ca.crt={ca.cert_pem.decode()}")
    args = shlex.split(os.environ.get("REGROUP_E2E_CONTROLLER_ARGS", ""))
    return (OPERATOR.replace("@REL@", rel).replace("@NS@", ns).replace("@IMAGE@", controller)
            .replace("@ARGS@", f"args: {json.dumps(args)}" if args else "")
            .replace("@CABUNDLE@", base64.b64encode(ca.cert_pem).decode()))


def crd_min0():
    """e2e/manifests/crd-foos.yaml, `replicas` allowed to be 0, in the app's group."""
    crd = yaml.safe_load((E2E / "manifests" / "crd-foos.yaml").read_text())
    for version in crd["spec"]["versions"]:
        version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"]["minimum"] = 0
    return crd


class Injected:
    """The two copies `regroup inject` made of OPERATOR (releases op-i, op-j)."""

    def __init__(self, kubectl, regroup_bin):
        self.kubectl, self.copies = kubectl, Copies(kubectl, regroup_bin)
        self.docs = {}  # copy -> inject's output documents

    def pod(self, copy):
        def one_ready():
            items = [p for p in self.kubectl.json("get", "pods", "-l", f"app=op-{copy}")["items"]
                     if not p["metadata"].get("deletionTimestamp")]
            return items[0] if len(items) == 1 and condition(items[0], "Ready") else None
        return wait(self.kubectl, f"injected copy {copy}'s pod Ready", one_ready, READY_WAIT, f"app=op-{copy}")

    def of(self, copy, kind, namespace=None):
        return [d for d in self.docs[copy] if d["kind"] == kind
                and (namespace is None or d["metadata"].get("namespace") == namespace)]


@pytest.fixture(scope="module")
def injected(kubectl, image, controller, namespace, regroup_bin, tmp_path_factory):
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    if image["tag"] != f"regroup:{chart['appVersion']}":
        pytest.fail(f"the archive is tagged {image['tag']} but inject defaults to regroup:{chart['appVersion']}")
    tmp = tmp_path_factory.mktemp("pods-inject")
    inj = Injected(kubectl, regroup_bin)
    try:
        for copy in INJECTED:
            rel = f"op-{copy}"
            text = operator_for(kubectl, rel, controller, tmp)
            manifest = tmp / f"{rel}.yaml"
            manifest.write_text(text)
            (tmp / "crd-foos.yaml").write_text(yaml.safe_dump(crd_min0()))
            rules = tmp / f"rules-{copy}.yaml"
            rules.write_text(yaml.safe_dump({"rules": [{"from": ORIG, "to": INJECTED[copy]}]}))
            out = run([regroup_bin, "inject", "-c", str(rules), "-f", str(manifest), "-f", str(tmp / "crd-foos.yaml"),
                       "--prefix", f"{rel}-regroup"], what=f"regroup inject ({rel})")
            inj.docs[copy] = [d for d in yaml.safe_load_all(out) if d]
            by_namespace(kubectl, "apply", inj.docs[copy])
            (crd,) = inj.of(copy, "CustomResourceDefinition")
            kubectl("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}", "--timeout=60s",
                    timeout=90)
        for copy in INJECTED:
            inj.pod(copy)
        yield inj
    finally:
        for docs in inj.docs.values():
            # The namespace's objects go with it; kube-system's and the cluster-scoped ones here.
            outside = [d for d in docs if d["metadata"].get("namespace") in (None, "kube-system")]
            by_namespace(kubectl, "delete", outside, "--ignore-not-found", "--wait=false", check=False)


def test_inject_two_copies_ready_and_each_reconciles_its_own_foo(injected):
    """Both injected copies' pods Ready, regroup a native sidecar; each
    copy's Foo (no webhook label) gets its Deployment, controlled by it."""
    for copy in INJECTED:
        pod = injected.pod(copy)
        (sidecar,) = [c for c in pod["spec"].get("initContainers", []) if c["name"] == "regroup"]
        assert sidecar.get("restartPolicy") == "Always", sidecar
        assert [c["name"] for c in pod["spec"]["containers"]] == ["manager"]
    uids = {copy: injected.copies.foo(copy, f"inj-{copy}", f"inj-{copy}-dep") for copy in INJECTED}
    for copy, uid in uids.items():
        wait(injected.kubectl, f"Deployment inj-{copy}-dep, controlled by injected copy {copy}'s Foo",
             lambda: injected.copies.owned(f"inj-{copy}-dep", copy, uid), RECONCILE_WAIT, f"app=op-{copy}")


def test_inject_webhook_calls_reach_regroup_through_the_service(injected):
    """kube-apiserver calls each copy's validating webhook (a labelled Foo,
    server-side dry run) through the Service inject retargeted to regroup's
    webhook listener in the pod: regroup's `regroup_webhook_requests_total`
    for that hook rises in that copy's pod only. sample-controller serves no
    webhook, so regroup's forward to 127.0.0.1:9443 fails and, with
    `failurePolicy: Fail`, the Foo is refused naming the webhook: what is
    shown is the path apiserver → Service → regroup (TLS with the app's
    certificate, the caBundle's CA; regroup's own error message comes
    back), not an app's answer."""
    webhook_calls_reach_regroup(injected, INJECTED)


def webhook_calls_reach_regroup(injected, copies):
    """For each of `copies`, a labelled Foo in its group dry-run created:
    refused naming the webhook, and that copy's regroup alone counting it."""
    pods = {copy: injected.pod(copy)["metadata"]["name"] for copy in copies}

    def received(copy):
        return metrics(injected.kubectl, pods[copy], "regroup_webhook_requests_total", webhook="validate")
    for copy in copies:
        before = {c: received(c) for c in copies}
        foo = {"apiVersion": f"{ALL_GROUPS[copy]}/v1alpha1", "kind": "Foo",
               "metadata": {"name": f"hooked-{copy}", "namespace": NS,
                            "labels": {"e2e.regroup.dev/pods-webhook": f"op-{copy}"}},
               "spec": {"deploymentName": f"hooked-{copy}", "replicas": 0}}
        p = injected.kubectl.run("create", "--dry-run=server", "-f", "-", input=json.dumps(foo), check=False)
        # regroup's own answer (its forward to the app's 127.0.0.1:9443 found nothing), passed on by kube-apiserver.
        assert p.returncode != 0 and 'failed calling webhook "vfoo.samplecontroller.k8s.io"' in p.stderr \
            and "the app's webhook can't be reached" in p.stderr, (p.stdout, p.stderr)
        after = wait(injected.kubectl, f"copy {copy}'s regroup counting the review",
                     lambda: (lambda a: a if a[copy] > before[copy] else None)({c: received(c) for c in copies}),
                     30, f"app=op-{copy}")
        others = [c for c in copies if c != copy]
        assert all(after[c] == before[c] for c in others), (copy, before, after)


def test_inject_marks_kube_system_leader_election_per_copy(injected):
    """The leader-election Role and RoleBinding OPERATOR puts into
    kube-system under one name are two pairs in the cluster, each copy's
    with its own name, its Role naming its own Lease (the name regroup maps
    the app's Lease to, in its ConfigMap), its binding its own ServiceAccount;
    the registrations are two too."""
    roles, leases = {}, {}
    for copy in INJECTED:
        (role,) = injected.of(copy, "Role", "kube-system")
        (binding,) = injected.of(copy, "RoleBinding", "kube-system")
        got = injected.kubectl.json("get", "role", role["metadata"]["name"], "-n", "kube-system")
        names = [n for r in got["rules"] for n in r.get("resourceNames", [])]
        assert len(names) == 1 and names[0] != "foo-operator-lock" and names[0].endswith("foo-operator-lock"), got
        prefix = names[0][:-len("foo-operator-lock")]
        assert got["metadata"]["name"] == f"{prefix}foo-operator-leader-election"
        b = injected.kubectl.json("get", "rolebinding", binding["metadata"]["name"], "-n", "kube-system")
        assert b["roleRef"]["name"] == got["metadata"]["name"]
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": f"op-{copy}-controller", "namespace": NS}]
        (cm,) = [d for d in injected.of(copy, "ConfigMap", NS)
                 if d["metadata"]["name"].endswith(f"-op-{copy}-controller")]
        assert yaml.safe_load(cm["data"]["config.yaml"])["names"]["prefix"] == prefix
        (vwc,) = injected.of(copy, "ValidatingWebhookConfiguration")
        injected.kubectl("get", "validatingwebhookconfiguration", vwc["metadata"]["name"])
        roles[copy], leases[copy] = got["metadata"]["name"], names[0]
    assert len(set(roles.values())) == len(set(leases.values())) == len(INJECTED), (roles, leases)


@pytest.fixture(scope="module")
def post_rendered(injected, kubectl, controller, regroup_bin, tmp_path_factory):
    """OPERATOR as a chart of its own (its names from the release, the CRD
    among its templates: Helm post-renders templates, not `crds/`),
    installed as release op-h with Helm 4's `--post-renderer regroup-inject`
    (the plugin charts/plugins/regroup-inject, installed into a Helm home of
    the test's, running REGROUP_BIN)."""
    tmp = tmp_path_factory.mktemp("pods-post-render")
    chart = tmp / "foo-operator"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: foo-operator\nversion: 0.1.0\nappVersion: v1.36.2\n")
    text = operator_for(kubectl, "{{ .Release.Name }}", controller, tmp, ns="{{ .Release.Namespace }}", name="op-h")
    (chart / "templates" / "operator.yaml").write_text(text + "---\n" + yaml.safe_dump(crd_min0()))
    env = dict(helm_env(tmp), REGROUP_BIN=str(regroup_bin), REGROUP_INJECT_ERROR_FILE=str(tmp / "inject-error"))
    p = subprocess.run([str(HELM), "plugin", "install", str(PLUGIN)], capture_output=True, text=True, env=env,
                       timeout=60)
    if p.returncode != 0:
        pytest.fail(f"helm plugin install {PLUGIN} failed:\n{p.stderr}")
    rules = tmp / "rules.yaml"
    rules.write_text(yaml.safe_dump({"rules": [{"from": ORIG, "to": POST_RENDERED["h"]}]}))
    argv = [str(HELM), "install", "op-h", str(chart), "-n", NS, "--kubeconfig", KUBECONFIG,
            "--post-renderer", "regroup-inject", "--post-renderer-args=-c", f"--post-renderer-args={rules}",
            "--post-renderer-args=--prefix", "--post-renderer-args=op-h-regroup"]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
        if p.returncode != 0:
            err = (tmp / "inject-error").read_text() if (tmp / "inject-error").exists() else ""
            pytest.fail(f"helm install op-h --post-renderer regroup-inject failed:\n{p.stdout}\n{p.stderr}\n{err}")
        manifest = run([str(HELM), "get", "manifest", "op-h", "-n", NS, "--kubeconfig", KUBECONFIG], timeout=60)
        injected.docs["h"] = [d for d in yaml.safe_load_all(manifest) if d]
        injected.pod("h")
        yield injected
    finally:
        subprocess.run([str(HELM), "uninstall", "op-h", "-n", NS, "--kubeconfig", KUBECONFIG],
                       capture_output=True, text=True, timeout=300, env=env)


def test_post_renderer_plugin_copy_ready_reconciles_and_its_webhook_reaches_regroup(post_rendered):
    """The release post-rendered by the Helm 4 plugin: its pod Ready with
    regroup a native sidecar, its Foo reconciled, kube-apiserver's call to
    its webhook counted by its regroup alone (not by inject's two copies),
    its kube-system Role and Lease its own."""
    pod = post_rendered.pod("h")
    (sidecar,) = [c for c in pod["spec"].get("initContainers", []) if c["name"] == "regroup"]
    assert sidecar.get("restartPolicy") == "Always", sidecar
    uid = post_rendered.copies.foo("h", "inj-h", "inj-h-dep")
    wait(post_rendered.kubectl, "Deployment inj-h-dep, controlled by the post-rendered copy's Foo",
         lambda: post_rendered.copies.owned("inj-h-dep", "h", uid), RECONCILE_WAIT, "app=op-h")
    webhook_calls_reach_regroup(post_rendered, ["h", *INJECTED])
    roles = {c: post_rendered.of(c, "Role", "kube-system")[0]["metadata"]["name"] for c in ["h", *INJECTED]}
    assert len(set(roles.values())) == 3 and all(r.endswith("foo-operator-leader-election") for r in roles.values())
    post_rendered.kubectl("get", "role", roles["h"], "-n", "kube-system")


# --- a leader-electing app injected twice: kube-scheduler, each copy its own Lease in kube-system ---------------

# kube-scheduler (unmodified, v1.36.2's static binary as an image: REGROUP_E2E_SCHEDULER_IMAGE) as an operator
# ships it: its Deployment (in-cluster config, so through regroup once injected; a KubeSchedulerConfiguration in a
# ConfigMap electing a leader on the Lease kube-system/SCHED_LEASE, its one profile a scheduler name no pod uses,
# so it schedules nothing), the cluster's own ClusterRoles bound to its ServiceAccount (system:kube-scheduler,
# system:volume-scheduler: kept names), and in kube-system the leader-election Role and RoleBinding naming that
# Lease and a RoleBinding to extension-apiserver-authentication-reader (its delegated authentication), each under
# the same name in both copies.
SCHED_LEASE = "regroup-e2e-scheduler"
SCHEDULED = {c: f"samplecontroller.rg{RUN}{c}.example.com" for c in "kl"}  # its rules only mark the copy
ALL_GROUPS.update(SCHEDULED)
SCHEDULER_OPERATOR = """\
apiVersion: v1
kind: ServiceAccount
metadata: {name: @REL@-scheduler, namespace: @NS@}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: @NS@-@REL@-scheduler}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:kube-scheduler"}
subjects: [{kind: ServiceAccount, name: @REL@-scheduler, namespace: @NS@}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: @NS@-@REL@-volume-scheduler}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:volume-scheduler"}
subjects: [{kind: ServiceAccount, name: @REL@-scheduler, namespace: @NS@}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: regroup-e2e-scheduler-leader-election, namespace: kube-system}
rules:
  - {apiGroups: [coordination.k8s.io], resources: [leases], resourceNames: [@LEASE@], verbs: [get, update, patch]}
  - {apiGroups: [coordination.k8s.io], resources: [leases], verbs: [create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: regroup-e2e-scheduler-leader-election, namespace: kube-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: regroup-e2e-scheduler-leader-election}
subjects: [{kind: ServiceAccount, name: @REL@-scheduler, namespace: @NS@}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: regroup-e2e-scheduler-auth-reader, namespace: kube-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: extension-apiserver-authentication-reader}
subjects: [{kind: ServiceAccount, name: @REL@-scheduler, namespace: @NS@}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: @REL@-scheduler-config, namespace: @NS@}
data:
  config.yaml: |
    apiVersion: kubescheduler.config.k8s.io/v1
    kind: KubeSchedulerConfiguration
    leaderElection:
      leaderElect: true
      resourceLock: leases
      resourceNamespace: kube-system
      resourceName: @LEASE@
      leaseDuration: 15s
      renewDeadline: 10s
      retryPeriod: 2s
    profiles:
      - schedulerName: regroup-test-none
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: @REL@-scheduler, namespace: @NS@}
spec:
  selector: {matchLabels: {app: @REL@}}
  template:
    metadata: {labels: {app: @REL@}}
    spec:
      serviceAccountName: @REL@-scheduler
      securityContext: {runAsNonRoot: true, runAsUser: 65532}
      containers:
        - name: kube-scheduler
          image: @IMAGE@
          imagePullPolicy: IfNotPresent
          args: [--config=/etc/kube-scheduler/config.yaml, --v=2]
          readinessProbe:
            httpGet: {path: /readyz, port: 10259, scheme: HTTPS}
            periodSeconds: 2
          securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
          volumeMounts: [{name: config, mountPath: /etc/kube-scheduler, readOnly: true}]
      volumes: [{name: config, configMap: {name: @REL@-scheduler-config}}]
"""


@pytest.fixture(scope="module")
def scheduled(kubectl, image, namespace, regroup_bin, tmp_path_factory):
    """SCHEDULER_OPERATOR wrapped by `regroup inject` twice (releases sch-k,
    sch-l, each its own rules), applied; yields (kubectl, copy -> inject's
    documents)."""
    sched_image = require_env("REGROUP_E2E_SCHEDULER_IMAGE",
                              "an unmodified kube-scheduler image (its entrypoint the binary) to inject twice")
    tmp = tmp_path_factory.mktemp("pods-scheduler")
    docs = {}
    try:
        for copy in SCHEDULED:
            rel = f"sch-{copy}"
            manifest = tmp / f"{rel}.yaml"
            manifest.write_text(SCHEDULER_OPERATOR.replace("@REL@", rel).replace("@NS@", NS)
                                .replace("@IMAGE@", sched_image).replace("@LEASE@", SCHED_LEASE))
            rules = tmp / f"rules-{copy}.yaml"
            rules.write_text(yaml.safe_dump({"rules": [{"from": ORIG, "to": SCHEDULED[copy]}]}))
            out = run([regroup_bin, "inject", "-c", str(rules), "-f", str(manifest), "--prefix", f"{rel}-regroup"],
                      what=f"regroup inject ({rel})")
            docs[copy] = [d for d in yaml.safe_load_all(out) if d]
            by_namespace(kubectl, "apply", docs[copy])
        yield kubectl, docs
    finally:
        for copy, ds in docs.items():
            outside = [d for d in ds if d["metadata"].get("namespace") in (None, "kube-system")]
            by_namespace(kubectl, "delete", outside, "--ignore-not-found", "--wait=false", check=False)
        system = Kubectl(KUBECONFIG, tmp / "kube-system-cache", "kube-system")
        for lease in system.json("get", "leases")["items"]:
            if lease["metadata"]["name"].endswith(SCHED_LEASE):
                system.run("delete", "lease", lease["metadata"]["name"], "--ignore-not-found", check=False)


def test_inject_leader_electing_app_each_copy_takes_and_renews_its_own_lease(scheduled, tmp_path):
    """kube-scheduler, unmodified, injected twice: both pods Ready (regroup
    a native sidecar; the scheduler's own /readyz, its informers synced
    through regroup); in kube-system two Leases, one per copy, each named
    with its copy's mark over the app's fixed name (the mark in that copy's
    sidecar configuration), each held by its own copy's pod
    (holderIdentity: the pod's host name, then `_` and an id) and renewed
    (renewTime advancing over several retry periods, the holder the
    same); no Lease under the app's own name (neither copy wrote through
    unmarked), the cluster's real scheduler's Lease still its own."""
    k, docs = scheduled
    system = Kubectl(KUBECONFIG, tmp_path / "kube-system-cache", "kube-system")
    pods, marks = {}, {}
    for copy in SCHEDULED:
        def one_ready():
            items = [p for p in k.json("get", "pods", "-l", f"app=sch-{copy}")["items"]
                     if not p["metadata"].get("deletionTimestamp")]
            return items[0] if len(items) == 1 and condition(items[0], "Ready") else None
        pod = wait(k, f"scheduler copy {copy}'s pod Ready", one_ready, READY_WAIT, f"app=sch-{copy}")
        (sidecar,) = [c for c in pod["spec"].get("initContainers", []) if c["name"] == "regroup"]
        assert sidecar.get("restartPolicy") == "Always", sidecar
        pods[copy] = pod["metadata"]["name"]
        (cm,) = [d for d in docs[copy]
                 if d["kind"] == "ConfigMap" and d["metadata"]["name"] == f"sch-{copy}-regroup-config"]
        names = yaml.safe_load(cm["data"]["config.yaml"])["names"]
        assert SCHED_LEASE in names["namespaced"]["names"], names
        marks[copy] = names["prefix"]
    assert len(set(marks.values())) == 2, marks

    def leases():
        return {l["metadata"]["name"]: l for l in system.json("get", "leases")["items"]
                if l["metadata"]["name"].endswith(SCHED_LEASE)}

    def both_held():
        got = leases()
        held = {c: got.get(marks[c] + SCHED_LEASE) for c in SCHEDULED}
        ok = all(l and (l["spec"].get("holderIdentity") or "").startswith(pods[c] + "_") for c, l in held.items())
        return held if ok else None
    t0 = time.monotonic()
    first = wait(k, "each copy's Lease held by its own pod", both_held, 120, "app in (sch-k, sch-l)")
    took = time.monotonic() - t0
    assert sorted(leases()) == sorted(marks[c] + SCHED_LEASE for c in SCHEDULED), sorted(leases())
    time.sleep(3 * 2 + 1)  # past three retry periods (2 s): the leader renews each one
    again = both_held()
    assert again, leases()
    for c in SCHEDULED:
        assert again[c]["spec"]["holderIdentity"] == first[c]["spec"]["holderIdentity"], (first[c], again[c])
        assert instant_micro(again[c]["spec"]["renewTime"]) > instant_micro(first[c]["spec"]["renewTime"]), \
            (c, first[c]["spec"], again[c]["spec"])
    real = system.run("get", "lease", "kube-scheduler", "-o", "json", check=False)
    if real.returncode == 0:
        holder = json.loads(real.stdout)["spec"].get("holderIdentity") or ""
        assert not any(p in holder for p in pods.values()), holder
    for c in SCHEDULED:
        log = k("logs", pods[c], "-c", "kube-scheduler")
        # The app names its own Lease; regroup marked it on the way to the cluster.
        assert f'"Successfully acquired lease" lock="kube-system/{SCHED_LEASE}"' in log, log[-3000:]
        # No error but the test bed's build's start-up line (its OpenShift-patched options, inert without
        # --openshift-config: "The manifest file is empty, ignoring.").
        errors = [line for line in klog_errors(stamped_plain(log)) if "The manifest file is empty" not in line]
        assert errors == [], errors
    print(f"scheduler: Leases {sorted(leases())} held by {[again[c]['spec']['holderIdentity'] for c in SCHEDULED]}"
          f" ({took:.0f}s after both pods Ready), renewed")


def stamped_plain(text):
    """Log lines without the runtime's times, as klog_errors takes them."""
    return [(None, line) for line in text.splitlines()]


def instant_micro(ts):
    """A Lease's MicroTime (RFC 3339 with microseconds) as a datetime."""
    return datetime.datetime.fromisoformat(ts.replace("Z", "+00:00"))


# --- the aggregated front as a pod --------------------------------------------------------------------------------

FRONT_GROUP = f"wardle.rg{RUN}f.example.com"
SAMPLE_APISERVER = "realk8s.local/sample-apiserver:v1.36.2"
ETCD = "realk8s.local/etcd:v3.6.14"


def front_values():
    """charts/regroup/examples/front.yaml with the node's images (REGROUP_E2E_APISERVER_IMAGE,
    REGROUP_E2E_ETCD_IMAGE) and the run's group."""
    v = yaml.safe_load((CHART / "examples" / "front.yaml").read_text())
    v["rules"] = [{"from": "wardle.example.com", "to": FRONT_GROUP}]
    api, etcd = v["app"]["containers"]
    api.update(image=os.environ.get("REGROUP_E2E_APISERVER_IMAGE", SAMPLE_APISERVER), imagePullPolicy="IfNotPresent",
               args=[*api["args"], "--cert-dir=/tmp/certs"])
    etcd.update(image=os.environ.get("REGROUP_E2E_ETCD_IMAGE", ETCD), imagePullPolicy="IfNotPresent",
                args=["--data-dir=/tmp/etcd", "--listen-client-urls=http://127.0.0.1:2379",
                      "--advertise-client-urls=http://127.0.0.1:2379", "--listen-peer-urls=http://127.0.0.1:2380",
                      "--initial-advertise-peer-urls=http://127.0.0.1:2380",
                      "--initial-cluster=default=http://127.0.0.1:2380"])
    etcd.pop("command", None)
    # What sample-apiserver 1.36 also lists (the example's rules are 1.31's): namespaces, admission policies.
    v["rbac"]["rules"] += [
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["admissionregistration.k8s.io"],
         "resources": ["mutatingadmissionpolicies", "mutatingadmissionpolicybindings"],
         "verbs": ["get", "list", "watch"]}]
    return v


def test_front_as_a_pod_serves_flunders_through_the_aggregator(kubectl, image, namespace, tmp_path):
    """The chart in front mode (examples/front.yaml's shape, the app's
    readinessProbe kept): sample-apiserver and etcd behind regroup's front in
    one pod, the APIService for the renamed group pointing at the chart's
    ClusterIP Service: Available; a Flunder created, listed and watched
    through the real aggregator under the renamed group."""
    env = helm_env(tmp_path)
    values = tmp_path / "values-f.yaml"
    values.write_text(yaml.safe_dump(front_values()))
    apiservice = f"v1alpha1.{FRONT_GROUP}"
    try:
        run([str(HELM), "install", "rg-f", str(CHART), "-n", NS, "--kubeconfig", KUBECONFIG, "-f", str(values)],
            timeout=300, what="helm install rg-f (front)")

        def ready():
            pods = [p for p in kubectl.json("get", "pods", "-l", "app.kubernetes.io/instance=rg-f")["items"]
                    if not p["metadata"].get("deletionTimestamp")]
            return pods[0] if len(pods) == 1 and condition(pods[0], "Ready") else None
        wait(kubectl, "the front's pod Ready", ready, READY_WAIT, "app.kubernetes.io/instance=rg-f")
        svc = wait(kubectl, f"APIService {apiservice} Available",
                   lambda: (lambda a: a if condition(a, "Available") else None)(
                       kubectl.json("get", "apiservice", apiservice)), 120, "app.kubernetes.io/instance=rg-f")
        assert svc["spec"]["service"]["namespace"] == NS, svc["spec"]
        assert kubectl.json("get", "service", svc["spec"]["service"]["name"])["spec"]["type"] == "ClusterIP"
        watcher = subprocess.Popen(kubectl.argv("get", f"flunders.{FRONT_GROUP}", "--watch", "-o", "name",
                                                "--request-timeout=60s"),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(2)
            for name in ("one", "two"):
                kubectl("create", "-f", "-", input=json.dumps({
                    "apiVersion": f"{FRONT_GROUP}/v1alpha1", "kind": "Flunder",
                    "metadata": {"name": name, "namespace": NS}, "spec": {}}))
            listed = kubectl.json("get", f"flunders.{FRONT_GROUP}")
            assert sorted(i["metadata"]["name"] for i in listed["items"]) == ["one", "two"]
            assert {i["apiVersion"] for i in listed["items"]} == {f"{FRONT_GROUP}/v1alpha1"}
            seen = []
            deadline = time.monotonic() + 30
            while len(set(seen)) < 2 and time.monotonic() < deadline:
                line = watcher.stdout.readline()
                if not line:
                    break
                seen.append(line.strip())
            assert {s.split("/")[-1] for s in seen} >= {"one", "two"}, (seen, watcher.stderr.read()
                                                                         if watcher.poll() is not None else "")
        finally:
            watcher.kill()
            watcher.wait()
    finally:
        kubectl.run("delete", f"flunders.{FRONT_GROUP}", "--all", "--ignore-not-found", "--wait=false", check=False)
        subprocess.run([str(HELM), "uninstall", "rg-f", "-n", NS, "--kubeconfig", KUBECONFIG],
                       capture_output=True, text=True, timeout=300, env=env)


# --- readiness follows the upstream ------------------------------------------------------------------------------


def test_readiness_follows_the_upstream(kubectl, image, namespace, tmp_path):
    """A regroup pod (the image, `regroup serve`, the chart's readinessProbe:
    GET /readyz on the metrics port) whose upstream is a Service the test
    controls: a ClusterIP Service without a selector, its EndpointSlice
    naming the cluster's own apiserver (the `kubernetes` Service's
    endpoints), reached with the pod's service-account token, the cluster's
    CA and the name on the apiserver's certificate (`tls-server-name:
    kubernetes.default.svc`). Ready; the EndpointSlice deleted (the upstream
    unreachable: kube-proxy rejects new connections to the Service): the
    pod's Ready condition goes False and its /readyz says `[-]upstream
    failed`; the EndpointSlice made again: Ready again, /readyz 200. The
    container is never restarted (its /livez is the process).

    An established connection keeps its NAT entry when a Service loses its
    endpoints (kube-proxy flushes TCP conntrack entries only for UDP), so
    regroup's idle upstream connections are closed after 1 s
    (`limits.upstreamIdleConnectionTimeout`): each check then opens a new
    one through the Service, as it would after a real outage had broken the
    old one."""
    k = kubectl
    name, svc = "rg-ready", "rg-ready-upstream"
    default = Kubectl(KUBECONFIG, tmp_path / "default-cache", "default")
    (apiserver,) = default.json("get", "endpointslices", "-l", "kubernetes.io/service-name=kubernetes")["items"]
    (port,) = apiserver["ports"]
    slice_ = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
              "metadata": {"name": f"{svc}-1", "namespace": NS, "labels": {"kubernetes.io/service-name": svc}},
              "addressType": apiserver["addressType"],
              "ports": [{"name": "https", "port": port["port"], "protocol": "TCP"}],
              "endpoints": [{"addresses": e["addresses"], "conditions": {"ready": True}}
                            for e in apiserver["endpoints"]]}
    k("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": svc, "namespace": NS},
         "spec": {"type": "ClusterIP", "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]}}, slice_]}))
    cluster_ip = k.json("get", "service", svc)["spec"]["clusterIP"]
    sa = "/var/run/secrets/kubernetes.io/serviceaccount"
    kubeconfig = {"apiVersion": "v1", "kind": "Config", "current-context": "upstream",
                  "clusters": [{"name": "upstream", "cluster": {
                      "server": f"https://[{cluster_ip}]:443" if ":" in cluster_ip else f"https://{cluster_ip}:443",
                      "certificate-authority": f"{sa}/ca.crt", "tls-server-name": "kubernetes.default.svc"}}],
                  "users": [{"name": "sa", "user": {"tokenFile": f"{sa}/token"}}],
                  "contexts": [{"name": "upstream", "context": {"cluster": "upstream", "user": "sa"}}]}
    config = {"rules": [{"from": ORIG, "to": f"samplecontroller.rg{RUN}u.example.com"}],
              "listeners": {"http": "127.0.0.1:8001", "metrics": "0.0.0.0:9090"},
              "upstream": {"kubeconfig": "/etc/regroup/kubeconfig"},
              "logging": {"format": "json"},
              "limits": {"upstreamIdleConnectionTimeout": "1s"}}
    k("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS},
        "data": {"config.yaml": yaml.safe_dump(config), "kubeconfig": yaml.safe_dump(kubeconfig)}}))
    probe = {"httpGet": {"path": "/readyz", "port": 9090}, "periodSeconds": 2, "failureThreshold": 1,
             "timeoutSeconds": 6}
    k("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
        "spec": {"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                 "containers": [{"name": "regroup", "image": image["tag"], "imagePullPolicy": "Never",
                                 "args": ["serve", "-c", "/etc/regroup/config.yaml"],
                                 "ports": [{"name": "metrics", "containerPort": 9090}],
                                 "readinessProbe": probe,
                                 "livenessProbe": {"httpGet": {"path": "/livez", "port": 9090}, "periodSeconds": 2},
                                 "volumeMounts": [{"name": "config", "mountPath": "/etc/regroup", "readOnly": True}],
                                 "securityContext": {"readOnlyRootFilesystem": True,
                                                     "allowPrivilegeEscalation": False,
                                                     "capabilities": {"drop": ["ALL"]}}}],
                 "volumes": [{"name": "config", "configMap": {"name": name}}]}}))
    client = api_client(k, tmp_path)
    readyz = f"/api/v1/namespaces/{NS}/pods/{name}:9090/proxy/readyz?verbose"

    def ready(want):
        def check():
            p = k.json("get", "pod", name)
            return p if condition(p, "Ready") == want and p["status"].get("containerStatuses") else None
        return check
    pod = wait(k, f"pod {name} Ready", ready(True), READY_WAIT)
    restarts = pod["status"]["containerStatuses"][0]["restartCount"]
    assert api_get(client, readyz)[0] == 200
    flips = []
    for round_ in (1, 2):
        k("delete", "endpointslice", slice_["metadata"]["name"])
        t0 = time.monotonic()
        wait(k, f"pod {name} not Ready with its upstream's endpoints gone", ready(False), 90)
        down = time.monotonic() - t0
        status, body = api_get(client, readyz)
        assert status == 503 and "[-]upstream failed" in body, (status, body)
        k("apply", "-f", "-", input=json.dumps(slice_))
        t0 = time.monotonic()
        pod = wait(k, f"pod {name} Ready again with its upstream back", ready(True), 90)
        up = time.monotonic() - t0
        assert api_get(client, readyz)[0] == 200
        flips.append((round(down, 1), round(up, 1)))
    assert pod["status"]["containerStatuses"][0]["restartCount"] == restarts, "the container was restarted"
    log = k("logs", name)
    assert "Bearer" not in log
    print(f"readiness: (not ready after, ready again after) seconds per round: {flips}")
