#!/usr/bin/env python3
"""Many concurrent watches through one regroup: added event delay and RSS, one run.

One command (loopback only; every process it starts is stopped on exit):

    bench/watch_fanout.py                          # run `cargo build --release -p regroup` first
    bench/watch_fanout.py --watches 1000 --rate 100 --seconds 30 --also before=/tmp/regroup-old
    bench/watch_fanout.py --tls                    # the stand-in serves TLS, HTTP/1.1 only

In one Python process (one clock for sending and receiving): a stand-in
apiserver holding every watch open (chunked JSON lines) and sending
`--rate` events per second in total, round robin over the open watches,
each event stamped with its send time; and `--watches` clients, first
straight to it, then through each regroup binary (renaming
samplecontroller.team1.example.com to samplecontroller.k8s.io, so every
event is renamed). An event's delay is its arrival minus its stamp; the
added delay is the proxied percentile minus the direct one of the same
run. RSS: regroup idle (started, no request yet), with every watch open,
and its peak (VmHWM). Every event is checked renamed. Nothing is
asserted about the numbers: they are printed.
"""

import argparse
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

CLUSTER = "samplecontroller.team1.example.com"
APP = "samplecontroller.k8s.io"
WATCH = "/apis/{g}/v1alpha1/namespaces/ns/foos?watch=1"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


class Upstream:
    """Holds every watch open; sends events round robin at a total rate."""

    def __init__(self):
        self.watches = []
        self.sent = 0

    async def handle(self, reader, writer):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        if b"watch=1" not in head.split(b"\r\n", 1)[0]:
            writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            writer.close()
            return
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        await writer.drain()
        self.watches.append(writer)
        try:
            await reader.read()  # until the watch is closed
        except ConnectionError:
            pass
        if writer in self.watches:
            self.watches.remove(writer)

    async def send(self, rate, seconds):
        interval, i = 1.0 / rate, 0
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            if self.watches:
                w = self.watches[i % len(self.watches)]
                i += 1
                line = ('{"type":"MODIFIED","object":{"apiVersion":"%s/v1alpha1","kind":"Foo",'
                        '"metadata":{"name":"a","namespace":"ns","resourceVersion":"%d",'
                        '"annotations":{"sent":"%d"}}}}\n'
                        % (CLUSTER, i, time.monotonic_ns())).encode()
                w.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.sent += 1
            next_at = start + i * interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    def close(self):
        for w in self.watches:
            w.close()
        self.watches.clear()


async def watch(port, group, delays, bad, ready, ssl_ctx=None):
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ssl_ctx)
    writer.write(f"GET {WATCH.format(g=group)} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(head.split(b"\r\n", 1)[0].decode())
    ready()
    buf = b""
    try:
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip(), 16)
            if size == 0:
                return
            buf += await reader.readexactly(size)
            await reader.readexactly(2)
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                now = time.monotonic_ns()
                sent = int(line.split(b'"sent":"', 1)[1].split(b'"', 1)[0])
                delays.append((now - sent) / 1e3)
                want, other = (APP, CLUSTER) if group == APP else (CLUSTER, APP)
                if want.encode() + b"/" not in line or other.encode() in line:
                    bad.append(line)
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


def pct(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * p / 100))]


async def run_case(up, port, group, args, pid=None, ssl_ctx=None):
    delays, bad, opened = [], [], [0]

    def ready():
        opened[0] += 1

    tasks = []
    for _ in range(args.watches):
        tasks.append(asyncio.create_task(watch(port, group, delays, bad, ready, ssl_ctx)))
        if len(tasks) % 100 == 0:
            await asyncio.sleep(0.05)
    deadline = time.monotonic() + 60
    while (opened[0] < args.watches or len(up.watches) < args.watches) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    if opened[0] < args.watches:
        sys.exit(f"only {opened[0]} of {args.watches} watches opened")
    open_rss = status_kb(pid, "VmRSS") / 1024 if pid else None
    sent0 = up.sent
    await up.send(args.rate, args.seconds)
    await asyncio.sleep(1)
    sent = up.sent - sent0
    up.close()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    if bad:
        sys.exit(f"{len(bad)} events not in {group}'s names, e.g. {bad[0][:200]!r}")
    peak = status_kb(pid, "VmHWM") / 1024 if pid else None
    return {"sent": sent, "got": len(delays), "p50": pct(delays, 50), "p99": pct(delays, 99),
            "max": max(delays) if delays else float("nan"), "open_rss": open_rss, "peak": peak}


def make_tls(tmp):
    """A CA and a certificate for 127.0.0.1 signed by it (openssl), for --tls:
    the server's and the direct clients' ssl contexts, and the CA file."""
    import ssl
    ext = os.path.join(tmp, "ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    j = lambda n: os.path.join(tmp, n)  # noqa: E731
    for cmd in [
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", j("ca.key"),
         "-out", j("ca.pem"), "-days", "1", "-subj", "/CN=bench-ca"],
        ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", j("key.pem"),
         "-out", j("cert.csr"), "-subj", "/CN=127.0.0.1"],
        ["openssl", "x509", "-req", "-in", j("cert.csr"), "-CA", j("ca.pem"), "-CAkey", j("ca.key"),
         "-CAcreateserial", "-out", j("cert.pem"), "-days", "1", "-extfile", ext],
    ]:
        subprocess.run(cmd, check=True, capture_output=True)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(j("cert.pem"), j("key.pem"))
    # This stand-in speaks HTTP/1.1 only: regroup takes one TLS connection
    # per watch, as with `upstream.http2: never`.
    server.set_alpn_protocols(["http/1.1"])
    client = ssl.create_default_context(cafile=j("ca.pem"))
    return server, client, j("ca.pem")


async def main_async(args, binaries, tmp):
    up = Upstream()
    up_port = free_port()
    server_ssl, client_ssl, ca = make_tls(tmp) if args.tls else (None, None, None)
    server = await asyncio.start_server(up.handle, "127.0.0.1", up_port, backlog=4096,
                                        ssl=server_ssl)
    kc = os.path.join(tmp, "kubeconfig")
    with open(kc, "w") as f:
        f.write(f"""apiVersion: v1
kind: Config
current-context: c
clusters: [{{name: c, cluster: {{server: '{"https" if ca else "http"}://127.0.0.1:{up_port}'{f", certificate-authority: '{ca}'" if ca else ""}}}}}]
contexts: [{{name: c, context: {{cluster: c, user: u}}}}]
users: [{{name: u, user: {{token: bench}}}}]
""")
    cfg = os.path.join(tmp, "regroup.yaml")
    with open(cfg, "w") as f:
        f.write(f"rules:\n- from: {APP}\n  to: {CLUSTER}\n")
    rows = [("direct", None, None, await run_case(up, up_port, CLUSTER, args, None, client_ssl))]
    print(f"  direct: {rows[0][3]['got']} events", file=sys.stderr)
    for label, binary in binaries:
        port = free_port()
        log = open(os.path.join(tmp, f"regroup{label.strip(' []')}.log"), "wb")
        p = subprocess.Popen([binary, "serve", "-c", cfg, "--kubeconfig", kc,
                              "--listen", f"127.0.0.1:{port}"],
                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    r, w = await asyncio.open_connection("127.0.0.1", port)
                    w.close()
                    break
                except OSError:
                    if p.poll() is not None or time.monotonic() > deadline:
                        sys.exit("regroup did not start")
                    await asyncio.sleep(0.1)
            idle = status_kb(p.pid, "VmRSS") / 1024
            r = await run_case(up, port, APP, args, p.pid)
            r["idle"] = idle
            rows.append(("regroup" + label, binary, p, r))
            print(f"  regroup{label}: {r['got']} events", file=sys.stderr)
        finally:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait()
    server.close()
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--watches", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=100, help="events per second, in total")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--tls", action="store_true",
                    help="the stand-in apiserver serves TLS (HTTP/1.1 only by ALPN): one TLS "
                    "connection from regroup per watch")
    ap.add_argument("--regroup", default=os.path.join(ROOT, "target/release/regroup"))
    ap.add_argument("--also", action="append", default=[], metavar="LABEL=PATH",
                    help="another regroup binary measured in the same run")
    args = ap.parse_args()
    binaries = [("", args.regroup)] + [
        (" [" + a.split("=", 1)[0] + "]", a.split("=", 1)[1]) for a in args.also
    ]
    for _, b in binaries:
        if not os.access(b, os.X_OK):
            sys.exit(f"regroup not found ({b}): cargo build --release -p regroup")
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 3 * args.watches + 100
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    tmp = tempfile.mkdtemp(prefix="regroup-watch-fanout-")
    try:
        rows = asyncio.run(main_async(args, binaries, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    direct = rows[0][3]
    print(f"{args.watches} watches, {args.rate:g} events/s in total, {args.seconds:g} s; "
          f"{os.cpu_count()} CPUs")
    print("| path | events sent / received | delay p50 / p99 / max | added p50 / p99 "
          "| RSS idle | RSS, watches open | peak RSS |")
    print("|---|---|---|---|---|---|---|")
    for name, _, _, r in rows:
        proxied = r is not direct
        added = (f"{r['p50'] - direct['p50']:.0f} / {r['p99'] - direct['p99']:.0f} us"
                 if proxied else "-")
        mb = lambda v: "-" if v is None else f"{v:.1f} MB"  # noqa: E731
        print(f"| {name} | {r['sent']} / {r['got']} | {r['p50']:.0f} / {r['p99']:.0f} / "
              f"{r['max']:.0f} us | {added} | {mb(r.get('idle'))} | {mb(r['open_rss'])} "
              f"| {mb(r['peak'])} |")


if __name__ == "__main__":
    main()
