#!/usr/bin/env bash
# User-space instructions per request of the real regroup binary, counted by
# valgrind's callgrind: deterministic, so a change can be judged on a busy
# machine where req/s and CPU time are not. Loopback only; everything it
# starts is stopped on exit.
#
#   bench/instructions.sh [REGROUP_BIN] [REQUESTS]
#
# Two runs per case (200 and 200+REQUESTS sequential keep-alive GETs of the
# captured 921-byte Foo behind nginx); the difference over REQUESTS is the
# cost of one request (start-up and shutdown cancel out). Cases, in the
# order printed:
#   nginx         nginx as a reverse proxy (bench/nginx-proxy.conf: one
#                 process, `master_process off`, keep-alive upstream pool,
#                 access log on): the baseline every row is divided by;
#   floor         the same GET through `hyper_floor`
#                 (proxy/examples/hyper_floor.rs: a pass-through built on
#                 hyper's connection-level API, what regroup cannot be
#                 cheaper than); its binary is $FLOOR_BIN, default
#                 target/release/examples/hyper_floor, built by `cargo build
#                 --release -p regroup --example hyper_floor`; skipped,
#                 saying so, when it is not built. $FLOOR_ARGS are passed to
#                 it (its variants, e.g. `--legacy-client`: see its header);
#   core-no-name, core-rename  the floor with `--core`: what regroup's core
#                 does with the request (the path read and renamed, the
#                 answer through `Engine::body`, the request line) on the
#                 floor, without regroup's proxy layers; the configuration
#                 of `no-name` and `rename`. A bound from below on those two
#                 rows (not in the default list);
#   no-name       regroup with a rule for another group: the same body,
#                 nothing to rename;
#   rename        samplecontroller.k8s.io renamed;
#   rename-names  the same with `names:` on for kinds the body does not name;
#   rename-metadata  `rename` with `metadata:` rules (prefixes
#                 kopf.zalando.org, cert-manager.io, acme.example.io:
#                 keys the Foo does not carry): what rules cost a body that
#                 has none of their keys;
#   deployment    the captured 2049-byte Deployment GET
#                 (renamed/041-get-deployment-json) through `rename`'s
#                 config: a built-in kind, nothing to rename;
#   deployment-metadata  the same Deployment with `rename-metadata`'s rules
#                 (its pod template and selector are metadata places);
#   protobuf      the Foo GET in protobuf (`Accept:
#                 application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;…`,
#                 the captured 517-byte answer
#                 renamed/031-get-foo-pom-protobuf) through `rename`'s
#                 config: a custom resource has no protobuf form of its
#                 own, its metadata does, and its managedFields name the
#                 group twice, so this is a protobuf rename of the Foo;
#   protobuf-crd  the captured 2679-byte CRD of the Foo in protobuf
#                 (renamed/037-get-crd-protobuf; `Accept:
#                 application/vnd.kubernetes.protobuf`), its name in the
#                 URL and its group in the body renamed.
# Rows without metadata rules (no-name, rename, deployment) measure the
# same code path as before metadata rules existed: compare them with an
# older binary's run for "unchanged".
# Each row prints instructions/request and × nginx (when nginx was run).
# Needs valgrind, nginx (Debian's: `apt-get install -y valgrind nginx-light`),
# curl, python3.
# INSTRUCTIONS_KEEP=DIR keeps each run's callgrind output there
# (DIR/CASE.REQUESTS.out), for `callgrind_annotate --inclusive=yes`.
# INSTRUCTIONS_CASES="nginx rename" runs only the cases named.
# INSTRUCTIONS_TLS=1: the upstream serves TLS and offers h2 by ALPN, as a
# kube-apiserver does (openssl makes a CA); regroup and the floor take h2,
# nginx proxies over HTTP/1.1 with TLS sessions reused (all it can).
# INSTRUCTIONS_CLIENT=h2c: the client speaks h2 with prior knowledge (one
# connection, one request after another), as kubectl and client-go do over
# TLS: hyper's server then spawns each request's future as a task of its
# own. Needs the `h2` package for $INSTRUCTIONS_PYTHON (default python3):
# `python3 -m venv V && V/bin/pip install h2`, INSTRUCTIONS_PYTHON=V/bin/python.
# nginx listens with `http2` (h2c) for it, the floor with `--auto-server`.
# INSTRUCTIONS_CONFIG_EXTRA='upstream:\n  http2: never\n' is appended to
# regroup's config in every regroup case (printf %b: \n are newlines).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/target/release/regroup}
N=${2:-1000}
FLOOR_BIN=${FLOOR_BIN:-$ROOT/target/release/examples/hyper_floor}
# shellcheck source=bench/upstream.sh
. "$ROOT/bench/upstream.sh"
SCHEME=http LISTEN_TLS="" PROXY_TLS="" KC_CA=""
H2C=""; [ "${INSTRUCTIONS_CLIENT:-http1}" = h2c ] && H2C=" http2"
if [ -n "${INSTRUCTIONS_TLS:-}" ]; then
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' > "$T/ext"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/ca.key" -out "$T/ca.pem" -days 1 -subj /CN=bench-ca 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout "$T/key.pem" -out "$T/cert.csr" -subj /CN=127.0.0.1 2>/dev/null
  openssl x509 -req -in "$T/cert.csr" -CA "$T/ca.pem" -CAkey "$T/ca.key" -CAcreateserial \
    -out "$T/cert.pem" -days 1 -extfile "$T/ext" 2>/dev/null
  SCHEME=https
  LISTEN_TLS=" ssl http2; ssl_certificate $T/cert.pem; ssl_certificate_key $T/key.pem"
  PROXY_TLS="proxy_ssl_trusted_certificate $T/ca.pem; proxy_ssl_name localhost; proxy_ssl_verify on; proxy_ssl_session_reuse on;"
  KC_CA=", certificate-authority: '$T/ca.pem'"
  export FLOOR_CA_FILE=$T/ca.pem
fi
start_upstream

count() { # config group requests -> total instructions (group `apps`: the Deployment;
  # `pom:GROUP`: the Foo's metadata in protobuf; `crd:GROUP`: the Foo's CRD in protobuf)
  local cfg=$1 group=$2 n=$3 pr out
  pr=$(port); out=$T/cg.$n.out
  if [ "$cfg" = nginx ]; then
    nginx_proxy_conf "$pr" "$H2C"
    valgrind --tool=callgrind --callgrind-out-file="$out" nginx -c "$T/px/proxy.conf" -p "$T/px" \
      2>"$T/regroup.log" & local rg=$!
  elif [ "$cfg" = floor ] || [ "$cfg" = floor-core ]; then
    local core=""; [ "$cfg" = floor-core ] && core=--core
    # shellcheck disable=SC2086
    FLOOR_CONFIG=$T/cfg.yaml valgrind --tool=callgrind --callgrind-out-file="$out" "$FLOOR_BIN" "127.0.0.1:$pr" \
      "$SCHEME://127.0.0.1:$PU" ${FLOOR_ARGS:-} $core ${H2C:+--auto-server} 2>"$T/regroup.log" & local rg=$!
  else
    valgrind --tool=callgrind --callgrind-out-file="$out" "$BIN" serve -c "$cfg" --kubeconfig "$T/kc" \
      --listen "127.0.0.1:$pr" 2>"$T/regroup.log" & local rg=$!
  fi
  # A client that fails (a proxy that did not start or did not rename) ends
  # the run: its count would be a number that measures nothing.
  "${INSTRUCTIONS_PYTHON:-python3}" - "$pr" "$group" "$n" "${INSTRUCTIONS_CLIENT:-http1}" "$ROOT/bench" <<'P' || { kill "$rg" 2>/dev/null; echo "$CASE: the client failed" >&2; return 1; }
import http.client, sys, time
port, group, n, client = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
headers = {}
if group == "apps":
    path = "/apis/apps/v1/namespaces/renamed/deployments/alpha-deploy"
elif group.startswith("pom:"):
    path = f"/apis/{group[4:]}/v1alpha1/namespaces/renamed/foos/alpha"
    headers["Accept"] = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
elif group.startswith("crd:"):
    path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/foos.{group[4:]}"
    headers["Accept"] = "application/vnd.kubernetes.protobuf"
else:
    path = f"/apis/{group}/v1alpha1/namespaces/renamed/foos/alpha"
deadline = time.time() + 60
if client == "h2c":
    # h2 with prior knowledge; nginx then speaks nothing else, so the
    # wait is for a connection and the first request's status the check.
    sys.path.insert(0, sys.argv[5])
    from h2c_client import H2c
    c = H2c(port)
    for _ in range(n + 1):
        status, _ = c.get(path, headers.items())
        assert status == b"200", status
    sys.exit(0)
while True:
    try:
        c = http.client.HTTPConnection("127.0.0.1", port); c.request("GET", path, headers=headers)
        r = c.getresponse(); first = r.read(); break
    except OSError:
        if time.time() > deadline: sys.exit("the proxy did not start")
        time.sleep(0.2)
if headers and (r.status != 200 or b"samplecontroller.k8s.io" not in first
                or b"team1" in first or not r.getheader("Content-Type", "").startswith("application/vnd.kubernetes.protobuf")):
    sys.exit(f"the protobuf GET was not renamed: {r.status} {first[:200]!r}")
for _ in range(n):
    c.request("GET", path, headers=headers); r = c.getresponse(); r.read()
    assert r.status == 200, r.status
P
  kill -INT $rg; wait $rg || true
  if [ -n "${INSTRUCTIONS_KEEP:-}" ]; then mkdir -p "$INSTRUCTIONS_KEEP"; cp "$out" "$INSTRUCTIONS_KEEP/$CASE.$n.out"; fi
  callgrind_annotate "$out" | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}'
}

BASE=""
RULE='rules:\n- from: samplecontroller.k8s.io\n  to: samplecontroller.team1.example.com\n'
NO_NAME='rules:\n- from: wardle.example.com\n  to: wardle.team1.example.com\n'
METADATA='metadata:\n  prefixes:\n  - {from: kopf.zalando.org, to: kopf.team1.example.com}\n  - {from: cert-manager.io, to: cert-manager.team1.example.com}\n  - {from: acme.example.io, to: acme.team1.example.com}\n'
for case in ${INSTRUCTIONS_CASES:-nginx floor no-name rename rename-names rename-metadata deployment deployment-metadata protobuf protobuf-crd}; do
  CASE=$case
  cfg=$T/cfg.yaml
  if [[ $case = floor || $case = core-* ]] && [ ! -x "$FLOOR_BIN" ]; then
    echo "$case: skipped, $FLOOR_BIN is not built (cargo build --release -p regroup --example hyper_floor)"
    continue
  fi
  if [ $case = nginx ]; then
    cfg=nginx
    group=samplecontroller.team1.example.com
  elif [ $case = floor ]; then
    cfg=floor
    group=samplecontroller.team1.example.com
  elif [ $case = core-rename ]; then
    cfg=floor-core
    printf "$RULE" > "$T/cfg.yaml"
    group=samplecontroller.k8s.io
  elif [ $case = core-no-name ]; then
    cfg=floor-core
    printf "$NO_NAME" > "$T/cfg.yaml"
    group=samplecontroller.team1.example.com
  elif [ $case = rename ]; then
    printf "$RULE" > "$T/cfg.yaml"
    group=samplecontroller.k8s.io
  elif [ $case = rename-metadata ]; then
    printf "$RULE$METADATA" > "$T/cfg.yaml"
    group=samplecontroller.k8s.io
  elif [ $case = deployment ]; then
    printf "$RULE" > "$T/cfg.yaml"
    group=apps
  elif [ $case = deployment-metadata ]; then
    printf "$RULE$METADATA" > "$T/cfg.yaml"
    group=apps
  elif [ $case = protobuf ]; then
    printf "$RULE" > "$T/cfg.yaml"
    group=pom:samplecontroller.k8s.io
  elif [ $case = protobuf-crd ]; then
    printf "$RULE" > "$T/cfg.yaml"
    group=crd:samplecontroller.k8s.io
  elif [ $case = rename-names ]; then
    # `names:` on, for kinds the Foo GET does not name: its cost on the fast path.
    printf 'rules:\n- from: samplecontroller.k8s.io\n  to: samplecontroller.team1.example.com\nnames:\n  prefix: team1-\n  kinds: [ClusterRole, ClusterRoleBinding, ValidatingWebhookConfiguration]\n' > "$T/cfg.yaml"
    group=samplecontroller.k8s.io
  else
    printf "$NO_NAME" > "$T/cfg.yaml"
    group=samplecontroller.team1.example.com
  fi
  if [ "$cfg" = "$T/cfg.yaml" ] && [ -n "${INSTRUCTIONS_CONFIG_EXTRA:-}" ]; then
    printf '%b' "$INSTRUCTIONS_CONFIG_EXTRA" >> "$T/cfg.yaml"
  fi
  a=$(count "$cfg" $group 200)
  b=$(count "$cfg" $group $((200 + N)))
  per=$(( (b - a) / N ))
  [ $case = nginx ] && BASE=$per
  if [ -n "$BASE" ]; then
    echo "$case: $per instructions/request, $(python3 -c "print(f'{$per / $BASE:.2f}')") x nginx"
  else
    echo "$case: $per instructions/request"
  fi
done
