"""OpenAPI as the app sees it. The upstream serves OpenAPI v3 as a real
kube-apiserver (1.27 and later) does: the index `{"paths": {"apis/G/V":
{"serverRelativeURL": "/openapi/v3/apis/G/V?hash=..."}}}` and one document per
group-version (the stand-in: kube-1.29's captures, e2e/standin/data/README.md),
so every kubectl of the suite (1.31, 1.36, 1.37) explains from OpenAPI v3; v2
is still served (JSON and protobuf) and read by other clients."""
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


# kubectl explain (1.27 and later) reads /openapi/v3 and the document its
# index names for the group-version, and prints GROUP, KIND and VERSION apart
# (the v2 form, `VERSION: <group>/<version>`, is printed only when the server
# has no usable v3 index, which no kubectl of the suite meets here). Through
# regroup the index and the document are renamed, so kubectl finds the Foo of
# the app's group (the capture serves both worlds' entries; the original
# world's are shadowed).
def test_kubectl_explain_foo_in_the_original_group(app):
    out = app("explain", "foos.spec", f"--api-version={APP_GROUP}/v1alpha1")
    head = out.splitlines()[:3]
    assert head == [f"GROUP:      {APP_GROUP}", "KIND:       Foo", "VERSION:    v1alpha1"], out
    assert re.search(r"^FIELD: spec <Object>$", out, re.M), out
    assert re.search(r"^  deploymentName\t<string>$", out, re.M) and re.search(r"^  replicas\t<integer>$", out, re.M), out
    assert HIDDEN_GROUP not in out


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
    """The index names each document with its hash: the app's group only, each
    entry pointing at a document under the app's group."""
    index = json.loads(app("get", "--raw", "/openapi/v3"), object_pairs_hook=no_duplicate_keys)
    mine = {k: v for k, v in index["paths"].items() if "samplecontroller" in k}
    assert sorted(mine) == [f"apis/{APP_GROUP}/v1alpha1", f"apis/{APP_GROUP}/v1beta1"]
    for gvpath, entry in mine.items():  # the hash is opaque to clients (regroup adds to it)
        assert re.fullmatch(rf"/openapi/v3/{re.escape(gvpath)}\?hash=[^&]+", entry["serverRelativeURL"]), entry
    assert HIDDEN_GROUP not in json.dumps(index)


def test_openapi_v3_document_by_its_index_url_is_immutable(app):
    """What kubectl fetches: the index's serverRelativeURL, which the server
    answers `Cache-Control: public, immutable` (kube-1.29 renamed/026)."""
    index = json.loads(app("get", "--raw", "/openapi/v3"))
    url = index["paths"][f"apis/{APP_GROUP}/v1alpha1"]["serverRelativeURL"]
    doc = json.loads(app("get", "--raw", url))
    assert [k for k in doc["components"]["schemas"] if k.endswith(".Foo")] == [f"{reverse_dns(APP_GROUP)}.v1alpha1.Foo"]
    assert HIDDEN_GROUP not in json.dumps(doc)


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
