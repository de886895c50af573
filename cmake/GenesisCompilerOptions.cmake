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
  set(GENESIS_SANITIZER_FLAGS -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
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
