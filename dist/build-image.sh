#!/usr/bin/env bash
# regroup's image, with no container daemon and no registry: builds the
# static binary as the Dockerfile does (glibc with crt-static, `--profile
# dist`: fat LTO, one codegen unit) and makes it into an image archive with
# dist/image-archive.py (one layer: /regroup, /etc/passwd and /etc/group
# naming user and group 65532; user 65532:65532,
# entrypoint /regroup, tagged regroup:VERSION, the chart's and `regroup
# inject`'s default image). Load it where the pods run:
#
#   dist/build-image.sh                  # -> target/regroup-image-VERSION-ARCH.tar
#   docker load -i target/regroup-image-0.1.0-amd64.tar
#   kind load image-archive target/regroup-image-0.1.0-amd64.tar
#   ctr -n k8s.io images import target/regroup-image-0.1.0-amd64.tar   # on a containerd node
#
# REGROUP_PROFILE=release skips fat LTO (a faster build of a slower binary,
# for trying things out); -o FILE chooses the archive; other arguments go to
# dist/image-archive.py (--tag, --arch, ...). REGROUP_COMMIT names the commit
# (`regroup --version`, the image's revision label; default: git rev-parse
# HEAD) and SOURCE_DATE_EPOCH the image's timestamps (default: that
# commit's time), so a rebuild of the same commit gives the same archive.
# Needs Rust (rustup) and Python 3.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PROFILE="${REGROUP_PROFILE:-dist}"
TRIPLE="$(rustc -vV | sed -n 's/^host: //p')"
export REGROUP_COMMIT="${REGROUP_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"

echo "build-image: cargo build --profile $PROFILE with crt-static for $TRIPLE (commit $REGROUP_COMMIT)"
[ "$PROFILE" = dist ] && echo "build-image: fat LTO's final link is one single-threaded step of several minutes"
LOG="$(mktemp)"
trap 'rm -f "$LOG"' EXIT
if ! RUSTFLAGS="-C target-feature=+crt-static" cargo build --profile "$PROFILE" --locked -p regroup --bin regroup \
  --target "$TRIPLE" >"$LOG" 2>&1; then
  echo "build-image: the build failed (free disk: $(df -h . | awk 'NR==2 {print $4}')); its log's end:" >&2
  grep -v '^ *Compiling ' "$LOG" | tail -n 60 >&2
  exit 1
fi
tail -n 1 "$LOG"
BIN="${CARGO_TARGET_DIR:-target}/$TRIPLE/$PROFILE/regroup"
if ldd "$BIN" 2>&1 | grep -q '=>'; then
  echo "build-image: $BIN is dynamically linked:" >&2
  ldd "$BIN" >&2
  exit 1
fi
echo "build-image: $BIN: $("$BIN" --version)"
exec python3 dist/image-archive.py "$BIN" --revision "$REGROUP_COMMIT" "$@"
