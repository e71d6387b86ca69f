# Compiler setup shared by every target.
# LibTorch 2.15's headers need C++20, so every internal TU is C++20; the public headers
# (engine/include, model/base) stay C++17 and tests/consumer compiles them as C++17 without torch.
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
# Every TU gets the same -fPIC (CMake's own PIC switch would give executables -fPIE and
# libraries -fPIC, and GCC rejects a PCH built with the other): one LibTorch PCH serves all
# targets, and the static libraries can go into the installable shared library.
set(CMAKE_POSITION_INDEPENDENT_CODE OFF)
# Everything is compiled with hidden visibility: libcorridorkey_engine.so exports only what
# the public headers mark CORRIDORKEY_API (export.h), not model/, kernels/, engine internals
# or the LibTorch / nlohmann template instances they use (tests/unit/exported_symbols.sh).
# Same flags for every target, so the one LibTorch PCH stays valid everywhere.
set(CMAKE_CXX_VISIBILITY_PRESET hidden)
set(CMAKE_VISIBILITY_INLINES_HIDDEN ON)
add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fPIC> $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-fPIC>)

if(CK_USE_CCACHE)
  find_program(CK_CCACHE ccache)
  if(CK_CCACHE)
    set(CMAKE_CXX_COMPILER_LAUNCHER "${CK_CCACHE}")
    set(CMAKE_CUDA_COMPILER_LAUNCHER "${CK_CCACHE}")
    # PCH + ccache: ccache needs these to cache TUs compiled against a precompiled header.
    set(ENV{CCACHE_SLOPPINESS} "pch_defines,time_macros,include_file_mtime,include_file_ctime")
  endif()
endif()

# Warnings for our own code only (LibTorch headers are included as SYSTEM). The build is
# warning-free under GCC and clang; CI (.ci/run) turns them into errors with CK_WERROR, so a
# new one fails the change that brings it rather than joining a list nobody reads.
option(CK_WERROR "Treat compiler warnings in the project's own targets as errors (CI)" OFF)
function(ck_target_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter $<$<BOOL:${CK_WERROR}>:-Werror>>)
  endif()
endfunction()
