"""Publish mode (docs/publish.md) beyond one remote cluster and one
credential, with real processes: per-namespace central credentials, two
remote clusters publishing into one central namespace, replicas electing
the connection Secret copier with a Lease, and a read-only remote side.

One central cluster (a stand-in with --rbac --custom-resources, or
REGROUP_E2E_CENTRAL_KUBECONFIG) serves the CRD of test_publish.py and has
three namespaces of this run: `ns-a` and `ns-b`, each with its team's
ServiceAccount whose Role covers only its namespace, and `home`, the
default target of cluster 1, where regroup's own credential (`agent`) has
its Role. Three remote sides, each a remote cluster whose aggregator
reaches its regroup(s):

- cluster 1 (`publish.clusterId: cluster-1`): the remote cluster
  (REGROUP_E2E_KUBECONFIG in real mode, else a stand-in), two replicas of
  one regroup (same `publish:`, Lease `rg-copier`, 3 s) of which the
  APIService's Endpoints name one; remote namespaces `team-a` and `team-b`
  annotated to `ns-a` and `ns-b`, each with its own credentials Secret (a
  `token` bound to a central Secret, and an inline `kubeconfig`);
- cluster 2 (`cluster-2`, a remote stand-in in both modes): one regroup
  targeting `ns-a`, acting with the default Secret
  (`publish.credentials.defaultSecret`), its own credential allowed nothing
  but discovery; remote namespace `apps`;
- cluster 3 (`cluster-3`, a remote stand-in in both modes): one regroup
  with `readOnly: true` targeting `ns-a` with a read-only credential;
  remote namespace `mirror`.

Each test makes what it needs when run alone (fixtures); in file order they
tell one story, the replica killed in the Lease test staying dead."""
import base64
import json
import os
import queue
import signal
import ssl
import time
import urllib.error
import urllib.request
import uuid
from contextlib import ExitStack

import pytest

from e2e_support import Kubectl, Stream, stop, wait_for
from publish_support import (AGENT_CREDENTIALS_ANNOTATION, CENTRAL_KUBECONFIG, COPY_LABEL, COPY_OF,
                             CREDENTIALS_ANNOTATION, GROUP, KIND, NAME_PREFIX, PLURAL, PUBLISH_SKIPS, READER_RULES,
                             REAL, RESOURCE, SOURCE_CLUSTER, SOURCE_NS, TARGET_ANNOTATION, VERSION, Front, b64,
                             delete_namespaces, ensure_crd,
                             front_certificate, front_host, grant, kubeconfig_text, namespace, point_endpoints,
                             publish_section, register_front, remote_secret, requirement, secret, server_of,
                             service_account_kubeconfig, set_ready, start_central_standin, start_remote_standin,
                             wait_for_aggregator, write_connection_secret)

pytestmark = PUBLISH_SKIPS

RUN = uuid.uuid4().hex[:5]
LEASE, LEASE_SECONDS = "rg-copier", 3
REPLICAS = ("replica-a", "replica-b")


def run_name(name):
    """A name of this run on a real cluster (shared with other runs); the
    plain name on a stand-in."""
    return f"rg-pm-{RUN}-{name}" if REAL else name


class Central:
    """The central cluster: kubectl as its admin, this run's namespaces."""


class Side:
    """One remote cluster and the regroup(s) fronting it."""


def apply(kubectl, *docs):
    """kubectl apply of objects, each in its own namespace (kubectl refuses
    one namespaced list across namespaces)."""
    for d in docs:
        ns = d["metadata"].get("namespace")
        kubectl("apply", *(["-n", ns] if ns else []), "-f", "-", input=json.dumps(d))


def standin_log_lines(log, needle):
    return [line for line in log.read_text().splitlines() if needle in line] if log else []


# ---- the central cluster ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def central(workdir):
    c = Central()
    c.dir = workdir / "publish-more"
    c.dir.mkdir(exist_ok=True)
    with ExitStack() as undo:
        if REAL:
            c.kc, c.log = CENTRAL_KUBECONFIG, None
        else:
            proc, c.kc, c.log = start_central_standin(workdir, "publish-more-central")
            undo.callback(stop, proc)
        c.kubectl = Kubectl(c.kc, c.dir / "cache-central", "default", [c.log] if c.log else [])
        drop_crd = ensure_crd(c.kubectl)
        if drop_crd:
            undo.callback(drop_crd)
        c.a, c.b, c.home = run_name("ns-a"), run_name("ns-b"), run_name("home")
        if REAL:
            undo.callback(cleanup_central, c)
        accounts = {c.home: ["agent", "nobody"], c.a: ["team-a", "cluster2", "viewer"], c.b: ["team-b"]}
        apply(c.kubectl, *[namespace(ns) for ns in accounts])
        apply(c.kubectl, *[{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, "namespace": ns}}
                           for ns, sas in accounts.items() for sa in sas])
        # Each credential's Role covers its own namespace only; `nobody` has none.
        grant(c.kubectl, c.home, "rg-agent", c.home, "agent")
        grant(c.kubectl, c.a, "team-a", c.a, "team-a")
        grant(c.kubectl, c.b, "team-b", c.b, "team-b")
        grant(c.kubectl, c.a, "cluster2", c.a, "cluster2")
        grant(c.kubectl, c.a, "viewer", c.a, "viewer", READER_RULES)
        yield c


def cleanup_central(c):
    for ns in (c.a, c.b, c.home):
        c.kubectl.run("delete", RESOURCE, "--all", "-n", ns, "--ignore-not-found", "--wait=false", check=False)
    delete_namespaces(c.kubectl, [c.a, c.b, c.home])


def central_as(c, name, path):
    """(status, body) of a GET straight to the central cluster with the
    token of kubeconfig_of(c, name, ...) (kubectl sends no token over the
    stand-in's HTTP)."""
    cluster = server_of(c.kc)
    token = json.loads((c.dir / f"central-{name}.kubeconfig").read_text())["users"][0]["user"]["token"]
    ctx = None
    if cluster["server"].startswith("https:"):
        ca = cluster.get("certificate-authority-data")
        ctx = ssl.create_default_context(cadata=base64.b64decode(ca).decode() if ca else None)
    req = urllib.request.Request(cluster["server"] + path, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=15) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def kubeconfig_of(c, name, ns, sa, bound_secret=None):
    """A kubeconfig of the central ServiceAccount ns/sa; (path, token)."""
    return service_account_kubeconfig(c.kubectl, c.kc, c.dir / f"central-{name}.kubeconfig", ns, sa,
                                      bound_secret=bound_secret)


def token_secret(name, ns, token):
    """A credentials Secret holding a token, and in real mode the central
    CA as `ca.crt` (the stand-in speaks HTTP)."""
    data = {"token": token}
    ca = server_of(CENTRAL_KUBECONFIG).get("certificate-authority-data") if REAL else None
    if ca:
        data["ca.crt"] = base64.b64decode(ca)
    return secret(name, ns, data)


# ---- the remote sides -----------------------------------------------------------------------------

def remote_cluster(s, workdir, request, undo, standin):
    """The side's remote cluster: the real one, or a stand-in of its own."""
    s.standin = standin
    if standin:
        request.getfixturevalue("front_proxy_pki")
        proc, s.kc, s.log = start_remote_standin(workdir, f"publish-more-remote-{s.n}")
        undo.callback(stop, proc)
    else:
        s.kc, s.log = os.environ["REGROUP_E2E_KUBECONFIG"], None
    s.dir = workdir / "publish-more" / f"cluster-{s.n}"
    s.dir.mkdir(parents=True, exist_ok=True)
    s.remote = Kubectl(s.kc, s.dir / "cache-remote", "default", [s.log] if s.log else [])
    s.svc_ns = run_name("regroup") if not standin else "regroup"
    s.namespaces = []  # deleted at the end, while the front still serves them
    s.host = front_host(s.remote, standin)
    s.ca = front_certificate(s.dir, s.svc_ns, s.host)
    undo.callback(lambda: delete_namespaces(s.remote, [s.svc_ns]) if not standin else None)
    apply(s.remote, namespace(s.svc_ns))


def serve(s, regroup_bin, undo, publish, names):
    """The side's regroups (one per name, HOSTNAME=name: the Lease holder's
    identity starts with it), the APIService pointed at the first."""
    s.fronts = {}
    for name in names:
        f = Front(regroup_bin, s.dir, name, s.kc, publish, listen_host="127.0.0.1" if s.standin else "0.0.0.0",
                  env={"HOSTNAME": name})
        undo.callback(f.stop)
        s.fronts[name] = f
    s.front = s.fronts[names[0]]
    undo.callback(register_front(s.remote, s.svc_ns, s.host, s.front.port, s.ca))
    undo.callback(lambda: delete_namespaces(s.remote, s.namespaces) if not s.standin else None)
    wait_for_aggregator(s.remote, f"{s.host}:{s.front.port}")


def make_namespaces(s, *docs):
    apply(s.remote, *docs)
    s.namespaces += [d["metadata"]["name"] for d in docs if d["metadata"]["name"] not in s.namespaces]


@pytest.fixture(scope="module")
def side1(central, workdir, regroup_bin, request):
    """Cluster 1: teams a and b with their own credentials, two replicas."""
    c, s = central, Side()
    s.n, s.cluster_id = 1, "cluster-1"
    with ExitStack() as undo:
        remote_cluster(s, workdir, request, undo, standin=not REAL)
        s.team_a, s.team_b = run_name("team-a"), run_name("team-b")
        # Team a: a token bound to a central Secret (deleting it revokes the
        # token: the rotation test); team b: an inline kubeconfig.
        apply(c.kubectl, secret("team-a-tok-1", c.a, {"bound": "1"}))
        _, token_a = kubeconfig_of(c, "team-a", c.a, "team-a", bound_secret="team-a-tok-1")
        _, token_b = kubeconfig_of(c, "team-b", c.b, "team-b")
        make_namespaces(s, namespace(s.team_a, {TARGET_ANNOTATION: c.a, CREDENTIALS_ANNOTATION: "central-creds"}),
                        namespace(s.team_b, {TARGET_ANNOTATION: c.b, CREDENTIALS_ANNOTATION: "central-kubeconfig"}))
        apply(s.remote, token_secret("central-creds", s.team_a, token_a),
              secret("central-kubeconfig", s.team_b, {"kubeconfig": kubeconfig_text(c.kc, c.b, token_b)}))
        agent_kc, _ = kubeconfig_of(c, "agent", c.home, "agent")
        publish = publish_section(agent_kc, c.home, clusterId=s.cluster_id, leaderElection={
            "namespace": s.svc_ns, "name": LEASE, "leaseSeconds": LEASE_SECONDS})
        serve(s, regroup_bin, undo, publish, REPLICAS)
        yield s


@pytest.fixture(scope="module")
def side2(central, workdir, regroup_bin, request):
    """Cluster 2, into ns-a with the default Secret."""
    c, s = central, Side()
    s.n, s.cluster_id = 2, "cluster-2"
    with ExitStack() as undo:
        remote_cluster(s, workdir, request, undo, standin=True)
        s.apps = "apps"
        make_namespaces(s, namespace(s.apps))
        _, token = kubeconfig_of(c, "cluster2", c.a, "cluster2")
        s.default_secret = token_secret("central-default", s.svc_ns, token)
        apply(s.remote, s.default_secret)
        nobody_kc, _ = kubeconfig_of(c, "nobody", c.home, "nobody")
        publish = publish_section(nobody_kc, c.a, clusterId=s.cluster_id, credentials={
            "defaultSecret": {"namespace": s.svc_ns, "name": "central-default"}})
        serve(s, regroup_bin, undo, publish, ["cluster-2"])
        yield s


@pytest.fixture(scope="module")
def side3(central, workdir, regroup_bin, request):
    """Cluster 3, read-only, over ns-a."""
    c, s = central, Side()
    s.n, s.cluster_id = 3, "cluster-3"
    with ExitStack() as undo:
        remote_cluster(s, workdir, request, undo, standin=True)
        s.mirror = "mirror"
        make_namespaces(s, namespace(s.mirror))
        viewer_kc, _ = kubeconfig_of(c, "viewer", c.a, "viewer")
        serve(s, regroup_bin, undo, publish_section(viewer_kc, c.a, clusterId=s.cluster_id, readOnly=True),
              ["read-only"])
        yield s


# ---- objects ------------------------------------------------------------------------------------

def central_get(c, ns, name):
    got = c.kubectl.run("get", RESOURCE, name, "-n", ns, "-o", "json", check=False)
    return json.loads(got.stdout) if got.returncode == 0 else None


def made(c, side, ns, name, secret_name, password):
    """The requirement `name` created through `side` in remote namespace
    `ns` unless there, and the connection Secret it names written centrally
    (owned by it) unless there; its central object."""
    obj = central_get(c, c.a, name)
    if obj is None:
        side.remote("create", "-n", ns, "-f", "-", input=json.dumps(requirement(ns, name, secret=secret_name)))
        obj = central_get(c, c.a, name)
    if c.kubectl.run("get", "secret", secret_name, "-n", c.a, check=False).returncode != 0:
        write_connection_secret(c.kubectl, c.a, obj, name=secret_name, password=password)
    return obj


@pytest.fixture
def db_a(side1, central):
    """`db-a` in team-a (cluster 1, central ns-a), naming the Secret a-conn."""
    return made(central, side1, side1.team_a, "db-a", "a-conn", "a-pass")


@pytest.fixture
def db_c2(side2, central):
    """`db-c2` in apps (cluster 2, central ns-a), naming c2-conn."""
    return made(central, side2, side2.apps, "db-c2", "c2-conn", "c2-pass")


def names(kubectl, *args):
    return sorted(n.removeprefix(NAME_PREFIX) for n in kubectl("get", "mysql", *args, "-o", "name").split())


def copied(remote, ns, name, password=None):
    """The copy of a connection Secret in the remote namespace (with that
    password, when given), or None."""
    s = remote_secret(remote, ns, name)
    if s and password is not None and s.get("data", {}).get("password") != b64(password):
        return None
    return s


# ---- a. two teams, two credentials -----------------------------------------------------------------

def test_each_team_acts_centrally_with_its_own_credential(side1, central):
    """team-a's objects land in ns-a, team-b's in ns-b: regroup's own
    credential may do nothing there, so each was written with its
    namespace's Secret (a token; an inline kubeconfig)."""
    s, c = side1, central
    out = s.remote("apply", "-n", s.team_a, "-f", "-", input=json.dumps(requirement(s.team_a, "db-a", secret="a-conn")))
    assert out.strip() in (f"{NAME_PREFIX}db-a created", f"{NAME_PREFIX}db-a unchanged"), out
    out = s.remote("apply", "-n", s.team_b, "-f", "-", input=json.dumps(requirement(s.team_b, "db-b", secret="b-conn")))
    assert out.strip() in (f"{NAME_PREFIX}db-b created", f"{NAME_PREFIX}db-b unchanged"), out
    a, b = central_get(c, c.a, "db-a"), central_get(c, c.b, "db-b")
    assert (a["metadata"]["labels"][SOURCE_NS], a["metadata"]["labels"][SOURCE_CLUSTER]) == (s.team_a, "cluster-1")
    assert (b["metadata"]["labels"][SOURCE_NS], b["metadata"]["labels"][SOURCE_CLUSTER]) == (s.team_b, "cluster-1")
    assert central_get(c, c.b, "db-a") is None and central_get(c, c.a, "db-b") is None
    assert names(c.kubectl, "-n", c.home) == []
    # Read back in each remote namespace, each seeing its own only.
    assert names(s.remote, "-n", s.team_a) == ["db-a"]
    assert names(s.remote, "-n", s.team_b) == ["db-b"]
    seen = s.remote.json("get", "mysql", "db-b", "-n", s.team_b)
    assert (seen["metadata"]["namespace"], seen["metadata"]["uid"]) == (s.team_b, b["metadata"]["uid"])
    # Straight to the central cluster, regroup's own credential is refused in ns-a.
    code, status = central_as(c, "agent", f"/apis/{GROUP}/{VERSION}/namespaces/{c.a}/{PLURAL}")
    assert code == 403 and f"system:serviceaccount:{c.home}:agent" in status["message"], status


@pytest.fixture(scope="module")
def broken(side1, central):
    """Two remote namespaces of cluster 1 whose credential is wrong:
    `mixed` goes to ns-b holding team-a's token; `nosecret` names (with the
    Crossplane agent's annotation) a Secret that does not exist. Their
    annotations are removed before they are deleted (else their objects
    could not be deleted through the front, and they would stay
    Terminating)."""
    s, c = side1, central
    b = Side()
    b.mixed, b.nosecret = run_name("mixed"), run_name("nosecret")
    token_a = remote_secret(s.remote, s.team_a, "central-creds")["data"]["token"]
    make_namespaces(s, namespace(b.mixed, {TARGET_ANNOTATION: c.b, CREDENTIALS_ANNOTATION: "borrowed"}),
                    namespace(b.nosecret, {TARGET_ANNOTATION: c.a, AGENT_CREDENTIALS_ANNOTATION: "gone-creds"}))
    borrowed = secret("borrowed", b.mixed, {})
    borrowed["data"] = {"token": token_a}
    apply(s.remote, borrowed)
    yield b
    for ns in (b.mixed, b.nosecret):
        s.remote.run("annotate", "namespace", ns, f"{TARGET_ANNOTATION}-", f"{CREDENTIALS_ANNOTATION}-",
                     f"{AGENT_CREDENTIALS_ANNOTATION}-", check=False)
    time.sleep(5)  # regroup reads a Namespace again after 5 s
    delete_namespaces(s.remote, [b.mixed, b.nosecret])


def test_the_central_rbac_refuses_another_teams_credential(side1, central, broken):
    """`mixed` goes to ns-b with team-a's token: the CENTRAL cluster refuses
    (403, naming team-a's ServiceAccount), though the remote cluster allows
    the caller."""
    s, c = side1, central
    posts = f"POST /apis/{GROUP}/{VERSION}/namespaces/{c.b}/{PLURAL}?"
    before = len(standin_log_lines(c.log, posts))
    err = s.remote.fails("create", "-n", broken.mixed, "-f", "-", input=json.dumps(requirement(broken.mixed, "db-m")))
    assert "Error from server (Forbidden)" in err, err
    assert (f'User "system:serviceaccount:{c.a}:team-a" cannot create resource "{PLURAL}" in API group "{GROUP}" '
            f'in the namespace "{c.b}"') in err, err
    err = s.remote.fails("get", "mysql", "-n", broken.mixed)
    assert (f'User "system:serviceaccount:{c.a}:team-a" cannot list resource "{PLURAL}" in API group "{GROUP}" '
            f'in the namespace "{c.b}"') in err, err
    if c.log:  # the refusal is the central apiserver's own answer
        sent = standin_log_lines(c.log, posts)[before:]
        assert len(sent) == 1 and sent[0].endswith(" 403"), sent
    assert central_get(c, c.b, "db-m") is None


def test_a_missing_credentials_secret_is_a_403_naming_it(side1, central, broken):
    """`nosecret` names gone-creds (agent.crossplane.io/credentials-secret-name):
    refused by regroup, naming it; never a fallback to another credential,
    and nothing is asked of the central cluster for it."""
    s, c = side1, central
    collection = f"/apis/{GROUP}/{VERSION}/namespaces/{c.a}/{PLURAL}"
    # What nosecret's requests would send (the copier's lists of ns-a, every second, are none of them).
    asked = lambda: [line for line in standin_log_lines(c.log, collection) if line.startswith(  # noqa: E731
        f"POST {collection}?") or f"{collection}/db-" in line or f"source-namespace%3D{broken.nosecret}" in line]
    before = asked()
    why = (f'the credentials Secret {broken.nosecret}/gone-creds does not exist: requests of namespace '
           f'"{broken.nosecret}" act in the central cluster with it only')
    for args in (("create", "-n", broken.nosecret, "-f", "-"), ("apply", "-n", broken.nosecret, "-f", "-")):
        err = s.remote.fails(*args, input=json.dumps(requirement(broken.nosecret, "db-n")))
        assert "Error from server (Forbidden)" in err and why in err, err
    for args in (("get", "mysql", "-n", broken.nosecret), ("get", "mysql", "db-a", "-n", broken.nosecret),
                 ("delete", "mysql", "db-a", "-n", broken.nosecret)):
        err = s.remote.fails(*args)
        assert "Error from server (Forbidden)" in err and why in err, (args, err)
    if c.log:
        assert asked() == before, "a request of nosecret reached the central cluster"
    assert central_get(c, c.a, "db-n") is None
    assert central_get(c, c.a, "db-a")["metadata"]["labels"][SOURCE_NS] == s.team_a


def test_a_list_across_namespaces_passes_over_broken_credentials(side1, central, broken, db_a):
    """A list or watch across every namespace reads each central namespace
    with a credential that goes there: `nosecret`'s missing Secret and
    `mixed`'s refused token give way to team-a's and team-b's, so a
    cluster-wide reader (kubectl -A, the garbage collector, an informer)
    is not broken by one namespace's credential."""
    s, c = side1, central
    if not central_get(c, c.b, "db-b"):
        s.remote("apply", "-n", s.team_b, "-f", "-", input=json.dumps(requirement(s.team_b, "db-b", secret="b-conn")))
    got = s.remote.run("get", "mysql", "-A", "-o", "json", check=False)
    assert got.returncode == 0, got.stderr
    listed = {(i["metadata"]["namespace"], i["metadata"]["name"]) for i in json.loads(got.stdout)["items"]}
    assert {(s.team_a, "db-a"), (s.team_b, "db-b")} <= listed, listed
    w = Stream(s.remote.argv("get", "mysql", "-A", "--watch", "--output-watch-events"), lines=True)
    try:
        seen = []
        w.until(lambda line: line.split()[:3] == ["ADDED", s.team_b, "db-b"], 30, seen)
        set_ready(c.kubectl, c.a, "db-a", "across")
        w.until(lambda line: line.split()[:4] == ["MODIFIED", s.team_a, "db-a", "across"], 30, seen)
    finally:
        w.close()


def test_a_broken_namespace_stops_no_other_namespaces_copies(side1, central, broken, db_a):
    """While `mixed` and `nosecret` can't be read centrally, team-a's
    connection Secret is still copied and follows its changes."""
    s, c = side1, central
    wait_for("a-conn copied into team-a", lambda: copied(s.remote, s.team_a, "a-conn"), timeout=30, interval=0.5)
    write_connection_secret(c.kubectl, c.a, central_get(c, c.a, "db-a"), name="a-conn", password="a-pass-2")
    wait_for("a-conn's new password in team-a", lambda: copied(s.remote, s.team_a, "a-conn", "a-pass-2"),
             timeout=20, interval=0.5)
    copy = copied(s.remote, s.team_a, "a-conn")
    assert copy["metadata"]["annotations"][COPY_OF] == f"{RESOURCE}/db-a"
    assert remote_secret(s.remote, broken.mixed, "a-conn") is None


def test_a_rotated_token_is_followed_within_seconds(side1, central, db_a):
    """team-a's token is revoked (the central Secret it is bound to
    deleted): its requests fail; its remote Secret is given a new token:
    they succeed again within seconds (regroup reads a credentials Secret
    again when older than 5 s)."""
    s, c = side1, central
    assert names(s.remote, "-n", s.team_a) == ["db-a"]
    apply(c.kubectl, secret("team-a-tok-2", c.a, {"bound": "2"}))
    _, new_token = kubeconfig_of(c, "team-a-2", c.a, "team-a", bound_secret="team-a-tok-2")
    c.kubectl("delete", "secret", "team-a-tok-1", "-n", c.a, "--ignore-not-found")

    def refused():
        got = s.remote.run("get", "mysql", "-n", s.team_a, check=False)
        return got.returncode != 0 and got.stderr

    err = wait_for("team-a's requests to fail with the revoked token", refused, timeout=30, interval=0.5)
    assert "Unauthorized" in err, err
    start = time.monotonic()
    apply(s.remote, token_secret("central-creds", s.team_a, new_token))
    wait_for("team-a's requests to act with the new token", lambda: s.remote.run(
        "get", "mysql", "-n", s.team_a, check=False).returncode == 0, timeout=30, interval=0.3)
    took = time.monotonic() - start
    assert took < 10, f"the rotated token was followed after {took:.1f}s"
    out = s.remote("apply", "-n", s.team_a, "-f", "-", input=json.dumps(
        requirement(s.team_a, "db-a", storage=25, secret="a-conn")))
    assert out.strip() == f"{NAME_PREFIX}db-a configured", out
    assert central_get(c, c.a, "db-a")["spec"]["storageGB"] == 25


# ---- b. two remote clusters, one central namespace -----------------------------------------------------

def test_a_name_cluster_1_holds_is_refused_to_cluster_2(side1, side2, central, db_a):
    s2, c = side2, central
    before = central_get(c, c.a, "db-a")
    err = s2.remote.fails("apply", "-n", s2.apps, "-f", "-", input=json.dumps(requirement(s2.apps, "db-a", storage=50)))
    assert "Error from server (AlreadyExists)" in err and "held by another namespace or cluster" in err, err
    err = s2.remote.fails("create", "-n", s2.apps, "-f", "-",
                          input=json.dumps(requirement(s2.apps, "db-a", storage=50)))
    assert "Error from server (AlreadyExists)" in err, err
    err = s2.remote.fails("get", "mysql", "db-a", "-n", s2.apps)
    assert "Error from server (NotFound)" in err and "held in the central cluster by another" in err, err
    err = s2.remote.fails("delete", "mysql", "db-a", "-n", s2.apps)
    assert "Error from server (Conflict)" in err and "regroup never overwrites it" in err, err
    err = s2.remote.fails("patch", "mysql", "db-a", "-n", s2.apps, "--type=merge", "-p", '{"spec":{"storageGB":1}}')
    assert "Error from server (NotFound)" in err, err
    err = s2.remote.fails("apply", "--server-side", "--force-conflicts", "-n", s2.apps, "-f", "-",
                          input=json.dumps(requirement(s2.apps, "db-a", storage=60)))
    # (kubectl words a 409 to an apply as a field conflict)
    assert '"db-a": the name is held in the central cluster by another namespace or cluster; regroup never ' \
        'overwrites it' in err, err
    after = central_get(c, c.a, "db-a")
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["metadata"]["labels"][SOURCE_CLUSTER] == "cluster-1"


def test_a_server_side_apply_that_creates_drops_force(side2, central):
    """docs/publish.md, "The apply window": cluster 2 applies a new name with
    --force-conflicts; regroup's read finds none, so the apply is sent
    without `force` (nothing to force on a create) and carries the source
    labels. The next apply, of an object cluster 2 holds, keeps `force`: it
    takes over a field the central cluster's admin owns (which, unforced,
    conflicts on a real cluster; the stand-in reports no apply conflicts)."""
    s2, c = side2, central
    name = "db-ssa"
    path = f" /apis/{GROUP}/{VERSION}/namespaces/{c.a}/{PLURAL}/{name}?"
    obj = lambda storage: json.dumps(requirement(s2.apps, name, storage=storage, secret="ssa-conn"))  # noqa: E731
    try:
        out = s2.remote("apply", "--server-side", "--force-conflicts", "-n", s2.apps, "-f", "-", input=obj(30))
        assert out.strip() == f"{NAME_PREFIX}{name} serverside-applied", out
        stored = central_get(c, c.a, name)
        labels = stored["metadata"]["labels"]
        assert (labels[SOURCE_NS], labels[SOURCE_CLUSTER], stored["spec"]["storageGB"]) == (s2.apps, "cluster-2", 30)
        c.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=central-admin", "-n", c.a, "-f", "-",
                  input=json.dumps({"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
                                    "metadata": {"name": name, "namespace": c.a},
                                    "spec": {"version": "5.7", "storageGB": 31}}))
        if REAL:
            err = s2.remote.fails("apply", "--server-side", "-n", s2.apps, "-f", "-", input=obj(32))
            assert "Apply failed with 1 conflict" in err and "central-admin" in err and ".spec.storageGB" in err, err
        s2.remote("apply", "--server-side", "--force-conflicts", "-n", s2.apps, "-f", "-", input=obj(32))
        assert central_get(c, c.a, name)["spec"]["storageGB"] == 32
        if c.log:  # what reached the central cluster: kubectl's two applies through regroup
            sent = [line for line in standin_log_lines(c.log, path)
                    if line.startswith("PATCH ") and "fieldManager=kubectl" in line]
            assert len(sent) == 2 and "force=" not in sent[0] and "force=true" in sent[1], sent
    finally:
        s2.remote.run("delete", "mysql", name, "-n", s2.apps, "--ignore-not-found", check=False)


def test_each_cluster_lists_and_watches_only_its_own(side1, side2, central, db_a, db_c2):
    s1, s2, c = side1, side2, central
    assert names(c.kubectl, "-n", c.a) == ["db-a", "db-c2"]
    assert names(s1.remote, "-n", s1.team_a) == ["db-a"]
    assert names(s2.remote, "-n", s2.apps) == ["db-c2"]
    every = s2.remote.json("get", "mysql", "-A")["items"]
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in every] == [(s2.apps, "db-c2")]
    every = s1.remote.json("get", "mysql", "-A")["items"]
    assert (s2.apps, "db-c2") not in [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in every]
    assert "db-c2" not in [i["metadata"]["name"] for i in every]
    set_ready(c.kubectl, c.a, "db-a", "one")
    set_ready(c.kubectl, c.a, "db-c2", "two")
    w1 = Stream(s1.remote.argv("get", "mysql", "-n", s1.team_a, "--watch", "--output-watch-events"), lines=True)
    w2 = Stream(s2.remote.argv("get", "mysql", "-n", s2.apps, "--watch", "--output-watch-events"), lines=True)
    try:
        seen1, seen2 = [], []
        w1.until(lambda line: line.split()[:3] == ["ADDED", "db-a", "one"], 30, seen1)
        w2.until(lambda line: line.split()[:3] == ["ADDED", "db-c2", "two"], 30, seen2)
        # In this order: each watch's last event comes after the other cluster's changes.
        s2.remote("apply", "-n", s2.apps, "-f", "-", input=json.dumps(requirement(s2.apps, "db-c2-w", secret="w-conn")))
        set_ready(c.kubectl, c.a, "db-a", "one-more")
        set_ready(c.kubectl, c.a, "db-c2-w", "two-more")
        w1.until(lambda line: line.split()[:3] == ["MODIFIED", "db-a", "one-more"], 30, seen1)
        w2.until(lambda line: line.split()[:3] == ["MODIFIED", "db-c2-w", "two-more"], 30, seen2)
        assert not [line for line in seen1 if "db-c2" in line], seen1
        assert not [line for line in seen2 if "db-a " in line + " "], seen2
        assert any(line.split()[:2] == ["ADDED", "db-c2-w"] for line in seen2), seen2
    finally:
        w1.close()
        w2.close()
        s2.remote.run("delete", "mysql", "db-c2-w", "-n", s2.apps, "--ignore-not-found", check=False)


def secret_names(kubectl):
    """Every Secret of a cluster: (namespace, name)."""
    items = kubectl.json("get", "secret", "-A")["items"]
    return {(i["metadata"]["namespace"], i["metadata"]["name"]) for i in items}


def test_connection_secrets_go_only_to_the_cluster_whose_object_names_them(side1, side2, central, db_a, db_c2):
    s1, s2 = side1, side2
    wait_for("a-conn in cluster 1's team-a", lambda: copied(s1.remote, s1.team_a, "a-conn"), timeout=30, interval=0.5)
    c2 = wait_for("c2-conn in cluster 2's apps", lambda: copied(s2.remote, s2.apps, "c2-conn"), timeout=30,
                  interval=0.5)
    assert c2["data"]["password"] == b64("c2-pass")
    assert c2["metadata"]["annotations"][COPY_OF] == f"{RESOURCE}/db-c2"
    time.sleep(3)  # three more passes of each copier
    assert not {n for _, n in secret_names(s2.remote)} & {"a-conn", "b-conn"}, "cluster 1's Secret in cluster 2"
    assert "c2-conn" not in {n for _, n in secret_names(s1.remote)}, "cluster 2's Secret in cluster 1"
    # Only apps of cluster 2 has it (its other namespaces map to ns-a too, but hold no object naming it).
    assert [ns for ns, n in secret_names(s2.remote) if n == "c2-conn"] == [s2.apps]


def test_deleting_cluster_2s_objects_never_touches_cluster_1s(side1, side2, central, db_a, db_c2):
    s1, s2, c = side1, side2, central
    wait_for("c2-conn in cluster 2's apps", lambda: copied(s2.remote, s2.apps, "c2-conn"), timeout=30, interval=0.5)
    before = central_get(c, c.a, "db-a")
    out = s2.remote("delete", "mysql", "db-c2", "-n", s2.apps)
    assert "deleted" in out, out
    assert central_get(c, c.a, "db-c2") is None
    wait_for("c2-conn's copy to go with its object", lambda: remote_secret(s2.remote, s2.apps, "c2-conn") is None,
             timeout=30, interval=0.5)
    # What the namespace controller sends: a deletecollection in apps, narrowed to cluster 2's objects.
    s2.remote("apply", "-n", s2.apps, "-f", "-", input=json.dumps(requirement(s2.apps, "db-c2-x", secret="x-conn")))
    s2.remote("delete", "--raw", f"/apis/{GROUP}/{VERSION}/namespaces/{s2.apps}/{PLURAL}")
    assert names(c.kubectl, "-n", c.a) == ["db-a"]
    after = central_get(c, c.a, "db-a")
    assert (after["metadata"]["uid"], after["metadata"]["resourceVersion"]) == (
        before["metadata"]["uid"], before["metadata"]["resourceVersion"])
    time.sleep(2)
    assert copied(s1.remote, s1.team_a, "a-conn") is not None, "cluster 1's copy went with cluster 2's object"
    assert names(s1.remote, "-n", s1.team_a) == ["db-a"]


# ---- c. replicas: one copier, elected with a Lease -------------------------------------------------------

def lease(s):
    got = s.remote.run("get", "--raw", f"/apis/coordination.k8s.io/v1/namespaces/{s.svc_ns}/leases/{LEASE}",
                       check=False)
    return json.loads(got.stdout)["spec"] if got.returncode == 0 else None


def holder(s):
    """The replica whose identity holds the Lease (or None)."""
    spec = lease(s) or {}
    who = (spec.get("holderIdentity") or "").split("_")[0]
    return who if who in s.fronts else None


def copies_written(front, since=0):
    """How many copies a replica says it wrote (its log, after its first
    `since` lines)."""
    return sum(int(line.split("copied=")[1].split()[0]) for line in front.text().splitlines()[since:]
               if "connection secrets brought in line" in line)


def test_one_replica_holds_the_lease_and_copies(side1, db_a):
    s = side1
    who = wait_for("a replica to hold the Lease", lambda: holder(s), timeout=30)
    spec = lease(s)
    assert spec["leaseDurationSeconds"] == LEASE_SECONDS
    other = next(r for r in REPLICAS if r != who)
    assert "leading=true" in s.fronts[who].text()
    assert "leading=true" not in s.fronts[other].text(), "both replicas led"
    assert copies_written(s.fronts[other]) == 0, "the replica without the Lease copied"
    wait_for("a-conn copied into team-a", lambda: copied(s.remote, s.team_a, "a-conn"), timeout=30, interval=0.5)
    # Still the same holder a few renewals later.
    time.sleep(LEASE_SECONDS)
    assert holder(s) == who


def use_front(s, front):
    """The Service's Endpoints name this replica's front (and the remote
    cluster reaches it)."""
    if s.front is not front:
        s.front = front
        point_endpoints(s.remote, s.svc_ns, s.host, front.port)
        wait_for_aggregator(s.remote, f"{s.host}:{front.port}")


def log_lines_since(front, n):
    """A replica's log lines after its first `n`."""
    return front.text().splitlines()[n:]


def test_a_paused_holder_copies_nothing_once_its_lease_ran_out(side1, central, db_a):
    """The holder stopped (SIGSTOP: a long pause, a partition) longer than
    the Lease: the other replica takes it and copies. The holder, resumed,
    must not copy even once on its old lease (the split brain a Lease is
    for): a change written centrally just before it resumes is copied by
    the new holder alone."""
    s, c = side1, central
    who = wait_for("a replica to hold the Lease", lambda: holder(s), timeout=30)
    other = next(r for r in REPLICAS if r != who)
    if s.fronts[other].proc.poll() is not None or s.fronts[who].proc.poll() is not None:
        pytest.skip("a replica was killed before (this test ran after the SIGKILL one)")
    wait_for("a-conn copied into team-a", lambda: copied(s.remote, s.team_a, "a-conn"), timeout=30, interval=0.5)
    paused = s.fronts[who]
    use_front(s, s.fronts[other])  # the front of the paused one would not answer the aggregator
    start = len(s.fronts[other].text().splitlines())
    os.kill(paused.proc.pid, signal.SIGSTOP)
    try:
        wait_for("the other replica to take the Lease", lambda: holder(s) == other, timeout=30, interval=0.3)
        wait_for("the new holder to say so", lambda: "leading=true" in "\n".join(
            log_lines_since(s.fronts[other], start)), timeout=10)
        seen = len(paused.text().splitlines())
        write_connection_secret(c.kubectl, c.a, central_get(c, c.a, "db-a"), name="a-conn", password="while-paused")
    finally:
        os.kill(paused.proc.pid, signal.SIGCONT)
    wait_for("the change copied", lambda: copied(s.remote, s.team_a, "a-conn", "while-paused"), timeout=20,
             interval=0.3)
    time.sleep(LEASE_SECONDS)  # the resumed replica's rounds: it sees the Lease is another's
    after = log_lines_since(paused, seen)
    assert not [line for line in after if "connection secrets brought in line" in line], after
    assert [line for line in after if "leading=false" in line], after
    assert holder(s) == other
    # The new holder copied the change (its own count).
    assert copies_written(s.fronts[other]) >= 1


def test_the_lease_passes_when_its_holder_is_killed_and_copies_go_on(side1, central, db_a):
    s, c = side1, central
    who = wait_for("a replica to hold the Lease", lambda: holder(s), timeout=30)
    survivor = next(r for r in REPLICAS if r != who)
    if s.fronts[survivor].proc.poll() is not None:
        pytest.skip("the other replica was killed before (this test ran twice)")
    transitions = lease(s).get("leaseTransitions") or 0
    w = Stream(s.remote.argv("get", "secret", "-n", s.team_a, "-l", COPY_LABEL, "--watch", "--output-watch-events",
                             "-o", "json"))
    try:
        seen = []
        start = len(s.fronts[survivor].text().splitlines())
        w.until(lambda e: e["object"]["metadata"]["name"] == "a-conn", 30, seen)
        time.sleep(2)
        assert copies_written(s.fronts[survivor], start) == 0, "the replica without the Lease copied"
        assert "leading=true" not in "\n".join(log_lines_since(s.fronts[survivor], start))
        os.kill(s.fronts[who].proc.pid, signal.SIGKILL)
        s.fronts[who].proc.wait(5)
        killed = time.monotonic()
        use_front(s, s.fronts[survivor])  # what the endpoints controller does for a pod that is gone
        wait_for("the other replica to take the Lease", lambda: holder(s) == survivor, timeout=30, interval=0.3)
        took = time.monotonic() - killed
        assert took < LEASE_SECONDS + 4, f"the Lease was taken over {took:.1f}s after its holder died"
        assert (lease(s).get("leaseTransitions") or 0) == transitions + 1
        # A change of a copied Secret and a new object's Secret: copied by the survivor.
        write_connection_secret(c.kubectl, c.a, central_get(c, c.a, "db-a"), name="a-conn", password="after-kill")
        s.remote("apply", "-n", s.team_a, "-f", "-", input=json.dumps(requirement(s.team_a, "db-a2", secret="a2-conn")))
        write_connection_secret(c.kubectl, c.a, central_get(c, c.a, "db-a2"), name="a2-conn", password="a2-pass")
        w.until(lambda e: e["object"]["metadata"]["name"] == "a-conn" and e["object"]["data"]["password"] ==
                b64("after-kill"), 30, seen)
        w.until(lambda e: e["object"]["metadata"]["name"] == "a2-conn", 30, seen)
        time.sleep(3)  # three more passes: nothing more is written
        while True:
            try:
                e = w.docs.get_nowait()
            except queue.Empty:
                break
            if e is not None:
                seen.append(e)
        events = [(e["type"], e["object"]["metadata"]["name"], e["object"]["metadata"]["resourceVersion"])
                  for e in seen if e["object"]["metadata"]["name"] in ("a-conn", "a2-conn")]
        # a-conn: its state when the watch began, then one write; a2-conn: one create.
        assert [(t, n) for t, n, _ in events] == [("ADDED", "a-conn"), ("MODIFIED", "a-conn"),
                                                   ("ADDED", "a2-conn")], events
        assert copies_written(s.fronts[survivor], start) == 2, s.fronts[survivor].text()[-3000:]
        if s.log:  # the remote cluster's own count: one write each, none refused
            for method, path in (("PUT", f"/api/v1/namespaces/{s.team_a}/secrets/a-conn"),
                                 ("POST", f"/api/v1/namespaces/{s.team_a}/secrets")):
                lines = standin_log_lines(s.log, f"{method} {path} ")
                assert not [line for line in lines if not line.endswith((" 200", " 201"))], lines
        assert "leading=true" in "\n".join(log_lines_since(s.fronts[survivor], start))
    finally:
        w.close()
        s.remote.run("delete", "mysql", "db-a2", "-n", s.team_a, "--ignore-not-found", check=False)


# ---- d. read-only federation ------------------------------------------------------------------------------

def test_a_read_only_side_reads_every_sources_objects(side3, central, db_a, db_c2):
    s, c = side3, central
    assert names(s.remote, "-n", s.mirror) == ["db-a", "db-c2"]
    items = s.remote.json("get", "mysql", "-n", s.mirror)["items"]
    assert {(i["metadata"]["namespace"], i["metadata"]["labels"][SOURCE_CLUSTER]) for i in items} == {
        (s.mirror, "cluster-1"), (s.mirror, "cluster-2")}
    one = s.remote.json("get", "mysql", "db-a", "-n", s.mirror)
    assert (one["metadata"]["namespace"], one["metadata"]["uid"]) == (s.mirror, db_a["metadata"]["uid"])
    # Across namespaces, each object is shown once, in the first remote namespace that maps to ns-a
    # (every namespace of cluster 3 does).
    every = s.remote.json("get", "mysql", "-A")["items"]
    first = sorted(s.remote("get", "namespaces", "-o", "name").replace("namespace/", "").split())[0]
    assert sorted((i["metadata"]["namespace"], i["metadata"]["name"]) for i in every) == [
        (first, "db-a"), (first, "db-c2")]
    w = Stream(s.remote.argv("get", "mysql", "-n", s.mirror, "--watch", "--output-watch-events"), lines=True)
    try:
        seen = []
        w.until(lambda line: line.split()[:2] == ["ADDED", "db-c2"], 30, seen)
        set_ready(c.kubectl, c.a, "db-c2", "mirrored")
        w.until(lambda line: line.split()[:3] == ["MODIFIED", "db-c2", "mirrored"], 30, seen)
    finally:
        w.close()


def test_a_read_only_side_receives_every_objects_connection_secrets(side3, central, db_a, db_c2):
    s, c = side3, central
    for name, of in (("a-conn", "db-a"), ("c2-conn", "db-c2")):
        copy = wait_for(f"{name} copied into mirror", lambda: copied(s.remote, s.mirror, name), timeout=30,
                        interval=0.5)
        central_data = c.kubectl.json("get", "secret", name, "-n", c.a)["data"]
        assert copy["data"] == central_data
        assert copy["metadata"]["annotations"][COPY_OF] == f"{RESOURCE}/{of}"


def test_a_read_only_side_refuses_every_write(side3, central, db_a):
    s, c = side3, central
    before = central_get(c, c.a, "db-a")
    why = f"{PLURAL}.{GROUP} are read-only here (publish.readOnly)"
    writes = [("create", "-n", s.mirror, "-f", "-"), ("apply", "-n", s.mirror, "-f", "-"),
              ("apply", "--server-side", "-n", s.mirror, "-f", "-")]
    for args in writes:
        err = s.remote.fails(*args, input=json.dumps(requirement(s.mirror, "db-a", storage=70)))
        assert "Error from server (Forbidden)" in err and why in err, (args, err)
    for args in (("patch", "mysql", "db-a", "-n", s.mirror, "--type=merge", "-p", '{"spec":{"storageGB":71}}'),
                 ("label", "mysql", "db-a", "-n", s.mirror, "x=y"),
                 ("delete", "mysql", "db-a", "-n", s.mirror),
                 ("delete", "--raw", f"/apis/{GROUP}/{VERSION}/namespaces/{s.mirror}/{PLURAL}")):
        err = s.remote.fails(*args)
        assert "Forbidden" in err and why in err, (args, err)
    after = central_get(c, c.a, "db-a")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert central_get(c, c.a, "db-a")["metadata"]["labels"].get("x") is None
