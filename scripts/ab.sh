#!/usr/bin/env bash
# An A/B of depengine builds or settings in alternating processes: the way
# the A/Bs of BENCHMARKS-HISTORY.md on the 2-core sandbox are measured, where the speed
# of code that waits on memory drifts by up to 1.7x from one process to
# the next ("Shared counts off the lines every push reads"), so that only
# processes run side by side, many rounds of them, can be compared.
#
# usage: scripts/ab.sh ROUNDS ROWS VARIANT...
#   ROWS     a file, one row a line: LABEL|depengine bench arguments
#            (blank lines and lines starting with # are skipped)
#   VARIANT  LABEL|BINARY|extra bench arguments: BINARY is a depengine
#            binary (another build, or the same with other settings)
#   Each round runs every row once with every variant, one process each,
#   the variants in the order given in odd rounds and reversed in even
#   ones. Each line's ns per op goes to stdout as `ROW VARIANT VALUE`
#   (VALUE `failed` when the process failed or printed no result), then
#   per row: each variant's median ns per op (min-max) over the rounds,
#   and the median of its ratio to the first variant of the same round
#   (r=; below 1: faster than the first), over the rounds both ran, with
#   the rounds it was faster (won=) and their two-sided sign test (p=:
#   the chance of a split that uneven between two equal variants).
# Example:
#   printf 'indep2|--workload indep --vars 0 --ops 200000 --workers 2 --runs 5\n' >rows
#   scripts/ab.sh 16 rows "base|/tmp/base/depengine|" "new|target/release/depengine|"
set -euo pipefail
(($# >= 3)) || { sed -n '2,24p' "$0"; exit 2; }
ROUNDS=$1
ROWS=$2
shift 2
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a whole number from 1: $ROUNDS" >&2; exit 2; }
[[ -r $ROWS ]] || { echo "no rows file at $ROWS" >&2; exit 2; }
for v in "$@"; do
  IFS='|' read -r label bin _ <<<"$v"
  [[ -n $label && $label != *' '* ]] || { echo "variant '$v': its label must be one word" >&2; exit 2; }
  [[ -x $bin ]] || { echo "variant '$label': $bin is not an executable" >&2; exit 2; }
done

RAW=$(mktemp)
trap 'rm -f "$RAW"' EXIT
for ((round = 1; round <= ROUNDS; round++)); do
  variants=("$@")
  if ((round % 2 == 0)); then
    variants=()
    for ((i = $#; i >= 1; i--)); do variants+=("${!i}"); done
  fi
  while IFS='|' read -r row args; do
    [[ -z $row || $row == \#* ]] && continue
    read -r -a bench_args <<<"$args"
    for v in "${variants[@]}"; do
      IFS='|' read -r label bin extra <<<"$v"
      read -r -a extra_args <<<"$extra"
      value=$("$bin" bench "${bench_args[@]}" "${extra_args[@]}" 2>/dev/null |
        sed -n 's/.* ns_per_op=\([0-9.]*\).*/\1/p' | tail -1) || true
      echo "$row $label ${value:-failed}" | tee -a "$RAW"
    done
  done <"$ROWS"
done

python3 - "$RAW" <<'PY'
import collections
import math
import statistics
import sys

def sign_test(wins, losses):
    """The exact two-sided sign test: the chance of a split at least this
    uneven between two equal variants (ties left out)."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1))
    return min(1.0, 2 * tail / 2**n)


rows = collections.OrderedDict()
for line in open(sys.argv[1]):
    row, label, value = line.split()
    rows.setdefault(row, collections.OrderedDict()).setdefault(label, []).append(
        None if value == "failed" else float(value)
    )
print()
for row, variants in rows.items():
    first = next(iter(variants.values()))
    cells = []
    for label, values in variants.items():
        ok = [v for v in values if v is not None]
        failed = len(values) - len(ok)
        if not ok:
            cells.append(f"{label} all {failed} failed")
            continue
        # Round k of every variant is its k-th value: pair them by round.
        ratios = [v / b for v, b in zip(values, first) if v is not None and b]
        cell = f"{label} {statistics.median(ok):.1f} ({min(ok):.1f}-{max(ok):.1f})"
        if ratios:
            cell += f" r={statistics.median(ratios):.3f}"
        if ratios and values is not first:
            won = sum(r < 1 for r in ratios)
            lost = sum(r > 1 for r in ratios)
            cell += f" won={won}/{len(ratios)} p={sign_test(won, lost):.3g}"
        if failed:
            cell += f" ({failed} failed)"
        cells.append(cell)
    print(f"{row} | " + " | ".join(cells))
PY
