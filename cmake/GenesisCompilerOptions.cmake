# GenesisCompilerOptions.cmake: sanitizers (global) and warnings (per target).
#
# GENESIS_SANITIZE = ""        no sanitizer
#                  | "address" ASan + UBSan (UBSan errors abort the test)
#                  | "thread"  TSan
# Sanitizer flags are added globally (all targets, including googletest when
# it is built from source) so instrumented and uninstrumented code do not mix.

set(_genesis_sanitize "${GENESIS_SANITIZE}")
string(TOLOWER "${_genesis_sanitize}" _genesis_sanitize)

if(_genesis_sanitize STREQUAL "" OR _genesis_sanitize STREQUAL "none" OR _genesis_sanitize STREQUAL "off")
  set(GENESIS_SANITIZER_FLAGS "")
elseif(_genesis_sanitize STREQUAL "address" OR _genesis_sanitize STREQUAL "asan")
  # Note [UBSan's null check under ASan]: UBSan's null check is left out. A
  # load or store through a null pointer is a SEGV that ASan reports with its
  # stack, so the check adds little here, and it was a third of the compile
  # time of a file under ASan+UBSan (an allocator test file: 123 s with it,
  # 84 s without; the CPU elementwise kernels at -O1: 123 s and 94 s).
  set(GENESIS_SANITIZER_FLAGS -fsanitize=address,undefined -fno-sanitize=null
      -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
elseif(_genesis_sanitize STREQUAL "thread" OR _genesis_sanitize STREQUAL "tsan")
  set(GENESIS_SANITIZER_FLAGS -fsanitize=thread -fno-omit-frame-pointer)
else()
  message(FATAL_ERROR "GENESIS_SANITIZE must be empty, 'address' or 'thread' (got '${GENESIS_SANITIZE}')")
endif()

if(GENESIS_SANITIZER_FLAGS)
  message(STATUS "Genesis: sanitizer flags: ${GENESIS_SANITIZER_FLAGS}")
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${GENESIS_SANITIZER_FLAGS}>")
  # nvcc: instrument host code only.
  string(REPLACE ";" "," _genesis_san_csv "${GENESIS_SANITIZER_FLAGS}")
  add_compile_options("$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${_genesis_san_csv}>")
  add_link_options(${GENESIS_SANITIZER_FLAGS})
endif()

# Warnings for Genesis's own targets (not third-party code).
function(genesis_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
  if(GENESIS_WERROR)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Werror>
      $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Werror>)
  endif()
endfunction()

# Note [Test code optimisation]: the test binaries are code that drives the
# library, not the library; what they must exercise is the library as it is
# built (its build type, its sanitizers). Their own TUs are mostly GoogleTest
# macros and setup, and compiling those with the library's flags was most of
# a sanitizer build's time: one large test file took 162 s with ASan+UBSan at
# -O1 and 70 s at -O0 (53 s and 28 s uninstrumented at -O3 and -O1). So, with
# GENESIS_TEST_OPTIMIZATION=auto:
#   sanitizer builds        test binaries and the Python bindings at -O0
#                           (the library keeps -O1: the tests' heavy work
#                           runs there, instrumented as before)
#   Release, RelWithDebInfo test binaries at -O0, but for the files named
#                           with genesis_test_heavy_loops() (tests that loop
#                           over all 2^32 float patterns in their own code),
#                           which get -O2 and their own compiler run, and
#                           genesis_gpu_tests, which stays at -O1: its
#                           checks fill and compare millions of elements in
#                           test code (one test took 59 s at -O0)
#   other build types       nothing added
# (Release: a test file at -O0 compiled in 37 s against 60 s at -O1; the
# whole test run took as long, once the float-pattern loops kept their
# optimisation: at -O0 they alone took 260 s.)
# Under ASan+UBSan the test binaries' own code (not the bindings, which read
# users' buffers) also leaves out UBSan's alignment check: the library that
# does the typed access to byte buffers keeps it, and without it the largest
# test files compile in two thirds of the time (84 s against 56 s).
# ASan builds also link the test binaries as position-dependent executables:
# ctest starts one process per test, and an ASan binary's start-up
# (relocating its sanitizer metadata) was 0.31 s as a PIE and 0.19 s without,
# most of the stage's time for the short tests. (TSan binaries stay PIE,
# the layout TSan's runtime expects; they start in 0.1 s.)
# Together with Note [UBSan's null check under ASan], the ASan stage's
# build went from 1,590 to 1,030 s of compiler time and its tests from 319 to
# 172 s of test time (dev box, two cores).
# "none" adds nothing anywhere; any other value is a list of flags for the
# test binaries (and, in sanitizer builds, the bindings). The flags come
# after the build type's, so their -O wins.
set(GENESIS_TEST_OPT_FLAGS "")
set(GENESIS_TEST_ONLY_FLAGS "")
set(GENESIS_TEST_LINK_FLAGS "")
set(GENESIS_TEST_HEAVY_LOOP_FLAGS "")
set(GENESIS_TEST_KEEP_OPT_FLAGS "")
if(GENESIS_TEST_OPTIMIZATION STREQUAL "auto" OR GENESIS_TEST_OPTIMIZATION STREQUAL "")
  if(GENESIS_SANITIZER_FLAGS)
    set(GENESIS_TEST_OPT_FLAGS -O0)
    if(_genesis_sanitize STREQUAL "address" OR _genesis_sanitize STREQUAL "asan")
      set(GENESIS_TEST_ONLY_FLAGS -fno-sanitize=alignment)
      set(GENESIS_TEST_LINK_FLAGS -no-pie)
    endif()
  elseif(CMAKE_BUILD_TYPE MATCHES "^(Release|RelWithDebInfo)$")
    set(GENESIS_TEST_OPT_FLAGS -O0)
    set(GENESIS_TEST_HEAVY_LOOP_FLAGS -O2)
    set(GENESIS_TEST_KEEP_OPT_FLAGS -O1)
  endif()
elseif(NOT GENESIS_TEST_OPTIMIZATION STREQUAL "none")
  separate_arguments(GENESIS_TEST_OPT_FLAGS UNIX_COMMAND "${GENESIS_TEST_OPTIMIZATION}")
endif()

# genesis_test_optimisation(<target>): the flags above, for a test binary (or,
# in sanitizer builds, the Python bindings).
function(genesis_test_optimisation target)
  if(GENESIS_TEST_OPT_FLAGS)
    target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${GENESIS_TEST_OPT_FLAGS}>")
  endif()
endfunction()

# genesis_test_heavy_loops(<files...>): test files whose own code loops long
# enough to need optimising where the test binaries otherwise get none
# (above). Such a file is compiled on its own, outside the unity batches.
function(genesis_test_heavy_loops)
  if(GENESIS_TEST_HEAVY_LOOP_FLAGS)
    set_source_files_properties(${ARGN} PROPERTIES
      COMPILE_OPTIONS "${GENESIS_TEST_HEAVY_LOOP_FLAGS}" SKIP_UNITY_BUILD_INCLUSION ON)
  endif()
endfunction()

# genesis_test_keep_optimised(<target>): a test binary whose own code does
# heavy work keeps -O1 where the others get none (above).
function(genesis_test_keep_optimised target)
  if(GENESIS_TEST_KEEP_OPT_FLAGS)
    target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${GENESIS_TEST_KEEP_OPT_FLAGS}>")
  endif()
endfunction()

# genesis_test_binary_flags(<target>): what only the test executables get
# (the alignment check left out under ASan, position-dependent linking).
function(genesis_test_binary_flags target)
  if(GENESIS_TEST_ONLY_FLAGS)
    target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${GENESIS_TEST_ONLY_FLAGS}>")
  endif()
  if(GENESIS_TEST_LINK_FLAGS)
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
    target_link_options(${target} PRIVATE ${GENESIS_TEST_LINK_FLAGS})
  endif()
endfunction()
