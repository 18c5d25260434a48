"""Self-checks of the stand-in against the real apiserver's captured answers
(testdata/kube-1.24), straight to the stand-in, no proxy: what the e2e tests
pin through regroup is only as good as the upstream they run against."""
import json
import urllib.error
import urllib.request

import pytest

from conftest import standin_module
from e2e_support import CLUSTER_GROUP, ORIG_GROUP, REPO

FOOS = f"/apis/{CLUSTER_GROUP}/v1alpha1/namespaces/e2e/foos"
KUBECTL_TABLE = ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
                 "application/json")


@pytest.fixture(scope="module")
def standin(upstream):
    if upstream.url is None:
        pytest.skip("checks the stand-in itself; REGROUP_E2E_KUBECONFIG runs against a real cluster")
    mod = standin_module()

    def request(path, accept="application/json", method="GET", body=None, ctype="application/json"):
        req = urllib.request.Request(upstream.url + path, method=method, data=body,
                                     headers={"Accept": accept, "Content-Type": ctype})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()
    return request, mod.captured


def masked(obj):
    """Volatile fields and the capture's namespace, masked."""
    text = json.dumps(obj).replace('"namespace": "renamed"', '"namespace": "e2e"')
    obj = json.loads(text)
    for o in [obj] + obj.get("items", []) + [r.get("object", {}) for r in obj.get("rows", [])]:
        o.get("metadata", {}).pop("resourceVersion", None)
    return obj


def test_get_foo_matches_the_capture(standin):
    request, captured = standin
    status, _, body = request(FOOS + "/alpha")
    assert status == 200
    assert masked(json.loads(body)) == masked(json.loads(captured("renamed/027-get-foo-json")))


def test_list_foos_as_kubectl_table_matches_the_capture(standin):
    request, captured = standin
    status, _, body = request(FOOS, accept=KUBECTL_TABLE)
    got, want = masked(json.loads(body)), masked(json.loads(captured("renamed/179-list-foo-kubectl-accept")))
    assert status == 200 and got["kind"] == "Table"
    assert got["columnDefinitions"] == want["columnDefinitions"]
    assert [r for r in got["rows"] if r["cells"][0] in ("alpha", "beta", "gamma")] == want["rows"]


def test_errors_are_byte_for_byte_the_captured_status(standin):
    request, captured = standin
    assert request(FOOS + "/missing")[::2] == (404, captured("renamed/230-get-foo-missing-404"))
    smp = request(FOOS + "/alpha", method="PATCH", body=b'{"spec":{"replicas":2}}',
                  ctype="application/strategic-merge-patch+json")
    assert smp[::2] == (415, captured("renamed/202-patch-foo-delta-strategic-merge-patch"))
    dup = json.dumps({"apiVersion": f"{CLUSTER_GROUP}/v1alpha1", "kind": "Foo", "metadata": {"name": "alpha"}})
    assert request(FOOS, method="POST", body=dup.encode())[::2] == \
        (409, captured("renamed/233-create-foo-duplicate-409"))


def test_original_group_does_not_exist_on_the_standin(standin):
    request, captured = standin
    status, headers, body = request(f"/apis/{ORIG_GROUP}/v1alpha1/namespaces/e2e/foos")
    assert (status, body) == (404, captured("renamed/237-get-unknown-group-404"))
    assert headers["Content-Type"] == "text/plain; charset=utf-8"


def test_aggregated_discovery_is_answered_like_1_24(standin):
    request, captured = standin
    only = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
    assert request("/apis", accept=only)[::2] == (406, captured("common/011-discovery-apis-aggregated-v2beta1-only"))
    status, _, body = request("/apis", accept=only + ",application/json")
    assert status == 200 and json.loads(body)["kind"] == "APIGroupList"


def test_deprecated_version_warns_like_the_capture(standin):
    request, _ = standin
    status, headers, _ = request(f"/apis/{CLUSTER_GROUP}/v1beta1/namespaces/e2e/foos/alpha")
    assert status == 200
    assert headers["Warning"] == f'299 - "{CLUSTER_GROUP}/v1beta1 Foo is deprecated"'  # renamed/103


def test_watch_from_zero_sends_existing_objects_then_ends_at_timeout(standin):
    request, _ = standin
    status, headers, body = request(FOOS + "?watch=1&resourceVersion=0&timeoutSeconds=1")
    assert status == 200 and headers["Transfer-Encoding"] == "chunked"
    events = [json.loads(line) for line in body.decode().splitlines()]
    assert {(e["type"], e["object"]["metadata"]["name"]) for e in events} >= {("ADDED", "alpha"), ("ADDED", "beta")}
    assert {e["object"]["apiVersion"] for e in events} == {f"{CLUSTER_GROUP}/v1alpha1"}


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args):
        return None  # the 301 itself is the answer under test


def test_openapi_v3_is_answered_like_1_29(standin, upstream):
    """The same requests as kube-apiserver 1.29's OpenAPI v3 captures (renamed
    world: with the current hash, a conditional GET, a stale hash, no hash,
    no hash and conditional, a YAML Accept), answered with the captured status
    and caching headers; the index names the captured document's hash."""
    request, _ = standin
    index = json.loads(request("/openapi/v3")[2])["paths"]
    want_url = json.loads(open(REPO / "e2e/standin/data/kube-1.29/renamed/025-openapi-v3-index/response.body",
                               "rb").read())["paths"][f"apis/{CLUSTER_GROUP}/v1alpha1"]
    assert index[f"apis/{CLUSTER_GROUP}/v1alpha1"] == want_url
    dirs = {"028": REPO / "testdata/kube-1.29/renamed", "029": REPO / "testdata/kube-1.29/renamed"}
    for case in ("026-openapi-v3-group-hash-json", "027-openapi-v3-group-hash-protobuf",
                 "028-openapi-v3-group-hash-if-none-match", "029-openapi-v3-group-stale-hash",
                 "030-openapi-v3-group-no-hash-json", "031-openapi-v3-group-no-hash-if-none-match",
                 "032-openapi-v3-group-hash-yaml-406"):
        ex = json.loads(open(dirs.get(case[:3], REPO / "e2e/standin/data/kube-1.29/renamed") / case / "exchange.json",
                             "rb").read())
        headers = {k: v for k, v in ex["request_headers"].items() if k in ("Accept", "If-None-Match")}
        url = upstream.url + ex["path"] + (f"?{ex['query']}" if ex["query"] else "")
        req = urllib.request.Request(url, headers=headers)
        try:
            with urllib.request.build_opener(NoRedirect).open(req, timeout=10) as resp:
                status, got, body = resp.status, resp.headers, resp.read()
        except urllib.error.HTTPError as e:
            status, got, body = e.code, e.headers, e.read()
        want = ex["response_headers"]
        assert status == ex["status"], case
        for h in ("Cache-Control", "Content-Type", "Etag", "Location", "Vary"):
            assert got.get(h) == want.get(h), (case, h)
        assert ("Expires" in got) == ("Expires" in want), case
        assert len(body) == ex["response_body_bytes"], case


def test_strategic_merge_puts_a_new_keyed_item_first_like_kube_apiserver(standin):
    """kube-apiserver 1.36 answered a strategic merge patch adding beta's
    ownerReference to a ConfigMap owned by alpha with [beta, alpha] (issue
    #31); strategicpatch's mergeSlice/normalizeElementOrder give that order,
    and so does the stand-in (smp_order)."""
    request, _ = standin
    uid = {n: json.loads(request(f"{FOOS}/{n}")[2])["metadata"]["uid"] for n in ("alpha", "beta")}
    ref = lambda n: {"apiVersion": f"{CLUSTER_GROUP}/v1alpha1", "kind": "Foo", "name": n, "uid": uid[n]}  # noqa: E731
    cms = "/api/v1/namespaces/e2e/configmaps"
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "smp-order", "ownerReferences": [ref("alpha")]}}
    assert request(cms, method="POST", body=json.dumps(cm).encode())[0] == 201
    try:
        patch = {"metadata": {"ownerReferences": [ref("beta")]}}
        status, _, body = request(cms + "/smp-order", method="PATCH", body=json.dumps(patch).encode(),
                                  ctype="application/strategic-merge-patch+json")
        assert status == 200
        assert [r["name"] for r in json.loads(body)["metadata"]["ownerReferences"]] == ["beta", "alpha"]
    finally:
        request(cms + "/smp-order", method="DELETE")


def test_unknown_fields_of_a_foo_are_pruned_like_1_29(standin, upstream):
    """The creates of kube-1.29 renamed/054-056 (a Foo with spec.unknownField
    and metadata.unknownMeta, fieldValidation Strict, Warn, Ignore): the
    captured status, Warning headers, and, when created, the fields stored."""
    data = REPO / "e2e/standin/data/kube-1.29/renamed"
    for case in ("054-create-foo-unknown-fields-strict", "055-create-foo-unknown-fields-warn",
                 "056-create-foo-unknown-fields-ignore"):
        ex = json.loads((data / case / "exchange.json").read_bytes())
        body = (data / case / "request.body").read_bytes().replace(b'"namespace":"renamed"', b'"namespace":"e2e"')
        req = urllib.request.Request(f"{upstream.url}{FOOS}?{ex['query']}", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                status, got, answer = resp.status, resp.headers, resp.read()
        except urllib.error.HTTPError as e:
            status, got, answer = e.code, e.headers, e.read()
        want = ex["response_headers"].get("Warning") or []
        assert status == ex["status"], case
        assert (got.get_all("Warning") or []) == ([want] if isinstance(want, str) else want), case
        captured_answer = json.loads((data / case / "response.body").read_bytes())
        if status == 201:
            name = json.loads(answer)["metadata"]["name"]
            stored = json.loads(standin[0](f"{FOOS}/{name}")[2])
            assert stored["spec"] == captured_answer["spec"] and "unknownMeta" not in stored["metadata"], case
            standin[0](f"{FOOS}/{name}", method="DELETE")
        else:
            assert json.loads(answer) == captured_answer, case


def test_garbage_collector_deletes_dependents_of_missing_owners(standin):
    """The minimum of kube-controller-manager's garbage collector: a dependent
    naming an owner uid that does not exist is deleted, one with another owner
    left loses the dangling reference, and deleting an owner deletes its
    dependents (background propagation)."""
    request, _ = standin
    cms = "/api/v1/namespaces/e2e/configmaps"
    foo = {"apiVersion": f"{CLUSTER_GROUP}/v1alpha1", "kind": "Foo", "metadata": {"name": "gc-owner"},
           "spec": {"deploymentName": "gc", "replicas": 1}}
    status, _, body = request(FOOS, method="POST", body=json.dumps(foo).encode())
    assert status == 201
    uid = {"gc-owner": json.loads(body)["metadata"]["uid"], "bogus": "00000000-0000-0000-0000-00000000a1fa",
           "alpha": json.loads(request(f"{FOOS}/alpha")[2])["metadata"]["uid"]}
    ref = lambda n: {"apiVersion": f"{CLUSTER_GROUP}/v1alpha1", "kind": "Foo", "name": n, "uid": uid[n]}  # noqa: E731

    def create(name, *owners):
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name,
                                                                     "ownerReferences": [ref(o) for o in owners]}}
        assert request(cms, method="POST", body=json.dumps(cm).encode())[0] == 201
    create("gc-orphan", "bogus")
    create("gc-half", "alpha", "bogus")
    create("gc-child", "gc-owner")
    try:
        assert request(cms + "/gc-orphan")[0] == 404
        half = json.loads(request(cms + "/gc-half")[2])
        assert [r["name"] for r in half["metadata"]["ownerReferences"]] == ["alpha"]
        assert request(cms + "/gc-child")[0] == 200
        assert request(f"{FOOS}/gc-owner", method="DELETE")[0] == 200
        assert request(cms + "/gc-child")[0] == 404
    finally:
        for name in ("gc-half", "gc-child"):
            request(f"{cms}/{name}", method="DELETE")
        request(f"{FOOS}/gc-owner", method="DELETE")
