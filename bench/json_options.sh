#!/usr/bin/env bash
# Instructions per byte of each validating reader the JSON walk could stand
# on (bench/json-options, a crate outside the workspace), by callgrind, over the captured Foo:
#   bench/json_options.sh [MODES] [N1 N2]
# MODES default "serde simd sonic memmem"; see the example's header.
# JSON_OPTIONS_BODY=FILE measures another body (e.g. the 3.5 MB OpenAPI
# document, testdata/kube-1.24/common/012-openapi-v2-json/response.body).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODES=${1:-serde simd sonic memmem}
N1=${2:-200}
N2=${3:-2200}
BODY=${JSON_OPTIONS_BODY:-$ROOT/testdata/kube-1.24/renamed/027-get-foo-json/response.body}
(cd "$ROOT/bench/json-options" && cargo build --release -q --target-dir "$ROOT/target/json-options")
BIN=$ROOT/target/json-options/release/json-options
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
count() {
  valgrind --tool=callgrind --callgrind-out-file="$T/cg.out" "$BIN" "$1" "$2" "$BODY" >"$T/out" 2>"$T/log" \
    || { cat "$T/log" >&2; exit 1; }
  callgrind_annotate "$T/cg.out" | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}'
}
bytes=$(wc -c <"$BODY")
for m in $MODES; do
  a=$(count "$m" "$N1")
  b=$(count "$m" "$N2")
  python3 -c "import sys; a,b,n1,n2,s=map(int,sys.argv[1:]); p=(b-a)/(n2-n1); print(f'$m: {p:,.0f} instructions/pass, {p/s:.1f} instructions/byte')" "$a" "$b" "$N1" "$N2" "$bytes"
done
