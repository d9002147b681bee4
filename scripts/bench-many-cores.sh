#!/usr/bin/env bash
# The prepared runs for a machine with many cores (BENCHMARKS.md, "Every
# peer at 2, 4, 8 and 16 workers on 16 cores"), by name, on a bundle of
# scripts/bench-peers-bundle.sh: what a short lease of such a machine is
# spent on, written down once so that it runs as planned.
#
# usage: scripts/bench-many-cores.sh PLAN...   (from the repository root)
#   PLAN, run in the order given:
#     alt          the bundle's two builds side by side, depengine against
#                  depengine-alt, 4 alternating rounds at 16 and 8 workers:
#                  indep, random, wavefront with 0, 1 and 10 µs bodies
#                  (~115 s; needs a bundle packed with ALT_REV or
#                  DEPENGINE_ALT, e.g. a branch with a change whose
#                  effect only many cores show)
#     ring         the defaults in pools of 4-16 workers (the pushing
#                  thread's ring, and from 8 workers the sleep fence
#                  split) against the defaults before them (the injector,
#                  the full fence: --pusher-queues-up-to 2
#                  --asymmetric-fence off), with --cpu-time, then the
#                  defaults against the ring with the full fence
#                  (--asymmetric-fence off) at 16 workers (~80 s)
#     wake         who pays the wake-ups at 16 workers: the defaults, the
#                  last searcher waking a successor (8 searchers and 1),
#                  every worker searching (~40 s)
#     granularity  the 1-10 µs rows at 8 and 16 workers: the default
#                  engine, a replay, a stream, 4 pushing threads (~60 s)
#     profiles     the pushing thread's profile at 16 workers with 1 µs
#                  bodies (scripts/profile-push.sh), with the defaults,
#                  with those before them, and with the pushes dealt and
#                  every worker searching (~18 s; needs a bundle packed
#                  with PERF=1)
#     peers        priority and roundtrip (a tenth of their full size),
#                  randsum and chain against every peer at 2, 8 and 16
#                  workers, in that order (300 s, its deadline)
#     smallgraphs  graphs of 100 to 2,500 empty nodes at 8 and 16
#                  workers: the replay with each helper setting
#                  (--replay-helpers all, adaptive, one, and adaptive
#                  after 300 warm-up runs) against oneTBB and rayon, 41
#                  runs a line, two rounds (~15 s)
#     pairs        runtime settings against the defaults in one process
#                  (depengine bench --versus, 16 alternating rounds, a
#                  sign test each) at 16 and 8 workers: the defaults
#                  before these (--pusher-queues-up-to 2
#                  --asymmetric-fence off), every worker searching
#                  (--max-searching 16), the pushes dealt to a ring per
#                  worker (--deal-pushes), both, a stream, batches of
#                  256 (--batch 256: kept to the lead since 4d3612d),
#                  and 4 pushing threads on indep; empty and 1 µs
#                  indep, 1 µs wavefront and random (~260 s)
#     lean         the default engine against the lean control (peers/
#                  lean: the engine's protocol with the lightest op) and
#                  its engine-like layout (lean-like) and rayon, at 16,
#                  8, 4 and 2 workers: fan, wavefront, randsum and
#                  random with 0, 1 and 10 µs bodies (240 s, its
#                  deadline; needs a bundle with the lean control)
#     first        pairs, granularity, then smallgraphs: one call of
#                  about 340 s
#     second       ring, then wake: one call of about 120 s
#     third        profiles, then peers: one call of about 320 s
# (The times are those of a 16-core machine on 2026-11-30, a bundle of
# 067fdad; a call also spends about 30 s starting.)
# Environment:
#   BUNDLE   the bundle (default .dev/bundle)
#   OUT      where everything lands (default: $OUT when set, as on a lent
#            machine, else bench-many-cores-<UTC time>): machine.txt (the
#            machine, its load, the bundle's origin), PLAN.log (each
#            plan's output, its tables included), the results files
#            (results-*.txt, the input of scripts/bench-peers-table.py),
#            profile-*/ (the reports, not the samples)
#   DRY=1    the same plans at 2 workers with small sizes: a check of the
#            wiring on a small machine, not a measurement
# A plan that fails is reported and the next one runs; the exit status is
# then 1. Plans are checked before the first runs.
set -euo pipefail
cd "$(dirname "$0")/.."
(($# > 0)) || { sed -n '2,60p' "$0"; exit 2; }

BUNDLE=${BUNDLE:-.dev/bundle}
OUT=${OUT:-bench-many-cores-$(date -u +%Y%m%dT%H%M%SZ)}
DRY=${DRY:-0}

plans=()
for p in "$@"; do
  case $p in
    first) plans+=(pairs granularity smallgraphs) ;;
    second) plans+=(ring wake) ;;
    third) plans+=(profiles peers) ;;
    alt | pairs | ring | wake | granularity | profiles | peers | smallgraphs | lean) plans+=("$p") ;;
    *) echo "unknown plan '$p': one of alt, pairs, ring, wake, granularity, profiles, peers, smallgraphs, lean, first, second, third" >&2; exit 2 ;;
  esac
done
[[ -x $BUNDLE/run.sh ]] ||
  { echo "no bundle at $BUNDLE: pack one with scripts/bench-peers-bundle.sh $BUNDLE" >&2; exit 2; }
for p in "${plans[@]}"; do
  if [[ $p == profiles && ! ( -x $BUNDLE/perf.sh && -x $BUNDLE/depengine-sym ) ]]; then
    echo "plan profiles needs perf.sh and depengine-sym in $BUNDLE: pack it with PERF=1" >&2
    exit 2
  fi
  if [[ $p == pairs && ! -x $BUNDLE/depengine ]]; then
    echo "plan pairs needs depengine in $BUNDLE: pack the bundle again with scripts/bench-peers-bundle.sh" >&2
    exit 2
  fi
  if [[ $p == lean && ! -x $BUNDLE/peers/lean-target/release/depengine-lean-control ]]; then
    echo "plan lean needs the lean control in $BUNDLE: build it (scripts/bench-peers.sh with SYSTEMS=lean) and pack the bundle again" >&2
    exit 2
  fi
  if [[ $p == alt && ! -x $BUNDLE/depengine-alt ]]; then
    echo "plan alt needs depengine-alt in $BUNDLE: pack it with ALT_REV=<commit> (or DEPENGINE_ALT=<binary>)" >&2
    exit 2
  fi
done
mkdir -p "$OUT"

# The settings every run shares (200,000 ops, the wavefront of 447 × 447,
# three timed runs, one round); DRY shrinks them and the worker counts.
if [[ $DRY == 1 ]]; then
  export RUNS=1 ROUNDS=1 OPS=2000 WAVE=40 TIMEOUT=20
  workers() { echo 2; }
  prof_ops=2000
  pair_rounds=2
else
  export RUNS=3 ROUNDS=1 OPS=200000 WAVE=447 TIMEOUT=25
  workers() { echo "$@"; }
  prof_ops=200000
  pair_rounds=16
fi
export NO_INSTALL=1 MXNET_ENGINES=ThreadedEnginePerDevice
# The defaults until 2026-11-30 (the injector past 2 workers, the full
# sleep fence), which the plans compare the present ones with.
BEFORE="--pusher-queues-up-to 2 --asymmetric-fence off"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cpus: $(nproc)"
  grep -m1 'model name' /proc/cpuinfo 2>/dev/null || true
  # Whether the CPUs are cores or hyperthreads of fewer cores: a worker
  # that spins beside a sibling slows it, which the 16-worker lines
  # cannot tell apart from the engine's own costs.
  lscpu 2>/dev/null | grep -E '^(Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|NUMA node\(s\)|L2 cache|L3 cache):' || true
  echo "cpu0's siblings: $(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list 2>/dev/null || echo unknown)"
  echo "load: $(uptime | sed 's/.*load/load/')"
  echo "plans: ${plans[*]}$([[ $DRY == 1 ]] && echo ' (DRY=1: 2 workers, small sizes)')"
  echo "bundle: $(cat "$BUNDLE/BUILT_FROM" 2>/dev/null || echo 'origin not recorded')"
} >"$OUT/machine.txt"

# run_peers NAME VAR=VALUE...: bench-peers.sh through the bundle with
# those settings; its new results files are copied to OUT.
# (Plans run as `if` conditions, where `set -e` is off: each step's
# failure is passed on by hand.)
run_peers() {
  local name=$1 before after f rc=0
  shift
  before=$(ls "$BUNDLE"/peers/results-*.txt 2>/dev/null || true)
  env "$@" "$BUNDLE/run.sh" || rc=$?
  after=$(ls "$BUNDLE"/peers/results-*.txt 2>/dev/null || true)
  for f in $after; do
    grep -qxF "$f" <<<"$before" || cp "$f" "$OUT/$name-$(basename "$f")" || rc=1
  done
  return "$rc"
}

# profile W NAME [bench flags]: the pushing thread's profile, reports only.
profile() {
  local w=$1 name=$2
  shift 2
  PERF=$BUNDLE/perf.sh DEPENGINE=$BUNDLE/depengine-sym \
    scripts/profile-push.sh "$OUT/$name" --workload "$w" --vars 0 \
    --workers "$(workers 16)" --body-us 1 --ops "$prof_ops" --runs 3 "$@" || return
  rm -f "$OUT/$name/perf.data"
}

# The two builds of the bundle, alternating (bench-peers.sh runs every
# system of a row before the next round): depengine-alt's ratio to
# depengine is the A/B's result, at the worker counts where a line the
# threads share travels farthest.
plan_alt() {
  run_peers alt DEADLINE=120 WORKERS="$(workers 16 8)" BODIES="0 1 10" \
    WORKLOADS="indep random wavefront" ROUNDS=4 \
    SYSTEMS="depengine depengine-alt"
}

# Settings against the defaults in one process: the rounds alternate
# milliseconds apart, where the 1 µs rows at 16 workers swing by up to
# 40% from process to process, and each paired line carries its sign
# test. Each command prints both sides' lines and the paired line.
plan_pairs() {
  local w row v rc=0
  for w in $(workers 16 8); do
    for row in "indep --vars 0 --body-us 0" "indep --vars 0 --body-us 1" \
      "wavefront --n $WAVE --body-us 1" "random --body-us 1"; do
      for v in "$BEFORE" "--max-searching 16" "--deal-pushes" \
        "--deal-pushes --max-searching 16" "--stream" "--batch 256" "--pushers 4"; do
        [[ $v == --pushers* && $row != indep* ]] && continue
        # shellcheck disable=SC2086
        timeout "$((TIMEOUT * 4))" "$BUNDLE/depengine" bench --workload $row --ops "$OPS" \
          --workers "$w" --runs "$pair_rounds" --versus "$v" || { echo "failed (rc $?): $w $row $v"; rc=1; }
      done
    done
  done
  return "$rc"
}

plan_ring() {
  run_peers ring DEADLINE=200 WORKERS="$(workers 16 8 4)" BODIES="0 1 2 10" \
    WORKLOADS="indep wavefront random" \
    TUNE_ct="--cpu-time" TUNE_old="$BEFORE --cpu-time" \
    SYSTEMS="depengine-tune-ct depengine-tune-old" || return
  # The ring with the full fence beside the defaults (both split it at
  # 16 workers), at 16.
  run_peers fence DEADLINE=70 WORKERS="$(workers 16)" BODIES="0 1 2 10" \
    WORKLOADS="indep wavefront" \
    TUNE_ct="--cpu-time" TUNE_full="--asymmetric-fence off --cpu-time" \
    SYSTEMS="depengine-tune-ct depengine-tune-full"
}

plan_wake() {
  run_peers wake DEADLINE=180 WORKERS="$(workers 16)" BODIES="0 1 2 10" \
    WORKLOADS="indep wavefront random" \
    TUNE_ct="--cpu-time" TUNE_ks="--keep-one-searching --cpu-time" \
    TUNE_k1="--keep-one-searching --max-searching 1 --cpu-time" \
    TUNE_s16="--max-searching 16 --cpu-time" \
    SYSTEMS="depengine-tune-ct depengine-tune-ks depengine-tune-k1 depengine-tune-s16"
}

plan_granularity() {
  run_peers granularity DEADLINE=200 WORKERS="$(workers 16 8)" BODIES="1 2 5 10" \
    WORKLOADS="indep wavefront random" TUNE_ct="--cpu-time" \
    SYSTEMS="depengine-tune-ct depengine-replay depengine-stream depengine-pushers"
}

# Small graphs, where a run is tens of µs and a helper started may cost
# more than it brings: the replay's three helper settings (a bundle of
# e39b515 or later) beside the peers handed the same graph, and the
# adaptive one after 300 runs (`rwarm`), past the 257 after which a
# 16-worker pool tries one helper on runs of up to 3 ms.
# Whether what the default engine spends beyond the lean control at 2
# workers on 2 cores (lines of per-op and per-var state crossing cores:
# BENCHMARKS.md, "The lean control") is what it spends at 16.
plan_lean() {
  run_peers lean DEADLINE=240 WORKERS="$(workers 16 8 4 2)" BODIES="0 1 10" \
    WORKLOADS="fan wavefront randsum random" \
    SYSTEMS="depengine lean lean-like rayon"
}

plan_smallgraphs() {
  run_peers smallgraphs DEADLINE=120 WORKERS="$(workers 16 8)" BODIES=0 \
    WORKLOADS="wavefront random fan" WAVE="10 30 50" OPS=2000 FAN_ROUNDS=20 \
    RUNS=41 ROUNDS=2 \
    TUNE_rall="--replay --replay-helpers all" TUNE_rone="--replay --replay-helpers one" \
    TUNE_rwarm="--replay --warm-up 300" \
    SYSTEMS="depengine-tune-rall depengine-replay depengine-tune-rwarm depengine-tune-rone tbb-flow rayon"
}

plan_profiles() {
  local w
  for w in indep-novars indep random; do profile "$w" "profile-$w" || return; done
  for w in indep random; do
    # shellcheck disable=SC2086
    profile "$w" "profile-$w-before" $BEFORE || return
  done
  # The pushes dealt to a ring per worker, every worker searching.
  profile indep profile-indep-deal --deal-pushes --max-searching "$(workers 16)"
}

# The rows of the goal's table not yet measured on 16 cores first: on
# 2026-11-30 `chain` with 10 µs bodies (serial: 2 s a run at every worker
# count, for every peer) spent the deadline before priority and
# roundtrip began. Those two at a tenth of their full size.
plan_peers() {
  run_peers peers DEADLINE=300 WORKERS="$(workers 16 8 2)" BODIES="0 10" \
    WORKLOADS="priority roundtrip randsum chain" PRIO_OPS=20000 RT_ROUNDS=10000 \
    SYSTEMS="depengine depengine-replay mxnet starpu openmp-gomp openmp-libomp tbb-flow rayon"
}

failed=()
for p in "${plans[@]}"; do
  echo "== $p ($(date -u +%H:%M:%S))"
  start=$SECONDS
  if "plan_$p" >"$OUT/$p.log" 2>&1; then
    echo "   done in $((SECONDS - start)) s"
  else
    echo "   FAILED (rc $?) after $((SECONDS - start)) s; the end of $OUT/$p.log:"
    tail -5 "$OUT/$p.log" | sed 's/^/   /'
    failed+=("$p")
  fi
done
echo "load at the end: $(uptime | sed 's/.*load/load/')" >>"$OUT/machine.txt"
if ((${#failed[@]} > 0)); then
  echo "failed: ${failed[*]}" | tee -a "$OUT/machine.txt"
  exit 1
fi
echo "all in $OUT"
