#!/usr/bin/env bash
# Allocator round-trip benchmark on a machine without a GPU: Genesis over
# HostResource and SimulatedDevice (the same caching code that runs over
# cudaMalloc on the GPU machine; see scripts/bench_alloc_gpu.sh there).
#
#   scripts/bench_alloc_cpu.sh [BUILD_DIR] [extra alloc_bench options, e.g. --quick]
#
# BUILD_DIR: $1, else $GENESIS_BUILD_DIR, else build. alloc_bench is built
# there first if needed (Release, Ninja, -j$JOBS, default 2). Raw output goes
# to $OUT (default ./out): alloc_bench_cpu.log / .json; the table goes to
# stdout and to $OUT/alloc_results_cpu.md.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

BUILD="${GENESIS_BUILD_DIR:-build}"
if [[ $# -gt 0 && $1 != -* ]]; then
  BUILD="$1"
  shift
fi
BENCH_ARGS=("$@")
OUT="${OUT:-./out}"
JOBS="${JOBS:-2}"
mkdir -p "$OUT"

if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  echo "==> configure $BUILD (Release)"
  gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S "$ROOT" -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release >"$OUT/configure_cpu.log" 2>&1 || {
    cat "$OUT/configure_cpu.log"
    echo "configure failed"
    exit 1
  }
fi
echo "==> build $BUILD: alloc_bench"
cmake --build "$BUILD" --target alloc_bench -j "$JOBS" >"$OUT/build_cpu.log" 2>&1 || {
  tail -50 "$OUT/build_cpu.log"
  echo "build failed"
  exit 1
}

LOG="$OUT/alloc_bench_cpu.log"
echo "==> $BUILD/alloc_bench --upstream host,sim ${BENCH_ARGS[*]} --json $OUT/alloc_bench_cpu.json"
"$BUILD/alloc_bench" --upstream host,sim "${BENCH_ARGS[@]}" --json "$OUT/alloc_bench_cpu.json" >"$LOG" 2>&1
status=$?
[[ $status -ne 0 ]] && { tail -30 "$LOG"; echo "alloc_bench exited with status $status"; }

CPU="$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -1), $(nproc) cores"
COMMAND="scripts/bench_alloc_cpu.sh $BUILD${BENCH_ARGS[*]:+ ${BENCH_ARGS[*]}}"
DATE="$(date -u '+%Y-%m-%d %H:%M:%S UTC')"

DATE="$DATE" CPU="$CPU" COMMAND="$COMMAND" NPROC="$(nproc)" \
python3 - "$OUT/alloc_results_cpu.md" "$LOG" <<'PY'
import os
import sys

out_path, log = sys.argv[1], sys.argv[2]
results = []
with open(log, encoding="utf-8", errors="replace") as f:
    for line in f:
        if line.startswith("RESULT "):
            r = dict(tok.split("=", 1) for tok in line.split()[1:] if "=" in tok)
            for k in ("ns_per_pair", "speedup"):
                if k in r:
                    r[k] = float(r[k])
            results.append(r)

MiB = 1 << 20
SIZES = [512, 64 << 10, 1 * MiB, 8 * MiB, 256 * MiB]


def size_label(n):
    if n >= MiB and n % MiB == 0:
        return f"{n // MiB} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} B"


nproc = int(os.environ.get("NPROC", "1"))
ROWS = [(f"hot {size_label(s)}", "hot", str(s), "1", "ns", 25.0) for s in SIZES]
ROWS.append(("mixed, 64 live (random sizes)", "mixed", "mixed", "1", "ns", 60.0))
ROWS.append(("mixed, 64 live (64-size set)", "mixed_set", "mixed", "1", "ns", 60.0))
for pat, size, what in (("threads_hot", str(MiB), "hot 1 MiB"), ("threads_mixed", "mixed", "mixed random"),
                        ("threads_mixed_set", "mixed", "mixed 64-size set")):
    for n in ("1", "4", "8"):
        goal = ("speedup", 6.0) if n == "8" else (None, None)
        ROWS.append((f"{n} thr {what}", pat, size, n) + goal)

COLS = [
    ("sim", {"allocator": "genesis", "upstream": "sim", "api": "ptr", "events": "off"}),
    ("sim, handle API", {"allocator": "genesis", "upstream": "sim", "api": "block"}),
    ("sim, events on", {"allocator": "genesis", "upstream": "sim", "api": "ptr", "events": "on"}),
    ("host", {"allocator": "genesis", "upstream": "host", "api": "ptr", "events": "off"}),
    ("host, handle API", {"allocator": "genesis", "upstream": "host", "api": "block"}),
    ("host, events on", {"allocator": "genesis", "upstream": "host", "api": "ptr", "events": "on"}),
]


def find(sel, pattern, size, threads):
    for r in results:
        if (r.get("pattern"), r.get("size"), r.get("threads")) != (pattern, size, threads):
            continue
        if all(r.get(k, "off" if k == "events" else None) == v for k, v in sel.items()):
            return r
    return None


def cell(r):
    if r is None:
        return "-"
    s = f"{r['ns_per_pair']:.1f}"
    if "speedup" in r and r["threads"] != "1":
        s += f" ({r['speedup']:.2f}x)"
    return s


head = ["pattern"] + [c[0] for c in COLS] + ["goal", "met (sim)"]
lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
for label, pattern, size, threads, kind, value in ROWS:
    found = [find(sel, pattern, size, threads) for _, sel in COLS]
    if all(f is None for f in found):
        continue
    goal, ok = "", ""
    r = found[0]
    if kind == "ns":
        goal = f"<= {value:g} ns"
        ok = "n/a" if r is None else ("yes" if r["ns_per_pair"] <= value else "NO")
    elif kind == "speedup":
        goal = f">= {value:g}x"
        if nproc < int(threads):
            ok = f"n/a ({nproc} cores)"
        else:
            ok = "n/a" if r is None or "speedup" not in r else ("yes" if r["speedup"] >= value else "NO")
    lines.append("| " + " | ".join([label] + [cell(f) for f in found] + [goal, ok]) + " |")

env = os.environ
md = [
    "# Allocator round trips, CPU-only machine (Genesis over SimulatedDevice and HostResource)",
    "",
    f"- date: {env.get('DATE', '')}",
    f"- CPU: {env.get('CPU', '')}",
    f"- command: `{env.get('COMMAND', '')}` (raw output: {os.path.basename(log)})",
    "",
    "ns per alloc+free pair, median. Thread rows: wall / total pairs (aggregate speedup vs 1 thread).",
    "The goals are stated for the GPU machine (Genesis over cudaMalloc); the simulated device runs the",
    "same caching code, so its column is the closest figure a CPU-only machine can give.",
    "",
    "\n".join(lines),
]
if not results:
    md += ["", "No RESULT lines were found: see " + log]
text = "\n".join(md) + "\n"
with open(out_path, "w", encoding="utf-8") as f:
    f.write(text)
print()
print(text)
PY
[[ $? -ne 0 ]] && status=1
exit $status
