#!/usr/bin/env bash
# bench/json_walk.sh on the bodies and rules that judge the needle search
# and the walk together: the captured 921-byte Foo and 2,049-byte
# Deployment, each renamed (`samplecontroller` names, in the body) and
# with a rule whose names the body lacks, one with a rare first byte
# (`wardle.example.com`: `w`) and one with a common one
# (`stable.example.com`: `s`). With no mapped name only the pre-check runs.
#
#   bench/json_walk_cases.sh [CASE...]     # default: every case
#
# Prints one line per case: instructions per call of `Engine::body`
# (callgrind, the difference of two runs, see json_walk.sh).
#
# JSON_WALK_NAMES=1 bench/json_walk_cases.sh: with `names:` and its default
# kinds, as regroup runs unless its configuration turns `names:` off (it
# is derived from the rules by default), so the pre-check also looks for
# those kinds. Without it, the rules alone: the figures docs/performance.md
# reports for sessions before 36 are of that configuration.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FOO=$ROOT/testdata/kube-1.24/renamed/027-get-foo-json/response.body
DEPLOY=$ROOT/testdata/kube-1.24/renamed/041-get-deployment-json/response.body
SC=samplecontroller.k8s.io=samplecontroller.team1.example.com
WARDLE=wardle.example.com=wardle.team1.example.com
STABLE=stable.example.com=stable.team1.example.com
run() { # case rule body group kind
  local out
  out=$(JSON_WALK_RULE=$2 "$ROOT/bench/json_walk.sh" 200 2200 "$3" "$4" "$5" | tail -1)
  printf '%-14s %s\n' "$1" "$out"
}
for c in ${*:-foo-rename foo-wardle foo-stable deploy-rename deploy-wardle deploy-stable}; do
  case $c in
    foo-rename) run $c $SC "$FOO" samplecontroller.k8s.io Foo ;;
    foo-wardle) run $c $WARDLE "$FOO" samplecontroller.team1.example.com Foo ;;
    foo-stable) run $c $STABLE "$FOO" samplecontroller.team1.example.com Foo ;;
    deploy-rename) run $c $SC "$DEPLOY" apps Deployment ;;
    deploy-wardle) run $c $WARDLE "$DEPLOY" apps Deployment ;;
    deploy-stable) run $c $STABLE "$DEPLOY" apps Deployment ;;
    *) echo "unknown case $c" >&2; exit 2 ;;
  esac
done
