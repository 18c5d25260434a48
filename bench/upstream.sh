# Sourced by bench/instructions.sh and bench/h2c_cpu.sh: the upstream both
# measure against, nginx serving real captures as a kube-apiserver would
# answer them, and the kubeconfig regroup reaches it with.
#
# Sourcing it sets T (a work directory, removed on exit), PIDS (the
# processes the caller starts, stopped on exit: add to it) and PU (the
# upstream's port). Needs ROOT; for TLS the caller sets LISTEN_TLS
# (nginx's `ssl http2; ssl_certificate …` words), SCHEME (https) and
# KC_CA (`, certificate-authority: '…'`) before `start_upstream`.

FOO=$ROOT/testdata/kube-1.24/renamed/027-get-foo-json/response.body
DEPLOY=$ROOT/testdata/kube-1.24/renamed/041-get-deployment-json/response.body
POM=$ROOT/testdata/kube-1.24/renamed/031-get-foo-pom-protobuf/response.body
CRD=$ROOT/testdata/kube-1.24/renamed/037-get-crd-protobuf/response.body

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

T=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$T"; }
trap cleanup EXIT
PU=$(port)

# The Foo (JSON, or its metadata in protobuf when the Accept asks for
# protobuf), its CRD in protobuf, the Deployment; started in the
# background, its pid in PIDS; $T/kc reaches it.
start_upstream() {
  local user_line=""
  [ "$(id -u)" = 0 ] && user_line="user root;"
  cat > "$T/up.conf" <<C
$user_line daemon off; worker_processes 1; pid $T/up.pid; error_log $T/err.log warn;
events { worker_connections 64; }
http { access_log off; keepalive_requests 10000000; client_body_temp_path $T/b; proxy_temp_path $T/p;
 fastcgi_temp_path $T/f; uwsgi_temp_path $T/u; scgi_temp_path $T/s;
 server { listen 127.0.0.1:$PU${LISTEN_TLS:-}; etag off;
  location = /apis/samplecontroller.team1.example.com/v1alpha1/namespaces/renamed/foos/alpha {
   if (\$http_accept ~ protobuf) { rewrite ^ /pom-foo last; }
   default_type application/json; alias $FOO; }
  location = /pom-foo { internal; default_type application/vnd.kubernetes.protobuf; alias $POM; }
  location = /apis/apiextensions.k8s.io/v1/customresourcedefinitions/foos.samplecontroller.team1.example.com {
   default_type application/vnd.kubernetes.protobuf; alias $CRD; }
  location = /apis/apps/v1/namespaces/renamed/deployments/alpha-deploy {
   default_type application/json; alias $DEPLOY; } } }
C
  cat > "$T/kc" <<C
apiVersion: v1
kind: Config
current-context: c
clusters: [{name: c, cluster: {server: '${SCHEME:-http}://127.0.0.1:$PU'${KC_CA:-}}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: load}}]
C
  nginx -c "$T/up.conf" -p "$T" & PIDS+=($!)
}

# bench/nginx-proxy.conf filled in for a proxy on port $1 to the upstream,
# written to $T/px/proxy.conf. $2: its h2c listener (` http2`) or empty;
# PROXY_TLS: its upstream TLS settings, or empty.
nginx_proxy_conf() {
  mkdir -p "$T/px"
  { [ "$(id -u)" = 0 ] && echo "user root;"
    sed -e "s|@DIR@|$T/px|g" -e "s|@PORT@|$1|g" -e "s|@UPSTREAM@|$PU|g" \
      -e "s|@SCHEME@|${SCHEME:-http}|g" -e "s|@TLS@|${PROXY_TLS:-}|g" -e "s|@H2C@|$2|g" \
      "$ROOT/bench/nginx-proxy.conf"
  } > "$T/px/proxy.conf"
}
