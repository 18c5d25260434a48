"""Names for people, per copy (#26).

Short names and categories: a stand-in serving the renamed Foo CRD as
`regroup render` with `names.shortNamePrefix: t1-` installs it (`t1-fo`,
categories `all` and `t1-samplecontroller`). kubectl through regroup knows
the app's `fo` and `samplecontroller`; kubectl on the cluster knows only
`t1-fo` and `t1-samplecontroller`, so each copy's short name is
unambiguous there.

Fixed names of namespaced kinds: two copies, each through its own regroup
with `names.namespaced` (Lease `foo-operator-lock`, prefixes team1-/team2-),
create and read "their" leader-election Lease in one namespace; the cluster
holds two Leases, one per copy, and each copy reads back its own holder.
"""
import json

import pytest

from conftest import start_regroup, start_standin
from e2e_support import CONFIG_YAML, DIRECT, Kubectl, stop, write_kubeconfig

pytestmark = pytest.mark.skipif(DIRECT, reason="REGROUP_E2E_DIRECT: no regroup, so nothing renamed")


@pytest.fixture(scope="module")
def short_names(workdir, regroup_bin):
    """(kubectl through regroup, kubectl on the cluster), over a stand-in of
    its own that serves the prefixed discovery."""
    import os
    if os.environ.get("REGROUP_E2E_KUBECONFIG"):
        pytest.skip("the stand-in serves the prefixed discovery; a real cluster would need the CRD rendered "
                    "with shortNamePrefix (the session's CRD is shared)")
    sproc, sport, slog = start_standin(workdir, "upstream-short-names", "--seed-namespace", "e2e",
                                       env={"REGROUP_STANDIN_SHORT_PREFIX": "t1-"})
    procs = [sproc]
    try:
        up_kc = write_kubeconfig(workdir / "short-upstream.kubeconfig", f"http://127.0.0.1:{sport}", "e2e")
        config = workdir / "short-names.yaml"
        config.write_text(CONFIG_YAML + "names:\n  shortNamePrefix: t1-\n")
        proc, port, log = start_regroup(regroup_bin, workdir, "short-names", config, up_kc)
        procs.append(proc)
        app_kc = write_kubeconfig(workdir / "short-app.kubeconfig", f"http://127.0.0.1:{port}", "e2e")
        yield (Kubectl(app_kc, workdir / "cache-short-app", "e2e", [log, slog]),
               Kubectl(up_kc, workdir / "cache-short-cluster", "e2e", [slog]))
    finally:
        for p in procs:
            stop(p)


def names(out):
    return sorted(line for line in out.split("\n") if line)


def test_kubectl_get_by_short_name_and_category_through_regroup_and_on_the_cluster(short_names):
    app, cluster = short_names
    foos = names(cluster("get", "foos.samplecontroller.team1.example.com", "-o", "name"))
    assert foos, "the stand-in seeds Foos"
    # The app's names through regroup.
    assert names(app("get", "fo", "-o", "name")) == [f.replace(".team1.example.com", ".k8s.io") for f in foos]
    assert names(app("get", "samplecontroller", "-o", "name")) == names(app("get", "fo", "-o", "name"))
    # The cluster's: only the prefixed ones are this copy's.
    assert names(cluster("get", "t1-fo", "-o", "name")) == foos
    assert names(cluster("get", "t1-samplecontroller", "-o", "name")) == foos
    assert "t1-fo" in app.fails("get", "t1-fo")
    # `all` is kept: kubectl's "every resource" still lists the copy's Foos on the cluster.
    # (The stand-in serves no replicationcontrollers, so kubectl ends with an
    # error after listing the others: only its output is read.)
    assert set(foos) <= set(names(cluster.run("get", "all", "-o", "name", check=False).stdout))
    # Discovery as the app reads it: the mark removed, `all` as it was.
    resources = json.loads(app("get", "--raw", "/apis/samplecontroller.k8s.io/v1alpha1"))["resources"]
    foo = next(r for r in resources if r["name"] == "foos")
    assert foo["shortNames"] == ["fo"] and foo["categories"] == ["all", "samplecontroller"]


LEASE = """apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: foo-operator-lock
spec:
  holderIdentity: {holder}
  leaseDurationSeconds: 15
"""


@pytest.fixture(scope="module")
def two_copies(upstream, workdir, regroup_bin, cluster):
    procs, apps = [], {}
    try:
        for team in ("team1", "team2"):
            config = workdir / f"lease-{team}.yaml"
            config.write_text(CONFIG_YAML + f"names:\n  prefix: {team}-\n  namespaced:\n    kinds: [Lease]\n"
                              "    names: [foo-operator-lock]\n")
            proc, port, log = start_regroup(regroup_bin, workdir, f"lease-{team}", config, upstream.kubeconfig)
            procs.append(proc)
            kc = write_kubeconfig(workdir / f"lease-{team}.kubeconfig", f"http://127.0.0.1:{port}",
                                  upstream.namespace)
            apps[team] = Kubectl(kc, workdir / f"cache-lease-{team}", upstream.namespace, [log])
        yield apps
    finally:
        for p in procs:
            stop(p)
        for team in ("team1", "team2"):
            cluster.run("delete", "lease", f"{team}-foo-operator-lock", "--ignore-not-found", check=False)


def test_two_copies_elect_their_leaders_on_one_lease_name_in_one_namespace(two_copies, cluster):
    for team in ("team1", "team2"):
        out = two_copies[team]("create", "-f", "-", input=LEASE.format(holder=f"{team}-pod"))
        assert out.strip() == "lease.coordination.k8s.io/foo-operator-lock created", out
    # The cluster holds two Leases, one per copy.
    for team in ("team1", "team2"):
        lease = cluster.json("get", "lease", f"{team}-foo-operator-lock")
        assert lease["spec"]["holderIdentity"] == f"{team}-pod"
    assert "not found" in cluster.fails("get", "lease", "foo-operator-lock").lower()
    # Each copy reads and renews its own, under the name it wrote.
    for team in ("team1", "team2"):
        lease = two_copies[team].json("get", "lease", "foo-operator-lock")
        assert lease["metadata"]["name"] == "foo-operator-lock"
        assert lease["spec"]["holderIdentity"] == f"{team}-pod"
        two_copies[team]("patch", "lease", "foo-operator-lock", "--type=merge", "-p",
                         json.dumps({"spec": {"leaseTransitions": 1}}))
        listed = two_copies[team].json("get", "lease")["items"]
        mine = [i for i in listed if i["metadata"]["name"] == "foo-operator-lock"]
        assert [i["spec"]["holderIdentity"] for i in mine] == [f"{team}-pod"]
    # The other copy's Lease is there under its own name, not shown as this copy's.
    listed = [i["metadata"]["name"] for i in two_copies["team1"].json("get", "lease")["items"]]
    assert "team2-foo-operator-lock" in listed and "team1-foo-operator-lock" not in listed
    assert cluster.json("get", "lease", "team1-foo-operator-lock")["spec"]["leaseTransitions"] == 1
