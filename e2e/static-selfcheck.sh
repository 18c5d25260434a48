#!/usr/bin/env bash
# The image, checked: regroup built statically (glibc, crt-static,
# `--profile dist`: what the Dockerfile puts in an image FROM scratch; the
# profile is $REGROUP_PROFILE when set) by dist/build-image.sh, which also
# makes the image archive from it (dist/image-archive.py).
#  1. The binary starts and serves in an empty root, a directory holding
#     nothing but the binary and its configuration (chroot), renaming as
#     usual for kubectl against the e2e stand-in.
#  2. The archive: the same binary gives the same bytes again; skopeo reads
#     it as an OCI archive and as a Docker archive, by the names the chart
#     and inject default to, with user 65532:65532; its one layer holds
#     /regroup (0755, root's) and /etc/passwd and /etc/group naming user
#     and group 65532; unpacked, the image's entrypoint runs
#     `--version` as the image's user on a read-only root (a read-only bind
#     mount in a mount namespace of its own) and names this version and
#     commit. Without skopeo (`apt-get install skopeo`; .ci/run installs
#     it) the archive is read by e2e/tests/image_archive_check.py instead,
#     and the output says so.
# Needs root (chroot, mount); skips with a reason otherwise.
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
# What the binary and the archive's labels name; exported so that the
# second archive below is made from the same inputs.
export REGROUP_COMMIT="${REGROUP_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"
DIR="$(mktemp -d)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  chmod -R u+w "$DIR" 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT
ARCHIVE="$DIR/regroup-image.tar"
REGROUP_PROFILE="$PROFILE" dist/build-image.sh -o "$ARCHIVE"
BIN="${CARGO_TARGET_DIR:-target}/$TARGET_TRIPLE/$PROFILE/regroup"
VERSION="$("$BIN" --version | awk '{print $2}')"
"$E2E/install.sh" >/dev/null
PY="$E2E/.venv/bin/python"
KUBECTL="$E2E/.bin/kubectl"
PASSED=0

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
PASSED=$((PASSED + 2))
echo "static-selfcheck: serves from an empty root: kubectl api-resources and get foos, renamed"
kill "${PIDS[@]}" 2>/dev/null || true

# --- 2. the image archive ---------------------------------------------------
fail_image() { echo "static-selfcheck: FAILED: the image archive $ARCHIVE: $*" >&2; exit 1; }
# A field of a JSON document (a file), for the checks below.
field() {
  python3 -c 'import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2:]:
    v = v[int(k)] if isinstance(v, list) else v[k]
print(v if isinstance(v, str) else json.dumps(v))' "$@"
}

python3 dist/image-archive.py "$BIN" -o "$DIR/again.tar" >/dev/null
cmp -s "$ARCHIVE" "$DIR/again.tar" || fail_image "a second archive from the same binary differs: $(sha256sum "$ARCHIVE" "$DIR/again.tar")"
echo "static-selfcheck: reproducible: two archives from $BIN: both sha256 $(sha256sum <"$ARCHIVE" | cut -d' ' -f1)"
PASSED=$((PASSED + 1))

ROOTFS="$DIR/image-root"
mkdir "$ROOTFS"
if command -v skopeo >/dev/null; then
  # Read by the names users and the defaults pick: the OCI ref.name (the
  # version) and the Docker tag regroup:VERSION (the chart's and inject's image).
  for ref in "oci-archive:$ARCHIVE:$VERSION" "docker-archive:$ARCHIVE:regroup:$VERSION"; do
    out="$DIR/inspect.json"
    skopeo inspect "$ref" >"$out" 2>"$DIR/skopeo.err" || fail_image "skopeo inspect $ref: $(cat "$DIR/skopeo.err")"
    skopeo inspect --config "$ref" >"$DIR/config.json" 2>"$DIR/skopeo.err" \
      || fail_image "skopeo inspect --config $ref: $(cat "$DIR/skopeo.err")"
    user="$(field "$DIR/config.json" config User)"
    labels="$(field "$out" Labels)"
    echo "static-selfcheck: skopeo inspect $ref: Digest $(field "$out" Digest), $(field "$out" Os)/$(field "$out" Architecture), User $user, Entrypoint $(field "$DIR/config.json" config Entrypoint), Labels $labels"
    [ "$user" = 65532:65532 ] || fail_image "$ref: User is $user, not 65532:65532"
    [ "$(field "$out" Labels org.opencontainers.image.version)" = "$VERSION" ] || fail_image "$ref: version label is not $VERSION"
    [ "$(field "$out" Labels org.opencontainers.image.revision)" = "$REGROUP_COMMIT" ] \
      || fail_image "$ref: revision label is not $REGROUP_COMMIT"
    PASSED=$((PASSED + 1))
  done
  skopeo copy --quiet "oci-archive:$ARCHIVE" "dir:$DIR/image-dir" 2>"$DIR/skopeo.err" \
    || fail_image "skopeo copy to dir: $(cat "$DIR/skopeo.err")"
  [ "$(field "$DIR/image-dir/manifest.json" layers 0 mediaType)" = application/vnd.oci.image.layer.v1.tar+gzip ] \
    || fail_image "the layer is not application/vnd.oci.image.layer.v1.tar+gzip"
  LAYER="$DIR/image-dir/$(field "$DIR/image-dir/manifest.json" layers 0 digest | sed 's/^sha256://')"
  tar -xzf "$LAYER" -C "$ROOTFS" --same-owner --same-permissions --numeric-owner || fail_image "tar -xzf of the layer failed"
else
  echo "static-selfcheck: NOTE: skopeo is not installed (apt-get install skopeo): the archive is read by"
  echo "static-selfcheck: NOTE: e2e/tests/image_archive_check.py, written apart from the maker but not an independent tool"
  python3 "$E2E/tests/image_archive_check.py" "$ARCHIVE" --extract-layer "$ROOTFS" >"$DIR/check.out" \
    || fail_image "image_archive_check.py refused it"
  head -n 1 "$DIR/check.out"
  sed -n 2p "$DIR/check.out" >"$DIR/config.json"
  [ "$(field "$DIR/config.json" config User)" = 65532:65532 ] || fail_image "User is not 65532:65532"
  PASSED=$((PASSED + 1))
fi
CONTENTS="$(cd "$ROOTFS" && find . -mindepth 1 -printf '%P %m %U:%G\n' | sort | paste -sd, -)"
[ "$CONTENTS" = "etc 755 0:0,etc/group 644 0:0,etc/passwd 644 0:0,regroup 755 0:0" ] \
  || fail_image "the layer holds (path mode uid:gid) $CONTENTS, not /regroup, /etc/passwd and /etc/group alone"
grep -qx 'nonroot:x:65532:65532:[^:]*:[^:]*:[^:]*' "$ROOTFS/etc/passwd" || fail_image "/etc/passwd names no user 65532, group 65532"
echo "static-selfcheck: the layer holds: $CONTENTS; user 65532 in /etc/passwd: $(grep :65532: "$ROOTFS/etc/passwd")"
PASSED=$((PASSED + 1))

# Run as the image says (its user, its entrypoint) on the root read-only:
# a read-only bind mount of the unpacked layer in a mount namespace of its own.
USERSPEC="$(field "$DIR/config.json" config User)"
ENTRY="$(field "$DIR/config.json" config Entrypoint 0)"
chmod 0555 "$ROOTFS"
run_readonly() {
  unshare --mount --propagation private sh -ec '
    mount --bind "$1" "$1"
    mount -o remount,bind,ro "$1"
    if touch "$1/written" 2>/dev/null; then echo "the root is writable" >&2; exit 3; fi
    exec chroot --userspec="$2" "$1" "$3" --version' sh "$ROOTFS" "$USERSPEC" "$ENTRY"
}
if OUT="$(run_readonly 2>"$DIR/run.err")"; then
  HOW="a read-only bind mount"
elif grep -q "the root is writable" "$DIR/run.err"; then
  fail_image "the read-only bind mount is writable"
elif grep -qi "mount\|unshare" "$DIR/run.err"; then
  # No mount namespace here (a container without CAP_SYS_ADMIN): the root
  # directory is at least not writable by the image's user.
  echo "static-selfcheck: NOTE: no read-only bind mount here ($(head -n 1 "$DIR/run.err")): the root is a mode 0555 directory instead"
  HOW="a mode 0555 directory"
  OUT="$(chroot --userspec="$USERSPEC" "$ROOTFS" "$ENTRY" --version 2>"$DIR/run.err")" \
    || fail_image "chroot --userspec=$USERSPEC $ROOTFS $ENTRY --version: $(cat "$DIR/run.err")"
else
  fail_image "$ENTRY --version as $USERSPEC in the unpacked layer: $(cat "$DIR/run.err")"
fi
echo "static-selfcheck: $ENTRY --version as $USERSPEC on $HOW (the unpacked layer): $OUT"
[ "$OUT" = "regroup $VERSION (commit $REGROUP_COMMIT)" ] \
  || fail_image "it said \"$OUT\", not \"regroup $VERSION (commit $REGROUP_COMMIT)\""
PASSED=$((PASSED + 1))
echo "static-selfcheck: $PASSED passed, 0 failed"
