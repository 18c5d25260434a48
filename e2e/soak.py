#!/usr/bin/env python3
"""Soak: the real regroup binary under mixed load with faults, loopback only.

Starts the stand-in upstream (e2e/standin/server.py) and `regroup serve` in
front of it, then for --duration seconds drives a bounded mix through regroup:
GET, LIST, WATCH and merge PATCH of Foos in JSON, a protobuf GET and a protobuf
watch (the stand-in replays captured protobuf bytes). Faults: the upstream is
killed (SIGKILL) and restarted on the same port every --fault-every seconds,
and slow clients (headers sent a byte at a time, a response read a few bytes at
a time) run throughout. Between upstream kills, a hostile phase of
--hostile-for seconds (every --fault-every seconds too, half a period after
each kill) mixes in oversized uploads (4 MiB, answered 413 before they are
read), gzip bombs from the upstream (1 MiB inflating to 1 GiB, 502) and
budget pressure (24 concurrent 2.5 MiB renamed creates, some 429): these
refusals are expected, not errors, and so is a 429 to the normal load while
the pressure lasts (a JSON watch's: its stream ends with a 429 Status event). Every --interval seconds it prints one line: requests
ok, refused while the upstream was down or the budget was under pressure
(expected), the hostile phase's expected refusals, errors, regroup's RSS and
open fds. Exits 1 if regroup died, any request failed outside a fault
window, a hostile request got anything but its expected refusal (or, for a
pressure upload, its renamed answer), or a renamed body still held the
cluster's group.

    e2e/soak.py --duration 60                      # CI's short mode
    nice e2e/soak.py --duration 3600 --rate 20     # the 1-hour run (docs/soak.md)

Stdlib only; needs target/release/regroup (or --binary).
"""
import argparse
import http.client
import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

E2E = Path(__file__).resolve().parent
REPO = E2E.parent
APP_GROUP = "samplecontroller.k8s.io"
CLUSTER_GROUP = "samplecontroller.team1.example.com"
CONFIG_YAML = f"rules:\n  - from: {APP_GROUP}\n    to: {CLUSTER_GROUP}\n"
NS = "soak"
FOOS = f"/apis/{APP_GROUP}/v1alpha1/namespaces/{NS}/foos"
PROTOBUF = "application/vnd.kubernetes.protobuf"
# A status regroup gives while the upstream is down or restarting.
UPSTREAM_DOWN = (502, 503, 504)
# After a restart the stand-in needs a moment to listen again.
FAULT_GRACE = 3.0
# After a pressure burst, what it held is given back within this.
PRESSURE_GRACE = 2.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.ok = self.faulted = self.slow = self.refused = 0
        self.errors = []  # (time, op, what): kept whole for the report
        self.by_op = {}

    def add(self, op, outcome, what=None):
        with self.lock:
            self.by_op.setdefault(op, {"ok": 0, "faulted": 0, "refused": 0, "error": 0})[outcome] += 1
            if outcome == "ok":
                self.ok += 1
            elif outcome == "faulted":
                self.faulted += 1
            elif outcome == "refused":
                self.refused += 1
            else:
                self.errors.append((time.time(), op, what))


class Upstream:
    """The stand-in on a fixed port, killed and restarted on demand. `down`
    holds while it is gone and for FAULT_GRACE after it is back."""

    def __init__(self, workdir, port):
        self.workdir, self.port = workdir, port
        self.proc = None
        self.restarts = 0
        self.down_until = 0.0
        self.down = False
        self.lock = threading.Lock()

    def start(self):
        log = open(self.workdir / "upstream.log", "a")
        self.proc = subprocess.Popen([sys.executable, str(E2E / "standin" / "server.py"), "--port", str(self.port),
                                      "--seed-namespace", NS], stdout=subprocess.DEVNULL, stderr=log)
        if not wait_port(self.port, self.proc, 15):
            raise SystemExit(f"stand-in did not listen on {self.port}; see {self.workdir / 'upstream.log'}")

    def kill_and_restart(self, pause):
        with self.lock:
            self.down = True
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        time.sleep(pause)
        self.start()
        with self.lock:
            self.down = False
            self.down_until = time.monotonic() + FAULT_GRACE
            self.restarts += 1

    def in_fault(self):
        with self.lock:
            return self.down or time.monotonic() < self.down_until

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def proc_stats(pid):
    """(RSS in MiB, open fds) of a process, from /proc (Linux)."""
    rss = None
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def budget_refused(event):
    """A watch's ERROR event carrying the 429 Status regroup sends when the
    memory budget stays spent past memoryBudgetWait."""
    obj = event.get("object") or {}
    return event.get("type") == "ERROR" and obj.get("kind") == "Status" and obj.get("code") == 429


class Pressure:
    """While a burst of large uploads holds the memory budget (and for
    PRESSURE_GRACE after), a 429 to anyone is expected."""

    def __init__(self):
        self.lock = threading.Lock()
        self.bursts = 0
        self.until = 0.0

    def begin(self):
        with self.lock:
            self.bursts += 1
            self.until = float("inf")

    def end(self):
        with self.lock:
            self.until = time.monotonic() + PRESSURE_GRACE

    def active(self):
        with self.lock:
            return time.monotonic() < self.until


class Load:
    def __init__(self, port, upstream, stats, deadline, pressure=None):
        self.port, self.upstream, self.stats, self.deadline = port, upstream, stats, deadline
        self.pressure = pressure or Pressure()

    def conn(self, timeout=30):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def judge(self, op, started_in_fault, status, body=None, want=(200,), renamed=True):
        """One request's outcome: ok, faulted (upstream down: expected) or an error."""
        fault = started_in_fault or self.upstream.in_fault()
        if status == 429 and 429 not in want and self.pressure.active():
            self.stats.add(op, "faulted")
            return
        if status in want:
            if renamed and body is not None and CLUSTER_GROUP.encode() in body:
                self.stats.add(op, "error", f"{status}: the cluster's group in the body")
            else:
                self.stats.add(op, "ok")
        elif fault and status in UPSTREAM_DOWN:
            self.stats.add(op, "faulted")
        else:
            self.stats.add(op, "error", f"status {status}: {(body or b'')[:200]!r}")

    def request(self, op, method, path, headers=None, body=None, want=(200,), renamed=True):
        fault = self.upstream.in_fault()
        c = self.conn()
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            data = r.read()
            self.judge(op, fault, r.status, data, want, renamed)
        except (OSError, http.client.HTTPException) as e:
            # regroup answers even when the upstream is gone; a broken
            # connection to regroup is an error unless the upstream died mid-body.
            if fault or self.upstream.in_fault():
                self.stats.add(op, "faulted")
            else:
                self.stats.add(op, "error", f"{type(e).__name__}: {e}")
        finally:
            c.close()

    def get(self):
        self.request("get", "GET", f"{FOOS}/alpha", {"Accept": "application/json"})

    def list(self):
        self.request("list", "GET", FOOS, {"Accept": "application/json"})

    def patch(self):
        body = json.dumps({"metadata": {"labels": {"soak": str(random.randrange(1 << 30))}}})
        self.request("patch", "PATCH", f"{FOOS}/beta", {"Content-Type": "application/merge-patch+json"},
                     body.encode())

    def get_protobuf(self):
        self.request("get-protobuf", "GET", "/apis/apps/v1/namespaces/renamed/deployments/alpha-deploy",
                     {"Accept": PROTOBUF})

    def watch_json(self):
        """A Foo watch for a few seconds: every line a WatchEvent in the app's group."""
        fault = self.upstream.in_fault()
        c = self.conn(timeout=20)
        try:
            c.request("GET", f"{FOOS}?watch=1&timeoutSeconds={random.randint(2, 6)}",
                      headers={"Accept": "application/json"})
            r = c.getresponse()
            data = r.read()
            if r.status == 200:
                lines = [json.loads(line) for line in data.splitlines() if line.strip()]
                bad = [e for e in lines if e.get("type") not in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK")]
                # An event regroup could not rename while the burst held the
                # budget ends the stream with a 429 Status event: expected
                # then, as a 429 answer is.
                if bad and self.pressure.active() and all(budget_refused(e) for e in bad):
                    self.stats.add("watch-json", "faulted")
                    return
                if bad and not (fault or self.upstream.in_fault()):
                    self.stats.add("watch-json", "error", f"odd events: {bad[:1]!r}"[:300])
                    return
            self.judge("watch-json", fault, r.status, data)
        except (OSError, http.client.HTTPException, ValueError) as e:
            if fault or self.upstream.in_fault():
                self.stats.add("watch-json", "faulted")
            else:
                self.stats.add("watch-json", "error", f"{type(e).__name__}: {e}")
        finally:
            c.close()

    def watch_protobuf(self):
        """The captured protobuf ConfigMap watch: length-prefixed frames that tile the body."""
        fault = self.upstream.in_fault()
        c = self.conn()
        try:
            c.request("GET", "/api/v1/namespaces/renamed/configmaps?watch=1",
                      headers={"Accept": PROTOBUF + ";stream=watch"})
            r = c.getresponse()
            data = r.read()
            if r.status == 200:
                at = 0
                while at + 4 <= len(data):
                    at += 4 + struct.unpack(">I", data[at:at + 4])[0]
                if at != len(data) and not (fault or self.upstream.in_fault()):
                    self.stats.add("watch-protobuf", "error", "frames do not tile the body")
                    return
            self.judge("watch-protobuf", fault, r.status, data)
        except (OSError, http.client.HTTPException) as e:
            if fault or self.upstream.in_fault():
                self.stats.add("watch-protobuf", "faulted")
            else:
                self.stats.add("watch-protobuf", "error", f"{type(e).__name__}: {e}")
        finally:
            c.close()

    def oversized(self):
        """A 4 MiB update: refused with a 413 Status from its Content-Length,
        before regroup reads it (the answer may come before it is sent)."""
        body = b'{"apiVersion":"%s/v1alpha1","kind":"Foo","metadata":{"name":"beta"},"spec":{"x":"%s"}}' % (
            APP_GROUP.encode(), b"x" * (4 << 20))
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=30) as s:
                s.sendall((f"PUT {FOOS}/beta HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                           f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode())
                try:
                    s.sendall(body)
                except OSError:
                    pass  # regroup answered and closed: what matters is the answer
                data = b""
                while chunk := s.recv(65536):
                    data += chunk
        except OSError as e:
            data = str(e).encode()
        status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0
        if status == 413 and b'"code":413' in data:
            self.stats.add("oversized", "refused")
        else:
            self.stats.add("oversized", "error", f"status {status}: {data[:200]!r}")

    def gzip_bomb(self):
        """The stand-in's gzip bomb: a 502 Status after regroup inflated at
        most its object limit."""
        c = self.conn(timeout=60)
        try:
            c.request("GET", f"{FOOS}/gzip-bomb", headers={"Accept": "application/json"})
            r = c.getresponse()
            data = r.read()
            if r.status == 502 and b'"code":502' in data:
                self.stats.add("gzip-bomb", "refused")
            elif r.status in UPSTREAM_DOWN and self.upstream.in_fault():
                self.stats.add("gzip-bomb", "faulted")
            else:
                self.stats.add("gzip-bomb", "error", f"status {r.status}: {data[:200]!r}")
        except (OSError, http.client.HTTPException) as e:
            self.stats.add("gzip-bomb", "error", f"{type(e).__name__}: {e}")
        finally:
            c.close()

    def big_create(self, n):
        """A 2.5 MiB Foo created (dry run: nothing stored), renamed there
        and back: 201 with the app's group, or 429 while the budget is spent."""
        name = f"pressure-{n}"
        body = json.dumps({"apiVersion": f"{APP_GROUP}/v1alpha1", "kind": "Foo",
                           "metadata": {"name": name, "namespace": NS},
                           "spec": {"data": f"{n:04}-" * ((5 << 19) // 5)}}).encode()
        fault = self.upstream.in_fault()
        c = self.conn(timeout=60)
        try:
            c.request("POST", f"{FOOS}?dryRun=All", body=body, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            data = r.read()
            if r.status == 201 and CLUSTER_GROUP.encode() not in data and name.encode() in data:
                self.stats.add("pressure", "ok")
            elif r.status == 429 and b'"code":429' in data and r.getheader("Retry-After") == "1":
                self.stats.add("pressure", "refused")
            elif r.status in UPSTREAM_DOWN and (fault or self.upstream.in_fault()):
                self.stats.add("pressure", "faulted")
            else:
                self.stats.add("pressure", "error", f"status {r.status}: {data[:200]!r}")
        except (OSError, http.client.HTTPException) as e:
            if fault or self.upstream.in_fault():
                self.stats.add("pressure", "faulted")
            else:
                self.stats.add("pressure", "error", f"{type(e).__name__}: {e}")
        finally:
            c.close()

    def hostile_phase(self, seconds):
        """Oversized uploads, gzip bombs, and one burst of budget pressure,
        for `seconds` alongside the normal load."""
        end = min(time.monotonic() + seconds, self.deadline)
        self.pressure.begin()
        burst = [threading.Thread(target=self.big_create, args=(n,), daemon=True) for n in range(24)]
        for t in burst:
            t.start()
        while time.monotonic() < end:
            self.oversized()
            self.gzip_bomb()
            time.sleep(0.2)
        for t in burst:
            t.join(60)
        self.pressure.end()

    def slow_headers(self):
        """Headers a byte at a time: regroup may cut it (header read timeout);
        what counts is that everyone else is still served."""
        req = f"GET {FOOS} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nAccept: application/json\r\n\r\n".encode()
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=30) as s:
                for b in req:
                    if time.monotonic() > self.deadline:
                        return
                    s.sendall(bytes([b]))
                    time.sleep(0.1)
                s.recv(65536)
        except OSError:
            pass
        self.stats.add("slow-headers", "ok")

    def slow_reader(self):
        """A LIST read 256 bytes every 50 ms (a client on a slow link)."""
        fault = self.upstream.in_fault()
        c = self.conn()
        try:
            c.request("GET", FOOS, headers={"Accept": "application/json"})
            r = c.getresponse()
            data = b""
            while chunk := r.read(256):
                data += chunk
                time.sleep(0.05)
            self.judge("slow-reader", fault, r.status, data)
        except (OSError, http.client.HTTPException) as e:
            if fault or self.upstream.in_fault():
                self.stats.add("slow-reader", "faulted")
            else:
                self.stats.add("slow-reader", "error", f"{type(e).__name__}: {e}")
        finally:
            c.close()


def worker(load, ops, rate, stop):
    """Calls weighted ops at `rate` per second (this thread's share)."""
    names, weights = zip(*ops)
    period = 1.0 / rate
    nxt = time.monotonic()
    while not stop.is_set() and time.monotonic() < load.deadline:
        random.choices(names, weights)[0]()
        nxt += period
        pause = nxt - time.monotonic()
        if pause > 0:
            stop.wait(pause)
        else:
            nxt = time.monotonic()  # fell behind (a slow op): no burst to catch up


def looping(fn, deadline, stop):
    while not stop.is_set() and time.monotonic() < deadline:
        fn()
        stop.wait(0.2)  # a refused slow client would otherwise spin


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=60, help="seconds of load (default 60: CI's short mode)")
    ap.add_argument("--rate", type=float, default=20, help="requests per second over all load threads")
    ap.add_argument("--threads", type=int, default=4, help="load threads (the rate is shared)")
    ap.add_argument("--interval", type=float, default=60, help="seconds between report lines")
    ap.add_argument("--fault-every", type=float, default=None,
                    help="kill and restart the upstream every N seconds (default: duration/4, at most 300)")
    ap.add_argument("--fault-pause", type=float, default=2, help="seconds the upstream stays down")
    ap.add_argument("--budget-mib", type=int, default=16, help="regroup's limits.memoryBudgetBytes, in MiB")
    ap.add_argument("--hostile-for", type=float, default=5,
                    help="seconds of each hostile phase (oversized bodies, gzip bombs, budget pressure); 0: none")
    ap.add_argument("--binary", default=os.environ.get("REGROUP_BIN") or str(REPO / "target" / "release" / "regroup"))
    ap.add_argument("--json", help="also write each report line as JSON to this file")
    ap.add_argument("--workdir", help="where logs and kubeconfigs go (default: a temp dir)")
    args = ap.parse_args()
    fault_every = args.fault_every or min(max(args.duration / 4, 10), 300)

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="regroup-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    up_port, port = free_port(), free_port()
    # A small memory budget, so the hostile phase's burst spends it.
    (workdir / "regroup.yaml").write_text(
        CONFIG_YAML + f"limits:\n  memoryBudgetBytes: {args.budget_mib << 20}\n  memoryBudgetWait: 500ms\n")
    kc = {"apiVersion": "v1", "kind": "Config", "current-context": "soak",
          "clusters": [{"name": "soak", "cluster": {"server": f"http://127.0.0.1:{up_port}"}}],
          "users": [{"name": "soak", "user": {}}],
          "contexts": [{"name": "soak", "context": {"cluster": "soak", "user": "soak", "namespace": NS}}]}
    (workdir / "upstream.kubeconfig").write_text(json.dumps(kc))
    upstream = Upstream(workdir, up_port)
    upstream.start()
    proxy_log = open(workdir / "regroup.log", "w")
    proxy = subprocess.Popen([args.binary, "serve", "-c", str(workdir / "regroup.yaml"), "--kubeconfig",
                              str(workdir / "upstream.kubeconfig"), "--listen", f"127.0.0.1:{port}"],
                             stdout=proxy_log, stderr=subprocess.STDOUT, env=dict(os.environ, RUST_LOG="warn"))
    if not wait_port(port, proxy, 20):
        upstream.stop()
        raise SystemExit(f"regroup did not listen; see {workdir / 'regroup.log'}")

    stats = Stats()
    start = time.monotonic()
    deadline = start + args.duration
    load = Load(port, upstream, stats, deadline)
    hostile = None
    ops = [(load.get, 30), (load.list, 25), (load.patch, 10), (load.get_protobuf, 15), (load.watch_json, 10),
           (load.watch_protobuf, 10)]
    stop = threading.Event()
    threads = [threading.Thread(target=worker, args=(load, ops, args.rate / args.threads, stop), daemon=True)
               for _ in range(args.threads)]
    threads += [threading.Thread(target=looping, args=(fn, deadline, stop), daemon=True)
                for fn in (load.slow_headers, load.slow_reader)]
    for t in threads:
        t.start()

    out = open(args.json, "w") if args.json else None
    print(f"soak: regroup pid {proxy.pid} on 127.0.0.1:{port}, upstream on {up_port}, {args.duration:.0f}s, "
          f"{args.rate}/s, upstream killed every {fault_every:.0f}s; logs in {workdir}", flush=True)
    print(f"{'min':>6} {'ok':>8} {'faulted':>8} {'refused':>8} {'errors':>7} {'rss_mib':>8} {'fds':>5} "
          f"{'restarts':>8} {'hostile':>7}", flush=True)
    first_rss = None
    next_fault = start + fault_every
    next_hostile = start + fault_every / 2
    next_report = start + args.interval
    died = False
    rows = []
    while True:
        now = time.monotonic()
        if proxy.poll() is not None:
            died = True
            break
        if now >= next_report or now >= deadline:
            rss, fds = proc_stats(proxy.pid)
            first_rss = first_rss or rss
            with stats.lock:
                row = {"minute": round((now - start) / 60, 2), "ok": stats.ok, "faulted": stats.faulted,
                       "refused": stats.refused, "errors": len(stats.errors), "rss_mib": round(rss, 1),
                       "open_fds": fds, "upstream_restarts": upstream.restarts,
                       "hostile_phases": load.pressure.bursts}
            rows.append(row)
            print(f"{row['minute']:>6} {row['ok']:>8} {row['faulted']:>8} {row['refused']:>8} {row['errors']:>7} "
                  f"{row['rss_mib']:>8} {row['open_fds']:>5} {row['upstream_restarts']:>8} "
                  f"{row['hostile_phases']:>7}", flush=True)
            if out:
                out.write(json.dumps(row) + "\n")
                out.flush()
            next_report += args.interval
            if now >= deadline:
                break
        if (args.hostile_for > 0 and now >= next_hostile and now + args.hostile_for < deadline
                and (hostile is None or not hostile.is_alive())):
            hostile = threading.Thread(target=load.hostile_phase, args=(args.hostile_for,), daemon=True)
            hostile.start()
            next_hostile = now + fault_every
        if now >= next_fault and now + args.fault_pause + FAULT_GRACE < deadline:
            upstream.kill_and_restart(args.fault_pause)
            next_fault = time.monotonic() + fault_every
        time.sleep(min(1.0, max(0.0, min(next_report, next_fault, next_hostile, deadline) - time.monotonic())))

    stop.set()
    for t in threads + ([hostile] if hostile else []):
        t.join(30)
    status = 0
    if died:
        print(f"FAIL: regroup exited with status {proxy.returncode}; see {workdir / 'regroup.log'}")
        status = 1
    else:
        proxy.terminate()
        try:
            proxy.wait(30)
        except subprocess.TimeoutExpired:
            proxy.kill()
    upstream.stop()
    print("by op:", json.dumps(stats.by_op, sort_keys=True))
    if stats.errors:
        status = 1
        print(f"FAIL: {len(stats.errors)} errors outside fault windows; first ones:")
        for t, op, what in stats.errors[:10]:
            print(f"  {time.strftime('%H:%M:%S', time.localtime(t))} {op}: {what}")
    if stats.ok == 0:
        status = 1
        print("FAIL: no request succeeded")
    if rows and first_rss:
        print(f"rss {first_rss:.1f} -> {rows[-1]['rss_mib']} MiB, fds {rows[0]['open_fds']} -> {rows[-1]['open_fds']}")
    print("PASS" if status == 0 else "FAILED")
    return status


if __name__ == "__main__":
    sys.exit(main())
