// The library's version, in one place: CMake reads these three numbers
// (CMakeLists.txt), and the package files and the CLI's --version follow them.
#pragma once

#define REDLOCK_VERSION_MAJOR 0
#define REDLOCK_VERSION_MINOR 2
#define REDLOCK_VERSION_PATCH 0

#define REDLOCK_VERSION_STR_(x) #x
#define REDLOCK_VERSION_XSTR_(x) REDLOCK_VERSION_STR_(x)
// "0.2.0": a string literal.
#define REDLOCK_VERSION_STRING                 \
  REDLOCK_VERSION_XSTR_(REDLOCK_VERSION_MAJOR) \
  "." REDLOCK_VERSION_XSTR_(REDLOCK_VERSION_MINOR) "." REDLOCK_VERSION_XSTR_(REDLOCK_VERSION_PATCH)

// REDLOCK_EXPORT marks the public API. The library is compiled with hidden
// visibility (-fvisibility=hidden -fvisibility-inlines-hidden), so a shared
// libredlock exports exactly what carries this mark. REDLOCK_SHARED is defined
// when building the shared library and, through the CMake target
// (redlock::redlock) and redlock.pc, for its users, so that their declarations
// carry default visibility too, even when they compile with -fvisibility=hidden.
// For the static library the mark is empty: nothing of the library is exported
// from whatever shared object links it in.
#if defined(REDLOCK_SHARED) && (defined(__GNUC__) || defined(__clang__))
#define REDLOCK_EXPORT __attribute__((visibility("default")))
#else
#define REDLOCK_EXPORT
#endif
