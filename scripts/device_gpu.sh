#!/usr/bin/env bash
# Genesis on a GPU machine: build with CUDA + libtorch benches, run all tests,
# run the GPU tests under compute-sanitizer, then the GPU allocator benchmark.
#
#   scripts/device_gpu.sh            (from the repository root)
#
# Expected machine: Ubuntu 24.04, CUDA in /usr/local/cuda, cmake/ninja/python3
# (with torch) from /opt/torch/.venv/bin. Results and logs go to $OUT
# (default ./out):
#   build.log      machine/toolchain versions, CMake configure and build output
#   tests.log      genesis_gpu_tests + genesis_tests + pytest python/tests output
#   sanitizer.log  compute-sanitizer --tool memcheck on genesis_gpu_tests
#   bench.log      scripts/bench_alloc_gpu.sh output (it may write more into $OUT)
#   corpus.log     the trace corpus on the GPU (genesis-mem replay --corpus; PyTorch and cudaMallocAsync per trace)
#   summary.txt    the table printed at the end
#   <test>.xml     GoogleTest XML reports, only with GENESIS_GTEST_XML=1
#   copy.log       bench/torch_copy_bench (storage copies, Genesis and PyTorch)
#   tensor.log     bench/torch_tensor_bench (tensor ops, Genesis and PyTorch)
#   pybench.log    python/bench/bench_python.py (Python overhead, Genesis/PyTorch/CuPy)
#   debugger.log   scripts/debugger_gpu.sh (genesis-mem on real jobs; reports in debugger_reports.tgz)
# (Few files on purpose: some GPU runners only bring back a handful.)
#
# GENESIS_DEVICE_TARGETS (space list, default all) builds only those targets.
# GENESIS_DEVICE_STAGES (comma list, default all) picks the stages after the
# build: tests, python, sanitizer, bench, replay, corpus, copy, tensor, pybench, debugger. GENESIS_SANITIZER_FILTER is
# the gtest filter for the compute-sanitizer run (default: everything but the
# exhaustive suites, which take minutes under memcheck). GENESIS_CORPUS_DIR
# (default data/traces/corpus) is the folder of traces the corpus stage replays.
# Every stage runs even if an earlier one failed (as far as it can); the exit
# status is nonzero if any stage failed.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="${OUT:-$ROOT/out}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
BUILD="${GENESIS_BUILD_DIR:-$ROOT/build-gpu}"
JOBS="${JOBS:-16}"

for d in /opt/torch/.venv/bin /usr/local/cuda/bin; do
  [[ -d $d && ":$PATH:" != *":$d:"* ]] && PATH="$d:$PATH"
done
export PATH

STAGES=(); RESULTS=(); NOTES=()
WANT="${GENESIS_DEVICE_STAGES:-tests,python,sanitizer,bench,replay,corpus,copy,tensor,pybench,debugger}"
want() { [[ ",$WANT," == *",$1,"* ]]; }
SAN_FILTER="${GENESIS_SANITIZER_FILTER:--*Exhaustive*}"
record() { STAGES+=("$1"); RESULTS+=("$2"); NOTES+=("${3:-}"); echo "[$1] $2 ${3:-}"; }
log() { printf '\n==> %s\n' "$*"; }

# ------------------------------------------------------------------- env ---
log "env"
{
  date -u
  uname -a
  nvidia-smi 2>&1 || echo "nvidia-smi failed"
  nvcc --version 2>&1 || echo "nvcc not found"
  cmake --version 2>&1 | head -1
  ninja --version 2>&1
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
} 2>&1 | tee "$OUT/build.log"

# The image's default compiler (/opt/gcc) links its own libstdc++ statically:
# a Python extension built with it carries a second C++ runtime next to the
# one numpy and torch load, and the first C++ exception thrown after numpy is
# imported crashes the interpreter (seen on the H200 image, 2026-11-21). The
# system g++ links the shared libstdc++ that everything else in the process
# uses.
# nvcc picks its host compiler from PATH and CMake then adds that compiler's
# library directories (/opt/gcc/lib/..., which hold only a static libstdc++)
# to every link: drop /opt/gcc from PATH too.
PATH="$(tr ':' '\n' <<<"$PATH" | grep -v '^/opt/gcc' | paste -sd: -)"
export PATH
unset CC CXX CUDAHOSTCXX
SYSTEM_CXX_ARGS=()
if [[ -x /usr/bin/g++ && -x /usr/bin/gcc ]]; then
  SYSTEM_CXX_ARGS=(-DCMAKE_C_COMPILER=/usr/bin/gcc -DCMAKE_CXX_COMPILER=/usr/bin/g++
                   -DCMAKE_CUDA_HOST_COMPILER=/usr/bin/g++)
  # A build tree configured with another compiler cannot switch: start afresh.
  if [[ -f "$BUILD/CMakeCache.txt" ]] && { ! grep -q "^CMAKE_CXX_COMPILER:[A-Z]*=/usr/bin/g++$" "$BUILD/CMakeCache.txt" ||
                                           grep -qs "opt/gcc" "$BUILD"/CMakeFiles/*/CMakeCUDACompiler.cmake; }; then
    rm -rf "$BUILD"
  fi
fi

# ------------------------------------------------------------- configure ---
log "configure: $BUILD (Release, CUDA ON, torch benches)"
gen=(); [[ -f "$BUILD/CMakeCache.txt" ]] || gen=(-G Ninja)
CMAKE_ARGS=(-S "$ROOT" -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGENESIS_ENABLE_CUDA=ON "${SYSTEM_CXX_ARGS[@]}")
# The Python module is built for the interpreter that has torch (the venv),
# with PyTorch's bundled pybind11 headers (python/CMakeLists.txt).
command -v python3 >/dev/null 2>&1 && CMAKE_ARGS+=(-DPython3_EXECUTABLE="$(command -v python3)")
# The GPU image has no cpp-httplib package: a copy of its single header may be
# carried in .deps/httplib (kept out of the repository by .git/info/exclude).
[[ -f "$ROOT/.deps/httplib/httplib.h" ]] && CMAKE_ARGS+=(-DGENESIS_HTTPLIB_INCLUDE_DIR="$ROOT/.deps/httplib")
cmake_major="$(cmake --version | sed -n 's/^cmake version \([0-9]*\).*/\1/p')"
# Some libtorch/Caffe2 CMake files still declare very old minimum versions.
[[ ${cmake_major:-3} -ge 4 ]] && CMAKE_ARGS+=(-DCMAKE_POLICY_VERSION_MINIMUM=3.5)
configured=0
torch_prefix="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null)"
if [[ -n $torch_prefix ]] &&
   cmake "${CMAKE_ARGS[@]}" -DGENESIS_TORCH_BENCH=ON -DCMAKE_PREFIX_PATH="$torch_prefix" 2>&1 | tee -a "$OUT/build.log"; then
  record configure PASS "torch benches on"
  configured=1
else
  note="torch not importable from python3"
  [[ -n $torch_prefix ]] && note="configure with libtorch failed (see build.log)"
  log "configure again without torch benches ($note)"
  if cmake "${CMAKE_ARGS[@]}" -DGENESIS_TORCH_BENCH=OFF 2>&1 | tee -a "$OUT/build.log"; then
    configured=1
  fi
  record configure FAIL "$note; torch benches off"
fi

# ----------------------------------------------------------------- build ---
log "build: ninja -j$JOBS"
if [[ $configured -eq 1 ]]; then
  # -k 0: build every target that can be built, so independent stages still run.
  # GENESIS_DEVICE_TARGETS (space list): build only these targets (a short run).
  targets=(); for t in ${GENESIS_DEVICE_TARGETS:-}; do targets+=(--target "$t"); done
  if cmake --build "$BUILD" -j "$JOBS" "${targets[@]}" -- -k 0 2>&1 | tee -a "$OUT/build.log"; then
    record build PASS
  else
    record build FAIL "see build.log"
  fi
else
  record build FAIL "not configured"
fi

# ----------------------------------------------------------------- tests ---
: >"$OUT/tests.log"
for t in genesis_gpu_tests genesis_tests; do
  want tests || break
  log "tests: $t"
  if [[ -x "$BUILD/$t" ]]; then
    xml=(); [[ ${GENESIS_GTEST_XML:-0} == 1 ]] && xml=(--gtest_output="xml:$OUT/$t.xml")
    if "$BUILD/$t" "${xml[@]}" 2>&1 | tee -a "$OUT/tests.log"; then
      record "$t" PASS
    else
      record "$t" FAIL "see tests.log"
    fi
  else
    echo "$BUILD/$t was not built" | tee -a "$OUT/tests.log"
    record "$t" FAIL "not built"
  fi
done

# ---------------------------------------------------------------- python ---
# The genesis Python package against the real GPU (GPU tests run instead of
# skipping). Output goes to tests.log. Without pytest in the venv, an import
# smoke test runs instead.
log "python: pytest python/tests"
if ! want python; then
  echo "skipped (GENESIS_DEVICE_STAGES=$WANT)"
elif ! compgen -G "$BUILD/python/genesis/_C*.so" >/dev/null; then
  echo "genesis._C was not built (see build.log: Python headers or pybind11 missing)" | tee -a "$OUT/tests.log"
  record python SKIP "module not built"
elif python3 -c 'import pytest, numpy' >/dev/null 2>&1; then
  if PYTHONPATH="$BUILD/python" python3 -m pytest -q -rs python/tests 2>&1 | tee -a "$OUT/tests.log"; then
    record python PASS
  else
    record python FAIL "see tests.log"
  fi
elif PYTHONPATH="$BUILD/python" python3 -c '
import genesis
assert genesis.cuda.is_available()
d = genesis.device("cuda")
p = genesis.testing.device_allocate(d, 1 << 20)
assert d.memory_allocated() >= 1 << 20
genesis.testing.device_free(d, p)
print("genesis import smoke test passed:", d.memory_stats())
' 2>&1 | tee -a "$OUT/tests.log"; then
  record python PASS "pytest/numpy missing: import smoke test only"
else
  record python FAIL "smoke test failed (see tests.log)"
fi

# ------------------------------------------------------------- sanitizer ---
log "compute-sanitizer memcheck: genesis_gpu_tests"
sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
if ! want sanitizer; then
  echo "skipped (GENESIS_DEVICE_STAGES=$WANT)"
elif [[ ! -x $sanitizer ]]; then
  echo "compute-sanitizer not found" | tee "$OUT/sanitizer.log"
  record sanitizer FAIL "compute-sanitizer not found"
elif [[ ! -x "$BUILD/genesis_gpu_tests" ]]; then
  echo "genesis_gpu_tests was not built" | tee "$OUT/sanitizer.log"
  record sanitizer FAIL "not built"
# --report-api-errors no: the tests provoke CUDA API errors on purpose (invalid
# device, out of memory); memcheck should report memory-access errors only.
# The exhaustive suites (GpuConvertExhaustive: all 2^32 float32 inputs) run
# the same kernels as the others on far more data: seconds natively, very
# long under memcheck, so SAN_FILTER leaves them out.
# GENESIS_GPU_TEST_QUICK=1: the tensor-kernel suites skip their large shapes.
elif GENESIS_GPU_TEST_QUICK=1 "$sanitizer" --tool memcheck --report-api-errors no --error-exitcode 86 "$BUILD/genesis_gpu_tests" \
       --gtest_filter="$SAN_FILTER" 2>&1 | tee "$OUT/sanitizer.log"; then
  record sanitizer PASS
else
  rc=${PIPESTATUS[0]}
  if [[ $rc -eq 86 ]]; then
    record sanitizer FAIL "memcheck reported errors (see sanitizer.log)"
  elif grep -q "terminated before first instrumented API call" "$OUT/sanitizer.log" &&
       grep -q "^\[  PASSED  \]" "$OUT/sanitizer.log" && ! grep -q "^\[  FAILED  \]" "$OUT/sanitizer.log"; then
    # The tests passed without making a single CUDA call: nothing to check.
    record sanitizer PASS "no CUDA API calls made (no GPU test ran)"
  else
    record sanitizer FAIL "exit code $rc (see sanitizer.log)"
  fi
fi

# ----------------------------------------------------------------- bench ---
log "bench: scripts/bench_alloc_gpu.sh"
if ! want bench; then
  echo "skipped (GENESIS_DEVICE_STAGES=$WANT)"
elif [[ -f "$ROOT/scripts/bench_alloc_gpu.sh" ]]; then
  # The bench script finds the binaries through GENESIS_BUILD_DIR and writes
  # its own result files into $OUT.
  if OUT="$OUT" GENESIS_BUILD_DIR="$BUILD" bash "$ROOT/scripts/bench_alloc_gpu.sh" 2>&1 | tee "$OUT/bench.log"; then
    record bench PASS
  else
    record bench FAIL "see bench.log"
  fi
else
  echo "scripts/bench_alloc_gpu.sh does not exist yet" | tee "$OUT/bench.log"
  record bench SKIP "scripts/bench_alloc_gpu.sh missing"
fi

# ---------------------------------------------------------------- replay ---
# The same events through PyTorch (native, then expandable segments) and
# cudaMallocAsync: torch_replays TRACE LOG [REPEAT] appends their REPLAY lines
# to LOG (REPEAT passes each, the median time); nonzero if one failed. Without the bench (no libtorch) it says so and
# succeeds: Genesis's own figures still stand.
torch_replays() {
  local rc=0 conf
  if [[ ! -x "$BUILD/torch_replay_bench" ]]; then
    echo "torch_replay_bench not built" | tee -a "$2"
    return 0
  fi
  for conf in "" "expandable_segments:True"; do
    PYTORCH_CUDA_ALLOC_CONF="$conf" "$BUILD/torch_replay_bench" "$1" --allocator pytorch --repeat "${3:-1}" 2>&1 |
      tee -a "$2" || rc=1
  done
  "$BUILD/torch_replay_bench" "$1" --allocator cudaMallocAsync --repeat "${3:-1}" 2>&1 | tee -a "$2" || rc=1
  return $rc
}

# The bundled GPT-2 training trace on the real GPU and on the simulated
# device through Genesis, and on the GPU through PyTorch (native and
# expandable segments) and cudaMallocAsync, in the same run.
log "replay: data/traces/gpt2_train.trace.csv.gz"
TRACE="$ROOT/data/traces/gpt2_train.trace.csv.gz"
if ! want replay; then
  echo "skipped (GENESIS_DEVICE_STAGES=$WANT)"
elif [[ -x "$BUILD/genesis-mem" && -f $TRACE ]]; then
  : >"$OUT/replay.log"
  ok=1
  "$BUILD/genesis-mem" replay "$TRACE" --device cuda --compare --repeat 3 --no-progress 2>&1 | tee -a "$OUT/replay.log" || ok=0
  "$BUILD/genesis-mem" replay "$TRACE" --device sim --compare --repeat 5 --no-progress 2>&1 | tee -a "$OUT/replay.log" || ok=0
  torch_replays "$TRACE" "$OUT/replay.log" || ok=0
  # What the VMM calls cost per chunk size (behind the expandable page size).
  if [[ -x "$BUILD/vmm_bench" ]]; then "$BUILD/vmm_bench" 2>&1 | tee -a "$OUT/replay.log" || ok=0; fi
  if [[ $ok -eq 1 ]]; then record replay PASS; else record replay FAIL "see replay.log"; fi
else
  echo "genesis-mem or the trace is missing" | tee -a "$OUT/replay.log"
  record replay FAIL "genesis-mem not built or trace missing"
fi

# ---------------------------------------------------------------- corpus ---
# The recorded corpus (data/traces/corpus) on the GPU: every Genesis
# configuration through genesis-mem, and the same events through PyTorch
# (native, expandable segments) and cudaMallocAsync, trace by trace, in one
# run. Each configuration replays every trace GENESIS_CORPUS_REPEAT times
# (default 5), each pass from an empty cache, and the median time per event
# is compared: a single pass is mostly a few cudaMalloc and cudaFree calls,
# whose time varies several-fold between passes. Output: corpus.log.
log "corpus: ${GENESIS_CORPUS_DIR:-data/traces/corpus}"
CORPUS="${GENESIS_CORPUS_DIR:-$ROOT/data/traces/corpus}"
if ! want corpus; then
  echo "skipped (GENESIS_DEVICE_STAGES=$WANT)"
elif [[ -x "$BUILD/genesis-mem" && -d $CORPUS ]]; then
  : >"$OUT/corpus.log"
  ok=1
  repeat="${GENESIS_CORPUS_REPEAT:-5}"
  "$BUILD/genesis-mem" replay --corpus "$CORPUS" --device cuda --compare --repeat "$repeat" --no-progress 2>&1 |
    tee -a "$OUT/corpus.log" || ok=0
  for t in "$CORPUS"/*.trace.csv.gz; do
    echo "TRACE $(basename "$t" .trace.csv.gz)" | tee -a "$OUT/corpus.log"
    torch_replays "$t" "$OUT/corpus.log" "$repeat" || ok=0
    [[ -x "$BUILD/torch_replay_bench" ]] || break  # said once is enough
  done
  if [[ $ok -eq 1 ]]; then record corpus PASS; else record corpus FAIL "see corpus.log"; fi
else
  echo "genesis-mem or the corpus is missing" | tee -a "$OUT/corpus.log"
  record corpus FAIL "genesis-mem not built or corpus missing"
fi

# ------------------------------------------------------------------ copy ---
log "copy: bench/torch_copy_bench (storage copies vs PyTorch)"
if ! want copy; then
  echo "skipped (GENESIS_DEVICE_STAGES=$WANT)"
elif [[ -x "$BUILD/torch_copy_bench" ]]; then
  if "$BUILD/torch_copy_bench" 2>&1 | tee "$OUT/copy.log"; then record copy PASS; else record copy FAIL "see copy.log"; fi
else
  echo "torch_copy_bench not built" | tee "$OUT/copy.log"
  record copy FAIL "torch_copy_bench not built"
fi

# ---------------------------------------------------------------- tensor ---
log "tensor: bench/torch_tensor_bench (tensor ops vs PyTorch, results checked)"
if ! want tensor; then
  echo "skipped (GENESIS_DEVICE_STAGES=$WANT)"
elif [[ -x "$BUILD/torch_tensor_bench" ]]; then
  if "$BUILD/torch_tensor_bench" 2>&1 | tee "$OUT/tensor.log"; then record tensor PASS; else record tensor FAIL "see tensor.log"; fi
else
  echo "torch_tensor_bench not built" | tee "$OUT/tensor.log"
  record tensor SKIP "torch_tensor_bench not built"
fi

# --------------------------------------------------------------- pybench ---
log "pybench: python/bench/bench_python.py (Python overhead vs PyTorch and CuPy)"
if ! want pybench; then
  echo "skipped (GENESIS_DEVICE_STAGES=$WANT)"
elif compgen -G "$BUILD/python/genesis/_C*.so" >/dev/null; then
  if PYTHONPATH="$BUILD/python" python3 python/bench/bench_python.py --device cuda 2>&1 | tee "$OUT/pybench.log"; then
    record pybench PASS
  else
    record pybench FAIL "see pybench.log"
  fi
else
  echo "Python module not built" | tee "$OUT/pybench.log"
  record pybench SKIP "module not built"
fi

# -------------------------------------------------------------- debugger ---
log "debugger: scripts/debugger_gpu.sh (genesis-mem watching PyTorch and Genesis jobs, its cost)"
if ! want debugger; then
  echo "skipped (GENESIS_DEVICE_STAGES=$WANT)"
elif [[ -x "$BUILD/genesis-mem" ]]; then
  if bash scripts/debugger_gpu.sh "$BUILD" "$OUT"; then record debugger PASS; else record debugger FAIL "see debugger.log"; fi
else
  record debugger SKIP "genesis-mem not built"
fi

# --------------------------------------------------------------- summary ---
log "Summary (logs in $OUT)"
failed=0
{
  printf '%-20s %-5s %s\n' STAGE RESULT NOTE
  for i in "${!STAGES[@]}"; do
    printf '%-20s %-5s %s\n' "${STAGES[$i]}" "${RESULTS[$i]}" "${NOTES[$i]}"
  done
} | tee "$OUT/summary.txt"
for r in "${RESULTS[@]}"; do [[ $r == FAIL ]] && failed=1; done
# The GPU runner brings back at most 8 files: pack the raw logs into one.
(
  cd "$OUT" || exit 0
  raw=(); for f in build.log *.json alloc_bench.log torch_alloc_bench.log; do [[ -f $f ]] && raw+=("$f"); done
  if [[ ${#raw[@]} -gt 0 ]] && tar czf raw_logs.tgz "${raw[@]}"; then rm -f "${raw[@]}"; fi
)
exit $failed
