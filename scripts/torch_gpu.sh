#!/usr/bin/env bash
# Genesis inside PyTorch and CuPy on a GPU machine: builds what genesis.torch
# needs (CUDA, sm_90: the Python module and libgenesis_torch_allocator.so),
# records a snapshot with PyTorch's own allocator, runs the tests, a short
# training loop under compute-sanitizer, the real jobs under PyTorch's
# allocator, its expandable segments and Genesis, and the largest-batch
# search under a fixed memory budget.
#
#   scripts/torch_gpu.sh            (from the repository root)
#
# Expected machine: as scripts/device_gpu.sh (CUDA in /usr/local/cuda, the
# venv with torch, transformers, torchvision, CuPy in /opt/torch/.venv/bin;
# a cpp-httplib header may be carried in .deps/httplib). Results go to $OUT
# (default ./out):
#   torch_build.log       versions, configure and build output
#   torch_tests.log       pytest of the PyTorch/CuPy adaptors (and their CPU halves)
#   torch_sanitizer.log   compute-sanitizer --tool memcheck on bench/torch/sanitize_step.py
#   torch_reference_snapshot.pickle  a snapshot recorded by PyTorch's allocator
#   torch_reference_snapshot.pickle.gz  the same, gzipped (data/snapshots/pytorch_reference.pickle.gz)
#   torch_jobs.log / torch_jobs.json      bench/torch/jobs.py all
#   torch_search.json     bench/torch/jobs.py search-all
#   torch_summary.txt     one line per stage
# GENESIS_TORCH_STAGES (comma list, default all): build, snapshot, tests,
# sanitizer, jobs, search. A warm machine keeps $BUILD (build-torch), so a
# second call with GENESIS_TORCH_STAGES=jobs,search needs no build.
# GENESIS_TORCH_STEPS_SCALE scales the jobs' steps (default 1);
# GENESIS_TORCH_REPEATS is the rounds of every job x allocator (default 3,
# the order rotated each round; the summary pairs each run with PyTorch
# native's of the same round);
# GENESIS_TORCH_ALLOCATORS picks the jobs' allocators (default
# native,expandable,genesis,genesis-classic);
# GENESIS_TORCH_BUDGET_GB is the search's budget (default 12).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="${OUT:-$ROOT/out}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
BUILD="${GENESIS_TORCH_BUILD_DIR:-$ROOT/build-torch}"
JOBS="${JOBS:-16}"
WANT="${GENESIS_TORCH_STAGES:-build,snapshot,tests,sanitizer,jobs,search}"
want() { [[ ",$WANT," == *",$1,"* ]]; }
SUMMARY="$OUT/torch_summary.txt"
: >"$SUMMARY"
record() { echo "[$1] $2 ${3:-}" | tee -a "$SUMMARY"; }
log() { printf '\n==> %s\n' "$*"; }
stamp() { date +%s; }

for d in /opt/torch/.venv/bin /usr/local/cuda/bin; do
  [[ -d $d && ":$PATH:" != *":$d:"* ]] && PATH="$d:$PATH"
done
# The system g++, not /opt/gcc (whose static libstdc++ would put a second C++
# runtime into the process next to torch's: scripts/device_gpu.sh).
PATH="$(tr ':' '\n' <<<"$PATH" | grep -v '^/opt/gcc' | paste -sd: -)"
export PATH
unset CC CXX CUDAHOSTCXX
PY="$(command -v python3)"
export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"

# ----------------------------------------------------------------- build ---
if want build; then
  t0=$(stamp)
  (
    date -u
    nvidia-smi --query-gpu=index,name,memory.total --format=csv 2>&1
    nvcc --version 2>&1 | tail -1
    "$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
    "$PY" -c 'import transformers, torchvision; print("transformers", transformers.__version__, "torchvision", torchvision.__version__)' 2>&1
    "$PY" -c 'import cupy; print("cupy", cupy.__version__)' 2>&1
    args=(-S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DGENESIS_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
          -DGENESIS_BUILD_TESTS=OFF -DGENESIS_BUILD_BENCH=OFF -DGENESIS_BUILD_EXAMPLES=OFF -DGENESIS_BUILD_TOOLS=ON
          -DPython3_EXECUTABLE="$PY")
    [[ -f "$BUILD/CMakeCache.txt" ]] || args+=(-G Ninja)
    if [[ -x /usr/bin/g++ ]]; then
      args+=(-DCMAKE_C_COMPILER=/usr/bin/gcc -DCMAKE_CXX_COMPILER=/usr/bin/g++ -DCMAKE_CUDA_HOST_COMPILER=/usr/bin/g++)
    fi
    [[ -f "$ROOT/.deps/httplib/httplib.h" ]] && args+=(-DGENESIS_HTTPLIB_INCLUDE_DIR="$ROOT/.deps/httplib")
    cmake "${args[@]}" && cmake --build "$BUILD" -j "$JOBS" --target genesis_python genesis_torch_allocator
    rc=$?
    # genesis-mem (replay of snapshots) is optional: it needs CLI11.
    cmake --build "$BUILD" -j "$JOBS" --target genesis-mem || echo "genesis-mem not built (optional)"
    exit $rc
  ) >"$OUT/torch_build.log" 2>&1
  rc=$?
  tail -5 "$OUT/torch_build.log"
  record build "$([[ $rc == 0 ]] && echo PASS || echo FAIL)" "$(( $(stamp) - t0 )) s"
fi

# -------------------------------------------------------------- snapshot ---
REF="$OUT/torch_reference_snapshot.pickle"
if want snapshot; then
  log "a snapshot recorded by PyTorch's own allocator"
  t0=$(stamp)
  if "$PY" bench/torch/record_snapshot.py "$REF" 2>&1 | tee "$OUT/torch_snapshot.log"; then
    [[ -x "$BUILD/genesis-mem" ]] && "$BUILD/genesis-mem" replay "$REF" --json | tee -a "$OUT/torch_snapshot.log" | head -c 600
    # Gzipped beside it: the copy to keep as data/snapshots/pytorch_reference.pickle.gz,
    # which the snapshot tests compare with on machines without a GPU.
    gzip -9 -c "$REF" >"$REF.gz"
    record snapshot PASS "$(( $(stamp) - t0 )) s"
  else
    record snapshot FAIL
  fi
fi
[[ -f $REF ]] && export GENESIS_TORCH_REFERENCE_SNAPSHOT="$REF"

# ----------------------------------------------------------------- tests ---
if want tests; then
  log "tests"
  t0=$(stamp)
  if "$PY" -m pytest -q -ra python/tests/test_torch_allocator.py python/tests/test_torch_backend.py python/tests/test_torch_memory_functions.py \
       python/tests/test_torch_snapshot.py python/tests/test_memory_stats_torch_keys.py \
       python/tests/test_alloc_conf.py python/tests/test_pickle_replay.py 2>&1 | tee "$OUT/torch_tests.log"; then
    record tests PASS "$(( $(stamp) - t0 )) s"
  else
    record tests FAIL "see torch_tests.log"
  fi
fi

# ------------------------------------------------------------- sanitizer ---
if want sanitizer; then
  log "compute-sanitizer memcheck: a training loop on Genesis"
  t0=$(stamp)
  if timeout 300 compute-sanitizer --tool memcheck --error-exitcode 99 "$PY" bench/torch/sanitize_step.py \
       >"$OUT/torch_sanitizer.log" 2>&1 && grep -q "^OK" "$OUT/torch_sanitizer.log"; then
    record sanitizer PASS "$(( $(stamp) - t0 )) s"
  else
    record sanitizer FAIL "see torch_sanitizer.log"
  fi
  tail -5 "$OUT/torch_sanitizer.log"
fi

# ------------------------------------------------------------------ jobs ---
if want jobs; then
  log "jobs: ${GENESIS_TORCH_ALLOCATORS:-native,expandable,genesis,genesis-classic}"
  t0=$(stamp)
  if "$PY" bench/torch/jobs.py all --steps-scale "${GENESIS_TORCH_STEPS_SCALE:-1}" \
       --repeats "${GENESIS_TORCH_REPEATS:-3}" --out "$OUT/torch_jobs.json" \
       --allocators "${GENESIS_TORCH_ALLOCATORS:-native,expandable,genesis,genesis-classic}" \
       2>&1 | tee "$OUT/torch_jobs.log"; then
    record jobs PASS "$(( $(stamp) - t0 )) s"
  else
    record jobs FAIL "see torch_jobs.log"
  fi
fi

# ---------------------------------------------------------------- search ---
if want search; then
  log "largest batch under ${GENESIS_TORCH_BUDGET_GB:-12} GB"
  t0=$(stamp)
  if "$PY" bench/torch/jobs.py search-all --budget-gb "${GENESIS_TORCH_BUDGET_GB:-12}" \
       --out "$OUT/torch_search.json" 2>&1 | tee -a "$OUT/torch_jobs.log"; then
    record search PASS "$(( $(stamp) - t0 )) s"
  else
    record search FAIL "see torch_jobs.log"
  fi
fi

log "summary"
cat "$SUMMARY"
! grep -q FAIL "$SUMMARY"
