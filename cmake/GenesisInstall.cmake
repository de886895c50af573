# GenesisInstall.cmake: what `cmake --install <build>` puts under the prefix.
# Included at the end of the top-level CMakeLists.txt (after every target is
# defined) when GENESIS_INSTALL is on.
#
#   lib/libgenesis.a                      the library            (component dev)
#   include/genesis/...                   public headers and the generated version.h
#   lib/cmake/genesis/                    find_package(genesis CONFIG) -> genesis::genesis
#   lib/pkgconfig/genesis.pc              pkg-config --cflags --libs genesis
#   bin/genesis-mem, share/genesis/       the tools and genesis-mem's plotter (component tools)
#   <GENESIS_PYTHON_INSTALL_DIR>/genesis  the Python package (component python, python/CMakeLists.txt),
#                                         with libgenesis_torch_allocator.so, PyTorch's pluggable
#                                         allocator, next to _C where it looks for it
#                                         (python/torch_allocator/CMakeLists.txt)
#
# Everything is copied: an installed Genesis does not refer back to the
# source or build tree, so both may be deleted afterwards. The CMake package
# and genesis.pc locate the prefix relative to themselves, so a prefix given
# only at install time (cmake --install build --prefix DIR) works.

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(GENESIS_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/genesis" CACHE STRING
    "Where the CMake package files go, relative to the prefix")
set(GENESIS_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig" CACHE STRING
    "Where genesis.pc goes, relative to the prefix")

# ---------------------------------------------------------- library, headers ---
install(TARGETS genesis EXPORT genesisTargets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT dev)
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/genesis" "${GENESIS_GENERATED_INCLUDE_DIR}/genesis"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}" COMPONENT dev)

# ------------------------------------------------------------- CMake package ---
install(EXPORT genesisTargets NAMESPACE genesis:: DESTINATION "${GENESIS_INSTALL_CMAKEDIR}"
        FILE genesisTargets.cmake COMPONENT dev)
# 0/1 flags for genesisConfig.cmake.in: what this build links.
foreach(_flag GENESIS_WITH_CUDA GENESIS_USE_ZLIB GENESIS_USE_OPENSSL GENESIS_USE_BLAS)
  if(${_flag})
    set(${_flag}_01 1)
  else()
    set(${_flag}_01 0)
  endif()
endforeach()
if(TARGET PkgConfig::GENESIS_HTTPLIB)
  set(GENESIS_HTTPLIB_FROM_PKGCONFIG_01 1)
else()
  set(GENESIS_HTTPLIB_FROM_PKGCONFIG_01 0)
endif()
set(GENESIS_CUDA_ROOT "")
if(GENESIS_WITH_CUDA)
  get_filename_component(GENESIS_CUDA_ROOT "${CUDAToolkit_BIN_DIR}" DIRECTORY)
endif()
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/genesisConfig.cmake.in"
                              "${PROJECT_BINARY_DIR}/generated/genesisConfig.cmake"
                              INSTALL_DESTINATION "${GENESIS_INSTALL_CMAKEDIR}")
# Before 1.0 a minor version may change the API: only the same major.minor
# satisfies a request.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/generated/genesisConfigVersion.cmake"
                                 VERSION "${PROJECT_VERSION}" COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/generated/genesisConfig.cmake"
              "${PROJECT_BINARY_DIR}/generated/genesisConfigVersion.cmake"
        DESTINATION "${GENESIS_INSTALL_CMAKEDIR}" COMPONENT dev)

# ---------------------------------------------------------------- genesis.pc ---
# Note [genesis.pc from the link interface]: the flags are read off the
# genesis target (what it links, publicly or not: a static library's users
# link its private dependencies too; the include paths and definitions of
# its public ones), so a dependency added to the target reaches genesis.pc
# without an edit here. Imported targets contribute their library files and,
# recursively, their own link interfaces. A link item this cannot read stops
# the configure rather than leave a .pc that fails at link time.

# The -L/-l (or path) form of one library file.
function(_genesis_pc_library_flags out path)
  get_filename_component(_dir "${path}" DIRECTORY)
  get_filename_component(_name "${path}" NAME)
  set(_lib "")
  if(_name MATCHES "^lib(.+)\\.so(\\.[0-9.]+)?$")
    set(_lib "${CMAKE_MATCH_1}")
  elseif(_name MATCHES "^lib(.+)\\.a$" AND _dir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
    set(_lib "${CMAKE_MATCH_1}")  # an archive the linker finds by itself
  endif()
  if(_lib)
    set(_flags "")
    if(NOT _dir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
      list(APPEND _flags "-L${_dir}")
    endif()
    list(APPEND _flags "-l${_lib}")
    set(${out} "${_flags}" PARENT_SCOPE)
  else()
    set(${out} "${path}" PARENT_SCOPE)  # static archives and anything else: the file itself
  endif()
endfunction()

# Appends the link flags of one item of a link interface to ${libs_var} and,
# when `public`, its compile flags to ${cflags_var}.
function(_genesis_pc_collect item public libs_var cflags_var)
  set(_libs "${${libs_var}}")
  set(_cflags "${${cflags_var}}")
  if(item MATCHES "^\\$<BUILD_INTERFACE:")
    return()  # needed only while Genesis itself compiles
  elseif(item MATCHES "^\\$<LINK_ONLY:(.*)>$")
    _genesis_pc_collect("${CMAKE_MATCH_1}" FALSE _libs _cflags)
  elseif(item STREQUAL "Threads::Threads")
    # FindThreads' result: nothing (glibc >= 2.34 has threads in libc) or a flag.
    if(CMAKE_THREAD_LIBS_INIT)
      list(APPEND _libs "${CMAKE_THREAD_LIBS_INIT}")
      if(public AND CMAKE_THREAD_LIBS_INIT STREQUAL "-pthread")
        list(APPEND _cflags "-pthread")
      endif()
    endif()
  elseif(TARGET "${item}")
    get_target_property(_aliased "${item}" ALIASED_TARGET)
    if(_aliased)
      _genesis_pc_collect("${_aliased}" ${public} _libs _cflags)
    else()
      get_target_property(_type "${item}" TYPE)
      get_target_property(_imported "${item}" IMPORTED)
      if(NOT _imported)
        message(FATAL_ERROR "genesis.pc: genesis links the project target ${item}, which is not installed "
                            "(Note [genesis.pc from the link interface] in cmake/GenesisInstall.cmake)")
      endif()
      if(NOT _type STREQUAL "INTERFACE_LIBRARY")
        get_target_property(_location "${item}" IMPORTED_LOCATION)
        if(NOT _location)
          get_target_property(_configs "${item}" IMPORTED_CONFIGURATIONS)
          list(GET _configs 0 _config)
          get_target_property(_location "${item}" IMPORTED_LOCATION_${_config})
        endif()
        if(NOT _location)
          message(FATAL_ERROR "genesis.pc: no library file for the imported target ${item}")
        endif()
        _genesis_pc_library_flags(_flags "${_location}")
        list(APPEND _libs ${_flags})
      endif()
      if(public)
        get_target_property(_incs "${item}" INTERFACE_INCLUDE_DIRECTORIES)
        foreach(_inc IN LISTS _incs)
          if(_inc AND NOT _inc IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
            list(APPEND _cflags "-I${_inc}")
          endif()
        endforeach()
        get_target_property(_defs "${item}" INTERFACE_COMPILE_DEFINITIONS)
        foreach(_def IN LISTS _defs)
          if(_def)
            list(APPEND _cflags "-D${_def}")
          endif()
        endforeach()
      endif()
      get_target_property(_deps "${item}" INTERFACE_LINK_LIBRARIES)
      foreach(_dep IN LISTS _deps)
        if(_dep)
          _genesis_pc_collect("${_dep}" ${public} _libs _cflags)
        endif()
      endforeach()
    endif()
  elseif(item MATCHES "^\\$<")
    message(FATAL_ERROR "genesis.pc: cannot read the link item '${item}' "
                        "(Note [genesis.pc from the link interface] in cmake/GenesisInstall.cmake)")
  elseif(item MATCHES "^-")
    list(APPEND _libs "${item}")
  elseif(IS_ABSOLUTE "${item}")
    _genesis_pc_library_flags(_flags "${item}")
    list(APPEND _libs ${_flags})
  else()
    list(APPEND _libs "-l${item}")
  endif()
  set(${libs_var} "${_libs}" PARENT_SCOPE)
  set(${cflags_var} "${_cflags}" PARENT_SCOPE)
endfunction()

set(GENESIS_PC_LIBS "")
set(GENESIS_PC_CFLAGS "")
get_target_property(_genesis_defs genesis INTERFACE_COMPILE_DEFINITIONS)
foreach(_def IN LISTS _genesis_defs)
  list(APPEND GENESIS_PC_CFLAGS "-D${_def}")
endforeach()
# LINK_LIBRARIES holds every item (public and private); INTERFACE_LINK_LIBRARIES
# tells which are public (their compile flags reach users).
get_target_property(_genesis_links genesis LINK_LIBRARIES)
get_target_property(_genesis_public genesis INTERFACE_LINK_LIBRARIES)
foreach(_item IN LISTS _genesis_links)
  if(_item IN_LIST _genesis_public)
    _genesis_pc_collect("${_item}" TRUE GENESIS_PC_LIBS GENESIS_PC_CFLAGS)
  else()
    _genesis_pc_collect("${_item}" FALSE GENESIS_PC_LIBS GENESIS_PC_CFLAGS)
  endif()
endforeach()
# A library listed twice keeps its last place: static archives must come
# after everything that uses them.
list(REVERSE GENESIS_PC_LIBS)
list(REMOVE_DUPLICATES GENESIS_PC_LIBS)
list(REVERSE GENESIS_PC_LIBS)
# Search directories first, for readers (ld applies -L to every -l anyway).
set(_pc_dirs "${GENESIS_PC_LIBS}")
list(FILTER _pc_dirs INCLUDE REGEX "^-L")
list(FILTER GENESIS_PC_LIBS EXCLUDE REGEX "^-L")
list(PREPEND GENESIS_PC_LIBS ${_pc_dirs})
list(REMOVE_DUPLICATES GENESIS_PC_CFLAGS)
list(JOIN GENESIS_PC_LIBS " " GENESIS_PC_LIBS)
list(JOIN GENESIS_PC_CFLAGS " " GENESIS_PC_CFLAGS)

# The prefix relative to the .pc file's own directory (${pcfiledir}).
if(IS_ABSOLUTE "${GENESIS_INSTALL_PKGCONFIGDIR}")
  set(GENESIS_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _up "/prefix/${GENESIS_INSTALL_PKGCONFIGDIR}" "/prefix")
  string(REGEX REPLACE "/$" "" _up "${_up}")
  set(GENESIS_PC_PREFIX "\${pcfiledir}/${_up}")
endif()
foreach(_dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_dir}}")
    set(GENESIS_PC_${_dir} "${CMAKE_INSTALL_${_dir}}")
  else()
    set(GENESIS_PC_${_dir} "\${prefix}/${CMAKE_INSTALL_${_dir}}")
  endif()
endforeach()
configure_file("${PROJECT_SOURCE_DIR}/cmake/genesis.pc.in" "${PROJECT_BINARY_DIR}/generated/genesis.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/generated/genesis.pc" DESTINATION "${GENESIS_INSTALL_PKGCONFIGDIR}"
        COMPONENT dev)

# ------------------------------------------------------------------- tools ---
# Installed programs find the shared libraries they were linked with outside
# the system directories (the CUDA toolkit's) through their RPATH.
foreach(_tool IN LISTS GENESIS_TOOL_TARGETS)
  set_target_properties(${_tool} PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS ${_tool} RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}" COMPONENT tools)
endforeach()
if(TARGET genesis-mem)
  # genesis-mem --plot looks for its plotter in ../share/genesis/ beside bin/.
  install(FILES "${PROJECT_SOURCE_DIR}/python/genesis/tools/memory/plot.py"
          DESTINATION "${CMAKE_INSTALL_DATADIR}/genesis" RENAME genesis_mem_plot.py COMPONENT tools)
endif()
