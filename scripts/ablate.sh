#!/usr/bin/env bash
# Ablation: what each of an op's duties costs, measured by taking it out.
#
# Builds the engine as it is at HEAD and once per patch with that patch
# applied (each in a throwaway git worktree), then runs scripts/ab.sh
# over the builds: the base first, every patched build, and any settings
# given in FLAG_VARIANTS. A patch here removes one duty the engine does
# per op (a prefetch, a version bump, a catch of panics, ...); the builds
# are for measuring only and break what the duty was for.
#
# usage: scripts/ablate.sh ROUNDS ROWS [PATCH...]
#   ROWS      rows file of scripts/ab.sh (LABEL|depengine bench arguments)
#   PATCH     a patch (git diff) against HEAD; the variant's label is the
#             file's name without .patch. None given: every
#             scripts/ablation/*.patch.
# env:
#   FLAG_VARIANTS  extra variants of the base build, `LABEL|bench flags`
#                  separated by `;` (e.g. "lead0|--max-lead 0")
#   BIN_DIR        where the builds go (default target/ablate/bin); the
#                  build tree is target/ablate/build
# Prints what scripts/ab.sh prints. A patch that no longer applies to
# HEAD stops the script before anything runs: the patches name the lines
# of the commit they were written against (scripts/ablation/README.md).
set -euo pipefail
(($# >= 2)) || { sed -n '2,23p' "$0"; exit 2; }
ROUNDS=$1
# Checked here too, before the builds rather than after them.
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a whole number from 1: $ROUNDS" >&2; exit 2; }
[[ -r $2 ]] || { echo "no rows file at $2" >&2; exit 2; }
ROWS=$(realpath "$2")
shift 2
PATCHES=()
for p in "$@"; do
  [[ -r $p ]] || { echo "no patch at $p" >&2; exit 2; }
  PATCHES+=("$(realpath "$p")")
done
ROOT=$(git rev-parse --show-toplevel)
cd "$ROOT"
((${#PATCHES[@]})) || PATCHES=("$ROOT"/scripts/ablation/*.patch)
BIN_DIR=${BIN_DIR:-$ROOT/target/ablate/bin}
export CARGO_TARGET_DIR=$ROOT/target/ablate/build
# A patch that takes a duty out leaves its helpers unused: those warnings
# say nothing here. (Lints do not change the code built.)
export RUSTFLAGS="${RUSTFLAGS:-} -A warnings"
mkdir -p "$BIN_DIR"
TREE=$(mktemp -d)
trap 'git worktree remove --force "$TREE" >/dev/null 2>&1 || true; rm -rf "$TREE"' EXIT
git worktree add -q --detach "$TREE" HEAD
for p in "${PATCHES[@]}"; do
  git -C "$TREE" apply --check "$p" || { echo "$p does not apply to HEAD" >&2; exit 1; }
done

build() { # label
  (cd "$TREE" && cargo build --release --quiet --bin depengine)
  cp "$CARGO_TARGET_DIR/release/depengine" "$BIN_DIR/$1"
}
build base
VARIANTS=("base|$BIN_DIR/base|")
for p in "${PATCHES[@]}"; do
  label=$(basename "$p" .patch)
  git -C "$TREE" apply "$p"
  build "$label"
  git -C "$TREE" checkout -q -- .
  VARIANTS+=("$label|$BIN_DIR/$label|")
done
IFS=';' read -r -a flag_variants <<<"${FLAG_VARIANTS:-}"
for f in "${flag_variants[@]}"; do
  [[ -z $f ]] && continue
  IFS='|' read -r label flags <<<"$f"
  VARIANTS+=("$label|$BIN_DIR/base|$flags")
done
scripts/ab.sh "$ROUNDS" "$ROWS" "${VARIANTS[@]}"
