#!/usr/bin/env python3
"""Publish mode's latency, as ratios against baselines measured in the same run.

Needs a publish-mode setup already running (docs/publish.md): a remote
cluster whose aggregator sends a published group to regroup's front, and the
central cluster behind it, with one published object. Sequential requests on
keep-alive connections, N each (after 20 warm-up requests):

  central      GET of the object straight at the central apiserver (the baseline)
  remote-aggr  GET of a ConfigMap on the remote apiserver: its own cost, no aggregation
  published    GET of the same object through the remote apiserver, its aggregator and
               regroup's front: what a remote kubectl pays
  front        (with --front URL and a front-proxy client certificate) the same GET
               straight at regroup's front, as the aggregator calls it: regroup's share

    bench/publish_latency.py --remote-kubeconfig R --central-kubeconfig C \\
        --group database.acmeco.org --version v1alpha1 --resource mysqlinstancerequirements \\
        --namespace default --central-namespace bar --name sqldb [-n 500] \\
        [--front https://HOST:PORT --front-ca CA --front-cert CERT --front-key KEY]

Kubeconfigs with client certificates or bearer tokens (inline data or files)."""
import argparse
import base64
import http.client
import os
import ssl
import statistics
import tempfile
import time
from urllib.parse import urlsplit

import yaml


def from_kubeconfig(path, tmp):
    """(host, port, ssl context, headers) of a kubeconfig's current context."""
    kc = yaml.safe_load(open(path))
    ctx_name = kc["current-context"]
    ctx = next(c["context"] for c in kc["contexts"] if c["name"] == ctx_name)
    cluster = next(c["cluster"] for c in kc["clusters"] if c["name"] == ctx["cluster"])
    user = next(u["user"] for u in kc["users"] if u["name"] == ctx["user"])

    def file_of(key):
        if key + "-data" in user or key + "-data" in cluster:
            data = user.get(key + "-data") or cluster.get(key + "-data")
            p = os.path.join(tmp, f"{abs(hash((path, key)))}.pem")
            open(p, "wb").write(base64.b64decode(data))
            return p
        return user.get(key) or cluster.get(key)

    sslctx = ssl.create_default_context(cafile=file_of("certificate-authority"))
    cert, key = file_of("client-certificate"), file_of("client-key")
    if cert and key:
        sslctx.load_cert_chain(cert, key)
    headers = {"Accept": "application/json"}
    if user.get("token"):
        headers["Authorization"] = f"Bearer {user['token']}"
    url = urlsplit(cluster["server"])
    return url.hostname, url.port or 443, sslctx, headers


def measure(host, port, sslctx, headers, path, n):
    c = http.client.HTTPSConnection(host, port, context=sslctx)
    out = []
    for i in range(n + 20):
        t = time.perf_counter()
        c.request("GET", path, headers=headers)
        r = c.getresponse()
        r.read()
        if r.status != 200:
            raise SystemExit(f"GET {path}: {r.status}")
        if i >= 20:
            out.append((time.perf_counter() - t) * 1000)
    return statistics.median(out), sorted(out)[int(len(out) * 0.95)]


def main():
    a = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for k in ("remote-kubeconfig", "central-kubeconfig", "group", "version", "resource", "namespace",
              "central-namespace", "name"):
        a.add_argument("--" + k, required=True)
    a.add_argument("-n", type=int, default=500)
    for k in ("front", "front-ca", "front-cert", "front-key"):
        a.add_argument("--" + k)
    o = a.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        remote = from_kubeconfig(o.remote_kubeconfig, tmp)
        central = from_kubeconfig(o.central_kubeconfig, tmp)
        obj = f"/apis/{o.group}/{o.version}/namespaces/{{ns}}/{o.resource}/{o.name}"
        rows = [
            ("central", central, obj.format(ns=o.central_namespace)),
            ("remote-aggr", remote, f"/api/v1/namespaces/{o.namespace}/configmaps/kube-root-ca.crt"),
            ("published", remote, obj.format(ns=o.namespace)),
        ]
        if o.front:
            ctx = ssl.create_default_context(cafile=o.front_ca)
            ctx.check_hostname = False
            ctx.load_cert_chain(o.front_cert, o.front_key)
            u = urlsplit(o.front)
            headers = {"Accept": "application/json", "X-Remote-User": "bench",
                       "X-Remote-Group": "system:masters"}
            rows.append(("front", (u.hostname, u.port, ctx, headers), obj.format(ns=o.namespace)))
        results = {}
        for name, (host, port, ctx, headers), path in rows:
            results[name] = measure(host, port, ctx, headers, path, o.n)
        base = results["central"][0]
        for name, (med, p95) in results.items():
            print(f"{name:12s} median {med:6.2f} ms  p95 {p95:6.2f} ms  {med / base:5.2f}x central")


if __name__ == "__main__":
    main()
