#!/usr/bin/env bash
# The image's binary, checked: regroup built statically (glibc, crt-static,
# `--profile dist`: what the Dockerfile puts in an image FROM scratch; the
# profile is $REGROUP_PROFILE when set) starts and serves in an
# empty root, a directory holding nothing but the binary and its
# configuration (chroot), renaming as usual for kubectl against the e2e
# stand-in. Needs root (chroot); skips with a reason otherwise.
set -euo pipefail
E2E="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$E2E/.."
cd "$ROOT"
if [ "$(id -u)" != 0 ]; then
  echo "static-selfcheck: skipped: chroot needs root"
  exit 0
fi
TARGET_TRIPLE="$(rustc -vV | sed -n 's/^host: //p')"
# The Dockerfile's profile: fat LTO, one codegen unit (Cargo.toml). Its
# final link is one single-threaded step of several minutes.
PROFILE="${REGROUP_PROFILE:-dist}"
echo "static-selfcheck: building regroup --profile $PROFILE with crt-static for $TARGET_TRIPLE"
BUILD_LOG="$(mktemp)"
if ! RUSTFLAGS="-C target-feature=+crt-static" cargo build --profile "$PROFILE" --locked -p regroup --bin regroup \
  --target "$TARGET_TRIPLE" >"$BUILD_LOG" 2>&1; then
  echo "static-selfcheck: the build failed (free disk: $(df -h . | awk 'NR==2 {print $4}')); its log's end:" >&2
  grep -v '^ *Compiling ' "$BUILD_LOG" | tail -n 60 >&2
  exit 1
fi
tail -n 1 "$BUILD_LOG"
rm -f "$BUILD_LOG"
BIN="${CARGO_TARGET_DIR:-target}/$TARGET_TRIPLE/$PROFILE/regroup"
if ldd "$BIN" 2>&1 | grep -q '=>'; then
  echo "static-selfcheck: $BIN is dynamically linked:" >&2
  ldd "$BIN" >&2
  exit 1
fi
"$E2E/install.sh" >/dev/null
PY="$E2E/.venv/bin/python"
KUBECTL="$E2E/.bin/kubectl"
DIR="$(mktemp -d)"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$DIR"; }
trap cleanup EXIT

"$PY" "$E2E/standin/server.py" --port 0 >"$DIR/standin.port" 2>"$DIR/standin.log" &
PIDS+=("$!")
for _ in $(seq 100); do [ -s "$DIR/standin.port" ] && break; sleep 0.1; done
UP_PORT="$(awk '{print $2}' "$DIR/standin.port")"

# The empty root: the binary, a kubeconfig naming the upstream by a host
# name, the rules, and the /etc/hosts a kubelet mounts into every container
# (with /etc/resolv.conf): a static glibc (2.34 and later) resolves names
# from them with its built-in files and dns lookups, no NSS library needed.
mkdir -p "$DIR/root/etc"
cp "$BIN" "$DIR/root/regroup"
echo "127.0.0.1 apiserver.static-selfcheck.test" >"$DIR/root/etc/hosts"
cat >"$DIR/root/upstream.kubeconfig" <<KC
apiVersion: v1
kind: Config
current-context: standin
clusters: [{name: standin, cluster: {server: "http://apiserver.static-selfcheck.test:$UP_PORT"}}]
contexts: [{name: standin, context: {cluster: standin, user: nobody}}]
users: [{name: nobody, user: {}}]
KC
cat >"$DIR/root/rules.yaml" <<'CFG'
rules:
  - from: samplecontroller.k8s.io
    to: samplecontroller.team1.example.com
CFG
echo "static-selfcheck: the empty root holds: $(cd "$DIR/root" && find . -type f | sort | tr '\n' ' ')"
APP_PORT="$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
chroot "$DIR/root" /regroup serve -c /rules.yaml --kubeconfig /upstream.kubeconfig \
  --listen "127.0.0.1:$APP_PORT" 2>"$DIR/regroup.log" &
PIDS+=("$!")
for _ in $(seq 100); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$APP_PORT") 2>/dev/null; then break; fi
  sleep 0.1
done
cat >"$DIR/app.kubeconfig" <<KC
apiVersion: v1
kind: Config
current-context: app
clusters: [{name: app, cluster: {server: "http://127.0.0.1:$APP_PORT"}}]
contexts: [{name: app, context: {cluster: app, user: nobody, namespace: default}}]
users: [{name: nobody, user: {}}]
KC
export KUBECONFIG="$DIR/app.kubeconfig"
fail() { echo "static-selfcheck: FAILED: $*" >&2; echo "--- regroup's log:" >&2; cat "$DIR/regroup.log" >&2; exit 1; }
RES="$("$KUBECTL" api-resources --api-group samplecontroller.k8s.io -o name 2>&1)" || fail "kubectl api-resources: $RES"
echo "$RES" | grep -qx 'foos.samplecontroller.k8s.io' || fail "api-resources did not list foos.samplecontroller.k8s.io: $RES"
OUT="$("$KUBECTL" get foos.samplecontroller.k8s.io -A -o jsonpath='{.items[*].apiVersion}' 2>"$DIR/kubectl.err")" \
  || fail "kubectl get: $OUT $(cat "$DIR/kubectl.err")"
[ -n "$OUT" ] || fail "kubectl get foos returned no items"
for v in $OUT; do
  case "$v" in samplecontroller.k8s.io/*) ;; *) fail "an item came back as $v" ;; esac
done
echo "static-selfcheck: 2 passed, 0 failed"
