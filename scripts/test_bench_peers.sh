#!/usr/bin/env bash
# Checks of scripts/bench-peers.sh's DEADLINE on a tiny run of the release
# binary that `cargo test --release` built, of scripts/profile-push.sh
# through a stand-in for perf, of scripts/bench-many-cores.sh through a
# stand-in bundle, and of scripts/ab.sh on tiny runs (run by .ci/run after
# the tests).
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
# The results say where and from what they ran, and the table repeats it.
rev=$(git rev-parse --short HEAD 2>/dev/null) || rev=unknown
grep -q "^# machine: .*, L3 .*; $(uname -s) .*; tree at $rev.*; DEPENGINE=$BIN\$" <<<"$out" ||
  fail "no machine line naming the tree ($rev) and the binary in the results:"$'\n'"$out"
grep -q "^Machine: .*; tree at $rev" <<<"$out" || fail "the table does not name the machine:"$'\n'"$out"

# A deadline that is not a whole number of seconds is refused.
if out=$(DEADLINE=1.5 tiny 2>&1); then fail "DEADLINE=1.5 was accepted"; fi
grep -q "DEADLINE must be a whole number" <<<"$out" || fail "no clear error for DEADLINE=1.5: $out"
echo "bench-peers.sh DEADLINE and machine line: 4 checks passed"

# A line cut by TIMEOUT and a line whose system fails are told apart, in
# the results and in the table: a stand-in binary that outlives the limit,
# and the engine given a flag it refuses.
SLOW=$PEERS/slow-depengine
printf '#!/usr/bin/env bash\nexec sleep 30\n' >"$SLOW"
chmod +x "$SLOW"
out=$(tiny TIMEOUT=1 BODIES=0 SYSTEMS="depengine-alt depengine-tune-bad" DEPENGINE_ALT="$SLOW" \
  TUNE_bad=--no-such-flag 2>&1)
grep -q '^workload=indep body_us=0 system=depengine-alt workers=1 timeout limit_s=1$' <<<"$out" ||
  fail "a line past TIMEOUT should be written as a timeout:"$'\n'"$out"
grep -q '^workload=indep body_us=0 system=depengine-tune-bad workers=1 failed rc=2$' <<<"$out" ||
  fail "a failing line should be written with its status:"$'\n'"$out"
grep -q '^| indep | 0 | 1 | timeout | fail |' <<<"$out" || fail "the table should say timeout and fail:"$'\n'"$out"
echo "bench-peers.sh TIMEOUT: 1 check passed"

# The lean control's two systems, through a stand-in driver that prints
# the flags it was given: lean-like adds the engine-like layout.
mkdir -p "$PEERS/lean-target/release"
printf '#!/usr/bin/env bash\necho "workload=indep body_us=0 system=lean workers=1 ns_per_op=1.0 min=1.0 max=1.0 args=$*"\n' \
  >"$PEERS/lean-target/release/depengine-lean-control"
chmod +x "$PEERS/lean-target/release/depengine-lean-control"
out=$(tiny BODIES=0 SYSTEMS="lean lean-like" 2>&1)
grep -q '^workload=indep body_us=0 system=lean workers=1 .*args=--workload indep .*--workers 1 --runs 1$' <<<"$out" ||
  fail "lean should run the driver with the row's flags:"$'\n'"$out"
grep -q '^workload=indep body_us=0 system=lean-like workers=1 .*--runs 1 --recycle 8192 --recycle-order batched --op-stride 192 --var-stride 192$' <<<"$out" ||
  fail "lean-like should add the engine-like layout:"$'\n'"$out"
echo "bench-peers.sh lean: 1 check passed"

# scripts/profile-push.sh, through a stand-in for perf that records
# nothing and reports canned samples: the script's own logic (which
# symbols it annotates, what it writes, how it fails) is what is checked.
FAKE=$PEERS/fake-perf
cat >"$FAKE" <<'PERF'
#!/usr/bin/env bash
cmd=$1; shift
case $cmd in
  record)
    while [[ $1 != -- ]]; do [[ $1 == -o ]] && out=$2; shift; done
    shift; : >"$out"; exec "$@" ;;
  report)
    if [[ " $* " == *" --comm "* && " $* " == *" -g none "* ]]; then
      printf '    40.00%%  [.] depengine::engine::core::Core::push_to\n'
      printf '    20.00%%  [.] __vdso_clock_gettime\n'
      printf '     9.00%%  [.] depengine::engine::executor::pool::PoolShared::enqueue\n'
    else
      printf '    40.00%%  depengine  [.] depengine::engine::core::Core::push_to\n'
    fi ;;
  annotate)
    printf '    0.50 :   1000: mov    %%rax,%%rbx\n   12.00 :   1004: lock xadd %%rax,(%%rcx)\n' ;;
esac
PERF
chmod +x "$FAKE"
prof=$PEERS/profile
out=$(PERF=$FAKE DEPENGINE=$BIN scripts/profile-push.sh "$prof" --workload indep --workers 1 --ops 200 --runs 1 2>&1) ||
  fail "profile-push.sh failed:"$'\n'"$out"
grep -q '^workload=indep .*ns_per_op=' "$prof/line.txt" || fail "no bench line in line.txt: $(cat "$prof/line.txt")"
[[ -f $prof/annotate-1.txt && -f $prof/annotate-2.txt && ! -e $prof/annotate-3.txt ]] ||
  fail "profile-push.sh should annotate the engine's two symbols only: $(ls "$prof")"
grep -q 'Core::push_to' "$prof/annotate-1.txt" && grep -q 'PoolShared::enqueue' "$prof/annotate-2.txt" ||
  fail "annotations in the wrong order"
[[ $(sed -n 3p "$prof/annotate-1.txt") == *'12.00 :   1004: lock xadd'* ]] ||
  fail "the hot instruction should head annotate-1.txt:"$'\n'"$(head -4 "$prof/annotate-1.txt")"
# A perf that cannot record: said, and no failure for the batch around it.
out=$(PERF=false DEPENGINE=$BIN scripts/profile-push.sh "$PEERS/noperf" --workload indep --ops 200 2>&1) ||
  fail "a perf that cannot record should not fail the script: $out"
grep -q 'perf record failed' <<<"$out" || fail "no word of the failed record: $out"
# A binary that is not there: refused.
if out=$(PERF=$FAKE DEPENGINE=$PEERS/none scripts/profile-push.sh "$PEERS/x" 2>&1); then
  fail "a missing DEPENGINE was accepted"
fi
grep -q 'is not an executable' <<<"$out" || fail "no clear error for a missing DEPENGINE: $out"
echo "profile-push.sh: 3 checks passed"

# scripts/bench-many-cores.sh, through a stand-in bundle whose run.sh
# records the settings it was given as a results file (and fails when
# told to): which runs a plan makes, with what, and where their results
# go, is what is checked.
FB=$PEERS/bundle
mkdir -p "$FB/peers"
cat >"$FB/run.sh" <<'RUN'
#!/usr/bin/env bash
B=$(cd "$(dirname "$0")" && pwd)
n=$(ls "$B"/peers/results-*.txt 2>/dev/null | wc -l)
echo "WORKERS=$WORKERS SYSTEMS=$SYSTEMS TUNE_old=${TUNE_old:-} TUNE_full=${TUNE_full:-} OPS=$OPS" >"$B/peers/results-$n.txt"
[[ -z ${FAIL_ON:-} || $SYSTEMS != *"$FAIL_ON"* ]]
RUN
chmod +x "$FB/run.sh"
mc=$PEERS/many
out=$(BUNDLE=$FB OUT=$mc scripts/bench-many-cores.sh second 2>&1) || fail "bench-many-cores.sh second failed:"$'\n'"$out"
[[ $(grep -c '^== ' <<<"$out") == 2 && $(grep '^== ' <<<"$out" | head -1) == '== ring '* ]] ||
  fail "second should run ring, then wake:"$'\n'"$out"
grep -q 'WORKERS=16 8 4 SYSTEMS=depengine-tune-ct depengine-tune-old TUNE_old=--pusher-queues-up-to 2 --asymmetric-fence off --cpu-time TUNE_full= OPS=200000' \
  "$mc"/ring-results-*.txt || fail "ring ran with other settings: $(cat "$mc"/ring-results-*.txt)"
grep -q 'WORKERS=16 SYSTEMS=depengine-tune-ct depengine-tune-full TUNE_old= TUNE_full=--asymmetric-fence off --cpu-time OPS=200000' \
  "$mc"/fence-results-*.txt || fail "ring's fence call ran with other settings: $(cat "$mc"/fence-results-*.txt)"
grep -q 'WORKERS=16 SYSTEMS=.*depengine-tune-s16' "$mc"/wake-results-*.txt ||
  fail "wake ran with other settings: $(cat "$mc"/wake-results-*.txt)"
grep -q '^plans: ring wake$' "$mc/machine.txt" || fail "machine.txt without the plans: $(cat "$mc/machine.txt")"
grep -q "^cpu0's siblings: " "$mc/machine.txt" || fail "machine.txt without the CPUs' siblings: $(cat "$mc/machine.txt")"
# alt: the two builds of the bundle side by side; refused before
# anything runs while the bundle has no second build.
if out=$(BUNDLE=$FB OUT=$mc-noalt scripts/bench-many-cores.sh alt 2>&1); then
  fail "alt ran on a bundle without depengine-alt:"$'\n'"$out"
fi
grep -q 'pack it with ALT_REV=' <<<"$out" && [[ ! -e $mc-noalt ]] ||
  fail "no clear refusal of alt without depengine-alt: $out"
printf '#!/bin/sh\n' >"$FB/depengine-alt"
# The bundle's engine, as pairs calls it: each call's arguments, a line.
printf '#!/usr/bin/env bash\necho "$*" >>"$(dirname "$0")/depengine-calls.txt"\n' >"$FB/depengine"
chmod +x "$FB/depengine-alt" "$FB/depengine"
out=$(BUNDLE=$FB OUT=$mc-alt scripts/bench-many-cores.sh alt 2>&1) || fail "alt failed:"$'\n'"$out"
grep -q '^WORKERS=16 8 SYSTEMS=depengine depengine-alt TUNE_old= TUNE_full= OPS=200000$' "$mc-alt"/alt-results-*.txt ||
  fail "alt ran with other settings: $(cat "$mc-alt"/alt-results-*.txt)"
out=$(BUNDLE=$FB OUT=$mc-first scripts/bench-many-cores.sh first 2>&1) || fail "first failed:"$'\n'"$out"
[[ $(grep '^== ' <<<"$out" | sed 's/ (.*//' | tr '\n' ' ') == '== pairs == granularity == smallgraphs ' ]] ||
  fail "first should run pairs, granularity, then smallgraphs:"$'\n'"$out"
# pairs: 16 and 8 workers, four rows, six settings each and four
# pushing threads on the two indep rows only.
calls=$FB/depengine-calls.txt
[[ $(wc -l <"$calls") == 52 && $(grep -c -- '--pushers 4' "$calls") == 4 &&
  $(grep -c -- '--batch 256$' "$calls") == 8 ]] &&
  grep -q -- '^bench --workload indep --vars 0 --body-us 1 --ops 200000 --workers 16 --runs 16 --versus --pusher-queues-up-to 2 --asymmetric-fence off$' "$calls" &&
  grep -q -- '^bench --workload random --body-us 1 --ops 200000 --workers 8 --runs 16 --versus --deal-pushes$' "$calls" &&
  grep -q -- '^bench --workload indep --vars 0 --body-us 0 --ops 200000 --workers 16 --runs 16 --versus --deal-pushes --max-searching 16$' "$calls" &&
  ! grep -q -- 'random.*--pushers' "$calls" ||
  fail "pairs made other calls: $(cat "$calls")"
rm "$FB/depengine-alt" "$FB/depengine" "$calls"
# pairs with the real engine, DRY: every paired line comes out.
ln -s "$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")" "$FB/depengine"
out=$(DRY=1 BUNDLE=$FB OUT=$mc-pairs scripts/bench-many-cores.sh pairs 2>&1) || fail "DRY=1 pairs failed:"$'\n'"$out"
[[ $(grep -c '^paired .* rounds=2 .*sign_p=' "$mc-pairs/pairs.log") == 26 ]] ||
  fail "DRY=1 pairs should print 26 paired lines: $(cat "$mc-pairs/pairs.log")"
rm "$FB/depengine"
if out=$(BUNDLE=$FB OUT=$mc-nodep scripts/bench-many-cores.sh pairs 2>&1); then
  fail "pairs ran on a bundle without depengine:"$'\n'"$out"
fi
grep -q 'plan pairs needs depengine' <<<"$out" || fail "no clear refusal of pairs without depengine: $out"
# lean: refused while the bundle has no lean control, then its settings.
if out=$(BUNDLE=$FB OUT=$mc-nolean scripts/bench-many-cores.sh lean 2>&1); then
  fail "lean ran on a bundle without the lean control:"$'\n'"$out"
fi
grep -q 'plan lean needs the lean control' <<<"$out" && [[ ! -e $mc-nolean ]] ||
  fail "no clear refusal of lean without the lean control: $out"
mkdir -p "$FB/peers/lean-target/release"
printf '#!/bin/sh\n' >"$FB/peers/lean-target/release/depengine-lean-control"
chmod +x "$FB/peers/lean-target/release/depengine-lean-control"
out=$(BUNDLE=$FB OUT=$mc-lean scripts/bench-many-cores.sh lean 2>&1) || fail "lean failed:"$'\n'"$out"
grep -q '^WORKERS=16 8 4 2 SYSTEMS=depengine lean lean-like rayon TUNE_old= TUNE_full= OPS=200000$' \
  "$mc-lean"/lean-results-*.txt || fail "lean ran with other settings: $(cat "$mc-lean"/lean-results-*.txt)"
rm -r "$FB/peers/lean-target"
# DRY: 2 workers and small sizes.
out=$(DRY=1 BUNDLE=$FB OUT=$mc-dry scripts/bench-many-cores.sh peers 2>&1) || fail "DRY=1 peers failed:"$'\n'"$out"
grep -q '^WORKERS=2 .*OPS=2000$' "$mc-dry"/peers-results-*.txt || fail "DRY=1 did not shrink: $(cat "$mc-dry"/peers-results-*.txt)"
# Small graphs: small sizes of their own, the replay's three settings.
out=$(BUNDLE=$FB OUT=$mc-small scripts/bench-many-cores.sh smallgraphs 2>&1) || fail "smallgraphs failed:"$'\n'"$out"
grep -q '^WORKERS=16 8 SYSTEMS=depengine-tune-rall depengine-replay depengine-tune-rwarm depengine-tune-rone tbb-flow rayon TUNE_old= TUNE_full= OPS=2000$' \
  "$mc-small"/smallgraphs-results-*.txt || fail "smallgraphs ran with other settings: $(cat "$mc-small"/smallgraphs-results-*.txt)"
# A plan that fails: said, the next one still runs, the status is 1.
if out=$(FAIL_ON=tune-ks BUNDLE=$FB OUT=$mc-fail scripts/bench-many-cores.sh wake ring 2>&1); then
  fail "a failing plan gave status 0:"$'\n'"$out"
fi
grep -q 'FAILED' <<<"$out" && grep -q '^failed: wake$' <<<"$out" && ls "$mc-fail"/ring-results-*.txt >/dev/null ||
  fail "after a failing wake, ring should still run and the failure be named:"$'\n'"$out"
# Refused before anything runs: an unknown plan, profiles without perf.
for args in "first nope" "profiles"; do
  # shellcheck disable=SC2086
  if out=$(BUNDLE=$FB OUT=$mc-refused scripts/bench-many-cores.sh $args 2>&1); then
    fail "'$args' was accepted"
  fi
  [[ ! -e $mc-refused ]] || fail "'$args' was refused only after it started: $(ls "$mc-refused")"
done
grep -q "pack it with PERF=1" <<<"$out" || fail "no clear error for profiles without perf: $out"
echo "bench-many-cores.sh: 10 checks passed"

# scripts/ab.sh: every row with every variant each round, the order
# reversed in even rounds, a failed process counted and left out of the
# ratios, the ratio paired by round against the first variant.
printf '# a comment\nt|--workload indep --ops 200 --workers 1 --runs 1\n\n' >"$PEERS/ab-rows"
out=$(scripts/ab.sh 2 "$PEERS/ab-rows" "a|$BIN|" "b|$BIN|--max-lead 64" "c|/bin/false|" 2>&1) ||
  fail "ab.sh failed:"$'\n'"$out"
[[ $(grep -c '^t [abc] ' <<<"$out") == 6 ]] || fail "ab.sh should run 6 lines (2 rounds x 3 variants):"$'\n'"$out"
[[ $(grep '^t [abc] ' <<<"$out" | cut -d' ' -f2 | tr -d '\n') == abccba ]] ||
  fail "ab.sh should reverse the variants in the second round:"$'\n'"$out"
grep -q '^t a [0-9.]*$' <<<"$out" && grep -q '^t c failed$' <<<"$out" || fail "ab.sh's lines:"$'\n'"$out"
grep -q '^t | a [0-9.]* ([0-9.]*-[0-9.]*) r=1.000 | b [0-9.]* ([0-9.]*-[0-9.]*) r=[0-9.]* won=[0-2]/2 p=[0-9.e+-]* | c all 2 failed$' <<<"$out" ||
  fail "ab.sh's summary:"$'\n'"$out"
# The sign test, on stand-ins whose lines are fixed: one variant twice
# as fast in every one of 5 rounds wins 5 of 5, p = 2 / 2^5.
for v in slow:2.0 fast:1.0; do
  printf '#!/bin/sh\necho "workload=indep ns_per_op=%s"\n' "${v#*:}" >"$PEERS/ab-${v%%:*}"
  chmod +x "$PEERS/ab-${v%%:*}"
done
out=$(scripts/ab.sh 5 "$PEERS/ab-rows" "slow|$PEERS/ab-slow|" "fast|$PEERS/ab-fast|" 2>&1) ||
  fail "ab.sh on stand-ins failed:"$'\n'"$out"
grep -q '^t | slow 2.0 (2.0-2.0) r=1.000 | fast 1.0 (1.0-1.0) r=0.500 won=5/5 p=0.0625$' <<<"$out" ||
  fail "ab.sh's sign test:"$'\n'"$out"
# Refused before anything runs: a variant that is not a binary.
if out=$(scripts/ab.sh 1 "$PEERS/ab-rows" "a|$PEERS/none|" 2>&1); then
  fail "ab.sh ran a variant that is not a binary"
fi
grep -q 'is not an executable' <<<"$out" || fail "no clear refusal of a missing binary: $out"
echo "ab.sh: 3 checks passed"

# scripts/ablate.sh: refused before anything is built, with no worktree
# left behind; the bundled patches still apply to this tree (each names
# lines of the engine: one that no longer applies has rotted).
worktrees=$(git worktree list | wc -l)
if out=$(scripts/ablate.sh 1 "$PEERS/none" 2>&1); then fail "ablate.sh ran without a rows file"; fi
grep -q 'no rows file' <<<"$out" || fail "no clear refusal of a missing rows file: $out"
if out=$(scripts/ablate.sh 0 "$PEERS/ab-rows" 2>&1); then fail "ablate.sh ran 0 rounds"; fi
grep -q 'ROUNDS must be a whole number' <<<"$out" || fail "no clear refusal of 0 rounds: $out"
printf 'diff --git a/none.rs b/none.rs\n--- a/none.rs\n+++ b/none.rs\n@@ -1 +1 @@\n-a\n+b\n' >"$PEERS/bad.patch"
if out=$(scripts/ablate.sh 1 "$PEERS/ab-rows" "$PEERS/bad.patch" 2>&1); then
  fail "ablate.sh ran with a patch that does not apply"
fi
grep -q 'bad.patch does not apply to HEAD' <<<"$out" || fail "no clear refusal of a patch that does not apply: $out"
[[ $(git worktree list | wc -l) == "$worktrees" ]] || fail "ablate.sh left a worktree behind: $(git worktree list)"
for p in scripts/ablation/*.patch; do
  git apply --check "$p" || fail "$p no longer applies: rewrite it against the engine as it is now"
done
echo "ablate.sh: 4 checks passed"
