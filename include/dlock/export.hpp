// dlock/export.hpp
//
// DLOCK_API marks what a shared libdlock exports: the public classes and
// functions of these headers. Everything else is compiled with hidden
// visibility (CMake: CXX_VISIBILITY_PRESET hidden), so a shared build exports
// the API alone, not the library's internals or its dependencies (Boost,
// fmt, spdlog). DLOCK_SHARED is defined for consumers of a shared build by
// the CMake target (and dlock.pc); DLOCK_BUILDING only while building dlock.
#pragma once

#if defined(_WIN32) && defined(DLOCK_SHARED)
#if defined(DLOCK_BUILDING)
#define DLOCK_API __declspec(dllexport)
#else
#define DLOCK_API __declspec(dllimport)
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define DLOCK_API __attribute__((visibility("default")))
#else
#define DLOCK_API
#endif
