#!/usr/bin/env bash
# Profiles one `depengine bench` line with perf and writes, per thread and
# for the pushing thread alone, where the samples fell: the question it
# answers is what a push costs on a machine with many workers (the one
# pushing thread bounds the 1 µs rows at 16 workers; BENCHMARKS.md, "Where
# things stand against the goal"), down to the instructions that stall.
#
# usage: scripts/profile-push.sh OUTDIR [bench arguments]
#   bench arguments default to the row the goal misses:
#   --workload indep-novars --workers 16 --body-us 1 --ops 200000 --runs 3
#   OUTDIR then holds:
#     line.txt      the bench's own line (ns per op, push_ns_per_op, ...)
#     threads.txt   samples by thread and symbol, every thread
#     pusher.txt    the pushing thread's samples by symbol (percent of its
#                   own), with callers
#     annotate-N.txt  the pushing thread's N-th hottest symbol of the
#                   engine, instruction by instruction, all threads'
#                   samples in it (perf annotate has no thread filter;
#                   the push's symbols run on the pushing thread), its
#                   instructions with 1% or more of them first
#   Each vars' creation and deletion around a run is not timed by the
#   bench but is sampled here: read the push's own symbols (push_to, the
#   executor's dispatch and the pool's enqueue, inlined or not).
# Environment:
#   DEPENGINE  binary with symbols (default target/release/depengine; in a
#              bundle of scripts/bench-peers-bundle.sh with PERF=1,
#              DIR/depengine-sym)
#   PERF       perf command (default perf; in such a bundle DIR/perf.sh)
#   FREQ       samples per second and thread (default 4999)
#   TOP        symbols annotated (default 4)
# A perf that cannot record here (missing, or the kernel's
# perf_event_paranoid too strict) is reported and the script exits 0, so
# that a batch of runs around it goes on.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 1 ]] || { sed -n '2,33p' "$0"; exit 2; }
OUT=$1; shift
DEPENGINE=${DEPENGINE:-target/release/depengine}
PERF=${PERF:-perf}
FREQ=${FREQ:-4999}
TOP=${TOP:-4}
if [[ $# -eq 0 ]]; then
  set -- --workload indep-novars --workers 16 --body-us 1 --ops 200000 --runs 3
fi
[[ -x $DEPENGINE ]] || { echo "DEPENGINE=$DEPENGINE is not an executable" >&2; exit 2; }
mkdir -p "$OUT"
data=$OUT/perf.data
if ! $PERF record -F "$FREQ" -g -o "$data" -- "$DEPENGINE" bench "$@" >"$OUT/line.txt" 2>"$OUT/record.err"; then
  echo "profile-push: perf record failed (see $OUT/record.err); no profile" >&2
  tail -3 "$OUT/record.err" >&2 || true
  exit 0
fi
cat "$OUT/line.txt"
report() { $PERF report -i "$data" --stdio --no-children "$@" 2>/dev/null; }
report --sort comm,sym -g none --percent-limit 0.3 >"$OUT/threads.txt"
# The pushing thread is the process's main thread: its name is the
# binary's, cut to the kernel's 15 characters.
comm=$(basename "$DEPENGINE" | cut -c1-15)
report --comm "$comm" --percentage relative --sort sym -g caller,0.5,callee --percent-limit 1 >"$OUT/pusher.txt"
# The engine's own symbols among the pusher's hottest.
mapfile -t syms < <(report --comm "$comm" --percentage relative --sort sym -g none --percent-limit 1 |
  sed -n 's/^ *[0-9.]*% *\[\.\] \(depengine::.*\)$/\1/p' | sed 's/ *$//' | head -n "$TOP")
i=0
for s in "${syms[@]}"; do
  i=$((i + 1))
  full=$($PERF annotate -i "$data" --stdio -s "$s" 2>/dev/null || true)
  {
    echo "# $s: instructions with 1% or more of its samples (perf skids:"
    echo "# a stall shows on the instruction after the one that waits)"
    awk -F: '$1 + 0 >= 1.0' <<<"$full" | sort -rn
    echo
    echo "$full"
  } >"$OUT/annotate-$i.txt"
done
echo "profile-push: $OUT: threads.txt, pusher.txt, ${#syms[@]} annotated symbol(s)" >&2
