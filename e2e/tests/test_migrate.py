"""`regroup migrate` (docs/migrate.md) against the stand-in, whose garbage
collector deletes a dependent whose owners are absent at once after every
write (as kube-controller-manager would, seconds later), with finalizers,
DeleteOptions and CRD validation on (`--finalizers --strict-crds`): the
captured Foos alpha, beta, gamma with a Deployment and ConfigMaps they own
(sample-controller's shape), in samplecontroller.team1.example.com, moved to
samplecontroller.team2.example.com. Each test has its own stand-in.

Stand-in mode only: the real-cluster run (REGROUP_E2E_KUBECONFIG) is not
written yet (see docs/migrate.md, "Tested")."""
import json
import os
import subprocess
import urllib.error
import urllib.request

import pytest
import yaml

from conftest import start_regroup, start_standin
from e2e_support import DIRECT, E2E, stop, write_kubeconfig

REAL = bool(os.environ.get("REGROUP_E2E_KUBECONFIG"))
pytestmark = pytest.mark.skipif(REAL or DIRECT, reason="stand-in mode only: it brings its own stand-in with "
                                                       "garbage collection and two Foo groups")

ORIG = "samplecontroller.k8s.io"
A = "samplecontroller.team1.example.com"
B = "samplecontroller.team2.example.com"
NS = "mig"
FOOS = ("alpha", "beta", "gamma")
# The seeds' owned objects: (path under the namespace, owner Foo).
DEPENDENTS = {"/apis/apps/v1/namespaces/mig/deployments/alpha-deploy": "alpha",
              "/api/v1/namespaces/mig/configmaps/alpha-cm": "alpha",
              "/api/v1/namespaces/mig/configmaps/beta-cm": "beta"}


class Cluster:
    """The stand-in, straight (JSON over HTTP), and regroup migrate against it."""

    def __init__(self, port, binary, workdir):
        self.url, self.binary, self.workdir = f"http://127.0.0.1:{port}", binary, workdir
        self.kubeconfig = write_kubeconfig(workdir / "migrate.kubeconfig", self.url, NS)
        self.configs = {}
        for name, group in (("from", A), ("to", B)):
            p = workdir / f"{name}.yaml"
            p.write_text(f"rules:\n  - from: {ORIG}\n    to: {group}\n")
            self.configs[name] = p

    def call(self, method, path, body=None, ctype="application/json"):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": ctype, "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def get(self, path):
        code, obj = self.call("GET", path)
        return obj if code == 200 else None

    def ok(self, method, path, body=None, ctype="application/json"):
        code, obj = self.call(method, path, body, ctype)
        assert code in (200, 201), (method, path, code, obj)
        return obj

    def foos(self, group):
        return {o["metadata"]["name"]: o for o in self.ok("GET", f"/apis/{group}/v1alpha1/namespaces/{NS}/foos")["items"]}

    def rv(self):
        """The store's resourceVersion: unchanged means nothing was written."""
        return self.ok("GET", f"/api/v1/namespaces/{NS}/configmaps")["metadata"]["resourceVersion"]

    def install_crd(self, group, maximum=True):
        """The suite's Foo CRD rendered for `group` by regroup, created."""
        cfg = self.workdir / f"render-{group}.yaml"
        cfg.write_text(f"rules:\n  - from: {ORIG}\n    to: {group}\n")
        out = subprocess.run([self.binary, "render", "-c", cfg, "-f", E2E / "manifests" / "crd-foos.yaml"],
                             capture_output=True, text=True, check=True).stdout
        crd = yaml.safe_load(out)
        if not maximum:  # a schema difference between the groups
            for v in crd["spec"]["versions"]:
                v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"].pop("maximum", None)  # (one dict: YAML anchors)
        self.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)

    def migrate(self, *args, env=None, stopped=True):
        # The tests write the sources themselves moments before moving them:
        # `--controllers-stopped` says those writes were theirs (one test
        # runs without it and sees the refusal).
        extra = ["--controllers-stopped"] if stopped and "--yes" in args else []
        argv = [self.binary, "migrate", "--from", self.configs["from"], "--to", self.configs["to"],
                "--kubeconfig", self.kubeconfig, *args, *extra]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=dict(os.environ, **(env or {})))
        return p.returncode, p.stdout + p.stderr


@pytest.fixture
def cluster(regroup_bin, workdir, request):
    d = workdir / f"migrate-{request.node.name}"
    d.mkdir()
    # The retry test's apiserver fails every 2nd write (in a namespace).
    extra = ["--flaky", 2] if request.node.name == "test_retries_through_a_failing_apiserver" else []
    proc, port, _ = start_standin(d, "standin", "--seed-namespace", NS, "--also-group", B, "--finalizers",
                                  "--strict-crds",
                                  *extra)
    c = Cluster(port, regroup_bin, d)
    # The seed Foos have no finalizers; alpha and beta have status, gamma none.
    assert set(c.foos(A)) == set(FOOS) and not c.foos(B)
    yield c
    stop(proc)


def set_status(c, group, name, status):
    foo = c.ok("GET", f"/apis/{group}/v1alpha1/namespaces/{NS}/foos/{name}")
    c.ok("PUT", f"/apis/{group}/v1alpha1/namespaces/{NS}/foos/{name}/status", dict(foo, status=status))


def owner_of(c, path):
    return c.ok("GET", path)["metadata"].get("ownerReferences")


def assert_moved(c, before, extra_dependents=()):
    """Every Foo of `before` is in B only, with its spec, labels and status and
    the source uid annotated; every dependent exists, owned by the B Foo."""
    assert not c.foos(A), "sources left"
    after = c.foos(B)
    assert set(after) == set(before)
    for name, old in before.items():
        new = after[name]
        assert new["metadata"]["uid"] != old["metadata"]["uid"]
        assert new["metadata"]["annotations"]["regroup.dev/migrated-from-uid"] == old["metadata"]["uid"]
        assert new["spec"] == old["spec"] and new["metadata"].get("labels") == old["metadata"].get("labels")
        assert new.get("status") == old.get("status"), name
    for path, owner in [*DEPENDENTS.items(), *extra_dependents]:
        refs = owner_of(c, path)
        assert refs is not None, f"{path} lost its owner"
        assert refs == [{"apiVersion": f"{B}/v1alpha1", "kind": "Foo", "name": owner,
                         "uid": after[owner]["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]


def test_foos_move_with_their_children_and_status(cluster):
    c = cluster
    c.install_crd(A)
    c.install_crd(B)
    set_status(c, A, "gamma", {"availableReplicas": 3})
    # A Foo owned by alpha (listed before it: the plan must move alpha
    # first), owning a ConfigMap of its own.
    alpha = c.foos(A)["alpha"]
    ref = {"apiVersion": f"{A}/v1alpha1", "kind": "Foo", "name": "alpha", "uid": alpha["metadata"]["uid"],
           "controller": True, "blockOwnerDeletion": True}
    child = c.ok("POST", f"/apis/{A}/v1alpha1/namespaces/{NS}/foos", {
        "apiVersion": f"{A}/v1alpha1", "kind": "Foo",
        "metadata": {"name": "aaa-child", "labels": {"app": "child"}, "ownerReferences": [ref]},
        "spec": {"deploymentName": "child", "replicas": 2}})
    c.ok("POST", f"/api/v1/namespaces/{NS}/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"},
        "metadata": {"name": "child-cm", "ownerReferences": [dict(ref, name="aaa-child",
                                                                  uid=child["metadata"]["uid"])]}})
    before = c.foos(A)
    assert before["alpha"]["status"] == {"availableReplicas": 1}

    # The dry run: the plan, nothing written.
    rv = c.rv()
    code, out = c.migrate()
    assert code == 0, out
    assert f"group {A} -> {B}" in out
    assert f"Foo.{A} -> foos.{B}: 4 objects in v1alpha1 (status through the status subresource)" in out
    for line in ("Foo mig/alpha, with status", "dependent to re-point: Deployment mig/alpha-deploy",
                 "dependent to re-point: ConfigMap mig/alpha-cm", "dependent to re-point: Foo mig/aaa-child",
                 "dependent to re-point: ConfigMap mig/beta-cm", "dependent to re-point: ConfigMap mig/child-cm",
                 f"CustomResourceDefinition foos.{A}: the source CRD", "dry run: nothing was changed"):
        assert line in out, (line, out)
    assert c.rv() == rv and not c.foos(B)

    # Written seconds ago by someone else (this test): a controller may be
    # running, so --yes alone moves nothing.
    code, out = c.migrate("--yes", stopped=False)
    assert code == 1, out
    assert "a controller may still be running" in out and "Foo mig/aaa-child: written by" in out, out
    assert "refusing to move" in out and "moving:" not in out, out
    assert c.rv() == rv and not c.foos(B)

    code, out = c.migrate("--yes")
    assert code == 0, out
    # Owners first: alpha before the Foo it owns, though listed after it.
    assert out.index("] Foo mig/alpha: moved") < out.index("] Foo mig/aaa-child: moved"), out
    assert "4 moved" in out and "result: everything moved" in out, out
    assert "left in the source" in out and "owners unresolved: 0" in out, out
    assert_moved(c, before, [("/api/v1/namespaces/mig/configmaps/child-cm", "aaa-child")])
    assert owner_of(c, f"/apis/{B}/v1alpha1/namespaces/{NS}/foos/aaa-child")[0]["uid"] == \
        c.foos(B)["alpha"]["metadata"]["uid"]

    # The app, behind a regroup with TO's rules, sees its Foos (with their
    # status) in its own group and each Deployment and ConfigMap controlled
    # by the Foo it sees: what sample-controller checks
    # (metav1.IsControlledBy) before it would re-create or refuse them.
    # Behind FROM's rules the old copy sees none.
    for name, want in (("to", set(before)), ("from", set())):
        proc, port, _ = start_regroup(c.binary, c.workdir, f"serve-{name}", c.configs[name], c.kubeconfig)
        try:
            (c.workdir / f"app-{name}").mkdir()
            app = Cluster(port, c.binary, c.workdir / f"app-{name}")  # the app's side: regroup's listener
            seen = {o["metadata"]["name"]: o for o in
                    app.ok("GET", f"/apis/{ORIG}/v1alpha1/namespaces/{NS}/foos")["items"]}
            assert set(seen) == want, name
            if not want:
                continue
            assert seen["alpha"]["status"] == before["alpha"]["status"]
            deploy = app.ok("GET", "/apis/apps/v1/namespaces/mig/deployments/alpha-deploy")
            assert seen["alpha"]["spec"]["deploymentName"] == "alpha-deploy"
            for path, owner in DEPENDENTS.items():
                refs = app.ok("GET", path)["metadata"]["ownerReferences"]
                controller = next(r for r in refs if r.get("controller"))
                assert controller["apiVersion"] == f"{ORIG}/v1alpha1"
                assert controller["uid"] == seen[owner]["metadata"]["uid"], path
            assert deploy["metadata"]["ownerReferences"][0]["name"] == "alpha"
        finally:
            stop(proc)

    # A second run has nothing to do and writes nothing.
    rv = c.rv()
    code, out = c.migrate("--yes")
    assert code == 0, out
    assert "nothing to move" in out and "result: everything moved" in out, out
    assert c.rv() == rv

    # The children really hang off the B Foos: this stand-in collects them
    # when their owner goes (so the assertions above were not vacuous).
    c.ok("DELETE", f"/apis/{B}/v1alpha1/namespaces/{NS}/foos/alpha")
    for path in ("/apis/apps/v1/namespaces/mig/deployments/alpha-deploy", "/api/v1/namespaces/mig/configmaps/alpha-cm",
                 f"/apis/{B}/v1alpha1/namespaces/{NS}/foos/aaa-child", "/api/v1/namespaces/mig/configmaps/child-cm"):
        assert c.get(path) is None, f"{path} not collected"
    assert c.get("/api/v1/namespaces/mig/configmaps/beta-cm") is not None


def test_an_interrupted_run_resumes(cluster):
    """Runs stopped after 1, 2, 3, ... writes (the test hook exits as a killed
    process would), each resumed by the next: no child is ever collected,
    no Foo is ever in neither group, and the last run completes."""
    c = cluster
    c.install_crd(A)
    c.install_crd(B)
    before = c.foos(A)
    runs, n = [], 0
    while True:
        n += 1
        assert n < 40, "no end in sight:\n" + "\n".join(runs)
        code, out = c.migrate("--yes", env={"REGROUP_MIGRATE_TEST_ABORT_AFTER_WRITES": str(1 + n % 3)})
        runs.append(out)
        for path in DEPENDENTS:
            assert c.get(path) is not None, f"run {n} lost {path}:\n{out}"
        a, b = c.foos(A), c.foos(B)
        assert set(a) | set(b) == set(FOOS), f"run {n}:\n{out}"
        if code == 0:
            break
        assert code == 75 and "test hook" in out, out
    assert n >= 4, f"the hook should have stopped several runs: {n}"
    assert_moved(c, before)
    code, out = c.migrate("--yes")
    assert code == 0 and "nothing to move" in out, out


def test_refused_objects_finalizers_and_clashes_are_left_and_said(cluster):
    c = cluster
    c.install_crd(A, maximum=False)  # the source group's schema allows more replicas than the target's
    # No target CRD: nothing can move, and the plan says so.
    code, out = c.migrate()
    assert code == 1 and f"CANNOT MOVE: the target CRD foos.{B} does not exist" in out, out
    c.install_crd(B)
    foo = lambda name, **md: {"apiVersion": f"{A}/v1alpha1", "kind": "Foo",  # noqa: E731
                              "metadata": dict(name=name, **md), "spec": {"deploymentName": name, "replicas": 2}}
    big = foo("big")
    big["spec"]["replicas"] = 20
    c.ok("POST", f"/apis/{A}/v1alpha1/namespaces/{NS}/foos", big)
    held = c.ok("POST", f"/apis/{A}/v1alpha1/namespaces/{NS}/foos",
                foo("held", finalizers=["samplecontroller.k8s.io/cleanup"]))
    c.ok("POST", f"/api/v1/namespaces/{NS}/configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "held-cm", "ownerReferences": [{"apiVersion": f"{A}/v1alpha1", "kind": "Foo", "name": "held",
                                                "uid": held["metadata"]["uid"], "controller": True}]}})
    # A Foo someone deleted, waiting on its finalizer: not brought back.
    c.ok("POST", f"/apis/{A}/v1alpha1/namespaces/{NS}/foos", foo("leaving", finalizers=["example.com/slow"]))
    c.ok("DELETE", f"/apis/{A}/v1alpha1/namespaces/{NS}/foos/leaving")
    # A B Foo of the same name that did not come from the source.
    c.ok("POST", f"/apis/{A}/v1alpha1/namespaces/{NS}/foos", foo("clash"))
    other = c.ok("POST", f"/apis/{B}/v1alpha1/namespaces/{NS}/foos", dict(foo("clash"), apiVersion=f"{B}/v1alpha1"))

    code, out = c.migrate("--yes")
    assert code == 1, out
    assert ("Foo mig/big: FAILED, left in place: the target was refused: 422 Invalid: "
            f'Foo.{B} "big" is invalid: spec.replicas: Invalid value: 20: spec.replicas in body should be less '
            "than or equal to 10") in out, out
    assert "Foo mig/held: NOT finished" in out and "finalizers [samplecontroller.k8s.io/cleanup]" in out, out
    assert "Foo mig/clash: FAILED, left in place" in out and "was not made from this object" in out, out
    assert "Foo mig/leaving: FAILED, left in place: the source is being deleted" in out, out
    assert "result: NOT everything moved" in out, out
    a, b = c.foos(A), c.foos(B)
    assert set(a) == {"big", "held", "clash", "leaving"}, "the others moved, these stayed"
    assert "leaving" not in b
    assert {"alpha", "beta", "gamma", "held"} <= set(b)
    assert b["clash"]["metadata"]["uid"] == other["metadata"]["uid"] and \
        "annotations" not in b["clash"]["metadata"], "an unrelated target is not touched"
    # held: its target exists, its dependent already points at it, the
    # source is not even marked for deletion.
    assert not a["held"]["metadata"].get("deletionTimestamp")
    assert owner_of(c, "/api/v1/namespaces/mig/configmaps/held-cm")[0]["uid"] == b["held"]["metadata"]["uid"]

    code, out = c.migrate("--yes", "--release-finalizers")
    assert code == 1, out
    assert "released finalizers of the source: samplecontroller.k8s.io/cleanup" in out, out
    assert "Foo mig/held: moved" in out, out
    assert set(c.foos(A)) == {"big", "clash", "leaving"}
    assert c.get("/api/v1/namespaces/mig/configmaps/held-cm") is not None

    # Fixed by hand, the rest moves.
    c.ok("PATCH", f"/apis/{A}/v1alpha1/namespaces/{NS}/foos/big", {"spec": {"replicas": 10}},
         "application/merge-patch+json")
    c.ok("DELETE", f"/apis/{B}/v1alpha1/namespaces/{NS}/foos/clash")
    c.ok("PATCH", f"/apis/{A}/v1alpha1/namespaces/{NS}/foos/leaving", {"metadata": {"finalizers": None}},
         "application/merge-patch+json")
    code, out = c.migrate("--yes", "--kind", "Foo")
    assert code == 0 and "result: everything moved" in out, out
    assert not c.foos(A)
    assert c.foos(B)["big"]["spec"]["replicas"] == 10 and "leaving" not in c.foos(B)


def test_retries_through_a_failing_apiserver(cluster):
    """Every 2nd write in the namespace fails: refused with 503, the connection
    closed without an answer, or applied and answered 500. Each is retried
    and the run completes as if nothing had happened: a create whose answer
    was lost is found by its annotation, a re-point or status write already
    applied is seen done, a delete already done is a 404."""
    c = cluster
    c.install_crd(A)
    c.install_crd(B)
    before = c.foos(A)
    code, out = c.migrate("--yes")
    assert code == 0, out
    assert "result: everything moved" in out, out
    for why in ("503 ServiceUnavailable: stand-in --flaky: refused before applying",
                "500 InternalError: stand-in --flaky: applied, answer lost", "no answer: "):
        assert f"({why}" in out, (why, out)
    assert_moved(c, before)


def test_references_are_listed_then_renamed_when_asked(cluster):
    """A ClusterRole and a webhook configuration that name the source group:
    listed as still pointing at it (with the hint), then, with
    --rename-references, their rules moved to the target group (nothing
    else of them changed), after the Foos moved."""
    c = cluster
    c.install_crd(A)
    c.install_crd(B)
    role = c.ok("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "foo-editor", "labels": {"keep": "me"}},
        "rules": [{"apiGroups": [A], "resources": ["foos", "foos/status"], "verbs": ["*"]},
                  {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}]})
    hook = c.ok("POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "foo-hook"},
        "webhooks": [{"name": "v.foo.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                      "clientConfig": {"url": "https://127.0.0.1:1/validate"},
                      "rules": [{"apiGroups": [A], "apiVersions": ["v1alpha1"], "operations": ["CREATE"],
                                 "resources": ["foos"]}]}]})
    code, out = c.migrate()
    assert code == 0, out
    assert "ClusterRole foo-editor: rules[0].apiGroups[0] (--rename-references renames it)" in out, out
    assert "ValidatingWebhookConfiguration foo-hook:" in out, out

    code, out = c.migrate("--yes", "--rename-references")
    assert code == 0, out
    assert "references to rename" in out and "renaming references:" in out, out
    assert "ClusterRole foo-editor: renamed" in out, out
    assert "ValidatingWebhookConfiguration foo-hook: renamed" in out, out
    assert out.index("moved") < out.index("renaming references:"), out
    new_role = c.get("/apis/rbac.authorization.k8s.io/v1/clusterroles/foo-editor")
    assert new_role["rules"][0]["apiGroups"] == [B]
    assert new_role["rules"][1] == role["rules"][1]
    assert new_role["metadata"]["labels"] == {"keep": "me"}
    assert new_role["metadata"]["uid"] == role["metadata"]["uid"]
    new_hook = c.get("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/foo-hook")
    assert new_hook["webhooks"][0]["rules"][0]["apiGroups"] == [B]
    assert new_hook["webhooks"][0]["clientConfig"] == hook["webhooks"][0]["clientConfig"]
