#!/usr/bin/env bash
# A/B of allocator builds on a machine whose CPU speed changes in phases of
# seconds (the GPU machines: bench/RESULTS.md): many short alloc_bench runs,
# the variants alternating, pinned to one CPU; per variant and pattern the
# minimum and the median over the rounds.
#   bench/alloc_ab.sh NAME=ALLOC_BENCH [NAME=ALLOC_BENCH ...]
# Environment: ROUNDS (default 20), CPU (default the highest-numbered one),
# UPSTREAM (default host: the same CPU-side code as cuda, and it needs no GPU),
# PATTERNS (default hot,mixed).
set -euo pipefail
[[ $# -ge 1 ]] || { echo "usage: $0 NAME=ALLOC_BENCH [NAME=ALLOC_BENCH ...]" >&2; exit 2; }
ROUNDS="${ROUNDS:-20}"
CPU="${CPU:-$(($(nproc) - 1))}"
UPSTREAM="${UPSTREAM:-host}"
PATTERNS="${PATTERNS:-hot,mixed}"
names=(); exes=()
for arg in "$@"; do
  [[ $arg == *=* ]] || { echo "$0: expected NAME=PATH, got '$arg'" >&2; exit 2; }
  names+=("${arg%%=*}"); exes+=("${arg#*=}")
  [[ -x ${arg#*=} ]] || { echo "$0: ${arg#*=} is not an executable" >&2; exit 2; }
done
RAW="$(mktemp)"; trap 'rm -f "$RAW"' EXIT
for ((r = 0; r < ROUNDS; ++r)); do
  for i in "${!exes[@]}"; do
    taskset -c "$CPU" "${exes[$i]}" --upstream "$UPSTREAM" --patterns "$PATTERNS" --quick --reps 3 2>&1 |
      sed -n 's/^RESULT .* pattern=\([^ ]*\) size=\([^ ]*\) .*ns_per_pair=\([0-9.]*\).*/\1\/\2 \3/p' |
      sed "s/^/${names[$i]} /" >>"$RAW"
  done
done
echo "# $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $ROUNDS rounds, CPU $CPU, upstream $UPSTREAM; ns per pair"
python3 - "$RAW" "${names[@]}" <<'PY'
import collections, statistics, sys
raw, names = sys.argv[1], sys.argv[2:]
d = collections.defaultdict(list)
for line in open(raw):
    v, k, x = line.split()
    d[(k, v)].append(float(x))
print("| pattern | " + " | ".join(f"{n} min / median" for n in names) + " |")
print("|---|" + "---:|" * len(names))
for k in sorted({k for k, _ in d}):
    cells = []
    for n in names:
        xs = d.get((k, n), [])
        cells.append(f"{min(xs):.1f} / {statistics.median(xs):.1f}" if xs else "-")
    print(f"| {k} | " + " | ".join(cells) + " |")
PY
