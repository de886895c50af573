# GenesisCuda.cmake: decide whether CUDA is enabled and set it up.
#
# Input : GENESIS_ENABLE_CUDA = AUTO | ON | OFF (cache string)
# Output: GENESIS_WITH_CUDA   = TRUE | FALSE (normal variable)
#         CUDA language enabled, CUDAToolkit found, CMAKE_CUDA_ARCHITECTURES set.
#
# AUTO turns CUDA on when an nvcc is found: CUDACXX / CMAKE_CUDA_COMPILER, nvcc
# on PATH, or /usr/local/cuda/bin/nvcc. It does not need a GPU: the build
# machine may have the toolkit only (code then reports "no device" at run time).

include(CheckLanguage)

set(GENESIS_WITH_CUDA FALSE)
string(TOUPPER "${GENESIS_ENABLE_CUDA}" _genesis_cuda_mode)

if(_genesis_cuda_mode STREQUAL "OFF" OR _genesis_cuda_mode STREQUAL "FALSE" OR _genesis_cuda_mode STREQUAL "0")
  message(STATUS "Genesis: CUDA disabled (GENESIS_ENABLE_CUDA=${GENESIS_ENABLE_CUDA})")
  return()
endif()

# Help check_language/enable_language find the standard toolkit location when
# nvcc is not on PATH and nothing else was specified.
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
  find_program(_genesis_nvcc nvcc)
  if(NOT _genesis_nvcc AND EXISTS "/usr/local/cuda/bin/nvcc")
    set(CMAKE_CUDA_COMPILER "/usr/local/cuda/bin/nvcc" CACHE FILEPATH "CUDA compiler")
  endif()
  unset(_genesis_nvcc CACHE)
endif()

# sm_90 (Hopper) unless the caller chose something else. Must be set before
# enable_language(CUDA), otherwise CMake picks the compiler's default.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
  set(CMAKE_CUDA_ARCHITECTURES 90 CACHE STRING "CUDA architectures to build for")
endif()

check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  if(_genesis_cuda_mode STREQUAL "AUTO")
    message(STATUS "Genesis: no CUDA compiler found, building without CUDA (GENESIS_WITH_CUDA=0)")
    return()
  endif()
  message(FATAL_ERROR "GENESIS_ENABLE_CUDA=${GENESIS_ENABLE_CUDA} but no CUDA compiler (nvcc) was found. "
                      "Put nvcc on PATH, set CUDACXX, or pass -DCMAKE_CUDA_COMPILER=/path/to/nvcc.")
endif()

enable_language(CUDA)
if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
  # CMake < 3.26 does not know nvcc's C++20 flag (nvcc >= 12 supports it).
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  list(APPEND CMAKE_CUDA20_COMPILE_FEATURES cuda_std_20)
  list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
endif()
set(CMAKE_CUDA_STANDARD 20)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_EXTENSIONS OFF)

find_package(CUDAToolkit REQUIRED)
set(GENESIS_WITH_CUDA TRUE)
message(STATUS "Genesis: CUDA ${CUDAToolkit_VERSION} enabled (nvcc ${CMAKE_CUDA_COMPILER}, "
               "architectures ${CMAKE_CUDA_ARCHITECTURES})")

# Link the CUDA libraries Genesis needs into <target> (PUBLIC so that the
# toolkit headers, e.g. <cuda_runtime.h>, are visible to plain .cpp files of
# the target and of its users). Add further libraries here when needed.
function(genesis_link_cuda target)
  target_link_libraries(${target} PUBLIC CUDA::cudart_static)
  # cuBLAS and cuBLASLt (the tensor matmul, src/tensor/cuda/cuda_matmul.cu)
  # are not linked: they are opened on first use (Note [CUDA loaded on first
  # use] in src/tensor/cuda/cublas_loader.cpp), from the loader's search path
  # or else this toolkit's library directory.
  target_link_libraries(${target} PUBLIC ${CMAKE_DL_LIBS})
  target_compile_definitions(${target} PRIVATE GENESIS_CUDA_LIBRARY_DIR="${CUDAToolkit_LIBRARY_DIR}")
  if(GENESIS_LINK_CUDA_DRIVER)
    # Driver API (cuMemCreate, cuMemMap, ...). Links libcuda.so, which comes
    # with the driver: on a build-only machine the toolkit's stub is used.
    target_link_libraries(${target} PUBLIC CUDA::cuda_driver)
  endif()
endfunction()
