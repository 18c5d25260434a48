"""The official Python client (CustomObjectsApi) through the proxy."""
import json
import threading
import time

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from e2e_support import APP_GROUP, HIDDEN_GROUP


def test_python_client_lists_foos_in_the_original_group(pyclient, ns):
    api = client.CustomObjectsApi(pyclient)
    lst = api.list_namespaced_custom_object(APP_GROUP, "v1alpha1", ns, "foos")
    assert lst["apiVersion"] == f"{APP_GROUP}/v1alpha1" and lst["kind"] == "FooList"
    assert {"alpha", "beta", "gamma"} <= {i["metadata"]["name"] for i in lst["items"]}
    assert {i["apiVersion"] for i in lst["items"]} == {f"{APP_GROUP}/v1alpha1"}
    assert HIDDEN_GROUP not in json.dumps(lst)


def test_python_client_watch_sees_existing_and_new_foos(pyclient, ns):
    api = client.CustomObjectsApi(pyclient)
    events, errors, done = [], [], threading.Event()

    def run():
        w = watch.Watch()
        try:
            for ev in w.stream(api.list_namespaced_custom_object, APP_GROUP, "v1alpha1", ns, "foos",
                               timeout_seconds=10):
                events.append(ev)
                if ev["type"] == "ADDED" and ev["object"]["metadata"]["name"] == "py-watched":
                    w.stop()
        except Exception as e:  # shown by the main thread
            errors.append(e)
        finally:
            done.set()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 10
        while not any(e["object"]["metadata"]["name"] == "alpha" for e in events) and time.monotonic() < deadline:
            assert not errors, f"watch failed: {errors[0]}"
            time.sleep(0.05)
        body = {"apiVersion": f"{APP_GROUP}/v1alpha1", "kind": "Foo", "metadata": {"name": "py-watched"},
                "spec": {"deploymentName": "py-deploy", "replicas": 1}}
        created = api.create_namespaced_custom_object(APP_GROUP, "v1alpha1", ns, "foos", body)
        assert created["apiVersion"] == f"{APP_GROUP}/v1alpha1"
        assert done.wait(15) and not errors, \
            f"no ADDED event for py-watched: {errors or [(e['type'], e['object']['metadata']['name']) for e in events]}"
    finally:
        try:
            api.delete_namespaced_custom_object(APP_GROUP, "v1alpha1", ns, "foos", "py-watched")
        except ApiException:
            pass
    names = [(e["type"], e["object"]["metadata"]["name"]) for e in events]
    assert ("ADDED", "alpha") in names and ("ADDED", "py-watched") in names
    assert {e["object"]["apiVersion"] for e in events} == {f"{APP_GROUP}/v1alpha1"}


def test_python_client_not_found_status_names_the_original_group(pyclient, ns):
    api = client.CustomObjectsApi(pyclient)
    with pytest.raises(ApiException) as e:
        api.get_namespaced_custom_object(APP_GROUP, "v1alpha1", ns, "foos", "missing")
    assert e.value.status == 404
    status = json.loads(e.value.body)
    assert status["message"] == f'foos.{APP_GROUP} "missing" not found'
    assert status["details"] == {"name": "missing", "group": APP_GROUP, "kind": "foos"}
