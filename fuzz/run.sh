#!/usr/bin/env bash
# Runs every cargo-fuzz target in turn, one process each (one core), and
# prints one line per target: executions, seconds, executions per second.
#
#   fuzz/run.sh                   # CI's short run: 30 s per target
#   fuzz/run.sh 300 10000000      # up to 300 s or 10 M executions per target
#   FUZZ_SANITIZER=none FUZZ_MAX_LEN=4096 fuzz/run.sh 3000 10000000
#                                 # the long run: no AddressSanitizer (about
#                                 # 20x the executions; Rust is memory-safe
#                                 # outside `unsafe`, and panics, timeouts
#                                 # and RSS are still caught), inputs cut
#                                 # to 4 KiB
#   FUZZ_TARGETS="json watch" fuzz/run.sh 3000   # only these targets
#
# Needs a nightly toolchain and cargo-fuzz; without them it says so and
# exits 0 (the stable test proxy/src/fuzz_harness/corpus.rs replays the corpora anyway).
# New inputs go to a scratch corpus (FUZZ_WORK, default a temp dir), never
# into fuzz/corpus; a crash stops the run with the input under
# fuzz/artifacts/<target>/ (keep it in fuzz/regressions/<target>/, see
# docs/fuzzing.md). -rss_limit_mb and -malloc_limit_mb make unbounded
# allocation a failure too.
set -euo pipefail
cd "$(dirname "$0")"
SECONDS_PER_TARGET=${1:-30}
RUNS=${2:-10000000}
WORK=${FUZZ_WORK:-$(mktemp -d)}
SANITIZER=${FUZZ_SANITIZER:-address}
MAX_LEN=()
if [ -n "${FUZZ_MAX_LEN:-}" ]; then MAX_LEN=(-max_len="$FUZZ_MAX_LEN"); fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz/run.sh: no nightly toolchain with cargo-fuzz here; skipped (proxy/src/fuzz_harness/corpus.rs replays the corpora on stable)"
  exit 0
fi
cargo +nightly fuzz build -s "$SANITIZER"
TARGETS=${FUZZ_TARGETS:-$(cargo +nightly fuzz list)}
printf '%-14s %12s %8s %10s %12s\n' target executions seconds exec/s peak_rss_mb
for t in $TARGETS; do
  mkdir -p "$WORK/$t"
  log="$WORK/$t.log"
  cargo +nightly fuzz run -s "$SANITIZER" "$t" "$WORK/$t" "corpus/$t" -- \
    "${MAX_LEN[@]}" -runs="$RUNS" -max_total_time="$SECONDS_PER_TARGET" \
    -rss_limit_mb=1024 -malloc_limit_mb=512 -timeout=10 -print_final_stats=1 >"$log" 2>&1 || {
      echo "fuzz target $t FAILED; its log's end:" >&2
      tail -40 "$log" >&2
      exit 1
    }
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  printf '%-14s %12s %8s %10s %12s\n' "$t" "$runs" "${secs:-?}" "$rate" "$rss"
done
