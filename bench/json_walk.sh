#!/usr/bin/env bash
# Instructions per byte of the JSON renaming walk alone (no proxy, no
# network), counted by valgrind's callgrind: deterministic, so a change to
# the walk can be judged on a busy machine.
#
#   bench/json_walk.sh [N1 N2] [BODY GROUP KIND]
#
# Runs core/examples/json_walk.rs (the captured 921-byte Foo renamed
# through `Engine::body`, as a GET's response) N1 and N2 times (default
# 200 and 2200) under callgrind; start-up cancels out of the difference:
#   instructions/byte = (count(N2) - count(N1)) / ((N2 - N1) * bytes)
# The example is built with `cargo build --release -p regroup-core
# --example json_walk` (done here). JSON_WALK_KEEP=DIR keeps the N2 run's
# callgrind output there, for `callgrind_annotate --inclusive=yes`.
# JSON_WALK_BIN=PATH runs another build of the example (a before/after in
# one session: copy target/release/examples/json_walk aside first).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N1=${1:-200}
N2=${2:-2200}
BODY=${3:-$ROOT/testdata/kube-1.24/renamed/027-get-foo-json/response.body}
GROUP=${4:-samplecontroller.k8s.io}
KIND=${5:-Foo}
if [ -n "${JSON_WALK_BIN:-}" ]; then
  BIN=$JSON_WALK_BIN
else
  (cd "$ROOT" && cargo build --release -q -p regroup-core --example json_walk)
  BIN=$ROOT/target/release/examples/json_walk
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
count() {
  valgrind --tool=callgrind --callgrind-out-file="$T/cg.$1.out" "$BIN" "$1" "$BODY" "$GROUP" "$KIND" \
    >"$T/out.$1" 2>"$T/log.$1" || { cat "$T/log.$1" >&2; exit 1; }
  callgrind_annotate "$T/cg.$1.out" | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}'
}
a=$(count "$N1")
b=$(count "$N2")
if [ -n "${JSON_WALK_KEEP:-}" ]; then mkdir -p "$JSON_WALK_KEEP"; cp "$T/cg.$N2.out" "$JSON_WALK_KEEP/json_walk.$N2.out"; fi
bytes=$(wc -c <"$BODY")
cat "$T/out.$N2"
python3 - "$a" "$b" "$N1" "$N2" "$bytes" <<'P'
import sys
a, b, n1, n2, size = map(int, sys.argv[1:])
per = (b - a) / (n2 - n1)
print(f"{per:,.0f} instructions/rename, {per / size:.1f} instructions/byte ({size} bytes)")
P
