# GenesisGTest.cmake: provide GTest::gtest, GTest::gtest_main (and GTest::gmock
# when available).
#
# Uses the installed GoogleTest (find_package(GTest)) and falls back to building
# it from /usr/src/googletest (Debian/Ubuntu's libgtest-dev sources). Sanitizer
# builds prefer the sources so that gtest is instrumented like our code.

set(GENESIS_GTEST_SOURCE_DIR "/usr/src/googletest" CACHE PATH "GoogleTest sources used when no installed GTest fits")

set(_genesis_gtest_from_source OFF)
if(GENESIS_SANITIZER_FLAGS AND EXISTS "${GENESIS_GTEST_SOURCE_DIR}/CMakeLists.txt")
  set(_genesis_gtest_from_source ON)
else()
  find_package(GTest QUIET)
  if(NOT GTest_FOUND OR NOT TARGET GTest::gtest OR NOT TARGET GTest::gtest_main)
    set(_genesis_gtest_from_source ON)
  endif()
endif()

if(_genesis_gtest_from_source)
  if(NOT EXISTS "${GENESIS_GTEST_SOURCE_DIR}/CMakeLists.txt")
    message(FATAL_ERROR "GoogleTest not found: install libgtest-dev (scripts/setup.sh does) "
                        "or set GENESIS_GTEST_SOURCE_DIR to a googletest source tree.")
  endif()
  message(STATUS "Genesis: building GoogleTest from ${GENESIS_GTEST_SOURCE_DIR}")
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  set(BUILD_GMOCK ON CACHE BOOL "" FORCE)
  set(gtest_force_shared_crt ON CACHE BOOL "" FORCE)
  add_subdirectory("${GENESIS_GTEST_SOURCE_DIR}" "${CMAKE_BINARY_DIR}/_deps/googletest" EXCLUDE_FROM_ALL SYSTEM)
  foreach(_lib gtest gtest_main gmock gmock_main)
    if(TARGET ${_lib} AND NOT TARGET GTest::${_lib})
      add_library(GTest::${_lib} ALIAS ${_lib})
    endif()
  endforeach()
else()
  message(STATUS "Genesis: using installed GoogleTest ${GTest_VERSION}")
endif()

include(GoogleTest)

# genesis_add_gtest_executable(<name> LABEL <label> SOURCES <files...>)
# One test binary; its tests are discovered when ctest runs (PRE_TEST), so
# `ctest -R <regex>` selects single tests and GTEST_SKIP shows as "skipped".
function(genesis_add_gtest_executable name)
  cmake_parse_arguments(ARG "" "LABEL" "SOURCES" ${ARGN})
  if(NOT ARG_SOURCES)
    # No test files yet: keep the target so scripts can rely on it existing.
    set(_placeholder "${CMAKE_BINARY_DIR}/_generated/${name}_placeholder.cpp")
    file(WRITE "${_placeholder}.tmp" "// Generated: no test sources matched for ${name} yet.\n")
    configure_file("${_placeholder}.tmp" "${_placeholder}" COPYONLY)
    set(ARG_SOURCES "${_placeholder}")
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE "${PROJECT_SOURCE_DIR}/tests")
  target_link_libraries(${name} PRIVATE genesis GTest::gtest_main Threads::Threads)
  if(TARGET GTest::gmock)
    target_link_libraries(${name} PRIVATE GTest::gmock)
  endif()
  genesis_target_warnings(${name})
  genesis_test_optimisation(${name})
  genesis_test_binary_flags(${name})
  if(GENESIS_TEST_UNITY)
    # Every test file parses GoogleTest and Genesis's headers (~6 s under
    # ASan+UBSan before a line of its own): eight files share one parse.
    set_target_properties(${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
  gtest_discover_tests(${name}
    DISCOVERY_MODE PRE_TEST
    DISCOVERY_TIMEOUT 120
    PROPERTIES LABELS "${ARG_LABEL}" TIMEOUT 600)
endfunction()
