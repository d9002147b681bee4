#!/usr/bin/env bash
# Runs the unit tests of the engine's type-erased storage (inline op and node bodies)
# under Miri, which checks them for undefined behaviour. Needs a nightly
# toolchain with the `miri` component (`rustup +nightly component add miri`);
# not part of CI, whose machine may not be able to fetch it.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${MIRI_TARGET_DIR:-target/miri}"
exec cargo +nightly miri test --lib engine::inline_body "$@"
