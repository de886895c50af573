#!/usr/bin/env bash
# Genesis: build and run ALL tests (this is what CI runs: .ci/run).
#
#   scripts/test.sh
#
# Stages (each runs even if an earlier one failed; exit status is nonzero if
# any failed; a summary is printed at the end):
#   deps    install missing prerequisites (scripts/setup.sh --deps-only)
#   layers  scripts/check_layers.py: every #include follows the layer order
#           (core < cuda < memory < storage < tensor < python; debug beside)
#   release Release build in build/ (CUDA auto) -> ctest (all tests)
#   asan    ASan+UBSan build in build-asan/ (CUDA off, Python module on) -> ctest (all tests)
#   asan-py pytest python/tests against build-asan/'s module under ASan+UBSan
#   tsan    TSan build in build-tsan/ (CUDA off) -> ctest (all tests)
#   fuzz    libFuzzer targets (fuzz/, clang) in build-fuzz/, each run for
#           GENESIS_FUZZ_SECONDS (default 30) seconds
#   python  pytest python/tests (only if that directory exists)
#   install scripts/check_install.sh --build-dir build: cmake --install build/ into a
#           temporary prefix, tests/consumer/ built against it (find_package and
#           pkg-config) and as a subproject, the Python package through cmake
#           --install and pip in a venv (no second compile: it reuses build/)
# Tests that need a GPU report "Skipped" on machines without one. The summary
# gives each stage's wall time.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
JOBS="$(nproc 2>/dev/null || echo 2)"
FUZZ_SECONDS="${GENESIS_FUZZ_SECONDS:-30}"
PYTHON=/usr/bin/python3
[[ -x $PYTHON ]] || PYTHON=python3

# pytest on every core (python3-pytest-xdist, which setup.sh installs): most
# of the Python tests' time is one interpreter on one core, and the suite
# took 64 s on two workers against 110 s on one (277 and 176 s under ASan).
pytest_workers=()
STAGES=()
RESULTS=()
NOTES=()
TIMES=()
STAGE_T0=$SECONDS
# record <stage> <PASS|FAIL|SKIP> [note]: called once at the end of each
# stage, which (stages run one after the other) began at the last record.
record() {
  STAGES+=("$1"); RESULTS+=("$2"); NOTES+=("${3:-}")
  TIMES+=("$(( (SECONDS - STAGE_T0) / 60 ))m$(( (SECONDS - STAGE_T0) % 60 ))s")
  STAGE_T0=$SECONDS
}
log() { printf '\n==> %s\n' "$*"; }

# configure_and_build <dir> <cmake args...>
configure_and_build() {
  local dir=$1; shift
  local gen=()
  [[ -f "$dir/CMakeCache.txt" ]] || gen=(-G Ninja)
  cmake -S "$ROOT" -B "$dir" "${gen[@]}" "$@" && cmake --build "$dir" -j "$JOBS"
}

# ------------------------------------------------------------------ deps ---
log "deps: installing missing prerequisites"
if "$ROOT/scripts/setup.sh" --deps-only; then
  record deps PASS
else
  record deps FAIL "could not install prerequisites"
fi

if (( JOBS > 1 )) && "$PYTHON" -c "import xdist" >/dev/null 2>&1; then
  pytest_workers=(-n "$JOBS")
fi

# ---------------------------------------------------------------- layers ---
# Before any build: a forbidden include is reported in a second, by file and line.
log "layers: scripts/check_layers.py"
if "$PYTHON" "$ROOT/scripts/check_layers.py"; then
  record layers PASS
else
  record layers FAIL "an #include breaks the layer order (listed above)"
fi

# --------------------------------------------------------------- release ---
log "release: build/ (Release, CUDA auto)"
# Where no GPU is present nothing runs the device code this build compiles,
# nor the host side of the CUDA files (kernel launches, which need a GPU),
# so a fresh build/ there compiles them as a check only: PTX for sm_90 and no
# SASS (CMAKE_CUDA_ARCHITECTURES=90-virtual: ptxas was 55% of a kernel
# file's time), cicc at -O0 and the host compiler at -O0 for the CUDA files
# (one kernel file: 59 s with -O3 and cicc -O1, 21 s so; the C++ files keep
# -O3). Every kernel still goes through nvcc's front end, cicc and the host
# compiler, where a source error shows.
# A fresh build/ also compiles as unity builds (eight files per compiler run
# share the parse of GoogleTest, pybind11 and Genesis's headers: the test
# binaries, the library, the Python bindings and genesis-mem; Note [Unity
# builds] in CMakeLists.txt).
# A build/ that exists keeps the settings it has (an edit of one test then
# recompiles one file).
release_args=(-DCMAKE_BUILD_TYPE=Release)
release_note=""
if [[ ! -f build/CMakeCache.txt ]]; then
  release_args+=(-DGENESIS_TEST_UNITY=ON -DGENESIS_UNITY_BUILD=ON)
  if ! nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then
    release_args+=(-DCMAKE_CUDA_ARCHITECTURES=90-virtual "-DCMAKE_CUDA_FLAGS=-Xcicc -O0"
                   "-DCMAKE_CUDA_FLAGS_RELEASE=-O0 -DNDEBUG")
    release_note="no GPU: CUDA files compiled as a check (PTX only, -O0)"
  fi
fi
if configure_and_build build "${release_args[@]}"; then
  if (cd build && ctest --output-on-failure -j "$JOBS"); then
    record release PASS "$release_note"
  else
    record release FAIL "ctest failed"
  fi
else
  record release FAIL "build failed"
fi

# Sanitizer builds compile at -O1 with line tables only (-g1): the reports
# keep their file:line frames, and the builds take half the time of -O2 -g
# (the pybind11 and googletest files most of all: 94 s against 42 s for the
# largest test file), which is most of these stages' time. -O1 is also the
# level ASan's authors recommend. The test binaries and the Python bindings
# go further, to -O0 (Note [Test code optimisation] in
# cmake/GenesisCompilerOptions.cmake), and genesis_gpu_tests is not built:
# these builds have no CUDA, so every GPU test would skip. They are unity
# builds, as a fresh build/ is.
SAN_FLAGS="-O1 -g1 -DNDEBUG"
SAN_ARGS=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$SAN_FLAGS"
          "-DCMAKE_C_FLAGS_RELWITHDEBINFO=$SAN_FLAGS" -DGENESIS_ENABLE_CUDA=OFF
          -DGENESIS_BUILD_TESTS=ON -DGENESIS_BUILD_GPU_TESTS=OFF -DGENESIS_TEST_UNITY=ON -DGENESIS_UNITY_BUILD=ON -DGENESIS_BUILD_BENCH=OFF
          -DGENESIS_BUILD_TOOLS=OFF -DGENESIS_BUILD_PYTHON=OFF)

# ------------------------------------------------------------------ asan ---
# The Python module and genesis-mem are built here too: the asan-py stage
# runs the Python tests against them.
log "asan: build-asan/ (ASan+UBSan, CUDA off, Python module and tools on)"
asan_built=0
if configure_and_build build-asan "${SAN_ARGS[@]}" -DGENESIS_SANITIZE=address \
     -DGENESIS_BUILD_PYTHON=ON -DGENESIS_BUILD_TOOLS=ON; then
  asan_built=1
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  export ASAN_OPTIONS="detect_leaks=1"
  note=""
  # LeakSanitizer needs ptrace-like access that some containers forbid; probe it.
  probe="$(ASAN_OPTIONS=detect_leaks=1 build-asan/genesis_tests --gtest_list_tests 2>&1 >/dev/null || true)"
  if grep -qE "LeakSanitizer has encountered a fatal error|LeakSanitizer does not work under ptrace" <<<"$probe"; then
    export ASAN_OPTIONS="detect_leaks=0"
    note="LeakSanitizer unavailable here (ptrace): ran with detect_leaks=0"
    echo "WARNING: $note"
  fi
  if (cd build-asan && ctest --output-on-failure -j "$JOBS"); then
    record asan PASS "$note"
  else
    record asan FAIL "ctest failed${note:+; $note}"
  fi
  unset ASAN_OPTIONS UBSAN_OPTIONS
else
  record asan FAIL "build failed"
fi

# --------------------------------------------------------------- asan-py ---
# The extension built with ASan+UBSan, loaded by the system interpreter,
# which is not instrumented:
# - LD_PRELOAD of GCC's libasan: the ASan runtime must be the first library
#   loaded, which it cannot be when it arrives as a dependency of _C.so.
#   libstdc++ is preloaded with it: ASan resolves the real __cxa_throw when
#   it starts, and python3 does not link libstdc++, so without it the first
#   C++ exception aborts ("real___cxa_throw != 0" CHECK failure).
# - PYTHONMALLOC=malloc: Python objects come from malloc, not pymalloc's
#   arenas, so ASan sees overruns into them too.
# - detect_leaks=0: CPython frees little at exit (interned strings, module
#   and type objects live until the process ends), so LeakSanitizer would
#   report the interpreter's own memory; the C++ tests check Genesis's leaks
#   (asan stage).
# - -p no:faulthandler: pytest's faulthandler would take SIGSEGV before ASan
#   could report where it happened.
# - log_path: pytest captures file descriptor 2 while a test runs, and a
#   report written there dies with the process; reports go to files under
#   build-asan/asan-py/ instead (children's too), printed below.
# Every test runs but python/tests/test_fork.py: GCC 12's ASan runtime is
# not fork-safe while other threads run (a child forked while a thread held
# the sanitizer allocator's lock hung, a different test each time); the
# python stage runs those tests, and the TSan stage the C++ fork tests.
# Nothing else needs skipping under ASan (a test that starts a
# program that is not Genesis, such as the browser, leaves LD_PRELOAD out of
# its environment).
if [[ -d python/tests ]]; then
  log "asan-py: pytest python/tests against build-asan/python (ASan+UBSan)"
  libasan="$(g++ -print-file-name=libasan.so 2>/dev/null)"
  libstdcxx="$(g++ -print-file-name=libstdc++.so 2>/dev/null)"
  if [[ $asan_built -ne 1 ]]; then
    record asan-py FAIL "build-asan failed to build"
  elif [[ ! -f $libasan || ! -f $libstdcxx ]]; then
    record asan-py FAIL "GCC's libasan.so or libstdc++.so not found (g++ -print-file-name gave '$libasan', '$libstdcxx')"
  elif ! compgen -G "build-asan/python/genesis/_C*.so" >/dev/null; then
    record asan-py FAIL "build-asan/python/genesis/_C*.so was not built (Python development files missing?)"
  else
    reports="$ROOT/build-asan/asan-py"
    rm -rf "$reports" && mkdir -p "$reports"
    LD_PRELOAD="$libasan $libstdcxx" PYTHONMALLOC=malloc \
      ASAN_OPTIONS="detect_leaks=0:handle_segv=1:handle_abort=1:detect_stack_use_after_return=0:log_path=$reports/asan" \
      UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan" \
      PYTHONPATH="$ROOT/build-asan/python:$ROOT/build-asan:$ROOT/python${PYTHONPATH:+:$PYTHONPATH}" \
      "$PYTHON" -m pytest -q "${pytest_workers[@]}" -p no:faulthandler -p no:cacheprovider --ignore=python/tests/test_fork.py python/tests
    rc=$?
    if compgen -G "$reports/*" >/dev/null; then
      for f in "$reports"/*; do echo "--- $f"; cat "$f"; done
      record asan-py FAIL "sanitizer reports (printed above) in build-asan/asan-py/"
    elif [[ $rc -ne 0 ]]; then
      record asan-py FAIL "pytest under ASan failed (exit $rc)"
    else
      record asan-py PASS
    fi
  fi
else
  record asan-py SKIP "no python/tests directory"
fi

# ------------------------------------------------------------------ tsan ---
log "tsan: build-tsan/ (TSan, CUDA off), every test"
# Every suite runs under TSan, not only those with threads in their names: a
# race can sit in any code that a background thread (the sampler, the
# monitor, the thread pool) touches while a test runs.
if configure_and_build build-tsan "${SAN_ARGS[@]}" -DGENESIS_SANITIZE=thread; then
  # - die_after_fork=0: the fork tests (Note [Fork]) start threads in a child
  #   of a process that has threads, which is what they check; TSan's default
  #   is to kill such a child.
  # - suppressions: scripts/tsan.supp says what is left out and why (OpenBLAS,
  #   which is not built with TSan).
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:die_after_fork=0:suppressions=$ROOT/scripts/tsan.supp"
  note=""
  runner=()
  # TSan (GCC 12) aborts with "unexpected memory mapping" on kernels with high
  # mmap ASLR entropy; running without ASLR avoids that.
  probe="$(build-tsan/genesis_tests --gtest_list_tests 2>&1 >/dev/null || true)"
  if grep -q "unexpected memory mapping" <<<"$probe" && command -v setarch >/dev/null 2>&1; then
    runner=(setarch "$(uname -m)" -R)
    note="ran with ASLR disabled (setarch -R) for TSan"
    echo "NOTE: $note"
  fi
  if (cd build-tsan && "${runner[@]}" ctest --output-on-failure -j "$JOBS"); then
    record tsan PASS "$note"
  else
    record tsan FAIL "ctest failed${note:+; $note}"
  fi
  unset TSAN_OPTIONS
else
  record tsan FAIL "build failed"
fi

# ------------------------------------------------------------------ fuzz ---
# libFuzzer targets (fuzz/*.cpp, README "Fuzzing"): the parsers of untrusted
# input and the index planner, built with clang and ASan+UBSan from just the
# library sources they reach (fuzz/CMakeLists.txt), each run for
# FUZZ_SECONDS from its seeds in fuzz/corpus/<target>/ (new inputs go to
# build-fuzz/corpus/<target>/, the repository is not touched). A crash, a
# sanitizer report, a broken property or an input that takes over 10 s
# fails the stage; what failed is saved as build-fuzz/artifacts/<target>-*
# (turn it into a unit test). Skipped, with a note, only when clang cannot
# link a libFuzzer program (no clang, or no libclang-rt-14-dev).
log "fuzz: build-fuzz/ (libFuzzer + ASan+UBSan, clang), ${FUZZ_SECONDS}s per target"
fuzz_cc="" fuzz_cxx=""
for v in -14 ""; do
  if command -v "clang++$v" >/dev/null 2>&1 && command -v "clang$v" >/dev/null 2>&1; then
    fuzz_cc="clang$v" fuzz_cxx="clang++$v"
    break
  fi
done
fuzz_probe_dir="$(mktemp -d)"
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
  > "$fuzz_probe_dir/probe.cpp"
if [[ -z $fuzz_cxx ]]; then
  record fuzz SKIP "clang not found after setup (install clang-14): fuzz targets not run"
elif ! "$fuzz_cxx" -fsanitize=fuzzer,address,undefined "$fuzz_probe_dir/probe.cpp" -o "$fuzz_probe_dir/probe" \
       >"$fuzz_probe_dir/log" 2>&1; then
  cat "$fuzz_probe_dir/log"
  record fuzz SKIP "$fuzz_cxx cannot link a libFuzzer program (install libclang-rt-14-dev): fuzz targets not run"
elif ! { cmake -S "$ROOT/fuzz" -B build-fuzz -G Ninja -DCMAKE_C_COMPILER="$fuzz_cc" -DCMAKE_CXX_COMPILER="$fuzz_cxx" &&
         cmake --build build-fuzz -j "$JOBS"; }; then
  record fuzz FAIL "build failed"
else
  mkdir -p build-fuzz/artifacts
  fuzz_failed=() fuzz_run=()
  # run_fuzzer <target>: from its seeds (read-only) and the inputs it found
  # before; its exit status goes to build-fuzz/<target>.rc.
  run_fuzzer() {
    local t=$1
    mkdir -p "build-fuzz/corpus/$t"
    rm -f build-fuzz/artifacts/"$t"-*
    "build-fuzz/fuzz_$t" "build-fuzz/corpus/$t" "fuzz/corpus/$t" -max_total_time="$FUZZ_SECONDS" \
      -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="build-fuzz/artifacts/$t-" >"build-fuzz/$t.log" 2>&1
    echo $? >"build-fuzz/$t.rc"
  }
  for src in fuzz/*.cpp; do
    t="$(basename "$src" .cpp)"
    [[ -x build-fuzz/fuzz_$t ]] || continue  # a target whose library source is not there yet
    fuzz_run+=("$t")
  done
  # JOBS fuzzers at a time: each uses one core.
  for t in "${fuzz_run[@]}"; do
    rm -f "build-fuzz/$t.rc"
    run_fuzzer "$t" &
    while (( $(jobs -rp | wc -l) >= JOBS )); do wait -n; done
  done
  wait
  for t in "${fuzz_run[@]}"; do
    rc="$(cat "build-fuzz/$t.rc" 2>/dev/null || echo 1)"
    runs="$(grep -oE "^Done [0-9]+ runs" "build-fuzz/$t.log" | grep -oE "[0-9]+" || echo "?")"
    if [[ $rc -eq 0 ]]; then
      echo "fuzz_$t: ${runs} inputs, no failure"
    else
      echo "fuzz_$t FAILED (exit $rc); the end of build-fuzz/$t.log:"
      tail -n 60 "build-fuzz/$t.log"
      fuzz_failed+=("$t")
    fi
  done
  if [[ ${#fuzz_run[@]} -eq 0 ]]; then
    record fuzz FAIL "no fuzz target was built"
  elif [[ ${#fuzz_failed[@]} -eq 0 ]]; then
    record fuzz PASS "${fuzz_run[*]}: ${FUZZ_SECONDS}s each"
  else
    record fuzz FAIL "${fuzz_failed[*]} failed; inputs in build-fuzz/artifacts/"
  fi
fi
rm -rf "$fuzz_probe_dir"

# ---------------------------------------------------------------- python ---
if [[ -d python/tests ]]; then
  log "python: pytest python/tests"
  if PYTHONPATH="$ROOT/build/python:$ROOT/build:$ROOT/python${PYTHONPATH:+:$PYTHONPATH}" \
       "$PYTHON" -m pytest -q "${pytest_workers[@]}" python/tests; then
    record python PASS
  else
    record python FAIL "pytest failed"
  fi
else
  record python SKIP "no python/tests directory"
fi

# --------------------------------------------------------------- install ---
# Genesis as other projects use it (scripts/check_install.sh): installed from
# the Release build/, so nothing is compiled again.
log "install: scripts/check_install.sh --build-dir build"
if [[ ! -f build/CMakeCache.txt ]]; then
  record install FAIL "build/ was not configured (release stage)"
elif "$ROOT/scripts/check_install.sh" --build-dir build; then
  record install PASS
else
  record install FAIL "see the check_install output above"
fi

# --------------------------------------------------------------- summary ---
log "Summary"
failed=0
for i in "${!STAGES[@]}"; do
  printf '  %-8s %-5s %7s  %s\n' "${STAGES[$i]}" "${RESULTS[$i]}" "${TIMES[$i]}" "${NOTES[$i]}"
  [[ ${RESULTS[$i]} == FAIL ]] && failed=1
done
if [[ $failed -ne 0 ]]; then
  echo "FAILED"
  exit 1
fi
echo "ALL PASSED"
