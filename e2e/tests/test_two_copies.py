"""Two copies of one operator, each behind its own regroup whose config has
rules only, no `names:` (issue #29): both register a webhook configuration
under Kopf's fixed name `auto.kopf.dev` and a ClusterRole, with kubectl 1.31
as the app. Neither overwrites the other: the cluster keeps both (each under
the prefix regroup derives from its rules), each copy reads back, applies
over and lists only its own.

The copies' cluster groups carry a per-run id, so their derived prefixes do
too: against a real cluster (REGROUP_E2E_KUBECONFIG) nothing collides with
an earlier run, and everything is deleted at the end."""
import uuid

import pytest

from conftest import start_regroup
from e2e_support import DIRECT, ORIG_GROUP, Kubectl, stop, write_kubeconfig

pytestmark = pytest.mark.skipif(DIRECT, reason="REGROUP_E2E_DIRECT: no regroup, so no names renamed")

RUN = uuid.uuid4().hex[:6]
TEAMS = ("a", "b")


def cluster_group(team):
    return f"samplecontroller.rg{RUN}{team}.example.com"


def manifest(team):
    return f"""apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: auto.kopf.dev
webhooks:
- name: validate.kopf.dev
  rules:
  - apiGroups: [{ORIG_GROUP}]
    apiVersions: [v1alpha1]
    operations: [CREATE]
    resources: [foos]
  clientConfig:
    url: https://{team}.invalid/validate
  failurePolicy: Ignore
  sideEffects: None
  admissionReviewVersions: [v1]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: kopf-operator
rules:
- apiGroups: [{ORIG_GROUP}]
  resources: [foos]
  verbs: [get, list, watch, patch]
"""


def ours(names):
    """The cluster names this run's copies wrote."""
    return sorted(n for n in names if n.startswith(f"rg{RUN}"))


@pytest.fixture(scope="module")
def copies(upstream, workdir, regroup_bin, cluster):
    procs, apps = [], {}
    try:
        for team in TEAMS:
            config = workdir / f"two-copies-{team}.yaml"
            config.write_text(f"rules:\n  - from: {ORIG_GROUP}\n    to: {cluster_group(team)}\n")
            proc, port, _ = start_regroup(regroup_bin, workdir, f"two-copies-{team}", config, upstream.kubeconfig)
            procs.append(proc)
            kc = write_kubeconfig(workdir / f"two-copies-{team}.kubeconfig", f"http://127.0.0.1:{port}",
                                  upstream.namespace)
            apps[team] = Kubectl(kc, workdir / f"cache-two-copies-{team}", upstream.namespace)
        yield apps
    finally:
        for p in procs:
            stop(p)
        for kind in ("validatingwebhookconfigurations", "clusterroles"):
            names = cluster("get", kind, "-o", "name").split()
            for n in names:
                if n.split("/")[-1].startswith(f"rg{RUN}"):
                    cluster.run("delete", n, "--ignore-not-found", check=False)


def test_two_copies_without_names_config_keep_their_own_registrations(copies, cluster):
    for team in TEAMS:
        out = copies[team]("apply", "-f", "-", input=manifest(team))
        assert out.strip().split("\n") == [
            "validatingwebhookconfiguration.admissionregistration.k8s.io/auto.kopf.dev created",
            "clusterrole.rbac.authorization.k8s.io/kopf-operator created",
        ], out

    # The cluster holds both copies' registrations, under two names.
    hooks = ours(i["metadata"]["name"] for i in cluster.json("get", "validatingwebhookconfigurations")["items"])
    assert len(hooks) == 2 and all(h.endswith("-auto.kopf.dev") for h in hooks), hooks
    roles = ours(i["metadata"]["name"] for i in cluster.json("get", "clusterroles")["items"])
    assert len(roles) == 2 and all(r.endswith("-kopf-operator") for r in roles), roles
    for team, name in zip(TEAMS, hooks):
        assert name.startswith(f"rg{RUN}{team}-"), (team, name)
        stored = cluster.json("get", "validatingwebhookconfiguration", name)
        assert stored["webhooks"][0]["clientConfig"]["url"] == f"https://{team}.invalid/validate"
        assert stored["webhooks"][0]["rules"][0]["apiGroups"] == [cluster_group(team)]

    # Copy b applies again over "its" auto.kopf.dev (Kopf patches it on
    # every start): copy a's registration is untouched.
    changed = manifest("b").replace("https://b.invalid/validate", "https://b2.invalid/validate")
    copies["b"]("apply", "-f", "-", input=changed)
    assert cluster.json("get", "validatingwebhookconfiguration", hooks[0])["webhooks"][0]["clientConfig"][
        "url"] == "https://a.invalid/validate"
    assert cluster.json("get", "validatingwebhookconfiguration", hooks[1])["webhooks"][0]["clientConfig"][
        "url"] == "https://b2.invalid/validate"

    # Each copy reads its own under the name it wrote, and lists only its own.
    for team, url in (("a", "https://a.invalid/validate"), ("b", "https://b2.invalid/validate")):
        hook = copies[team].json("get", "validatingwebhookconfiguration", "auto.kopf.dev")
        assert hook["metadata"]["name"] == "auto.kopf.dev"
        assert hook["webhooks"][0]["clientConfig"]["url"] == url
        assert hook["webhooks"][0]["rules"][0]["apiGroups"] == [ORIG_GROUP]
        listed = [i["metadata"]["name"] for i in copies[team].json("get", "validatingwebhookconfigurations")["items"]]
        assert listed.count("auto.kopf.dev") == 1 and not ours(listed), listed
        role = copies[team].json("get", "clusterrole", "kopf-operator")
        assert role["rules"][0]["apiGroups"] == [ORIG_GROUP]
