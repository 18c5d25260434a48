#!/usr/bin/env bash
# CPU time a request of the h2 caller kubectl and client-go are over TLS
# (here plain, with prior knowledge: one connection, requests one after
# another), for regroup and for nginx in the same run. callgrind
# (bench/instructions.sh with INSTRUCTIONS_CLIENT=h2c) over-counts large
# copies against CPU time, so an h2 change is checked here too.
# Loopback only; everything it starts is stopped on exit.
#
#   bench/h2c_cpu.sh [REGROUP_BIN...]      # default: target/release/regroup
#
# Env: H2C_REQUESTS (default 20000, after 500 not counted), H2C_CASES
# (default "nginx no-name rename"), H2C_PYTHON (a python3 with the `h2`
# package: `python3 -m venv V && V/bin/pip install h2`; default python3),
# H2C_CLIENT=http1: the same over one keep-alive HTTP/1.1 connection (the
# protocol of bench/instructions.sh's counts and of #55's targets; no `h2`
# package needed), nginx's listener without `http2`.
# The upstream is nginx serving the captured 921-byte Foo (as in
# bench/instructions.sh); nginx in front is bench/nginx-proxy.conf with
# `http2` on its listener; regroup's cases are instructions.sh's. Prints,
# per case and binary, the proxy's user and system CPU (utime and stime
# of /proc/PID/stat) over the counted requests, in microseconds a
# request, and user+system against nginx's. Nothing is asserted.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BINS=("$@"); [ ${#BINS[@]} -eq 0 ] && BINS=("$ROOT/target/release/regroup")
N=${H2C_REQUESTS:-20000}
PY=${H2C_PYTHON:-python3}
CLIENT=H2c; LISTEN=" http2"
if [ "${H2C_CLIENT:-h2c}" = http1 ]; then
  CLIENT=H1; LISTEN=""
else
  "$PY" -c 'import h2' 2>/dev/null || { echo "h2c_cpu: $PY has no h2 package (pip install h2)" >&2; exit 2; }
fi
# shellcheck source=bench/upstream.sh
. "$ROOT/bench/upstream.sh"
start_upstream

# measure PORT GROUP PID -> "user sys" microseconds a request
measure() {
  "$PY" - "$1" "$2" "$3" "$N" "$ROOT/bench" "$CLIENT" <<'P'
import os, sys
sys.path.insert(0, sys.argv[5])
import h2c_client
port, group, pid, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def cpu():
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]), int(f[12])
c = getattr(h2c_client, sys.argv[6])(port)
path = f"/apis/{group}/v1alpha1/namespaces/renamed/foos/alpha"
def run(k):
    body = b""
    for _ in range(k):
        status, body = c.get(path)
        if status != b"200": sys.exit(f"status {status!r}")
    return body
first = run(500)
# The answer names the group the client asked for: renamed by regroup's
# `rename`, passed through by nginx and `no-name`.
if group.encode() not in first: sys.exit(f"the answer does not name {group}")
a = cpu(); run(n); b = cpu()
tick = os.sysconf("SC_CLK_TCK")
print(f"{(b[0] - a[0]) / tick / n * 1e6:.1f} {(b[1] - a[1]) / tick / n * 1e6:.1f}")
P
}

BASE=""
for case in ${H2C_CASES:-nginx no-name rename}; do
  for bin in "${BINS[@]}"; do
    pr=$(port)
    if [ "$case" = nginx ]; then
      nginx_proxy_conf "$pr" "$LISTEN"
      nginx -c "$T/px/proxy.conf" -p "$T/px" 2>"$T/proxy.log" & px=$!
      group=samplecontroller.team1.example.com
      name=nginx
    else
      if [ "$case" = rename ]; then
        printf 'rules:\n- from: samplecontroller.k8s.io\n  to: samplecontroller.team1.example.com\n' > "$T/cfg.yaml"
        group=samplecontroller.k8s.io
      else
        printf 'rules:\n- from: wardle.example.com\n  to: wardle.team1.example.com\n' > "$T/cfg.yaml"
        group=samplecontroller.team1.example.com
      fi
      "$bin" serve -c "$T/cfg.yaml" --kubeconfig "$T/kc" --listen "127.0.0.1:$pr" 2>"$T/proxy.log" & px=$!
      name="$case $(basename "$bin")"
    fi
    got=$(measure "$pr" "$group" "$px") || { kill "$px" 2>/dev/null; echo "$name: the client failed" >&2; exit 1; }
    kill "$px" 2>/dev/null; wait "$px" 2>/dev/null || true
    read -r user sys <<<"$got"
    total=$(python3 -c "print(f'{$user + $sys:.1f}')")
    [ "$case" = nginx ] && [ -z "$BASE" ] && BASE=$total
    ratio=""; [ -n "$BASE" ] && ratio=", $(python3 -c "print(f'{$total / $BASE:.2f}')") x nginx"
    echo "$name: user $user us, system $sys us a request$ratio"
    # nginx is measured once, whatever the binaries.
    [ "$case" = nginx ] && break
  done
done
