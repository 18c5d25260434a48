"""The app's webhook server, as an operator ships one (e2e/README.md): it
knows only its own group, samplecontroller.k8s.io. Python stdlib, HTTPS.

  POST /validate  AdmissionReview: refuses objects named `rejected-*` (403,
                  naming the group/version/kind it saw), else allows with a
                  warning naming them.
  POST /mutate    AdmissionReview: allows with a JSON Patch adding an
                  ownerReference to Foo `alpha` (apiVersion
                  samplecontroller.k8s.io/v1alpha1, the uid given with
                  --owner-uid: the real one, or the cluster's garbage
                  collector deletes the mutated object at once) and a label
                  whose value merely looks like a group.
  POST /convert   ConversionReview: Bars between v1alpha1 (spec.size) and
                  v1beta1 (spec.replicas); objects labelled convert=fail fail.

As a test double it answers 400 to any body naming `team1.example.com` (a
rename regroup missed) or a group other than its own. It prints
`LISTENING <port>` first, and logs one line per call (never a body).
"""
import argparse
import base64
import json
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GROUP = "samplecontroller.k8s.io"


OWNER_UID = None  # Foo alpha's uid (--owner-uid)


def admission(path, review):
    req = review["request"]
    kind, obj = req["kind"], req.get("object") or req.get("oldObject") or {}
    if kind["group"] != GROUP or not obj.get("apiVersion", GROUP).startswith(GROUP + "/"):
        return None
    gvk = f"{kind['group']}/{kind['version']}, Kind={kind['kind']}"
    resp = {"uid": req["uid"], "allowed": True}
    name = req.get("name") or obj.get("metadata", {}).get("name", "")
    if path == "/validate":
        if name.startswith("rejected"):
            resp = {"uid": req["uid"], "allowed": False,
                    "status": {"code": 403, "reason": "Forbidden", "message": f"the app refuses {gvk} named {name}"}}
        else:
            resp["warnings"] = [f"the app checked {gvk} {name} ({req['operation']})"]
    elif req["operation"] in ("CREATE", "UPDATE"):
        patch = [
            {"op": "add", "path": "/metadata/ownerReferences",
             "value": [{"apiVersion": f"{GROUP}/v1alpha1", "kind": "Foo", "name": "alpha",
                        "uid": OWNER_UID}]},
            {"op": "add", "path": "/metadata/labels/e2e.regroup.dev~1mutated-by", "value": GROUP},
        ]
        if "labels" not in obj.get("metadata", {}):
            patch.insert(0, {"op": "add", "path": "/metadata/labels", "value": {}})
        resp["patchType"] = "JSONPatch"
        resp["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"apiVersion": review["apiVersion"], "kind": "AdmissionReview", "response": resp}


def conversion(review):
    req = review["request"]
    desired = req["desiredAPIVersion"]
    if not desired.startswith(GROUP + "/"):
        return None
    out, failed = [], None
    for o in req["objects"]:
        if not o["apiVersion"].startswith(GROUP + "/"):
            return None
        if (o["metadata"].get("labels") or {}).get("convert") == "fail":
            failed = f"the app will not convert {o['metadata']['name']} to {desired}"
            break
        o = json.loads(json.dumps(o))
        spec = o.setdefault("spec", {})
        if desired.endswith("/v1beta1") and "size" in spec:
            spec["replicas"] = spec.pop("size")
        if desired.endswith("/v1alpha1") and "replicas" in spec:
            spec["size"] = spec.pop("replicas")
        o["apiVersion"] = desired
        out.append(o)
    result = {"status": "Success"} if failed is None else {"status": "Failure", "message": failed}
    return {"apiVersion": review["apiVersion"], "kind": "ConversionReview",
            "response": {"uid": req["uid"], "convertedObjects": [] if failed else out, "result": result}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("webhook-app " + fmt % args + "\n")

    def answer(self, code, doc):
        body = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path.split("?")[0]
        if b"team1.example.com" in raw:
            return self.answer(400, {"error": "the review names a group this app does not know"})
        try:
            review = json.loads(raw)
            out = conversion(review) if path == "/convert" else admission(path, review)
        except (ValueError, KeyError, TypeError) as e:
            return self.answer(400, {"error": f"not a review: {e}"})
        if out is None:
            return self.answer(400, {"error": "a group this app does not know"})
        self.answer(200, out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--tls-cert", required=True)
    p.add_argument("--tls-key", required=True)
    p.add_argument("--owner-uid", required=True, help="the uid of Foo alpha, the owner the mutation adds")
    a = p.parse_args()
    global OWNER_UID
    OWNER_UID = a.owner_uid
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.tls_cert, a.tls_key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    print(f"LISTENING {srv.server_address[1]}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
