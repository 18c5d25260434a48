"""`regroup migrate` (docs/migrate.md), the same test against the stand-in and
against a real cluster (REGROUP_E2E_KUBECONFIG, admin rights).

Each test has its own pair of Foo groups A and B (`samplecontroller.mNNNN-KA.example.com`, unique per run, so
nothing collides with the suite's own CRD or with an earlier run), both CRDs
rendered with `regroup render` from e2e/manifests/crd-foos.yaml and created,
and its own namespace, where it makes sample-controller's shape itself: Foos
alpha, beta, gamma (alpha and beta with status, written through the status
subresource), each owning its Deployment, alpha and beta a ConfigMap each.
It moves them from A to B and checks on the cluster; at the end it removes
what it made (namespace, CRDs, cluster-scoped objects), finalizers first.

Stand-in mode: each test starts its own stand-in with finalizers and
DeleteOptions honoured (`--finalizers`), its CRDs' validation and status
rules (`--strict-crds`) and its garbage collector (immediate, where a real
one takes a moment); the retry test also with `--flaky 2` (stand-in only: the
faults are the stand-in's). A real cluster does all of it itself."""
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
import uuid

import pytest
import yaml

from conftest import start_regroup, start_standin
from e2e_support import DIRECT, E2E, REAL, stop, tail, wait_for, write_kubeconfig

pytestmark = pytest.mark.skipif(DIRECT, reason="REGROUP_E2E_DIRECT: migrate talks to the cluster itself")

ORIG = "samplecontroller.k8s.io"
RUN = uuid.uuid4().hex[:6]
COUNTER = itertools.count(1)
FOOS = ("alpha", "beta", "gamma")
# Statuses the test writes (gamma has none).
STATUS = {"alpha": {"availableReplicas": 1}, "beta": {"availableReplicas": 2}}


class Cluster:
    """The cluster (the stand-in or a real one) through the official Python
    client's ApiClient (its kubeconfig handling: TLS, tokens, exec plugins),
    raw JSON; and `regroup migrate` against it."""

    def __init__(self, kubeconfig, binary, workdir, ns, a, b):
        from kubernetes import config
        self.kubeconfig, self.binary, self.workdir, self.ns, self.a, self.b = kubeconfig, binary, workdir, ns, a, b
        self.client = config.new_client_from_config(config_file=str(kubeconfig))
        self.client.user_agent = "e2e-setup/1"  # spared by the stand-in's --flaky
        self.cluster_scoped = []  # paths of cluster-scoped objects to delete at the end
        self.configs = {}
        for name, group in (("from", a), ("to", b)):
            p = workdir / f"{name}.yaml"
            p.write_text(f"rules:\n  - from: {ORIG}\n    to: {group}\n")
            self.configs[name] = p

    def call(self, method, path, body=None, ctype="application/json"):
        from kubernetes.client.rest import ApiException
        try:
            r = self.client.call_api(path, method, header_params={"Content-Type": ctype, "Accept": "application/json"},
                                     body=body, auth_settings=["BearerToken"], _preload_content=False,
                                     _return_http_data_only=True, _request_timeout=30)
            return r.status, json.loads(r.data or b"{}")
        except ApiException as e:
            try:
                return e.status, json.loads(e.body or b"{}")
            except ValueError:
                return e.status, {"body": str(e.body)[:500]}

    def get(self, path):
        code, obj = self.call("GET", path)
        return obj if code == 200 else None

    def ok(self, method, path, body=None, ctype="application/json"):
        code, obj = self.call(method, path, body, ctype)
        assert code in (200, 201), (method, path, code, obj)
        return obj

    def foo_path(self, group, name=""):
        return f"/apis/{group}/v1alpha1/namespaces/{self.ns}/foos" + (f"/{name}" if name else "")

    def foos(self, group, terminating=True):
        """The Foos of `group` in the namespace, by name (with `terminating`
        False, not those being deleted)."""
        items = self.ok("GET", self.foo_path(group))["items"]
        return {o["metadata"]["name"]: o for o in items
                if terminating or not o["metadata"].get("deletionTimestamp")}

    def sources_left(self, names):
        """Waits until A holds exactly `names` (a real cluster deletes a source
        deleted with propagationPolicy Orphan once its garbage collector has
        handled the `orphan` finalizer)."""
        def check():
            left = self.foos(self.a)
            return (left,) if set(left) == set(names) else None
        return wait_for(f"the Foos left in {self.a} to be {sorted(names)}", check,
                        diag=lambda: str(sorted(self.foos(self.a))))[0]

    def install_crd(self, group, maximum=True):
        """The suite's Foo CRD rendered for `group` by regroup, created; waited
        for until Established."""
        cfg = self.workdir / f"render-{group}.yaml"
        cfg.write_text(f"rules:\n  - from: {ORIG}\n    to: {group}\n")
        out = subprocess.run([self.binary, "render", "-c", cfg, "-f", E2E / "manifests" / "crd-foos.yaml"],
                             capture_output=True, text=True, check=True).stdout
        crd = yaml.safe_load(out)
        if not maximum:  # a schema difference between the groups
            for v in crd["spec"]["versions"]:
                v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"].pop("maximum", None)  # (one dict: YAML anchors)
        path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/foos.{group}"
        self.cluster_scoped.append(path)
        self.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)

        def established():
            crd = self.get(path) or {}
            return any(c.get("type") == "Established" and c.get("status") == "True"
                       for c in (crd.get("status") or {}).get("conditions") or [])
        wait_for(f"CRD foos.{group} Established", established)
        # Served (a real apiserver's discovery follows a moment later).
        wait_for(f"foos.{group} served", lambda: self.call("GET", self.foo_path(group))[0] == 200)

    def create_cluster_scoped(self, collection, body):
        obj = self.ok("POST", collection, body)
        self.cluster_scoped.append(f"{collection}/{obj['metadata']['name']}")
        return obj

    def seed(self):
        """sample-controller's shape in A: Foos with status, each owning its
        Deployment (0 replicas: the controller of the last test scales it), alpha
        and beta a ConfigMap each. Returns the dependents: {path: owner}."""
        deps = {}
        for i, name in enumerate(FOOS):
            foo = self.ok("POST", self.foo_path(self.a), {
                "apiVersion": f"{self.a}/v1alpha1", "kind": "Foo",
                "metadata": {"name": name, "labels": {"app": "sample", "foo": name}},
                "spec": {"deploymentName": f"{name}-deploy", "replicas": i + 1}})
            if name in STATUS:
                self.ok("PUT", self.foo_path(self.a, name) + "/status", dict(foo, status=STATUS[name]))
            ref = {"apiVersion": f"{self.a}/v1alpha1", "kind": "Foo", "name": name, "uid": foo["metadata"]["uid"],
                   "controller": True, "blockOwnerDeletion": True}
            self.ok("POST", f"/apis/apps/v1/namespaces/{self.ns}/deployments",
                    dict(deployment(f"{name}-deploy", name), metadata={"name": f"{name}-deploy",
                                                                       "ownerReferences": [ref]}))
            deps[f"/apis/apps/v1/namespaces/{self.ns}/deployments/{name}-deploy"] = name
            if name != "gamma":
                self.ok("POST", f"/api/v1/namespaces/{self.ns}/configmaps", {
                    "apiVersion": "v1", "kind": "ConfigMap", "data": {"owner": name},
                    "metadata": {"name": f"{name}-cm", "ownerReferences": [ref]}})
                deps[f"/api/v1/namespaces/{self.ns}/configmaps/{name}-cm"] = name
        return deps

    def snapshot(self, paths):
        """What a run that writes nothing leaves as it is: every Foo's and
        ConfigMap's resourceVersion; each Deployment's uid, generation and
        metadata but its resourceVersion (a real cluster's Deployment
        controller writes their status)."""
        out = {}
        for group in (self.a, self.b):
            out.update({(group, n): o["metadata"]["resourceVersion"] for n, o in self.foos(group).items()})
        for p in paths:
            o = self.get(p)
            if o is None:
                out[p] = None
            elif "/deployments/" in p:
                md = {k: v for k, v in o["metadata"].items() if k not in ("resourceVersion", "managedFields")}
                out[p] = json.dumps(md, sort_keys=True)
            else:
                out[p] = o["metadata"]["resourceVersion"]
        return out

    def argv(self, *args, stopped=True):
        # The tests write the sources themselves moments before moving them:
        # `--controllers-stopped` says those writes were theirs (one test
        # runs without it and sees the refusal).
        extra = ["--controllers-stopped"] if stopped and "--yes" in args else []
        return [self.binary, "migrate", "--from", self.configs["from"], "--to", self.configs["to"],
                "--kubeconfig", self.kubeconfig, *args, *extra]

    def migrate(self, *args, env=None, stopped=True):
        p = subprocess.run(self.argv(*args, stopped=stopped), capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, **(env or {})))
        return p.returncode, p.stdout + p.stderr

    def clean_up(self):
        """Finalizers off every Foo, then the namespace, the CRDs and the
        cluster-scoped objects deleted (a real cluster's namespace would
        otherwise stay Terminating)."""
        for group in (self.a, self.b):
            code, listed = self.call("GET", self.foo_path(group))
            for o in listed.get("items", []) if code == 200 else []:
                if o["metadata"].get("finalizers"):
                    self.call("PATCH", self.foo_path(group, o["metadata"]["name"]), {"metadata": {"finalizers": None}},
                              "application/merge-patch+json")
        self.call("DELETE", f"/api/v1/namespaces/{self.ns}")
        for path in self.cluster_scoped:
            self.call("DELETE", path)


@pytest.fixture
def cluster(regroup_bin, workdir, request):
    n = next(COUNTER)
    d = workdir / f"migrate-{request.node.name}"
    d.mkdir()
    ns = f"mig-{RUN}-{n}"
    a, b = (f"samplecontroller.m{RUN}-{n}{side}.example.com" for side in "ab")
    proc = None
    if REAL:
        kc = os.environ["REGROUP_E2E_KUBECONFIG"]
    else:
        # The retry test's apiserver fails every 2nd write (in a namespace).
        extra = ["--flaky", 2] if request.node.name == "test_retries_through_a_failing_apiserver" else []
        proc, port, _ = start_standin(d, "standin", "--seed-namespace", "", "--finalizers", "--strict-crds", *extra)
        kc = write_kubeconfig(d / "cluster.kubeconfig", f"http://127.0.0.1:{port}", ns)
    c = Cluster(kc, regroup_bin, d, ns, a, b)
    c.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    try:
        yield c
    finally:
        if REAL:
            c.clean_up()
        if proc:
            stop(proc)


def deployment(name, foo):
    """A Deployment as sample-controller makes it for Foo `foo`, with 0
    replicas (the controller of the first test scales it)."""
    labels = {"app": "nginx", "controller": foo}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9"}]}}}}


def owner_of(c, path):
    return c.ok("GET", path)["metadata"].get("ownerReferences")


def assert_moved(c, before, dependents, dep_uids=None):
    """Every Foo of `before` is in B only, once, with its spec, labels and
    status and the source uid annotated; every dependent exists (with its
    uid of `dep_uids`: never re-created), owned by the B Foo alone."""
    c.sources_left(set())
    after = c.foos(c.b)
    assert set(after) == set(before), "each Foo once in B, no other"
    for name, old in before.items():
        new = after[name]
        assert new["metadata"]["uid"] != old["metadata"]["uid"]
        assert new["metadata"]["annotations"]["regroup.dev/migrated-from-uid"] == old["metadata"]["uid"]
        assert new["spec"] == old["spec"] and new["metadata"].get("labels") == old["metadata"].get("labels")
        assert new.get("status") == old.get("status"), name
    for path, owner in dependents.items():
        dep = c.get(path)
        assert dep is not None, f"{path} was collected"
        if dep_uids:
            assert dep["metadata"]["uid"] == dep_uids[path], f"{path} was re-created"
        assert dep["metadata"].get("ownerReferences") == [{
            "apiVersion": f"{c.b}/v1alpha1", "kind": "Foo", "name": owner, "uid": after[owner]["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}], path
    return after


# A sample-controller (its syncHandler's decisions), as a Kopf operator that
# knows only the original group: for each Foo it reads the Deployment
# `spec.deploymentName` and creates it only if it is missing; one that exists
# but is not controlled by this Foo (metav1.IsControlledBy: the controller
# ownerReference's uid) is refused as sample-controller refuses it; replicas
# are brought to the Foo's. Then it records the Deployment's uid on the Foo
# and its replicas in status. Each creation is recorded in a file.
CONTROLLER = f'''
import os
import kopf
import kubernetes
from kubernetes.client.rest import ApiException

kubernetes.config.load_kube_config()  # KUBECONFIG: the app's, through regroup
apps = kubernetes.client.AppsV1Api()
RECORD = os.environ["E2E_RECORD"]


@kopf.on.startup()
def configure(settings, **_):
    settings.watching.server_timeout = 30
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage()


@kopf.on.resume("{ORIG}", "v1alpha1", "foos")
@kopf.on.create("{ORIG}", "v1alpha1", "foos")
def sync(body, spec, name, namespace, uid, patch, **_):
    want = spec["deploymentName"]
    try:
        d = apps.read_namespaced_deployment(want, namespace)
    except ApiException as e:
        if e.status != 404:
            raise
        with open(RECORD, "a") as f:
            f.write(f"created {{want}}\\n")
        labels = {{"app": "nginx", "controller": name}}
        d = apps.create_namespaced_deployment(namespace, {{
            "metadata": {{"name": want, "ownerReferences": [{{
                "apiVersion": body["apiVersion"], "kind": "Foo", "name": name, "uid": uid,
                "controller": True, "blockOwnerDeletion": True}}]}},
            "spec": {{"replicas": spec["replicas"], "selector": {{"matchLabels": labels}},
                     "template": {{"metadata": {{"labels": labels}},
                                  "spec": {{"containers": [{{"name": "pause", "image": "registry.k8s.io/pause:3.9"}}]}}}}}}}})
    controller = [r for r in d.metadata.owner_references or [] if r.controller]
    if not controller or controller[0].uid != uid:
        raise kopf.PermanentError(f"Resource {{want}} already exists and is not managed by Foo")
    if d.spec.replicas != spec["replicas"]:
        d = apps.patch_namespaced_deployment(want, namespace, {{"spec": {{"replicas": spec["replicas"]}}}})
    patch.metadata.annotations["e2e.regroup.dev/reconciled-deployment"] = d.metadata.uid
    patch.metadata.annotations["e2e.regroup.dev/owner-api-version"] = controller[0].api_version
    patch.status["availableReplicas"] = d.spec.replicas
'''


def run_controller(c, dependents, dep_uids):
    """The sample-controller above behind `regroup serve` with TO's rules: it
    reconciles every moved Foo (annotation and status written, its
    Deployment scaled from 0 to the Foo's replicas) and re-creates no
    Deployment."""
    pytest.importorskip("kopf", reason="kopf is in e2e/requirements.txt; run e2e/install.sh")
    proc, port, _ = start_regroup(c.binary, c.workdir, "serve-controller", c.configs["to"], c.kubeconfig)
    op, record, log = c.workdir / "controller.py", c.workdir / "created.txt", c.workdir / "controller.log"
    op.write_text(CONTROLLER)
    record.write_text("")
    kc = write_kubeconfig(c.workdir / "controller.kubeconfig", f"http://127.0.0.1:{port}", c.ns)
    kopf = subprocess.Popen([sys.executable, "-m", "kopf", "run", str(op), "--standalone", f"--namespace={c.ns}",
                             "--verbose"], stdout=open(log, "w"), stderr=subprocess.STDOUT,
                            env=dict(os.environ, KUBECONFIG=str(kc), E2E_RECORD=str(record)))
    try:
        def reconciled():
            assert kopf.poll() is None, f"the controller exited:\n{tail(log, 60)}"
            foos = c.foos(c.b)
            done = all("e2e.regroup.dev/reconciled-deployment" in (o["metadata"].get("annotations") or {})
                       and o.get("status", {}).get("availableReplicas") == o["spec"]["replicas"]
                       for o in foos.values())
            return foos if done and set(foos) == set(dependents.values()) else None
        foos = wait_for("the controller to reconcile every moved Foo", reconciled, diag=lambda: tail(log, 60))
    finally:
        stop(kopf)
        stop(proc)
    assert record.read_text() == "", f"the controller re-created Deployments:\n{record.read_text()}"
    for path, owner in dependents.items():
        if "/deployments/" not in path:
            continue
        d = c.ok("GET", path)
        assert d["metadata"]["uid"] == dep_uids[path], f"{path} re-created"
        ann = foos[owner]["metadata"]["annotations"]
        # The controller found this very Deployment, controlled by the Foo it
        # sees, in its own group; and scaled it (it did reconcile).
        assert ann["e2e.regroup.dev/reconciled-deployment"] == dep_uids[path]
        assert ann["e2e.regroup.dev/owner-api-version"] == f"{ORIG}/v1alpha1"
        assert d["spec"]["replicas"] == foos[owner]["spec"]["replicas"]
    deployments = c.ok("GET", f"/apis/apps/v1/namespaces/{c.ns}/deployments")["items"]
    assert sorted(d["metadata"]["name"] for d in deployments) == \
        sorted(p.rsplit("/", 1)[1] for p in dependents if "/deployments/" in p)
    text = log.read_text()
    assert "Traceback" not in text and "PermanentError" not in text, text[-4000:]


def test_foos_move_with_their_children_and_status_and_a_controller_takes_over(cluster):
    c = cluster
    c.install_crd(c.a)
    c.install_crd(c.b)
    deps = c.seed()
    # A Foo owned by alpha (listed before it: the plan must move alpha
    # first), owning a ConfigMap of its own.
    alpha = c.foos(c.a)["alpha"]
    ref = {"apiVersion": f"{c.a}/v1alpha1", "kind": "Foo", "name": "alpha", "uid": alpha["metadata"]["uid"],
           "controller": True, "blockOwnerDeletion": True}
    child = c.ok("POST", c.foo_path(c.a), {
        "apiVersion": f"{c.a}/v1alpha1", "kind": "Foo",
        "metadata": {"name": "aaa-child", "labels": {"app": "child"}, "ownerReferences": [ref]},
        "spec": {"deploymentName": "child-deploy", "replicas": 2}})
    child_ref = dict(ref, name="aaa-child", uid=child["metadata"]["uid"])
    c.ok("POST", f"/api/v1/namespaces/{c.ns}/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"},
        "metadata": {"name": "child-cm", "ownerReferences": [child_ref]}})
    c.ok("POST", f"/apis/apps/v1/namespaces/{c.ns}/deployments", dict(
        deployment("child-deploy", "aaa-child"), metadata={"name": "child-deploy", "ownerReferences": [child_ref]}))
    before = c.foos(c.a)
    assert before["alpha"]["status"] == STATUS["alpha"] and "status" not in before["gamma"]
    all_deps = dict(deps, **{f"/api/v1/namespaces/{c.ns}/configmaps/child-cm": "aaa-child",
                             f"/apis/apps/v1/namespaces/{c.ns}/deployments/child-deploy": "aaa-child"})
    dep_uids = {p: c.ok("GET", p)["metadata"]["uid"] for p in all_deps}
    ns = c.ns

    # The dry run: the plan, nothing written.
    snap = c.snapshot(all_deps)
    code, out = c.migrate()
    assert code == 0, out
    assert f"group {c.a} -> {c.b}" in out
    assert f"Foo.{c.a} -> foos.{c.b}: 4 objects in v1alpha1 (status through the status subresource)" in out, out
    for line in (f"Foo {ns}/alpha, with status", f"dependent to re-point: Deployment {ns}/alpha-deploy",
                 f"dependent to re-point: ConfigMap {ns}/alpha-cm", f"dependent to re-point: Foo {ns}/aaa-child",
                 f"dependent to re-point: ConfigMap {ns}/beta-cm", f"dependent to re-point: ConfigMap {ns}/child-cm",
                 f"dependent to re-point: Deployment {ns}/gamma-deploy",
                 f"CustomResourceDefinition foos.{c.a}: the source CRD", "dry run: nothing was changed"):
        assert line in out, (line, out)
    assert c.snapshot(all_deps) == snap and not c.foos(c.b)

    # Written seconds ago by someone else (this test): a controller may be
    # running, so --yes alone moves nothing.
    code, out = c.migrate("--yes", stopped=False)
    assert code == 1, out
    assert "a controller may still be running" in out and f"Foo {ns}/aaa-child: written by" in out, out
    assert "refusing to move" in out and "moving:" not in out, out
    assert c.snapshot(all_deps) == snap and not c.foos(c.b)

    code, out = c.migrate("--yes")
    assert code == 0, out
    # Owners first: alpha before the Foo it owns, though listed after it.
    assert out.index(f"] Foo {ns}/alpha: moved") < out.index(f"] Foo {ns}/aaa-child: moved"), out
    assert "4 moved" in out and "result: everything moved" in out, out
    assert "left in the source" in out and "owners unresolved: 0" in out, out
    after = assert_moved(c, before, all_deps, dep_uids)
    assert owner_of(c, c.foo_path(c.b, "aaa-child"))[0]["uid"] == after["alpha"]["metadata"]["uid"]

    # The app, behind a regroup with TO's rules, sees its Foos (with their
    # status) in its own group and each Deployment and ConfigMap controlled
    # by the Foo it sees. Behind FROM's rules the old copy sees none.
    for name, want in (("to", set(before)), ("from", set())):
        proc, port, _ = start_regroup(c.binary, c.workdir, f"serve-{name}", c.configs[name], c.kubeconfig)
        try:
            def app_get(path):
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
                    return json.loads(r.read())
            seen = {o["metadata"]["name"]: o for o in
                    app_get(f"/apis/{ORIG}/v1alpha1/namespaces/{ns}/foos")["items"]}
            assert set(seen) == want, name
            if not want:
                continue
            assert seen["alpha"]["status"] == before["alpha"]["status"]
            for path, owner in all_deps.items():
                refs = app_get(path)["metadata"]["ownerReferences"]
                controller = next(r for r in refs if r.get("controller"))
                assert controller["apiVersion"] == f"{ORIG}/v1alpha1"
                assert controller["uid"] == seen[owner]["metadata"]["uid"], path
        finally:
            stop(proc)

    # A second run has nothing to do and writes nothing.
    snap = c.snapshot(all_deps)
    code, out = c.migrate("--yes")
    assert code == 0, out
    assert "nothing to move" in out and "result: everything moved" in out, out
    assert c.snapshot(all_deps) == snap

    # A controller behind regroup with TO's rules takes over: it reconciles
    # every moved Foo and re-creates no Deployment.
    run_controller(c, all_deps, dep_uids)

    # The children really hang off the B Foos: the garbage collector takes
    # them when their owner goes (so the assertions above were not vacuous).
    c.ok("DELETE", c.foo_path(c.b, "alpha"))
    for path in (f"/apis/apps/v1/namespaces/{ns}/deployments/alpha-deploy", f"/api/v1/namespaces/{ns}/configmaps/alpha-cm",
                 c.foo_path(c.b, "aaa-child"), f"/api/v1/namespaces/{ns}/configmaps/child-cm"):
        wait_for(f"{path} collected", lambda: c.get(path) is None)
    assert c.get(f"/api/v1/namespaces/{ns}/configmaps/beta-cm") is not None


def test_an_interrupted_run_resumes(cluster):
    """Runs stopped after 1, 2, 3, ... writes (the test hook exits as a killed
    process would), each resumed by the next: no child is ever collected,
    no Foo is ever in neither group, and the last run completes."""
    c = cluster
    c.install_crd(c.a)
    c.install_crd(c.b)
    deps = c.seed()
    before = c.foos(c.a)
    dep_uids = {p: c.ok("GET", p)["metadata"]["uid"] for p in deps}
    runs, n = [], 0
    while True:
        n += 1
        assert n < 40, "no end in sight:\n" + "\n".join(runs)
        code, out = c.migrate("--yes", env={"REGROUP_MIGRATE_TEST_ABORT_AFTER_WRITES": str(1 + n % 3)})
        runs.append(out)
        for path in deps:
            assert c.get(path) is not None, f"run {n} lost {path}:\n{out}"
        a, b = c.foos(c.a), c.foos(c.b)
        assert set(a) | set(b) == set(FOOS), f"run {n}:\n{out}"
        if code == 0:
            break
        assert code == 75 and "test hook" in out, out
    assert n >= 4, f"the hook should have stopped several runs: {n}"
    assert_moved(c, before, deps, dep_uids)
    code, out = c.migrate("--yes")
    assert code == 0 and "nothing to move" in out, out


def test_a_killed_run_resumes(cluster):
    """`regroup migrate --yes` killed (SIGKILL) as soon as it reports its
    first object moved, while it moves the next: run again, it completes,
    no object lost or doubled, no child re-created; a third run does
    nothing."""
    c = cluster
    c.install_crd(c.a)
    c.install_crd(c.b)
    deps = c.seed()
    before = c.foos(c.a)
    dep_uids = {p: c.ok("GET", p)["metadata"]["uid"] for p in deps}
    # One object at a time: the kill lands while the next is moved, not
    # after every move in flight finished beside the first (a fast real
    # apiserver under load finished all three before it).
    p = subprocess.Popen(c.argv("--yes", "--concurrency", "1"), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    seen = []
    try:
        for line in p.stdout:
            seen.append(line)
            if re.search(r"\] Foo \S+: moved", line):
                p.send_signal(signal.SIGKILL)
                break
    finally:
        if p.poll() is None:
            p.kill()
        p.wait(30)
    out = "".join(seen)
    assert p.returncode == -signal.SIGKILL, f"not killed mid-way ({p.returncode}):\n{out}"
    assert "[1/3]" in out and "result:" not in out, out
    # Stopped mid-way: one Foo moved, the others still to go.
    live = c.foos(c.a, terminating=False)
    assert c.foos(c.b) and live and set(live) | set(c.foos(c.b)) == set(FOOS), out

    code, out = c.migrate("--yes")
    assert code == 0 and "result: everything moved" in out and "owners unresolved: 0" in out, out
    after = assert_moved(c, before, deps, dep_uids)
    # No duplicate: each source made exactly one target.
    assert sorted(o["metadata"]["annotations"]["regroup.dev/migrated-from-uid"] for o in after.values()) == \
        sorted(o["metadata"]["uid"] for o in before.values())

    snap = c.snapshot(deps)
    code, out = c.migrate("--yes")
    assert code == 0, out
    assert "nothing to move" in out and "result: everything moved" in out and ": moved" not in out, out
    assert c.snapshot(deps) == snap


def test_refused_objects_finalizers_and_clashes_are_left_and_said(cluster):
    c = cluster
    ns = c.ns
    c.install_crd(c.a, maximum=False)  # the source group's schema allows more replicas than the target's
    c.seed()
    # No target CRD: nothing can move, and the plan says so.
    code, out = c.migrate()
    assert code == 1 and f"CANNOT MOVE: the target CRD foos.{c.b} does not exist" in out, out
    c.install_crd(c.b)

    def foo(name, group=c.a, **md):
        return {"apiVersion": f"{group}/v1alpha1", "kind": "Foo",
                "metadata": dict(name=name, **md), "spec": {"deploymentName": name, "replicas": 2}}
    big = foo("big")
    big["spec"]["replicas"] = 20
    c.ok("POST", c.foo_path(c.a), big)
    held = c.ok("POST", c.foo_path(c.a), foo("held", finalizers=["samplecontroller.k8s.io/cleanup"]))
    c.ok("POST", f"/api/v1/namespaces/{ns}/configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "held-cm", "ownerReferences": [{"apiVersion": f"{c.a}/v1alpha1", "kind": "Foo", "name": "held",
                                                "uid": held["metadata"]["uid"], "controller": True}]}})
    # A Foo someone deleted, waiting on its finalizer: not brought back.
    c.ok("POST", c.foo_path(c.a), foo("leaving", finalizers=["example.com/slow"]))
    c.ok("DELETE", c.foo_path(c.a, "leaving"))
    # A B Foo of the same name that did not come from the source.
    c.ok("POST", c.foo_path(c.a), foo("clash"))
    other = c.ok("POST", c.foo_path(c.b), foo("clash", group=c.b))

    code, out = c.migrate("--yes")
    assert code == 1, out
    assert (f"Foo {ns}/big: FAILED, left in place: the target was refused: 422 Invalid: "
            f'Foo.{c.b} "big" is invalid: spec.replicas: Invalid value: 20: spec.replicas in body should be less '
            "than or equal to 10") in out, out
    assert f"Foo {ns}/held: NOT finished" in out and "finalizers [samplecontroller.k8s.io/cleanup]" in out, out
    assert f"Foo {ns}/clash: FAILED, left in place" in out and "was not made from this object" in out, out
    assert f"Foo {ns}/leaving: FAILED, left in place: the source is being deleted" in out, out
    assert "result: NOT everything moved" in out, out
    a = c.sources_left({"big", "held", "clash", "leaving"})
    b = c.foos(c.b)
    assert "leaving" not in b
    assert {"alpha", "beta", "gamma", "held"} <= set(b)
    assert b["clash"]["metadata"]["uid"] == other["metadata"]["uid"] and \
        "regroup.dev/migrated-from-uid" not in (b["clash"]["metadata"].get("annotations") or {}), \
        "an unrelated target is not touched"
    # held: its target exists, its dependent already points at it, the
    # source is not even marked for deletion.
    assert not a["held"]["metadata"].get("deletionTimestamp")
    assert owner_of(c, f"/api/v1/namespaces/{ns}/configmaps/held-cm")[0]["uid"] == b["held"]["metadata"]["uid"]

    code, out = c.migrate("--yes", "--release-finalizers")
    assert code == 1, out
    assert "released finalizers of the source: samplecontroller.k8s.io/cleanup" in out, out
    assert f"Foo {ns}/held: moved" in out, out
    c.sources_left({"big", "clash", "leaving"})
    assert c.get(f"/api/v1/namespaces/{ns}/configmaps/held-cm") is not None

    # Fixed by hand, the rest moves.
    c.ok("PATCH", c.foo_path(c.a, "big"), {"spec": {"replicas": 10}}, "application/merge-patch+json")
    c.ok("DELETE", c.foo_path(c.b, "clash"))
    c.ok("PATCH", c.foo_path(c.a, "leaving"), {"metadata": {"finalizers": None}}, "application/merge-patch+json")
    wait_for("clash and leaving gone", lambda: c.get(c.foo_path(c.b, "clash")) is None
             and c.get(c.foo_path(c.a, "leaving")) is None)
    code, out = c.migrate("--yes", "--kind", "Foo")
    assert code == 0 and "result: everything moved" in out, out
    c.sources_left(set())
    assert c.foos(c.b)["big"]["spec"]["replicas"] == 10 and "leaving" not in c.foos(c.b)


@pytest.mark.skipif(REAL, reason="the faults (--flaky) are injected by the stand-in")
def test_retries_through_a_failing_apiserver(cluster):
    """Every 2nd write in the namespace fails: refused with 503, the connection
    closed without an answer, applied and answered 500, or refused with 429
    and Retry-After (waited for as said). Each is retried
    and the run completes as if nothing had happened: a create whose answer
    was lost is found by its annotation, a re-point or status write already
    applied is seen done, a delete already done is a 404."""
    c = cluster
    c.install_crd(c.a)
    c.install_crd(c.b)
    deps = c.seed()
    before = c.foos(c.a)
    code, out = c.migrate("--yes")
    assert code == 0, out
    assert "result: everything moved" in out, out
    assert " in 1.0s (429 TooManyRequests" in out, out  # Retry-After: 1
    for why in ("503 ServiceUnavailable: stand-in --flaky: refused before applying",
                "500 InternalError: stand-in --flaky: applied, answer lost", "no answer: ",
                "429 TooManyRequests: stand-in --flaky: too many requests"):
        assert f"({why}" in out, (why, out)
    assert_moved(c, before, deps)


def test_references_are_listed_then_renamed_when_asked(cluster):
    """A ClusterRole and a webhook configuration that name the source group:
    listed as still pointing at it (with the hint), the CRD's own local
    APIService not listed, then, with
    --rename-references, their rules moved to the target group (nothing
    else of them changed), after the Foos moved."""
    c = cluster
    c.install_crd(c.a)
    c.install_crd(c.b)
    c.seed()
    role_name, hook_name = f"{c.ns}-foo-editor", f"{c.ns}-foo-hook"
    role = c.create_cluster_scoped("/apis/rbac.authorization.k8s.io/v1/clusterroles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": role_name, "labels": {"keep": "me"}},
        "rules": [{"apiGroups": [c.a], "resources": ["foos", "foos/status"], "verbs": ["*"]},
                  {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}]})
    hook = c.create_cluster_scoped("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": hook_name},
        # Ignore: on a real cluster nothing answers at this URL.
        "webhooks": [{"name": "v.foo.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                      "failurePolicy": "Ignore", "clientConfig": {"url": "https://127.0.0.1:1/validate"},
                      "rules": [{"apiGroups": [c.a], "apiVersions": ["v1alpha1"], "operations": ["CREATE"],
                                 "resources": ["foos"]}]}]})
    # The apiserver's own APIService for the source CRD's group (local, no
    # service) goes with the CRD: it is not a reference to list.
    local = f"/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.{c.a}"
    wait_for(f"the local APIService v1alpha1.{c.a}", lambda: c.get(local))
    code, out = c.migrate()
    assert code == 0, out
    assert f"APIService v1alpha1.{c.a}" not in out, out
    assert f"ClusterRole {role_name}: rules[0].apiGroups[0] (--rename-references renames it)" in out, out
    assert f"ValidatingWebhookConfiguration {hook_name}:" in out, out

    code, out = c.migrate("--yes", "--rename-references")
    assert code == 0, out
    assert "references to rename" in out and "renaming references:" in out, out
    assert f"ClusterRole {role_name}: renamed" in out, out
    assert f"ValidatingWebhookConfiguration {hook_name}: renamed" in out, out
    assert out.index("moved") < out.index("renaming references:"), out
    new_role = c.get(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{role_name}")
    assert new_role["rules"][0]["apiGroups"] == [c.b]
    assert new_role["rules"][1] == role["rules"][1]
    assert new_role["metadata"]["labels"] == {"keep": "me"}
    assert new_role["metadata"]["uid"] == role["metadata"]["uid"]
    new_hook = c.get(f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{hook_name}")
    assert new_hook["webhooks"][0]["rules"][0]["apiGroups"] == [c.b]
    assert new_hook["webhooks"][0]["clientConfig"] == hook["webhooks"][0]["clientConfig"]


def test_a_longer_run_moves_concurrently_with_a_progress_line(cluster):
    """12 Foos, each owning a ConfigMap, moved 3 at a time (`--concurrency
    3`): every one moved and its child re-pointed; stderr, not a terminal
    here, has the plain progress lines (every 10 objects and the last)."""
    c = cluster
    c.install_crd(c.a)
    c.install_crd(c.b)
    names = [f"foo-{i:02}" for i in range(12)]
    deps = {}
    for name in names:
        foo = c.ok("POST", c.foo_path(c.a), {"apiVersion": f"{c.a}/v1alpha1", "kind": "Foo", "metadata": {"name": name},
                                             "spec": {"deploymentName": name, "replicas": 1}})
        c.ok("POST", f"/api/v1/namespaces/{c.ns}/configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": f"{name}-cm", "ownerReferences": [{
                "apiVersion": f"{c.a}/v1alpha1", "kind": "Foo", "name": name, "uid": foo["metadata"]["uid"],
                "controller": True, "blockOwnerDeletion": True}]}})
        deps[f"/api/v1/namespaces/{c.ns}/configmaps/{name}-cm"] = name
    before = c.foos(c.a)
    p = subprocess.run(c.argv("--yes", "--concurrency", "3"), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "12 moved" in p.stdout and "result: everything moved" in p.stdout, p.stdout + p.stderr
    progress = [line for line in p.stderr.splitlines() if line.startswith("progress:")]
    assert progress == ["progress: 10/12 objects, 10 moved, 0 blocked, 0 failed",
                        "progress: 12/12 objects, 12 moved, 0 blocked, 0 failed"], p.stderr
    assert "progress:" not in p.stdout
    assert sorted(re.findall(r"\] Foo \S+/(\S+): moved", p.stdout)) == names
    assert_moved(c, before, deps)
