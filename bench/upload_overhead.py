#!/usr/bin/env python3
"""What regroup holds beyond its memory budget under concurrent renamed uploads.

One command (loopback only; every process it starts is stopped on exit):

    bench/upload_overhead.py --binary target/release/regroup

A stub upstream (threads, stdlib) answers every write with its own body.
For each variant, a fresh regroup with `memoryBudgetBytes` 16 MiB takes
--clients concurrent 2.5 MiB PUTs of a Foo that needs renaming there and
back (the `proxy/tests/memory.rs` case), --rounds times. Reported per
variant: peak RSS growth (VmHWM after against VmRSS before), the growth
beyond the budget, and how many uploads were answered 200 / 429. The
variants separate what the budget does not count: glibc's per-thread
arenas (MALLOC_ARENA_MAX=1) and hyper's read buffer per connection (sized
up to `maxHeaderBytes`, 1 MiB by default). Nothing is asserted: the
numbers are printed.
"""

import argparse
import http.client
import http.server
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

APP = "samplecontroller.k8s.io"
CLUSTER = "samplecontroller.team1.example.com"
FOOS = f"/apis/{APP}/v1alpha1/namespaces/ns/foos"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Echo(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_PUT(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        body = b'{"kind":"Status","apiVersion":"v1","status":"Success"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def big_foo(n):
    data = f"{n:04}-" * ((5 << 19) // 5)
    return (f'{{"apiVersion":"{APP}/v1alpha1","kind":"Foo","metadata":{{"name":"foo-{n}"}},'
            f'"spec":{{"data":"{data}"}}}}').encode()


def upload(port, n, out):
    body = big_foo(n)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("PUT", f"{FOOS}/foo-{n}", body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    got = r.read()
    c.close()
    out.append((r.status, r.status != 200 or got == body))


def run(binary, up_port, tmp, name, limits, env, clients, rounds):
    port = free_port()
    cfg = os.path.join(tmp, name + ".yaml")
    with open(cfg, "w") as f:
        f.write(f"rules:\n- from: {APP}\n  to: {CLUSTER}\nlimits:\n  memoryBudgetBytes: {16 << 20}\n"
                f"  memoryBudgetWait: 2s\n{limits}")
    kc = os.path.join(tmp, "kubeconfig")
    log = open(os.path.join(tmp, name + ".log"), "wb")
    p = subprocess.Popen([binary, "serve", "-c", cfg, "--kubeconfig", kc, "--listen", f"127.0.0.1:{port}"],
                         stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, **env),
                         start_new_session=True)
    try:
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline or p.poll() is not None:
                    sys.exit(f"{name}: regroup did not start")
                time.sleep(0.1)
        before = kb(p.pid, "VmRSS")
        results = []
        for r in range(rounds):
            ts = [threading.Thread(target=upload, args=(port, r * clients + i, results)) for i in range(clients)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
        hwm = kb(p.pid, "VmHWM")
        if not all(same for _, same in results):
            sys.exit(f"{name}: an answer differs from what was sent")
        ok = sum(1 for s, _ in results if s == 200)
        busy = sum(1 for s, _ in results if s == 429)
        growth = (hwm - before) / 1024
        print(f"| {name} | {before / 1024:.1f} MB | {hwm / 1024:.1f} MB | +{growth:.1f} MiB "
              f"| {growth - 16:+.1f} MiB | {ok} / {busy} |", flush=True)
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default="target/release/regroup")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    up_port = free_port()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", up_port), Echo)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    tmp = tempfile.mkdtemp(prefix="regroup-upload-overhead-")
    try:
        with open(os.path.join(tmp, "kubeconfig"), "w") as f:
            f.write(f"apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                    f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{up_port}'}}}}]\n"
                    f"contexts: [{{name: c, context: {{cluster: c, user: u}}}}]\n"
                    f"users: [{{name: u, user: {{token: t}}}}]\n")
        print(f"{args.clients} concurrent 2.5 MiB renamed uploads x {args.rounds}, 16 MiB budget; "
              f"{os.cpu_count()} CPUs")
        print("| variant | RSS before | peak RSS | peak growth | beyond the budget | 200 / 429 |")
        print("|---|---|---|---|---|---|")
        variants = [
            ("default", "", {}),
            ("MALLOC_ARENA_MAX=1", "", {"MALLOC_ARENA_MAX": "1"}),
            ("maxHeaderBytes 64 KiB", "  maxHeaderBytes: 65536\n", {}),
            ("both", "  maxHeaderBytes: 65536\n", {"MALLOC_ARENA_MAX": "1"}),
        ]
        for name, limits, env in variants:
            run(args.binary, up_port, tmp, name, limits, env, args.clients, args.rounds)
    finally:
        srv.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
