#!/usr/bin/env bash
# Measures depengine against MXNet 1.9.1's own engine on the empty-op
# workloads (indep, chain, readers), alternating the two systems in one run.
#
# Installs what it needs from the package registries only: the `mxnet` wheel
# from PyPI (its libmxnet.so is driven through the C API by peers/mxnet_engine.c).
#
# usage: scripts/bench-mxnet.sh [OPS] [WORKERS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
OPS=${1:-1000000}
WORKERS=${2:-2}
ROUNDS=${3:-3}
PEERS=target/peers
mkdir -p "$PEERS"

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
gcc -O2 -o "$PEERS/mxnet_engine" peers/mxnet_engine.c \
  -L"$PEERS/mxnet" -lmxnet -Wl,-rpath,"$(pwd)/$PEERS/mxnet"
cargo build --release --quiet

echo "# $(nproc) CPUs, $WORKERS workers, $OPS ops per run, median of 5 runs; round = one pass over every system"
for round in $(seq 1 "$ROUNDS"); do
  for w in indep chain readers; do
    ./target/release/depengine bench --engine per-device --workload "$w" --workers "$WORKERS" --ops "$OPS"
    ./target/release/depengine bench --engine pooled --workload "$w" --workers "$WORKERS" --ops "$OPS"
    for kind in ThreadedEnginePerDevice ThreadedEngine NaiveEngine; do
      MXNET_ENGINE_TYPE=$kind MXNET_CPU_WORKER_NTHREADS=$WORKERS \
        "$PEERS/mxnet_engine" "$w" "$OPS" 1024 5 2>/dev/null
    done
  done
done
