# Install rules (REDLOCK_INSTALL): the libraries, the public headers, a CMake
# package (find_package(redlock CONFIG): redlock::redlock, redlock::testing),
# pkg-config files (redlock.pc, redlock-testing.pc), and the CPack settings for
# the Debian packages (tools/cmake/debian.cmake, cpack -G DEB). Included from
# the top-level CMakeLists.txt.
include(CMakePackageConfigHelpers)

set(REDLOCK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/redlock)
set(REDLOCK_PKGCONFIG_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# Install components, one per Debian package (tools/cmake/debian.cmake): `lib` the
# shared libraries (libredlock0.MINOR), `dev` headers, static libraries, the .so
# links, the CMake package and the .pc files (libredlock-dev), `cli` the tool and
# its man page and completions (redlock, tools/CMakeLists.txt); `doc` README,
# CHANGELOG and LICENSE for a plain `cmake --install` (the packages carry their own).
install(TARGETS redlock redlock_testing EXPORT redlock-targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT lib NAMELINK_COMPONENT dev
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT lib)
install(DIRECTORY include/redlock DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(EXPORT redlock-targets NAMESPACE redlock:: FILE redlock-targets.cmake
  DESTINATION ${REDLOCK_CMAKE_DIR} COMPONENT dev)

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
  ${CMAKE_CURRENT_BINARY_DIR}/redlock-config-version.cmake DESTINATION ${REDLOCK_CMAKE_DIR} COMPONENT dev)

# pkg-config: relocatable (prefix found from the .pc file's own directory).
file(RELATIVE_PATH REDLOCK_PC_TO_PREFIX "/p/${REDLOCK_PKGCONFIG_DIR}" "/p")
string(REGEX REPLACE "/$" "" REDLOCK_PC_TO_PREFIX "${REDLOCK_PC_TO_PREFIX}")
# hiredis, libuv and OpenSSL: a shared library links them itself, so its users
# need them only for the headers' flags (Requires.private: `pkg-config --libs`
# leaves them out); a static library hands them to the final link, so
# `pkg-config --libs redlock` must list them (Requires), or the README's command
# line fails with undefined references (uv_now, redisAsyncCommand, SSL_new).
# (redlock-testing.pc has one Requires field: pkg-config refuses a field twice.)
if(REDLOCK_SHARED)
  set(REDLOCK_PC_CFLAGS " -DREDLOCK_SHARED")
  set(REDLOCK_PC_DEPS_FIELD Requires.private)
  set(REDLOCK_PC_TESTING_REQUIRES "Requires: redlock = ${PROJECT_VERSION}\nRequires.private: hiredis libuv libcrypto")
else()
  set(REDLOCK_PC_CFLAGS "")
  set(REDLOCK_PC_DEPS_FIELD Requires)
  set(REDLOCK_PC_TESTING_REQUIRES "Requires: redlock = ${PROJECT_VERSION}, hiredis, libuv, libcrypto")
endif()
foreach(pc redlock redlock-testing)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/${pc}.pc.in ${CMAKE_CURRENT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/${pc}.pc DESTINATION ${REDLOCK_PKGCONFIG_DIR} COMPONENT dev)
endforeach()

install(FILES LICENSE CHANGELOG.md README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT doc)

include(${CMAKE_CURRENT_LIST_DIR}/debian.cmake)
