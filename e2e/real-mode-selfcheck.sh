#!/usr/bin/env bash
# Runs the e2e suite in real-cluster mode (REGROUP_E2E_KUBECONFIG) against a
# stand-in posing as a cluster, so that the path acceptance runs against a
# real kube-apiserver (renamed CRD installed with `regroup render`, test
# namespace, front behind a Service with manual Endpoints, clean-up) is
# exercised on every CI run. The stand-in then hides the original group, as
# a real cluster has none, serves HTTPS with a CA made here, and publishes a
# front-proxy CA and aggregator certificate made here. Extra arguments go to pytest.
set -euo pipefail
E2E="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$E2E/install.sh"
PY="$E2E/.venv/bin/python"
DIR="$(mktemp -d)"
PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$DIR"; }
trap cleanup EXIT
cd "$E2E/.."

"$PY" - "$DIR" <<'PYEOF'
import sys
sys.path.insert(0, "e2e/tests")
from pki import issue, new_ca
ca = new_ca("selfcheck-front-proxy-ca")
ca.write(sys.argv[1], "ca")
issue(ca, "front-proxy-client", client=True).write(sys.argv[1], "proxy-client")
cluster = new_ca("selfcheck-cluster-ca")  # the cluster serves HTTPS, as a real one does
cluster.write(sys.argv[1], "cluster-ca")
issue(cluster, "127.0.0.1", dns=["localhost"], ips=["127.0.0.1"]).write(sys.argv[1], "serving")
PYEOF

# --finalizers: deletion waits for finalizers, as on a real cluster;
# --strict-crds: custom resources validated by their CRD's schema, status
# ignored on create, as on a real cluster.
REGROUP_STANDIN_HIDE_ORIG=1 "$PY" "$E2E/standin/server.py" --port 0 --seed-namespace '' --finalizers --strict-crds \
  --requestheader-ca "$DIR/ca.crt" --proxy-client-cert "$DIR/proxy-client.crt" \
  --proxy-client-key "$DIR/proxy-client.key" --tls-cert "$DIR/serving.crt" --tls-key "$DIR/serving.key" \
  >"$DIR/port" 2>"$DIR/standin.log" &
PID=$!
for _ in $(seq 50); do [ -s "$DIR/port" ] && break; sleep 0.1; done
PORT="$(awk '/^LISTENING/ {print $2}' "$DIR/port")"
[ -n "$PORT" ] || { echo "stand-in did not start:"; cat "$DIR/standin.log"; exit 1; }
cat >"$DIR/kubeconfig" <<KC
{"apiVersion": "v1", "kind": "Config", "current-context": "selfcheck",
 "clusters": [{"name": "selfcheck", "cluster": {"server": "https://127.0.0.1:$PORT",
   "certificate-authority-data": "$(base64 -w0 "$DIR/cluster-ca.crt")"}}],
 "users": [{"name": "selfcheck", "user": {"token": "selfcheck-admin"}}],
 "contexts": [{"name": "selfcheck", "context": {"cluster": "selfcheck", "user": "selfcheck"}}]}
KC
REGROUP_E2E_KUBECONFIG="$DIR/kubeconfig" REGROUP_E2E_FRONT_HOST=127.0.0.1 \
  "$PY" -m pytest e2e/tests -q -rs -p no:cacheprovider "$@"
