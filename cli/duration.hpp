// Durations on the command line: a whole number and a unit, "500ms", "30s",
// "5m", "1h". Anything else is a usage error.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace dlock::cli {

// Throws std::invalid_argument naming the text on anything malformed, zero
// when `allow_zero` is false, or over 365 days.
std::chrono::milliseconds parse_duration(std::string_view text, bool allow_zero = false);
// "1.5s", "250ms", "2m3s": for tables and messages.
std::string format_duration(std::chrono::milliseconds d);

}  // namespace dlock::cli
