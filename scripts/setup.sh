#!/usr/bin/env bash
# Genesis: the newcomer's first command.
#
#   scripts/setup.sh              install prerequisites, build Release into build/, run the main job
#   scripts/setup.sh --deps-only  only install prerequisites (what scripts/test.sh uses)
#   scripts/setup.sh --no-run     install + build, skip the main job
#
# Target system: Debian 12 (apt). Packages already installed are not
# reinstalled, so the script is cheap to run again. The CUDA toolkit is not an
# apt package here: when nvcc is found (PATH or /usr/local/cuda) the build uses
# it, otherwise Genesis builds CPU-only (GENESIS_WITH_CUDA=0).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${GENESIS_BUILD_DIR:-$ROOT/build}"
JOBS="$(nproc 2>/dev/null || echo 2)"

# Debian packages Genesis needs to build and test (compilers, CMake/Ninja,
# GoogleTest, tool/bench/python dependencies; python3-hypothesis runs the
# Python property tests, python3-pytest-xdist runs the Python tests on every
# core, python3-matplotlib draws memory timelines; clang-14
# with libclang-rt-14-dev builds the libFuzzer targets in fuzz/, and llvm-14's
# llvm-symbolizer gives their crash reports file and line).
# Only what the build and the tests use: git is not listed (whoever runs
# this has the repository); python3-venv, -pip, -setuptools and -wheel
# install the Python package into a venv (scripts/check_install.sh).
PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libgtest-dev
  libcli11-dev nlohmann-json3-dev zlib1g-dev
  pybind11-dev libdlpack-dev python3-dev python3-numpy python3-pytest python3-pytest-xdist python3-hypothesis python3-matplotlib
  clang-14 libclang-rt-14-dev llvm-14
  libopenblas-dev
  libcpp-httplib-dev libssl-dev prometheus
  chromium
  python3-venv python3-pip python3-setuptools python3-wheel
)

log() { printf '\n==> %s\n' "$*"; }

# retry <command...>: up to APT_ATTEMPTS (default 3) attempts, waiting
# APT_RETRY_WAIT (default 10) seconds after the first failure and three times
# longer after each next one: a package mirror that fails for a moment (a
# timeout, a file changing during a sync) does not fail the run; one that
# keeps failing does, after the command's own error.
retry() {
  local attempts="${APT_ATTEMPTS:-3}" n=1 wait="${APT_RETRY_WAIT:-10}"
  until "$@"; do
    if (( n >= attempts )); then
      echo "failed $attempts times: $*" >&2
      return 1
    fi
    echo "attempt $n of $attempts failed: $*; again in ${wait}s" >&2
    sleep "$wait"
    n=$((n + 1)) wait=$((wait * 3))
  done
}

# apt_update_install <packages...> (uses install_deps's `sudo`). apt-get update
# reports a mirror it could not reach as a warning and exits 0; Error-Mode=any
# makes it a failure, so that it is retried.
apt_update_install() {
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 \
    -o APT::Update::Error-Mode=any update &&
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 \
      install -y --no-install-recommends "$@"
}

# ----------------------------------------------------------- step 1: deps ---
install_deps() {
  log "Checking prerequisites"
  if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "dpkg-query not found: not a Debian system. Install the equivalents of:" >&2
    echo "  ${PACKAGES[*]}" >&2
    return 0
  fi
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    echo "All ${#PACKAGES[@]} packages are installed."
  else
    local sudo=()
    if [[ $(id -u) -ne 0 ]]; then
      if command -v sudo >/dev/null 2>&1; then
        sudo=(sudo)
      else
        echo "Missing packages (${missing[*]}) and not root, and no sudo: install them manually." >&2
        return 1
      fi
    fi
    log "Installing: ${missing[*]}"
    # Update and install are retried together: after a failed download the
    # package lists may be what is stale.
    retry apt_update_install "${missing[@]}"
  fi
  if command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; then
    echo "CUDA toolkit found: building with CUDA (GPU code compiles; tests that need a GPU skip without one)."
  else
    echo "No CUDA toolkit (nvcc) found: building CPU-only. Install CUDA under /usr/local/cuda to enable it."
  fi
}

# ---------------------------------------------------------- step 2: build ---
build_release() {
  log "Configuring and building Release in ${BUILD_DIR}"
  local gen=()
  [[ -f "$BUILD_DIR/CMakeCache.txt" ]] || gen=(-G Ninja)
  cmake -S "$ROOT" -B "$BUILD_DIR" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release
  cmake --build "$BUILD_DIR" -j "$JOBS"
}

# ------------------------------------------------------- step 3: main job ---
# Genesis's "main job": what a newcomer should see working after setup.
# Replays the bundled GPT-2 training trace (every allocation PyTorch made, see
# data/traces/README.md) through each allocator configuration on the simulated
# GPU and prints peak reserved vs peak live bytes and ns per event, next to
# PyTorch's published figures for the same trace; then runs the memory
# debugger (profile, OOM prediction, leaks, fragmentation) over the same trace
# and writes its JSON and HTML reports. No GPU needed.
# Change this function when the main job changes.
run_main_job() {
  log "Main job: replay data/traces/gpt2_train.trace.csv.gz, every configuration (simulated GPU)"
  local tool="$BUILD_DIR/genesis-mem"
  local trace="$ROOT/data/traces/gpt2_train.trace.csv.gz"
  if [[ ! -x "$tool" ]]; then
    echo "ERROR: $tool was not built (is $BUILD_DIR configured with -DGENESIS_BUILD_TOOLS=OFF?)." >&2
    return 1
  fi
  "$tool" replay "$trace" --compare --repeat 5
  log "Main job: the memory debugger over the same trace (every tool; reports in $BUILD_DIR/main_job_report.*)"
  "$tool" monitor --all --trace "$trace" --speed max --duration 0 --quiet \
    -o "$BUILD_DIR/main_job_report.json" --html "$BUILD_DIR/main_job_report.html"
}

main() {
  local deps_only=0 run=1 a
  for a in "$@"; do
    case "$a" in
      --deps-only) deps_only=1 ;;
      --no-run) run=0 ;;
      -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; return 0 ;;
      *) echo "unknown argument: $a (see --help)" >&2; return 2 ;;
    esac
  done
  install_deps
  [[ $deps_only -eq 1 ]] && return 0
  build_release
  [[ $run -eq 1 ]] && run_main_job
  log "Done. Next: scripts/test.sh"
}

main "$@"
