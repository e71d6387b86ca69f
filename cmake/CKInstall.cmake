# Installable package: libcorridorkey_engine.so (every engine/model/kernels object, LibTorch
# linked privately), the public headers, the CLI, profiles and the bundled checkpoint, and a
# CMake package exporting corridorkey::engine.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(CK_INSTALL_SHARE "${CMAKE_INSTALL_DATADIR}/corridorkey")

add_library(corridorkey_engine SHARED "${PROJECT_SOURCE_DIR}/cmake/ck_torch_pch.cpp"
            $<TARGET_OBJECTS:ck_runtime_hooks>)
# Every object of the engine's static libraries goes in (--whole-archive), so the exported
# library is complete whatever a consumer calls; their own dependencies link normally.
# The dev tools (ck_devtools) and the tests' hooks are not among them: the library is the API.
set(_ck_parts ck_base ck_options ck_config ck_colour ck_clip_colour ck_io ck_post ck_hint ck_runtime_core ck_runtime
  ck_pipeline ck_report ck_farm ck_compat ck_model ck_kernels)
add_dependencies(corridorkey_engine ${_ck_parts})
set(_ck_archives "")
foreach(_p IN LISTS _ck_parts)
  list(APPEND _ck_archives "$<TARGET_FILE:${_p}>")
endforeach()
target_link_options(corridorkey_engine PRIVATE
  "LINKER:--whole-archive" ${_ck_archives} "LINKER:--no-whole-archive")
# Only the public API is exported (export.h, tests/unit/exported_symbols.sh).
target_link_options(corridorkey_engine PRIVATE
  "LINKER:--version-script=${PROJECT_SOURCE_DIR}/cmake/corridorkey_engine.map")
# Archives named in link options are not link dependencies to the generator: relink the
# shared library whenever one of them changes.
set_property(TARGET corridorkey_engine APPEND PROPERTY LINK_DEPENDS ${_ck_archives}
             "${PROJECT_SOURCE_DIR}/cmake/corridorkey_engine.map")
target_link_libraries(corridorkey_engine PUBLIC ck_headers
  PRIVATE ${CK_TORCH_TARGETS} yaml-cpp ${OpenCV_LIBS} OpenEXR::OpenEXR
  OpenColorIO::OpenColorIO OpenImageIO::OpenImageIO JPEG::JPEG)
# Where an installed binary finds LibTorch: by default the documented venv's torch/lib
# (docs/build.md), which stays put when the prefix moves (LibTorch's own $ORIGIN RPATH finds
# the CUDA wheels). A relocatable bundle that carries LibTorch with it (a Python wheel beside
# the torch package) sets an $ORIGIN-relative path instead, e.g. "$ORIGIN/../../torch/lib".
set(CK_INSTALL_TORCH_RPATH "${CK_TORCH_LIB_DIR}" CACHE STRING
    "RPATH entry of installed binaries for LibTorch (absolute, or $ORIGIN-relative)")
set_target_properties(corridorkey_engine PROPERTIES
  EXPORT_NAME engine
  VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
  INSTALL_RPATH "${CK_INSTALL_TORCH_RPATH}")
ck_build_tree_marker(corridorkey_engine)
set_target_properties(ck_headers PROPERTIES EXPORT_NAME headers)
add_library(corridorkey::engine_shared ALIAS corridorkey_engine)

install(TARGETS corridorkey_engine ck_headers EXPORT CorridorKeyTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY "${PROJECT_SOURCE_DIR}/engine/include/corridorkey"
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
# The public headers that live in model/base (ck_errors), beside the others; check.h (CK_CHECK)
# stays behind: the installed headers are the API alone.
install(FILES "${PROJECT_SOURCE_DIR}/model/base/include/corridorkey/errors.h"
              "${PROJECT_SOURCE_DIR}/model/base/include/corridorkey/export.h"
              "${PROJECT_BINARY_DIR}/model/base/include/corridorkey/version.h"
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/corridorkey)
install(EXPORT CorridorKeyTargets NAMESPACE corridorkey::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/CorridorKey)
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/CorridorKeyConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/CorridorKeyConfig.cmake"
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/CorridorKey
  PATH_VARS CK_INSTALL_SHARE)
write_basic_package_version_file("${PROJECT_BINARY_DIR}/CorridorKeyConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/CorridorKeyConfig.cmake"
              "${PROJECT_BINARY_DIR}/CorridorKeyConfigVersion.cmake"
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/CorridorKey)
install(DIRECTORY "${PROJECT_SOURCE_DIR}/profiles/" DESTINATION ${CK_INSTALL_SHARE}/profiles
        FILES_MATCHING PATTERN "*.yaml")
install(FILES "${PROJECT_SOURCE_DIR}/checkpoints/greenformer_small_synthetic384.ts"
        DESTINATION ${CK_INSTALL_SHARE}/checkpoints)
# bench's reference rows (bench_reference.py and the model it imports) and the serve client
# hosts import (docs/embedding.md).
install(FILES "${PROJECT_SOURCE_DIR}/tools/bench_reference.py" "${PROJECT_SOURCE_DIR}/tools/greenformer_ref.py"
              "${PROJECT_SOURCE_DIR}/tools/corridorkey_client.py"
        DESTINATION ${CK_INSTALL_SHARE}/tools)
if(TARGET corridorkey-engine)
  # The CLI holds the engine itself (the dev tools are not in the library): LibTorch is all it
  # loads from elsewhere. bin/ and lib/ are both one level below the prefix, so an
  # $ORIGIN-relative CK_INSTALL_TORCH_RPATH holds for both.
  set_target_properties(corridorkey-engine PROPERTIES INSTALL_RPATH "${CK_INSTALL_TORCH_RPATH}")
  install(TARGETS corridorkey-engine RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
