#!/usr/bin/env bash
# Instructions per allocator operation (cachegrind/callgrind), deterministic:
# the figures to compare allocator changes by on a machine whose timings move
# more than the change (see bench/alloc_icount.cpp).
#   bench/alloc_icount.sh [BUILD_DIR]     (default: build; needs valgrind)
# GENESIS_ALLOC_CONF=TEXT runs every pattern under those allocator options.
# Prints instructions per alloc+free pair (hot 512 B / 64 KiB / 2 MiB, `mixed`
# on the host upstream and on the simulated device) and per event of the GPT-2
# trace replay (timed loop only), for the default and classic configurations.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
command -v valgrind >/dev/null || { echo "alloc_icount.sh: valgrind not found (apt-get install valgrind)" >&2; exit 2; }
for exe in alloc_icount genesis-mem; do
  [[ -x $BUILD/$exe ]] || { echo "alloc_icount.sh: $BUILD/$exe not built" >&2; exit 2; }
done
TMP="$(mktemp -d)"; trap 'rm -rf "$TMP"' EXIT

# Total instructions of one run of "$@".
instr() {
  valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
    sed -n 's/.*I *refs: *\([0-9,]*\).*/\1/p' | tr -d ,
}
per_pair() {  # label, n, command with PAIRS in it
  local label=$1 n=$2; shift 2
  local a b
  a=$(instr "${@/PAIRS/$n}")
  b=$(instr "${@/PAIRS/$((2 * n))}")
  printf '%-28s %6d instructions per alloc+free pair\n' "$label" $(((b - a) / n))
}
per_pair "hot 512 B" 100000 "$BUILD/alloc_icount" hot 512 PAIRS
per_pair "hot 64 KiB" 100000 "$BUILD/alloc_icount" hot 65536 PAIRS
per_pair "hot 2 MiB" 100000 "$BUILD/alloc_icount" hot 2097152 PAIRS
per_pair "mixed (host)" 200000 "$BUILD/alloc_icount" mixed PAIRS
per_pair "mixed (sim, expandable)" 200000 "$BUILD/alloc_icount" mixed PAIRS sim

TRACE="$ROOT/data/traces/gpt2_train.trace.csv.gz"
for config in genesis genesis-classic; do
  valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.out" --toggle-collect='*replay_range*' \
    "$BUILD/genesis-mem" replay "$TRACE" --config "$config" ${GENESIS_ALLOC_CONF:+--alloc-conf "$GENESIS_ALLOC_CONF"} --repeat 5 --warmup 0 --no-progress --json \
    >"$TMP/r.json" 2>"$TMP/err" || { cat "$TMP/err" >&2; exit 1; }
  total=$(sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$TMP/cg.out" | head -1)
  events=$(sed -n 's/^ *"events": *\([0-9]*\).*/\1/p' "$TMP/r.json" | head -1)
  printf '%-28s %6d instructions per event (timed loop, %s events x 5)\n' "replay $config" $((total / (5 * events))) "$events"
done
