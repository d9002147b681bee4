#!/usr/bin/env bash
# Measures depengine against MXNet 1.9.1's own engine on the empty-op
# workloads of the design notes (indep and readers over 1024 vars, chain),
# alternating the systems in one run: scripts/bench-peers.sh restricted to
# depengine's two threaded executors and MXNet's three engines.
#
# usage: scripts/bench-mxnet.sh [OPS] [WORKERS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
OPS=${1:-1000000}
WORKERS=${2:-2}
ROUNDS=${3:-3}
for round in $(seq 1 "$ROUNDS"); do
  echo "# round $round"
  OPS=$OPS WORKERS=$WORKERS WORKLOADS="indep chain readers" BODIES=0 VARS=1024 \
    SYSTEMS="depengine depengine-pooled mxnet" \
    MXNET_ENGINES="ThreadedEnginePerDevice ThreadedEngine NaiveEngine" \
    scripts/bench-peers.sh
done
