#!/usr/bin/env bash
# Instructions per op of a depengine build, on each side of an op's life,
# under valgrind's callgrind: what BENCHMARKS.md's instruction counts
# come from. Unlike time on a shared 2-core sandbox, whose speed drifts
# by up to 2x between processes, the count is the same from run to run,
# so a change of a few instructions per op shows.
#
# usage: scripts/count-instructions.sh BINARY [bench arguments]
#   bench arguments default to the empty wavefront the push bounds:
#   --workload wavefront --n 150
#   `--workers 1 --runs 10` are appended (one worker, so that the pushing
#   thread and the worker are one thread each; ten runs after the warm-up).
# Prints one line:
#   ARGS ops=N push=P executed=R execute=E worker=W
#   N  ops run under the count: ops per run x 11 (the warm-up and 10 runs)
#   P  the pushing thread, inside the bench's timed pushes (building each
#      op's description, the push, and whatever the push did to help),
#      the allocator's own code (glibc's malloc.c) left out: the vars a
#      run creates are allocated there, not the pushes
#   E  the worker inside `Core::execute` (body, completion, dispatch of
#      the ops it made ready), per op the worker ran (its count: executed=)
#   W  the worker's whole loop (`worker_main`): E plus taking ops from its
#      queues, and its spins while idle, which vary from run to run
# All per op. The two runs under valgrind take some seconds each at the default size.
# Environment: KEEP=DIR keeps the callgrind files there (default: a
# temporary directory, removed at the end).
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n '2,26p' "$0"; exit 2; }
BIN=$1; shift
[[ -x $BIN ]] || { echo "count-instructions: $BIN is not an executable" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "count-instructions: valgrind is not installed" >&2; exit 2; }
if [[ $# -eq 0 ]]; then
  set -- --workload wavefront --n 150
fi
if [[ -n ${KEEP:-} ]]; then
  D=$KEEP; mkdir -p "$D"
else
  D=$(mktemp -d); trap 'rm -rf "$D"' EXIT
fi
rm -f "$D"/p.out* "$D"/w.out*
cg() {
  valgrind --tool=callgrind --separate-threads=yes "--toggle-collect=$1" \
    --callgrind-out-file="$2" "$BIN" bench "${@:3}" --workers 1 --runs 10
}
cg 'depengine::bench::run::timed_pushes::*' "$D/p.out" "$@" >/dev/null 2>"$D/p.err" ||
  { tail -n 5 "$D/p.err" >&2; exit 1; }
cg 'depengine::engine::executor::pool::worker_main' "$D/w.out" "$@" >"$D/line" 2>"$D/w.err" ||
  { tail -n 5 "$D/w.err" >&2; exit 1; }
ops=$(grep -o ' ops=[0-9]*' "$D/line" | head -n 1 | cut -d= -f2)
[[ -n $ops ]] || { echo "count-instructions: no result line from the bench" >&2; exit 1; }
ops=$((ops * 11))
total() { callgrind_annotate "$1" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1 + 0}'; }
# Thread 1 is the pushing (main) thread. The worker is the thread whose
# file counted the most: other threads (an engine's that the bench does
# not time) have the toggle off and count next to nothing.
push=$(callgrind_annotate "$D/p.out-01" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); t = $1}
  /malloc\.c:/ {gsub(",", "", $1); m += $1} END {print t - m}')
wfile= worker=0
for f in "$D"/w.out-*; do
  n=$(total "$f")
  if [[ ${n:-0} -gt $worker ]]; then worker=$n wfile=$f; fi
done
[[ -n $wfile ]] || { echo "count-instructions: no worker thread counted" >&2; exit 1; }
# Per op the worker ran, from the calls of `Core::execute` in the worker's
# annotated source (cost with callees, and count): with one worker the
# pushing thread may run some ops itself when it helps.
read -r execute runs < <(callgrind_annotate --auto=yes "$wfile" |
  awk '/=> .*depengine::engine::core::Core::execute \(/ {
    c = $1; gsub(",", "", c); x += c
    s = $0; sub(/.*\(/, "", s); sub(/x\).*/, "", s); gsub(",", "", s); n += s}
    END {print x + 0, n + 0}')
[[ ${runs:-0} -gt 0 ]] || { echo "count-instructions: no call of Core::execute on the worker" >&2; exit 1; }
per() { awk -v x="${1:-0}" -v n="$ops" 'BEGIN {printf "%.1f", x / n}'; }
echo "$* ops=$ops push=$(per "$push") executed=$runs execute=$(awk -v x="${execute:-0}" -v n="$runs" 'BEGIN {printf "%.1f", x / n}') worker=$(per "$worker")"
