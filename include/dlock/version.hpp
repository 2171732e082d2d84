// dlock/version.hpp
//
// The library's version, also exported to CMake as the package version.
#pragma once

#define DLOCK_VERSION_MAJOR 0
#define DLOCK_VERSION_MINOR 3
#define DLOCK_VERSION_PATCH 0
#define DLOCK_VERSION_STRING "0.3.0"
