#!/usr/bin/env bash
# The trace corpus on a GPU machine: builds genesis-mem (CUDA, sm_90),
# records the workloads of bench/torch/record_traces.py with PyTorch's
# native allocator (each converted to a CSV trace by genesis-mem convert,
# with its sidecar: PyTorch's peaks under native, expandable_segments and
# cudaMallocAsync), then replays the whole corpus with
# `genesis-mem replay --corpus` on the simulated device and on the GPU.
# Five or six workloads (GENESIS_TRACE_WORKLOADS, below) fit one 10-minute
# command, the build included; all sixteen take three.
#
#   scripts/record_traces_gpu.sh            (from the repository root)
#
# Expected machine: as scripts/torch_gpu.sh (CUDA in /usr/local/cuda; torch,
# transformers, torchvision in /opt/torch/.venv/bin; a cpp-httplib header may
# be carried in .deps/httplib). Results go to $OUT (default build/):
#   traces/NAME.trace.csv.gz, traces/NAME.json   the corpus (CSV traces and sidecars)
#   traces/replay_sim.json, traces/replay_cuda.json   genesis-mem replay --corpus --json
#   snapshots/NAME.pickle.gz   PyTorch's snapshots, gzip -1 (genesis-mem reads them as they are)
#   traces_build.log      versions, configure and build output
#   traces_record.log     record_traces.py output (one JSON line per run)
#   traces_replay_sim.txt     genesis-mem replay --corpus, simulated device
#   traces_replay_cuda.txt    the same on GPU 0 (cudaMalloc / the driver's VMM)
#   traces_summary.txt    one line per stage, with its seconds
# With GENESIS_TRACE_PACK=1, traces/ and snapshots/ are packed into
# traces.tar and snapshots.tar at the end (for runners that bring back only
# a few files).
# GENESIS_TRACE_SCALE scales the workloads (default 1); GENESIS_TRACE_SETTINGS
# (default native,expandable_segments,cudaMallocAsync) picks PyTorch's
# settings; GENESIS_TRACE_WORKLOADS (comma list, default all) the workloads;
# GENESIS_TRACE_STAGES (default build,record,replay) the stages. A warm
# machine keeps $BUILD (build-traces), so a second call needs no build.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="${OUT:-$ROOT/build}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
TRACES="$OUT/traces"
BUILD="${GENESIS_TRACES_BUILD_DIR:-$ROOT/build-traces}"
JOBS="${JOBS:-16}"
WANT="${GENESIS_TRACE_STAGES:-build,record,replay}"
want() { [[ ",$WANT," == *",$1,"* ]]; }
SUMMARY="$OUT/traces_summary.txt"
: >"$SUMMARY"
record() { echo "[$1] $2 ${3:-}" | tee -a "$SUMMARY"; }
log() { printf '\n==> %s\n' "$*"; }
# One 10-minute command: every stage gets what is left of the budget, less
# a reserve for the stages after it.
BUDGET="${GENESIS_TRACE_BUDGET_S:-570}"
left() { local n=$(( BUDGET - SECONDS - $1 )); echo $(( n < 10 ? 10 : n )); }

for d in /opt/torch/.venv/bin /usr/local/cuda/bin; do
  [[ -d $d && ":$PATH:" != *":$d:"* ]] && PATH="$d:$PATH"
done
# The system g++, not /opt/gcc (scripts/device_gpu.sh says why).
PATH="$(tr ':' '\n' <<<"$PATH" | grep -v '^/opt/gcc' | paste -sd: -)"
export PATH
unset CC CXX CUDAHOSTCXX
PY="$(command -v python3)"
MEM="$BUILD/genesis-mem"

# ----------------------------------------------------------------- build ---
# The build (minutes: the whole library, CUDA included) runs beside the
# recordings, which need no genesis-mem until their conversion; it is niced
# and leaves a few cores to the recording processes.
BUILD_PID=""
if want build; then
  (
    date -u
    nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv 2>&1
    nvcc --version 2>&1 | tail -1
    "$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
    "$PY" -c 'import transformers, torchvision; print("transformers", transformers.__version__, "torchvision", torchvision.__version__)' 2>&1
    "$PY" -c 'import importlib.util as u; print("diffusers", "installed" if u.find_spec("diffusers") else "absent")' 2>&1
    if [[ -f "$BUILD/CMakeCache.txt" ]] && ! grep -q "^CMAKE_CXX_COMPILER:[A-Z]*=/usr/bin/g++$" "$BUILD/CMakeCache.txt"; then
      rm -rf "$BUILD"
    fi
    args=(-S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DGENESIS_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
          -DGENESIS_BUILD_TESTS=OFF -DGENESIS_BUILD_BENCH=OFF -DGENESIS_BUILD_EXAMPLES=OFF -DGENESIS_BUILD_TOOLS=ON
          -DGENESIS_BUILD_PYTHON=OFF -DGENESIS_INSTALL=OFF)
    [[ -f "$BUILD/CMakeCache.txt" ]] || args+=(-G Ninja)
    if [[ -x /usr/bin/g++ ]]; then
      args+=(-DCMAKE_C_COMPILER=/usr/bin/gcc -DCMAKE_CXX_COMPILER=/usr/bin/g++ -DCMAKE_CUDA_HOST_COMPILER=/usr/bin/g++)
    fi
    # The GPU image has no cpp-httplib package: a copy of its header may be
    # carried in .deps/httplib.
    [[ -f "$ROOT/.deps/httplib/httplib.h" ]] && args+=(-DGENESIS_HTTPLIB_INCLUDE_DIR="$ROOT/.deps/httplib")
    nice -n 10 cmake "${args[@]}" && timeout "$(left 150)" nice -n 10 cmake --build "$BUILD" -j "$JOBS" --target genesis-mem
  ) >"$OUT/traces_build.log" 2>&1 &
  BUILD_PID=$!
fi
wait_build() {
  [[ -n $BUILD_PID ]] || return 0
  wait "$BUILD_PID"
  local rc=$?
  BUILD_PID=""
  tail -3 "$OUT/traces_build.log"
  record build "$([[ $rc == 0 && -x $MEM ]] && echo PASS || echo FAIL)" "done at $SECONDS s"
}

# ---------------------------------------------------------------- record ---
if want record; then
  log "record: bench/torch/record_traces.py -> $TRACES"
  t0=$SECONDS
  mkdir -p "$TRACES"
  wl=(); [[ -n ${GENESIS_TRACE_WORKLOADS:-} ]] && wl=(--workloads "$GENESIS_TRACE_WORKLOADS")
  # Stopped at its deadline, record_traces.py still leaves every recording it
  # finished, each with its sidecar; the convert step takes whatever is there.
  timeout "$(left 110)" "$PY" bench/torch/record_traces.py record --out "$TRACES" --no-convert \
      --settings "${GENESIS_TRACE_SETTINGS:-native,expandable_segments,cudaMallocAsync}" --parallel 4 "${wl[@]}" \
      2>&1 | tee "$OUT/traces_record.log"
  rc=${PIPESTATUS[0]}
  record record "$([[ $rc == 0 ]] && echo PASS || echo FAIL)" "$(( SECONDS - t0 )) s (rc $rc)"
  wait_build
  log "convert: genesis-mem convert, each snapshot to NAME.trace.csv.gz"
  t0=$SECONDS
  if [[ -x $MEM ]]; then
    timeout "$(left 80)" "$PY" bench/torch/record_traces.py convert --out "$TRACES" --genesis-mem "$MEM" \
        2>&1 | tee -a "$OUT/traces_record.log"
    rc=${PIPESTATUS[0]}
  else
    rc=1
  fi
  mkdir -p "$OUT/snapshots"
  for p in "$TRACES"/*.pickle; do
    [[ -f $p ]] && gzip -1 -c "$p" >"$OUT/snapshots/$(basename "$p").gz" && rm -f "$p"
  done
  n=$(ls "$TRACES"/*.trace.csv.gz 2>/dev/null | wc -l)
  record convert "$([[ $rc == 0 ]] && echo PASS || echo FAIL)" "$n traces, $(( SECONDS - t0 )) s (rc $rc)"
fi
wait_build
if [[ ! -x $MEM ]]; then
  record replay FAIL "no genesis-mem in $BUILD (see traces_build.log)"
  cat "$SUMMARY"
  exit 1
fi

# ---------------------------------------------------------------- replay ---
if want replay; then
  for dev in sim cuda; do
    log "replay --corpus $TRACES --device $dev"
    t0=$SECONDS
    timeout "$(left 30)" "$MEM" replay --corpus "$TRACES" --device "$dev" --no-progress \
        >"$OUT/traces_replay_$dev.txt" 2>&1
    rc=$?
    cat "$OUT/traces_replay_$dev.txt"
    timeout "$(left 10)" "$MEM" replay --corpus "$TRACES" --device "$dev" --no-progress --json \
        >"$OUT/replay_$dev.json.part" 2>>"$OUT/traces_replay_$dev.txt"
    mv "$OUT/replay_$dev.json.part" "$TRACES/replay_$dev.json"
    record "replay-$dev" "$([[ $rc == 0 ]] && echo PASS || echo FAIL)" "$(( SECONDS - t0 )) s (rc $rc)"
  done
fi

if [[ ${GENESIS_TRACE_PACK:-0} == 1 ]]; then
  for d in traces snapshots; do
    [[ -d "$OUT/$d" ]] && tar -C "$OUT" -cf "$OUT/$d.tar" "$d" && rm -rf "${OUT:?}/$d"
  done
fi

log "summary"
cat "$SUMMARY"
! grep -q FAIL "$SUMMARY"
