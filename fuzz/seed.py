#!/usr/bin/env python3
"""Writes the fuzz seed corpora (fuzz/corpus/<target>/) from the real
captures in testdata/ (kube-1.24 and kube-1.29), byte for byte, each file
named by its content's SHA-1. Re-running it is idempotent.

Bodies go to the target that decodes them, by their Content-Type and path:
JSON and JSON-in-YAML bodies, protobuf objects, watch streams, apply YAML,
JSON Patch, OpenAPI (the two multi-MiB v2 documents are cut down to the
paths and definitions that carry the sample groups, the protobuf one field
by field so it stays a valid gnostic document), and every request target.
The request-header identity seeds hold a certificate made here (openssl) and
the ConfigMap kube-apiserver publishes; the kubeconfig seeds are written
here (no captured kubeconfig exists). See docs/fuzzing.md.
"""
import gzip
import hashlib
import json
import os
import subprocess
import tempfile
from pathlib import Path

FUZZ = Path(__file__).resolve().parent
REPO = FUZZ.parent
CORPUS = FUZZ / "corpus"
KEEP = (b"samplecontroller", b"wardle")


def put(target, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()).write_bytes(data)


def varint(buf, at):
    n = shift = 0
    while True:
        b = buf[at]
        at += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return n, at


def enc_varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def fields(buf):
    """(field number, raw bytes of the whole field, payload if length-delimited)."""
    at = 0
    while at < len(buf):
        start = at
        key, at = varint(buf, at)
        num, wt = key >> 3, key & 7
        payload = None
        if wt == 0:
            _, at = varint(buf, at)
        elif wt == 1:
            at += 8
        elif wt == 5:
            at += 4
        elif wt == 2:
            n, at = varint(buf, at)
            payload = buf[at:at + n]
            at += n
        else:
            raise ValueError(f"wire type {wt}")
        yield num, buf[start:at], payload


def ld(num, payload):
    return enc_varint(num << 3 | 2) + enc_varint(len(payload)) + payload


def trim_gnostic(doc):
    """The v2 gnostic Document (after the k8s-free raw bytes) with only the
    paths (field 8, its NamedPathItems in field 2) and definitions (field 9,
    NamedSchemas in field 1) that mention a kept name."""
    out = b""
    for num, raw, payload in fields(doc):
        if num in (8, 9):
            entry = {8: 2, 9: 1}[num]  # Paths.path, Definitions.additional_properties
            inner = b"".join(r for n, r, p in fields(payload)
                             if n != entry or any(k in p for k in KEEP))
            out += ld(num, inner)
        else:
            out += raw
    return out


def trim_openapi_json(body):
    doc = json.loads(body)
    def keep(k, v):
        return any(x.decode() in k for x in KEEP)
    for key in ("paths", "definitions"):
        if key in doc:
            doc[key] = {k: v for k, v in doc[key].items() if keep(k, v)}
    return json.dumps(doc, separators=(",", ":")).encode()


def captures():
    for exchange in sorted(REPO.glob("testdata/kube-*/*/*/exchange.json")):
        d = exchange.parent
        e = json.loads(exchange.read_text())
        read = lambda name: (d / name).read_bytes() if (d / name).exists() else None
        yield d, e, read("request.body"), read("response.body")


def main():
    for d, e, req, resp in captures():
        path, query = e.get("path", ""), e.get("query", "")
        put("url", (path + ("?" + query if query else "")).encode())
        rq_ct = (e.get("request_headers") or {}).get("Content-Type") or ""
        rs_h = e.get("response_headers") or {}
        rs_ct = rs_h.get("Content-Type") or ""
        if resp and rs_h.get("Content-Encoding") == "gzip":
            resp = gzip.decompress(resp)
        if req:
            if "yaml" in rq_ct:
                put("yaml", req)
            elif "json-patch" in rq_ct:
                put("json_patch", req)
            elif "protobuf" in rq_ct:
                put("protobuf", req)
            elif "json" in rq_ct:
                put("json", req)
        if not resp:
            continue
        if "/openapi/" in path:
            if len(resp) > 1 << 20:
                resp = trim_openapi_json(resp) if resp[:1] == b"{" else trim_gnostic(resp)
            put("openapi", resp)
        elif "stream=watch" in rs_ct or "watch=" in query or "/watch/" in path:
            put("watch", resp)
        elif "protobuf" in rs_ct:
            put("protobuf", resp)
        elif "yaml" in rs_ct:
            put("yaml", resp)
        elif "json" in rs_ct:
            put("json", resp)
    # YAML the project ships: manifests and examples.
    for y in sorted(list(REPO.glob("e2e/manifests/*.yaml")) + list(REPO.glob("examples/**/*.yaml"))):
        put("yaml", y.read_bytes())
    identity_seeds()
    kubeconfig_seeds()
    for t in sorted(CORPUS.iterdir()):
        print(f"{t.name}: {len(list(t.iterdir()))} seeds")


def identity_seeds():
    """A front-proxy client certificate (DER), the aggregator's identity
    headers, and kube-apiserver's published request-header ConfigMap data."""
    with tempfile.TemporaryDirectory() as tmp:
        key, crt = os.path.join(tmp, "k.pem"), os.path.join(tmp, "c.der")
        for cn in ("front-proxy-client", "someone-else"):
            subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                            "-nodes", "-keyout", key, "-subj", f"/CN={cn}", "-days", "1", "-outform", "DER",
                            "-out", crt], check=True, capture_output=True)
            der = Path(crt).read_bytes()
            headers = (b"X-Remote-User: alice\nX-Remote-Uid: 42\nX-Remote-Group: system:masters\n"
                       b"X-Remote-Group: team1\nX-Remote-Extra-Scopes: a\nX-Remote-Extra-Acme.com%2Fproject: b\n")
            cm = json.dumps({
                "requestheader-client-ca-file": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
                "requestheader-allowed-names": '["front-proxy-client"]',
                "requestheader-username-headers": '["X-Remote-User"]',
                "requestheader-uid-headers": '["X-Remote-Uid"]',
                "requestheader-group-headers": '["X-Remote-Group"]',
                "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]'}).encode()
            put("cert_identity", der + b"\0" + headers + b"\0" + cm)
            put("cert_identity", der + b"\0" + b"X-Remote-Group: g\n")


def kubeconfig_seeds():
    base = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:6443",
                                                   "certificate-authority-data": "LS0tLS1CRUdJTg==",
                                                   "tls-server-name": "kubernetes", "proxy-url": "socks5://p:1080"}}],
            "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u", "namespace": "default"}}],
            "users": [{"name": "u", "user": {"token": "not-a-real-token", "as": "bob", "as-groups": ["g"],
                                             "as-user-extra": {"scopes": ["x"]}}}]}
    put("kubeconfig", json.dumps(base, indent=1).encode())
    exec_user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "get-token",
                          "args": ["--cluster", "k"], "env": [{"name": "A", "value": "b"}],
                          "interactiveMode": "Never", "provideClusterInfo": True}}
    cert_user = {"client-certificate": "client.crt", "client-key": "client.key"}
    for user in (exec_user, cert_user):
        doc = dict(base, users=[{"name": "u", "user": user}])
        put("kubeconfig", json.dumps(doc).encode())
    put("kubeconfig", b"""apiVersion: v1
kind: Config
current-context: c
clusters:
- name: k
  cluster:
    server: https://example:443
    insecure-skip-tls-verify: true
contexts:
- name: c
  context: {cluster: k, user: u}
users:
- name: u
  user:
    username: admin
    password: not-a-real-password
""")


if __name__ == "__main__":
    main()
