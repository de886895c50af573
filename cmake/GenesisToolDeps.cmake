# GenesisToolDeps.cmake: third-party libraries of the command-line tools
# (tools/<name>/main.cpp): CLI11, nlohmann_json (both header-only) and zlib.
#
# Sets GENESIS_TOOL_DEPS_FOUND. Falls back to plain header lookups when a
# distribution ships the headers without CMake package files. When something is
# missing the tools are skipped with a warning instead of failing the configure
# (the GPU machine cannot install packages).

set(GENESIS_TOOL_DEPS_FOUND TRUE)

find_package(CLI11 CONFIG QUIET)
if(NOT TARGET CLI11::CLI11)
  find_path(GENESIS_CLI11_INCLUDE_DIR CLI/CLI.hpp)
  if(GENESIS_CLI11_INCLUDE_DIR)
    add_library(CLI11::CLI11 INTERFACE IMPORTED)
    target_include_directories(CLI11::CLI11 INTERFACE "${GENESIS_CLI11_INCLUDE_DIR}")
  else()
    message(WARNING "Genesis: CLI11 not found (install libcli11-dev)")
    set(GENESIS_TOOL_DEPS_FOUND FALSE)
  endif()
endif()

find_package(nlohmann_json 3 CONFIG QUIET)
if(NOT TARGET nlohmann_json::nlohmann_json)
  find_path(GENESIS_NLOHMANN_JSON_INCLUDE_DIR nlohmann/json.hpp)
  if(GENESIS_NLOHMANN_JSON_INCLUDE_DIR)
    add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
    target_include_directories(nlohmann_json::nlohmann_json INTERFACE "${GENESIS_NLOHMANN_JSON_INCLUDE_DIR}")
  else()
    message(WARNING "Genesis: nlohmann_json not found (install nlohmann-json3-dev)")
    set(GENESIS_TOOL_DEPS_FOUND FALSE)
  endif()
endif()

find_package(ZLIB QUIET)
if(NOT TARGET ZLIB::ZLIB)
  message(WARNING "Genesis: zlib not found (install zlib1g-dev)")
  set(GENESIS_TOOL_DEPS_FOUND FALSE)
endif()
