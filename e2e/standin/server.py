#!/usr/bin/env python3
"""A small stand-in kube-apiserver (Python stdlib) for regroup's e2e tests.

It plays a cluster where only the RENAMED world exists: the Foo CRD is served in
group samplecontroller.team1.example.com. Discovery, /version and OpenAPI are the
bytes captured from a real kube-apiserver 1.24 (testdata/kube-1.24, see its
README), OpenAPI v3 as 1.29 serves it (e2e/standin/data); objects live in memory.
e2e/README.md lists the apiserver behaviours it mimics and how each was established. Where it approximates the real server, a comment
says so. It never logs bodies or credentials: one line per request on stderr.

    python3 e2e/standin/server.py --port 0    # prints "LISTENING <port>" first
"""
import argparse
import base64
import datetime
import functools
import hashlib
import http.client
import json
import os
import re
import select
import socket
import ssl
import sys
import threading
import time
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # also when loaded by file path (conftest)
import exec_ws  # noqa: E402
import protobuf  # noqa: E402

try:  # PyYAML is in e2e/.venv (the kubernetes client needs it); without it,
    import yaml  # server-side apply bodies must be JSON (which is also YAML).
except ImportError:
    yaml = None

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.environ.get("REGROUP_TESTDATA") or os.path.join(HERE, "..", "..", "testdata", "kube-1.24")
# A few kube-apiserver 1.29 captures (OpenAPI v3), copied byte for byte: e2e/standin/data/README.md.
DATA_129 = os.path.join(HERE, "data", "kube-1.29")
GROUP = "samplecontroller.team1.example.com"  # the Foo group this cluster serves
# More Foo groups, from --also-group (the demo's second copy of the app): each
# serves what GROUP serves, its discovery and OpenAPI v3 being GROUP's captures
# with the group name replaced, and its own, initially empty, store.
# `--also-group samplecontroller.k8s.io` serves ORIG too, in its captured
# place in /apis (a cluster where the original CRD is installed beside the
# copies': test_short_forms.py); see served_nowhere.
ALSO = []
ORIG = "samplecontroller.k8s.io"  # listed in the captured /apis and OpenAPI, served nowhere
# Direct mode only (tests without a proxy, see e2e/README.md): hide ORIG from /apis and OpenAPI JSON.
HIDE_ORIG = os.environ.get("REGROUP_STANDIN_HIDE_ORIG") == "1"
# REGROUP_STANDIN_SHORT_PREFIX=t1-: serve GROUP's discovery as a cluster whose
# Foo CRD was rendered with `names.shortNamePrefix: t1-` (the captured
# `shortNames: [fo]` as `t1-fo`, and an operator category
# `t1-samplecontroller` beside `all`, which is kept). test_short_names.py.
SHORT_PREFIX = os.environ.get("REGROUP_STANDIN_SHORT_PREFIX", "")
WATCH_TRUE = ("1", "t", "T", "true", "TRUE", "True")  # Go's strconv.ParseBool
# Off by default (the other tests were written against a stand-in without
# them); `regroup migrate`'s test turns them on:
# --finalizers: metadata.finalizers (a DELETE marks deletionTimestamp, the
# object goes when its last finalizer is removed) and DeleteOptions
# (propagationPolicy Orphan: the dependents lose their reference to it first,
# as the orphan finalizer has the collector do; preconditions.uid).
# --strict-crds: custom resources as kube-apiserver treats them with their
# stored CRD: status ignored on create when the status subresource is on, and
# validation against that CRD's openAPIV3Schema, a subset (type, minimum,
# maximum, properties, items) with the real server's messages.
# --flaky N: every Nth write (POST, PUT, PATCH, DELETE) in a namespace fails
# (cluster-scoped writes, a test's CRDs, never do, nor a test's setup writes
# sent with the User-Agent `e2e-setup`), in turn: 503 before it is
# applied, the connection closed before it is applied, or applied and then
# answered 500 (the answer lost), or refused with 429 and `Retry-After: 1`.
# For test_publish.py (publish mode's remote and central clusters):
# --rbac: the stored Roles, ClusterRoles and their bindings decide for every
# caller that is not in system:masters (a service account by a token issued
# here, a user impersonated with Impersonate-User): requests are refused with
# kube-apiserver's 403, SubjectAccessReviews answered by them (see "RBAC").
# --custom-resources: a CRD of any kind in a group this stand-in doesn't serve
# serves its kind there (see "custom resources").
OPTS = {"finalizers": False, "strict_crds": False, "flaky": 0, "rbac": False, "custom_resources": False}
FLAKY = {"writes": 0}


# (method, path, watch) -> (renamed-world case, Content-Type) replayed for a
# protobuf Accept: a Deployment owned by Foo alpha, a watch of ConfigMaps
# owned by Foo alpha.
@functools.lru_cache(maxsize=1)
def gzip_bomb(mib=1024):
    """A Foo's JSON head then `mib` MiB of spaces, gzip-encoded in about
    `mib` KiB: one sync-flushed block of 1 MiB of spaces repeated (each
    copy decodes alone: a literal, then matches at distance 1). For the
    soak's hostile phase (`GET .../foos/gzip-bomb`): regroup must refuse it
    after inflating at most its object limit."""
    prefix = b'{"apiVersion":"samplecontroller.team1.example.com/v1alpha1","kind":"Foo","metadata":{"name":"gzip-bomb"}'
    spaces = b" " * (1 << 20)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = c.compress(prefix) + c.flush(zlib.Z_SYNC_FLUSH)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = c.compress(spaces) + c.flush(zlib.Z_SYNC_FLUSH)
    end = zlib.compressobj(9, zlib.DEFLATED, -15).flush()
    crc = zlib.crc32(prefix)
    for _ in range(mib):
        crc = zlib.crc32(spaces, crc)
    size = (len(prefix) + (mib << 20)) & 0xFFFFFFFF
    return (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + head + block * mib + end
            + crc.to_bytes(4, "little") + size.to_bytes(4, "little"))


PROTOBUF_REPLAYS = {
    ("GET", "/apis/apps/v1/namespaces/renamed/deployments/alpha-deploy", False):
        ("renamed/042-get-deployment-protobuf", "application/vnd.kubernetes.protobuf"),
    ("GET", "/api/v1/namespaces/renamed/configmaps", True):
        ("renamed/254-watch-configmap-protobuf", "application/vnd.kubernetes.protobuf;stream=watch"),
}


@functools.lru_cache(maxsize=None)
def captured(case):
    with open(os.path.join(DATA, case, "response.body"), "rb") as f:
        return f.read()


@functools.lru_cache(maxsize=None)
def captured_129(case):
    with open(os.path.join(DATA_129, case, "response.body"), "rb") as f:
        return f.read()


def cjson(case):  # a fresh parsed copy: callers modify it
    return json.loads(captured(case))


# Kinds with an in-memory store, by (group, plural). `cols`: the capture whose
# Table columnDefinitions the real server sent for that kind.
KINDS = {
    ("", "namespaces"): dict(kind="Namespace", versions=["v1"], status=True, gen=False, builtin=True, cluster=True,
                             cols=None),
    ("", "configmaps"): dict(kind="ConfigMap", versions=["v1"], status=False, gen=False, builtin=True,
                             cols="renamed/128-list-configmap-table"),
    ("apps", "deployments"): dict(kind="Deployment", versions=["v1"], status=True, gen=True, builtin=True,
                                  cols="renamed/123-list-deployment-table"),
    # CRDs are stored and reported Established, so that conftest's real-cluster
    # path can run against the stand-in; a Foo CRD in a group not served yet
    # serves Foo there (crd_changed), no other CRD changes what is served
    # (but with --custom-resources: custom_crd_changed).
    ("apiextensions.k8s.io", "customresourcedefinitions"): dict(
        kind="CustomResourceDefinition", versions=["v1"], status=True, gen=True, builtin=True, cluster=True,
        cols="renamed/118-list-crd-table"),
    # What the aggregator needs (aggregation below): APIServices, and the
    # Services and Endpoints they point at.
    ("apiregistration.k8s.io", "apiservices"): dict(
        kind="APIService", versions=["v1"], status=True, gen=False, builtin=True, cluster=True,
        cols="renamed/173-list-apiservice-table"),
    # Webhook registrations (stored only: the stand-in never calls webhooks).
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): dict(
        kind="ValidatingWebhookConfiguration", versions=["v1"], status=False, gen=True, builtin=True, cluster=True,
        cols=None),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): dict(
        kind="MutatingWebhookConfiguration", versions=["v1"], status=False, gen=True, builtin=True, cluster=True,
        cols=None),
    ("", "services"): dict(kind="Service", versions=["v1"], status=True, gen=False, builtin=True, cols=None),
    ("", "endpoints"): dict(kind="Endpoints", versions=["v1"], status=False, gen=False, builtin=True, cols=None),
    # For TokenRequest (service-account tokens bound to a Secret, below) and
    # the RBAC a real cluster needs for them; stored, not enforced.
    ("", "serviceaccounts"): dict(kind="ServiceAccount", versions=["v1"], status=False, gen=False, builtin=True,
                                  cols=None, subs=["token"]),
    # Pods only to `kubectl exec` into them over WebSocket (exec_ws.py).
    ("", "pods"): dict(kind="Pod", versions=["v1"], status=True, gen=False, builtin=True, cols=None, subs=["exec"]),
    ("", "secrets"): dict(kind="Secret", versions=["v1"], status=False, gen=False, builtin=True, cols=None),
    # Events an operator posts about its objects (test_kopf.py); stored only.
    ("", "events"): dict(kind="Event", versions=["v1"], status=False, gen=False, builtin=True, cols=None),
    # Leader-election Leases two copies share a namespace with (test_short_names.py).
    ("coordination.k8s.io", "leases"): dict(kind="Lease", versions=["v1"], status=False, gen=False,
                                            builtin=True, cols=None),
    ("rbac.authorization.k8s.io", "roles"): dict(kind="Role", versions=["v1"], status=False, gen=False,
                                                 builtin=True, cols=None),
    ("rbac.authorization.k8s.io", "rolebindings"): dict(kind="RoleBinding", versions=["v1"], status=False,
                                                        gen=False, builtin=True, cols=None),
    # Cluster-scoped names an app creates under fixed names (test_names.py).
    ("rbac.authorization.k8s.io", "clusterroles"): dict(kind="ClusterRole", versions=["v1"], status=False,
                                                        gen=False, builtin=True, cluster=True,
                                                        cols="renamed/163-list-clusterrole-table"),
    ("rbac.authorization.k8s.io", "clusterrolebindings"): dict(kind="ClusterRoleBinding", versions=["v1"],
                                                               status=False, gen=False, builtin=True, cluster=True,
                                                               cols=None),
    ("scheduling.k8s.io", "priorityclasses"): dict(kind="PriorityClass", versions=["v1"], status=False, gen=False,
                                                   builtin=True, cluster=True, cols=None),
    (GROUP, "foos"): dict(kind="Foo", versions=["v1alpha1", "v1beta1"], status=True, gen=True, builtin=False,
                          cols="renamed/113-list-foo-table", deprecated=["v1beta1"]),
}
# Strategic merge patch, approximated: these lists merge by key (their
# patchMergeKey), in the order kube-apiserver gives them (smp_order); other
# lists are replaced; $-directives ($setElementOrder, $retainKeys) are dropped,
# `$patch: delete` in a keyed list item is honoured.
SMP_KEYS = {"ownerReferences": "uid", "containers": "name", "initContainers": "name", "env": "name",
            "volumes": "name", "volumeMounts": "mountPath", "ports": "containerPort", "imagePullSecrets": "name",
            "webhooks": "name"}  # Validating/MutatingWebhookConfiguration


def dumps(obj):  # compact, newline-terminated: Go's json.Encoder, as in every captured JSON body
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def copy(obj):
    return json.loads(json.dumps(obj))


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def gv(group, version):
    return f"{group}/{version}" if group else version


class ApiError(Exception):
    """A Status answer, shaped like the captures (renamed/199, 230, 233)."""

    def __init__(self, code, reason, message, details=None, raw=None, ctype="application/json"):
        super().__init__(message)
        self.code, self.reason, self.message, self.details, self.raw, self.ctype = \
            code, reason, message, details, raw, ctype

    def body(self):
        if self.raw is not None:
            return self.raw
        st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": self.message, "reason": self.reason}
        if self.details is not None:
            st["details"] = self.details
        return dumps(dict(st, code=self.code))




def check_watchlist(q, is_watch):
    """kube-apiserver's validation of `sendInitialEvents` (WatchList), with its
    422 Status (kube-1.29 renamed/022 and 024)."""
    def invalid(field, why):
        cause = {"reason": "FieldValueForbidden", "message": f"Forbidden: {why}", "field": field}
        return ApiError(422, "Invalid", f'ListOptions.meta.k8s.io "" is invalid: {field}: Forbidden: {why}',
                        {"group": "meta.k8s.io", "kind": "ListOptions", "causes": [cause]})
    if not is_watch:
        raise invalid("sendInitialEvents", "sendInitialEvents is forbidden for list")
    if q.get("resourceVersionMatch") != "NotOlderThan":
        raise invalid("resourceVersionMatch", "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")


def obj_error(code, reason, group, plural, name, text):
    """`foos.samplecontroller.team1.example.com "x" not found` and its kin."""
    details = {"name": name, "group": group, "kind": plural} if group else {"name": name, "kind": plural}
    what = f"{plural}.{group}" if group else plural
    return ApiError(code, reason, text.format(f'{what} "{name}"'), details)


def not_found(group, plural, name):
    return obj_error(404, "NotFound", group, plural, name, "{} not found")


def conflict(r):
    return obj_error(409, "Conflict", r.group, r.plural, r.name, "Operation cannot be fulfilled on {}: the object has "
                     "been modified; please apply your changes to the latest version and try again")


def page_not_found():  # the real answer for an unknown group or version (renamed/237, 238)
    return ApiError(404, "", "", raw=b"404 page not found\n", ctype="text/plain; charset=utf-8")


class Store:
    """Objects by (group, plural, namespace, name), in their storage version,
    and the log of every event since start-up, which watches replay from."""

    def __init__(self):
        self.cond = threading.Condition()
        self.objs, self.log, self.rv = {}, [], 0

    def commit(self, etype, key, obj):  # the caller holds self.cond
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        prev = self.objs.get(key)  # for watches with a selector (see `watched`)
        if etype == "DELETED":
            self.objs.pop(key, None)
        else:
            self.objs[key] = obj
        self.log.append((self.rv, etype, key, copy(obj), prev and copy(prev)))
        self.cond.notify_all()
        if key[:2] == ("apiextensions.k8s.io", "customresourcedefinitions") and etype in ("ADDED", "DELETED"):
            crd_changed(etype, obj)
        return obj


STORE = Store()


# A label selector requirement, kube-apiserver's grammar
# (k8s.io/apimachinery/pkg/labels/selector.go, Parse): `k`, `!k`, `k=v`,
# `k==v`, `k!=v`, `k in (v1,v2)`, `k notin (v1,v2)`; the numeric `k>n`, `k<n`
# are not served (400).
_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VALUE = r"[A-Za-z0-9_.-]*"
_REQUIREMENT = re.compile(rf"(?:(!)\s*({_KEY})|({_KEY})\s*(?:(==|=|!=)\s*({_VALUE})|\s(in|notin)\s*\(([^()]*)\))?)")


def label_requirements(text):
    """The requirements of a labelSelector as (op, key, values): op one of
    exists, !, =, !=, in, notin. Commas inside `( )` belong to a set."""
    parts, depth, cur = [], 0, ""
    for c in text:
        depth += (c == "(") - (c == ")")
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += c
    parts.append(cur)
    reqs = []
    for part in (p.strip() for p in parts):
        if not part and text.strip() == "":
            continue
        m = _REQUIREMENT.fullmatch(part)
        if not m:
            raise ApiError(400, "BadRequest", f"stand-in: unsupported labelSelector {part!r}")
        neg, nkey, key, op, value, setop, values = m.groups()
        if neg:
            reqs.append(("!", nkey, ()))
        elif op:
            reqs.append(("!=" if op == "!=" else "=", key, (value,)))
        elif setop:
            vals = tuple(v.strip() for v in values.split(","))
            if not all(re.fullmatch(_VALUE, v) for v in vals):
                raise ApiError(400, "BadRequest", f"stand-in: unsupported labelSelector {part!r}")
            reqs.append((setop, key, vals))
        else:
            reqs.append(("exists", key, ()))
    return reqs


def label_match(reqs, labels):
    """As the apiserver matches: `!=` and `notin` also match an absent key."""
    for op, k, vals in reqs:
        if op == "exists":
            ok = k in labels
        elif op == "!":
            ok = k not in labels
        elif op in ("=", "in"):
            ok = labels.get(k) in vals
        else:  # != and notin
            ok = k not in labels or labels[k] not in vals
        if not ok:
            return False
    return True


def selector(q):
    """labelSelector (label_requirements' grammar); fieldSelector:
    metadata.name and metadata.namespace only. Anything else is refused with
    400 rather than ignored."""
    labels, fields = label_requirements(q.get("labelSelector") or ""), []
    for part in filter(None, (q.get("fieldSelector") or "").split(",")):
        m = re.fullmatch(r"metadata\.(name|namespace)(==|=|!=)(.*)", part)
        if not m:
            raise ApiError(400, "BadRequest", f"stand-in: unsupported fieldSelector {part!r}")
        fields.append(m.groups())

    def ok(key, obj):
        if not label_match(labels, (obj.get("metadata") or {}).get("labels") or {}):
            return False
        return all((key[3 if f == "name" else 2] == v) == (op != "!=") for f, op, v in fields)
    return ok


def matches(key, obj, r, sel):
    return key[:2] == (r.group, r.plural) and (r.ns is None or key[2] == r.ns) and sel(key, obj)


def watched(etype, key, obj, prev, r, sel):
    """The event a watch with selector `sel` sends for a change of `prev` into
    `obj`, or None, as the apiserver's watch cache does
    (k8s.io/apiserver/pkg/storage/cacher/cache_watcher.go, convertToWatchEvent):
    an object that starts to match is ADDED, one that stops matching is
    DELETED (its last matching state, at the new resourceVersion)."""
    now_in = etype != "DELETED" and matches(key, obj, r, sel)
    was_in = prev is not None and matches(key, prev, r, sel)
    if etype == "DELETED":
        return ("DELETED", obj) if matches(key, obj, r, sel) else None
    if now_in:
        return (etype if was_in else "ADDED", obj)
    if was_in:
        gone = copy(prev)
        gone["metadata"]["resourceVersion"] = obj["metadata"]["resourceVersion"]
        return "DELETED", gone
    return None


# ---- garbage collection ------------------------------------------------------------
# kube-controller-manager's garbage collector, at its minimum
# (k8s.io/kubernetes/pkg/controller/garbagecollector, attemptToDeleteItem): an
# owner reference is dangling when no object of its apiVersion/kind and name
# exists in the dependent's namespace (cluster scope for a cluster-scoped
# owner) or that object has another uid. A dependent whose owners are all
# dangling is deleted; one with some owners left loses the dangling references.
# References to a kind this stand-in does not store (or a namespaced owner of a
# cluster-scoped dependent) can't be resolved and are left alone, as the real
# collector retries them without deleting anything. Done at once after each
# write, not seconds later; background propagation only (no foreground
# deletion, no blockOwnerDeletion, no orphaning).

def owner_alive(key, ref):
    """True (the owner exists), False (dangling) or None (can't be resolved)."""
    group, _, _ = (ref.get("apiVersion") or "").rpartition("/")
    plural = next((p for (g, p), k in KINDS.items() if g == group and k["kind"] == ref.get("kind")), None)
    if plural is None:
        return None
    cluster = bool(KINDS[(group, plural)].get("cluster"))
    if not cluster and key[2] is None:
        return None
    owner = STORE.objs.get((group, plural, None if cluster else key[2], ref.get("name")))
    return owner is not None and owner["metadata"].get("uid") == ref.get("uid")


def collect_garbage():
    with STORE.cond:
        again = True
        while again:  # a deleted dependent may own others
            again = False
            for key, obj in list(STORE.objs.items()):
                refs = obj["metadata"].get("ownerReferences") or []
                alive = [owner_alive(key, ref) for ref in refs]
                if False not in alive:
                    continue
                if not any(alive):  # every owner gone (or unresolvable with the others gone)
                    if None in alive:
                        continue
                    STORE.commit("DELETED", key, copy(obj))
                else:
                    new = copy(obj)
                    new["metadata"]["ownerReferences"] = [ref for ref, a in zip(refs, alive) if a is not False]
                    STORE.commit("MODIFIED", key, new)
                again = True


# ---- finalizers, DeleteOptions, CRD validation (--finalizers, --strict-crds) ------------

def finish_finalized():
    """Objects marked for deletion whose last finalizer is gone are deleted
    (the caller holds STORE.cond)."""
    for key, o in list(STORE.objs.items()):
        if o["metadata"].get("deletionTimestamp") and not o["metadata"].get("finalizers"):
            STORE.commit("DELETED", key, copy(o))
    for key, o in list(STORE.objs.items()):  # a Terminating namespace goes once it is empty
        if key[:2] == ("", "namespaces") and o["metadata"].get("deletionTimestamp") \
                and not any(k[2] == key[3] for k in STORE.objs):
            STORE.commit("DELETED", key, copy(o))


def delete_with_options(r, cur, q, opts):
    """DELETE with DeleteOptions (body, or propagationPolicy in the query):
    preconditions.uid checked (409 as kube-apiserver words it); Orphan: the
    dependents lose their reference to it first; then deleted, or marked
    (deletionTimestamp) while finalizers remain. Dependents of a deleted
    object go after (collect_garbage, in handle_any)."""
    uid = cur["metadata"]["uid"]
    check_delete_precondition(r, cur, opts)
    if (q.get("propagationPolicy") or opts.get("propagationPolicy")) == "Orphan":
        for key, o in list(STORE.objs.items()):
            refs = o["metadata"].get("ownerReferences") or []
            if any(ref.get("uid") == uid for ref in refs):
                new = copy(o)
                new["metadata"]["ownerReferences"] = [ref for ref in refs if ref.get("uid") != uid]
                STORE.commit("MODIFIED", key, new)
    if r.plural == "namespaces" and not r.group:
        # The namespace controller deletes its objects (those with finalizers
        # are marked and wait for them); the namespace is Terminating until
        # it is empty (finish_finalized).
        for key, o in list(STORE.objs.items()):
            if key[2] != r.name:
                continue
            if o["metadata"].get("finalizers"):
                if not o["metadata"].get("deletionTimestamp"):
                    marked = copy(o)
                    marked["metadata"]["deletionTimestamp"] = now()
                    STORE.commit("MODIFIED", key, marked)
            else:
                STORE.commit("DELETED", key, copy(o))
        if any(k[2] == r.name for k in STORE.objs):
            new = copy(cur)
            new["metadata"]["deletionTimestamp"] = now()
            new["status"] = {"phase": "Terminating"}
            STORE.commit("MODIFIED", r.key, new)
            return 200, as_version(STORE.objs[r.key], r)
    if cur["metadata"].get("finalizers"):
        if not cur["metadata"].get("deletionTimestamp"):
            new = copy(cur)
            new["metadata"]["deletionTimestamp"] = now()
            STORE.commit("MODIFIED", r.key, new)
        return 200, as_version(STORE.objs[r.key], r)
    STORE.commit("DELETED", r.key, copy(cur))
    det = {"name": r.name, "group": r.group, "kind": r.plural, "uid": uid}
    if not r.group:
        del det["group"]
    return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": det}


def check_delete_precondition(r, cur, opts):
    """DeleteOptions' preconditions.uid: another uid is a 409, worded as
    kube-apiserver 1.36.2 worded it (the kind, not the resource, named)."""
    pre, uid = (opts.get("preconditions") or {}).get("uid"), cur["metadata"]["uid"]
    if pre and pre != uid:
        what = f'{r.kind["kind"]}.{r.group}' if r.group else r.kind["kind"]
        raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {what} "{r.name}": the UID in the '
                       f"precondition ({pre}) does not match the UID in record ({uid}). The object might have been "
                       "deleted and then recreated",
                       dict({"name": r.name}, **({"group": r.group} if r.group else {}), kind=r.kind["kind"]))


def check_uid_precondition(r, cur, obj):
    """An update (PUT) whose metadata.uid is another object's: kube-apiserver
    makes the uid a precondition, a 409 worded as 1.36.2 worded it (the
    storage key under the default prefix /registry)."""
    uid, have = obj["metadata"].get("uid"), cur["metadata"]["uid"]
    if uid and uid != have:
        key = "/".join(filter(None, ("/registry", r.group, r.plural, r.ns, r.name)))
        raise obj_error(409, "Conflict", r.group, r.plural, r.name, "Operation cannot be fulfilled on {}: "
                        f"StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: "
                        f"Precondition failed: UID in precondition: {uid}, UID in object meta: {have}")


def schema_errors(schema, value, path):
    """A subset of the CRD structural schema validation, with kube-apiserver's
    wording: type, minimum, maximum, properties, items."""
    types = {"integer": int, "number": (int, float), "string": str, "boolean": bool, "object": dict, "array": list}
    t = schema.get("type")
    if t in types and (not isinstance(value, types[t]) or (t in ("integer", "number") and isinstance(value, bool))):
        got = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number"}.get(
            type(value), "null")
        return [f'{path}: Invalid value: "{got}": {path} in body must be of type {t}: "{got}"']
    errs = []
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "maximum" in schema and value > schema["maximum"]:
            errs.append(f"{path}: Invalid value: {value}: {path} in body should be less than or equal to "
                        f"{schema['maximum']}")
        if "minimum" in schema and value < schema["minimum"]:
            errs.append(f"{path}: Invalid value: {value}: {path} in body should be greater than or equal to "
                        f"{schema['minimum']}")
    for rule in schema.get("x-kubernetes-validations") or []:
        # CEL: only rules of the form `self <= N` are evaluated (--custom-resources), with kube-apiserver
        # 1.36.2's wording: `spec.storageGB: Invalid value: 500: storageGB may not exceed 100`.
        m = re.fullmatch(r"\s*self\s*<=\s*(-?\d+)\s*", rule.get("rule") or "")
        if m and isinstance(value, (int, float)) and not isinstance(value, bool) and value > int(m.group(1)):
            errs.append(f"{path}: Invalid value: {value}: {rule.get('message') or 'failed rule: ' + rule['rule']}")
    if isinstance(value, dict):
        for k, sub in (schema.get("properties") or {}).items():
            if k in value:
                errs += schema_errors(sub, value[k], f"{path}.{k}" if path else k)
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            errs += schema_errors(schema["items"], v, f"{path}[{i}]")
    return errs


def validate_custom(r, obj, name):
    """422 Invalid when the stored CRD's schema for this version refuses obj."""
    crd = STORE.objs.get(("apiextensions.k8s.io", "customresourcedefinitions", None, f"{r.plural}.{r.group}"))
    if crd is None:
        return
    version = next((v for v in crd["spec"].get("versions") or [] if v.get("name") == r.version), {})
    schema = (version.get("schema") or {}).get("openAPIV3Schema")
    if not schema:
        return
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    errs = schema_errors(dict(schema, properties={k: v for k, v in (schema.get("properties") or {}).items()
                                                  if k not in ("apiVersion", "kind", "metadata")}), body, "")
    if errs:
        what = f'{r.kind["kind"]}.{r.group} "{name}"'
        text = errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"
        causes = [{"reason": "FieldValueInvalid", "message": e.split(": ", 1)[1], "field": e.split(": ", 1)[0]}
                  for e in errs]
        raise ApiError(422, "Invalid", f"{what} is invalid: {text}",
                       {"name": name, "group": r.group, "kind": r.kind["kind"], "causes": causes})


# ---- patches ---------------------------------------------------------------------

def merge_patch(target, patch, smp=False):
    """RFC 7386 JSON merge patch; with smp=True, the strategic approximation."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if smp and k.startswith("$"):
            continue
        if v is None:
            out.pop(k, None)
        elif smp and k in SMP_KEYS and isinstance(v, list) and isinstance(out.get(k), list):
            mk, items = SMP_KEYS[k], [i for i in v if isinstance(i, dict)]
            live = [o for o in out[k] if not any(i.get("$patch") == "delete" and i.get(mk) == o.get(mk) for i in items)]
            items = [i for i in items if i.get("$patch") != "delete"]
            merged = list(live)
            for item in items:
                idx = next((n for n, o in enumerate(merged) if o.get(mk) == item.get(mk)), None)
                if idx is None:
                    merged.append(merge_patch({}, item, smp))
                else:
                    merged[idx] = merge_patch(merged[idx], item, smp)
            out[k] = smp_order(merged, items, live, mk)
        else:
            out[k] = merge_patch(out.get(k), v, smp)
    return out


def smp_order(merged, patch, live, mk):
    """The order kube-apiserver gives a list merged by key `mk`, as
    k8s.io/apimachinery/pkg/util/strategicpatch/patch.go computes it (mergeSlice
    -> normalizeElementOrder -> mergeSortedSlice, no $setElementOrder): the
    items the patch names, in the patch's order, and the live items it does not
    name, in the live order, are merged by taking the live one first only when
    both it and the patch's next item are in the live list and it comes before
    it there. So an item the live list lacks goes BEFORE the live items left:
    live [alpha] + patch [beta] gives [beta, alpha] (kube-apiserver 1.36 did
    so to a ConfigMap's ownerReferences, issue #31)."""
    pkeys, lkeys = [i.get(mk) for i in patch], [o.get(mk) for o in live]
    right = sorted((m for m in merged if m.get(mk) in pkeys), key=lambda m: pkeys.index(m.get(mk)))
    left = [m for m in merged if m.get(mk) not in pkeys]  # already in live order
    out = []
    while left or right:
        if right and (not left or not (right[0].get(mk) in lkeys and
                                        lkeys.index(left[0].get(mk)) < lkeys.index(right[0].get(mk)))):
            out.append(right.pop(0))
        else:
            out.append(left.pop(0))
    return out


def json_patch(doc, ops):
    """RFC 6902: add, remove, replace, move, copy, test."""
    def walk(path):
        toks = [t.replace("~1", "/").replace("~0", "~") for t in path.split("/")[1:]]
        parent = doc
        for t in toks[:-1]:
            parent = parent[int(t)] if isinstance(parent, list) else parent[t]
        return parent, (toks[-1] if not isinstance(parent, list) or toks[-1] == "-" else int(toks[-1]))

    def remove(path):
        parent, last = walk(path)
        return parent.pop(last)

    def add(path, value):
        parent, last = walk(path)
        if isinstance(parent, list):
            parent.insert(len(parent) if last == "-" else last, value)
        else:
            parent[last] = value
    try:
        for op in ops:
            o, p = op["op"], op["path"]
            if o in ("remove", "replace"):
                remove(p)
            if o in ("add", "replace"):
                add(p, op["value"])
            elif o in ("move", "copy"):
                parent, last = walk(op["from"])
                add(p, remove(op["from"]) if o == "move" else copy(parent[last]))
            elif o == "test" and (lambda pl: pl[0][pl[1]])(walk(p)) != op["value"]:
                raise ApiError(422, "Invalid", f"the server rejected our request due to an error in our request: "
                                               f"testing value {p} failed")
    except (KeyError, IndexError, ValueError, TypeError) as e:
        raise ApiError(422, "Invalid", f"the server rejected our request due to an error in our request: {e!r}")
    return doc


def fieldset(obj):
    """A minimal FieldsV1: the keys present, lists as leaves."""
    return {f"f:{k}": fieldset(v) for k, v in obj.items()} if isinstance(obj, dict) else {}


def manage(obj, manager, operation, apiversion, applied=None, sub=None):
    """managedFields, minimally: one entry per (manager, operation, subresource)
    with the fields of the applied config (Apply) or of the whole object. No
    field ownership is computed, so apply never reports a conflict."""
    src = applied if applied is not None else obj
    fs = fieldset({k: v for k, v in src.items() if k not in ("apiVersion", "kind", "metadata")})
    md = {k: v for k, v in (src.get("metadata") or {}).items() if k in ("labels", "annotations", "ownerReferences")}
    if md:
        fs["f:metadata"] = fieldset(md)
    entry = {"manager": manager, "operation": operation, "apiVersion": apiversion, "time": now(),
             "fieldsType": "FieldsV1", "fieldsV1": fs}
    if sub:
        entry["subresource"] = sub
    obj["metadata"]["managedFields"] = [m for m in obj["metadata"].get("managedFields") or [] if (
        m.get("manager"), m.get("operation"), m.get("subresource")) != (manager, operation, sub)] + [entry]


# ---- pruning of custom resources ------------------------------------------------------
# kube-apiserver drops, on every write of a custom resource (create, update,
# patch, apply, the status subresource), the fields its CRD's structural schema
# does not declare (k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning):
# kube-1.29 renamed/056 (fieldValidation=Ignore) stored a Foo without its
# spec.unknownField and metadata.unknownMeta. With fieldValidation=Warn (the
# default since 1.23) each dropped field is a Warning (055, 060); with Strict a
# create or update is a 400 (054), a patch a 422 (059), an apply always a 500
# (061, 062). The schema is the captured CRD's (kube-1.24 renamed/036): Foo's
# status declares only availableReplicas, so anything else a client writes
# into status is dropped.
OBJECT_META = ("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
               "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
               "ownerReferences", "finalizers", "managedFields")


@functools.lru_cache(maxsize=None)
def crd_schemas():
    """version -> the Foo CRD's openAPIV3Schema, with the root's apiVersion and
    kind kept and metadata pruned to ObjectMeta's fields (their values kept)."""
    return {v["name"]: object_schema(v["schema"]["openAPIV3Schema"])
            for v in cjson("renamed/036-get-crd-json")["spec"]["versions"]}


def object_schema(root):
    """A CRD's openAPIV3Schema as pruning sees it: apiVersion and kind kept,
    metadata pruned to ObjectMeta's fields (their values kept)."""
    keep = {"x-kubernetes-preserve-unknown-fields": True}
    meta = {"type": "object", "properties": {k: keep for k in OBJECT_META}}
    return dict(root, properties=dict(root.get("properties") or {}, apiVersion=keep, kind=keep, metadata=meta))


def schema_for(r):
    """The schema a custom resource of this request is pruned with: the
    captured Foo CRD's, or (--custom-resources) its stored CRD's."""
    if r.kind.get("crd"):
        version = crd_version(custom_crd(r.group, r.plural), r.version)
        return object_schema((version.get("schema") or {}).get("openAPIV3Schema")
                             or {"type": "object", "x-kubernetes-preserve-unknown-fields": True})
    return crd_schemas()[r.version]


def prune(value, schema, path, dropped):
    """Structural pruning: an object keeps the properties its schema declares
    (or all, with additionalProperties or x-kubernetes-preserve-unknown-fields),
    recursively; arrays by their items' schema. `dropped` gets each removed
    field's path, in document order."""
    if isinstance(value, dict):
        props, more = schema.get("properties") or {}, schema.get("additionalProperties")
        for k in list(value):
            sub = props.get(k, more if isinstance(more, dict) else None)
            if sub is not None:
                prune(value[k], sub, f"{path}.{k}" if path else k, dropped)
            elif not (schema.get("x-kubernetes-preserve-unknown-fields") or more is True):
                del value[k]
                dropped.append(f"{path}.{k}" if path else k)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            prune(item, schema["items"], f"{path}[{i}]", dropped)


# ---- content negotiation and rendering ---------------------------------------------

def accepted(accept, table_ok=True):
    """The first servable JSON range of Accept: 'json', 'table' or 'pom'. A
    protobuf range is skipped (`negotiate` serves it for the kinds
    protobuf.py encodes; a real server answers protobuf for every built-in
    kind, and Table and metadata-only forms in protobuf too), and YAML is not
    offered."""
    for rng in (accept or "application/json").split(","):
        parts = [p.strip() for p in rng.split(";")]
        params = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
        if parts[0] not in ("application/json", "application/*", "*/*"):
            continue
        if "as" not in params:
            return "json"
        if table_ok and params.get("g") == "meta.k8s.io" and params.get("v") in ("v1", "v1beta1"):
            if params["as"] == "Table":
                return "table"
            if params["as"] in ("PartialObjectMetadata", "PartialObjectMetadataList"):
                return "pom"
    raise ApiError(406, "NotAcceptable", "", raw=captured("common/011-discovery-apis-aggregated-v2beta1-only"))


def negotiate(accept, r):
    """'protobuf' when the first range of Accept this stand-in serves is plain
    protobuf (`application/vnd.kubernetes.protobuf`, any parameter but `as`)
    and protobuf.py encodes the kind (ClusterRole(Binding), Role(Binding),
    the webhook configurations, ConfigMap); else `accepted`'s answer. Other
    kinds skip a protobuf range: JSON, or the 406 of a protobuf-only Accept."""
    for rng in (accept or "application/json").split(","):
        parts = [p.strip() for p in rng.split(";")]
        params = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
        if parts[0] == protobuf.CONTENT_TYPE and "as" not in params and protobuf.supports(r.group, r.kind["kind"]):
            return "protobuf"
        if parts[0] in ("application/json", "application/*", "*/*"):
            break
    return accepted(accept)


class Encoded:
    """An answer already in its wire form (protobuf), with its Content-Type."""

    def __init__(self, body, ctype):
        self.body, self.ctype = body, ctype


def protobuf_object(r, o):
    return Encoded(protobuf.encode_object(as_version(o, r)), protobuf.CONTENT_TYPE)


def age(ts):  # kubectl's HumanDuration, its first steps
    s = max(int(time.time() - datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S%z").timestamp()), 0)
    if s < 120:
        return f"{s}s"
    if s < 600:
        return f"{s // 60}m{s % 60}s" if s % 60 else f"{s // 60}m"
    return f"{s // 60}m" if s < 3 * 3600 else f"{s // 3600}h"


def cells(plural, o):
    md, spec, st = o["metadata"], o.get("spec") or {}, o.get("status") or {}
    if plural == "foos":  # the CRD's additionalPrinterColumns (renamed/036)
        return [md["name"], spec.get("deploymentName"), spec.get("replicas"), st.get("availableReplicas")]
    if plural == "namespaces":
        return [md["name"], st.get("phase"), age(md["creationTimestamp"])]
    if plural in ("customresourcedefinitions", "clusterroles"):
        return [md["name"], md["creationTimestamp"]]
    if plural == "configmaps":
        return [md["name"], len(o.get("data") or {}) + len(o.get("binaryData") or {}), age(md["creationTimestamp"])]
    if plural == "apiservices":  # Available is not computed: the stand-in never runs the availability check
        ref = spec.get("service")
        return [md["name"], f'{ref["namespace"]}/{ref["name"]}' if ref else "Local", "Unknown",
                age(md["creationTimestamp"])]
    if plural in ("services", "endpoints"):  # under the namespace-style columns (Name, Status, Age)
        return [md["name"], "", age(md["creationTimestamp"])]
    ctrs = (spec.get("template") or {}).get("spec", {}).get("containers") or []
    sel = ",".join(f"{k}={v}" for k, v in sorted(((spec.get("selector") or {}).get("matchLabels") or {}).items()))
    return [md["name"], f'{st.get("readyReplicas", 0)}/{spec.get("replicas", 1)}', st.get("updatedReplicas", 0),
            st.get("availableReplicas", 0), age(md["creationTimestamp"]), ",".join(c.get("name", "") for c in ctrs),
            ",".join(c.get("image", "") for c in ctrs), sel]


def as_version(obj, r):
    """The CRD's conversion strategy None: only apiVersion changes."""
    return dict(obj, apiVersion=gv(r.group, r.version))


def pom(o):
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]}


def render_table(r, objs, rv, q, with_cols=True):
    """meta.k8s.io/v1 Table; rows[].object per includeObject (default Metadata)."""
    inc, rows = q.get("includeObject", "Metadata"), []
    custom = custom_table(r) if r.kind.get("crd") else None
    for o in objs:
        row = {"cells": custom[1](o) if custom else cells(r.plural, o)}
        if inc != "None":
            row["object"] = as_version(o, r) if inc == "Object" else pom(o)
        rows.append(row)
    cols = None
    if with_cols and custom:
        cols = custom[0]
    elif with_cols and r.kind["cols"]:
        cols = cjson(r.kind["cols"])["columnDefinitions"]
    elif with_cols:  # namespaces (not captured): the ConfigMap table's Name and Age, and a Status
        cm = cjson("renamed/128-list-configmap-table")["columnDefinitions"]
        cols = [cm[0], {"name": "Status", "type": "string", "format": "", "description": "The status of the namespace",
                        "priority": 0}, cm[-1]]
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv},
            "columnDefinitions": cols, "rows": rows}


def render_one(r, o, fmt, q, with_cols=True):
    if fmt == "table":
        return render_table(r, [o], o["metadata"]["resourceVersion"], q, with_cols)
    return pom(o) if fmt == "pom" else as_version(o, r)


# ---- discovery and OpenAPI -------------------------------------------------------------

def apis_doc():
    """/apis as captured (common/006), with the wardle groups only while an
    APIService for them is registered here: the captured APIService had no
    backend (its discovery answered 503, renamed/269) and a 503 there fails
    every kubectl discovery. Both Foo groups stay: ORIG is listed but served
    nowhere -- through regroup it must be shadowed."""
    doc = cjson("common/006-discovery-apis-json")
    doc["groups"] = [g for g in doc["groups"] if (not g["name"].startswith("wardle.") or g["name"] in aggregated())
                     and not (HIDE_ORIG and g["name"] == ORIG)]
    if ALSO:
        ours = next(g for g in doc["groups"] if g["name"] == GROUP)
        listed = {g["name"] for g in doc["groups"]}  # ORIG (--also-group) keeps its captured place
        doc["groups"] += [json.loads(as_group(dumps(ours), group)) for group in ALSO if group not in listed]
    doc["groups"] += custom_group_docs() + aggregated_group_docs()
    return doc


@functools.lru_cache(maxsize=1)
def captured_groups():
    """The groups of the captured /apis (common/006)."""
    return frozenset(g["name"] for g in cjson("common/006-discovery-apis-json")["groups"])


def served_nowhere(group):
    """ORIG: listed in the captured /apis, served nowhere, unless --also-group names it."""
    return group == ORIG and ORIG not in ALSO


def served_group_versions():
    return {v["groupVersion"] for g in apis_doc()["groups"] for v in g["versions"]
            if not served_nowhere(g["name"])} | {"v1"}


VERBS = {"get": "get", "list": "list", "watch": "watch", "watchlist": "watch", "post": "create", "put": "update",
         "patch": "patch", "delete": "delete", "deletecollection": "deletecollection"}


@functools.lru_cache(maxsize=None)
def openapi_v2_paths():
    return list(cjson("common/012-openapi-v2-json")["paths"].items())


def as_group(body, group):
    """A capture of GROUP as group `group` would serve it (JSON documents only)."""
    return body.replace(GROUP.encode(), group.encode())


def also_group(group):
    """Serves Foo under `group` too, beside GROUP (see ALSO)."""
    ALSO.append(group)
    KINDS[(group, "foos")] = dict(KINDS[(GROUP, "foos")])
    resource_list.cache_clear()


# Foo groups served because a Foo CRD was created for them (see crd_changed).
FROM_CRDS = set()


def crd_changed(etype, obj):
    """A stored Foo CRD serves its group, as kube-apiserver serves a CRD once
    it is established: created for a group not served yet, its group is served
    as an --also-group is; deleted, the group is no longer served and its
    objects go with it (as the apiserver's CRD clean-up does). Only the Foo
    kind (other kinds: --custom-resources, custom_crd_changed). ORIG too (the
    original CRD installed beside the copies', test_short_forms.py against
    real-mode-selfcheck.sh's stand-in): served as `--also-group ORIG` would.
    The caller holds STORE.cond."""
    spec = obj.get("spec") or {}
    group = spec.get("group")
    if (spec.get("names") or {}).get("kind") != "Foo" or not group:
        if OPTS["custom_resources"] and group:
            custom_crd_changed(etype, obj)
        return
    # kube-apiserver's CRD registration: a local APIService (no service)
    # per served version, labelled automanaged, deleted with the CRD.
    for v in spec.get("versions") or []:
        key = ("apiregistration.k8s.io", "apiservices", None, f"{v.get('name')}.{group}")
        if etype == "ADDED" and v.get("served") and key not in STORE.objs:
            STORE.commit("ADDED", key, {
                "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": key[3], "uid": str(uuid.uuid4()), "creationTimestamp": now(),
                             "labels": {"kube-aggregator.kubernetes.io/automanaged": "true"}},
                "spec": {"group": group, "version": v["name"], "groupPriorityMinimum": 1000, "versionPriority": 100},
                "status": {"conditions": [{"type": "Available", "status": "True", "lastTransitionTime": now(),
                                           "reason": "Local", "message": "Local APIServices are always available"}]}})
        elif etype == "DELETED" and key in STORE.objs and \
                "kube-aggregator.kubernetes.io/automanaged" in (STORE.objs[key]["metadata"].get("labels") or {}):
            STORE.commit("DELETED", key, copy(STORE.objs[key]))
    if etype == "ADDED" and group != GROUP and group not in ALSO:
        also_group(group)
        FROM_CRDS.add(group)
    elif etype == "DELETED" and group in FROM_CRDS:
        FROM_CRDS.discard(group)
        ALSO.remove(group)
        KINDS.pop((group, "foos"), None)
        resource_list.cache_clear()
        for key in [k for k in STORE.objs if k[:2] == (group, "foos")]:
            STORE.commit("DELETED", key, copy(STORE.objs[key]))


# ---- custom resources of any kind (--custom-resources; off by default) --------------
# kube-apiserver serves a CRD's kind once it is established. With
# --custom-resources, a CRD whose kind is not Foo, in a group this stand-in
# doesn't otherwise serve (the captured /apis, GROUP, --also-group), serves its
# kind: /apis, /apis/G and /apis/G/V (the status subresource, shortNames,
# categories; no storageVersionHash), the store (status subresource, labels
# and selectors, as for Foo), status ignored on create, pruning with its
# schema, a subset of validation (schema_errors: type, minimum, maximum, and of
# CEL only rules of the form `self <= N`), Table with its
# additionalPrinterColumns (dotted jsonPaths only) and OpenAPI v3 for a
# namespaced CRD (custom_openapi_v3). Deleting the CRD deletes its objects and
# stops serving the kind. Not done: other CEL rules, enum, required,
# defaulting, conversion (every version is stored as the storage version).
CUSTOM = {}  # group -> names of the CRDs served in it
# The Name column of a custom resource's Table, as kube-apiserver 1.36.2 sent it.
NAME_COLUMN = {"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a "
               "namespace. Is required when creating resources, although some resources may allow a client to "
               "request the generation of an appropriate name automatically. Name is primarily intended for "
               "creation idempotence and configuration definition. Cannot be updated. More info: "
               "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names", "priority": 0}


def custom_crd_changed(etype, obj):
    """A CRD of a kind other than Foo created or deleted (the caller holds STORE.cond)."""
    spec, name = obj["spec"], obj["metadata"]["name"]
    group, names = spec["group"], spec.get("names") or {}
    plural = names.get("plural")
    if not plural or group in captured_groups() | {GROUP, *ALSO}:
        return  # stored only
    if etype == "ADDED":
        served = [v for v in spec.get("versions") or [] if v.get("served")]
        storage = next((v for v in served if v.get("storage")), None)
        if storage is None or (group, plural) in KINDS:
            return
        KINDS[(group, plural)] = dict(kind=names["kind"], versions=[storage["name"]] + [
            v["name"] for v in served if v is not storage], status="status" in (storage.get("subresources") or {}),
            gen=True, builtin=False, cluster=spec.get("scope") == "Cluster", cols=None, crd=name)
        CUSTOM.setdefault(group, []).append(name)
    elif name in CUSTOM.get(group, []):
        CUSTOM[group].remove(name)
        if not CUSTOM[group]:
            del CUSTOM[group]
        KINDS.pop((group, plural), None)
        for key in [k for k in STORE.objs if k[:2] == (group, plural)]:
            STORE.commit("DELETED", key, copy(STORE.objs[key]))
    resource_list.cache_clear()


def custom_crd(group, plural):
    return STORE.objs.get(("apiextensions.k8s.io", "customresourcedefinitions", None,
                           (KINDS.get((group, plural)) or {}).get("crd")))


def crd_version(crd, version):
    return next((v for v in ((crd or {}).get("spec") or {}).get("versions") or [] if v.get("name") == version), {})


def version_priority(v):
    """kube's version order (k8s.io/apimachinery/pkg/version): GA, then beta,
    then alpha, higher numbers first; others last, by name."""
    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", v)
    if not m:
        return (3, 0, 0, v)
    return ({None: 0, "beta": 1, "alpha": 2}[m.group(2)], -int(m.group(1)), -int(m.group(3) or 0), v)


def custom_group_docs():
    """/apis entries of the --custom-resources groups."""
    docs = []
    for group, crds in CUSTOM.items():
        versions = sorted({v["name"] for n in crds for v in STORE.objs[(
            "apiextensions.k8s.io", "customresourcedefinitions", None, n)]["spec"]["versions"] if v.get("served")},
            key=version_priority)
        gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        docs.append({"name": group, "versions": gvs, "preferredVersion": gvs[0]})
    return docs


def custom_resource_list(group, version):
    """/apis/G/V of a --custom-resources group, as kube-apiserver 1.36.2 answered it (but storageVersionHash)."""
    resources = []
    for name in CUSTOM[group]:
        spec = STORE.objs[("apiextensions.k8s.io", "customresourcedefinitions", None, name)]["spec"]
        v, names = crd_version({"spec": spec}, version), spec["names"]
        if not v.get("served"):
            continue
        namespaced = spec.get("scope") != "Cluster"
        resources.append(dict({"name": names["plural"],
                               "singularName": names.get("singular") or names["kind"].lower(),
                               "namespaced": namespaced, "kind": names["kind"],
                               "verbs": ["delete", "deletecollection", "get", "list", "patch", "create", "update",
                                         "watch"]},
                              **{k: names[k] for k in ("shortNames", "categories") if names.get(k)}))
        if "status" in (v.get("subresources") or {}):  # (scale is not served here)
            resources.append({"name": f"{names['plural']}/status", "singularName": "", "namespaced": namespaced,
                              "kind": names["kind"], "verbs": ["get", "patch", "update"]})
    return dumps({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{version}",
                  "resources": resources})


def json_path_value(obj, path):
    """A printer column's value: dotted paths only (`.status.ready`); None when absent."""
    for k in path.strip(".").split("."):
        obj = obj.get(k) if isinstance(obj, dict) else None
    return obj


def custom_table(r):
    """(columnDefinitions, cells of one object) for a --custom-resources kind:
    Name, then the CRD's additionalPrinterColumns (as kube-apiserver 1.36.2
    answered: no Age column besides them), or Age when it declares none."""
    cols = crd_version(custom_crd(r.group, r.plural), r.version).get("additionalPrinterColumns") or [
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    defs = [NAME_COLUMN] + [{"name": c["name"], "type": c["type"], "format": c.get("format", ""),
                             "description": c.get("description") or
                             f"Custom resource definition column (in JSONPath format): {c['jsonPath']}",
                             "priority": c.get("priority", 0)} for c in cols]
    return defs, lambda o: [o["metadata"]["name"]] + [json_path_value(o, c["jsonPath"]) for c in cols]


def reverse_domain(group):
    return ".".join(reversed(group.split(".")))


def camel(group):
    """samplecontroller.team1.example.com -> samplecontrollerTeam1ExampleCom (OpenAPI tags, operationIds)."""
    first, *rest = re.split(r"[.-]", group)
    return first + "".join(p[:1].upper() + p[1:] for p in rest)


def custom_openapi_v3(group, version):
    """/openapi/v3/apis/G/V of a --custom-resources group: the captured Foo
    document (kube-1.29 renamed/026) with its group, version, kind and plural
    replaced by each namespaced CRD's, the Foo schema by the CRD's (apiVersion,
    kind and metadata as the capture has them), and the subresources' paths
    (and Scale's schemas) the CRD doesn't have left out. kube-apiserver 1.36.2
    sent this shape for test_publish.py's CRD (its paths, schema names and the
    CRD's schema under them; 1.36 adds ShardInfo to meta's schemas, not here)."""
    text = captured_129("renamed/026-openapi-v3-group-hash-json").decode()
    doc = {"openapi": "3.0.0", "info": {}, "paths": {}, "components": {"schemas": {}}}
    for name in CUSTOM.get(group, []):
        spec = STORE.objs[("apiextensions.k8s.io", "customresourcedefinitions", None, name)]["spec"]
        v = crd_version({"spec": spec}, version)
        if not v.get("served") or spec.get("scope") == "Cluster":
            continue
        kind, plural = spec["names"]["kind"], spec["names"]["plural"]
        t = text.replace(GROUP, group).replace(reverse_domain(GROUP), reverse_domain(group))
        t = t.replace(camel(GROUP), camel(group)).replace(camel(GROUP)[:1].upper() + camel(GROUP)[1:],
                                                             camel(group)[:1].upper() + camel(group)[1:])
        t = t.replace("v1alpha1", version).replace("V1alpha1", version[:1].upper() + version[1:])
        one = json.loads(t.replace("foos", plural).replace("Foo", kind))
        subs = v.get("subresources") or {}
        one["paths"] = {p: item for p, item in one["paths"].items()
                        if not (p.endswith("/scale") and "scale" not in subs)
                        and not (p.endswith("/status") and "status" not in subs)}
        schemas = one["components"]["schemas"]
        if "scale" not in subs:
            for k in [k for k in schemas if k.startswith("io.k8s.api.autoscaling.")]:
                del schemas[k]
        key = f"{reverse_domain(group)}.{version}.{kind}"
        root = copy((v.get("schema") or {}).get("openAPIV3Schema") or {"type": "object"})
        meta = {k: schemas[key]["properties"][k] for k in ("apiVersion", "kind", "metadata")}
        root["properties"] = dict(meta, **(root.get("properties") or {}))
        schemas[key] = dict(root, **{"x-kubernetes-group-version-kind": [
            {"group": group, "kind": kind, "version": version}]})
        doc["info"] = one["info"]
        doc["paths"].update(one["paths"])
        doc["components"]["schemas"].update(schemas)
    doc["components"]["schemas"] = dict(sorted(doc["components"]["schemas"].items()))
    return json.dumps(doc, separators=(",", ":")).encode()


@functools.lru_cache(maxsize=None)
def resource_list(group, version):
    if group in CUSTOM:
        return custom_resource_list(group, version)
    if group in ALSO:
        return as_group(resource_list(GROUP, version), group)
    if group == GROUP:
        body = captured({"v1alpha1": "renamed/264-discovery-v1alpha1-json",
                         "v1beta1": "renamed/266-discovery-v1beta1-json"}[version])
        if SHORT_PREFIX:
            names = b'"shortNames":["fo"],"categories":["all"]'
            assert names in body
            body = body.replace(names, b'"shortNames":["%sfo"],"categories":["all","%ssamplecontroller"]'
                                % (SHORT_PREFIX.encode(), SHORT_PREFIX.encode()))
        return body
    if (group, version) == ("apiregistration.k8s.io", "v1"):
        return captured("common/008-discovery-apiregistration-v1-json")
    # Not captured: synthesized from the captured OpenAPI v2 (common/012), whose
    # paths name each resource of the group-version with its kind and verbs
    # (shortNames, categories and storageVersionHash are not in it). kubectl
    # refuses empty lists ("received empty response"), so these can't be empty.
    prefix, res = f"/apis/{group}/{version}/", {}
    for path, item in openapi_v2_paths():
        if not path.startswith(prefix):
            continue
        rest = path[len(prefix):].removeprefix("watch/")
        namespaced = rest.startswith("namespaces/{namespace}/")
        parts = rest.split("/")[2:] if namespaced else rest.split("/")
        if len(parts) > 1 and parts[1] != "{name}":
            continue
        name = "/".join(parts[:1] + parts[2:3])
        for op in item.values():
            gvk = op.get("x-kubernetes-group-version-kind") if isinstance(op, dict) else None
            if not gvk or op.get("x-kubernetes-action") not in VERBS:
                continue
            e = res.setdefault(name, {"name": name, "singularName": "", "namespaced": False, "kind": gvk["kind"],
                                      "verbs": []})
            e["namespaced"] |= namespaced
            if (gvk["group"], gvk["version"]) != (group, version):  # deployments/scale: autoscaling/v1 Scale
                e.update(group=gvk["group"], version=gvk["version"])
            e["verbs"] = sorted(set(e["verbs"]) | {VERBS[op["x-kubernetes-action"]]})
    return dumps({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv(group, version),
                  "resources": [res[k] for k in sorted(res)]})


# ---- aggregated discovery (--aggregated-discovery; off by default) ----
# kube-apiserver 1.27+ answers `/apis` with an `APIGroupDiscoveryList`
# (apidiscovery.k8s.io v2beta1, v2 since 1.30) when Accept asks for it first:
# every group of /apis in its order, each version with its resources. Built
# here from what the legacy documents serve (apis_doc, resource_list), so the
# --also-group groups are in it; a group-version listed but not served (ORIG
# without --also-group) has `freshness: Stale` and no resources. `/api` too
# (the core group), as client-go uses the resources of aggregated discovery
# only when both answer it. JSON only (a protobuf range is skipped, as for
# the other answers).
# 1.24, the captures' server, predates it, so by default the plain list answers.
AGGREGATED_DISCOVERY = {"on": False}


def aggregated_accept(accept):
    """'v2' or 'v2beta1' when the first JSON range of Accept asks for aggregated discovery, else None."""
    for rng in (accept or "").split(","):
        parts = [p.strip() for p in rng.split(";")]
        params = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
        if parts[0] not in ("application/json", "application/*", "*/*"):
            continue
        if (params.get("g"), params.get("as")) == ("apidiscovery.k8s.io", "APIGroupDiscoveryList") \
                and params.get("v") in ("v2", "v2beta1"):
            return params["v"]
        return None
    return None


def aggregated_resources(resource_list_doc, custom):
    """An APIResourceList's resources as APIResourceDiscovery entries (subresources under their resource).
    A custom resource's `responseKind` names its group and version, a built-in's leaves them empty
    (kube-1.29 common/002)."""
    out, subs = {}, []
    group, _, version = resource_list_doc["groupVersion"].rpartition("/")
    for r in resource_list_doc["resources"]:
        kind = {"group": r.get("group", group if custom else ""),
                "version": r.get("version", version if custom else ""), "kind": r["kind"]}
        name, _, sub = r["name"].partition("/")
        if sub:
            subs.append((name, {"subresource": sub, "responseKind": kind, "verbs": r["verbs"]}))
            continue
        out[name] = dict({"resource": name, "responseKind": kind,
                          "scope": "Namespaced" if r["namespaced"] else "Cluster",
                          "singularResource": r.get("singularName", ""), "verbs": r["verbs"]},
                         **{k: r[k] for k in ("shortNames", "categories") if r.get(k)})
    for name, sub in subs:
        if name in out:
            out[name].setdefault("subresources", []).append(sub)
    return list(out.values())


def aggregated_discovery(path, version):
    """`/api` (the core group: one item without a name) or `/apis` as an APIGroupDiscoveryList."""
    served, items = served_group_versions(), []
    if path == "/api":
        items.append({"metadata": {"creationTimestamp": None}, "versions": [{"version": "v1", "freshness": "Current",
                      "resources": aggregated_resources(cjson("common/004-discovery-api-v1-json"), False)}]})
    for g in apis_doc()["groups"] if path == "/apis" else []:
        versions = []
        for v in g["versions"]:
            if v["groupVersion"] in served:
                versions.append({"version": v["version"], "freshness": "Current", "resources": aggregated_resources(
                    json.loads(resource_list(g["name"], v["version"])), g["name"] in (GROUP, *ALSO, *CUSTOM))})
            else:
                versions.append({"version": v["version"], "freshness": "Stale"})
        items.append({"metadata": {"name": g["name"], "creationTimestamp": None}, "versions": versions})
    return (dumps({"kind": "APIGroupDiscoveryList", "apiVersion": f"apidiscovery.k8s.io/{version}", "metadata": {},
                   "items": items}),
            f"application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList")


def discovery(path, accept):
    """Discovery, /version, health and OpenAPI: (body, content type), or None."""
    js, text = "application/json", "text/plain; charset=utf-8"
    if path in ("/api", "/apis") and AGGREGATED_DISCOVERY["on"] and aggregated_accept(accept):
        return aggregated_discovery(path, aggregated_accept(accept))
    if path in ("/api", "/apis"):
        # 1.24 predates aggregated discovery: given a JSON fallback in Accept it
        # answers the plain list (common/010), else 406 (common/011).
        accepted(accept, table_ok=False)
        return (captured("common/002-discovery-api-json") if path == "/api" else dumps(apis_doc())), js
    fixed = {"/api/v1": "common/004-discovery-api-v1-json", "/version": "common/001-version",
             f"/apis/{GROUP}": "renamed/262-discovery-group-json"}
    fixed.update({f"/apis/{group}": "renamed/262-discovery-group-json" for group in ALSO})
    if path in fixed:
        return as_group(captured(fixed[path]), path.split("/")[2]) if path.startswith("/apis/") else \
            captured(fixed[path]), js
    if path in ("/healthz", "/livez", "/readyz"):
        return b"ok", text
    # OpenAPI as captured. The capture cluster had both Foo groups, so these
    # documents name ORIG too (like /apis: regroup must shadow it). HIDE_ORIG
    # strips it from the JSON forms (not from the protobuf v2).
    if path == "/openapi/v2":
        if "protobuf" in (accept or ""):
            return captured("common/013-openapi-v2-protobuf"), "application/octet-stream"
        if not HIDE_ORIG:
            return captured("common/012-openapi-v2-json"), text
        doc = cjson("common/012-openapi-v2-json")
        doc["paths"] = {k: v for k, v in doc["paths"].items() if not k.startswith(f"/apis/{ORIG}/")}
        doc["definitions"] = {k: v for k, v in doc["definitions"].items()
                              if not k.startswith("io.k8s.samplecontroller.")}
        return dumps(doc), text
    if path == "/openapi/v3":  # the index, as kube-apiserver 1.29 serves it (kube-1.29 renamed/025)
        return openapi_v3_index(), text
    if path.startswith("/openapi/"):
        raise page_not_found()  # the other v3 documents were not captured
    m = re.fullmatch(r"/apis/([^/]+)(?:/([^/]+))?/?", path)
    if not m:
        return None
    group, version = m.groups()
    for g in apis_doc()["groups"]:
        if g["name"] == group and group != ORIG and version is None:
            return dumps(dict({"kind": "APIGroup", "apiVersion": "v1"}, **g)), js
    if version is not None and gv(group, version) in served_group_versions():
        return resource_list(group, version), js
    raise page_not_found()


# ---- OpenAPI v3, as kube-apiserver 1.29 serves it (kube-1.29 renamed/025-032) -----------------
# The index names each document with `?hash=<upper-case hex SHA-512 of its JSON>`
# (026's body hashes to the value in 025 and in 026's ETag). A document asked for
# with its current hash is `Cache-Control: public, immutable` with a one-year
# Expires (026), another hash is a 301 to the current one (029), no hash is
# `no-cache, private` (030); If-None-Match with the ETag is a 304 (028, 031);
# an Accept it does not serve is a bare 406 (032); every answer has `Vary: Accept`.
V3_PROTOBUF = "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"
V3_PROTOBUF_CTYPE = "application/com.github.proto-openapi.spec.v3.v1.0+protobuf"  # as 027 answered


def openapi_v3_documents():
    """'apis/<group>/<version>' -> (JSON bytes, gnostic protobuf bytes or None).
    v1alpha1 is kube-1.29's capture (JSON and protobuf); v1beta1 was captured by
    1.24 only (renamed/272), in JSON: a protobuf-only Accept for it is a 406 here
    (a real server would answer protobuf)."""
    docs = {f"apis/{GROUP}/v1alpha1": (captured_129("renamed/026-openapi-v3-group-hash-json"),
                                       captured_129("renamed/027-openapi-v3-group-hash-protobuf")),
            f"apis/{GROUP}/v1beta1": (captured("renamed/272-openapi-v3-group-v1beta1-json"), None)}
    for group in ALSO:  # JSON only: the protobuf capture can't be renamed by replacing bytes
        docs.update({f"apis/{group}/{v}": (as_group(docs[f"apis/{GROUP}/{v}"][0], group), None)
                     for v in ("v1alpha1", "v1beta1")})
    for g in custom_group_docs():  # --custom-resources: JSON only
        docs.update({f"apis/{g['name']}/{v['version']}": (custom_openapi_v3(g["name"], v["version"]), None)
                     for v in g["versions"]})
    return docs


def v3_hash(body):
    return hashlib.sha512(body).hexdigest().upper()


def openapi_v3_index():
    """The index (Go's json.Marshal: compact, keys sorted, no newline), naming
    only the documents this stand-in serves (a real one names every
    group-version), plus ORIG's entries from the capture unless HIDE_ORIG (the
    deliberate leftover: listed, its documents 404)."""
    paths = {} if HIDE_ORIG else {k: v for k, v in json.loads(captured_129("renamed/025-openapi-v3-index"))[
        "paths"].items() if k.startswith(f"apis/{ORIG}/")}
    for gvpath, (js, _) in openapi_v3_documents().items():
        paths[gvpath] = {"serverRelativeURL": f"/openapi/v3/{gvpath}?hash={v3_hash(js)}"}
    if PROXY_CLIENT:
        paths.update(aggregated_v3_paths())
    return json.dumps({"paths": dict(sorted(paths.items()))}, separators=(",", ":")).encode()


# ---- aggregation -----------------------------------------------------------------------
# With --proxy-client-cert/--proxy-client-key the stand-in also plays the
# aggregator of kube-apiserver as the fixtures' cluster ran it
# (--enable-aggregator-routing): a request under /apis/{group}/{version} of a
# registered APIService goes to the first address of its Service's Endpoints,
# over TLS verified with spec.caBundle for {service}.{namespace}.svc, with the
# proxy-client certificate and the caller's identity in X-Remote-* headers.
# The caller is the stand-in's one caller, or the user it impersonates
# (`identity`; with --rbac, authorized before it is proxied).
# An APIService of a group the captured /apis lacks (test_publish.py's) also
# puts its group into /apis and /apis/{group} (versions by versionPriority),
# and into the OpenAPI v3 index the entries the backend's own index has for
# its group-version, read from the backend at each index request as
# system:aggregator (system:masters); /openapi/v3/apis/{group}/{version} is
# proxied to the backend as that user. Not done: the availability check and
# APIService status, aggregated OpenAPI v2, the order kube-aggregator gives
# groups in /apis (groupPriorityMinimum: these come last).
PROXY_CLIENT = {}  # "cert", "key": PEM files, set by main
CALLER = ("standin-admin", ["system:masters", "system:authenticated"])  # every caller (credentials aren't checked)
AGGREGATOR = ("system:aggregator", ["system:masters"])  # kube-aggregator's own OpenAPI reads
NOT_FORWARDED = {"authorization", "connection", "keep-alive", "transfer-encoding", "content-length", "host", "upgrade",
                 "proxy-connection", "te", "trailer"}


def aggregated():
    """Groups with a registered APIService that points at a Service."""
    with STORE.cond:
        return {o["spec"].get("group") for (g, p, _, _), o in STORE.objs.items()
                if (g, p) == ("apiregistration.k8s.io", "apiservices") and (o.get("spec") or {}).get("service")}


def apiservice_for(path):
    m = re.match(r"/apis/([^/]+)/([^/?]+)(?:/|$)", path)
    if not m or not PROXY_CLIENT:
        return None
    with STORE.cond:
        o = STORE.objs.get(("apiregistration.k8s.io", "apiservices", None, f"{m.group(2)}.{m.group(1)}"))
    return copy(o) if o and (o.get("spec") or {}).get("service") else None


def uncaptured_apiservices():
    """Registered APIServices (with a Service) of groups the captured /apis lacks."""
    with STORE.cond:
        found = [(k, o) for k, o in STORE.objs.items()
                 if k[:2] == ("apiregistration.k8s.io", "apiservices") and (o.get("spec") or {}).get("service")
                 and o["spec"].get("group") not in captured_groups() | set(CUSTOM)]
        return [copy(o) for _, o in sorted(found)]


def aggregated_group_docs():
    """/apis entries of the uncaptured APIServices' groups."""
    by_group = {}
    for o in uncaptured_apiservices():
        by_group.setdefault(o["spec"]["group"], []).append(o["spec"])
    docs = []
    for group, specs in by_group.items():
        specs.sort(key=lambda sp: (-(sp.get("versionPriority") or 0), version_priority(sp["version"])))
        gvs = [{"groupVersion": f"{group}/{sp['version']}", "version": sp["version"]} for sp in specs]
        docs.append({"name": group, "versions": gvs, "preferredVersion": gvs[0]})
    return docs


def aggregated_v3_paths():
    """The OpenAPI v3 index entries of the uncaptured APIServices, from their backends' indexes."""
    paths = {}
    for o in uncaptured_apiservices():
        key = f"apis/{o['spec']['group']}/{o['spec']['version']}"
        try:
            conn, resp = backend_call(o, "GET", "/openapi/v3", [("Accept", "application/json")], b"", *AGGREGATOR)
            try:
                index = json.loads(resp.read()) if resp.status == 200 else {}
            finally:
                conn.close()
        except (ApiError, ValueError):
            continue  # as kube-aggregator leaves out a backend it can't read
        if key in (index.get("paths") or {}):
            paths[key] = index["paths"][key]
    return paths


def backend_call(apisvc, method, path, headers, body, user, groups):
    """Sends a request to an APIService's backend (aggregation above) with
    the proxy-client certificate and the user in X-Remote-* headers:
    (connection, response); 503 `service unavailable` when it can't be reached."""
    spec = apisvc["spec"]
    ref = spec["service"]
    ip, port = endpoint_of(ref)
    if spec.get("insecureSkipTLSVerify"):
        ctx = ssl._create_unverified_context()
    else:
        try:
            ctx = ssl.create_default_context(cadata=base64.b64decode(spec.get("caBundle") or "").decode())
        except (ValueError, ssl.SSLError) as e:
            raise service_unavailable(f"caBundle of {apisvc['metadata']['name']}: {e}")
    ctx.load_cert_chain(PROXY_CLIENT["cert"], PROXY_CLIENT["key"])
    ctx.set_alpn_protocols(["http/1.1"])
    try:
        sock = socket.create_connection((ip, port), timeout=10)
        sock = ctx.wrap_socket(sock, server_hostname=f"{ref['name']}.{ref['namespace']}.svc")
        sock.settimeout(None)
    except (OSError, ssl.SSLError) as e:
        raise service_unavailable(f"{ip}:{port}: {e}")
    conn = http.client.HTTPConnection(ip, port)
    conn.sock = sock
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", f"{ref['name']}.{ref['namespace']}.svc:{ref.get('port', 443)}")
        for k, v in headers:
            conn.putheader(k, v)
        conn.putheader("X-Remote-User", user)
        for g in groups:
            conn.putheader("X-Remote-Group", g)
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        return conn, conn.getresponse()
    except (OSError, http.client.HTTPException) as e:
        conn.close()
        raise service_unavailable(f"{ip}:{port}: {e}")


def service_unavailable(why):
    """The aggregator's answer when it can't reach the service (orig/269); the
    reason goes to the log only, as kube-apiserver does."""
    sys.stderr.write(f"aggregator: service unavailable: {why}\n")
    return ApiError(503, "", "", raw=b"service unavailable\n", ctype="text/plain; charset=utf-8")


def endpoint_of(ref):
    """(ip, port) behind a Service reference, resolved through its Endpoints."""
    ns, name, port = ref["namespace"], ref["name"], ref.get("port", 443)
    with STORE.cond:
        svc, eps = STORE.objs.get(("", "services", ns, name)), STORE.objs.get(("", "endpoints", ns, name))
    try:
        sport = next(p for p in svc["spec"]["ports"] if p["port"] == port)
        subset = eps["subsets"][0]
        eport = next(p["port"] for p in subset["ports"] if p.get("name") == sport.get("name"))
        return subset["addresses"][0]["ip"], eport
    except (TypeError, KeyError, IndexError, StopIteration):
        raise service_unavailable(f"no endpoint for service {ns}/{name} port {port}")


def subject_access_review(sar):
    """The stand-in's authorization: the caller may do anything in a group this
    cluster has (core, the groups of /apis but ORIG); a review naming a group
    it doesn't have (an app's un-renamed group) is denied, as RBAC would deny
    it to roles written for the cluster's groups. With --rbac, a user not in
    system:masters gets what the stored RBAC grants (rbac_allows); the status
    is `{"allowed": B}` without a reason, as kube-apiserver 1.36.2 answered
    for a user with no binding and for system:masters."""
    spec = sar.get("spec") or {}
    if OPTS["rbac"] and "system:masters" not in (spec.get("groups") or []):
        attrs = spec.get("resourceAttributes")
        if attrs is not None:
            what = ("resource", attrs.get("verb", ""), attrs.get("group", ""), attrs.get("resource", ""),
                    attrs.get("subresource") or None, attrs.get("namespace") or None, attrs.get("name") or None)
        else:
            nra = spec.get("nonResourceAttributes") or {}
            what = ("nonresource", nra.get("verb", ""), nra.get("path", ""))
        return dict(sar, status={"allowed": rbac_allows(spec.get("user", ""), spec.get("groups") or [], what)})
    attrs = spec.get("resourceAttributes")
    groups = {g["name"] for g in apis_doc()["groups"] if not served_nowhere(g["name"])} | {""}
    allowed = attrs is None or attrs.get("group", "") in groups
    reason = "" if allowed else f"stand-in: no such API group {attrs.get('group')!r} on this cluster"
    return dict(sar, status=dict({"allowed": allowed}, **({"reason": reason} if reason else {})))


# ---- RBAC (--rbac; off by default) -----------------------------------------------------
# kube-apiserver's RBAC authorizer, at its minimum, for test_publish.py: a
# caller in system:masters may do anything; any other (a service account by a
# token issued here, or the user a request impersonates) gets what the rules
# of the Roles and ClusterRoles bound to it grant (RoleBindings in the
# request's namespace, ClusterRoleBindings; subjects User, Group,
# ServiceAccount; apiGroups, resources with `res/sub`, verbs, resourceNames,
# `*`), and every authenticated user the discovery paths (the bootstrap
# ClusterRoles system:discovery and system:public-info-viewer). Refusals are
# kube-apiserver's 403 Status, as 1.36.2 sent them. No aggregation of
# ClusterRoles, no nonResourceURLs rules, no escalation checks.
DISCOVERY_PATHS = ("/api", "/apis", "/openapi", "/version", "/healthz", "/livez", "/readyz")


def rbac_rules(user, groups, ns):
    """The rules of every role bound to this subject (cluster-wide, and in `ns`)."""
    def bound(subjects):
        for s in subjects or []:
            kind, name = s.get("kind"), s.get("name")
            if kind == "User" and name == user or kind == "Group" and name in groups or \
                    kind == "ServiceAccount" and f"system:serviceaccount:{s.get('namespace')}:{name}" == user:
                return True
        return False
    rbac, rules = "rbac.authorization.k8s.io", []
    with STORE.cond:
        for (g, p, bns, _), b in STORE.objs.items():
            if g != rbac or p not in ("rolebindings", "clusterrolebindings") or not bound(b.get("subjects")):
                continue
            if p == "rolebindings" and bns != ns:
                continue
            ref = b.get("roleRef") or {}
            role = STORE.objs.get((rbac, "roles", bns, ref.get("name"))) if ref.get("kind") == "Role" else \
                STORE.objs.get((rbac, "clusterroles", None, ref.get("name")))
            rules += (role or {}).get("rules") or []
    return rules


def rbac_allows(user, groups, what):
    """`what`: ("resource", verb, group, resource, subresource, namespace, name)
    or ("nonresource", verb, path)."""
    if "system:masters" in groups:
        return True
    if what[0] == "nonresource":
        _, verb, path = what
        return verb == "get" and "system:authenticated" in groups and \
            any(path == p or path.startswith(p + "/") for p in DISCOVERY_PATHS)
    _, verb, group, resource, sub, ns, name = what
    res = f"{resource}/{sub}" if sub else resource
    for rule in rbac_rules(user, groups, ns):
        if any(v in ("*", verb) for v in rule.get("verbs") or []) and \
                any(g in ("*", group) for g in rule.get("apiGroups") or []) and \
                any(x in ("*", res) for x in rule.get("resources") or []) and \
                (not rule.get("resourceNames") or name in rule["resourceNames"]):
            return True
    return False


def request_attributes(method, path, q):
    """What RBAC is asked about a request: ("resource", verb, group, resource,
    subresource, namespace, name) or ("nonresource", verb, path)."""
    m = re.fullmatch(r"/(?:api/v1|apis/([^/]+)/[^/]+)/(.+)", path)
    if not m:
        return "nonresource", method.lower(), path
    parts = [unquote(p) for p in m.group(2).split("/")]
    watch = parts[0] == "watch"
    parts = parts[1:] if watch else parts
    ns = None
    if parts[0] == "namespaces" and len(parts) >= 3:
        ns, parts = parts[1], parts[2:]
    resource, name, sub = (parts + [None, None])[:3]
    watch = watch or q.get("watch") in WATCH_TRUE
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method) or (
        ("delete" if name else "deletecollection") if method == "DELETE" else
        "watch" if watch else "get" if name else "list")
    return "resource", verb, m.group(1) or "", resource, sub, ns, name


def forbidden(user, what):
    """kube-apiserver's 403, as 1.36.2 worded it."""
    if what[0] == "nonresource":
        return ApiError(403, "Forbidden", f'forbidden: User "{user}" cannot {what[1]} path "{what[2]}"', {})
    _, verb, group, resource, sub, ns, name = what
    qualified = f"{resource}.{group}" if group else resource
    scope = f' in the namespace "{ns}"' if ns else " at the cluster scope"
    details = dict({"name": name} if name else {}, **({"group": group} if group else {}), kind=resource)
    return ApiError(403, "Forbidden", f'{qualified}{f" {json.dumps(name)}" if name else ""} is forbidden: User '
                    f'"{user}" cannot {verb} resource "{f"{resource}/{sub}" if sub else resource}" in API group '
                    f'"{group}"{scope}', details)


def identity(headers, bearer):
    """(user, groups) of a request: the user it impersonates (Impersonate-User,
    kubectl --as: the stand-in's one caller is in system:masters, which may
    impersonate anyone), with its Impersonate-Group groups and
    system:authenticated (as kube-apiserver adds it); else the service account
    of a token issued here; else the stand-in's one caller (CALLER: other
    credentials are not checked)."""
    user = headers.get("Impersonate-User")
    if user:
        groups = headers.get_all("Impersonate-Group") or []
        if user != "system:anonymous" and not {"system:authenticated", "system:unauthenticated"} & set(groups):
            groups.append("system:authenticated")
        return user, groups
    if bearer in TOKEN_USERS:
        ns, name = TOKEN_USERS[bearer]
        return (f"system:serviceaccount:{ns}:{name}",
                ["system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"])
    return CALLER[0], list(CALLER[1])


# TokenRequest, as far as a credential test needs it: a token bound to a
# Secret is, as on a real cluster, refused (401) once that Secret is gone.
# Other bearer tokens are checked only with --token / --token-file.
ISSUED = "standin-sa-"
TOKENS = {}  # token -> (namespace, secret name, secret uid)
TOKEN_USERS = {}  # token -> (namespace, service account): its user, with --rbac


def token_request(r, tr):
    with STORE.cond:
        if ("", "serviceaccounts", r.ns, r.name) not in STORE.objs:
            raise not_found("", "serviceaccounts", r.name)
        ref = (tr.get("spec") or {}).get("boundObjectRef")
        secret = STORE.objs.get(("", "secrets", r.ns, (ref or {}).get("name")))
        if ref is not None and (ref.get("kind") != "Secret" or secret is None):
            raise ApiError(422, "Invalid", "stand-in: spec.boundObjectRef must name an existing Secret")
        token = ISSUED + uuid.uuid4().hex
        TOKENS[token] = (r.ns, ref["name"], secret["metadata"]["uid"]) if ref else None
        TOKEN_USERS[token] = (r.ns, r.name)
    ttl = int((tr.get("spec") or {}).get("expirationSeconds") or 3600)
    exp = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=ttl)
    return dict(tr, metadata=dict(tr.get("metadata") or {}, name=r.name, namespace=r.ns, creationTimestamp=None),
                status={"token": token, "expirationTimestamp": exp.strftime("%Y-%m-%dT%H:%M:%SZ")})


def issued_token_valid(token):
    with STORE.cond:
        if token not in TOKENS:
            return False
        if TOKENS[token] is None:  # bound to nothing: valid until it expires (not checked here)
            return True
        ns, name, uid = TOKENS[token]
        secret = STORE.objs.get(("", "secrets", ns, name))
        return secret is not None and secret["metadata"]["uid"] == uid


# ---- requests -------------------------------------------------------------------------

class Req:
    """A resource path: group, version, namespace, plural, name, subresource."""

    def __init__(self, path):
        m = re.fullmatch(r"/(?:api/(v1)|apis/([^/]+)/([^/]+))/(.+)", path)
        if not m or gv(m.group(2) or "", m.group(1) or m.group(3)) not in served_group_versions():
            raise page_not_found()  # e.g. ORIG: that group does not exist on this cluster
        self.group, self.version = m.group(2) or "", m.group(1) or m.group(3)
        parts = [unquote(p) for p in m.group(4).split("/")]
        self.legacy_watch = parts[0] == "watch"
        parts = parts[1:] if self.legacy_watch else parts
        self.ns = None
        if parts[0] == "namespaces" and len(parts) >= 3:
            self.ns, parts = parts[1], parts[2:]
        self.plural, self.name, self.sub = (parts + [None, None])[:3]
        self.kind = KINDS.get((self.group, self.plural))
        if self.kind is None or self.version not in self.kind["versions"] or len(parts) > 3 \
                or bool(self.kind.get("cluster")) and self.ns is not None \
                or self.sub not in (None, "status", *self.kind.get("subs", [])) \
                or (self.sub == "status" and not self.kind["status"]):
            # no store for it here (a real server would serve the kind or subresource)
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        self.key = (self.group, self.plural, self.ns, self.name)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version, sys_version = "regroup-e2e-standin", ""

    def log_message(self, fmt, *args):  # replaced by log_request below
        pass

    def log_request(self, code="-", size="-"):
        extra = ""
        if self.server.verbose:  # these headers only: never Authorization, never bodies
            extra = " " + json.dumps({h: self.headers[h] for h in ("Accept", "Content-Type", "User-Agent")
                                      if self.headers.get(h)})
        sys.stderr.write(f"{self.command} {self.path} {code}{extra}\n")
        sys.stderr.flush()

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":  # a proxy may stream a rewritten body
            data = b""
            while size := int(self.rfile.readline().split(b";")[0].strip(), 16):
                data += self.rfile.read(size)
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                pass
            return data
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def reply(self, code, body, ctype="application/json", warning=None):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Cache-Control", "no-cache, private")
        for w in [warning] + (getattr(self, "warnings", []) if code < 400 else []):
            if w:
                self.send_header("Warning", w)
        big = len(body) > 2048  # like Go's net/http: a body past its buffer goes out chunked
        self.send_header(*(("Transfer-Encoding", "chunked") if big else ("Content-Length", str(len(body)))))
        self.end_headers()
        if big:
            self.chunk(body)
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.wfile.write(body)

    def handle_any(self):
        self.warnings = []  # Warning headers of this request's answer (besides deprecation)
        body = self.read_body()
        url = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(url.query).items()}
        accept = self.headers.get("Accept")
        # Protobuf: a few real captured protobuf answers are replayed byte for
        # byte at their captured paths (kinds protobuf.py can't encode, and
        # the captures test_protobuf.py and the soak pin); other protobuf
        # answers are encoded (negotiate).
        if self.command == "GET" and url.path.endswith("/foos/gzip-bomb"):
            bomb = gzip_bomb()
            return self.send(200, bomb, [("Content-Type", "application/json"), ("Content-Encoding", "gzip")])
        replay = PROTOBUF_REPLAYS.get((self.command, url.path, "watch" in q))
        if replay and "application/vnd.kubernetes.protobuf" in (accept or ""):
            case, ctype = replay
            return self.reply(200, captured(case), ctype)
        try:
            if self.server.token and self.headers.get("Authorization") != f"Bearer {self.server.token}":
                raise ApiError(401, "Unauthorized", "Unauthorized")
            if getattr(self.server, "token_file", None) and self.headers.get("Authorization") != f"Bearer {current_token(self.server)}":
                raise ApiError(401, "Unauthorized", "Unauthorized")
            bearer = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
            if bearer.startswith(ISSUED) and not issued_token_valid(bearer):
                raise ApiError(401, "Unauthorized", "Unauthorized")
            self.who = identity(self.headers, bearer)
            if OPTS["rbac"]:  # before aggregation too, as kube-apiserver authorizes before it proxies
                what = request_attributes(self.command, unquote(url.path), q)
                if not rbac_allows(*self.who, what):
                    raise forbidden(self.who[0], what)
            apisvc = apiservice_for(url.path)
            if apisvc:
                return self.aggregate(apisvc, body)
            if (self.command, url.path) == ("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews"):
                return self.reply(201, dumps(subject_access_review(self.decode(body))))
            if self.command == "GET" and url.path.startswith("/openapi/v3/"):
                return self.openapi_v3(url.path, q)
            doc = discovery(unquote(url.path), accept) if self.command == "GET" else None
            if doc is not None:
                return self.reply(200, *doc)
            r = Req(url.path)
            warning = None
            if r.version in r.kind.get("deprecated", []):  # the CRD's v1beta1: deprecated, no deprecationWarning
                warning = f'299 - "{gv(r.group, r.version)} {r.kind["kind"]} is deprecated"'
            is_watch = r.legacy_watch or q.get("watch") in WATCH_TRUE
            if "sendInitialEvents" in q:
                check_watchlist(q, is_watch)
            if self.command == "GET" and is_watch and not r.name:
                return self.watch(r, q, negotiate(accept, r), warning)
            if r.sub == "exec":
                return self.exec(r, url)
            if r.sub == "token" and self.command == "POST":
                return self.reply(201, dumps(token_request(r, self.decode(body))))
            fault = None
            # The test's own setup writes (User-Agent e2e-setup) are spared: the
            # faults are for the client under test.
            if OPTS["flaky"] and self.command != "GET" and r.ns is not None and \
                    not (self.headers.get("User-Agent") or "").startswith("e2e-setup"):
                with STORE.cond:
                    FLAKY["writes"] += 1
                    n = FLAKY["writes"]
                if n % OPTS["flaky"] == 0:
                    fault = ("refuse", "drop", "lose", "throttle")[(n // OPTS["flaky"]) % 4]
            if fault == "refuse":
                raise ApiError(503, "ServiceUnavailable", "stand-in --flaky: refused before applying")
            if fault == "throttle":  # as API Priority and Fairness rejects: 429 with Retry-After
                e = ApiError(429, "TooManyRequests", "stand-in --flaky: too many requests, please try again later")
                return self.send(429, e.body(), [("Content-Type", "application/json"), ("Retry-After", "1")])
            if fault == "drop":
                self.close_connection = True
                return
            code, obj = self.dispatch(r, q, body, accept)
            if self.command != "GET" and q.get("dryRun") != "All":
                if OPTS["finalizers"]:
                    with STORE.cond:
                        finish_finalized()
                collect_garbage()
            if fault == "lose":
                raise ApiError(500, "InternalError", "stand-in --flaky: applied, answer lost")
            if isinstance(obj, Encoded):
                self.reply(code, obj.body, obj.ctype, warning=warning)
            else:
                self.reply(code, dumps(obj), warning=warning)
        except ApiError as e:
            self.reply(e.code, e.body(), e.ctype)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

    def send(self, code, body, headers):
        """An answer with exactly these headers (and Content-Length, but on a 304)."""
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        if code != 304:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def openapi_v3(self, path, q):
        """One OpenAPI v3 document (see "OpenAPI v3" above); an uncaptured
        APIService's, from its backend (see "aggregation")."""
        for o in uncaptured_apiservices() if PROXY_CLIENT else []:
            if path == f"/openapi/v3/apis/{o['spec']['group']}/{o['spec']['version']}":
                return self.aggregate(o, b"", who=AGGREGATOR)
        doc = openapi_v3_documents().get(path[len("/openapi/v3/"):])
        if doc is None:
            raise page_not_found()  # ORIG's (listed, not served) and those never captured
        js, pb = doc
        etag, body, ctype = f'"{v3_hash(js)}"', None, None
        for rng in (self.headers.get("Accept") or "*/*").split(","):
            mt = rng.split(";")[0].strip()
            if mt in ("application/json", "application/*", "*/*"):
                body, ctype = js, "application/json"
            elif mt == V3_PROTOBUF and pb is not None:
                body, ctype = pb, V3_PROTOBUF_CTYPE
            if body is not None:
                break
        if body is None:
            return self.send(406, b"", [("Cache-Control", "no-cache, private"), ("Vary", "Accept")])
        cache = [("Cache-Control", "no-cache, private")]
        if "hash" in q:
            if q["hash"] != etag.strip('"'):
                return self.send(301, b"", [("Cache-Control", "no-cache, private"), ("Content-Type", "application/json"),
                                            ("Etag", etag), ("Location", f"{path}?hash={etag.strip(chr(34))}"),
                                            ("Vary", "Accept")])
            expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=365)
            cache = [("Cache-Control", "public, immutable"), ("Expires", expires.strftime("%a, %d %b %Y %H:%M:%S UTC"))]
        if self.headers.get("If-None-Match") == etag:
            return self.send(304, b"", cache + [("Etag", etag), ("Vary", "Accept")])
        self.send(200, body, cache + [("Content-Type", ctype), ("Etag", etag), ("Vary", "Accept")])

    def exec(self, r, url):
        """WebSocket only: a SPDY attempt (POST, `Upgrade: SPDY/3.1`) is
        refused, so a test passes only over WebSocket."""
        if self.command != "GET" or not exec_ws.is_websocket(self.headers):
            raise ApiError(400, "BadRequest", "stand-in: exec is served over WebSocket (v5.channel.k8s.io) only")
        with STORE.cond:
            if STORE.objs.get(r.key) is None:
                raise not_found("", "pods", r.name)
        q = parse_qs(url.query)
        if not exec_ws.serve_exec(self, q.get("command", []), (q.get("stdin") or [""])[-1] in WATCH_TRUE):
            raise ApiError(400, "BadRequest", f"stand-in: no {exec_ws.PROTOCOL} among the offered subprotocols")

    def aggregate(self, apisvc, body, who=None):
        """Proxies this request to the APIService's backend (aggregation above),
        as the caller (or `who`), streaming the answer back as it arrives (watches)."""
        headers = [(k, v) for k, v in self.headers.items()
                   if k.lower() not in NOT_FORWARDED and not k.lower().startswith(("x-remote-", "impersonate-"))]
        conn, resp = backend_call(apisvc, self.command, self.path, headers, body, *(who or self.who))
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in NOT_FORWARDED:
                self.send_header(k, v)
        self.send_header("Transfer-Encoding", "chunked")
        # It closes after the stream, and says so (an unannounced close races
        # the client's next request on a connection it pooled).
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            while data := resp.read1(65536):
                self.chunk(data)
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        finally:
            conn.close()

    def decode(self, body):
        ctype = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip()
        if ctype.startswith("application/vnd.kubernetes.protobuf"):
            raise ApiError(415, "UnsupportedMediaType", "stand-in: protobuf request bodies are not supported")
        try:
            return yaml.safe_load(body) if ctype == "application/apply-patch+yaml" and yaml else json.loads(body)
        except ValueError as e:
            raise ApiError(400, "BadRequest", f"stand-in could not decode the {ctype} body: {e}")

    def dispatch(self, r, q, body, accept):
        m, st = self.command, STORE
        manager = q.get("fieldManager") or (self.headers.get("User-Agent") or "unknown").split("/")[0]
        dry = q.get("dryRun") == "All"
        with st.cond:
            cur = st.objs.get(r.key) if r.name else None
            if m == "GET" and r.name:
                if cur is None:  # (a JSON Status even for a protobuf Accept: approximated)
                    raise not_found(r.group, r.plural, r.name)
                fmt = negotiate(accept, r)
                return 200, protobuf_object(r, cur) if fmt == "protobuf" else render_one(r, cur, fmt, q)
            if m == "GET":
                # limit and continue are ignored: the whole list comes in one page.
                sel, fmt, rv = selector(q), negotiate(accept, r), str(st.rv)
                objs = [o for k, o in sorted(st.objs.items()) if matches(k, o, r, sel)]
                if fmt == "table":
                    return 200, render_table(r, objs, rv, q)
                if fmt == "pom":
                    # An empty one has `"items": null`, as kube-apiserver 1.36.2
                    # answered (issue #43); a full JSON list's empty items are [].
                    return 200, {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                                 "metadata": {"resourceVersion": rv}, "items": [pom(o) for o in objs] or None}
                items = [as_version(o, r) for o in objs]
                if r.kind["builtin"]:  # typed lists leave out the items' apiVersion and kind
                    items = [{k: v for k, v in o.items() if k not in ("apiVersion", "kind")} for o in items]
                if fmt == "protobuf":
                    return 200, Encoded(protobuf.encode_list(gv(r.group, r.version), r.kind["kind"], rv, items),
                                        protobuf.CONTENT_TYPE)
                return 200, {"kind": r.kind["kind"] + "List", "apiVersion": gv(r.group, r.version),
                             "metadata": {"resourceVersion": rv}, "items": items}
            accepted(accept)  # writes answer JSON
            if m == "DELETE" and not r.name and r.kind.get("crd"):
                # deletecollection of a custom resource (what the namespace
                # controller sends): what the selector matches goes; the
                # answer is the list of what was deleted.
                sel = selector(q)
                gone = [(k, o) for k, o in sorted(st.objs.items()) if matches(k, o, r, sel)]
                for key, obj in gone if not dry else []:
                    st.commit("DELETED", key, copy(obj))
                return 200, {"kind": r.kind["kind"] + "List", "apiVersion": gv(r.group, r.version),
                             "metadata": {"resourceVersion": str(st.rv)}, "items": [as_version(o, r) for _, o in gone]}
            if m == "DELETE" and r.name and not r.sub:
                if cur is None:
                    raise not_found(r.group, r.plural, r.name)
                if OPTS["finalizers"] and not dry:
                    return delete_with_options(r, cur, q, self.decode(body) if body.strip() else {})
                if body.strip() and "protobuf" not in (self.headers.get("Content-Type") or ""):
                    opts = self.decode(body)  # (a protobuf DeleteOptions is not read: approximated)
                    check_delete_precondition(r, cur, opts if isinstance(opts, dict) else {})
                # Deleted at once: no finalizers, no graceful deletion; a namespace
                # takes its objects with it (no Terminating); dependents go after
                # (collect_garbage, in handle_any).
                for key in [k for k in st.objs if k == r.key or (r.plural == "namespaces" and k[2] == r.name)]:
                    if not dry:
                        st.commit("DELETED", key, copy(st.objs[key]))
                det = {"name": r.name, "group": r.group, "kind": r.plural, "uid": cur["metadata"]["uid"]}
                if not r.group:
                    del det["group"]
                return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": det}
            if m == "POST" and not r.name and (r.ns is None) == bool(r.kind.get("cluster")):
                if r.ns is not None and ("", "namespaces", None, r.ns) not in st.objs:
                    raise not_found("", "namespaces", r.ns)
                obj = self.pruned(r, self.check(r, self.decode(body), None), q)
                md = obj["metadata"]
                if not md.get("name"):
                    md["name"] = md["generateName"] + uuid.uuid4().hex[:5]
                key = (r.group, r.plural, r.ns, md["name"])
                if key in st.objs:
                    raise obj_error(409, "AlreadyExists", r.group, r.plural, md["name"], "{} already exists")
                if (OPTS["strict_crds"] or r.kind.get("crd")) and not r.kind["builtin"]:
                    if r.kind["status"]:
                        obj.pop("status", None)  # the status subresource is on: status is ignored on create
                    validate_custom(r, obj, md["name"])
                return 201, self.store_new(r, key, obj, manager, "Update", dry)
            if m == "PUT" and r.name:
                obj = self.pruned(r, self.check(r, self.decode(body), r.name), q)
                if cur is None:
                    raise not_found(r.group, r.plural, r.name)
                check_uid_precondition(r, cur, obj)
                if obj["metadata"].get("resourceVersion") not in (None, "", cur["metadata"]["resourceVersion"]):
                    raise conflict(r)
                if (OPTS["strict_crds"] or r.kind.get("crd")) and not r.kind["builtin"]:
                    validate_custom(r, obj, r.name)
                return 200, self.store_update(r, cur, obj, manager, "Update", dry)
            if m == "PATCH" and r.name:
                return self.patch(r, cur, body, q, manager, dry)
        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")

    def pruned(self, r, obj, q, patch=False, apply=False):
        """Prunes a custom resource about to be stored (see "pruning" above),
        answering per fieldValidation (default Warn)."""
        if r.kind["builtin"]:
            return obj
        dropped, kept = [], copy(obj)
        prune(kept, schema_for(r), "", dropped)
        if not dropped:
            return obj
        unknown = ", ".join(f'unknown field "{f}"' for f in dropped)
        if apply:  # 061, 062: whatever fieldValidation says
            msg = (f"failed to create typed patch object ({r.ns}/{r.name}; {gv(r.group, r.version)}, "
                   f"Kind={r.kind['kind']}): .{dropped[0]}: field not declared in schema")
            raise ApiError(500, "", msg, raw=dumps({"kind": "Status", "apiVersion": "v1", "metadata": {},
                                                    "status": "Failure", "message": msg, "code": 500}))
        if q.get("fieldValidation") == "Strict" and patch:  # 059, the patched object in the message
            value = json.dumps(obj, separators=(",", ":"), sort_keys=True)
            why = f"Invalid value: {json.dumps(value)}: strict decoding error: {unknown}"
            raise ApiError(422, "Invalid", f' "" is invalid: patch: {why}',
                           {"causes": [{"reason": "FieldValueInvalid", "message": why, "field": "patch"}]})
        if q.get("fieldValidation") == "Strict":  # 054
            raise ApiError(400, "BadRequest", f'{r.kind["kind"]} in version "{r.version}" cannot be handled as a '
                                              f'{r.kind["kind"]}: strict decoding error: {unknown}')
        if q.get("fieldValidation") != "Ignore":  # 055, 060: one Warning per field
            self.warnings += ['299 - ' + json.dumps(f'unknown field "{f}"') for f in dropped]
        return kept

    @staticmethod
    def check(r, obj, name):
        """What the real server checks that catches a proxy bug: the body's
        apiVersion and kind, its name and namespace against the URL. The CRD's
        schema is NOT validated."""
        if not isinstance(obj, dict) or not isinstance(obj.setdefault("metadata", {}), dict):
            raise ApiError(400, "BadRequest", "the object provided is not a JSON object")
        want, md = gv(r.group, r.version), obj["metadata"]
        # As the real decoder does, an absent apiVersion or kind is taken
        # from the URL (Kopf posts its Events without them); a different one
        # is refused.
        if not obj.get("apiVersion"):
            obj["apiVersion"] = want
        if not obj.get("kind"):
            obj["kind"] = r.kind["kind"]
        if obj.get("apiVersion") != want:
            raise ApiError(400, "BadRequest", f"the API version in the data ({obj.get('apiVersion')}) does not match "
                                              f"the expected API version ({want})")
        if obj.get("kind") != r.kind["kind"]:
            raise ApiError(400, "BadRequest", f"the kind in the data ({obj.get('kind')}) does not match the expected "
                                              f"kind ({r.kind['kind']})")
        if md.get("namespace") not in (None, r.ns):
            raise ApiError(400, "BadRequest", "the namespace of the provided object does not match the namespace "
                                              "sent on the request")
        if name is not None and md.get("name") not in (None, name):
            raise ApiError(400, "BadRequest", "the name of the object does not match the name on the URL")
        if name is None and not md.get("name") and not md.get("generateName"):
            raise ApiError(422, "Invalid", f'{r.kind["kind"]} "" is invalid: metadata.name: Required value: name or '
                                           'generateName is required')
        return obj

    @staticmethod
    def store_new(r, key, obj, manager, op, dry, applied=None):
        md = obj["metadata"]
        md.update(name=key[3], namespace=r.ns, uid=str(uuid.uuid4()), creationTimestamp=now())
        md.pop("resourceVersion", None)
        if r.ns is None:
            del md["namespace"]
        if r.plural == "namespaces":
            md.setdefault("labels", {})["kubernetes.io/metadata.name"] = key[3]
            obj.update(spec={"finalizers": ["kubernetes"]}, status={"phase": "Active"})
        if r.plural == "customresourcedefinitions":  # conditions as in renamed/036
            spec = obj.get("spec") or {}
            obj["status"] = {"conditions": [
                {"type": t, "status": "True", "lastTransitionTime": now(), "reason": why, "message": msg}
                for t, why, msg in (("NamesAccepted", "NoConflicts", "no conflicts found"),
                                    ("Established", "InitialNamesAccepted", "the initial names have been accepted"))],
                "acceptedNames": spec.get("names", {}),
                "storedVersions": [v["name"] for v in spec.get("versions", []) if v.get("storage")]}
        if r.kind["gen"]:
            md["generation"] = 1
        obj["apiVersion"] = gv(r.group, r.kind["versions"][0])  # kept in the storage version
        manage(obj, manager, op, gv(r.group, r.version), applied)
        return as_version(obj if dry else STORE.commit("ADDED", key, obj), r)

    @staticmethod
    def store_update(r, cur, obj, manager, op, dry, applied=None):
        new, old = copy(obj), cur["metadata"]
        new["apiVersion"], md = cur["apiVersion"], new["metadata"]
        for k in ("name", "namespace", "uid", "creationTimestamp", "generation", "deletionTimestamp"):
            md.pop(k, None)
            if k in old:
                md[k] = old[k]
        md.setdefault("managedFields", old.get("managedFields", []))
        if r.kind["status"]:  # status subresource: the main resource ignores status, /status all but status
            if r.sub == "status":
                new = dict(cur, status=new.get("status"), metadata=dict(old, managedFields=md["managedFields"]))
                md = new["metadata"]
            elif "status" in cur:
                new["status"] = cur["status"]
            else:
                new.pop("status", None)
        spec = lambda o: {k: v for k, v in o.items() if k not in ("metadata", "status", "apiVersion")}  # noqa: E731
        meta = lambda m: {k: v for k, v in m.items() if k not in ("managedFields", "resourceVersion")}  # noqa: E731
        if spec(new) == spec(cur) and new.get("status") == cur.get("status") and meta(md) == meta(old):
            return as_version(cur, r)  # a no-op write changes nothing, not even resourceVersion
        if r.kind["gen"] and spec(new) != spec(cur):
            md["generation"] = old.get("generation", 1) + 1
        manage(new, manager, op, gv(r.group, r.version), applied, r.sub)
        return as_version(new if dry else STORE.commit("MODIFIED", r.key, new), r)

    def patch(self, r, cur, body, q, manager, dry):
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        types = ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"]
        if r.kind["builtin"]:
            types.insert(2, "application/strategic-merge-patch+json")
        if ctype not in types:  # e.g. strategic merge patch on a custom resource (renamed/202)
            raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - "
                                                        "accepted media types include: " + ", ".join(types))
        p = self.decode(body)
        if ctype == "application/apply-patch+yaml":
            # Server-side apply, approximated: create, or merge the applied config
            # onto the live object as a merge patch would. No field ownership: no
            # conflicts (force is moot), fields a manager stops applying stay.
            if not q.get("fieldManager"):
                raise ApiError(422, "Invalid", 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required '
                                               'value: is required for apply patch')
            p = self.pruned(r, self.check(r, p, r.name), q, apply=True)
            if cur is None:
                uid = p["metadata"].get("uid")
                if uid:  # as kube-apiserver 1.36.2 answered
                    raise obj_error(409, "Conflict", r.group, r.plural, r.name, "Operation cannot be fulfilled on "
                                    f"{{}}: uid mismatch: the provided object specified uid {uid}, and no existing "
                                    "object was found")
                obj = copy(p)
                obj["metadata"]["name"] = r.name
                self.validate_patched(r, obj)
                return 201, self.store_new(r, r.key, obj, manager, "Apply", dry, applied=p)
            new = merge_patch(cur, p)
            self.validate_patched(r, new, cur)
            return 200, self.store_update(r, cur, new, manager, "Apply", dry, applied=p)
        if cur is None:
            raise not_found(r.group, r.plural, r.name)
        live = as_version(copy(cur), r)
        if ctype == "application/json-patch+json":
            new = json_patch(live, p if isinstance(p, list) else [])
        else:
            new = merge_patch(live, p, smp=ctype.startswith("application/strategic"))
        new = self.pruned(r, self.check(r, new, r.name), q, patch=True)
        if new["metadata"].get("resourceVersion") not in (None, "", cur["metadata"]["resourceVersion"]):
            raise conflict(r)  # a patch that sets resourceVersion makes it a precondition
        self.validate_patched(r, new, cur)
        return 200, self.store_update(r, cur, new, manager, "Update", dry)

    @staticmethod
    def validate_patched(r, new, cur=None):
        """A patched object (not through a subresource, whose writes change
        nothing but it): its uid may not change (422, as kube-apiserver
        1.36.2 answered a merge, JSON or apply patch carrying another uid; the
        cause twice, as it sent it); a --custom-resources kind is validated."""
        if r.sub:
            return
        uid = new["metadata"].get("uid")
        if cur is not None and uid and uid != cur["metadata"]["uid"]:
            why = f'Invalid value: "{uid}": field is immutable'
            cause = {"reason": "FieldValueInvalid", "message": why, "field": "metadata.uid"}
            raise ApiError(422, "Invalid", f'{r.kind["kind"]}.{r.group} "{r.name}" is invalid: metadata.uid: {why}'
                           if r.group else f'{r.kind["kind"]} "{r.name}" is invalid: metadata.uid: {why}',
                           dict({"name": r.name, "group": r.group, "kind": r.kind["kind"]} if r.group else
                                {"name": r.name, "kind": r.kind["kind"]}, causes=[cause, cause]))
        if r.kind.get("crd"):
            validate_custom(r, new, r.name)

    def client_gone(self):
        """During a watch the client sends nothing, so a readable connection
        that yields no byte means it closed."""
        if not select.select([self.connection], [], [], 0)[0]:
            return False
        try:
            self.connection.settimeout(0.2)
            return not self.connection.recv(1)
        except (OSError, ssl.SSLError):
            return True
        finally:
            self.connection.settimeout(None)

    def watch(self, r, q, fmt, warning):
        """Newline-delimited JSON WatchEvents, chunked; with fmt "protobuf"
        (negotiate), length-prefixed protobuf WatchEvents (protobuf.py), the
        same events in the same chunks. resourceVersion absent or
        "0": ADDED for what exists, then live events; N: every logged event after
        N (the log reaches back to start-up, so never "too old").
        sendInitialEvents=true (WatchList, already validated): ADDED for what
        exists whatever the resourceVersion ("not older than" it), then, with
        allowWatchBookmarks=true, the BOOKMARK annotated
        `k8s.io/initial-events-end` at the current resourceVersion (as
        kube-1.29 renamed/011, 013 sent it); no other BOOKMARKs.
        Ends at timeoutSeconds (default 1800 s) or when the client goes away."""
        sel, first = selector(q), [True]
        deadline = time.monotonic() + float(q.get("timeoutSeconds") or 1800)

        def frame(etype, obj):
            if fmt == "protobuf":
                return protobuf.watch_frame(etype, as_version(obj, r))
            out = render_one(r, obj, fmt, q, with_cols=first[0])  # a Table stream has columns once
            first[0] = False
            return dumps({"type": etype, "object": out})

        initial = q.get("sendInitialEvents") == "true"
        with STORE.cond:
            rv = "0" if initial else q.get("resourceVersion") or "0"
            last = STORE.rv if rv == "0" else int(rv)
            burst = b"".join(frame("ADDED", o) for k, o in sorted(STORE.objs.items())
                             if rv == "0" and matches(k, o, r, sel))
            if initial and q.get("allowWatchBookmarks") == "true" and fmt != "table":
                # An object of the watched kind with no name: only these two
                # fields (kube-1.29 renamed/011; in protobuf, every other
                # ObjectMeta value field empty, as kube-apiserver 1.36.2 sends it).
                av, kind = ("meta.k8s.io/v1", "PartialObjectMetadata") if fmt == "pom" \
                    else (gv(r.group, r.version), r.kind["kind"])
                bookmark = {"apiVersion": av, "kind": kind, "metadata": {
                    "annotations": {"k8s.io/initial-events-end": "true"}, "resourceVersion": str(last)}}
                burst += protobuf.watch_frame("BOOKMARK", bookmark) if fmt == "protobuf" \
                    else dumps({"type": "BOOKMARK", "object": bookmark})
        self.send_response(200)
        self.send_header("Content-Type", protobuf.WATCH_CONTENT_TYPE if fmt == "protobuf" else "application/json")
        self.send_header("Cache-Control", "no-cache, private")
        if warning:
            self.send_header("Warning", warning)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")  # it closes after the stream, and says so
        self.end_headers()
        # A burst goes in 2048-byte chunks that split events, as the real server's
        # did (testdata README, "Watch streams"); live events one chunk each.
        for i in range(0, len(burst), 2048):
            self.chunk(burst[i:i + 2048])
        self.wfile.flush()
        while time.monotonic() < deadline:
            with STORE.cond:
                evs = [e for e in STORE.log[last:] if e[0] > last]  # log index i holds rv i+1
                if not evs:
                    STORE.cond.wait(timeout=min(0.5, max(deadline - time.monotonic(), 0)))
            for erv, etype, key, obj, prev in evs:
                last = erv
                ev = watched(etype, key, obj, prev, r, sel)
                if ev:
                    self.chunk(frame(*ev))
            self.wfile.flush()
            if self.client_gone():
                return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


# ---- seeds and main ---------------------------------------------------------------------

def seed_objects(namespace):
    """The captured renamed-world objects, moved to `namespace`: Foos alpha, beta,
    gamma (renamed/111), Deployment alpha-deploy (renamed/121) and ConfigMaps
    alpha-cm, beta-cm (renamed/126), the last three with ownerReferences to Foos.
    The captured uids are kept, so the ownerReferences hold."""
    out = []
    for case, apiv, kind in (("renamed/111-list-foo-json", None, None),
                             ("renamed/121-list-deployment-json", "apps/v1", "Deployment"),
                             ("renamed/126-list-configmap-json", "v1", "ConfigMap")):
        for item in cjson(case)["items"]:
            item = dict({"apiVersion": apiv, "kind": kind}, **item) if apiv else item
            item["metadata"]["namespace"] = namespace
            out.append(item)
    return out


def seed(namespace):
    with STORE.cond:
        for name in dict.fromkeys(["default", "kube-system", namespace or "default"]):
            STORE.commit("ADDED", ("", "namespaces", None, name), {
                "apiVersion": "v1", "kind": "Namespace", "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"}, "metadata": {"name": name, "uid": str(uuid.uuid4()),
                                                            "creationTimestamp": now(),
                                                            "labels": {"kubernetes.io/metadata.name": name}}})
        for obj in seed_objects(namespace) if namespace else []:
            group = obj["apiVersion"].rpartition("/")[0]
            plural = next(p for (g, p), k in KINDS.items() if g == group and k["kind"] == obj["kind"])
            STORE.commit("ADDED", (group, plural, namespace, obj["metadata"]["name"]), obj)


def seed_authentication(ca_pem):
    """kube-system/extension-apiserver-authentication as kube-apiserver
    publishes it with --requestheader-* flags (kubeadm's defaults); the
    stand-in's client CA is the same CA (no client certificates are checked)."""
    data = {"client-ca-file": ca_pem, "requestheader-client-ca-file": ca_pem,
            "requestheader-allowed-names": '["front-proxy-client"]',
            "requestheader-username-headers": '["X-Remote-User"]',
            "requestheader-group-headers": '["X-Remote-Group"]',
            "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]'}
    with STORE.cond:
        STORE.commit("ADDED", ("", "configmaps", "kube-system", "extension-apiserver-authentication"), {
            "apiVersion": "v1", "kind": "ConfigMap", "data": data,
            "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system",
                         "uid": str(uuid.uuid4()), "creationTimestamp": now()}})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0, help="0: pick a free port")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--seed-namespace", default="e2e", help="namespace of the captured seed objects ('' for none)")
    ap.add_argument("--tls-cert", help="serve HTTPS with this PEM certificate (and --tls-key)")
    ap.add_argument("--tls-key")
    ap.add_argument("--token", help="require 'Authorization: Bearer TOKEN' (else 401)")
    ap.add_argument("--token-file", help="require 'Authorization: Bearer <the file's content now>' (else 401): "
                                         "read at each request, so rewriting it revokes the old token")
    ap.add_argument("--requestheader-ca", help="PEM CA of front-proxy client certificates: published in "
                                               "kube-system/extension-apiserver-authentication")
    ap.add_argument("--proxy-client-cert", help="the aggregator's client certificate (PEM; signed by that CA)")
    ap.add_argument("--proxy-client-key")
    ap.add_argument("--also-group", action="append", default=[], metavar="GROUP",
                    help=f"also serve Foo under GROUP (as {GROUP}, captures renamed; repeatable)")
    ap.add_argument("--aggregated-discovery", action="store_true",
                    help="answer /api and /apis with an APIGroupDiscoveryList when Accept asks for it "
                         "(see AGGREGATED_DISCOVERY)")
    ap.add_argument("-v", "--verbose", action="store_true", help="also log Accept, Content-Type and User-Agent")
    ap.add_argument("--finalizers", action="store_true", help="finalizers and DeleteOptions (see OPTS)")
    ap.add_argument("--strict-crds", action="store_true", help="custom resources checked against their stored "
                                                                "CRD (see OPTS)")
    ap.add_argument("--flaky", type=int, default=0, metavar="N", help="every Nth namespaced write fails (see OPTS)")
    ap.add_argument("--rbac", action="store_true", help="the stored RBAC decides for callers not in system:masters "
                                                        "(see OPTS)")
    ap.add_argument("--custom-resources", action="store_true", help="a CRD of any kind serves it (see OPTS)")
    args = ap.parse_args()
    OPTS.update(finalizers=args.finalizers, strict_crds=args.strict_crds, flaky=args.flaky, rbac=args.rbac,
                custom_resources=args.custom_resources)
    for group in args.also_group:
        also_group(group)
    AGGREGATED_DISCOVERY["on"] = args.aggregated_discovery
    seed(args.seed_namespace)
    if args.requestheader_ca:
        seed_authentication(open(args.requestheader_ca).read())
    if args.proxy_client_cert:
        PROXY_CLIENT.update(cert=args.proxy_client_cert, key=args.proxy_client_key)
    srv = ThreadingHTTPServer((args.host, args.port), Handler)
    srv.daemon_threads = True
    srv.token, srv.verbose = args.token, args.verbose
    srv.token_file = args.token_file
    if args.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
        ctx.set_alpn_protocols(["http/1.1"])
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    announce_and_serve(srv)


def current_token(srv):
    """The only token --token-file accepts right now."""
    try:
        with open(srv.token_file) as f:
            return f.read().strip()
    except OSError:
        return None


def announce_and_serve(srv):
    """Prints the port the test harness waits for, then serves until killed."""
    print(f"LISTENING {srv.server_address[1]}", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
