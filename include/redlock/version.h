// The library's version, in one place.
#pragma once

#define REDLOCK_VERSION_MAJOR 0
#define REDLOCK_VERSION_MINOR 1
#define REDLOCK_VERSION_PATCH 0
#define REDLOCK_VERSION_STRING "0.1.0"

#if defined(_WIN32)
#define REDLOCK_EXPORT
#elif defined(REDLOCK_BUILDING) || defined(REDLOCK_SHARED)
#define REDLOCK_EXPORT __attribute__((visibility("default")))
#else
#define REDLOCK_EXPORT __attribute__((visibility("default")))
#endif
