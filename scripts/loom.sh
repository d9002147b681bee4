#!/usr/bin/env bash
# Runs the loom models of the dependency protocol and of the worker pools'
# sleep protocol, the one way CI runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
export RUSTFLAGS="--cfg loom -C debug-assertions"
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
export CARGO_TARGET_DIR="${LOOM_TARGET_DIR:-target/loom}"
cargo test --release --test loom "$@"
# Models of engine internals the public API cannot reach (the worker pools'
# sleep protocol, the spinning var lock), kept next to the code they model.
cargo test --release --lib loom_models "$@"
