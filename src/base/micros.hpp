// Durations as the whole microseconds the SQL binds (INTERVAL ? MICROSECOND):
// every lease and wait reaches the database through this one conversion.
#pragma once

#include <chrono>
#include <cstdint>

namespace dlock::details {

template <class Rep, class Period>
constexpr std::int64_t micros(std::chrono::duration<Rep, Period> d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}

}  // namespace dlock::details
