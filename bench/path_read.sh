#!/usr/bin/env bash
# Instructions to read one request path (`RequestInfo::parse` and
# `rewrite_path_for`), by callgrind: core/examples/path_read.rs run N1 and
# N2 times, the difference over N2 - N1.
#
#   bench/path_read.sh [N1] [N2] [PATH] [FROM=TO]
#
# PATH_READ_BIN=... uses a binary built before (to compare two commits).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N1=${1:-200}
N2=${2:-2200}
shift $(($# < 2 ? $# : 2))
if [ -n "${PATH_READ_BIN:-}" ]; then
  BIN=$PATH_READ_BIN
else
  (cd "$ROOT" && cargo build --release -q -p regroup-core --example path_read)
  BIN=$ROOT/target/release/examples/path_read
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
count() {
  local n=$1
  shift
  valgrind --tool=callgrind --callgrind-out-file="$T/cg.$n.out" "$BIN" "$n" "$@" \
    >"$T/out.$n" 2>"$T/log.$n" || { cat "$T/log.$n" >&2; exit 1; }
  callgrind_annotate "$T/cg.$n.out" | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}'
}
a=$(count "$N1" "$@")
b=$(count "$N2" "$@")
cat "$T/out.$N2"
echo "$(( (b - a) / (N2 - N1) )) instructions a read"
