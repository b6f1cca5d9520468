# cpack -G DEB: one Debian package per install component (tools/cmake/install.cmake).
# Configure with -DCMAKE_INSTALL_PREFIX=/usr and -DBUILD_SHARED_LIBS=ON:
#
#   libredlock0.MINOR  (component lib) the shared libraries, named for their SONAME
#                      (libredlock.so.0.2: libredlock0.2); a shlibs file and an
#                      ldconfig trigger
#   libredlock-dev     (dev) headers, the .so links (static libraries when built static),
#                      the CMake package and the .pc files; depends on the library
#                      package and on the -dev packages the headers and .pc files name
#   redlock            (cli) the tool, its man page and completions; its Depends come
#                      from dpkg-shlibdeps (runtime libraries only) and the library package
#
# Each package has /usr/share/doc/<package>/copyright (DEP-5, with LICENSE) and
# changelog.Debian.gz, installed only into the packages (EXCLUDE_FROM_ALL: a plain
# `cmake --install` has share/doc/redlock/ with README, CHANGELOG and LICENSE
# instead). lintian reports no error on them (tools/consumer-test.sh; the remaining
# warnings and why they stay: docs/packaging.md, "The Debian packages").
set(redlock_default_contact "redlock maintainers <maintainers@redlock.example>")
set(REDLOCK_PACKAGE_CONTACT "${redlock_default_contact}"
  CACHE STRING "Maintainer field of the Debian packages (a name and an <email>)")
if(REDLOCK_PACKAGE_CONTACT STREQUAL "The redlock authors")  # the old default, without an email
  set(REDLOCK_PACKAGE_CONTACT "${redlock_default_contact}" CACHE STRING
    "Maintainer field of the Debian packages (a name and an <email>)" FORCE)
endif()
if(NOT REDLOCK_PACKAGE_CONTACT MATCHES "^[^<>]+ <[^<>@ ]+@[^<>@ ]+>$")
  message(FATAL_ERROR "REDLOCK_PACKAGE_CONTACT is '${REDLOCK_PACKAGE_CONTACT}': the Maintainer "
    "field of a Debian package must be a name and an email, 'Name <user@host>'")
endif()
set(REDLOCK_DEB_RELEASE 1)
set(REDLOCK_DEB_VERSION ${PROJECT_VERSION}-${REDLOCK_DEB_RELEASE})
set(REDLOCK_DEB_LIB_PACKAGE libredlock${REDLOCK_SOVERSION})
set(REDLOCK_DEB_DIR ${CMAKE_CURRENT_BINARY_DIR}/debian)

# copyright: machine-readable (DEP-5), the license text being LICENSE's (MIT,
# which Debian calls Expat).
file(STRINGS ${PROJECT_SOURCE_DIR}/LICENSE redlock_license_lines)
set(redlock_license_body "")
set(redlock_copyright "")
foreach(line IN LISTS redlock_license_lines)
  if(line MATCHES "^Copyright \\(c\\) (.*)$")
    set(redlock_copyright "${CMAKE_MATCH_1}")
  elseif(line STREQUAL "" AND NOT redlock_license_body STREQUAL "")
    string(APPEND redlock_license_body " .\n")
  elseif(NOT line STREQUAL "" AND NOT line STREQUAL "MIT License")
    string(APPEND redlock_license_body " ${line}\n")
  endif()
endforeach()
string(REGEX REPLACE "( \\.\n)+$" "" redlock_license_body "${redlock_license_body}")
if(redlock_copyright STREQUAL "" OR redlock_license_body STREQUAL "")
  message(FATAL_ERROR "debian.cmake: LICENSE has no 'Copyright (c) ...' line or no license text")
endif()
file(WRITE ${REDLOCK_DEB_DIR}/copyright
"Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: redlock
Upstream-Contact: ${REDLOCK_PACKAGE_CONTACT}

Files: *
Copyright: ${redlock_copyright}
License: Expat
${redlock_license_body}")

# changelog.Debian.gz (gzip -9n: no name, no timestamp). The date is the configure
# time, or SOURCE_DATE_EPOCH when set (reproducible builds).
string(TIMESTAMP redlock_deb_date "%a, %d %b %Y %H:%M:%S +0000" UTC)
file(WRITE ${REDLOCK_DEB_DIR}/changelog.Debian
"redlock (${REDLOCK_DEB_VERSION}) unstable; urgency=medium

  * Packaged by cpack -G DEB from redlock ${PROJECT_VERSION} (tools/cmake/debian.cmake).
    The upstream changes are in /usr/share/doc/redlock/changelog.gz.

 -- ${REDLOCK_PACKAGE_CONTACT}  ${redlock_deb_date}
")
execute_process(COMMAND gzip -9n -c ${REDLOCK_DEB_DIR}/changelog.Debian
  OUTPUT_FILE ${REDLOCK_DEB_DIR}/changelog.Debian.gz RESULT_VARIABLE redlock_gzip_rc)
if(NOT redlock_gzip_rc EQUAL 0)
  message(FATAL_ERROR "debian.cmake: gzip -9n of changelog.Debian failed: ${redlock_gzip_rc}")
endif()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/LICENSE)
# The upstream changelog (CHANGELOG.md, in the redlock package) at build time, so
# that editing CHANGELOG.md does not reconfigure the build.
if(REDLOCK_BUILD_TOOLS)
  add_custom_command(OUTPUT ${REDLOCK_DEB_DIR}/changelog.gz
    COMMAND gzip -9n -c ${PROJECT_SOURCE_DIR}/CHANGELOG.md > ${REDLOCK_DEB_DIR}/changelog.gz
    DEPENDS ${PROJECT_SOURCE_DIR}/CHANGELOG.md
    COMMENT "Compressing CHANGELOG.md for the redlock package")
  add_custom_target(redlock_deb_changelog ALL DEPENDS ${REDLOCK_DEB_DIR}/changelog.gz)
endif()

# The library package: its shared objects get an ldconfig trigger (Debian's way
# since dpkg 1.16; CPack also adds ldconfig to postinst and postrm by itself).
file(WRITE ${REDLOCK_DEB_DIR}/triggers "activate-noawait ldconfig\n")

set(redlock_deb_components dev)
if(REDLOCK_SHARED)
  list(PREPEND redlock_deb_components lib)
endif()
if(REDLOCK_BUILD_TOOLS)
  list(APPEND redlock_deb_components cli)
endif()
set(redlock_deb_package_lib ${REDLOCK_DEB_LIB_PACKAGE})
set(redlock_deb_package_dev libredlock-dev)
set(redlock_deb_package_cli redlock)
foreach(c IN LISTS redlock_deb_components)
  set(docs ${REDLOCK_DEB_DIR}/copyright ${REDLOCK_DEB_DIR}/changelog.Debian.gz)
  if(c STREQUAL "cli")
    list(APPEND docs ${REDLOCK_DEB_DIR}/changelog.gz ${PROJECT_SOURCE_DIR}/README.md)
  endif()
  install(FILES ${docs} DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${redlock_deb_package_${c}}
    COMPONENT ${c} EXCLUDE_FROM_ALL)
endforeach()

set(CPACK_PACKAGE_NAME redlock)
set(CPACK_PACKAGE_VENDOR "The redlock authors")
set(CPACK_PACKAGE_CONTACT "${REDLOCK_PACKAGE_CONTACT}")
# Empty: CPack would put it before each component's description, as every
# package's synopsis (and the project's starts with "Redlock", the package name).
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_STRIP_FILES ON)
set(CPACK_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE
  GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
set(CPACK_COMPONENTS_ALL ${redlock_deb_components})
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${REDLOCK_DEB_RELEASE})
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# dpkg-shlibdeps finds libredlock.so.0.MINOR (which no installed package owns yet)
# in the build tree; the dependency on its package is the component's.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR})
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_LIB_PACKAGE_NAME ${REDLOCK_DEB_LIB_PACKAGE})
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_EXTRA ${REDLOCK_DEB_DIR}/triggers)
set(CPACK_DEBIAN_LIB_DESCRIPTION "distributed locks over independent Redis masters (library)
The Redlock algorithm as a C++17 library: SET NX PX on N independent Redis
nodes in parallel, a decision as soon as the quorum is known, validity on a
monotonic clock, rollback on every node after a failed attempt, fencing tokens,
a watchdog, a quorum-safe semaphore and leader election.

This package has the shared libraries libredlock and libredlock_testing (real
clients over simulated nodes, for an application's own tests).")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libredlock-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# The headers include hiredis's, libuv's and OpenSSL's (redlock/uv.h), the .pc
# files name them (Requires.private), and a static library needs them to link.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libhiredis-dev (>= 0.14), libuv1-dev, libssl-dev (>= 3)")
set(CPACK_DEBIAN_DEV_DESCRIPTION "distributed locks over independent Redis masters (development files)
The Redlock algorithm as a C++17 library: SET NX PX on N independent Redis
nodes in parallel, a decision as soon as the quorum is known, validity on a
monotonic clock, rollback on every node after a failed attempt, fencing tokens,
a watchdog, a quorum-safe semaphore and leader election.

This package has the headers, the CMake package (find_package(redlock)) and the
pkg-config files (redlock, redlock-testing).")
if(REDLOCK_SHARED)
  set(CPACK_COMPONENT_DEV_DEPENDS lib)
endif()

set(CPACK_DEBIAN_CLI_PACKAGE_NAME redlock)
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_CLI_DESCRIPTION "distributed locks over Redis for shell jobs and cron
The command-line tool of the Redlock library: acquire, extend and release
locks held on a quorum of independent Redis masters, run a command while
holding one (flock-like, with a watchdog), elect a leader, count permits, and
monitor the nodes (a live view or Prometheus metrics).")
if(REDLOCK_SHARED)
  set(CPACK_COMPONENT_CLI_DEPENDS lib)
endif()
include(CPack)
