"""Helpers shared by conftest.py and the tests: constants, kubectl, processes."""
import json
import os
import queue
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

E2E = Path(__file__).resolve().parents[1]
REPO = E2E.parent
KUBECTL = Path(os.environ.get("REGROUP_E2E_KUBECTL") or E2E / ".bin" / "kubectl")
# The kubectl versions the kubectl tests run with (e2e/install.sh puts them
# in e2e/.bin): the oldest the suite pins, the newest of the Kubernetes
# versions users run (1.36), and the newest kubectl released.
KUBECTLS = {
    "1.31": KUBECTL,
    "1.36": Path(os.environ.get("REGROUP_E2E_KUBECTL_136") or E2E / ".bin" / "kubectl-1.36"),
    "1.37": Path(os.environ.get("REGROUP_E2E_KUBECTL_137") or E2E / ".bin" / "kubectl-1.37"),
}

ORIG_GROUP = "samplecontroller.k8s.io"  # what the app (kubectl, python client) uses
CLUSTER_GROUP = "samplecontroller.team1.example.com"  # the only Foo group on the cluster
# The app's aggregated API (e2e/standin/aggregated.py) and its cluster name.
ORIG_AGG_GROUP, CLUSTER_AGG_GROUP = "wardle.example.com", "wardle.team1.example.com"
CONFIG_YAML = (f"rules:\n  - from: {ORIG_GROUP}\n    to: {CLUSTER_GROUP}\n"
               f"  - from: {ORIG_AGG_GROUP}\n    to: {CLUSTER_AGG_GROUP}\n")

# REGROUP_E2E_DIRECT=1 is a debugging aid for the stand-in and the tests: no
# proxy; the "app" talks to the upstream directly, in the cluster's group.
DIRECT = os.environ.get("REGROUP_E2E_DIRECT") == "1"
APP_GROUP = CLUSTER_GROUP if DIRECT else ORIG_GROUP
# The group the app must never see: the cluster's name through the proxy; in
# direct mode the original one (which the stand-in then hides from /apis).
HIDDEN_GROUP = ORIG_GROUP if DIRECT else CLUSTER_GROUP


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout, what, log):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{what} exited with status {proc.returncode} before listening:\n{tail(log)}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"{what} did not accept connections on 127.0.0.1:{port} within {timeout}s:\n{tail(log)}")


WAIT = 90  # seconds: the longest a real cluster's CRD, discovery or garbage collector is waited for


def poll(check, timeout, interval, failure):
    """Calls check() every `interval` seconds until it returns a true value,
    which it returns; once `timeout` seconds have passed (check() runs once
    more after the deadline), fails with the message failure() returns."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(failure())
        time.sleep(interval)


def wait_for(what, check, timeout=WAIT, diag=None, interval=0.3):
    """poll(): "timed out ... waiting for `what`", with diag()'s text when given."""
    return poll(check, timeout, interval,
                lambda: f"timed out after {timeout}s waiting for {what}" + (f"\n{diag()}" if diag else ""))


def tail(path, n=60):
    try:
        lines = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-n:])


def stop(proc, timeout=5):
    """Terminates `proc` (if it still runs), killing it after `timeout` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def write_kubeconfig(path, server, namespace, user=None, cluster_extra=None):
    """A kubeconfig in JSON (valid YAML). `user` is the user entry ({} for none)."""
    cluster = dict({"server": server}, **(cluster_extra or {}))
    cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "e2e",
           "clusters": [{"name": "e2e", "cluster": cluster}],
           "users": [{"name": "e2e", "user": user or {}}],
           "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "e2e", "namespace": namespace}}]}
    Path(path).write_text(json.dumps(cfg, indent=1))
    os.chmod(path, 0o600)
    return Path(path)


class Kubectl:
    """Runs e2e/.bin/kubectl with one kubeconfig and its own discovery cache.
    `logs` are files whose tails are shown when a command fails (the proxy's
    and the stand-in's request logs)."""

    def __init__(self, kubeconfig, cache_dir, namespace, logs=(), binary=KUBECTL):
        self.kubeconfig, self.cache_dir, self.namespace, self.logs = kubeconfig, cache_dir, namespace, list(logs)
        self.binary = binary

    def argv(self, *args):
        return [str(self.binary), "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.cache_dir),
                "-n", self.namespace, *map(str, args)]

    def run(self, *args, timeout=30, check=True, input=None):
        try:
            p = subprocess.run(self.argv(*args), input=input, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"kubectl {' '.join(map(str, args))} timed out after {timeout}s\n"
                        f"stderr:\n{e.stderr or ''}{self.log_tails()}")
        if check and p.returncode != 0:
            pytest.fail(f"kubectl {' '.join(map(str, args))} failed ({p.returncode})\n"
                        f"stderr:\n{p.stderr}\nstdout:\n{p.stdout[:2000]}{self.log_tails()}")
        return p

    def __call__(self, *args, **kw):
        """stdout of a kubectl command that must succeed."""
        return self.run(*args, **kw).stdout

    def json(self, *args, **kw):
        return json.loads(self(*args, "-o", "json", **kw))

    def fails(self, *args, **kw):
        """stderr of a kubectl command that must fail."""
        p = self.run(*args, check=False, **kw)
        assert p.returncode != 0, f"kubectl {' '.join(map(str, args))} succeeded unexpectedly:\n{p.stdout}"
        return p.stderr

    def log_tails(self):
        return "".join(f"\n--- last lines of {log} ---\n{tail(log, 25)}" for log in self.logs)


class Stream:
    """A long-running process whose stdout is a sequence of JSON documents
    (kubectl --watch -o json prints one indented object after another), or of
    lines with lines=True."""

    def __init__(self, argv, lines=False):
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.docs, self.stderr = queue.Queue(), []
        threading.Thread(target=self._lines if lines else self._read, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()

    def _read(self):
        buf, dec = "", json.JSONDecoder()
        for line in self.proc.stdout:
            buf += line
            while buf.strip():
                try:
                    doc, end = dec.raw_decode(buf.lstrip())
                except ValueError:
                    break
                self.docs.put(doc)
                buf = buf.lstrip()[end:]
        self.docs.put(None)

    def _lines(self):
        for line in self.proc.stdout:
            self.docs.put(line.rstrip("\n"))
        self.docs.put(None)

    def until(self, pred, timeout, seen):
        """Collect documents into `seen` until pred(doc) is true; returns that doc."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                doc = self.docs.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                break
            if doc is None:
                break
            seen.append(doc)
            if pred(doc):
                return doc
        got = [d if isinstance(d, str) else (d.get("type"), (d.get("object") or {}).get("metadata", {}).get("name"))
               for d in seen]
        pytest.fail(f"watch did not produce the expected event within {timeout}s; got {len(seen)} documents: "
                    f"{got}\nkubectl stderr:\n{''.join(self.stderr)}")

    def close(self):
        stop(self.proc)


# ---- WatchList (streaming lists, `sendInitialEvents`) -------------------------

REAL = bool(os.environ.get("REGROUP_E2E_KUBECONFIG"))
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
WATCHLIST_QUERY = [("watch", "1"), ("sendInitialEvents", "true"),
                   ("resourceVersionMatch", "NotOlderThan"), ("allowWatchBookmarks", "true")]


def foo_watchlist(pyclient, ns, query=WATCHLIST_QUERY, timeout=2):
    """A Foo watch with `query` through the Python client's ApiClient (its
    configuration and authentication; the generated methods have no
    `sendInitialEvents`), read to its end at `timeoutSeconds`. Returns
    (status, body bytes); an error status is returned, not raised."""
    from kubernetes.client.rest import ApiException
    try:
        r = pyclient.call_api(f"/apis/{APP_GROUP}/v1alpha1/namespaces/{ns}/foos", "GET",
                              query_params=list(query) + [("timeoutSeconds", str(timeout))],
                              header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
                              _preload_content=False, _return_http_data_only=True,
                              _request_timeout=timeout + 20)
        return r.status, r.data
    except ApiException as e:
        return e.status, (e.body or b"").encode() if isinstance(e.body, str) else (e.body or b"")


def initial_events_end(events):
    """The index of the BOOKMARK annotated `k8s.io/initial-events-end`, or None."""
    for i, e in enumerate(events):
        ann = ((e.get("object") or {}).get("metadata") or {}).get("annotations") or {}
        if e.get("type") == "BOOKMARK" and ann.get(INITIAL_EVENTS_END) == "true":
            return i
    return None
