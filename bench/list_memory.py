#!/usr/bin/env python3
"""Peak memory of regroup renaming one large list, JSON against protobuf, in one run.

One command (loopback only; every process it starts is stopped on exit):

    bench/list_memory.py                       # run `cargo build --release -p regroup` first
    bench/list_memory.py --size-mb 200 --also before=/tmp/regroup-old

Two lists of about --size-mb each are synthesized from the real
CustomResourceDefinition list captured from a kube-apiserver
(testdata/kube-1.24/renamed/116-list-crd-json and 117-list-crd-protobuf):
the list's one item repeated, the list's own head and tail kept. nginx
serves them as the answer to GET /apis/apiextensions.k8s.io/v1/
customresourcedefinitions, by the request's Accept. For each regroup
binary and each encoding, a fresh regroup (renaming
samplecontroller.team1.example.com to samplecontroller.k8s.io, so every
item is renamed) answers one GET; the client reads the answer as it comes.
Reported: RSS idle (after start-up), peak RSS (VmHWM, the process's
high-water mark), the answer's size, wall time, and peak RSS against the
JSON list's through the same binary and against the first binary's for the
same list. Every answer is checked (the item
count, no unrenamed name left) and the binaries' answers must be
byte-identical. Nothing is asserted about the numbers: they are printed.

The baseline, in the same run: a second nginx as a plain reverse proxy
(`proxy_pass`, buffering off: it streams as regroup does) passing the same
bytes to the same client; each row's time is also given against it.
Then a watch stream: the captured Foo watch event (243-watch-foo-json)
repeated --watch-events times as one JSON-lines answer to a `?watch=1`
GET, renamed event by event; events a second through regroup and through
the nginx proxy, and their ratio (regroup's CPU time for it too: one CPU).
"""

import argparse
import hashlib
import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = os.path.join(ROOT, "testdata/kube-1.24/renamed")
PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CLUSTER = b"samplecontroller.team1.example.com"
APP = b"samplecontroller.k8s.io"
PROTOBUF = "application/vnd.kubernetes.protobuf"
WATCH_PATH = "/apis/samplecontroller.team1.example.com/v1alpha1/namespaces/renamed/foos"
WATCH_APP_PATH = "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/renamed/foos"

children = []


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(name, argv, log_dir):
    log = open(os.path.join(log_dir, name + ".log"), "wb")
    p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    children.append(p)
    return p


def stop(p):
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def status_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def read_varint(b, at):
    v, shift = 0, 0
    while True:
        byte = b[at]
        at += 1
        v |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return v, at


def fields(b):
    """(number, start, end) of each top-level field of a message."""
    at, out = 0, []
    while at < len(b):
        start = at
        key, at = read_varint(b, at)
        wire = key & 7
        if wire == 2:
            n, at = read_varint(b, at)
            at += n
        elif wire == 0:
            _, at = read_varint(b, at)
        else:
            at += 8 if wire == 1 else 4
        out.append((key >> 3, start, at))
    return out


def protobuf_list(size):
    """The captured protobuf CRD list with its item repeated to ~size bytes."""
    with open(os.path.join(CASES, "117-list-crd-protobuf/response.body"), "rb") as f:
        body = f.read()
    assert body[:4] == b"k8s\0" and body[4] == 0x0A
    n, at = read_varint(body, 5)
    head_end = at + n
    assert body[head_end] == 0x12
    n, at = read_varint(body, head_end + 1)
    raw, tail = body[at : at + n], body[at + n :]
    parts = fields(raw)
    items = [raw[s:e] for num, s, e in parts if num == 2]
    others = b"".join(raw[s:e] for num, s, e in parts if num != 2)
    assert len(items) == 1
    count = max(1, size // len(items[0]))
    raw = others + items[0] * count
    return body[:head_end] + b"\x12" + varint(len(raw)) + raw + tail, count


def json_list(size):
    """The captured JSON CRD list with its item repeated to ~size bytes."""
    with open(os.path.join(CASES, "116-list-crd-json/response.body"), "rb") as f:
        body = f.read().rstrip(b"\n")
    start = body.index(b'"items":[') + len(b'"items":[')
    end = body.rindex(b"]}")
    item = body[start:end]
    count = max(1, size // (len(item) + 1))
    return body[:start] + b",".join([item] * count) + body[end:], count


def nginx_conf(tmp, port, files):
    user = "user root;\n" if os.geteuid() == 0 else ""
    conf = os.path.join(tmp, "upstream.conf")
    with open(conf, "w") as f:
        f.write(
            f"""{user}daemon off;
worker_processes 1;
pid {tmp}/upstream.pid;
error_log {tmp}/upstream.error.log warn;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {tmp}/b; proxy_temp_path {tmp}/p; fastcgi_temp_path {tmp}/f;
  uwsgi_temp_path {tmp}/u; scgi_temp_path {tmp}/s;
  server {{
    listen 127.0.0.1:{port};
    etag off;
    location = {PATH} {{
      if ($http_accept ~ "protobuf") {{ rewrite ^ /_protobuf last; }}
      rewrite ^ /_json last;
    }}
    location = /_protobuf {{ internal; default_type {PROTOBUF}; alias {files['protobuf']}; }}
    location = /_json {{ internal; default_type application/json; alias {files['json']}; }}
    location = {WATCH_PATH} {{ default_type application/json; alias {files['watch']}; }}
  }}
}}
"""
        )
    return conf


def nginx_proxy_conf(tmp, port, upstream_port):
    """nginx as a plain reverse proxy in front of the upstream: the floor."""
    user = "user root;\n" if os.geteuid() == 0 else ""
    conf = os.path.join(tmp, "proxy.conf")
    with open(conf, "w") as f:
        f.write(
            f"""{user}daemon off;
master_process off;
worker_processes 1;
pid {tmp}/proxy.pid;
error_log {tmp}/proxy.error.log warn;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {tmp}/pb; proxy_temp_path {tmp}/pp; fastcgi_temp_path {tmp}/pf;
  uwsgi_temp_path {tmp}/pu; scgi_temp_path {tmp}/ps;
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://127.0.0.1:{upstream_port};
      proxy_http_version 1.1;
      proxy_buffering off;
    }}
  }}
}}
"""
        )
    return conf


def watch_stream(count):
    """The captured Foo watch event repeated `count` times, JSON lines."""
    with open(os.path.join(CASES, "243-watch-foo-json/response.body"), "rb") as f:
        first = f.read().split(b"\n")[0]
    return (first + b"\n") * count


def cpu_seconds(pid):
    """User and system CPU time of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def kubeconfig(tmp, port):
    path = os.path.join(tmp, "kubeconfig")
    with open(path, "w") as f:
        f.write(
            f"""apiVersion: v1
kind: Config
current-context: c
clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]
contexts: [{{name: c, context: {{cluster: c, user: u}}}}]
users: [{{name: u, user: {{token: bench}}}}]
"""
        )
    return path


def get(port, accept, path=PATH):
    """GETs the list; returns (status, size, sha256, count of each name, seconds)."""
    t0 = time.time()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("GET", path, headers={"Accept": accept})
    r = c.getresponse()
    h = hashlib.sha256()
    size, app, cluster, carry = 0, 0, 0, b""
    while True:
        chunk = r.read(1 << 20)
        if not chunk:
            break
        h.update(chunk)
        size += len(chunk)
        # Names counted across chunk boundaries.
        data = carry + chunk
        app += data.count(APP) - carry.count(APP)
        cluster += data.count(CLUSTER) - carry.count(CLUSTER)
        carry = data[-(len(CLUSTER) - 1) :]
    c.close()
    return r.status, size, h.hexdigest(), app, cluster, time.time() - t0


def wait_ready(port, proc):
    deadline = time.time() + 30
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit("regroup exited early (log in the work directory)")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/version")
            c.getresponse().read()
            return
        except OSError:
            time.sleep(0.1)
    sys.exit("regroup did not start")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mb", type=int, default=200, help="size of each list")
    ap.add_argument("--regroup", default=os.path.join(ROOT, "target/release/regroup"))
    ap.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="LABEL=PATH",
        help="another regroup binary measured in the same run (e.g. before=/tmp/regroup-old)",
    )
    ap.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    ap.add_argument("--watch-events", type=int, default=200_000,
                    help="events of the watch-stream row")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--budget-bytes", type=int, default=None,
                    help="limits.memoryBudgetBytes for every binary (main f57a74f, which held a protobuf "
                         "list whole against it, answers a list larger than its 64 MiB default with a 502)")
    args = ap.parse_args()
    binaries = [("", args.regroup)] + [
        (" [" + a.split("=", 1)[0] + "]", a.split("=", 1)[1]) for a in args.also
    ]
    for name, path in [("nginx", args.nginx)] + [("regroup" + l, b) for l, b in binaries]:
        if not os.access(path, os.X_OK):
            sys.exit(f"{name} not found ({path}): apt-get install -y nginx-light; "
                     "cargo build --release -p regroup")
    tmp = tempfile.mkdtemp(prefix="regroup-list-memory-")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        size = args.size_mb << 20
        files, counts = {}, {}
        for enc, make in [("json", json_list), ("protobuf", protobuf_list)]:
            body, counts[enc] = make(size)
            files[enc] = os.path.join(tmp, "list." + enc)
            with open(files[enc], "wb") as f:
                f.write(body)
            del body
        files["watch"] = os.path.join(tmp, "watch.json")
        with open(files["watch"], "wb") as f:
            f.write(watch_stream(args.watch_events))
        up_port = free_port()
        up = start("upstream", [args.nginx, "-c", nginx_conf(tmp, up_port, files), "-p", tmp], tmp)
        px_port = free_port()
        px = start("nginx-proxy", [args.nginx, "-c", nginx_proxy_conf(tmp, px_port, up_port), "-p", tmp], tmp)
        kc = kubeconfig(tmp, up_port)
        cfg = os.path.join(tmp, "regroup.yaml")
        with open(cfg, "w") as f:
            f.write(f"rules:\n- from: {APP.decode()}\n  to: {CLUSTER.decode()}\n")
            if args.budget_bytes:
                f.write(f"limits:\n  memoryBudgetBytes: {args.budget_bytes}\n")
        time.sleep(0.5)
        if up.poll() is not None or px.poll() is not None:
            sys.exit("nginx did not start (log in the work directory)")
        # The floor: the same bytes through a plain reverse proxy, same client.
        floor, floor_cpu = {}, {}
        for enc, accept in [("json", "application/json"), ("protobuf", PROTOBUF)]:
            cpu0 = cpu_seconds(px.pid)
            status, n, _, _, cluster, secs = get(px_port, accept)
            floor_cpu[enc] = cpu_seconds(px.pid) - cpu0
            if status != 200 or cluster < counts[enc]:
                sys.exit(f"nginx proxy: HTTP {status}, {cluster} names (log in {tmp})")
            floor[enc] = secs
            print(f"  {enc} through nginx: {secs:.2f} s", file=sys.stderr)
        print(
            f"lists of {args.size_mb} MiB: JSON {counts['json']} items, "
            f"protobuf {counts['protobuf']} items; {os.cpu_count()} CPUs",
            file=sys.stderr,
        )
        rows, digests = [], {}
        for label, binary in binaries:
            for enc, accept in [("json", "application/json"), ("protobuf", PROTOBUF)]:
                port = free_port()
                tag = f"regroup-{enc}{label.strip(' []') and '-' + label.strip(' []')}"
                p = start(tag, [binary, "serve", "-c", cfg, "--kubeconfig", kc,
                                "--listen", f"127.0.0.1:{port}"], tmp)
                wait_ready(port, p)
                idle = status_kb(p.pid, "VmRSS")
                cpu0 = cpu_seconds(p.pid)
                status, n, digest, app, cluster, secs = get(port, accept)
                cpu = cpu_seconds(p.pid) - cpu0
                peak = status_kb(p.pid, "VmHWM")
                stop(p)
                if status != 200:
                    sys.exit(f"{tag}: HTTP {status} (log in {tmp}; --keep keeps it)")
                if cluster != 0 or app < counts[enc]:
                    sys.exit(f"{tag}: {cluster} unrenamed names, {app} renamed")
                if digests.setdefault(enc, digest) != digest:
                    sys.exit(f"{tag}: the answer differs from the first binary's")
                rows.append({"name": f"{enc} list{label}", "enc": enc, "label": label,
                             "idle": idle / 1024, "peak": peak / 1024, "size": n / 2**20,
                             "secs": secs, "cpu": cpu})
                print(f"  {enc}{label}: peak {peak / 1024:.1f} MB", file=sys.stderr)
        json_peak = {r["label"]: r["peak"] for r in rows if r["enc"] == "json"}
        first = {}
        for r in rows:
            first.setdefault(r["enc"], r["peak"])
        print("| list | answer | idle RSS | peak RSS | peak x JSON list (same binary) "
              "| peak x first binary (same list) | time | time x nginx proxy | CPU | CPU x nginx proxy |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['name']} | {r['size']:.0f} MiB | {r['idle']:.1f} MB | {r['peak']:.1f} MB "
                  f"| {r['peak'] / json_peak[r['label']]:.2f} "
                  f"| {r['peak'] / first[r['enc']]:.2f} | {r['secs']:.2f} s "
                  f"| {r['secs'] / floor[r['enc']]:.2f} | {r['cpu']:.2f} s "
                  f"| {r['cpu'] / max(floor_cpu[r['enc']], 0.01):.1f} |")
        for enc in ("json", "protobuf"):
            print(f"| {enc} list [nginx proxy] | | | | | | {floor[enc]:.2f} s | 1.00 "
                  f"| {floor_cpu[enc]:.2f} s | 1.0 |")
        # The watch stream: events renamed a second, one connection.
        query = "?watch=1"
        status, _, _, _, cluster, direct = get(px_port, "application/json", WATCH_PATH + query)
        if status != 200 or cluster < args.watch_events:
            sys.exit(f"nginx proxy watch: HTTP {status}")
        print()
        print("| watch stream | events | time | events/s | CPU | x nginx proxy |")
        print("|---|---|---|---|---|---|")
        for label, binary in binaries:
            port = free_port()
            p = start("regroup-watch" + label.strip(" []"), [binary, "serve", "-c", cfg, "--kubeconfig", kc,
                                                            "--listen", f"127.0.0.1:{port}"], tmp)
            wait_ready(port, p)
            cpu0 = cpu_seconds(p.pid)
            status, _, _, app, cluster, secs = get(port, "application/json", WATCH_APP_PATH + query)
            cpu = cpu_seconds(p.pid) - cpu0
            stop(p)
            if status != 200 or cluster != 0 or app < args.watch_events:
                sys.exit(f"watch{label}: HTTP {status}, {cluster} unrenamed, {app} renamed")
            print(f"| regroup{label} | {args.watch_events} | {secs:.2f} s "
                  f"| {args.watch_events / secs:,.0f} | {cpu:.2f} s | {secs / direct:.2f} |")
        print(f"| nginx proxy | {args.watch_events} | {direct:.2f} s "
              f"| {args.watch_events / direct:,.0f} | | 1.00 |")
    finally:
        for p in children:
            stop(p)
        if args.keep:
            print(f"work directory: {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
