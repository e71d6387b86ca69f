# OpenColorIO (colour spaces, engine/src/colour/) and OpenImageIO (DPX plates, engine/src/io/).
#
# find_package(OpenColorIO) first. Debian 12's libopencolorio-dev 2.1.2 puts its CMake
# package straight in /usr/share/cmake/, where find_package does not look, and its
# targets file computes the install prefix for /usr/lib/<arch>/cmake/OpenColorIO/; so when
# the package is not found, pkg-config's OpenColorIO.pc (right on every Debian/Ubuntu)
# provides the same OpenColorIO::OpenColorIO target.
find_package(OpenColorIO 2.1 CONFIG QUIET)
if(NOT TARGET OpenColorIO::OpenColorIO)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(CK_OCIO REQUIRED IMPORTED_TARGET GLOBAL OpenColorIO>=2.1)
  add_library(OpenColorIO::OpenColorIO ALIAS PkgConfig::CK_OCIO)
  message(STATUS "Found OpenColorIO ${CK_OCIO_VERSION} (pkg-config)")
else()
  message(STATUS "Found OpenColorIO ${OpenColorIO_VERSION}")
endif()

# OpenImageIO 2.4 (Debian libopenimageio-dev) through pkg-config too: its CMake package
# find_dependency()s Imath's, whose targets file names the missing Python bindings (the
# "installation package was faulty" message CKOpenEXR.cmake avoids).
find_package(PkgConfig REQUIRED)
pkg_check_modules(CK_OIIO REQUIRED IMPORTED_TARGET GLOBAL OpenImageIO>=2.4)
add_library(OpenImageIO::OpenImageIO ALIAS PkgConfig::CK_OIIO)
message(STATUS "Found OpenImageIO ${CK_OIIO_VERSION} (pkg-config)")
