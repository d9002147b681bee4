#!/usr/bin/env bash
# Checks of scripts/bench-peers.sh's DEADLINE on a tiny run of the release
# binary that `cargo test --release` built (run by .ci/run after it).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${DEPENGINE:-${CARGO_TARGET_DIR:-target}/release/depengine}
[[ -x $BIN ]] || { echo "no depengine binary at $BIN: build it first (cargo build --release)" >&2; exit 2; }
PEERS=$(mktemp -d)
trap 'rm -rf "$PEERS"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
tiny() {
  env NO_BUILD=1 PEERS="$PEERS" DEPENGINE="$BIN" WORKERS=1 WORKLOADS=indep \
    BODIES="0 1" OPS=200 RUNS=1 SYSTEMS="depengine ideal" "$@" scripts/bench-peers.sh
}

# Past the deadline at the first line: every line skipped, no trace
# written, and the tables still printed.
out=$(DEADLINE=0 tiny 2>&1)
[[ $(grep -c '^workload=.* skipped-deadline' <<<"$out") == 3 ]] ||
  fail "DEADLINE=0 should skip the 3 lines (2 depengine, 1 ideal):"$'\n'"$out"
grep -q '^workload=.*ns_per_op=' <<<"$out" && fail "DEADLINE=0 ran a line:"$'\n'"$out"
grep -q '^| indep | 0 | 1 | skip |' <<<"$out" || fail "no skip cell in the table:"$'\n'"$out"
[[ -z $(ls -A "$PEERS/traces") ]] || fail "DEADLINE=0 wrote a trace"

# A deadline far off changes nothing: the lines run.
out=$(DEADLINE=3600 tiny 2>&1)
[[ $(grep -c '^workload=indep body_us=[01] system=depengine .*ns_per_op=' <<<"$out") == 2 ]] ||
  fail "DEADLINE=3600 should run both depengine lines:"$'\n'"$out"
grep -q 'skipped-deadline' <<<"$out" && fail "DEADLINE=3600 skipped a line:"$'\n'"$out"

# A deadline that is not a whole number of seconds is refused.
if out=$(DEADLINE=1.5 tiny 2>&1); then fail "DEADLINE=1.5 was accepted"; fi
grep -q "DEADLINE must be a whole number" <<<"$out" || fail "no clear error for DEADLINE=1.5: $out"
echo "bench-peers.sh DEADLINE: 3 checks passed"
