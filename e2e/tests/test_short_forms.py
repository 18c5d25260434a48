"""A resource named without its group, through each copy's regroup (issue #44,
item 1).

kubectl resolves `foos`, `foo`, `Foo`, the short name `fo` and the category
`all` to the first group in discovery order that serves them (`/apis`: the
APIGroupList, or the aggregated APIGroupDiscoveryList kubectl 1.30+ asks
for first). One cluster serves Foo in three groups: the original
`samplecontroller.k8s.io`, copy 1's and copy 2's, copy 1's listed before
copy 2's. Each copy runs behind its own regroup (`rules:` only). Through
copy 2's, its group reads as `samplecontroller.k8s.io` (the cluster's own
group of that name is shadowed) and must come before copy 1's group, which
is not the app's: otherwise `kubectl get foo shared` through copy 2 would
read copy 1's Foo.

Each group holds a Foo `shared`, made straight on the cluster, told apart by
its label `copy` and `spec.replicas`. Through each copy, with every kubectl
of the suite (1.31, 1.36, 1.37), every short form reads that copy's own
`shared`, `kubectl get foos` lists only the copy's, `kubectl get all` shows
the copy's Foo in the app's group (another copy's only under its own group
name), and `kubectl label foo shared` labels the copy's Foo on the cluster
and no other. The order of `/apis` is checked directly too (legacy JSON and
aggregated v2), straight on the cluster and through each regroup.

Stand-in mode: a stand-in of the module's own with `--also-group
samplecontroller.k8s.io` (the original group served, in its captured place,
before team1's) and `--also-group samplecontroller.team2.example.com`
(after team1's), once answering the plain APIGroupList only (as the
captured kube-apiserver 1.24: kubectl falls back to legacy discovery) and
once also aggregated discovery (`--aggregated-discovery`). Real-cluster
mode (REGROUP_E2E_KUBECONFIG): the copies' groups carry a per-run id
(`samplecontroller.rgRUN1.example.com`, `...rgRUN2...`: kube-apiserver lists
CRD groups of one priority by name, so copy 1's comes first), their CRDs are
`regroup render` of e2e/manifests/crd-foos.yaml, the original CRD is that
manifest as it is (installed only if the cluster has none, and then removed
at the end), all in a namespace of the run's, deleted at the end."""
import json
import os
import subprocess
import uuid

import pytest

from conftest import start_regroup, start_standin
from e2e_support import DIRECT, E2E, KUBECTLS, REAL, WAIT, Kubectl, stop, wait_for, write_kubeconfig

pytestmark = pytest.mark.skipif(DIRECT, reason="REGROUP_E2E_DIRECT: no regroup, so no copy's view of discovery")

ORIG = "samplecontroller.k8s.io"
RUN = uuid.uuid4().hex[:6]
if REAL:
    GROUPS = {"orig": ORIG, "copy1": f"samplecontroller.rg{RUN}1.example.com",
              "copy2": f"samplecontroller.rg{RUN}2.example.com"}
    NS = f"regroup-e2e-sf-{RUN}"
else:
    GROUPS = {"orig": ORIG, "copy1": "samplecontroller.team1.example.com",
              "copy2": "samplecontroller.team2.example.com"}
    NS = "short-forms"
COPIES = ("copy2", "copy1")  # copy 2 first: the one whose group came after the other's
REPLICAS = {"orig": 1, "copy1": 2, "copy2": 3}
FORMS = ("foos", "foo", "Foo", "fo")  # plural, singular, kind, the CRD's shortNames
JSON_ACCEPT = "application/json"
AGGREGATED_ACCEPT = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
                     "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json")
AGGREGATED_V2BETA1_ACCEPT = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
AGGREGATED_KIND = "APIGroupDiscoveryList"


def raw_get(kubeconfig, path, accept):
    """(Content-Type, JSON body) of a GET with this Accept, through the
    official Python client's ApiClient (TLS and credentials of a real
    cluster's kubeconfig; none through regroup)."""
    from kubernetes import config
    client = config.new_client_from_config(config_file=str(kubeconfig))
    r = client.call_api(path, "GET", header_params={"Accept": accept}, auth_settings=["BearerToken"],
                        _preload_content=False, _return_http_data_only=True, _request_timeout=30)
    return r.headers.get("Content-Type"), json.loads(r.data)


def group_names(doc):
    """The groups of an APIGroupList or APIGroupDiscoveryList, in order."""
    if doc["kind"] == AGGREGATED_KIND:
        return [g["metadata"]["name"] for g in doc["items"]]
    assert doc["kind"] == "APIGroupList", doc["kind"]
    return [g["name"] for g in doc["groups"]]


def foo(key):
    return {"apiVersion": f"{GROUPS[key]}/v1alpha1", "kind": "Foo",
            "metadata": {"name": "shared", "labels": {"copy": key}},
            "spec": {"deploymentName": f"{key}-deploy", "replicas": REPLICAS[key]}}


class World:
    """The cluster, its kubeconfig and the regroup of each copy."""

    def __init__(self, mode, workdir, cluster_kc, cluster):
        self.mode, self.workdir, self.cluster_kc, self.cluster = mode, workdir, cluster_kc, cluster
        self.app_kcs, self.logs = {}, []

    def app(self, copy, version):
        """kubectl `version` as copy `copy` runs it: through its regroup, with a fresh discovery cache."""
        return Kubectl(self.app_kcs[copy], self.workdir / f"cache-sf-{self.mode}-{copy}-{version}", NS, self.logs,
                       binary=KUBECTLS[version])

    def cluster_foo(self, key):
        return self.cluster.json("get", f"foos.v1alpha1.{GROUPS[key]}", "shared")


def install_real_crds(binary, workdir, cluster):
    """The copies' CRDs (`regroup render` of the manifest) and, when the
    cluster has none, the original one; returns the CRDs this run made."""
    manifest = E2E / "manifests" / "crd-foos.yaml"
    made = []
    if cluster.run("get", "customresourcedefinition", f"foos.{ORIG}", check=False).returncode != 0:
        cluster("apply", "-f", manifest)
        made.append(f"foos.{ORIG}")
    for key in ("copy1", "copy2"):
        cfg = workdir / f"short-forms-render-{key}.yaml"
        cfg.write_text(f"rules:\n  - from: {ORIG}\n    to: {GROUPS[key]}\n")
        rendered = subprocess.run([binary, "render", "-c", str(cfg), "-f", str(manifest)], capture_output=True,
                                  text=True, timeout=60)
        if rendered.returncode != 0:
            pytest.fail(f"regroup render failed:\n{rendered.stderr}")
        made.append(f"foos.{GROUPS[key]}")  # before the apply: removed even if it half fails
        cluster("apply", "-f", "-", input=rendered.stdout)
    for group in GROUPS.values():
        cluster("wait", "--for=condition=Established", f"customresourcedefinition/foos.{group}",
                f"--timeout={WAIT}s", timeout=WAIT + 30)
    return made


def discovery_ready(kubeconfig):
    """Every Foo group listed in /apis (both forms) and served (a real
    apiserver's discovery follows an Established CRD a moment later)."""
    want = set(GROUPS.values())
    for accept in (JSON_ACCEPT, AGGREGATED_ACCEPT):
        _, doc = raw_get(kubeconfig, "/apis", accept)
        if not want <= set(group_names(doc)):
            return False
        if doc["kind"] == AGGREGATED_KIND:
            for item in doc["items"]:
                if item["metadata"]["name"] in want and not any(
                        r["resource"] == "foos" for v in item["versions"] for r in v.get("resources") or []):
                    return False
    return True


# The stand-in once with legacy discovery only, once with aggregated
# discovery too; a real cluster serves what it serves (kube-apiserver 1.30+:
# aggregated v2; real-mode-selfcheck.sh's stand-in: legacy).
@pytest.fixture(scope="module", params=["cluster"] if REAL else ["legacy", "aggregated"],
                ids=lambda m: f"{m}-discovery")
def world(request, workdir, regroup_bin):
    mode = request.param
    procs, made_crds, w = [], [], None
    d = workdir / f"short-forms-{mode}"
    d.mkdir()
    try:
        if REAL:
            cluster_kc = os.environ["REGROUP_E2E_KUBECONFIG"]
            cluster = Kubectl(cluster_kc, d / "cache-cluster", NS)
            w = World(mode, d, cluster_kc, cluster)
            made_crds = install_real_crds(regroup_bin, d, cluster)
        else:
            extra = ["--aggregated-discovery"] if mode == "aggregated" else []
            sproc, sport, slog = start_standin(d, f"upstream-short-forms-{mode}", "--seed-namespace", "",
                                               "--also-group", ORIG, "--also-group", GROUPS["copy2"], *extra)
            procs.append(sproc)
            cluster_kc = write_kubeconfig(d / "cluster.kubeconfig", f"http://127.0.0.1:{sport}", NS)
            cluster = Kubectl(cluster_kc, d / "cache-cluster", NS, [slog])
            w = World(mode, d, cluster_kc, cluster)
            w.logs.append(slog)
        wait_for("the Foo groups in discovery", lambda: discovery_ready(cluster_kc), interval=0.5)
        cluster("create", "namespace", NS)
        for key in GROUPS:
            cluster("create", "-f", "-", input=json.dumps(foo(key)))
        for copy in ("copy1", "copy2"):
            config = d / f"{copy}.yaml"
            config.write_text(f"rules:\n  - from: {ORIG}\n    to: {GROUPS[copy]}\n")
            proc, port, log = start_regroup(regroup_bin, d, f"short-forms-{mode}-{copy}", config, cluster_kc)
            procs.append(proc)
            w.logs.append(log)
            w.app_kcs[copy] = write_kubeconfig(d / f"{copy}.kubeconfig", f"http://127.0.0.1:{port}", NS)
        yield w
    finally:
        for p in procs:
            stop(p)
        if REAL and w is not None:
            w.cluster.run("delete", "namespace", NS, "--ignore-not-found", "--timeout=120s", timeout=150,
                          check=False)
            for crd in made_crds:
                w.cluster.run("delete", "customresourcedefinition", crd, "--ignore-not-found", "--timeout=120s",
                              timeout=150, check=False)


def test_short_forms_discovery_order(world):
    """/apis: straight on the cluster copy 1's group comes before copy 2's;
    through each copy's regroup, the app's `samplecontroller.k8s.io` (its
    copy's group) comes before the other copy's group, the copy's cluster
    name and the cluster's own original group are gone, and every other
    group keeps its place. Legacy JSON, aggregated v2 and v2beta1 (the
    latter two answered by the plain list where the cluster doesn't serve
    them: the legacy stand-in)."""
    wrong = []
    for accept in (JSON_ACCEPT, AGGREGATED_ACCEPT, AGGREGATED_V2BETA1_ACCEPT):
        ctype, doc = raw_get(world.cluster_kc, "/apis", accept)
        if accept == AGGREGATED_ACCEPT and world.mode != "cluster":
            assert (doc["kind"] == AGGREGATED_KIND) == (world.mode == "aggregated"), (accept, ctype)
        kind = doc["kind"]
        on_cluster = group_names(doc)
        assert on_cluster.index(GROUPS["copy1"]) < on_cluster.index(GROUPS["copy2"]), on_cluster
        for copy, other in (("copy1", "copy2"), ("copy2", "copy1")):
            ctype, doc = raw_get(world.app_kcs[copy], "/apis", accept)
            assert doc["kind"] == kind, (copy, accept, ctype)
            seen = group_names(doc)
            assert seen.count(ORIG) == 1 and GROUPS[copy] not in seen, (copy, seen)
            if seen.index(ORIG) > seen.index(GROUPS[other]):
                wrong.append(f"through {copy}'s regroup ({kind}, Accept {accept}) {ORIG} comes after "
                             f"{GROUPS[other]}: {[g for g in seen if g.startswith('samplecontroller.')]}")
            if not REAL:  # a real cluster's groups may change between two reads (other tests' CRDs)
                foo_groups = set(GROUPS.values())
                assert [g for g in seen if g not in foo_groups] == [g for g in on_cluster if g not in foo_groups]
            if kind == AGGREGATED_KIND:  # the copy's own Foo, in the app's names
                entry = next(i for i in doc["items"] if i["metadata"]["name"] == ORIG)
                foos = [r for v in entry["versions"] for r in v.get("resources") or [] if r["resource"] == "foos"]
                assert foos and all(r["shortNames"] == ["fo"] and r["categories"] == ["all"] for r in foos), foos
                assert all(r["responseKind"]["group"] in ("", ORIG) for r in foos), foos
                # The other copy's Foos: no short names, no categories, so
                # `fo` and `all` name the copy's alone (docs/config.md).
                entry = next(i for i in doc["items"] if i["metadata"]["name"] == GROUPS[other])
                theirs = [r for v in entry["versions"] for r in v.get("resources") or []
                          if r["resource"] == "foos"]
                assert theirs and all("shortNames" not in r and "categories" not in r for r in theirs), theirs
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("version", list(KUBECTLS), ids=[f"kubectl-{v}" for v in KUBECTLS])
def test_short_forms_resolve_to_the_copys_own_foo(world, version):
    for copy in COPIES:
        app = world.app(copy, version)
        for form in FORMS:
            got = app.json("get", form, "shared")
            assert (got["apiVersion"].split("/")[0], got["metadata"]["labels"].get("copy"), got["spec"]["replicas"]) \
                == (ORIG, copy, REPLICAS[copy]), f"kubectl {version} `get {form} shared` through {copy}'s regroup"
        for form in ("foos", "fo"):
            listed = app.json("get", form)["items"]
            assert [(i["metadata"]["name"], i["metadata"]["labels"].get("copy")) for i in listed] == \
                [("shared", copy)], f"kubectl {version} `get {form}` through {copy}'s regroup"


@pytest.mark.parametrize("version", list(KUBECTLS), ids=[f"kubectl-{v}" for v in KUBECTLS])
def test_short_forms_category_all(world, version):
    """`kubectl get all` (the CRD's category): the copy's Foo in the app's
    group, the cluster's original never. With aggregated discovery another
    copy's Foos carry no categories in the copy's view, so they are not
    listed; with legacy discovery only (read a group at a time, not
    thinned) they are, under that copy's own group name (docs/config.md,
    "Names without a group: the copy's own first")."""
    _, doc = raw_get(world.app_kcs["copy1"], "/apis", AGGREGATED_ACCEPT)
    aggregated = doc["kind"] == AGGREGATED_KIND
    for copy in COPIES:
        app = world.app(copy, version)
        # The stand-in serves no replicationcontrollers: kubectl lists the
        # others, then fails; only its output is read.
        p = app.run("get", "all", "-o", "json", check=False)
        assert p.stdout.strip(), f"kubectl {version} `get all` through {copy}'s regroup printed nothing:\n{p.stderr}"
        foos = [(i["apiVersion"].split("/")[0], i["metadata"]["labels"].get("copy"))
                for i in json.loads(p.stdout)["items"] if i["kind"] == "Foo"]
        other = "copy1" if copy == "copy2" else "copy2"
        want = [(ORIG, copy)] if aggregated else [(ORIG, copy), (GROUPS[other], other)]
        assert sorted(foos) == sorted(want), (copy, aggregated, foos)


@pytest.mark.parametrize("version", list(KUBECTLS), ids=[f"kubectl-{v}" for v in KUBECTLS])
def test_short_forms_label_writes_the_copys_own_foo(world, version):
    for copy in COPIES:
        value = f"{copy}-kubectl-{version}"
        out = world.app(copy, version)("label", "foo", "shared", f"written-by={value}", "--overwrite")
        assert out.strip() == f"foo.{ORIG}/shared labeled", out
        for key in GROUPS:
            labels = world.cluster_foo(key)["metadata"]["labels"]
            assert (labels.get("written-by") == value) == (key == copy), (copy, key, labels)
            assert labels["copy"] == key
