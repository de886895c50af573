# GenesisToolDeps.cmake: third-party libraries of the command-line tools
# (tools/<name>/main.cpp) beyond the library's own: CLI11 (header-only).
#
# Falls back to a plain header lookup when a distribution ships the headers
# without CMake package files. Missing, it stops the configure (Note
# [Requested parts] in the top-level CMakeLists.txt): the tools are left out
# only with -DGENESIS_BUILD_TOOLS=OFF.

find_package(CLI11 CONFIG QUIET)
if(NOT TARGET CLI11::CLI11)
  find_path(GENESIS_CLI11_INCLUDE_DIR CLI/CLI.hpp)
  if(NOT GENESIS_CLI11_INCLUDE_DIR)
    message(FATAL_ERROR "Genesis: CLI11 not found (the tools need it): install libcli11-dev, "
                        "or configure with -DGENESIS_BUILD_TOOLS=OFF")
  endif()
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 INTERFACE "${GENESIS_CLI11_INCLUDE_DIR}")
endif()
