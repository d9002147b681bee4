#!/usr/bin/env bash
# Side-by-side benchmark of depengine against its peers on the same
# workloads, in the same run, alternating the systems:
#   MXNet 1.9.1's engine (ThreadedEnginePerDevice, ThreadedEngine,
#   NaiveEngine), StarPU, OpenMP tasks (gcc/libgomp and clang/libomp),
#   oneTBB's flow graph and rayon (the last two given the inferred graph).
#
# Installs what it needs from the package registries only: Debian packages
# (libstarpu-dev libomp-dev clang libtbb-dev, through apt-get), the mxnet
# wheel from PyPI (pip download; its libmxnet.so is driven through the C
# API), rayon from crates.io (cargo). Then builds the drivers under peers/.
#
# Every workload is first written as a trace by `depengine bench
# --dump-trace` and replayed by every system, so all run the same ops.
# Each line = one system on one workload: median of RUNS runs after a
# warm-up, with min and max. The results file ($PEERS/results-*.txt)
# opens with the CPU count and load, then a `# machine:` line: CPU model,
# L3, kernel, the commit of the tree (and whether it had uncommitted
# changes), and DEPENGINE when it was given. At the end, markdown tables
# (scripts/bench-peers-table.py): ns per op; the ratio peer / depengine
# (above 1: depengine is faster) with the count of rows each peer leads,
# and the same against each other depengine configuration run (helping,
# pushing, replay, and the one-thread naive executor on its rows);
# efficiency of the busy bodies; the minimum effective task granularity
# when more than one busy body was run; priority latencies.
#
# usage: scripts/bench-peers.sh            full sizes (1,000,000 ops; long)
#        QUICK=1 scripts/bench-peers.sh    reduced sizes (minutes)
# Environment (all optional):
#   QUICK=1        ops 20,000, wavefront 100 and 250, fan 200 rounds,
#                  priority 2,000 low-priority ops, roundtrip 5,000, bodies 0 and 10 µs,
#                  MXNet's ThreadedEnginePerDevice only
#   RUNS=5         timed runs per line (median, min, max)
#   ROUNDS=1       lines per system and row: the systems alternate ROUNDS
#                  times, line by line; the table then gives, per system and
#                  row, the line with the median of the line medians (the
#                  lower middle one for an even count) and the min and max
#                  over all its lines, so that a slow stretch of the machine
#                  that lasts a line or two moves no median (`ideal` runs once)
#   WORKERS="1 2 N"  worker counts (default: 1, 2 and all CPUs)
#   BODIES="0 1 10 100"  body times in µs
#   BUSY_BUDGET_US=2000000  busy body time per run: ops of busy workloads are
#                  capped at BUSY_BUDGET_US / body (so 100 µs bodies stay short)
#   WORKLOADS="..." subset of: indep indep-novars chain readers wavefront fan
#                  rwmix random randsum priority roundtrip
#   SYSTEMS="..."  subset of: depengine depengine-helping depengine-pushing
#                  depengine-pooled depengine-naive depengine-serial depengine-alt
#                  depengine-batch depengine-pushers depengine-stream
#                  depengine-replay mxnet starpu
#                  openmp-gomp openmp-libomp tbb-flow rayon lean lean-like
#                  ideal
#                  (depengine's lines carry --line-probe's round trip)
#                  (lean: not a peer but a yardstick, peers/lean: the
#                  engine's inference protocol with the lightest op;
#                  lean-like: the same with its op state handed round in
#                  batches and spaced out as the engine's, --recycle 8192
#                  --recycle-order batched --op-stride 192 --var-stride
#                  192; BENCHMARKS.md, "The lean control"; not for
#                  priority or roundtrip)
#                  (depengine-batch: depengine pushing through Engine::batch,
#                  $BATCH ops per batch, default 256)
#                  (depengine-stream: depengine taking the ops as a stream,
#                  Engine::push_all, which asks for the next ops' var lines
#                  while it pushes; not for priority or roundtrip)
#                  (depengine-pushers: depengine pushed from $PUSHERS threads,
#                  default 4; indep and indep-novars only)
#                  (depengine-alt: $DEPENGINE_ALT run as depengine is, for an
#                  A/B of two builds in one run; its ratio to depengine is the
#                  A/B's result)
#                  (depengine-tune-LABEL, any LABEL of letters, digits and
#                  _: depengine run with the extra bench flags in $TUNE_LABEL,
#                  e.g. SYSTEMS="depengine depengine-tune-s2"
#                  TUNE_s2="--max-searching 2", for a sweep of the engine's
#                  settings in one run; its ratio to depengine is the A/B's)
#                  (depengine-replay: the trace captured as a Replay before
#                  the clock starts, its vars private to the replay, then
#                  pushed whole: the graph handed over, as oneTBB and rayon
#                  get it; not for priority or roundtrip)
#                  (depengine-naive: the naive executor, every op run on the
#                  thread that makes it ready; one thread in all, so 1 worker only)
#                  (depengine-serial: the naive executor's ops pushed in a
#                  serial scope, `Engine::serial`: each runs at its push
#                  without the var protocol; 1 worker only, not roundtrip)
#                  (ideal: no system but the zero-overhead schedule of the
#                  same trace on the same workers, `depengine bench --ideal`,
#                  the yardstick of the efficiency table; seconds to compute)
#   MXNET_ENGINES="ThreadedEnginePerDevice ThreadedEngine NaiveEngine"
#   VARS=0         vars of indep (0: one per op) and readers (0: 1024)
#   TIMEOUT=600    seconds before one line is given up (written as
#                  `timeout limit_s=N`; a line whose system exits with an
#                  error, or prints no result, as `failed rc=N`)
#   DEADLINE=S     seconds from the start after which no line starts: each
#                  line's TIMEOUT shrinks to the time left, the lines left
#                  are written as skipped-deadline, and the tables are
#                  printed, so that a run on a machine held for a set time
#                  ends in time with its tables (unset: no deadline)
#   NO_INSTALL=1   skip apt-get / pip (use what is installed)
#   NO_BUILD=1     skip building too: run the binaries already in $PEERS
#                  (the drivers, rayon-target/release/depengine-rayon-peer,
#                  lean-target/release/depengine-lean-control)
#                  and $DEPENGINE, e.g. built on one machine, run on another
#   PEERS=DIR      where the drivers, traces and results live
#                  (default: $CARGO_TARGET_DIR/peers)
#   DEPENGINE=BIN  the depengine binary (default: the release build)
#   DEPENGINE_ALT=BIN  the binary of system depengine-alt (required by it)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
PEERS=${PEERS:-$TARGET/peers}
mkdir -p "$PEERS/traces"

NCPU=$(nproc)
if [[ -n ${QUICK:-} ]]; then
  OPS=${OPS:-20000}; WAVE=${WAVE:-"100 250"}; FAN_ROUNDS=${FAN_ROUNDS:-200}
  PRIO_OPS=${PRIO_OPS:-2000}; RT_ROUNDS=${RT_ROUNDS:-5000}
  BODIES=${BODIES:-"0 10"}; BUSY_BUDGET_US=${BUSY_BUDGET_US:-200000}
  MXNET_ENGINES=${MXNET_ENGINES:-ThreadedEnginePerDevice}
else
  OPS=${OPS:-1000000}; WAVE=${WAVE:-"250 1000 2000"}; FAN_ROUNDS=${FAN_ROUNDS:-10000}
  PRIO_OPS=${PRIO_OPS:-200000}; RT_ROUNDS=${RT_ROUNDS:-100000}
  BODIES=${BODIES:-"0 1 10 100"}; BUSY_BUDGET_US=${BUSY_BUDGET_US:-2000000}
  MXNET_ENGINES=${MXNET_ENGINES:-"ThreadedEnginePerDevice ThreadedEngine NaiveEngine"}
fi
RUNS=${RUNS:-5}
ROUNDS=${ROUNDS:-1}
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a positive whole number, not '$ROUNDS'" >&2; exit 2; }
WORKERS=${WORKERS:-$(printf '%s\n' 1 2 "$NCPU" | sort -nu | tr '\n' ' ')}
WORKLOADS=${WORKLOADS:-"indep indep-novars chain wavefront fan rwmix random randsum priority roundtrip"}
SYSTEMS=${SYSTEMS:-"depengine depengine-helping mxnet starpu openmp-gomp openmp-libomp tbb-flow rayon ideal"}
VARS=${VARS:-0}
TIMEOUT=${TIMEOUT:-600}
DEADLINE=${DEADLINE:-}
[[ -z $DEADLINE || $DEADLINE =~ ^[0-9]+$ ]] || { echo "DEADLINE must be a whole number of seconds, not '$DEADLINE'" >&2; exit 2; }
START=$SECONDS
# left: seconds before the deadline (may be 0 or less); none without one
left() { echo $((DEADLINE - (SECONDS - START))); }

# ---- install (package registries only) ----
if [[ -z ${NO_INSTALL:-} && -z ${NO_BUILD:-} ]]; then
  need=()
  for p in libstarpu-dev libomp-dev clang libtbb-dev pkg-config; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
  done
  if ((${#need[@]})); then
    SUDO=; [[ $(id -u) -ne 0 ]] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
  fi
  if [[ ! -f $PEERS/mxnet/libmxnet.so ]]; then
    pip download --quiet --no-deps -d "$PEERS/wheels" mxnet==1.9.1
    python3 - "$PEERS" <<'PY'
import glob, sys, zipfile
peers = sys.argv[1]
wheel = glob.glob(f"{peers}/wheels/mxnet-1.9.1-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    for name in ("mxnet/libmxnet.so", "mxnet/libgfortran.so.3", "mxnet/libopenblas.so.0"):
        z.extract(name, peers)
PY
  fi
fi

# ---- build ----
has() { [[ " $SYSTEMS " == *" $1 "* ]]; }
DEPENGINE_SET=${DEPENGINE:+1}
DEPENGINE=${DEPENGINE:-$TARGET/release/depengine}
if [[ -z ${NO_BUILD:-} ]]; then
  cargo build --release --quiet
  has mxnet && gcc -O2 -o "$PEERS/mxnet_engine" peers/mxnet_engine.c \
    -L"$PEERS/mxnet" -lmxnet -Wl,-rpath,"$PEERS/mxnet" -lpthread
  has starpu && gcc -O2 -o "$PEERS/starpu" peers/starpu.c \
    $(pkg-config --cflags --libs starpu-1.3) -lpthread
  has openmp-gomp && gcc -O2 -fopenmp -o "$PEERS/openmp-gomp" peers/openmp.c \
    -DSYSTEM='"openmp-gomp"' -lpthread
  has openmp-libomp && clang -O2 -fopenmp -o "$PEERS/openmp-libomp" peers/openmp.c \
    -DSYSTEM='"openmp-libomp"' -lpthread
  has tbb-flow && g++ -O2 -std=c++17 -o "$PEERS/tbb_flow" peers/tbb_flow.cpp -ltbb -lpthread
  has rayon && CARGO_TARGET_DIR=$PEERS/rayon-target \
    cargo build --release --quiet --manifest-path peers/rayon/Cargo.toml
  { has lean || has lean-like; } && CARGO_TARGET_DIR=$PEERS/lean-target \
    cargo build --release --quiet --manifest-path peers/lean/Cargo.toml
fi
RAYON=$PEERS/rayon-target/release/depengine-rayon-peer
LEAN=$PEERS/lean-target/release/depengine-lean-control

export STARPU_SILENT=1 STARPU_HOME=$PEERS/starpu-home OMP_MAX_TASK_PRIORITY=1
RESULTS=$PEERS/results-$(date -u +%Y%m%dT%H%M%SZ).txt
echo "# $(nproc) CPUs; $(uptime | sed 's/.*load/load/'); RUNS=$RUNS ROUNDS=$ROUNDS OPS=$OPS QUICK=${QUICK:-0}${DEADLINE:+ DEADLINE=$DEADLINE}" | tee "$RESULTS"
# The machine and the source, in the results themselves: the 2-core
# sandboxes come as several CPU models and drift between a fast and a
# slow state, so a figure is only worth what its file says of where and
# what it ran (scripts/bench-peers-table.py prints this line on top).
cpus=$(lscpu 2>/dev/null) || cpus=
cpu=$(sed -n 's/^Model name:[[:space:]]*//p' <<<"$cpus" | head -n 1)
l3=$(sed -n 's/^L3 cache:[[:space:]]*//p' <<<"$cpus" | head -n 1)
rev=$(git rev-parse --short HEAD 2>/dev/null) || rev=
if [[ -n $rev ]] && ! git diff --quiet HEAD 2>/dev/null; then rev+=" with uncommitted changes"; fi
echo "# machine: ${cpu:-CPU model unknown}, L3 ${l3:-unknown}; $(uname -sr); tree at ${rev:-unknown}${DEPENGINE_SET:+; DEPENGINE=$DEPENGINE}" |
  tee -a "$RESULTS"

# emit: appends the lines it reads to the results (and shows them), each
# marked with its round when there are several
ROUND_MARK=
emit() { sed "s/\$/$ROUND_MARK/" | tee -a "$RESULTS"; }

# run "workload=L body_us=B system=S workers=W" COMMAND...: one line of
# results, its workload and system fields set to L and S (or a failure line)
run() {
  local what=$1; shift
  local out wl sy limit=$TIMEOUT
  if [[ -n $DEADLINE ]]; then
    local l; l=$(left)
    if ((l <= 0)); then
      echo "$what skipped-deadline" | emit
      return
    fi
    ((l < limit)) && limit=$l
  fi
  wl=$(sed 's/^workload=\([^ ]*\).*/\1/' <<<"$what")
  sy=$(sed 's/.* system=\([^ ]*\).*/\1/' <<<"$what")
  # the command's own status, not grep's: a line cut by the limit and a
  # line whose system failed are different facts and the table says which
  local rc=0
  out=$(timeout "$limit" "$@" 2>/dev/null) || rc=$?
  out=$(grep '^workload=' <<<"$out" || true)
  if ((rc == 0)) && [[ -n $out ]]; then
    sed -e "s/^workload=[^ ]*/workload=$wl/" -e "s/ system=[^ ]*/ system=$sy/" <<<"$out" | emit
  elif ((rc == 124 || rc == 137)); then
    echo "$what timeout limit_s=$limit" | emit
  else
    echo "$what failed rc=$rc" | emit
  fi
}

for wl in $WORKLOADS; do
  sizes=("")
  [[ $wl == wavefront ]] && read -r -a sizes <<<"$WAVE"
  for size in "${sizes[@]}"; do
    label=$wl${size:+-$size}
    for body in $BODIES; do
      # ops / rounds of this line; busy bodies capped by the busy budget
      case $wl in
        fan) ops=$FAN_ROUNDS; per=101 ;;
        priority) ops=$PRIO_OPS; per=1 ;;
        roundtrip) ops=$RT_ROUNDS; per=1 ;;
        *) ops=$OPS; per=1 ;;
      esac
      if [[ $body != 0 && $wl != priority ]]; then
        cap=$(python3 -c "print(max(1, int($BUSY_BUDGET_US / $body / $per)))")
        ((ops > cap)) && ops=$cap
        if [[ $wl == wavefront ]]; then
          s=$(python3 -c "import math; print(max(2, min($size, int(math.isqrt($cap)))))")
        fi
      fi
      n=${s:-${size:-1000}}; unset s
      trace=$PEERS/traces/$label-$body.tr
      args=(--workload "$wl" --ops "$ops" --n "$n" --body-us "$body" --vars "$VARS")
      # no trace for a row whose lines would all be skipped
      if [[ $wl != roundtrip ]] && [[ -z $DEADLINE || $(left) -gt 0 ]]; then
        "$DEPENGINE" bench "${args[@]}" --dump-trace "$trace"
      fi
      src=$trace; [[ $wl == roundtrip ]] && src=$ops
      for w in $WORKERS; do
       for ((round = 1; round <= ROUNDS; round++)); do
        ((ROUNDS > 1)) && ROUND_MARK=" round=$round"
        for sys in $SYSTEMS; do
          # the ideal schedule is computed, not measured: once is enough
          [[ $sys == ideal ]] && ((round > 1)) && continue
          tag="workload=$label body_us=$body system=$sys workers=$w"
          case $sys in
            # --line-probe: the cache line's round trip before each run,
            # the machine's state the row was measured in (BENCHMARKS.md,
            # "The states of the 2-core sandbox"); the table sums it up
            depengine) run "$tag" "$DEPENGINE" bench "${args[@]}" --workers "$w" --runs "$RUNS" --engine per-device --line-probe ;;
            depengine-helping)
              # W threads in all, as for OpenMP, oneTBB and rayon: W - 1
              # workers plus the pushing thread, which runs ops while it
              # waits for all (roundtrip waits for one var: not helped).
              if ((w < 2)) || [[ $wl == roundtrip ]]; then
                echo "$tag unsupported" | emit
              else
                run "$tag" "$DEPENGINE" bench "${args[@]}" --workers $((w - 1)) --help-wait --runs "$RUNS" --engine per-device
              fi ;;
            depengine-pushing)
              # depengine-helping whose pusher also runs queued ops while
              # it pushes, once the workers' backlog is long.
              if ((w < 2)) || [[ $wl == roundtrip ]]; then
                echo "$tag unsupported" | emit
              else
                run "$tag" "$DEPENGINE" bench "${args[@]}" --workers $((w - 1)) --help-wait --help-push --runs "$RUNS" --engine per-device
              fi ;;
            depengine-alt)
              if [[ -z ${DEPENGINE_ALT:-} ]]; then
                echo "SYSTEMS names depengine-alt: set DEPENGINE_ALT to a depengine binary" >&2
                exit 2
              fi
              run "$tag" "$DEPENGINE_ALT" bench "${args[@]}" --workers "$w" --runs "$RUNS" --engine per-device ;;
            depengine-tune-*)
              tune=TUNE_${sys#depengine-tune-}
              if [[ ! $tune =~ ^TUNE_[A-Za-z0-9_]+$ || -z ${!tune:-} ]]; then
                echo "SYSTEMS names $sys: set $tune to the bench flags it adds (letters, digits and _ in the label)" >&2
                exit 2
              fi
              read -r -a tune_flags <<<"${!tune}"
              run "$tag" "$DEPENGINE" bench "${args[@]}" --workers "$w" --runs "$RUNS" --engine per-device "${tune_flags[@]}" ;;
            depengine-batch)
              if [[ $wl == roundtrip ]]; then
                echo "$tag unsupported" | emit
              else
                run "$tag" "$DEPENGINE" bench "${args[@]}" --workers "$w" --runs "$RUNS" --engine per-device --batch "${BATCH:-256}"
              fi ;;
            depengine-stream)
              if [[ $wl == priority || $wl == roundtrip ]]; then
                echo "$tag unsupported" | emit
              else
                run "$tag" "$DEPENGINE" bench "${args[@]}" --workers "$w" --runs "$RUNS" --engine per-device --stream
              fi ;;
            depengine-pushers)
              if [[ $wl != indep && $wl != indep-novars ]]; then
                echo "$tag unsupported" | emit
              else
                run "$tag" "$DEPENGINE" bench "${args[@]}" --workers "$w" --runs "$RUNS" --engine per-device --pushers "${PUSHERS:-4}"
              fi ;;
            depengine-replay)
              if [[ $wl == priority || $wl == roundtrip ]]; then
                echo "$tag unsupported" | emit
              else
                run "$tag" "$DEPENGINE" bench "${args[@]}" --workers "$w" --runs "$RUNS" --engine per-device --replay
              fi ;;
            depengine-pooled) run "$tag" "$DEPENGINE" bench "${args[@]}" --workers "$w" --runs "$RUNS" --engine pooled ;;
            depengine-naive)
              # One thread in all, as an OpenMP team of one runs its tasks
              # at their push; roundtrip's op is completed by another thread.
              if ((w != 1)); then
                echo "$tag unsupported" | emit
              else
                run "$tag" "$DEPENGINE" bench "${args[@]}" --runs "$RUNS" --engine naive
              fi ;;
            depengine-serial)
              # One thread in all too, in a serial scope (Engine::serial):
              # each op runs at its push without the var protocol.
              if ((w != 1)) || [[ $wl == roundtrip ]]; then
                echo "$tag unsupported" | emit
              else
                run "$tag" "$DEPENGINE" bench "${args[@]}" --runs "$RUNS" --engine naive --serial
              fi ;;
            mxnet)
              for k in $MXNET_ENGINES; do
                MXNET_ENGINE_TYPE=$k MXNET_CPU_WORKER_NTHREADS=$w MXNET_CPU_PRIORITY_NTHREADS=$w \
                  run "workload=$label body_us=$body system=mxnet-$k workers=$w" \
                  "$PEERS/mxnet_engine" "$wl" "$body" "$w" "$RUNS" "$src"
              done ;;
            starpu)
              sched=; [[ $wl == priority ]] && sched=prio
              STARPU_SCHED=${sched:-${STARPU_SCHED:-}} run "$tag" "$PEERS/starpu" "$wl" "$body" "$w" "$RUNS" "$src" ;;
            openmp-gomp|openmp-libomp) run "$tag" "$PEERS/$sys" "$wl" "$body" "$w" "$RUNS" "$src" ;;
            tbb-flow) run "$tag" "$PEERS/tbb_flow" "$wl" "$body" "$w" "$RUNS" "$src" ;;
            rayon) run "$tag" "$RAYON" "${args[@]}" --workers "$w" --runs "$RUNS" ;;
            lean) run "$tag" "$LEAN" "${args[@]}" --workers "$w" --runs "$RUNS" ;;
            lean-like)
              run "$tag" "$LEAN" "${args[@]}" --workers "$w" --runs "$RUNS" \
                --recycle 8192 --recycle-order batched --op-stride 192 --var-stride 192 ;;
            ideal)
              # Empty bodies take no time in the ideal schedule: no line.
              if [[ $wl == roundtrip ]]; then
                echo "$tag unsupported" | emit
              elif [[ $body != 0 || $wl == priority ]]; then
                run "$tag" "$DEPENGINE" bench "${args[@]}" --workers "$w" --ideal
              fi ;;
          esac
        done
       done
      done
      [[ -f $trace ]] && rm -f "$trace"
    done
  done
done

echo "# done: $(uptime | sed 's/.*load/load/')" | tee -a "$RESULTS"
python3 scripts/bench-peers-table.py "$RESULTS"
