# Locate LibTorch inside the project's venv (the PyPI torch wheel ships the full C++
# library, headers and CMake package) and decide whether this is a CUDA build.
#
# Sets: Torch_FOUND, TORCH_LIBRARIES, CK_TORCH_VERSION, CK_TORCH_CUDA (wheel's CUDA version
# or empty), CK_CUDA (ON when kernels/ and CUDA code paths are compiled).

if(NOT CK_PYTHON)
  set(_ck_default_venv "$ENV{HOME}/.cache/corridorkey-engine/venv-torch2.15.0/bin/python")
  if(EXISTS "${_ck_default_venv}")
    set(CK_PYTHON "${_ck_default_venv}" CACHE FILEPATH "" FORCE)
  else()
    find_program(CK_PYTHON python3 REQUIRED)
  endif()
endif()

execute_process(
  COMMAND "${CK_PYTHON}" -c
    "import torch,sys;sys.stdout.write(';'.join([torch.utils.cmake_prefix_path,torch.__version__.split('+')[0],torch.version.cuda or '']))"
  OUTPUT_VARIABLE _ck_torch_info RESULT_VARIABLE _ck_rc ERROR_VARIABLE _ck_err)
if(NOT _ck_rc EQUAL 0)
  message(FATAL_ERROR "CK_PYTHON=${CK_PYTHON} cannot import torch (${_ck_err}). Run scripts/setup.sh first.")
endif()
list(GET _ck_torch_info 0 _ck_torch_prefix)
list(GET _ck_torch_info 1 CK_TORCH_VERSION)
if(CK_TORCH_VERSION VERSION_LESS 2.4)
  message(FATAL_ERROR "CK_PYTHON=${CK_PYTHON} has torch ${CK_TORCH_VERSION}; LibTorch >= 2.4 is needed")
endif()
list(LENGTH _ck_torch_info _n)
set(CK_TORCH_CUDA "")
if(_n GREATER 2)
  list(GET _ck_torch_info 2 CK_TORCH_CUDA)
endif()
list(APPEND CMAKE_PREFIX_PATH "${_ck_torch_prefix}")
get_filename_component(CK_TORCH_LIB_DIR "${_ck_torch_prefix}/../../lib" ABSOLUTE)

# ---- CUDA decision -----------------------------------------------------------
set(CK_CUDA OFF)
set(_ck_cuda_why "")
if(CK_WITH_CUDA STREQUAL "OFF")
  set(_ck_cuda_why "CK_WITH_CUDA=OFF")
elseif(NOT CK_TORCH_CUDA)
  set(_ck_cuda_why "the torch wheel has no CUDA")
else()
  include(CheckLanguage)
  check_language(CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    set(_ck_cuda_why "no nvcc found")
  else()
    execute_process(COMMAND "${CMAKE_CUDA_COMPILER}" --version OUTPUT_VARIABLE _nvcc_v)
    string(REGEX MATCH "release ([0-9]+)\\.([0-9]+)" _m "${_nvcc_v}")
    set(_nvcc_major "${CMAKE_MATCH_1}")
    string(REGEX MATCH "^([0-9]+)" _m "${CK_TORCH_CUDA}")
    if(NOT _nvcc_major STREQUAL CMAKE_MATCH_1)
      set(_ck_cuda_why "nvcc CUDA ${_nvcc_major}.x != torch CUDA ${CK_TORCH_CUDA}")
    else()
      set(CK_CUDA ON)
    endif()
  endif()
endif()
if(CK_WITH_CUDA STREQUAL "ON" AND NOT CK_CUDA)
  message(FATAL_ERROR "CK_WITH_CUDA=ON but CUDA cannot be built: ${_ck_cuda_why}")
endif()

if(CK_CUDA)
  # Torch's CMake turns TORCH_CUDA_ARCH_LIST into -gencode flags; its default list starts
  # at sm_50, which nvcc 13 no longer supports. sm_80 (A100/RTX 30), sm_86, sm_89 (RTX 40),
  # sm_90 (H100/H200) + PTX for newer parts.
  set(TORCH_CUDA_ARCH_LIST "8.0;8.6;8.9;9.0+PTX" CACHE STRING "CUDA archs for kernels/")
  set(CMAKE_CUDA_ARCHITECTURES OFF)
  enable_language(CUDA)
  # LibTorch's headers need C++20 in .cu files too (torch's target carries cxx_std_20);
  # CMake 3.25 predates nvcc 13's C++20 support, so tell it the flag.
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA_STANDARD 20)
  find_package(Torch REQUIRED)
  # libtorch_cuda needs the NCCL/cuDNN/... of the nvidia-* wheels next to torch (it finds
  # them at run time through its $ORIGIN RPATH). At link time the system CUDA toolkit's
  # older libnccl would win, so point the linker at the wheels' copies first.
  file(GLOB _ck_nv_libs LIST_DIRECTORIES true "${_ck_torch_prefix}/../../../nvidia/*/lib")
  add_library(ck_torch_cuda INTERFACE)
  target_link_libraries(ck_torch_cuda INTERFACE torch)
  foreach(_d IN LISTS _ck_nv_libs)
    get_filename_component(_d "${_d}" ABSOLUTE)
    target_link_options(ck_torch_cuda INTERFACE "LINKER:-rpath-link,${_d}")
  endforeach()
  set(CK_TORCH_TARGETS ck_torch_cuda)
else()
  # A CUDA wheel's CMake package wants a CUDA toolkit; a CPU-only build links just the
  # CPU half of LibTorch (libtorch_cpu + libc10) and never touches Caffe2's CUDA setup.
  set(_tl "${_ck_torch_prefix}/../../lib")
  get_filename_component(_tl "${_tl}" ABSOLUTE)
  find_library(CK_TORCH_CPU_LIB torch_cpu PATHS "${_tl}" NO_DEFAULT_PATH REQUIRED)
  find_library(CK_C10_LIB c10 PATHS "${_tl}" NO_DEFAULT_PATH REQUIRED)
  find_library(CK_TORCH_LIB torch PATHS "${_tl}" NO_DEFAULT_PATH REQUIRED)
  add_library(ck_torch_cpu INTERFACE)
  target_include_directories(ck_torch_cpu SYSTEM INTERFACE
    "${_tl}/../include" "${_tl}/../include/torch/csrc/api/include")
  target_link_libraries(ck_torch_cpu INTERFACE "${CK_TORCH_CPU_LIB}" "${CK_C10_LIB}")
  target_compile_definitions(ck_torch_cpu INTERFACE _GLIBCXX_USE_CXX11_ABI=1)
  set(CK_TORCH_TARGETS ck_torch_cpu)
endif()
message(STATUS "CorridorKey: LibTorch ${CK_TORCH_VERSION} (wheel CUDA: '${CK_TORCH_CUDA}') "
               "CUDA build: ${CK_CUDA} ${_ck_cuda_why}")

# All torch-including targets go through this so they share one precompiled header.
# Every torch target gets identical flags and definitions: GCC only reuses a precompiled
# header when they match.
function(ck_use_torch target)
  target_link_libraries(${target} PRIVATE ${CK_TORCH_TARGETS})
  target_compile_definitions(${target} PRIVATE CK_TORCH_CUDA_VERSION="${CK_TORCH_CUDA}")
  if(CK_CUDA)
    target_compile_definitions(${target} PRIVATE CK_WITH_CUDA=1)
  endif()
  ck_target_warnings(${target})
  if(CK_USE_PCH AND NOT target STREQUAL "ck_torch_pch")
    target_precompile_headers(${target} REUSE_FROM ck_torch_pch)
  elseif(CK_USE_PCH)
    target_precompile_headers(${target} PRIVATE "${PROJECT_SOURCE_DIR}/cmake/ck_torch_pch.h")
  endif()
endfunction()

# The target that owns the precompiled LibTorch header; every torch TU reuses it.
add_library(ck_torch_pch STATIC "${PROJECT_SOURCE_DIR}/cmake/ck_torch_pch.cpp")
ck_use_torch(ck_torch_pch)
