#!/usr/bin/env bash
# The memory debugger on a GPU machine: genesis-mem watching real jobs
# through NVML, through a Genesis program's published figures and in
# process, plus the debugger's cost. Called by scripts/device_gpu.sh (stage
# "debugger") after the build; usable alone:
#
#   scripts/debugger_gpu.sh BUILD_DIR OUT_DIR
#
# Writes OUT_DIR/debugger.log (everything, with the figures as RESULT lines)
# and OUT_DIR/debugger_reports.tgz (the JSON/HTML/PNG reports). Exit status
# nonzero when a check failed.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:?build dir}"
OUT="${2:?out dir}"
cd "$ROOT"
GM="$BUILD/genesis-mem"
R="$OUT/debugger_reports"
mkdir -p "$R"
export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
PY="${PYTHON:-python3}"
fails=0
check() {  # check NAME CONDITION-COMMAND...
  local name="$1"; shift
  if "$@"; then echo "CHECK $name PASS"; else echo "CHECK $name FAIL"; fails=$((fails + 1)); fi
}
jq_py() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

{
date -u
"$GM" --version
nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv

echo "== NVML: every GPU for 3 s"
"$GM" profile --duration 3 -o "$R/nvml_profile.json"
check nvml_profile test -s "$R/nvml_profile.json"

echo "== PyTorch GPT-2 alone, then watched through NVML (genesis-mem profile -- python3 ...)"
"$PY" bench/debugger/torch_train.py --steps 120 | tee "$R/torch_alone.json"
"$GM" profile --interval 0.1 --duration 0 -o "$R/torch_profile.json" --plot --html "$R/torch_profile.html" \
  -- "$PY" bench/debugger/torch_train.py --steps 120 | tee "$R/torch_watched.txt"
check torch_profile test -s "$R/torch_profile.json"
"$PY" - "$R" <<'PYEOF'
import json, sys, re
r = sys.argv[1]
alone = json.loads(open(f"{r}/torch_alone.json").read().strip().splitlines()[-1])
watched_lines = [l for l in open(f"{r}/torch_watched.txt").read().splitlines() if l.startswith("{")]
prof = json.load(open(f"{r}/torch_profile.json"))
dev = prof["devices"]["0"]
print(f"RESULT what=torch_watch steps_per_s_alone={alone['steps_per_s']} "
      f"steps_per_s_watched={json.loads(watched_lines[-1])['steps_per_s'] if watched_lines else 'n/a'} "
      f"torch_peak_reserved={alone['peak_reserved']} genesis_mem_peak_used={dev.get('peaks', {}).get('used')} "
      f"samples={dev['statistics']['num_snapshots']}")
PYEOF

echo "== a planted leak in PyTorch, seen by the driver (8 MiB per step)"
"$GM" leak --threshold 10 --window 10 --duration 0 -o "$R/torch_leak.json" \
  -- "$PY" bench/debugger/torch_train.py --steps 250 --leak-mb 8 | tail -20
jq_py "$R/torch_leak.json" 'd["devices"]["0"]["leak_detected"], d["devices"]["0"]["growth_rate_mb_per_min"]'

echo "== a Genesis job with a planted leak, its sites published to the watcher"
"$GM" leak --threshold 10 --window 8 --enable-tracking --check --duration 0 -o "$R/genesis_leak.json" \
  -- "$PY" bench/debugger/genesis_job.py --seconds 30 --leak-mb 4 | tail -25
rc=${PIPESTATUS[0]}
check genesis_leak_check_exit3 test "$rc" -eq 3
jq_py "$R/genesis_leak.json" 'd["devices"]["0"]["leak_detected"], d["devices"]["0"]["growth_rate_mb_per_min"], [s["site"] for s in d["devices"]["0"]["sites"][:2]]'
check genesis_leak_site grep -q "genesis_job.py" "$R/genesis_leak.json"

echo "== the same job with no leak: no leak reported"
"$GM" leak --threshold 10 --window 8 --enable-tracking --check --duration 0 -o "$R/genesis_noleak.json" \
  -- "$PY" bench/debugger/genesis_job.py --seconds 20 | tail -8
check genesis_noleak_exit0 test "${PIPESTATUS[0]}" -eq 0

echo "== OOM prediction: a PyTorch job that grows 4 GiB/s until it runs out"
"$GM" oom --threshold 85 --monitor --interval 0.1 --duration 0 -o "$R/torch_oom.json" \
  -- "$PY" bench/debugger/torch_train.py --steps 100000 --grow-gb-per-s 4 --batch 2 --seq 128 2>&1 | tail -15

echo "== in process: MemoryDebugger on a Genesis job (sites tracked)"
"$PY" bench/debugger/genesis_job.py --in-process --seconds 30 --leak-mb 4 | tee "$R/genesis_inprocess.json"

echo "== interactive view, 3 frames as text"
"$GM" interactive --frames 3 --plain --interval 0.2

echo "== sampler cost, history bound, trace at max speed"
"$BUILD/debug_bench" --seconds 5

echo "== site tracking cost from Python on the GPU"
[[ -f python/bench/bench_sites.py ]] && "$PY" python/bench/bench_sites.py 2>&1 | tail -20

echo "checks failed: $fails"
} 2>&1 | tee "$OUT/debugger.log"
(cd "$OUT" && tar czf debugger_reports.tgz debugger_reports && rm -rf debugger_reports)
grep -q "checks failed: 0" "$OUT/debugger.log"
