"""Publish mode (docs/publish.md) end to end, with real processes: a CENTRAL
cluster serves the CRD `mysqlinstancerequirements.database.acmeco.org`
(e2e/manifests/publish-crd.yaml); `regroup serve` with `publish:` is the
aggregated front of a REMOTE cluster, whose APIService
`v1alpha1.database.acmeco.org` points at it. An admin of the remote cluster
uses plain kubectl there (apply, get, watch, explain, server-side apply,
delete, `--as`); regroup writes centrally with a service account's token
confined by a Role to its target namespaces, and copies the connection
Secrets back.

Stand-in mode (default): two stand-ins (e2e/standin/server.py), the remote
one playing the aggregator (`--proxy-client-cert`, with `--rbac` for
SubjectAccessReviews and impersonation), the central one serving the CRD
(`--custom-resources`) and enforcing the Role on the token it issued
(`--rbac`). With REGROUP_E2E_KUBECONFIG (the remote cluster's admin) and
REGROUP_E2E_CENTRAL_KUBECONFIG (the central cluster's admin): two real
clusters, set up and cleaned up here with names of this run (the CRD is
reused when the central cluster has it, and then kept; an APIService
`v1alpha1.database.acmeco.org` already there is pointed at this run's front
and restored at the end). The front listens on REGROUP_E2E_FRONT_HOST (or the
address test_front.py finds). The tests run in order, each the next step of
one story; the fixtures make the objects a step needs when it runs alone."""
import base64
import json
import os
import re
import ssl
import time
import urllib.error
import urllib.request
import uuid

import pytest

from e2e_support import Kubectl, Stream, stop, wait_for
from publish_support import (COPY_LABEL, COPY_OF, GROUP, KIND, PLURAL, PUBLISH_SKIPS, REAL, RESOURCE,
                             SECRET, SOURCE_CLUSTER, SOURCE_NS, TARGET_ANNOTATION, VERSION, CENTRAL_KUBECONFIG, Front,
                             binding, delete_namespaces, ensure_crd, front_certificate, front_host, grant, namespace,
                             publish_section, register_front, remote_secret, requirement, role,
                             service_account_kubeconfig, start_central_standin, start_remote_standin,
                             wait_for_aggregator)
from publish_support import set_ready as set_status
from publish_support import write_connection_secret as write_owned_secret

STALE_UID = "00000000-0000-4000-8000-000000000001"

pytestmark = PUBLISH_SKIPS


class Pub:
    """The two clusters, regroup, and this run's names."""


def grant_agent(p, ns):
    """The central Role `regroup publish-manifests` prints, in `ns`, for the agent's service account."""
    grant(p.central, ns, "rg-publish-agent", p.target, p.agent)


@pytest.fixture(scope="module")
def pub(workdir, regroup_bin, request):
    p = Pub()
    p.dir = workdir / "publish"
    p.dir.mkdir(exist_ok=True)
    # Undone in this order at the end: the remote namespaces first, while
    # regroup, this run's APIService and its Service still serve them (the
    # namespace controller deletes their objects through the front; with the
    # APIService pointed elsewhere, or its Service gone and the group's
    # discovery stale, an annotated namespace would stay Terminating), then
    # the APIService, the Service's namespace, the central objects.
    procs, undo = [], {}
    try:
        if REAL:
            run = uuid.uuid4().hex[:5]
            remote_kc, central_kc = os.environ["REGROUP_E2E_KUBECONFIG"], CENTRAL_KUBECONFIG
            p.target, p.target2, p.agent = f"rg-pub-{run}", f"rg-pub-{run}-2", "rg-pub-agent"
            p.foo, p.other, p.elsewhere, p.svc_ns = (f"rg-pub-{run}-foo", f"rg-pub-{run}-other",
                                                     f"rg-pub-{run}-annotated", f"rg-pub-{run}")
            p.logs = []
        else:
            request.getfixturevalue("front_proxy_pki")
            proc, remote_kc, p.remote_log = start_remote_standin(workdir, "publish-remote")
            procs.append(proc)
            proc, central_kc, p.central_log = start_central_standin(workdir, "publish-central")
            procs.append(proc)
            p.target, p.target2, p.agent = "bar", "bar2", "agent1"
            p.foo, p.other, p.elsewhere, p.svc_ns = "foo", "other", "elsewhere", "regroup"
            p.logs = [p.remote_log, p.central_log]
        p.regroup_log = p.dir / "regroup.log"
        p.logs.append(p.regroup_log)
        p.remote = Kubectl(remote_kc, p.dir / "cache-remote", p.foo, p.logs)
        p.central = Kubectl(central_kc, p.dir / "cache-central", p.target, p.logs)

        # ---- central: the CRD (kept when it was there), the target namespaces, the agent and its Role
        drop_crd = ensure_crd(p.central)
        if drop_crd:
            undo["crd"] = drop_crd
        undo["central"] = lambda: cleanup_central(p)
        p.central("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
            namespace(p.target), namespace(p.target2),
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": p.agent, "namespace": p.target}}]}))
        grant_agent(p, p.target)
        agent_kc, _ = service_account_kubeconfig(p.central, central_kc, p.dir / "central-agent.kubeconfig", p.target,
                                                 p.agent)

        # ---- remote: namespaces; regroup's serving certificate and configuration
        undo["remote"] = lambda: delete_namespaces(p.remote, [p.foo, p.other, p.elsewhere])
        undo["service"] = lambda: delete_namespaces(p.remote, [p.svc_ns])
        p.remote("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
            namespace(n) for n in (p.foo, p.other, p.svc_ns)]}))
        p.cluster_id = p.remote.json("get", "namespace", "kube-system")["metadata"]["uid"]
        p.host = front_host(p.remote, standin=not REAL)
        ca = front_certificate(p.dir, p.svc_ns, p.host)
        # The copier's Lease in the Service's namespace, which goes at the end
        # (its default, the pod's namespace, is `default` outside a pod).
        publish = publish_section(agent_kc, p.target, leaderElection={"namespace": p.svc_ns})
        front = Front(regroup_bin, p.dir, "regroup", remote_kc, publish,
                      listen_host="0.0.0.0" if REAL else "127.0.0.1")
        procs.append(front.proc)
        p.port, p.metrics_port = front.port, front.metrics_port

        # ---- remote: the Service and Endpoints the APIService names, and the APIService
        undo["apiservice"] = register_front(p.remote, p.svc_ns, p.host, p.port, ca)
        wait_for_aggregator(p.remote, f"{p.host}:{p.port}")
        yield p
    finally:
        for step in ("remote", "apiservice", "service", "central", "crd"):
            if step in undo:
                undo[step]()
        for proc in reversed(procs):
            stop(proc)


def cleanup_central(p):
    """This run's objects in the central cluster (the stand-in goes with its process)."""
    if not REAL:
        return
    for ns in (p.target, p.target2):
        p.central.run("delete", RESOURCE, "--all", "-n", ns, "--ignore-not-found", "--wait=false", check=False)
        p.central.run("delete", "secret,rolebinding,role,serviceaccount", "--all", "-n", ns, "--ignore-not-found",
                      check=False)
    delete_namespaces(p.central, [p.target, p.target2])


@pytest.fixture(scope="module")
def sqldb(pub):
    """The requirement `sqldb` applied in the remote namespace foo: kubectl's output."""
    return pub.remote("apply", "-f", "-", input=json.dumps(requirement(pub.foo)))


def central_sqldb(p):
    return p.central.json("get", RESOURCE, "sqldb", "-n", p.target)


def set_ready(p, value, name="sqldb"):
    """What the central cluster's controller does: writes the status."""
    set_status(p.central, p.target, name, value)


# ---- discovery and OpenAPI ----------------------------------------------------------------

def test_api_resources_list_the_published_kind(pub):
    out = pub.remote("api-resources", f"--api-group={GROUP}", "-o", "wide")
    rows = [line.split() for line in out.splitlines()[1:]]
    assert [r[:5] for r in rows] == [[PLURAL, "mysql", f"{GROUP}/{VERSION}", "true", KIND]], out
    doc = json.loads(pub.remote("get", "--raw", f"/apis/{GROUP}/{VERSION}"))
    assert {r["name"] for r in doc["resources"]} == {PLURAL, f"{PLURAL}/status"}


def test_explain_shows_the_central_schema(pub):
    # A real aggregator downloads an APIService's OpenAPI v3 a while after
    # it turns Available (kube-apiserver 1.36, seen here: seconds): asked
    # again until then, 30 s at most.
    deadline = time.monotonic() + 30
    while True:
        got = pub.remote.run("explain", "mysql.spec", check=False)
        if got.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(1)
    out = pub.remote("explain", "mysql.spec")
    assert f"GROUP:      {GROUP}" in out and f"KIND:       {KIND}" in out, out
    for field in ("storageGB\t<integer>", "version\t<string> -required-", "writeConnectionSecretToRef\t<Object>"):
        assert field in out, out
    assert "5.6, 5.7, 8.0" in out, out


# ---- the object is the central one ---------------------------------------------------------

def test_apply_creates_it_centrally_in_the_target_namespace_with_its_source(pub, sqldb):
    assert sqldb.strip() == f"{KIND.lower()}.{GROUP}/sqldb created"
    stored = central_sqldb(pub)
    assert stored["metadata"]["namespace"] == pub.target
    labels = stored["metadata"]["labels"]
    assert (labels[SOURCE_NS], labels[SOURCE_CLUSTER]) == (pub.foo, pub.cluster_id)
    assert stored["spec"] == {"version": "5.7", "storageGB": 20, "writeConnectionSecretToRef": {"name": SECRET}}
    seen = pub.remote.json("get", "mysql", "sqldb", "-n", pub.foo)
    assert seen["metadata"]["namespace"] == pub.foo
    assert seen["metadata"]["uid"] == stored["metadata"]["uid"]
    assert seen["apiVersion"] == f"{GROUP}/{VERSION}"


def test_status_written_centrally_is_read_remotely(pub, sqldb):
    set_ready(pub, "True")
    assert pub.remote("get", "mysql", "-n", pub.foo, "sqldb", "-o", "jsonpath={.status.ready}") == "True"


def test_a_list_across_namespaces_shows_the_remote_namespace(pub, sqldb):
    set_ready(pub, "True")
    out = pub.remote("get", "mysql", "-A")
    lines = out.splitlines()
    assert lines[0].split() == ["NAMESPACE", "NAME", "READY"], out
    assert [pub.foo, "sqldb", "True"] in [line.split() for line in lines[1:]], out
    items = pub.remote.json("get", "mysql", "-A")["items"]
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in items] == [(pub.foo, "sqldb")]
    assert "No resources found" in pub.remote.run("get", "mysql", "-n", pub.other).stderr


def test_a_watch_sees_the_central_status_change(pub, sqldb):
    set_ready(pub, "True")
    w = Stream(pub.remote.argv("get", "mysql", "-n", pub.foo, "--watch", "--output-watch-events"), lines=True)
    try:
        seen = []
        w.until(lambda line: line.split()[:3] == ["ADDED", "sqldb", "True"], 30, seen)
        set_ready(pub, "Provisioning")
        w.until(lambda line: line.split()[:3] == ["MODIFIED", "sqldb", "Provisioning"], 30, seen)
        assert seen[0].split() == ["EVENT", "NAME", "READY"], seen
    finally:
        w.close()


def test_the_central_validation_refuses_at_apply_time(pub, sqldb):
    err = pub.remote.fails("apply", "-f", "-", input=json.dumps(requirement(pub.foo, storage=500)))
    assert f'The {KIND} "sqldb" is invalid: spec.storageGB: Invalid value: 500: storageGB may not exceed 100' in err
    assert central_sqldb(pub)["spec"]["storageGB"] == 20


# ---- a name held by another source ---------------------------------------------------------------

def test_the_same_name_in_another_namespace_is_refused_and_never_overwritten(pub, sqldb):
    before = central_sqldb(pub)
    err = pub.remote.fails("apply", "-n", pub.other, "-f", "-", input=json.dumps(requirement(pub.other, storage=50)))
    assert "Error from server (AlreadyExists)" in err and "held by another namespace or cluster" in err, err
    err = pub.remote.fails("get", "mysql", "sqldb", "-n", pub.other)
    assert "Error from server (NotFound)" in err and "held in the central cluster by another" in err, err
    err = pub.remote.fails("delete", "mysql", "sqldb", "-n", pub.other)
    assert "Error from server (Conflict)" in err and "regroup never overwrites it" in err, err
    # (kubectl patch reads the object first: NotFound, as for get)
    err = pub.remote.fails("patch", "mysql", "sqldb", "-n", pub.other, "--type=merge", "-p",
                           '{"spec":{"storageGB":1}}')
    assert "Error from server (NotFound)" in err, err
    after = central_sqldb(pub)
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["metadata"]["labels"][SOURCE_NS] == pub.foo
    assert after["spec"] == before["spec"]


# ---- two security domains ------------------------------------------------------------------

def test_a_user_the_remote_cluster_denies_is_forbidden(pub, sqldb):
    err = pub.remote.fails("get", "mysql", "-n", pub.foo, "--as=bob")
    assert "Error from server (Forbidden)" in err, err
    assert (f'User "bob" cannot list resource "{PLURAL}" in API group "{GROUP}" in the namespace "{pub.foo}"'
            in err), err


def test_the_remote_clusters_rbac_decides(pub, sqldb):
    """A user whom the remote cluster grants list in foo (a Role there) lists
    foo's objects through the front, and nothing in other."""
    pub.remote("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        role("rg-publish-reader", pub.foo, [{"apiGroups": [GROUP], "resources": [PLURAL],
                                             "verbs": ["get", "list", "watch"]}]),
        binding("rg-publish-reader", pub.foo, {"kind": "User", "name": "carol",
                                               "apiGroup": "rbac.authorization.k8s.io"})]}))
    out = wait_for("carol's Role to take effect", lambda: pub.remote.run(
        "get", "mysql", "-n", pub.foo, "--as=carol", "-o", "name", check=False).stdout, timeout=30)
    assert out.split() == [f"{KIND.lower()}.{GROUP}/sqldb"]
    err = pub.remote.fails("get", "mysql", "-n", pub.other, "--as=carol")
    assert f'User "carol" cannot list resource "{PLURAL}" in API group "{GROUP}" in the namespace "{pub.other}"' \
        in err, err


def call_front(p, path, user, group, workdir):
    """(status, body) of a GET straight to the front, with the front-proxy
    client certificate the stand-in's aggregator has."""
    ctx = ssl.create_default_context(cafile=str(p.dir / "front-ca.crt"))
    ctx.check_hostname = False
    ctx.load_cert_chain(workdir / "front-proxy-client.crt", workdir / "front-proxy-client.key")
    req = urllib.request.Request(f"https://127.0.0.1:{p.port}{path}",
                                 headers={"X-Remote-User": user, "X-Remote-Group": group})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=15) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        body = e.read()
        return e.code, json.loads(body) if body.startswith(b"{") else {"text": body.decode()}


def test_regroup_asks_the_remote_cluster_itself(pub, sqldb, workdir):
    """Straight to the front as a front-proxy caller (a real cluster's
    aggregator already refuses bob itself, so only this shows regroup's own
    SubjectAccessReview): bob is refused by regroup and nothing reaches the
    central cluster; a member of system:masters lists foo, in foo's names."""
    if REAL:
        pytest.skip("the cluster's front-proxy client key is not available to the suite on a real cluster")
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{pub.foo}/{PLURAL}"
    # The front's list names foo in its selector (the connection Secrets' pass, every second, doesn't).
    marker = f"/namespaces/{pub.target}/{PLURAL}?labelSelector=regroup.dev%2Fsource-namespace%3D{pub.foo}"
    central_seen = pub.central_log.read_text().count(marker)
    reviews = pub.remote_log.read_text().count("POST /apis/authorization.k8s.io/v1/subjectaccessreviews 201")
    code, status = call_front(pub, path, "bob", "system:authenticated", workdir)
    assert (code, status.get("reason")) == (403, "Forbidden"), status
    assert status["message"] == (f'{RESOURCE} is forbidden: User "bob" cannot list resource "{PLURAL}" in API group '
                                 f'"{GROUP}" in the namespace "{pub.foo}"')
    assert pub.central_log.read_text().count(marker) == central_seen
    assert pub.remote_log.read_text().count("POST /apis/authorization.k8s.io/v1/subjectaccessreviews 201") > reviews
    code, lst = call_front(pub, path, "alice", "system:masters", workdir)
    assert code == 200, lst
    assert pub.central_log.read_text().count(marker) == central_seen + 1
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in lst["items"]] == [(pub.foo, "sqldb")]
    code, body = call_front(pub, f"/apis/apps/v1/namespaces/{pub.foo}/deployments", "alice", "system:masters",
                            workdir)
    assert (code, body) == (404, {"text": "404 page not found\n"}), "a group that is not published is not served"


# ---- connection Secrets ----------------------------------------------------------------------

def remote_copy(p, ns=None):
    return remote_secret(p.remote, ns or p.foo)


def write_connection_secret(p, password="s3cret"):
    """What the central cluster's controller does (Crossplane): the Secret
    the object names, owned by it."""
    return write_owned_secret(p.central, p.target, central_sqldb(p), password=password)


def test_the_connection_secret_is_copied_into_the_remote_namespace(pub, sqldb):
    start = time.monotonic()
    central = write_connection_secret(pub)
    copy = wait_for(f"the Secret {pub.foo}/{SECRET} copied from the central cluster", lambda: remote_copy(pub),
                    timeout=30, interval=0.5)
    assert time.monotonic() - start < 15, "the copy took longer than a few seconds (resyncSeconds: 1)"
    assert copy["data"] == central["data"] and copy["type"] == "Opaque"
    labels = copy["metadata"]["labels"]
    assert set(labels) == {"app.kubernetes.io/managed-by", COPY_LABEL} and labels["app.kubernetes.io/managed-by"] == "regroup"
    # The publisher's id: two publishers in one cluster each find (and delete) only their own copies.
    assert re.fullmatch(r"[0-9a-f]{8}", labels[COPY_LABEL]), labels
    assert copy["metadata"]["annotations"][COPY_OF] == f"{RESOURCE}/sqldb"
    # A change centrally follows.
    write_connection_secret(pub, password="rotated")
    wait_for("the rotated password in the copy", lambda: (remote_copy(pub) or {}).get("data", {}).get(
        "password") == base64.b64encode(b"rotated").decode(), timeout=30, interval=0.5)


def test_a_secret_the_object_does_not_own_is_not_copied(pub, sqldb):
    """A requirement in another remote namespace naming sqldb's Secret (same
    central namespace): it is not its owner, so nothing is copied there."""
    if remote_copy(pub) is None:
        write_connection_secret(pub)
    wait_for(f"the Secret {pub.foo}/{SECRET}", lambda: remote_copy(pub), timeout=30, interval=0.5)
    pub.remote("apply", "-n", pub.other, "-f", "-", input=json.dumps(requirement(pub.other, name="sneaky")))
    try:
        wait_for("regroup to pass over the Secret sneaky names but doesn't own", lambda: any(
            "not copied" in line and f"{RESOURCE}/sneaky" in line
            for line in pub.regroup_log.read_text().splitlines()), timeout=30)
        time.sleep(2)  # two more passes
        assert remote_copy(pub, pub.other) is None, "another object's connection Secret was copied"
    finally:
        pub.remote.run("delete", "mysql", "sneaky", "-n", pub.other, "--ignore-not-found", check=False)


# ---- server-side apply ---------------------------------------------------------------------------

def test_server_side_apply_keeps_the_source_labels(pub):
    obj = requirement(pub.foo, name="sqldb-ssa", storage=30, labels={"app": "wp"})
    try:
        out = pub.remote("apply", "--server-side", "-f", "-", input=json.dumps(obj))
        assert out.strip() == f"{KIND.lower()}.{GROUP}/sqldb-ssa serverside-applied"
        obj["spec"]["storageGB"] = 40
        pub.remote("apply", "--server-side", "-f", "-", input=json.dumps(obj))
        stored = pub.central.json("get", RESOURCE, "sqldb-ssa", "-n", pub.target, "--show-managed-fields")
        labels = stored["metadata"]["labels"]
        assert (labels["app"], labels[SOURCE_NS], labels[SOURCE_CLUSTER]) == ("wp", pub.foo, pub.cluster_id)
        assert stored["spec"]["storageGB"] == 40
        assert ("kubectl", "Apply") in [(m["manager"], m["operation"]) for m in stored["metadata"]["managedFields"]]
        # The caller's selector and regroup's are both applied centrally.
        assert pub.remote("get", "mysql", "-n", pub.foo, "-l", "app=wp", "-o", "name").split() == [
            f"{KIND.lower()}.{GROUP}/sqldb-ssa"]
        assert pub.remote("get", "mysql", "-n", pub.foo, "sqldb-ssa", "-o", "jsonpath={.metadata.namespace}") == \
            pub.foo
    finally:
        pub.remote.run("delete", "mysql", "sqldb-ssa", "-n", pub.foo, "--ignore-not-found", check=False)


# ---- a namespace sent elsewhere ------------------------------------------------------------------

def test_an_annotated_namespace_goes_to_its_own_central_namespace(pub):
    """`regroup.dev/publish-target-namespace: bar2` on the remote namespace:
    its objects go to central bar2, which the agent's Role must cover: the
    central cluster refuses it until it does."""
    pub.remote("apply", "-f", "-", input=json.dumps(namespace(pub.elsewhere, {TARGET_ANNOTATION: pub.target2})))
    obj = requirement(pub.elsewhere, name="annotated")
    err = pub.remote.fails("create", "-n", pub.elsewhere, "-f", "-", input=json.dumps(obj))
    assert "Error from server (Forbidden)" in err, err
    assert f'User "system:serviceaccount:{pub.target}:{pub.agent}" cannot create resource "{PLURAL}"' in err, err
    err = pub.remote.fails("get", "mysql", "-n", pub.elsewhere)
    assert "Error from server (Forbidden)" in err and f"system:serviceaccount:{pub.target}:{pub.agent}" in err, err
    # (a read by name, and so apply, is a 503 "the central cluster refused regroup's read": not pinned here)
    pub.remote.fails("apply", "-n", pub.elsewhere, "-f", "-", input=json.dumps(obj))
    assert pub.central.run("get", RESOURCE, "annotated", "-n", pub.target2, check=False).returncode != 0
    grant_agent(pub, pub.target2)
    out = wait_for("the agent's Role in the second target namespace", lambda: pub.remote.run(
        "apply", "-n", pub.elsewhere, "-f", "-", input=json.dumps(obj), check=False).stdout, timeout=30)
    assert out.strip() == f"{KIND.lower()}.{GROUP}/annotated created"
    stored = pub.central.json("get", RESOURCE, "annotated", "-n", pub.target2)
    assert stored["metadata"]["labels"][SOURCE_NS] == pub.elsewhere
    assert pub.remote.json("get", "mysql", "annotated", "-n", pub.elsewhere)["metadata"]["namespace"] == pub.elsewhere
    assert pub.central.run("get", RESOURCE, "annotated", "-n", pub.target, check=False).returncode != 0


def test_a_list_and_a_watch_across_namespaces_with_two_target_namespaces(pub, sqldb):
    """Remote namespaces going to two central namespaces (the annotated one
    of the test above): the agent may list only in each of them, so regroup
    lists and watches each and merges them (never at the central cluster
    scope)."""
    if pub.remote.run("get", "namespace", pub.elsewhere, check=False).returncode != 0:
        pytest.skip("needs the annotated namespace of the test above")
    got = pub.remote.run("get", "mysql", "-A", "-o", "json", check=False)
    assert got.returncode == 0, got.stderr
    listed = json.loads(got.stdout)
    names = {(i["metadata"]["namespace"], i["metadata"]["name"]) for i in listed["items"]}
    assert {(pub.foo, "sqldb"), (pub.elsewhere, "annotated")} <= names
    assert "continue" not in listed.get("metadata", {})
    set_ready(pub, "True")
    w = Stream(pub.remote.argv("get", "mysql", "-A", "--watch", "--output-watch-events"), lines=True)
    try:
        seen, got = [], set()
        want = {("ADDED", pub.elsewhere, "annotated"), ("ADDED", pub.foo, "sqldb")}

        def both_namespaces(line):
            got.add(tuple(line.split()[:3]))
            return want <= got

        w.until(both_namespaces, 30, seen)
        set_ready(pub, "Across")
        w.until(lambda line: line.split()[:4] == ["MODIFIED", pub.foo, "sqldb", "Across"], 30, seen)
    finally:
        w.close()


# ---- what regroup's writes rely on --------------------------------------------------------------

def test_the_central_apiserver_refuses_a_stale_uid(pub):
    """regroup binds every write to the uid it read; the central apiserver
    must refuse another uid (straight to it, as its admin: on a real cluster
    this checks the assumption, on the stand-in its mimicry)."""
    name = "uid-probe"
    pub.central("create", "-f", "-", input=json.dumps(dict(requirement(pub.target, name=name))))
    try:
        live = pub.central.json("get", RESOURCE, name)
        stale = dict(live, metadata=dict(live["metadata"], uid=STALE_UID))
        err = pub.central.fails("replace", "-f", "-", input=json.dumps(stale))
        assert "Error from server (Conflict)" in err and f"UID in precondition: {STALE_UID}" in err, err
        err = pub.central.fails("patch", RESOURCE, name, "--type=merge", "-p",
                                json.dumps({"metadata": {"uid": STALE_UID}}))
        assert "metadata.uid" in err and "field is immutable" in err, err
        opts = json.dumps({"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": STALE_UID}})
        err = pub.central.fails("delete", "--raw", f"/apis/{GROUP}/{VERSION}/namespaces/{pub.target}/{PLURAL}/{name}",
                                "-f", "-", input=opts)
        assert f"the UID in the precondition ({STALE_UID}) does not match" in err, err
        assert pub.central.json("get", RESOURCE, name)["metadata"]["uid"] == live["metadata"]["uid"]
    finally:
        pub.central.run("delete", RESOURCE, name, "--ignore-not-found", check=False)


# ---- deletion ------------------------------------------------------------------------------------

def test_delete_removes_it_centrally_and_its_connection_secret_follows(pub, sqldb):
    if remote_copy(pub) is None:
        write_connection_secret(pub)
        wait_for(f"the Secret {pub.foo}/{SECRET}", lambda: remote_copy(pub), timeout=30, interval=0.5)
    out = pub.remote("delete", "mysql", "sqldb", "-n", pub.foo)
    assert "deleted" in out and "sqldb" in out, out
    err = pub.central.fails("get", RESOURCE, "sqldb", "-n", pub.target)
    assert "NotFound" in err, err
    wait_for(f"the copy {pub.foo}/{SECRET} to go with its object", lambda: remote_copy(pub) is None, timeout=30,
             interval=0.5)
