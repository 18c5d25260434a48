"""regroup's own credential from a kubeconfig exec plugin, and the
configuration reloaded while regroup runs (real processes throughout).

The plugin is a small script: it prints the token in a file with an
expirationTimestamp and counts its runs. The stand-in accepts only the
token in that same file (--token-file, read at each request), so rewriting
the file revokes the old token at once, as a rotated or deleted
service-account token is revoked. Clients keep reading meanwhile and must
never see a failure: regroup gets the 401, runs the plugin once and sends
the request again."""
import base64
import json
import os
import re
import signal
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from conftest import start_regroup, start_standin
from e2e_support import CLUSTER_GROUP, DIRECT, KUBECTL, ORIG_GROUP, Kubectl, free_port, stop, write_kubeconfig

REAL = bool(os.environ.get("REGROUP_E2E_KUBECONFIG"))
needs_standin = pytest.mark.skipif(REAL or DIRECT, reason="needs the stand-in's --token-file (a real cluster's "
                                   "tokens can't be revoked by rewriting a file) and regroup itself (not DIRECT)")

PLUGIN = """#!{python}
import datetime, json, os
d = {dir!r}
runs = os.path.join(d, "plugin-runs")
n = int(open(runs).read()) + 1 if os.path.exists(runs) else 1
open(runs, "w").write(str(n))
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
open(os.path.join(d, "exec-info.json"), "w").write(json.dumps(info))
ttl = int(os.environ.get("TOKEN_TTL", "300"))
exp = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=ttl)
print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {{"token": open(os.path.join(d, "token")).read().strip(),
                             "expirationTimestamp": exp.strftime("%Y-%m-%dT%H:%M:%SZ")}}}}))
"""


def replace(path, text):
    """Writes a file atomically (a reader never sees it half written)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def runs(d):
    p = d / "plugin-runs"
    return int(p.read_text()) if p.exists() else 0


class Plugin:
    def __init__(self, d, proc, port, standin_log, proxy_log):
        self.dir, self.proc, self.port, self.standin_log, self.proxy_log = d, proc, port, standin_log, proxy_log
        self.url = f"http://127.0.0.1:{port}/apis/{ORIG_GROUP}/v1alpha1/namespaces/e2e/foos"

    def unauthorized(self):
        """How many requests the stand-in refused with 401."""
        return sum(1 for line in open(self.standin_log) if re.search(r" 401$", line.strip()))


def start(workdir, regroup_bin, config_file, name, ttl):
    d = workdir / name
    d.mkdir()
    (d / "token").write_text("token-1\n")
    plugin = d / "plugin.py"
    plugin.write_text(PLUGIN.format(python=sys.executable, dir=str(d)))
    plugin.chmod(0o755)
    sproc, sport, slog = start_standin(workdir, f"upstream-{name}", "--token-file", d / "token")
    kc = write_kubeconfig(d / "kubeconfig", f"http://127.0.0.1:{sport}", "e2e", user={"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin), "interactiveMode": "Never",
        "provideClusterInfo": True, "env": [{"name": "TOKEN_TTL", "value": str(ttl)}],
        "installHint": "it is written by test_credentials.py"}})
    proc, port, log = start_regroup(regroup_bin, workdir, f"proxy-{name}", config_file, kc)
    return Plugin(d, proc, port, slog, log), sproc


def hammer(url, stop_event, results):
    """GETs `url` in a loop until told to stop; records each status."""
    while not stop_event.is_set():
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                r.read()
                results.append(r.status)
        except urllib.error.HTTPError as e:
            results.append(e.code)
        except OSError as e:
            results.append(repr(e))
        time.sleep(0.02)


@needs_standin
def test_a_rotated_token_is_followed_without_a_failed_client_request(workdir, regroup_bin, config_file):
    p, sproc = start(workdir, regroup_bin, config_file, "rotation", ttl=3600)
    try:
        with urllib.request.urlopen(p.url, timeout=10) as r:
            assert r.status == 200
        assert runs(p.dir) == 1
        info = json.loads((p.dir / "exec-info.json").read_text())
        assert info["kind"] == "ExecCredential" and info["spec"]["interactive"] is False
        assert info["spec"]["cluster"]["server"].startswith("http://127.0.0.1:")
        # Four clients read continuously while the token is rotated 3 times.
        done, results = threading.Event(), []
        clients = [threading.Thread(target=hammer, args=(p.url, done, results)) for _ in range(4)]
        for c in clients:
            c.start()
        for i in range(2, 5):
            time.sleep(0.7)
            replace(p.dir / "token", f"token-{i}\n")
        time.sleep(0.7)
        done.set()
        for c in clients:
            c.join()
        failed = [r for r in results if r != 200]
        assert not failed, f"{len(failed)} of {len(results)} client requests failed: {failed[:5]}"
        assert len(results) > 20
        assert p.unauthorized() >= 3, "the rotations were seen by regroup (401s upstream, none to the clients)"
        assert runs(p.dir) == 4, "one plugin run per rotation, however many requests saw the 401"
        print(f"rotation: {len(results)} client requests, 0 failed, {p.unauthorized()} 401s upstream, "
              f"{runs(p.dir)} plugin runs")
    finally:
        stop(p.proc)
        stop(sproc)


@needs_standin
def test_a_credential_is_refreshed_before_it_expires(workdir, regroup_bin, config_file):
    p, sproc = start(workdir, regroup_bin, config_file, "expiry", ttl=2)
    try:
        deadline = time.monotonic() + 4.5
        while time.monotonic() < deadline:
            with urllib.request.urlopen(p.url, timeout=10) as r:
                assert r.status == 200
            time.sleep(0.1)
        # Lifetime 2 s, refreshed when less than a fifth is left: no 401 needed.
        assert runs(p.dir) >= 3
        assert p.unauthorized() == 0
    finally:
        stop(p.proc)
        stop(sproc)


@needs_standin
def test_a_failing_plugin_is_a_503_with_its_stderr_and_readyz_says_why(workdir, regroup_bin):
    d = workdir / "failing"
    d.mkdir()
    plugin = d / "plugin.sh"
    plugin.write_text("#!/bin/sh\necho 'error: SSO session expired, run aws sso login' >&2\nexit 1\n")
    plugin.chmod(0o755)
    sproc, sport, _ = start_standin(workdir, "upstream-failing", "--token-file", d / "token")
    kc = write_kubeconfig(d / "kubeconfig", f"http://127.0.0.1:{sport}", "e2e", user={"exec": {
        "apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(plugin)}})
    mport = free_port()
    config = d / "regroup.yaml"
    config.write_text(f"rules:\n  - {{from: {ORIG_GROUP}, to: {CLUSTER_GROUP}}}\n"
                      f"listeners:\n  metrics: 127.0.0.1:{mport}\n")
    proc, port, _ = start_regroup(regroup_bin, workdir, "proxy-failing", config, kc)
    try:
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/namespaces", timeout=10)
        assert e.value.code == 503
        assert "SSO session expired" in e.value.read().decode()
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://127.0.0.1:{mport}/readyz", timeout=10)
        assert e.value.code == 503 and "SSO session expired" in e.value.read().decode()
        text = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=10).read().decode()
        assert 'regroup_credential_failures_total{source="exec"}' in text
    finally:
        stop(proc)
        stop(sproc)


@pytest.mark.skipif(DIRECT, reason="REGROUP_E2E_DIRECT: no regroup to reload")
def test_a_rule_added_to_the_config_file_applies_to_new_requests(workdir, regroup_bin, upstream):
    """Runs against the stand-in or a real cluster: regroup starts without
    the Foo rule, so the app sees the cluster's group as it is; the file is
    edited while a watch is open; new requests see the rule, the open watch
    finishes on the configuration it started with."""
    d = workdir / "reload"
    d.mkdir()
    config = d / "regroup.yaml"
    config.write_text("rules:\n  - {from: wardle.example.com, to: wardle.team1.example.com}\n")
    proc, port, log = start_regroup(regroup_bin, workdir, "proxy-reload", config, upstream.kubeconfig)
    base = f"http://127.0.0.1:{port}"
    ns = upstream.namespace
    cluster_path = f"/apis/{CLUSTER_GROUP}/v1alpha1/namespaces/{ns}/foos"
    orig_path = f"/apis/{ORIG_GROUP}/v1alpha1/namespaces/{ns}/foos"
    try:
        foo = json.load(urllib.request.urlopen(f"{base}{cluster_path}/alpha", timeout=10))
        assert foo["apiVersion"] == f"{CLUSTER_GROUP}/v1alpha1"
        watch = urllib.request.urlopen(f"{base}{cluster_path}?watch=1&timeoutSeconds=30", timeout=30)
        config.write_text("rules:\n  - {from: wardle.example.com, to: wardle.team1.example.com}\n"
                          f"  - {{from: {ORIG_GROUP}, to: {CLUSTER_GROUP}}}\n")
        deadline = time.monotonic() + 10
        while True:
            try:
                foo = json.load(urllib.request.urlopen(f"{base}{orig_path}/alpha", timeout=10))
                break
            except urllib.error.HTTPError:
                assert time.monotonic() < deadline, "the new rule was not applied within 10 s"
                time.sleep(0.2)
        assert foo["apiVersion"] == f"{ORIG_GROUP}/v1alpha1"
        with pytest.raises(urllib.error.HTTPError) as e:  # now shadowed
            urllib.request.urlopen(f"{base}{cluster_path}/alpha", timeout=10)
        assert e.value.code == 404
        assert "configuration reloaded" in log.read_text()
        # The watch opened before the reload still streams, unrenamed (a
        # Foo of its own, so the seeds other tests compare stay as they are).
        name = f"reload-probe-{int(time.time())}"
        upstream.kubectl("create", "-f", "-", input=json.dumps({
            "apiVersion": f"{CLUSTER_GROUP}/v1alpha1", "kind": "Foo",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"deploymentName": f"{name}-deploy", "replicas": 1}}))
        try:
            while True:
                line = watch.readline()
                assert line, "the open watch ended"
                ev = json.loads(line)
                if ev["type"] == "ADDED" and ev["object"]["metadata"]["name"] == name:
                    assert ev["object"]["apiVersion"] == f"{CLUSTER_GROUP}/v1alpha1"
                    break
        finally:
            upstream.kubectl("delete", f"foos.{CLUSTER_GROUP}", name, "--ignore-not-found")
        watch.close()
        # An invalid edit is refused; the rules in force stay.
        config.write_text("rules:\n  - {from: apps, to: apps.example.com}\n")
        time.sleep(3)
        assert "NOT reloaded" in log.read_text()
        foo = json.load(urllib.request.urlopen(f"{base}{orig_path}/alpha", timeout=10))
        assert foo["apiVersion"] == f"{ORIG_GROUP}/v1alpha1"
        # SIGHUP reloads too (here the invalid file again: refused, still serving).
        before = log.read_text().count("NOT reloaded")
        proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while log.read_text().count("NOT reloaded") == before:
            assert time.monotonic() < deadline, "SIGHUP did not reload"
            time.sleep(0.1)
        assert proc.poll() is None
        assert any("NOT reloaded" in line and "SIGHUP" in line for line in log.read_text().splitlines())
        foo = json.load(urllib.request.urlopen(f"{base}{orig_path}/alpha", timeout=10))
        assert foo["apiVersion"] == f"{ORIG_GROUP}/v1alpha1"
    finally:
        stop(proc)


SA_PLUGIN = """#!{python}
# regroup's exec plugin for a cluster: a service-account token bound to a
# Secret made for it (`kubectl create token`), so deleting that Secret
# revokes the token, as a real cluster does.
import datetime, json, os, subprocess
d, kubectl, kc, ns, sa = {dir!r}, {kubectl!r}, {kubeconfig!r}, {namespace!r}, {sa!r}
runs = os.path.join(d, "plugin-runs")
n = int(open(runs).read()) + 1 if os.path.exists(runs) else 1
open(runs, "w").write(str(n))
base = [kubectl, "--kubeconfig", kc, "--cache-dir", os.path.join(d, "plugin-cache"), "-n", ns]
secret = f"{{sa}}-bound-{{n}}"
subprocess.run(base + ["create", "secret", "generic", secret], check=True, capture_output=True)
token = subprocess.run(base + ["create", "token", sa, "--bound-object-kind=Secret", f"--bound-object-name={{secret}}",
                               "--duration=10m"], check=True, capture_output=True, text=True).stdout.strip()
with open(os.path.join(d, f"token-{{n}}"), "w") as f:  # for the test to try the revoked token itself
    f.write(token)
exp = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=10)
print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {{"token": token, "expirationTimestamp": exp.strftime("%Y-%m-%dT%H:%M:%SZ")}}}}))
"""


def status_with_token(cluster, path, token):
    """The status a kubeconfig cluster entry answers to a GET with this token."""
    ctx = ssl.create_default_context()
    if cluster.get("certificate-authority-data"):
        ctx.load_verify_locations(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    elif cluster.get("certificate-authority"):
        ctx.load_verify_locations(cafile=cluster["certificate-authority"])
    if cluster.get("insecure-skip-tls-verify"):
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    req = urllib.request.Request(cluster["server"].rstrip("/") + path, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


@pytest.mark.skipif(DIRECT, reason="REGROUP_E2E_DIRECT: no regroup, so no exec plugin of regroup's")
def test_a_service_account_token_revoked_mid_run_is_replaced_unseen_by_the_app(workdir, regroup_bin, upstream,
                                                                               config_file):
    """Against a real cluster (REGROUP_E2E_KUBECONFIG) or the stand-in, which
    implements TokenRequest bound to a Secret: regroup's identity is a
    service account whose token an exec plugin gets with `kubectl create
    token`; the Secret the token is bound to is deleted mid-run; the app's
    next requests all succeed while regroup gets a fresh token."""
    up, ns, sa = upstream.kubectl, upstream.namespace, "regroup-e2e-sidecar"
    d = workdir / "sa-token"
    d.mkdir()
    up("create", "serviceaccount", sa)
    up("create", "role", sa, "--verb=get,list,watch", f"--resource=foos.{CLUSTER_GROUP}")
    up("create", "rolebinding", sa, f"--role={sa}", f"--serviceaccount={ns}:{sa}")
    cluster = json.loads(up("config", "view", "--raw", "--minify", "--flatten", "-o", "json"))["clusters"][0]["cluster"]
    plugin = d / "plugin.py"
    plugin.write_text(SA_PLUGIN.format(python=sys.executable, dir=str(d), kubectl=str(KUBECTL),
                                       kubeconfig=str(upstream.kubeconfig), namespace=ns, sa=sa))
    plugin.chmod(0o755)
    extra = {k: v for k, v in cluster.items() if k != "server"}
    kc = write_kubeconfig(d / "kubeconfig", cluster["server"], ns, cluster_extra=extra, user={"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin), "interactiveMode": "Never"}})
    proc, port, log = start_regroup(regroup_bin, workdir, "proxy-sa-token", config_file, kc)
    app = Kubectl(write_kubeconfig(d / "app.kubeconfig", f"http://127.0.0.1:{port}", ns), d / "app-cache", ns, [log])
    try:
        def foos():
            names = app("get", f"foos.{ORIG_GROUP}", "-o", "name").split()
            assert names and all(n.startswith(f"foo.{ORIG_GROUP}/") for n in names), names
            return names

        before = foos()
        assert runs(d) == 1
        up("delete", "secret", f"{sa}-bound-1")
        # The cluster now refuses the first token ...
        deadline = time.monotonic() + 30
        while (code := status_with_token(cluster, f"/apis/{CLUSTER_GROUP}/v1alpha1/namespaces/{ns}/foos",
                                         (d / "token-1").read_text())) != 401:
            assert code == 200 and time.monotonic() < deadline, f"{code}: the token of a deleted Secret still works"
            time.sleep(0.5)
        # ... and the app, through regroup, never notices: each call succeeds.
        assert foos() == before
        assert runs(d) == 2, "one plugin run for the revoked token"
        assert foos() == before and runs(d) == 2
        text = log.read_text()
        assert (d / "token-1").read_text() not in text and (d / "token-2").read_text() not in text
    finally:
        stop(proc)
