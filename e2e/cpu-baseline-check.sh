#!/usr/bin/env bash
# The JSON reader and the list split on CPUs with and without AVX2: the core
# library's reader and list-stream tests (each input read by both readers
# and checked against serde_json) run under qemu-user as a Nehalem (x86-64
# without AVX2: the word-at-a-time reader is chosen at run time) and as a
# Haswell (AVX2: the wide reader), each asserting which reader it got
# (REGROUP_EXPECT_WIDE). The release binary is also run as a Nehalem. Needs
# qemu-user (installed here with apt when missing and run as root; else the
# check says so and skips).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v qemu-x86_64 >/dev/null; then
  if [ "$(id -u)" = 0 ] && { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq --no-install-recommends qemu-user; } >/dev/null 2>&1; then
    echo "cpu-baseline-check: installed qemu-user"
  else
    echo "cpu-baseline-check: skipped: qemu-user is not installed and could not be"
    exit 0
  fi
fi
tests=$(cargo test -q -p regroup-core --lib --no-run --message-format=json 2>/dev/null |
  python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "regroup_core":
        print(m["executable"])' | tail -1)
[ -x "$tests" ] || { echo "cpu-baseline-check: the core test binary was not built" >&2; exit 1; }
for cpu in Nehalem:0 Haswell:1; do
  echo "cpu-baseline-check: core reader tests as a ${cpu%%:*}"
  REGROUP_EXPECT_WIDE=${cpu##*:} qemu-x86_64 -cpu "${cpu%%:*}" "$tests" -q \
    rewrite::raw:: rewrite::list_stream:: the_reader_chosen
done
bin=${CARGO_TARGET_DIR:-target}/debug/regroup
cargo build -q -p regroup
qemu-x86_64 -cpu Nehalem "$bin" --version
echo "cpu-baseline-check: passed"
