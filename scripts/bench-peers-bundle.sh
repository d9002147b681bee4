#!/usr/bin/env bash
# Packs depengine and the peer drivers, with the shared libraries they load,
# into one folder that runs scripts/bench-peers.sh on another x86-64 Linux
# machine with no compiler, no package manager and no network (the lent
# 16-core machine of BENCHMARKS.md's scaling tables was such a machine).
#
# usage: scripts/bench-peers-bundle.sh DIR
#   Run scripts/bench-peers.sh here once first, so that the peers are
#   installed and their drivers built (a peer whose driver is not built
#   here stays out of the bundle). DIR then holds:
#     depengine            the release binary, stripped
#     depengine-alt        $DEPENGINE_ALT stripped, when it is set, or the
#                          release build of commit $ALT_REV: a second build
#                          for system depengine-alt (an A/B in one run)
#     peers/               the drivers (the rayon peer and the lean
#                          control stripped), MXNet's libraries
#                          xz-compressed
#     lib/                 every other shared library the drivers load,
#                          but the C library's own
#     BUILT_FROM           the commit the binaries were built from
#                          (git describe, -dirty with local changes), and
#                          depengine-alt's (ALT_REV's, or what
#                          DEPENGINE_ALT_FROM says of DEPENGINE_ALT)
#     run.sh               unpacks MXNet (outside the bundle, in
#                          $BUNDLE_UNPACK, default a folder of $TMPDIR or
#                          /tmp named after the bundle, so that runs never
#                          grow it past what travels), sets
#                          LD_LIBRARY_PATH and runs
#                          scripts/bench-peers.sh with NO_BUILD=1 on them;
#                          environment as for bench-peers.sh, e.g.
#                          WORKERS=16 BODIES="0 10" DIR/run.sh
#     perf.sh, perf.tar.xz, depengine-sym
#                          with PERF=1 only: this machine's perf and the
#                          libraries it loads, xz-compressed (about 7 MB),
#                          and the release binary with its symbols (not its
#                          debug info), for profiles where perf is missing:
#                          DIR/perf.sh record -g DIR/depengine-sym bench ...
#                          (perf.sh unpacks on first use, beside
#                          MXNet's libraries; perf's own arguments
#                          otherwise)
#   Copy the repository and DIR there (DIR inside the repository, git-ignored,
#   travels with it) and run DIR/run.sh from the repository root.
# Environment: CARGO_TARGET_DIR as for bench-peers.sh; XZ_LEVEL (default 6);
# DEPENGINE_ALT (see above) with DEPENGINE_ALT_FROM, words on its origin;
# ALT_REV=COMMIT, built here in a temporary worktree (its own target
# folder, $CARGO_TARGET_DIR/alt-<commit>) when DEPENGINE_ALT is not set;
# PERF=1 (see above).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -eq 1 ]] || { sed -n '2,46p' "$0"; exit 2; }
OUT=$1
TARGET=${CARGO_TARGET_DIR:-$(pwd)/target}
PEERS=$TARGET/peers
# A peer whose driver is not built here (its package missing on this
# machine) stays out of the bundle; SYSTEMS there must then leave it out.
DRIVERS=()
for f in starpu openmp-gomp openmp-libomp tbb_flow mxnet_engine; do
  if [[ -f $PEERS/$f ]]; then
    DRIVERS+=("$PEERS/$f")
  else
    echo "note: $PEERS/$f is not built; that peer stays out of the bundle" >&2
  fi
done
RAYON=$PEERS/rayon-target/release/depengine-rayon-peer
[[ -f $RAYON ]] || echo "note: $RAYON is not built; rayon stays out of the bundle" >&2
LEAN=$PEERS/lean-target/release/depengine-lean-control
[[ -f $LEAN ]] || echo "note: $LEAN is not built; the lean control stays out of the bundle" >&2
((${#DRIVERS[@]} > 0)) || [[ -f $RAYON ]] ||
  { echo "no peer driver in $PEERS: run scripts/bench-peers.sh first" >&2; exit 1; }
# A bundle packed before is replaced whole: what its runs left there
# (their results; before run.sh unpacked elsewhere, MXNet's libraries and
# perf) would otherwise travel too, past what a lent machine is sent
# (64 MiB).
if [[ -e $OUT ]]; then
  if [[ -f $OUT/BUILT_FROM ]]; then
    rm -rf "$OUT"
  elif [[ -n $(ls -A "$OUT") ]]; then
    echo "$OUT is not empty and holds no bundle: give a new folder" >&2
    exit 2
  fi
fi
cargo build --release --quiet
ALT_FROM=${DEPENGINE_ALT_FROM:-not recorded}
if [[ -z ${DEPENGINE_ALT:-} && -n ${ALT_REV:-} ]]; then
  rev=$(git rev-parse --verify --quiet "$ALT_REV^{commit}") ||
    { echo "ALT_REV=$ALT_REV is not a commit of this repository" >&2; exit 2; }
  ALT_TREE=$(mktemp -d)
  git worktree add --quiet --detach "$ALT_TREE" "$rev"
  CARGO_TARGET_DIR=$TARGET/alt-${rev:0:12} cargo build --release --quiet --manifest-path "$ALT_TREE/Cargo.toml" ||
    { git worktree remove --force "$ALT_TREE"; echo "ALT_REV=$ALT_REV did not build" >&2; exit 1; }
  git worktree remove --force "$ALT_TREE"
  DEPENGINE_ALT=$TARGET/alt-${rev:0:12}/release/depengine
  ALT_FROM=$(git describe --always "$rev")
fi
mkdir -p "$OUT/peers/rayon-target/release" "$OUT/peers/lean-target/release" "$OUT/peers/mxnet" "$OUT/lib"
strip -o "$OUT/depengine" "$TARGET/release/depengine"
if [[ -n ${DEPENGINE_ALT:-} ]]; then
  strip -o "$OUT/depengine-alt" "$DEPENGINE_ALT"
fi
[[ -f $RAYON ]] && strip -o "$OUT/peers/rayon-target/release/depengine-rayon-peer" "$RAYON"
[[ -f $LEAN ]] && strip -o "$OUT/peers/lean-target/release/depengine-lean-control" "$LEAN"
((${#DRIVERS[@]} == 0)) || cp "${DRIVERS[@]}" "$OUT/peers/"
# MXNet's own libraries (150 MB as they are) travel compressed, with its
# driver only.
if [[ -f $PEERS/mxnet_engine ]]; then
  for l in libmxnet.so libopenblas.so.0 libgfortran.so.3; do
    xz "-${XZ_LEVEL:-6}" -T0 -c "$PEERS/mxnet/$l" >"$OUT/peers/mxnet/$l.xz"
  done
fi
# copy_libs DEST BIN...: copies every library the binaries load into DEST,
# but glibc's, which the other machine has (a newer one runs binaries
# linked against an older one), and MXNet's own, which travel compressed.
copy_libs() {
  local dest=$1 b lib
  shift
  for b in "$@"; do ldd "$b"; done |
    awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
      case $(basename "$lib") in
        libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*) ;;
        libmxnet.so|libopenblas.so.0|libgfortran.so.3) ;;
        *) cp -L "$lib" "$dest/" ;;
      esac
    done
}
LIBBINS=()
for b in "${DRIVERS[@]}"; do
  [[ $(basename "$b") == mxnet_engine ]] && LIBBINS+=("$PEERS/mxnet/libmxnet.so") || LIBBINS+=("$b")
done
((${#LIBBINS[@]} == 0)) || copy_libs "$OUT/lib" "${LIBBINS[@]}"
cat >"$OUT/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs scripts/bench-peers.sh on the binaries of this bundle (see
# scripts/bench-peers-bundle.sh); run from the repository root.
set -euo pipefail
B=$(cd "$(dirname "$0")" && pwd)
# MXNet's libraries are unpacked outside the bundle (150 MB), so that the
# bundle stays the size it travels at however often it is run.
U=${BUNDLE_UNPACK:-${TMPDIR:-/tmp}/depengine-bundle-$(printf '%s\n' "$B" "$(cat "$B/BUILT_FROM" 2>/dev/null)" | cksum | cut -d' ' -f1)}
mkdir -p "$U/mxnet"
shopt -s nullglob
for z in "$B"/peers/mxnet/*.xz; do
  l=$U/mxnet/$(basename "${z%.xz}")
  [[ -f $l ]] || xz -dc "$z" >"$l.part" 2>/dev/null ||
    python3 -c 'import lzma, sys; open(sys.argv[2], "wb").write(lzma.open(sys.argv[1]).read())' "$z" "$l.part"
  [[ -f $l ]] || mv "$l.part" "$l"
done
export LD_LIBRARY_PATH=$B/lib:$U/mxnet${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [[ -f $B/depengine-alt ]]; then
  export DEPENGINE_ALT=${DEPENGINE_ALT:-$B/depengine-alt}
fi
NO_BUILD=1 PEERS=$B/peers DEPENGINE=${DEPENGINE:-$B/depengine} exec bash scripts/bench-peers.sh
RUN
chmod +x "$OUT/run.sh"
# What the binaries were built from, for the figures measured with them
# (scripts/bench-many-cores.sh copies it into its machine.txt).
echo "$(git describe --always --dirty 2>/dev/null || echo unknown) packed $(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$OUT/BUILT_FROM"
if [[ -f $OUT/depengine-alt ]]; then
  echo "depengine-alt: $ALT_FROM" >>"$OUT/BUILT_FROM"
fi
if [[ ${PERF:-0} == 1 ]]; then
  PERF_BIN=$(command -v perf) || { echo "PERF=1: no perf on this machine" >&2; exit 1; }
  strip --strip-debug -o "$OUT/depengine-sym" "$TARGET/release/depengine"
  STAGE=$(mktemp -d)
  trap 'rm -rf "$STAGE"' EXIT
  mkdir -p "$STAGE/lib"
  cp -L "$PERF_BIN" "$STAGE/perf"
  copy_libs "$STAGE/lib" "$PERF_BIN"
  tar -C "$STAGE" -cf - . | xz "-${XZ_LEVEL:-6}" -T0 >"$OUT/perf.tar.xz"
  cat >"$OUT/perf.sh" <<'PERF'
#!/usr/bin/env bash
# Runs the perf packed in this bundle (scripts/bench-peers-bundle.sh, PERF=1).
set -euo pipefail
B=$(cd "$(dirname "$0")" && pwd)
# Unpacked outside the bundle, as run.sh does MXNet's libraries.
U=${BUNDLE_UNPACK:-${TMPDIR:-/tmp}/depengine-bundle-$(printf '%s\n' "$B" "$(cat "$B/BUILT_FROM" 2>/dev/null)" | cksum | cut -d' ' -f1)}/perf
if [[ ! -x $U/perf ]]; then
  mkdir -p "$U"
  xz -dc "$B/perf.tar.xz" 2>/dev/null | tar -C "$U" -xf - ||
    python3 -c 'import lzma, sys, tarfile; tarfile.open(fileobj=lzma.open(sys.argv[1])).extractall(sys.argv[2])' \
      "$B/perf.tar.xz" "$U"
fi
LD_LIBRARY_PATH=$U/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec "$U/perf" "$@"
PERF
  chmod +x "$OUT/perf.sh"
fi
du -sh "$OUT"
