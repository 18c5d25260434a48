#!/usr/bin/env python3
"""The app's own aggregated API server, a stand-in (Python stdlib) for the
aggregated-front e2e tests: it serves Flunders in the ORIGINAL group
wardle.example.com/v1alpha1 (like the wardle sample-apiserver) over TLS, and
trusts callers the way a real aggregated server does, with nothing configured
about regroup:

- at start it reads kube-system/extension-apiserver-authentication through the
  sidecar (`--kube`, the app's kube-apiserver URL) and accepts client
  certificates that chain to its requestheader-client-ca-file, whose CN is in
  requestheader-allowed-names, with the user in its username headers;
- it authorizes each resource request with a SubjectAccessReview, through the
  sidecar, for its own group (which regroup must rename for the cluster).

As a test double it also checks what reaches it: a request body that names a
cluster group (`team1.example.com`) is refused with 400, and each created
Flunder records the user it was created for in the annotation
e2e.regroup.dev/created-by. It never logs bodies or credentials.

    python3 e2e/standin/aggregated.py --tls-cert C --tls-key K --kube http://127.0.0.1:PORT
"""
import argparse
import json
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import server as apiserver  # e2e/standin/server.py: Status errors, HTTP plumbing
from server import ApiError, dumps, now

GROUP, VERSION = "wardle.example.com", "v1alpha1"
GV = f"{GROUP}/{VERSION}"
CLUSTER_NAMES = "team1.example.com"  # the cluster's side of every rename rule of the e2e config
CREATED_BY = "e2e.regroup.dev/created-by"
TRUST = {}  # from the authentication ConfigMap: "ca", "allowed", "user_headers", "group_headers"
KUBE = ""  # the app's kube-apiserver URL: regroup's sidecar listener


def kube(method, path, body=None):
    req = urllib.request.Request(KUBE + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", "Accept": "application/json"})
    with urllib.request.urlopen(req, timeout=15) as resp:
        return json.loads(resp.read())


def load_trust(deadline):
    """The request-header settings, as the app reads them: through the sidecar."""
    while True:
        try:
            data = kube("GET", "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication")["data"]
            break
        except (OSError, urllib.error.URLError, KeyError, ValueError) as e:
            if time.monotonic() > deadline:
                sys.exit(f"aggregated stand-in: could not read extension-apiserver-authentication: {e}")
            time.sleep(0.2)
    TRUST.update(ca=data["requestheader-client-ca-file"],
                 allowed=json.loads(data.get("requestheader-allowed-names") or "[]"),
                 user_headers=json.loads(data.get("requestheader-username-headers") or '["X-Remote-User"]'),
                 group_headers=json.loads(data.get("requestheader-group-headers") or '["X-Remote-Group"]'))


def authorize(user, groups, verb, ns, name):
    """A SubjectAccessReview through the sidecar: (allowed, reason)."""
    attrs = {"group": GROUP, "version": VERSION, "resource": "flunders", "verb": verb}
    attrs.update({k: v for k, v in (("namespace", ns), ("name", name)) if v})
    sar = kube("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": groups, "resourceAttributes": attrs}})
    st = sar.get("status") or {}
    return bool(st.get("allowed")), st.get("reason", "")


class Flunders:
    def __init__(self):
        self.cond, self.objs, self.log, self.rv = threading.Condition(), {}, [], 0

    def commit(self, etype, obj):  # the caller holds self.cond
        self.rv += 1
        md = obj["metadata"]
        md["resourceVersion"] = str(self.rv)
        key = (md["namespace"], md["name"])
        if etype == "DELETED":
            self.objs.pop(key, None)
        else:
            self.objs[key] = obj
        self.log.append((self.rv, etype, json.loads(json.dumps(obj))))
        self.cond.notify_all()
        return obj


STORE = Flunders()


def new_flunder(ns, name, user, owner=None):
    md = {"name": name, "namespace": ns, "uid": str(uuid.uuid4()), "creationTimestamp": now(),
          "annotations": {CREATED_BY: user}}
    if owner:
        md["ownerReferences"] = [owner]
    return {"apiVersion": GV, "kind": "Flunder", "metadata": md, "spec": {"reference": name, "referenceType": "Flunder"}}


def table(objs, rv):
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv},
            "columnDefinitions": [
                {"name": "Name", "type": "string", "format": "name", "description": "Name", "priority": 0},
                {"name": "Created At", "type": "date", "format": "", "description": "creationTimestamp",
                 "priority": 0}],
            "rows": [{"cells": [o["metadata"]["name"], o["metadata"]["creationTimestamp"]],
                      "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                 "metadata": o["metadata"]}} for o in objs]}


DISCOVERY = {
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
        {"name": GROUP, "versions": [{"groupVersion": GV, "version": VERSION}],
         "preferredVersion": {"groupVersion": GV, "version": VERSION}}]},
    f"/apis/{GROUP}": {"kind": "APIGroup", "apiVersion": "v1", "name": GROUP,
                       "versions": [{"groupVersion": GV, "version": VERSION}],
                       "preferredVersion": {"groupVersion": GV, "version": VERSION}},
    f"/apis/{GV}": {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GV, "resources": [
        {"name": "flunders", "singularName": "flunder", "namespaced": True, "kind": "Flunder",
         "verbs": ["create", "delete", "get", "list", "watch"]}]},
}


# Aggregated discovery (apidiscovery.k8s.io/v2), which aggregators since 1.27
# ask a backend's /apis for before falling back to the documents above.
AGGREGATED_CTYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
AGGREGATED = {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": [
    {"metadata": {"name": GROUP, "creationTimestamp": None}, "versions": [
        {"version": VERSION, "freshness": "Current", "resources": [
            {"resource": "flunders", "responseKind": {"group": GROUP, "version": VERSION, "kind": "Flunder"},
             "scope": "Namespaced", "singularResource": "flunder",
             "verbs": ["create", "delete", "get", "list", "watch"]}]}]}]}


class Handler(apiserver.Handler):
    server_version = "regroup-e2e-aggregated"

    def handle_any(self):
        body = self.read_body()
        url = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(url.query).items()}
        try:
            if url.path in ("/healthz", "/readyz", "/livez"):
                return self.reply(200, b"ok", "text/plain; charset=utf-8")
            user, groups = self.authenticate()
            accept = self.headers.get("Accept") or ""
            if url.path == "/apis" and "v=v2;as=APIGroupDiscoveryList" in accept.replace(" ", ""):
                return self.reply(200, dumps(AGGREGATED), AGGREGATED_CTYPE)
            if url.path in DISCOVERY and self.command == "GET":
                return self.reply(200, dumps(DISCOVERY[url.path]))
            self.resource(url.path, q, body, user, groups)
        except ApiError as e:
            self.reply(e.code, e.body(), e.ctype)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

    def log_request(self, code="-", size="-"):
        sys.stderr.write(f"{self.command} {self.path} {code} caller={getattr(self, 'caller', '-')}\n")
        sys.stderr.flush()

    def authenticate(self):
        """kube-apiserver's authenticators as a delegating aggregated server
        runs them, in a union: the request-header authenticator (a verified
        client certificate with an allowed CN and a user header), else a bearer
        token (which a real server would send to a TokenReview)."""
        cert = self.connection.getpeercert()
        cn = dict(rdn[0] for rdn in cert["subject"]).get("commonName") if cert else None
        user = next((self.headers[h] for h in TRUST["user_headers"] if self.headers.get(h)), None)
        self.caller = f"cn={cn}" if cn else "no-certificate"
        if cn and user and (not TRUST["allowed"] or cn in TRUST["allowed"]):
            self.caller += f" user={user}"
            return user, [g for h in TRUST["group_headers"] for g in self.headers.get_all(h) or []]
        if self.headers.get("Authorization", "").startswith("Bearer "):
            self.caller += " bearer-token"
            raise ApiError(401, "Unauthorized", "aggregated stand-in: a bearer token arrived; this stand-in does "
                                                "no TokenReview")
        raise ApiError(401, "Unauthorized", "Unauthorized")

    def resource(self, path, q, body, user, groups):
        prefix = f"/apis/{GV}/"
        parts = path[len(prefix):].split("/") if path.startswith(prefix) else []
        ns = None
        if parts[:1] == ["namespaces"] and len(parts) >= 3:
            ns, parts = parts[1], parts[2:]
        if not parts or parts[0] != "flunders" or len(parts) > 2:
            raise apiserver.page_not_found()
        name = parts[1] if len(parts) == 2 else None
        watch = q.get("watch") in apiserver.WATCH_TRUE
        verb = {"GET": "watch" if watch else "get" if name else "list", "POST": "create",
                "DELETE": "delete"}.get(self.command)
        if verb is None or (verb == "create" and (name or ns is None)) or (verb == "delete" and not name):
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        allowed, reason = authorize(user, groups, verb, ns, name)
        if not allowed:
            raise ApiError(403, "Forbidden", f'flunders.{GROUP} is forbidden: User "{user}" cannot {verb} resource '
                                             f'"flunders" in API group "{GROUP}": {reason}')
        as_table = "as=Table" in (self.headers.get("Accept") or "")
        if verb == "watch":
            return self.watch(ns, q)
        with STORE.cond:
            cur = STORE.objs.get((ns, name))
            if name and cur is None:
                raise apiserver.not_found(GROUP, "flunders", name)
            if verb == "get":
                return self.reply(200, dumps(table([cur], cur["metadata"]["resourceVersion"]) if as_table else cur))
            if verb == "delete":
                STORE.commit("DELETED", cur)
                return self.reply(200, dumps(cur))
            if verb == "list":
                objs = [o for (n, _), o in sorted(STORE.objs.items()) if ns in (None, n)]
                rv = str(STORE.rv)
                return self.reply(200, dumps(table(objs, rv) if as_table else {
                    "kind": "FlunderList", "apiVersion": GV, "metadata": {"resourceVersion": rv}, "items": objs}))
            obj = self.check(body)
            md = obj["metadata"]
            if (ns, md.get("name")) in STORE.objs:
                raise apiserver.obj_error(409, "AlreadyExists", GROUP, "flunders", md["name"], "{} already exists")
            owners = md.get("ownerReferences") or []
            new = new_flunder(ns, md["name"], user, owners[0] if owners else None)
            new["spec"] = obj.get("spec") or new["spec"]
            return self.reply(201, dumps(STORE.commit("ADDED", new)))

    @staticmethod
    def check(body):
        if CLUSTER_NAMES.encode() in body:
            raise ApiError(400, "BadRequest", f"aggregated stand-in: a cluster group name ({CLUSTER_NAMES}) reached "
                                              "the app; the front must rename request bodies")
        try:
            obj = json.loads(body)
        except ValueError as e:
            raise ApiError(400, "BadRequest", f"aggregated stand-in: the body is not JSON: {e}")
        if not isinstance(obj, dict) or obj.get("apiVersion") != GV or obj.get("kind") != "Flunder" \
                or not isinstance(obj.get("metadata"), dict) or not obj["metadata"].get("name"):
            raise ApiError(400, "BadRequest", f"aggregated stand-in: expected a named Flunder in {GV}")
        return obj

    def watch(self, ns, q):
        """JSON WatchEvents, one chunk each: ADDED for what exists (without a
        resourceVersion), then live events, until timeoutSeconds or the
        client goes away."""
        deadline = time.monotonic() + float(q.get("timeoutSeconds") or 1800)
        with STORE.cond:
            rv = q.get("resourceVersion") or "0"
            last = STORE.rv if rv == "0" else int(rv)
            burst = [("ADDED", o) for (n, _), o in sorted(STORE.objs.items()) if rv == "0" and ns in (None, n)]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.close_connection = True
        for etype, o in burst:
            self.chunk(dumps({"type": etype, "object": o}))
        self.wfile.flush()
        while time.monotonic() < deadline:
            with STORE.cond:
                evs = [e for e in STORE.log if e[0] > last]
                if not evs:
                    STORE.cond.wait(timeout=0.5)
            for erv, etype, o in evs:
                last = erv
                if ns in (None, o["metadata"]["namespace"]):
                    self.chunk(dumps({"type": etype, "object": o}))
            self.wfile.flush()
            if self.client_gone():
                return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def main():
    global KUBE
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0, help="0: pick a free port")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--tls-cert", required=True)
    ap.add_argument("--tls-key", required=True)
    ap.add_argument("--kube", required=True, help="the app's kube-apiserver URL (regroup's sidecar listener)")
    ap.add_argument("--seed-namespace", default="e2e", help="namespace of the seed Flunder")
    args = ap.parse_args()
    KUBE = args.kube.rstrip("/")
    load_trust(time.monotonic() + 30)
    with STORE.cond:  # owned by Foo alpha, in the app's group
        STORE.commit("ADDED", new_flunder(args.seed_namespace, "seed-flunder", "seed", {
            "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "name": "alpha",
            "uid": "9f0c3d2e-0000-4000-8000-000000000001", "controller": True}))
    srv = ThreadingHTTPServer((args.host, args.port), Handler)
    srv.daemon_threads = True
    srv.verbose, srv.token = False, None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.tls_cert, args.tls_key)
    ctx.verify_mode = ssl.CERT_OPTIONAL  # verified when presented; none: only a bearer token could be reviewed
    ctx.load_verify_locations(cadata=TRUST["ca"])
    ctx.set_alpn_protocols(["http/1.1"])
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    apiserver.announce_and_serve(srv)


if __name__ == "__main__":
    main()
