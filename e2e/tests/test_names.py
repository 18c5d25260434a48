"""Two copies of one app create the same cluster-scoped objects (a
ClusterRole, a ClusterRoleBinding to it, a ValidatingWebhookConfiguration)
under the same fixed names, each through its own regroup with `names:`
(prefix `<run>-team1-` and `<run>-team2-`): the cluster keeps both, each
copy sees and changes only its own, under the names it wrote, with kubectl
1.31 as the app and kubectl straight to the cluster as the admin.

REGROUP_E2E_KUBECONFIG: the same against a real cluster (the prefixes carry
a per-run id so nothing collides; everything is deleted at the end)."""
import json
import uuid

import pytest

from conftest import start_regroup
from test_kube_rs import kube_rs_bin  # noqa: F401 (the fixture)
from e2e_support import CLUSTER_GROUP, CONFIG_YAML, DIRECT, ORIG_GROUP, Kubectl, stop, write_kubeconfig

pytestmark = pytest.mark.skipif(DIRECT, reason="REGROUP_E2E_DIRECT: no regroup, so no names renamed")

RUN = uuid.uuid4().hex[:6]
KINDS = "[ClusterRole, ClusterRoleBinding, ValidatingWebhookConfiguration, PriorityClass]"

MANIFEST = f"""apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: foo-viewer
rules:
- apiGroups: [{ORIG_GROUP}]
  resources: [foos]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: foo-viewers
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: foo-viewer
subjects:
- kind: ServiceAccount
  name: foo-controller
  namespace: default
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: foo-viewers-view
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: view
subjects:
- kind: ServiceAccount
  name: foo-controller
  namespace: default
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: foo-validating
webhooks:
- name: validate.foo.example.com
  rules:
  - apiGroups: [{ORIG_GROUP}]
    apiVersions: [v1alpha1]
    operations: [CREATE]
    resources: [foos]
  clientConfig:
    url: https://127.0.0.1:9/validate
  failurePolicy: Ignore
  sideEffects: None
  admissionReviewVersions: [v1]
"""


def prefix(team):
    return f"rg{RUN}-{team}-"


@pytest.fixture(scope="module")
def copies(upstream, workdir, regroup_bin, cluster):
    """Two sidecars, `team1` and `team2`, in front of the one cluster; yields
    {team: kubectl through it}. Deletes what the copies created."""
    procs, apps = [], {}
    apps["kubeconfigs"] = {}
    try:
        for team in ("team1", "team2"):
            config = workdir / f"names-{team}.yaml"
            config.write_text(CONFIG_YAML + f"names:\n  prefix: {prefix(team)}\n  kinds: {KINDS}\n")
            proc, port, _ = start_regroup(regroup_bin, workdir, f"names-{team}", config, upstream.kubeconfig)
            procs.append(proc)
            kc = write_kubeconfig(workdir / f"names-{team}.kubeconfig", f"http://127.0.0.1:{port}", upstream.namespace)
            apps[team] = Kubectl(kc, workdir / f"cache-names-{team}", upstream.namespace)
            apps["kubeconfigs"][team] = kc
        yield apps
    finally:
        for p in procs:
            stop(p)
        for team in ("team1", "team2"):
            cluster.run("delete", "pod", "foo-worker", "-n", upstream.namespace, "--ignore-not-found", check=False)
            for obj in ("clusterrole/{p}foo-viewer", "clusterrole/{p}foo-applied", "clusterrolebinding/{p}foo-viewers",
                        "priorityclass/{p}foo-high",
                        "clusterrolebinding/{p}foo-viewers-view", "validatingwebhookconfiguration/{p}foo-validating"):
                cluster.run("delete", obj.format(p=prefix(team)), "--ignore-not-found", check=False)


def test_two_copies_keep_their_own_cluster_scoped_objects_under_one_name(copies, cluster):
    for team in ("team1", "team2"):
        out = copies[team]("apply", "-f", "-", input=MANIFEST)
        # kubectl reports the names it wrote, not the cluster's.
        assert out.strip().split("\n") == [
            "clusterrole.rbac.authorization.k8s.io/foo-viewer created",
            "clusterrolebinding.rbac.authorization.k8s.io/foo-viewers created",
            "clusterrolebinding.rbac.authorization.k8s.io/foo-viewers-view created",
            "validatingwebhookconfiguration.admissionregistration.k8s.io/foo-validating created",
        ], out

    # The cluster holds both copies', each under its prefix and its group.
    for team in ("team1", "team2"):
        p = prefix(team)
        role = cluster.json("get", "clusterrole", f"{p}foo-viewer")
        assert role["rules"][0]["apiGroups"] == [CLUSTER_GROUP]
        binding = cluster.json("get", "clusterrolebinding", f"{p}foo-viewers")
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                      "name": f"{p}foo-viewer"}
        # The cluster's own role is bound as it is.
        assert cluster.json("get", "clusterrolebinding", f"{p}foo-viewers-view")["roleRef"]["name"] == "view"
        hook = cluster.json("get", "validatingwebhookconfiguration", f"{p}foo-validating")
        assert hook["webhooks"][0]["rules"][0]["apiGroups"] == [CLUSTER_GROUP]

    # Each copy reads its own, as it wrote it.
    uids = set()
    for team in ("team1", "team2"):
        role = copies[team].json("get", "clusterrole", "foo-viewer")
        assert role["metadata"]["name"] == "foo-viewer"
        assert role["rules"][0]["apiGroups"] == [ORIG_GROUP]
        uids.add(role["metadata"]["uid"])
        assert role["metadata"]["uid"] == cluster.json("get", "clusterrole", f"{prefix(team)}foo-viewer")[
            "metadata"]["uid"]
        binding = copies[team].json("get", "clusterrolebinding", "foo-viewers")
        assert binding["roleRef"]["name"] == "foo-viewer"
    assert len(uids) == 2


def test_a_copy_lists_only_its_own_and_the_clusters_objects(copies, cluster):
    copies["team1"]("apply", "-f", "-", input=MANIFEST)
    copies["team2"]("apply", "-f", "-", input=MANIFEST)
    names = copies["team1"]("get", "clusterroles", "-o", "name").strip().split("\n")
    assert "clusterrole.rbac.authorization.k8s.io/foo-viewer" in names
    # Neither the other copy's nor a prefixed name shows.
    assert not [n for n in names if f"rg{RUN}" in n], names
    # A Table, as `kubectl get` prints it: the NAME column is the app's.
    table = copies["team1"]("get", "clusterroles", "foo-viewer")
    lines = table.strip().split("\n")
    assert lines[0].split() == ["NAME", "CREATED", "AT"], table
    assert [line.split()[0] for line in lines[1:]] == ["foo-viewer"], table
    listed = copies["team1"].json("get", "validatingwebhookconfigurations")
    ours = [i["metadata"]["name"] for i in listed["items"] if "foo-validating" in i["metadata"]["name"]]
    assert ours == ["foo-validating"], ours
    # What the cluster has that neither copy wrote (`view`, `system:*` on a
    # real cluster) the app still reads by name.
    bindings = copies["team1"].json("get", "clusterrolebindings")
    assert {"foo-viewers", "foo-viewers-view"} <= {b["metadata"]["name"] for b in bindings["items"]}


def test_the_python_client_reads_and_watches_its_copys_names(copies):
    from kubernetes import client, config, watch
    for team in ("team1", "team2"):
        copies[team]("apply", "-f", "-", input=MANIFEST)
    api = client.RbacAuthorizationV1Api(config.new_client_from_config(config_file=str(copies["kubeconfigs"]["team2"])))
    role = api.read_cluster_role("foo-viewer")
    assert role.metadata.name == "foo-viewer" and role.rules[0].api_groups == [ORIG_GROUP]
    listed = [r.metadata.name for r in api.list_cluster_role().items]
    assert "foo-viewer" in listed and not [n for n in listed if f"rg{RUN}" in n], listed
    binding = api.read_cluster_role_binding("foo-viewers")
    assert binding.role_ref.name == "foo-viewer"
    # A watch shows this copy's objects only, under its names.
    seen = [e["object"].metadata.name for e in watch.Watch().stream(api.list_cluster_role, timeout_seconds=2)]
    assert "foo-viewer" in seen and not [n for n in seen if f"rg{RUN}" in n], seen


def test_kube_rs_applies_and_lists_its_copys_clusterrole(copies, cluster, kube_rs_bin):
    """kube-rs, typed `Api<ClusterRole>`: server-side apply under the app's
    name, then a list that holds it and not the other copy's."""
    import subprocess
    copies["team2"]("apply", "-f", "-", input=MANIFEST)
    p = subprocess.run([kube_rs_bin, "--kubeconfig", str(copies["kubeconfigs"]["team1"]), "apply-cluster-role",
                        "foo-applied"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(line) for line in p.stdout.splitlines()]
    assert lines[0] == {"step": "apply", "name": "foo-applied",
                        "rules": [{"apiGroups": [ORIG_GROUP], "resources": ["foos"], "verbs": ["get"]}]}
    assert "foo-applied" in lines[1]["names"] and not [n for n in lines[1]["names"] if f"rg{RUN}" in n]
    stored = cluster.json("get", "clusterrole", f"{prefix('team1')}foo-applied")
    assert stored["rules"][0]["apiGroups"] == [CLUSTER_GROUP]
    cluster("delete", "clusterrole", f"{prefix('team1')}foo-applied")


def test_a_copy_changes_and_deletes_only_its_own(copies, cluster):
    for team in ("team1", "team2"):
        copies[team]("apply", "-f", "-", input=MANIFEST)
    copies["team1"]("label", "clusterrole", "foo-viewer", "copy=team1", "--overwrite")
    assert cluster.json("get", "clusterrole", f"{prefix('team1')}foo-viewer")["metadata"]["labels"] == {
        "copy": "team1"}
    assert not cluster.json("get", "clusterrole", f"{prefix('team2')}foo-viewer")["metadata"].get("labels")
    # Both copies' roles carry one label; kubectl's `delete -l` lists (through
    # the copy: its own only) and deletes by name.
    for team in ("team1", "team2"):
        cluster("label", "clusterrole", f"{prefix(team)}foo-viewer", f"run={RUN}", "--overwrite")
    out = copies["team1"]("delete", "clusterroles", "-l", f"run={RUN}")
    assert out.strip() == 'clusterrole.rbac.authorization.k8s.io "foo-viewer" deleted', out
    # The whole error kubectl prints names the app's object.
    assert copies["team1"].fails("get", "clusterrole", "foo-viewer").strip() == (
        'Error from server (NotFound): clusterroles.rbac.authorization.k8s.io "foo-viewer" not found')
    assert copies["team2"].json("get", "clusterrole", "foo-viewer")["metadata"]["name"] == "foo-viewer"


def test_a_collection_delete_that_would_reach_another_copy_is_refused(copies, cluster):
    """client-go's DeleteCollection (here the Python client's) selects by
    labels on the cluster, where the other copy's objects match too."""
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException
    for team in ("team1", "team2"):
        copies[team]("apply", "-f", "-", input=MANIFEST)
        cluster("label", "clusterrole", f"{prefix(team)}foo-viewer", f"run={RUN}", "--overwrite")
    api = client.RbacAuthorizationV1Api(config.new_client_from_config(config_file=str(copies["kubeconfigs"]["team1"])))
    with pytest.raises(ApiException) as e:
        api.delete_collection_cluster_role(label_selector=f"run={RUN}")
    assert e.value.status == 403
    status = json.loads(e.value.body)
    assert status["reason"] == "Forbidden"
    assert status["message"].startswith("regroup: deleting the collection clusterroles.rbac.authorization.k8s.io "
                                        "would delete other copies' objects too"), status
    for team in ("team1", "team2"):
        assert cluster.json("get", "clusterrole", f"{prefix(team)}foo-viewer")


PRIORITY = """apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: foo-high
value: 1000
---
apiVersion: v1
kind: Pod
metadata:
  name: foo-worker
spec:
  priorityClassName: foo-high
  containers:
  - name: worker
    image: registry.k8s.io/pause:3.9
"""


def test_a_pod_names_its_copys_priority_class(copies, cluster, upstream):
    """The app's Pod names the PriorityClass it created, `foo-high`; the
    cluster's Pod names this copy's, and the app reads back its own name."""
    out = copies["team1"]("apply", "-f", "-", input=PRIORITY)
    assert out.strip().split("\n") == ["priorityclass.scheduling.k8s.io/foo-high created", "pod/foo-worker created"]
    p = prefix("team1")
    assert cluster.json("get", "priorityclass", f"{p}foo-high")["value"] == 1000
    pod = cluster.json("get", "pod", "foo-worker", "-n", upstream.namespace)
    assert pod["spec"]["priorityClassName"] == f"{p}foo-high"
    assert copies["team1"].json("get", "pod", "foo-worker")["spec"]["priorityClassName"] == "foo-high"
    assert copies["team1"].json("get", "priorityclass", "foo-high")["metadata"]["name"] == "foo-high"
    copies["team1"]("delete", "pod", "foo-worker", "--wait=false")


def test_render_writes_the_copys_names(regroup_bin, workdir):
    import subprocess
    config = workdir / "names-render.yaml"
    config.write_text(CONFIG_YAML + f"names:\n  prefix: team1-\n  kinds: {KINDS}\n")
    manifest = workdir / "names-manifest.yaml"
    manifest.write_text(MANIFEST)
    out = subprocess.run([regroup_bin, "render", "-c", str(config), "-f", str(manifest)], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    # Only the group-bearing and name-bearing scalars change, in place.
    expected = (MANIFEST.replace("name: foo-", "name: team1-foo-").replace(ORIG_GROUP, CLUSTER_GROUP)
                .replace("team1-foo-controller", "foo-controller"))  # a ServiceAccount: namespaced
    assert out == expected, out
    assert json.dumps(out).count("team1-") == 5
