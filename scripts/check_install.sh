#!/usr/bin/env bash
# Genesis as another project sees it: install it, then build and run a
# program against the installed copy (tests/consumer/), and use it as a
# subproject. scripts/test.sh runs this as its "install" stage.
#
#   scripts/check_install.sh [--build-dir DIR] [--subproject-build] [--keep]
#
#   --build-dir DIR      install from this existing build (test.sh passes the
#                        Release build/, so nothing is compiled twice); without
#                        it a minimal build is made in build-install/ (CUDA off,
#                        no tests, benchmarks or examples)
#   --subproject-build   also compile and run the consumer with Genesis added
#                        as a subproject (compiles the library once more)
#   --keep               keep the temporary prefix, venv and builds (printed)
#
# Steps (each must pass; the first failure ends the run with status 1):
#   install     cmake --install DIR --prefix TMP/prefix (copies only: no link
#               in the prefix may point anywhere)
#   versions    genesis-mem --version, pkg-config --modversion, the CMake
#               package version and genesis/version.h all give the version of
#               project(genesis VERSION ...) in CMakeLists.txt
#   cmake       tests/consumer through find_package(genesis CONFIG), run
#   pkg-config  tests/consumer/main.cpp compiled with `pkg-config --cflags --libs genesis`, run
#   python      tests/consumer/python_consumer.py against the Python package that
#               cmake --install put in the prefix, and against a pip install
#               (pip install --no-build-isolation .) in a fresh venv; both from
#               outside the source tree
#   subproject  tests/consumer with Genesis as add_subdirectory: the build holds
#               the library and the consumer only, and CTest only the consumer's test
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON=/usr/bin/python3
[[ -x $PYTHON ]] || PYTHON=python3
JOBS="$(nproc 2>/dev/null || echo 2)"
BUILD_DIR=""
SUB_BUILD=0
KEEP=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) BUILD_DIR="$(cd "$2" && pwd)"; shift 2 ;;
    --subproject-build) SUB_BUILD=1; shift ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,30p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

VERSION="$(sed -n 's/^project(genesis VERSION \([0-9][0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")"
[[ -n $VERSION ]] || { echo "check_install: no project(genesis VERSION ...) in CMakeLists.txt" >&2; exit 1; }

TMP="$(mktemp -d /tmp/genesis-install.XXXXXX)"
if [[ $KEEP -eq 0 ]]; then
  trap 'rm -rf "$TMP"' EXIT
fi
PREFIX="$TMP/prefix"
step_start=0
step() { printf '\n--> %s\n' "$*"; step_start=$SECONDS; }
took() { printf '    (%ss)\n' "$((SECONDS - step_start))"; }
die() { echo "check_install: FAILED: $*" >&2; exit 1; }
gen=(-G Ninja)
command -v ninja >/dev/null 2>&1 || gen=()

# ----------------------------------------------------------------- build ---
if [[ -z $BUILD_DIR ]]; then
  BUILD_DIR="$ROOT/build-install"
  step "build: minimal Genesis in $BUILD_DIR (CUDA off, library, tools, Python module)"
  [[ -f "$BUILD_DIR/CMakeCache.txt" ]] && gen=()
  cmake -S "$ROOT" -B "$BUILD_DIR" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGENESIS_ENABLE_CUDA=OFF \
    -DGENESIS_BUILD_TESTS=OFF -DGENESIS_BUILD_BENCH=OFF -DGENESIS_BUILD_EXAMPLES=OFF >/dev/null
  gen=(-G Ninja); command -v ninja >/dev/null 2>&1 || gen=()
else
  step "build: bring $BUILD_DIR up to date"
fi
cmake --build "$BUILD_DIR" -j "$JOBS"
took
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD_DIR/CMakeCache.txt"; }
[[ "$(cache_value GENESIS_INSTALL)" != OFF ]] || die "$BUILD_DIR is configured with GENESIS_INSTALL=OFF"
HAS_TOOLS="$(cache_value GENESIS_BUILD_TOOLS)"
HAS_PYTHON="$(cache_value GENESIS_BUILD_PYTHON)"
# The interpreter the module was built for (the venv and the imports use it).
build_python="$(cache_value Python3_EXECUTABLE)"
[[ -n $build_python && -x $build_python ]] && PYTHON="$build_python"

# --------------------------------------------------------------- install ---
step "install: cmake --install $BUILD_DIR --prefix $PREFIX"
cmake --install "$BUILD_DIR" --prefix "$PREFIX" >/dev/null
links="$(find "$PREFIX" -type l)"
[[ -z $links ]] || die "the install holds symbolic links: $links"
[[ -f "$PREFIX/include/genesis/version.h" ]] || die "include/genesis/version.h was not installed"
libdir="$(dirname "$(find "$PREFIX" -name libgenesis.a | head -1)")"
[[ -f "$libdir/libgenesis.a" ]] || die "libgenesis.a was not installed"
echo "    $(find "$PREFIX" -type f | wc -l) files; library in ${libdir#"$PREFIX"/}"
took

# -------------------------------------------------------------- versions ---
step "versions: every place reports $VERSION"
header="$(sed -n 's/^#define GENESIS_VERSION_STRING "\(.*\)"/\1/p' "$PREFIX/include/genesis/version.h")"
[[ $header == "$VERSION" ]] || die "genesis/version.h says '$header'"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
pc="$(pkg-config --modversion genesis)" || die "pkg-config does not find genesis.pc in $PKG_CONFIG_PATH"
[[ $pc == "$VERSION" ]] || die "pkg-config --modversion genesis says '$pc'"
grep -q "set(PACKAGE_VERSION \"$VERSION\")" "$libdir/cmake/genesis/genesisConfigVersion.cmake" ||
  die "genesisConfigVersion.cmake does not carry $VERSION"
if [[ $HAS_TOOLS != OFF ]]; then
  mem="$("$PREFIX/bin/genesis-mem" --version)"
  [[ $mem == "genesis-mem $VERSION" ]] || die "genesis-mem --version says '$mem'"
  [[ -f "$PREFIX/share/genesis/genesis_mem_plot.py" ]] || die "genesis-mem's plotter was not installed"
fi
took

# ---------------------------------------------------------- find_package ---
step "cmake: tests/consumer through find_package(genesis CONFIG)"
cmake -S "$ROOT/tests/consumer" -B "$TMP/consumer-cmake" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$PREFIX" -DGENESIS_CONSUMER_EXPECTED_VERSION="$VERSION" >/dev/null
cmake --build "$TMP/consumer-cmake" >/dev/null
(cd "$TMP/consumer-cmake" && ctest --output-on-failure) >/dev/null || die "the find_package consumer failed"
"$TMP/consumer-cmake/genesis_consumer" "$VERSION"
took

# ------------------------------------------------------------ pkg-config ---
step "pkg-config: c++ -std=c++20 main.cpp \$(pkg-config --cflags --libs genesis)"
# shellcheck disable=SC2046  # the flags are words on purpose
"${CXX:-c++}" -std=c++20 -O1 "$ROOT/tests/consumer/main.cpp" -o "$TMP/consumer-pkgconfig" \
  $(pkg-config --cflags --libs genesis) || die "the pkg-config consumer did not build"
"$TMP/consumer-pkgconfig" "$VERSION"
took

# ---------------------------------------------------------------- python ---
if [[ $HAS_PYTHON != OFF ]]; then
  # From a directory outside the tree, with nothing of the tree on the path.
  site="$(find "$PREFIX" -path '*-packages/genesis/__init__.py' | head -1)"
  [[ -n $site ]] || die "cmake --install put no Python package into $PREFIX"
  site="$(dirname "$(dirname "$site")")"
  step "python: the package cmake --install put in ${site#"$PREFIX"/}"
  (cd "$TMP" && env -u PYTHONPATH PYTHONPATH="$site" "$PYTHON" "$ROOT/tests/consumer/python_consumer.py" "$ROOT" "$VERSION")
  took

  step "python: pip install --no-build-isolation . into a fresh venv"
  "$PYTHON" -m venv --system-site-packages "$TMP/venv"
  (cd "$ROOT" && env -u PYTHONPATH GENESIS_BUILD_DIR="$BUILD_DIR" PIP_DISABLE_PIP_VERSION_CHECK=1 \
     "$TMP/venv/bin/python" -m pip install --no-build-isolation --no-deps --no-index --no-cache-dir -q .) ||
    die "pip install failed"
  (cd "$TMP" && env -u PYTHONPATH "$TMP/venv/bin/python" "$ROOT/tests/consumer/python_consumer.py" "$ROOT" "$VERSION")
  took
fi

# ------------------------------------------------------------ subproject ---
step "subproject: tests/consumer with add_subdirectory(<genesis>)"
sub="$TMP/consumer-subproject"
cmake -S "$ROOT/tests/consumer" -B "$sub" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGENESIS_ENABLE_CUDA=OFF \
  -DGENESIS_CONSUMER_SOURCE_DIR="$ROOT" -DGENESIS_CONSUMER_EXPECTED_VERSION="$VERSION" >/dev/null
# Everything the build links: the library and the consumer, nothing else.
linked="$(ninja -C "$sub" -t targets all | sed -n 's/^\([^:]*\): [A-Z_]*LINKER_.*/\1/p' | sort | tr '\n' ' ')"
[[ $linked == "genesis/libgenesis.a genesis_consumer " ]] || die "the subproject build links more than the library: $linked"
tests="$(cd "$sub" && ctest -N | sed -n 's/^Total Tests: //p')"
[[ $tests == 1 ]] || die "the parent's CTest holds $tests tests (expected only the consumer's)"
echo "    links: $linked; CTest: $tests test"
if [[ $SUB_BUILD -eq 1 ]]; then
  cmake --build "$sub" -j "$JOBS" >/dev/null
  "$sub/genesis_consumer" "$VERSION"
fi
took

[[ $KEEP -eq 1 ]] && echo "kept: $TMP"
echo "check_install: OK (Genesis $VERSION)"
