"""Fixtures: the upstream (stand-in or a real cluster), the regroup proxy in
front of it, and kubectl / Python clients on the app side. See e2e/README.md."""
import importlib.util
import json
from pathlib import Path
import os
import select
import subprocess
import sys
import uuid

import pytest

from e2e_support import (APP_GROUP, CLUSTER_GROUP, CONFIG_YAML, DIRECT, E2E, KUBECTL, KUBECTLS, REPO, Kubectl, stop,
                         tail, wait_port, write_kubeconfig, free_port)

# The tests of these modules are kubectl's: each runs with every version in
# KUBECTLS (test IDs end in [kubectl-1.31], [kubectl-1.36], [kubectl-1.37]); the other
# modules' `app` is kubectl 1.31. The session-scoped parameter keeps one
# `app` per version, so each version's tests run as one group.
KUBECTL_MODULES = {"test_get", "test_discovery", "test_watch", "test_write", "test_patch", "test_errors",
                   "test_openapi", "test_exec"}


def pytest_generate_tests(metafunc):
    if "kubectl_version" in metafunc.fixturenames and metafunc.module.__name__ in KUBECTL_MODULES:
        metafunc.parametrize("kubectl_version", list(KUBECTLS), indirect=True, scope="session",
                             ids=[f"kubectl-{v}" for v in KUBECTLS])

LOGS = []  # (title, path): shown at the end of a run that had failures


def pytest_report_header(config):
    mode = "real cluster (REGROUP_E2E_KUBECONFIG)" if os.environ.get("REGROUP_E2E_KUBECONFIG") else "stand-in"
    proxy = "regroup serve"
    if DIRECT:
        proxy = "NONE (REGROUP_E2E_DIRECT=1: the app talks to the upstream, in the cluster's group)"
    return [f"regroup e2e: upstream = {mode}; proxy = {proxy}; app group = {APP_GROUP}"]


def pytest_terminal_summary(terminalreporter):
    if terminalreporter.stats.get("failed") or terminalreporter.stats.get("error"):
        for title, path in LOGS:
            terminalreporter.section(f"last lines of {title} ({path})")
            terminalreporter.write_line(tail(path, 80))


def standin_module():
    spec = importlib.util.spec_from_file_location("standin_server", E2E / "standin" / "server.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def start_standin(workdir, name, *args, env=None):
    """Starts e2e/standin/server.py on a free port; returns (proc, port, log)."""
    log = workdir / f"{name}.log"
    if os.environ.get("REGROUP_E2E_STANDIN_VERBOSE") == "1":  # log Accept, Content-Type, User-Agent too
        args = (*args, "-v")
    proc = subprocess.Popen([sys.executable, str(E2E / "standin" / "server.py"), "--port", "0", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=open(log, "w"), text=True,
                            env=dict(os.environ, **(env or {})))
    ready, _, _ = select.select([proc.stdout], [], [], 15)
    first = proc.stdout.readline() if ready else ""
    if not first.startswith("LISTENING "):
        stop(proc)
        pytest.fail(f"stand-in did not start (first line {first!r}):\n{tail(log)}")
    LOGS.append((f"stand-in {name}", log))
    return proc, int(first.split()[1]), log


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("e2e")


@pytest.fixture(scope="session")
def regroup_bin():
    """$REGROUP_BIN, else `cargo build -p regroup` (a no-op when up to date, so
    the suite never runs a stale binary) and target/debug/regroup."""
    if os.environ.get("REGROUP_BIN"):
        return os.environ["REGROUP_BIN"]
    p = subprocess.run(["cargo", "build", "-p", "regroup"], cwd=REPO, capture_output=True, text=True, timeout=1500)
    if p.returncode != 0:
        pytest.fail(f"cargo build -p regroup failed:\n{p.stderr[-4000:]}")
    target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    return str((REPO / target) / "debug" / "regroup")


@pytest.fixture(scope="session")
def config_file(workdir):
    path = workdir / "regroup.yaml"
    path.write_text(CONFIG_YAML)
    return path


class Upstream:
    def __init__(self, kubeconfig, namespace, kubectl, url=None):
        self.kubeconfig, self.namespace, self.kubectl, self.url = kubeconfig, namespace, kubectl, url


@pytest.fixture(scope="session")
def front_proxy_pki(workdir):
    """The stand-in cluster's front-proxy PKI (kube-apiserver's
    --requestheader-client-ca-file and --proxy-client-cert-file/-key-file):
    (CA, the aggregator's client certificate CN=front-proxy-client). A real
    cluster has its own; this one's key lets tests sign other callers."""
    from pki import issue, new_ca
    ca = new_ca("e2e-front-proxy-ca")
    client = issue(ca, "front-proxy-client", client=True)
    ca.write(workdir, "front-proxy-ca")
    client.write(workdir, "front-proxy-client")
    return ca, client


@pytest.fixture(scope="session")
def upstream(workdir, request):
    """The cluster the proxy forwards to, in which only the renamed group exists."""
    if os.environ.get("REGROUP_E2E_KUBECONFIG"):
        yield from real_cluster(workdir, request)
        return
    env = {"REGROUP_STANDIN_HIDE_ORIG": "1"} if DIRECT else {}
    request.getfixturevalue("front_proxy_pki")
    proc, port, log = start_standin(workdir, "upstream", "--seed-namespace", "e2e", "--requestheader-ca",
                                    workdir / "front-proxy-ca.crt", "--proxy-client-cert",
                                    workdir / "front-proxy-client.crt", "--proxy-client-key",
                                    workdir / "front-proxy-client.key", env=env)
    kc = write_kubeconfig(workdir / "upstream.kubeconfig", f"http://127.0.0.1:{port}", "e2e")
    yield Upstream(kc, "e2e", Kubectl(kc, workdir / "cache-upstream", "e2e", [log]), f"http://127.0.0.1:{port}")
    stop(proc)


def real_cluster(workdir, request):
    """REGROUP_E2E_KUBECONFIG: a real cluster with admin rights. Installs the
    renamed CRD (`regroup render` of the original-group manifest), a test
    namespace and the seed Foos/ConfigMaps; removes them at the end."""
    kc = os.environ["REGROUP_E2E_KUBECONFIG"]
    ns = f"regroup-e2e-{uuid.uuid4().hex[:6]}"
    up = Kubectl(kc, workdir / "cache-upstream", ns)
    binary = request.getfixturevalue("regroup_bin")
    config = request.getfixturevalue("config_file")
    rendered = subprocess.run([binary, "render", "-c", str(config), "-f", str(E2E / "manifests" / "crd-foos.yaml")],
                              capture_output=True, text=True, timeout=60)
    if rendered.returncode != 0:
        pytest.fail(f"regroup render failed:\n{rendered.stderr}")
    crd = f"customresourcedefinition/foos.{CLUSTER_GROUP}"
    try:
        up("apply", "-f", "-", input=rendered.stdout)
        up("wait", "--for=condition=Established", crd, "--timeout=60s", timeout=90)
        up("create", "namespace", ns)
        # Seeds: the stand-in's captured objects, without server-set fields and
        # with ownerReferences pointing at the uids this cluster gave the Foos.
        uids = {}
        for obj in standin_module().seed_objects(ns):
            if obj["kind"] == "Deployment":  # a real cluster would start pods for it
                continue
            md = obj["metadata"]
            obj["metadata"] = {k: md[k] for k in ("name", "namespace", "labels") if k in md}
            obj.pop("status", None)
            if md.get("ownerReferences"):
                obj["metadata"]["ownerReferences"] = [dict(r, uid=uids[r["name"]]) for r in md["ownerReferences"]]
            created = json.loads(up("create", "-f", "-", "-o", "json", input=json.dumps(obj)))
            uids[created["metadata"]["name"]] = created["metadata"]["uid"]
        yield Upstream(kc, ns, up)
    finally:
        up.run("delete", "namespace", ns, "--ignore-not-found", "--wait=false", check=False)
        up.run("delete", crd, "--ignore-not-found", "--wait=false", check=False)


def start_regroup(binary, workdir, name, config, upstream_kubeconfig):
    """`regroup serve` on a free loopback port; returns (proc, port, log, app kubeconfig)."""
    port = free_port()
    log = workdir / f"{name}.log"
    proc = subprocess.Popen([binary, "serve", "-c", str(config), "--kubeconfig", str(upstream_kubeconfig),
                             "--listen", f"127.0.0.1:{port}"], stdout=open(log, "w"), stderr=subprocess.STDOUT)
    LOGS.append((f"regroup {name}", log))
    try:
        wait_port(port, proc, 20, f"regroup serve ({name})", log)
    except BaseException:
        stop(proc)
        raise
    return proc, port, log


@pytest.fixture(scope="session")
def regroup(upstream, workdir, request, config_file):
    """The real binary in front of the upstream; yields the APP's kubeconfig
    (server http://127.0.0.1:PORT, no credentials). In direct mode, the
    upstream's own kubeconfig (no proxy at all)."""
    if DIRECT:
        yield upstream.kubeconfig
        return
    proc, port, log = start_regroup(request.getfixturevalue("regroup_bin"), workdir, "proxy", config_file,
                                    upstream.kubeconfig)
    yield write_kubeconfig(workdir / "app.kubeconfig", f"http://127.0.0.1:{port}", upstream.namespace)
    stop(proc)


@pytest.fixture(scope="session")
def ns(upstream):
    return upstream.namespace


@pytest.fixture(scope="session")
def kubectl_version(request):
    """The kubectl version `app` runs (parametrized for KUBECTL_MODULES)."""
    return getattr(request, "param", "1.31")


@pytest.fixture(scope="session")
def app(regroup, upstream, workdir, kubectl_version):
    """kubectl as the app runs it: through regroup, in the original group
    (each version with its own discovery cache)."""
    logs = [path for _, path in LOGS]
    return Kubectl(regroup, workdir / f"cache-app-{kubectl_version}", upstream.namespace, logs,
                   binary=KUBECTLS[kubectl_version])


@pytest.fixture(scope="session")
def cluster(upstream):
    """kubectl straight to the upstream (the stand-in or the real cluster)."""
    return upstream.kubectl


@pytest.fixture(scope="session")
def pyclient(regroup):
    """The official Python client, configured from the app's kubeconfig."""
    from kubernetes import config
    return config.new_client_from_config(config_file=str(regroup))


@pytest.fixture(scope="session", autouse=True)
def _kubectl_installed():
    for binary in KUBECTLS.values():
        if not binary.exists():
            pytest.fail(f"{binary} is missing: run e2e/install.sh")


@pytest.fixture(scope="session")
def proxy_url(regroup):
    """The app's server URL (regroup's listener), for raw HTTP clients."""
    if DIRECT:
        pytest.skip("REGROUP_E2E_DIRECT: no proxy to rename the replayed protobuf")
    return json.loads(open(regroup).read())["clusters"][0]["cluster"]["server"]
