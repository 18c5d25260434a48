"""WatchList (client-go 1.35+ informers list by watching, issue #43) of the
kinds regroup gives per-copy names, in protobuf and JSON, through the real
binary and straight to the upstream.

An informer asks `GET <collection>?watch=1&sendInitialEvents=true&
resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true` (protobuf for
built-in kinds). The apiserver sends one ADDED per object, then exactly one
BOOKMARK: an object of the watched kind with no name, only
`metadata.resourceVersion` and the annotation `k8s.io/initial-events-end:
"true"`. regroup once dropped that protobuf bookmark for ClusterRoles and
their kin (a nameless object read as another copy's), and the informer
waited forever.

Through regroup (kinds ClusterRole, ClusterRoleBinding, Validating- and
MutatingWebhookConfiguration, whose names regroup prefixes, and ConfigMap,
whose it does not): another copy's object is created straight on the
cluster, then this copy's through regroup; each time the initial ADDED
events are exactly, by name, what a plain LIST through regroup returns, and
the bookmark comes once, right after them, also when regroup hides every
object of the kind. Straight to the upstream, the same checks tell a
stand-in bug from a proxy bug; against a real cluster (REGROUP_E2E_KUBECONFIG)
they pin what the stand-in mimics. Protobuf is read with the small decoder
below, not with the stand-in's encoder (e2e/standin/protobuf.py), which is
compared byte for byte with kube-apiserver 1.24 captures.

Stand-in mode runs its own stand-in and regroup (default configuration:
`names:` derived from the rules), so a kind is empty when a test says so;
against a real cluster the session's regroup, per-run names, everything
deleted at the end."""
import json
import uuid
from pathlib import Path

import pytest

from conftest import start_regroup, start_standin
from e2e_support import DIRECT, INITIAL_EVENTS_END, ORIG_GROUP, REAL, REPO, stop, write_kubeconfig

RUN = uuid.uuid4().hex[:6]
PROTOBUF = "application/vnd.kubernetes.protobuf"
ACCEPT = {"protobuf": f"{PROTOBUF};type=watch", "json": "application/json"}
LIST_ACCEPT = {"protobuf": f"{PROTOBUF}, application/json", "json": "application/json"}
WATCH_LIST = [("watch", "1"), ("sendInitialEvents", "true"), ("resourceVersionMatch", "NotOlderThan"),
              ("allowWatchBookmarks", "true")]
TIMEOUT = 2 if REAL else 1  # timeoutSeconds: the server ends each watch then
FORMATS = ("protobuf", "json")

through_regroup = pytest.mark.skipif(DIRECT, reason="REGROUP_E2E_DIRECT: no regroup, so no names renamed or hidden")


class Kind:
    def __init__(self, kind, group, plural, named):
        self.kind, self.group, self.plural, self.named = kind, group, plural, named
        self.api_version = f"{group}/v1" if group else "v1"

    def path(self, ns, name=None):
        base = f"/apis/{self.group}/v1" if self.group else f"/api/v1/namespaces/{ns}"
        return f"{base}/{self.plural}" + (f"/{name}" if name else "")

    def manifest(self, name, group):
        """An object of this kind named `name` whose references name `group`."""
        obj = {"apiVersion": self.api_version, "kind": self.kind, "metadata": {"name": name,
                                                                            "labels": {"e2e-run": RUN}}}
        if self.kind == "ClusterRole":
            obj["rules"] = [{"apiGroups": [group], "resources": ["foos"], "verbs": ["get", "list", "watch"]}]
        elif self.kind == "ClusterRoleBinding":
            obj["roleRef"] = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}
            obj["subjects"] = [{"kind": "ServiceAccount", "name": "foo-controller", "namespace": "default"}]
        elif self.kind.endswith("WebhookConfiguration"):  # matches nothing: no such resource
            obj["webhooks"] = [{
                "name": "watch-list.example.com", "failurePolicy": "Ignore", "sideEffects": "None",
                "admissionReviewVersions": ["v1"], "clientConfig": {"url": "https://127.0.0.1:9/validate"},
                "rules": [{"apiGroups": [group], "apiVersions": ["v1alpha1"], "operations": ["CREATE"],
                           "resources": ["no-such-resource"]}]}]
        else:
            obj["data"] = {"run": RUN}
        return obj

    def __repr__(self):
        return self.kind


KINDS = [Kind("ClusterRole", "rbac.authorization.k8s.io", "clusterroles", True),
         Kind("ClusterRoleBinding", "rbac.authorization.k8s.io", "clusterrolebindings", True),
         Kind("ValidatingWebhookConfiguration", "admissionregistration.k8s.io", "validatingwebhookconfigurations",
              True),
         Kind("MutatingWebhookConfiguration", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", True),
         Kind("ConfigMap", "", "configmaps", False)]
KIND_IDS = [k.kind for k in KINDS]


# ---- HTTP, through the Python client's ApiClient (its TLS and credentials) ---------------

class Api:
    def __init__(self, kubeconfig):
        from kubernetes import config
        self.client = config.new_client_from_config(config_file=str(kubeconfig))

    def request(self, method, path, query=(), accept="application/json", body=None, timeout=30):
        """(status, Content-Type, body bytes); an error status is returned, not raised."""
        from kubernetes.client.rest import ApiException
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            r = self.client.call_api(path, method, query_params=list(query), header_params=headers, body=body,
                                     auth_settings=["BearerToken"], _preload_content=False,
                                     _return_http_data_only=True, _request_timeout=timeout)
            return r.status, r.headers.get("Content-Type") or "", r.data
        except ApiException as e:
            data = e.body.encode() if isinstance(e.body, str) else (e.body or b"")
            return e.status, "", data

    def create(self, kind, ns, obj):
        status, _, body = self.request("POST", kind.path(ns), body=obj)
        assert status == 201, (status, body[:500])
        return json.loads(body)

    def delete(self, kind, ns, name):
        self.request("DELETE", kind.path(ns, name))

    def list_names(self, kind, ns, fmt="json"):
        status, ctype, body = self.request("GET", kind.path(ns), accept=LIST_ACCEPT[fmt])
        assert status == 200, (status, body[:500])
        if fmt == "protobuf":
            assert ctype.startswith(PROTOBUF), ctype
            return pb_list_names(body, kind)
        assert ctype.startswith("application/json"), ctype
        return [i["metadata"]["name"] for i in json.loads(body)["items"] or []]

    def watch_list(self, kind, ns, fmt):
        """The events of a watch-list read to its end (timeoutSeconds), as
        dicts: type, apiVersion, kind, name, resourceVersion, annotations."""
        status, ctype, body = self.request("GET", kind.path(ns), WATCH_LIST + [("timeoutSeconds", str(TIMEOUT))],
                                           accept=ACCEPT[fmt], timeout=TIMEOUT + 30)
        assert status == 200, (status, body[:500])
        if fmt == "protobuf":
            assert ctype.split(";")[0].strip() == PROTOBUF and "stream=watch" in ctype, ctype
            return [pb_event(f) for f in pb_frames(body)]
        assert ctype.startswith("application/json"), ctype
        return [json_event(json.loads(line)) for line in body.splitlines() if line.strip()]


# ---- a minimal protobuf reader, independent of the stand-in's encoder --------------------

def _varint(b, i):
    n = shift = 0
    while True:
        c = b[i]
        i += 1
        n |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return n, i


def pb_fields(b):
    """[(number, value)]: varints as ints, length-delimited fields as bytes."""
    out, i = [], 0
    while i < len(b):
        k, i = _varint(b, i)
        number, wire = k >> 3, k & 7
        if wire == 0:
            v, i = _varint(b, i)
        elif wire == 2:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        elif wire in (1, 5):
            v, i = b[i:i + (8 if wire == 1 else 4)], i + (8 if wire == 1 else 4)
        else:
            raise AssertionError(f"wire type {wire} at {i}")
        out.append((number, v))
    return out


def pb_get(b, number, default=b""):
    vals = [v for n, v in pb_fields(b) if n == number]
    return vals[-1] if vals else default


def pb_unknown(raw):
    """The Kubernetes envelope: (apiVersion, kind, object bytes)."""
    assert raw[:4] == b"k8s\x00", raw[:16]
    type_meta = pb_get(raw[4:], 1)
    return pb_get(type_meta, 1).decode(), pb_get(type_meta, 2).decode(), pb_get(raw[4:], 2)


def pb_meta(meta):
    """ObjectMeta: name 1, resourceVersion 6, annotations 12 ({1 key, 2 value})."""
    annotations = {}
    for n, entry in pb_fields(meta):
        if n == 12:
            annotations[pb_get(entry, 1).decode()] = pb_get(entry, 2).decode()
    return pb_get(meta, 1).decode(), pb_get(meta, 6).decode(), annotations


def pb_frames(body):
    frames, at = [], 0
    while at < len(body):
        n = int.from_bytes(body[at:at + 4], "big")
        frames.append(body[at + 4:at + 4 + n])
        at += 4 + n
    assert at == len(body), "the length-prefixed frames tile the body"
    return frames


def pb_event(frame):
    """WatchEvent {1 type, 2 RawExtension {1 raw}}; the object's metadata is its field 1."""
    api_version, kind, obj = pb_unknown(pb_get(pb_get(frame, 2), 1))
    name, rv, annotations = pb_meta(pb_get(obj, 1))
    return {"type": pb_get(frame, 1).decode(), "apiVersion": api_version, "kind": kind, "name": name,
            "resourceVersion": rv, "annotations": annotations}


def pb_list_names(body, kind):
    """{Kind}List {1 ListMeta, 2 items}: the items' names."""
    api_version, list_kind, lst = pb_unknown(body)
    assert (api_version, list_kind) == (kind.api_version, kind.kind + "List")
    return [pb_meta(pb_get(item, 1))[0] for n, item in pb_fields(lst) if n == 2]


def json_event(e):
    obj = e.get("object") or {}
    md = obj.get("metadata") or {}
    return {"type": e.get("type"), "apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
            "name": md.get("name", ""), "resourceVersion": md.get("resourceVersion", ""),
            "annotations": md.get("annotations") or {}}


def initial_names(events, kind):
    """The names of the initial ADDED events; asserts they are followed by
    exactly one initial-events-end BOOKMARK shaped as the apiserver sends it."""
    ends = [i for i, e in enumerate(events)
            if e["type"] == "BOOKMARK" and e["annotations"].get(INITIAL_EVENTS_END) == "true"]
    summary = [(e["type"], e["name"]) for e in events]
    assert len(ends) == 1, f"{kind}: {len(ends)} initial-events-end bookmarks in {summary}"
    end = ends[0]
    assert all(e["type"] == "ADDED" for e in events[:end]), f"{kind}: not only ADDED before the bookmark: {summary}"
    bookmark = events[end]
    assert (bookmark["apiVersion"], bookmark["kind"]) == (kind.api_version, kind.kind), bookmark
    assert bookmark["name"] == "" and bookmark["annotations"] == {INITIAL_EVENTS_END: "true"}, bookmark
    assert bookmark["resourceVersion"], bookmark
    for e in events[:end]:
        assert (e["apiVersion"], e["kind"]) == (kind.api_version, kind.kind), e
    names = [e["name"] for e in events[:end]]
    assert len(names) == len(set(names)), f"{kind}: an object sent twice: {names}"
    return names


# ---- fixtures -----------------------------------------------------------------------------

class Env:
    def __init__(self, upstream, app, ns, fresh):
        self.upstream, self.app, self.ns, self.fresh = upstream, app, ns, fresh


@pytest.fixture(scope="module")
def env(request, workdir, config_file):
    """Stand-in mode: a stand-in of its own (seeds in namespace `wl`) and,
    unless REGROUP_E2E_DIRECT, a regroup in front of it with the suite's
    configuration. A real cluster: the session's upstream and regroup."""
    if REAL:
        upstream = request.getfixturevalue("upstream")
        app = None if DIRECT else Api(request.getfixturevalue("regroup"))
        yield Env(Api(upstream.kubeconfig), app, upstream.namespace, fresh=False)
        return
    procs = []
    try:
        proc, port, _ = start_standin(workdir, "watch-list-upstream", "--seed-namespace", "wl")
        procs.append(proc)
        kc = write_kubeconfig(workdir / "watch-list-upstream.kubeconfig", f"http://127.0.0.1:{port}", "wl")
        app = None
        if not DIRECT:
            proc, port, _ = start_regroup(request.getfixturevalue("regroup_bin"), workdir, "watch-list",
                                          config_file, kc)
            procs.append(proc)
            app = Api(write_kubeconfig(workdir / "watch-list-app.kubeconfig", f"http://127.0.0.1:{port}", "wl"))
        yield Env(Api(kc), app, "wl", fresh=True)
    finally:
        for p in procs:
            stop(p)


@pytest.fixture
def made(env):
    """Deletes, at the end of a test, what it created: (Api, kind, name)."""
    objs = []
    yield objs
    for api, kind, name in reversed(objs):
        api.delete(kind, env.ns, name)


def other_copys(kind, fmt):
    """A name another copy of the app (prefix `other<run>-`) has on the cluster."""
    return f"other{RUN}-wl-{kind.plural[:-1]}-{fmt}"


# ---- the stand-in's encoder against kube-apiserver's bytes --------------------------------

@pytest.mark.skipif(REAL, reason="checks the stand-in's protobuf encoder against captures of a real apiserver")
def test_the_standins_protobuf_is_kube_apiservers_byte_for_byte():
    """e2e/standin/protobuf.py encodes the captured JSON objects, lists and
    a watch (with its BOOKMARKs) into exactly the protobuf bytes kube-apiserver
    1.24 sent for them (testdata/kube-1.24: the same objects asked for in both
    forms; 1.24 still wrote ObjectMeta's clusterName, hence kube_1_24)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("standin_protobuf", REPO / "e2e" / "standin" / "protobuf.py")
    pb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pb)
    data = Path(REPO / "testdata" / "kube-1.24" / "renamed")

    def body(case):
        return (data / case / "response.body").read_bytes()

    for js, proto in (("085-get-clusterrole-json", "086-get-clusterrole-protobuf"),
                      ("090-get-vwc-json", "091-get-vwc-protobuf"),
                      ("046-get-configmap-json", "047-get-configmap-protobuf"),
                      ("055-get-role-json", "056-get-role-protobuf"),
                      ("060-get-rolebinding-json", "061-get-rolebinding-protobuf")):
        assert pb.encode_object(json.loads(body(js)), kube_1_24=True) == body(proto), proto
    for js, proto in (("161-list-clusterrole-json", "162-list-clusterrole-protobuf"),
                      ("166-list-vwc-json", "167-list-vwc-protobuf"),
                      ("126-list-configmap-json", "127-list-configmap-protobuf"),
                      ("136-list-rolebinding-json", "137-list-rolebinding-protobuf")):
        lst = json.loads(body(js))
        got = pb.encode_list(lst["apiVersion"], lst["kind"].removesuffix("List"), lst["metadata"]["resourceVersion"],
                             lst["items"], kube_1_24=True)
        assert got == body(proto), proto
    events = [json.loads(line) for line in body("253-watch-configmap-json").splitlines() if line.strip()]
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "BOOKMARK"]
    got = b"".join(pb.watch_frame(e["type"], e["object"], kube_1_24=True) for e in events)
    assert got == body("254-watch-configmap-protobuf")


# ---- straight to the upstream (no regroup): the stand-in, or a real cluster ---------------

@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", KINDS, ids=KIND_IDS)
def test_upstream_watch_list_sends_every_object_then_one_bookmark(env, made, kind, fmt):
    name = f"wl{RUN}-direct-{fmt}"
    env.upstream.create(kind, env.ns, kind.manifest(name, "example.com"))
    made.append((env.upstream, kind, name))
    listed = env.upstream.list_names(kind, env.ns)
    assert name in listed
    names = initial_names(env.upstream.watch_list(kind, env.ns, fmt), kind)
    assert sorted(names) == sorted(listed)
    if fmt == "protobuf":  # a protobuf LIST names the same objects
        assert sorted(env.upstream.list_names(kind, env.ns, "protobuf")) == sorted(listed)


@pytest.mark.skipif(REAL, reason="a real cluster's kinds are not empty (through regroup, hidden ones are: "
                                 "test_watch_list_through_regroup)")
@pytest.mark.parametrize("fmt", FORMATS)
def test_upstream_watch_list_of_an_empty_kind_is_just_the_bookmark(env, fmt):
    kind = next(k for k in KINDS if k.kind == "MutatingWebhookConfiguration")
    assert env.fresh and env.upstream.list_names(kind, env.ns) == []
    assert initial_names(env.upstream.watch_list(kind, env.ns, fmt), kind) == []


@pytest.mark.skipif(REAL, reason="the stand-in's metadata-only list; a real cluster's kinds are not empty")
def test_upstream_empty_metadata_only_list_has_null_items(env):
    """kube-apiserver 1.36.2 answers an empty PartialObjectMetadataList with
    `"items": null` (issue #43); a full JSON list's empty items are `[]`."""
    kind = next(k for k in KINDS if k.kind == "MutatingWebhookConfiguration")
    status, _, body = env.upstream.request("GET", kind.path(env.ns),
                                           accept="application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
    lst = json.loads(body)
    assert (status, lst["kind"], lst["items"]) == (200, "PartialObjectMetadataList", None), body
    status, _, body = env.upstream.request("GET", kind.path(env.ns))
    assert (status, json.loads(body)["items"]) == (200, [])


# ---- through regroup ----------------------------------------------------------------------

@through_regroup
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", KINDS, ids=KIND_IDS)
def test_watch_list_through_regroup(env, made, kind, fmt):
    """Another copy's object on the cluster (hidden from this copy, so in
    stand-in mode the kind looks empty through regroup), then this copy's
    created through regroup (prefixed on the cluster): each time the initial
    events are exactly the LIST through regroup, and the bookmark comes once,
    right after them."""
    app, up = env.app, env.upstream
    theirs = other_copys(kind, fmt)
    up.create(kind, env.ns, kind.manifest(theirs, "samplecontroller.other.example.com"))
    made.append((up, kind, theirs))

    listed = app.list_names(kind, env.ns)
    names = initial_names(app.watch_list(kind, env.ns, fmt), kind)
    assert sorted(names) == sorted(listed), (names, listed)
    if kind.named:
        assert not any(theirs in n for n in names), names
        if env.fresh:  # only the other copy's object exists: all hidden, the bookmark alone
            assert names == []

    ours = f"wl{RUN}-{fmt}"
    created = app.create(kind, env.ns, kind.manifest(ours, ORIG_GROUP))
    assert created["metadata"]["name"] == ours
    on_cluster = [n for n in up.list_names(kind, env.ns) if n == ours or n.endswith(f"-{ours}")]
    assert len(on_cluster) == 1, on_cluster
    made.append((up, kind, on_cluster[0]))
    if kind.named:
        assert on_cluster[0] != ours, "a per-copy name on the cluster"

    listed = app.list_names(kind, env.ns)
    assert ours in listed
    names = initial_names(app.watch_list(kind, env.ns, fmt), kind)
    assert sorted(names) == sorted(listed), (names, listed)
    if kind.named:
        assert on_cluster[0] not in names and not any(theirs in n for n in names), names
    else:  # not a per-copy kind: the other copy's object is this copy's to see
        assert theirs in names
    if fmt == "protobuf":
        assert sorted(app.list_names(kind, env.ns, "protobuf")) == sorted(listed)
