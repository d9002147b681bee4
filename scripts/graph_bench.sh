#!/usr/bin/env bash
# Graph planning and execution figures for BENCHMARKS.md: for every graph in
# tests/data/graphs, the planned bytes with and without in-place reuse, and
# for k = 1, 2, 4 colour groups a static run on 2 workers (pooled engine,
# busy body at scale 1), and a dynamic-mode run, three runs each. Prints one
# JSON object per line.
#
#   cargo build --release && bash scripts/graph_bench.sh > /tmp/graph_bench.jsonl
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${CARGO_TARGET_DIR:-target}/release/depengine"
runs="${RUNS:-3}"
for g in tests/data/graphs/*.json; do
  for flags in "" "--no-inplace" "--match-range 16"; do
    # shellcheck disable=SC2086
    "$bin" run "$g" --json --scale 0 --workers 2 --engine pooled $flags \
      | jq -c --arg kind "plan" --arg flags "$flags" '. + {kind: $kind, flags: $flags}'
  done
  for k in 1 2 4; do
    for r in $(seq "$runs"); do
      "$bin" run "$g" --json --scale 1 --workers 2 --engine pooled --colors "$k" \
        | jq -c --arg kind "exec" --argjson run "$r" '. + {kind: $kind, run: $run}'
    done
  done
  for r in $(seq "$runs"); do
    "$bin" run "$g" --json --scale 1 --workers 2 --engine pooled --mode dynamic \
      | jq -c --arg kind "dynamic" --argjson run "$r" '. + {kind: $kind, run: $run}'
  done
done
