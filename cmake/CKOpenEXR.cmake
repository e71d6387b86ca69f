# OpenEXR (with Imath) through pkg-config where it has a .pc file, else its CMake package.
# Why not the CMake package first: Debian 12's libimath-dev ships an ImathTargets.cmake that
# also lists the Python bindings (libPyImath, in the separate python3-imath package), so
# every configure printed "The installation package was faulty and contained
# .../ImathTargets.cmake but not all the files it references" for a library the engine never
# uses; a newcomer's first build looked broken. The .pc files name the C++ libraries only.
# Either way the target is OpenEXR::OpenEXR.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(CK_OPENEXR QUIET IMPORTED_TARGET GLOBAL OpenEXR)
endif()
if(CK_OPENEXR_FOUND)
  # The .pc file's -pthread would reach every target linking OpenEXR as a compile option,
  # and a TU compiled with it cannot use the LibTorch precompiled header (built without
  # it: "-Winvalid-pch ... _REENTRANT"); the CMake package links threads instead. So do we.
  get_target_property(_ck_exr_opts PkgConfig::CK_OPENEXR INTERFACE_COMPILE_OPTIONS)
  if(_ck_exr_opts)
    list(REMOVE_ITEM _ck_exr_opts -pthread)
    set_property(TARGET PkgConfig::CK_OPENEXR PROPERTY INTERFACE_COMPILE_OPTIONS "${_ck_exr_opts}")
  endif()
  find_package(Threads REQUIRED)
  set_property(TARGET PkgConfig::CK_OPENEXR APPEND PROPERTY INTERFACE_LINK_LIBRARIES Threads::Threads)
  add_library(OpenEXR::OpenEXR ALIAS PkgConfig::CK_OPENEXR)
  message(STATUS "Found OpenEXR ${CK_OPENEXR_VERSION} (pkg-config)")
else()
  find_package(OpenEXR REQUIRED)
endif()
