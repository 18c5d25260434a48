"""OpenAPI as the app sees it. kubectl 1.31 reads /openapi/v3 first; the 1.24
upstream's v3 index is the old {"Paths": [...]} form, which kubectl cannot use,
so it falls back to /openapi/v2 in protobuf for `explain` and for apply's
field-validation check."""
import json
import re

from e2e_support import APP_GROUP, HIDDEN_GROUP


def reverse_dns(group):  # the form groups take in OpenAPI definition names
    return ".".join(reversed(group.split(".")))


def no_duplicate_keys(pairs):
    keys = [k for k, _ in pairs]
    dups = {k for k in keys if keys.count(k) > 1}
    assert not dups, f"duplicate JSON keys (a shadowed group renamed onto the visible one?): {dups}"
    return dict(pairs)


# kubectl 1.31 reads /openapi/v2 in protobuf from a 1.24-era server (its v3
# index is the old format): regroup renames the gnostic protobuf document
# (the capture serves both worlds; the original world's entries are shadowed,
# so what kubectl finds is the cluster's renamed Foo).
def test_kubectl_explain_foo_in_the_original_group(app):
    out = app("explain", "foos.spec", f"--api-version={APP_GROUP}/v1alpha1")
    assert re.search(rf"^VERSION:\s+{re.escape(APP_GROUP)}/v1alpha1$", out, re.M), out
    assert "deploymentName" in out and "replicas" in out


def test_openapi_v2_json_names_the_original_group_only(app):
    doc = json.loads(app("get", "--raw", "/openapi/v2", timeout=60), object_pairs_hook=no_duplicate_keys)
    defs = {k for k in doc["definitions"] if ".samplecontroller." in k or k.endswith(".samplecontroller")}
    assert defs == {f"{reverse_dns(APP_GROUP)}.{v}.{k}" for v in ("v1alpha1", "v1beta1") for k in ("Foo", "FooList")}
    foo = doc["definitions"][f"{reverse_dns(APP_GROUP)}.v1alpha1.Foo"]
    assert foo["x-kubernetes-group-version-kind"] == [{"group": APP_GROUP, "kind": "Foo", "version": "v1alpha1"}]
    paths = [p for p in doc["paths"] if "samplecontroller" in p]
    assert paths and all(p.startswith(f"/apis/{APP_GROUP}/") for p in paths), paths
    assert f"/apis/{APP_GROUP}/v1alpha1/namespaces/{{namespace}}/foos/{{name}}" in doc["paths"]
    refs = set(re.findall(r'"\$ref": ?"#/definitions/([^"]*samplecontroller[^"]*)"', json.dumps(doc)))
    assert refs and all(r.startswith(reverse_dns(APP_GROUP) + ".") for r in refs), refs
    assert reverse_dns(HIDDEN_GROUP) not in json.dumps(doc)


def test_openapi_v3_group_document_is_served_under_the_original_group(app):
    doc = json.loads(app("get", "--raw", f"/openapi/v3/apis/{APP_GROUP}/v1alpha1"))
    assert doc["paths"] and all(p.startswith(f"/apis/{APP_GROUP}/v1alpha1") for p in doc["paths"] if "foos" in p)
    schemas = [k for k in doc["components"]["schemas"] if k.endswith(".Foo")]
    assert schemas == [f"{reverse_dns(APP_GROUP)}.v1alpha1.Foo"]
    assert HIDDEN_GROUP not in json.dumps(doc)


def test_openapi_v3_index_lists_the_original_group_once(app):
    """The 1.24 index is {"Paths": ["apis/<group>/<version>", ...]}."""
    index = json.loads(app("get", "--raw", "/openapi/v3"))
    paths = index.get("Paths") or list(index.get("paths", {}))
    mine = [p for p in paths if "samplecontroller" in p]
    assert sorted(mine) == [f"apis/{APP_GROUP}/v1alpha1", f"apis/{APP_GROUP}/v1beta1"]


def test_openapi_v2_protobuf_is_renamed_through_the_proxy(proxy_url):
    """client-go's OpenAPISchema(): GET /openapi/v2 in gnostic protobuf."""
    import http.client
    from urllib.parse import urlsplit
    u = urlsplit(proxy_url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    c.request("GET", "/openapi/v2", headers={"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"})
    r = c.getresponse()
    body = r.read()
    assert r.status == 200, body[:200]
    assert reverse_dns(APP_GROUP).encode() + b".v1alpha1.Foo" in body
    assert HIDDEN_GROUP.encode() not in body
    assert reverse_dns(HIDDEN_GROUP).encode() not in body
