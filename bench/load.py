#!/usr/bin/env python3
"""regroup against nginx and `kubectl proxy`, side by side, in one run.

One command (loopback only; every process it starts is stopped on exit):

    bench/load.py                      # builds nothing: run `cargo build --release -p regroup --bins --example hyper_floor` first
    bench/load.py --duration 8 --latency-duration 5 --json out.json

The upstream is nginx serving the real 921-byte Foo GET captured from a
kube-apiserver (testdata/kube-1.24/renamed/027-get-foo-json, with its
Content-Type and Cache-Control). In front of it, each in turn:

  nginx            nginx as a pass-through reverse proxy (keep-alive upstream pool)
  hyper floor      proxy/examples/hyper_floor.rs: a pass-through on hyper's connection-level
                   API (one current-thread runtime per core) and nothing else: what regroup
                   can't be cheaper than;
                   `cargo build --release -p regroup --example hyper_floor`, else skipped
  hyper floor multi-thread   the same on one tokio multi-thread runtime, regroup's layout
  kubectl proxy    `kubectl proxy` pass-through (e2e/.bin/kubectl, e2e/install.sh)
  regroup rename   regroup renaming samplecontroller.k8s.io <-> samplecontroller.team1.example.com
  regroup no-name  regroup with a rule for another group only: the same body, nothing to rename

With --tls the upstream serves TLS and h2 (by ALPN) as a kube-apiserver does,
and every proxy verifies it with a CA made for the run.

Each is driven by wrk with 8 connections (throughput, CPU per request) and
with 1 connection (latency). CPU per request is the proxy's own
utime+stime (its whole process tree, from /proc/<pid>/stat) over the
requests served; RSS is the tree's VmRSS after the 8-connection run, with
its anonymous part (RssAnon: the heap and stacks, without the binary's own
pages, whose residency depends on the page cache) in brackets. Ratios
are against nginx and `kubectl proxy` measured in the same run, so a busy
machine shifts all rows alike. Nothing here is asserted: it prints numbers.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOO = os.path.join(ROOT, "testdata/kube-1.24/renamed/027-get-foo-json/response.body")
CLUSTER = "samplecontroller.team1.example.com"
APP = "samplecontroller.k8s.io"
FOO_PATH = "/apis/{g}/v1alpha1/namespaces/renamed/foos/alpha"
TICK = os.sysconf("SC_CLK_TCK")

children = []


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(name, argv, log_dir, env=None):
    log = open(os.path.join(log_dir, name + ".log"), "wb")
    p = subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    children.append(p)
    return p


def stop_all():
    for p in children:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.time() + 5
    for p in children:
        try:
            p.wait(max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def tree(pid):
    """pid and all its descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out


def cpu_seconds(pid):
    """(user, system) CPU seconds of pid's process tree."""
    user = system = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            user += int(fields[11])  # utime
            system += int(fields[12])  # stime
        except OSError:
            pass
    return user / TICK, system / TICK


def rss_mb(pid, field="VmRSS:"):
    """The tree's resident memory, or with field="RssAnon:" its anonymous
    part: VmRSS also counts the binary's own pages mapped from the page
    cache, which vary with how the file sits there (a freshly copied
    binary showed ~2 MB more than the same bytes copied hours before)."""
    kb = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith(field):
                        kb += int(line.split()[1])
        except OSError:
            pass
    return kb / 1024


TLS = {}  # --tls: the CA, certificate and key files, and an ssl context trusting the CA


def make_tls(tmp):
    """A CA and a certificate for 127.0.0.1 signed by it (openssl), for --tls."""
    import ssl

    ca, ca_key = os.path.join(tmp, "ca.pem"), os.path.join(tmp, "ca.key")
    cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
    csr, ext = os.path.join(tmp, "cert.csr"), os.path.join(tmp, "cert.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    quiet = {"check": True, "capture_output": True}
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key,
                    "-out", ca, "-days", "1", "-subj", "/CN=load-ca"], **quiet)
    subprocess.run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
                    "-subj", "/CN=127.0.0.1"], **quiet)
    subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key,
                    "-CAcreateserial", "-out", cert, "-days", "1", "-extfile", ext], **quiet)
    TLS.update(ca=ca, cert=cert, key=key, context=ssl.create_default_context(cafile=ca))


def fetch(url):
    with urllib.request.urlopen(url, timeout=2, context=TLS.get("context")) as r:
        return r.status, r.read()


def wait_ready(url, proc, name):
    deadline = time.time() + 30
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{name} exited early (log in the work directory)")
        try:
            status, body = fetch(url)
            if status == 200:
                return body
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit(f"{name} did not answer {url}")


def nginx_conf(tmp, name, server):
    user = "user root;\n" if os.geteuid() == 0 else ""
    conf = os.path.join(tmp, name + ".conf")
    with open(conf, "w") as f:
        f.write(
            f"""{user}daemon off;
worker_processes {server['workers']};
pid {tmp}/{name}.pid;
error_log {tmp}/{name}.error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log {tmp}/{name}.access.log;
  client_body_temp_path {tmp}/{name}.body;
  proxy_temp_path {tmp}/{name}.proxy;
  fastcgi_temp_path {tmp}/{name}.fcgi;
  uwsgi_temp_path {tmp}/{name}.uwsgi;
  scgi_temp_path {tmp}/{name}.scgi;
  keepalive_requests 10000000;
  keepalive_timeout 120s;
{server['body']}
}}
"""
        )
    return conf


def upstream_conf(tmp, port, foo):
    listen = f"127.0.0.1:{port}"
    if TLS:
        # h2 by ALPN, as a kube-apiserver serves.
        listen += (
            f" ssl http2;\n    ssl_certificate {TLS['cert']};\n    ssl_certificate_key {TLS['key']}"
        )
    return nginx_conf(
        tmp,
        "upstream",
        {
            # One worker: the upstream is the same for every row.
            "workers": 1,
            "body": f"""  server {{
    listen {listen};
    etag off;
    location = {FOO_PATH.format(g=CLUSTER)} {{
      default_type application/json;
      add_header Cache-Control "no-cache, private";
      alias {foo};
    }}
  }}""",
        },
    )


def scheme():
    return "https" if TLS else "http"


def proxy_conf(tmp, port, upstream_port):
    # nginx proxies over HTTP/1.1 only (TLS sessions reused on its pool).
    tls = (
        f"""
      proxy_ssl_trusted_certificate {TLS['ca']};
      proxy_ssl_name localhost;
      proxy_ssl_verify on;
      proxy_ssl_session_reuse on;"""
        if TLS
        else ""
    )
    return nginx_conf(
        tmp,
        "proxy",
        {
            "workers": "auto",
            "body": f"""  upstream apiserver {{
    server 127.0.0.1:{upstream_port};
    keepalive 64;
  }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass {scheme()}://apiserver;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;{tls}
    }}
  }}""",
        },
    )


def kubeconfig(tmp, upstream_port):
    path = os.path.join(tmp, "kubeconfig")
    ca = f", certificate-authority: '{TLS['ca']}'" if TLS else ""
    with open(path, "w") as f:
        f.write(
            f"""apiVersion: v1
kind: Config
current-context: c
clusters:
- name: c
  cluster: {{server: '{scheme()}://127.0.0.1:{upstream_port}'{ca}}}
contexts:
- name: c
  context: {{cluster: c, user: u}}
users:
- name: u
  user: {{token: load}}
"""
        )
    return path


def regroup_conf(tmp, name, rule, extra=""):
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        f.write(f"rules:\n- from: {rule[0]}\n  to: {rule[1]}\n{extra}")
    return path


UNITS = {"us": 1.0, "ms": 1e3, "s": 1e6, "m": 60e6}


def wrk(url, connections, seconds):
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    m = re.search(r"(\d+) requests in", out)
    requests = int(m.group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors or "Socket errors" in out:
        sys.exit(f"wrk saw errors against {url}:\n{out}")
    lat = {}
    for pct, val, unit in re.findall(r"^\s+(50|90|99)%\s+([\d.]+)(us|ms|s|m)\s*$", out, re.M):
        lat[pct] = float(val) * UNITS[unit]
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    return requests, rps, lat


def measure(name, url, pid, args):
    # Warm up: connections opened, pools filled, caches warm.
    wrk(url, args.connections, 1)
    cpu0 = cpu_seconds(pid) if pid else (0, 0)
    requests, rps, lat8 = wrk(url, args.connections, args.duration)
    cpu1 = cpu_seconds(pid) if pid else None
    rss = rss_mb(pid) if pid else None
    anon = rss_mb(pid, "RssAnon:") if pid else None
    _, _, lat1 = wrk(url, 1, args.latency_duration)
    row = {
        "name": name,
        "rps": rps,
        "p50_8": lat8.get("50"),
        "p99_8": lat8.get("99"),
        "p50_1": lat1.get("50"),
        "p99_1": lat1.get("99"),
        "cpu_us": (sum(cpu1) - sum(cpu0)) / requests * 1e6 if cpu1 else None,
        "user_us": (cpu1[0] - cpu0[0]) / requests * 1e6 if cpu1 else None,
        "sys_us": (cpu1[1] - cpu0[1]) / requests * 1e6 if cpu1 else None,
        "rss_mb": rss,
        "rss_anon_mb": anon,
    }
    print(f"  {name}: {rps:.0f} req/s", file=sys.stderr)
    return row


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def table(rows, connections=8):
    by = {r["name"]: r for r in rows}
    nginx, kubectl, direct = by.get("nginx"), by.get("kubectl proxy"), by["direct"]
    floor = by.get("hyper floor")
    lines = [
        f"| path | req/s ({connections} conn) | x nginx | x kubectl proxy | p50 / p99 ({connections} conn) "
        "| p50 / p99 (1 conn) | added p50 / p99 (1 conn) | CPU/request (user + sys) | CPU x nginx "
        "| CPU x floor | RSS (anonymous) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        proxied = r is not direct
        added = (
            f"{r['p50_1'] - direct['p50_1']:.0f} / {r['p99_1'] - direct['p99_1']:.0f} us"
            if proxied
            else "-"
        )
        lines.append(
            "| {name} | {rps:.0f} | {xn} | {xk} | {p50_8:.0f} / {p99_8:.0f} us | {p50_1:.0f} / {p99_1:.0f} us | {added} | {cpu} | {cn} | {cf} | {rss} |".format(
                name=r["name"] + ("" if proxied else " (upstream's own CPU)"),
                rps=r["rps"],
                xn=fmt(r["rps"] / nginx["rps"], ".2f") if nginx and proxied else "-",
                xk=fmt(r["rps"] / kubectl["rps"], ".2f") if kubectl and proxied else "-",
                p50_8=r["p50_8"],
                p99_8=r["p99_8"],
                p50_1=r["p50_1"],
                p99_1=r["p99_1"],
                added=added,
                cpu=fmt(r["cpu_us"], ".1f")
                + " us ("
                + fmt(r["user_us"], ".1f")
                + " + "
                + fmt(r["sys_us"], ".1f")
                + ")",
                cn=fmt(r["cpu_us"] / nginx["cpu_us"], ".2f") if nginx and proxied else "-",
                cf=fmt(r["cpu_us"] / floor["cpu_us"], ".2f") if floor and proxied else "-",
                rss=fmt(r["rss_mb"], ".1f") + " MB (" + fmt(r["rss_anon_mb"], ".1f") + ")",
            )
        )
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=int, default=8, help="seconds at 8 connections")
    ap.add_argument(
        "--connections",
        type=int,
        default=8,
        help="connections of the throughput run (CPU, RSS, the p50/p99 at 8 columns)",
    )
    ap.add_argument(
        "--http1-rows",
        action="store_true",
        help="with --tls: also the floor and each regroup row speaking HTTP/1.1 to the upstream "
        "(the floor's --upstream-http1, regroup's upstream.http2: never), and each regroup row "
        "with upstream.http2: auto (every request over h2; the default is watches, whose GETs go "
        "over HTTP/1.1)",
    )
    ap.add_argument("--latency-duration", type=int, default=5, help="seconds at 1 connection")
    ap.add_argument("--regroup", default=os.path.join(ROOT, "target/release/regroup"))
    ap.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="LABEL=PATH",
        help="another regroup binary measured in the same run (e.g. before=/tmp/regroup-old)",
    )
    ap.add_argument(
        "--floor",
        default=os.path.join(ROOT, "target/release/examples/hyper_floor"),
        help="the pass-through built from regroup's own parts (proxy/examples/hyper_floor.rs); "
        "its row is skipped when it is not built",
    )
    ap.add_argument("--kubectl", default=os.path.join(ROOT, "e2e/.bin/kubectl"))
    ap.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    ap.add_argument(
        "--only",
        help="comma-separated rows to run: nginx, hyper floor, kubectl proxy, regroup rename, "
        "regroup no-name "
        "(direct is always run)",
    )
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, configs)")
    ap.add_argument(
        "--tls",
        action="store_true",
        help="the upstream serves TLS with h2 (ALPN), as a kube-apiserver does; every proxy "
        "verifies it (openssl makes the CA)",
    )
    args = ap.parse_args()
    for tool, path in [("wrk", shutil.which("wrk")), ("nginx", args.nginx), ("regroup", args.regroup)]:
        if not path or not os.access(path, os.X_OK):
            sys.exit(
                f"{tool} not found ({path}): apt-get install -y nginx-light wrk; "
                "cargo build --release -p regroup"
            )
    kubectl = args.kubectl if os.access(args.kubectl, os.X_OK) else shutil.which("kubectl")
    only = set(args.only.split(",")) if args.only else None
    want = lambda n: only is None or n in only  # noqa: E731

    tmp = tempfile.mkdtemp(prefix="regroup-bench-")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        with open(FOO, "rb") as f:
            foo = f.read()
        if args.tls:
            make_tls(tmp)
        up_port = free_port()
        up = start("upstream", [args.nginx, "-c", upstream_conf(tmp, up_port, FOO), "-p", tmp], tmp)
        direct_url = f"{scheme()}://127.0.0.1:{up_port}{FOO_PATH.format(g=CLUSTER)}"
        if wait_ready(direct_url, up, "upstream nginx") != foo:
            sys.exit("the upstream does not serve the captured bytes")
        renamed = foo.replace(CLUSTER.encode(), APP.encode())
        kc = kubeconfig(tmp, up_port)

        targets = []  # (name, url, process, expected body)
        floor_env = dict(os.environ, FLOOR_CA_FILE=TLS["ca"]) if TLS else None
        if want("nginx"):
            port = free_port()
            p = start("proxy", [args.nginx, "-c", proxy_conf(tmp, port, up_port), "-p", tmp], tmp)
            targets.append(("nginx", f"http://127.0.0.1:{port}{FOO_PATH.format(g=CLUSTER)}", p, foo))
        if want("hyper floor"):
            if not os.access(args.floor, os.X_OK):
                print(
                    f"{args.floor} not built (cargo build --release -p regroup --example "
                    "hyper_floor): skipping hyper floor",
                    file=sys.stderr,
                )
            else:
                port = free_port()
                p = start(
                    "floor",
                    [args.floor, f"127.0.0.1:{port}", f"{scheme()}://127.0.0.1:{up_port}"],
                    tmp,
                    env=floor_env,
                )
                targets.append(
                    ("hyper floor", f"http://127.0.0.1:{port}{FOO_PATH.format(g=CLUSTER)}", p, foo)
                )
        if args.http1_rows and want("hyper floor http1") and os.access(args.floor, os.X_OK):
            port = free_port()
            p = start(
                "floor-http1",
                [
                    args.floor,
                    f"127.0.0.1:{port}",
                    f"{scheme()}://127.0.0.1:{up_port}",
                    "--upstream-http1",
                ],
                tmp,
                env=floor_env,
            )
            targets.append(
                ("hyper floor http1", f"http://127.0.0.1:{port}{FOO_PATH.format(g=CLUSTER)}", p, foo)
            )
        if want("hyper floor multi-thread") and os.access(args.floor, os.X_OK):
            port = free_port()
            p = start(
                "floor-multi-thread",
                [
                    args.floor,
                    f"127.0.0.1:{port}",
                    f"{scheme()}://127.0.0.1:{up_port}",
                    "--multi-thread",
                ],
                tmp,
                env=floor_env,
            )
            targets.append(
                (
                    "hyper floor multi-thread",
                    f"http://127.0.0.1:{port}{FOO_PATH.format(g=CLUSTER)}",
                    p,
                    foo,
                )
            )
        if want("kubectl proxy"):
            if not kubectl:
                print("kubectl not found (e2e/install.sh): skipping kubectl proxy", file=sys.stderr)
            else:
                port = free_port()
                p = start(
                    "kubectl",
                    [kubectl, "proxy", f"--kubeconfig={kc}", f"--port={port}", "--address=127.0.0.1"],
                    tmp,
                )
                targets.append(
                    ("kubectl proxy", f"http://127.0.0.1:{port}{FOO_PATH.format(g=CLUSTER)}", p, foo)
                )
        binaries = [("", args.regroup, "")] + [
            (" [" + a.split("=", 1)[0] + "]", a.split("=", 1)[1], "") for a in args.also
        ]
        if args.http1_rows:
            binaries.append((" http1", args.regroup, "upstream:\n  http2: never\n"))
            binaries.append((" auto", args.regroup, "upstream:\n  http2: auto\n"))
        for name, rule, group, body in [
            ("regroup rename", (APP, CLUSTER), APP, renamed),
            ("regroup no-name", ("wardle.example.com", "wardle.team1.example.com"), CLUSTER, foo),
        ]:
            if not want(name):
                continue
            for label, binary, extra in binaries:
                port = free_port()
                tag = (name + label).replace(" ", "-").replace("[", "").replace("]", "")
                cfg = regroup_conf(tmp, tag, rule, extra)
                p = start(
                    tag,
                    [binary, "serve", "-c", cfg, "--kubeconfig", kc, "--listen", f"127.0.0.1:{port}"],
                    tmp,
                )
                targets.append(
                    (name + label, f"http://127.0.0.1:{port}{FOO_PATH.format(g=group)}", p, body)
                )

        for name, url, p, body in targets:
            got = wait_ready(url, p, name)
            if got != body:
                sys.exit(f"{name} answered other bytes than expected:\n{got[:300]!r}")

        print(
            f"wrk -t1, {args.duration}s at {args.connections} connections, {args.latency_duration}s at 1; "
            f"GET {len(foo)}-byte Foo; {os.cpu_count()} CPUs",
            file=sys.stderr,
        )
        rows = [measure("direct", direct_url, up.pid, args)]
        for name, url, p, _ in targets:
            rows.append(measure(name, url, p.pid, args))
        print(table(rows, args.connections))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
    finally:
        stop_all()
        if args.keep:
            print(f"work directory kept: {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
