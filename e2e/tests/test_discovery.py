"""Discovery as the app sees it: the original group only, exactly once."""
import json

from e2e_support import APP_GROUP, HIDDEN_GROUP


def test_api_resources_lists_foos_once_in_the_original_group(app):
    out = app("api-resources", "-o", "wide", "--no-headers")
    foos = [line.split() for line in out.splitlines() if line.split() and line.split()[0] == "foos"]
    assert len(foos) == 1, f"foos listed {len(foos)} times:\n{out}"
    # NAME SHORTNAMES APIVERSION NAMESPACED KIND VERBS CATEGORIES
    name, short, apiversion, namespaced, kind = foos[0][:5]
    assert (short, apiversion, namespaced, kind) == ("fo", f"{APP_GROUP}/v1beta1", "true", "Foo")
    assert HIDDEN_GROUP not in out


def test_api_resources_for_the_group_succeeds(app):
    """kubectl exits non-zero when any group-version's discovery fails (e.g. a
    shadowed group still listed in /apis but answering 404)."""
    out = app("api-resources", "--api-group", APP_GROUP, "--no-headers")
    assert [line.split()[0] for line in out.splitlines()] == ["foos"]


def test_api_versions_show_both_foo_versions_in_the_original_group(app):
    versions = app("api-versions").split()
    assert f"{APP_GROUP}/v1alpha1" in versions and f"{APP_GROUP}/v1beta1" in versions
    assert not [v for v in versions if v.startswith(HIDDEN_GROUP + "/")]


def test_group_and_version_documents_are_renamed(app):
    group = json.loads(app("get", "--raw", f"/apis/{APP_GROUP}"))
    assert group["name"] == APP_GROUP
    assert group["preferredVersion"] == {"groupVersion": f"{APP_GROUP}/v1beta1", "version": "v1beta1"}
    assert [v["groupVersion"] for v in group["versions"]] == [f"{APP_GROUP}/v1beta1", f"{APP_GROUP}/v1alpha1"]
    rl = json.loads(app("get", "--raw", f"/apis/{APP_GROUP}/v1alpha1"))
    assert rl["groupVersion"] == f"{APP_GROUP}/v1alpha1"
    assert {r["name"]: r.get("group") for r in rl["resources"]} == {"foos": None, "foos/status": None,
                                                                    "foos/scale": "autoscaling"}


def test_hidden_group_is_not_reachable(app):
    """The cluster's name is not a second way in (and, in direct mode, the
    original group does not exist on the stand-in)."""
    err = app.fails("get", "--raw", f"/apis/{HIDDEN_GROUP}/v1alpha1/namespaces/{app.namespace}/foos")
    assert "NotFound" in err or "not found" in err.lower(), err
