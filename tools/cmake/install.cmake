# Install rules (REDLOCK_INSTALL): the libraries, the public headers, a CMake
# package (find_package(redlock CONFIG): redlock::redlock, redlock::testing),
# pkg-config files (redlock.pc, redlock-testing.pc), and the CPack settings for
# a Debian package (cpack -G DEB). Included from the top-level CMakeLists.txt.
include(CMakePackageConfigHelpers)

set(REDLOCK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/redlock)
set(REDLOCK_PKGCONFIG_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(TARGETS redlock redlock_testing EXPORT redlock-targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/redlock DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT redlock-targets NAMESPACE redlock:: FILE redlock-targets.cmake
  DESTINATION ${REDLOCK_CMAKE_DIR})

set(REDLOCK_STATIC_LIBRARY ON)
if(REDLOCK_SHARED)
  set(REDLOCK_STATIC_LIBRARY OFF)
endif()
# The config file finds what the exported targets name: Threads always (public);
# for static libraries also hiredis, libuv (through pkg-config, as the build
# does) and OpenSSL, which they link privately.
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/redlock-config.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/redlock-config.cmake
  INSTALL_DESTINATION ${REDLOCK_CMAKE_DIR} NO_SET_AND_CHECK_MACRO NO_CHECK_REQUIRED_COMPONENTS_MACRO)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/redlock-config-version.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY ${REDLOCK_COMPATIBILITY})
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/redlock-config.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/redlock-config-version.cmake DESTINATION ${REDLOCK_CMAKE_DIR})

# pkg-config: relocatable (prefix found from the .pc file's own directory).
file(RELATIVE_PATH REDLOCK_PC_TO_PREFIX "/p/${REDLOCK_PKGCONFIG_DIR}" "/p")
string(REGEX REPLACE "/$" "" REDLOCK_PC_TO_PREFIX "${REDLOCK_PC_TO_PREFIX}")
set(REDLOCK_PC_CFLAGS "")
if(REDLOCK_SHARED)
  set(REDLOCK_PC_CFLAGS " -DREDLOCK_SHARED")
endif()
foreach(pc redlock redlock-testing)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/${pc}.pc.in ${CMAKE_CURRENT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/${pc}.pc DESTINATION ${REDLOCK_PKGCONFIG_DIR})
endforeach()

install(FILES LICENSE CHANGELOG.md README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})

# cpack -G DEB: one package, `redlock`, with the library, its headers, the CMake
# and pkg-config files, and (REDLOCK_BUILD_TOOLS) the CLI with whatever
# tools/CMakeLists.txt installs beside it. Configure with
# -DCMAKE_INSTALL_PREFIX=/usr (and -DBUILD_SHARED_LIBS=ON for a shared library).
# Runtime dependencies come from dpkg-shlibdeps; the -dev packages are needed to
# compile against the headers and link (statically or not) with the CMake
# package or redlock.pc, which name them.
set(REDLOCK_PACKAGE_CONTACT "The redlock authors" CACHE STRING "Maintainer field of the Debian package")
set(CPACK_PACKAGE_NAME redlock)
set(CPACK_PACKAGE_VENDOR "The redlock authors")
set(CPACK_PACKAGE_CONTACT "${REDLOCK_PACKAGE_CONTACT}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_DESCRIPTION
  "A C++17 library (libredlock, headers, CMake and pkg-config files) and the redlock command-line tool.")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libhiredis-dev (>= 0.14), libuv1-dev, libssl-dev (>= 3), pkg-config")
if(REDLOCK_SHARED)
  set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)  # also the ldconfig trigger
endif()
include(CPack)
