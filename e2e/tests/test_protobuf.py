"""A protobuf client through the real binary: client-go-style requests with
`Accept: application/vnd.kubernetes.protobuf` for a Deployment whose
ownerReference points at a Foo, and a protobuf watch of ConfigMaps owned by
Foos. Against the stand-in these are the real captured bytes (replayed, not
the stand-in's own encoder's); regroup must rename the group inside them."""
import http.client
import os
import struct
from urllib.parse import urlsplit

import pytest

from e2e_support import APP_GROUP, CLUSTER_GROUP

pytestmark = pytest.mark.skipif(bool(os.environ.get("REGROUP_E2E_KUBECONFIG")),
                                reason="replays captured protobuf objects that only the stand-in serves")

PROTOBUF = "application/vnd.kubernetes.protobuf"


def get(proxy_url, path, accept=PROTOBUF):
    u = urlsplit(proxy_url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    c.request("GET", path, headers={"Accept": accept})
    r = c.getresponse()
    return r.status, r.getheader("Content-Type"), r.read()


def test_protobuf_deployment_owner_reference_names_the_original_group(proxy_url):
    status, ctype, body = get(proxy_url, "/apis/apps/v1/namespaces/renamed/deployments/alpha-deploy")
    assert status == 200 and ctype.startswith(PROTOBUF), (status, ctype, body[:200])
    assert body.startswith(b"k8s\x00")
    assert f"{APP_GROUP}/v1alpha1".encode() in body
    assert CLUSTER_GROUP.encode() not in body


def test_protobuf_watch_frames_are_renamed_one_by_one(proxy_url):
    status, ctype, body = get(proxy_url, "/api/v1/namespaces/renamed/configmaps?watch=1",
                              accept=PROTOBUF + ";stream=watch")
    assert status == 200 and "stream=watch" in ctype, (status, ctype)
    frames, at = [], 0
    while at < len(body):
        (n,) = struct.unpack(">I", body[at:at + 4])
        frames.append(body[at + 4:at + 4 + n])
        at += 4 + n
    assert at == len(body), "frames tile the body exactly"
    assert len(frames) >= 4  # ADDED MODIFIED DELETED and bookmarks, as captured
    assert sum(f"{APP_GROUP}/v1alpha1".encode() in f for f in frames) == 3
    assert not any(CLUSTER_GROUP.encode() in f for f in frames)
