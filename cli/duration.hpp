// Durations on the command line, as flock(1) users write them and a little
// more: a plain number is seconds, fractions allowed ("5", "0.5"); or one or
// more number-unit parts ("500ms", "1.5s", "1m30s", "2h", "1h30m"), units
// ms, s, m, h, each at most once, largest first. No spaces, no signs.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace dlock::cli {

// Rounded up to whole milliseconds (a nonzero duration never becomes 0).
// Throws std::invalid_argument naming the text on anything malformed, zero
// when `allow_zero` is false, or over 365 days.
std::chrono::milliseconds parse_duration(std::string_view text, bool allow_zero = false);
// "1.5s", "250ms", "2m03s": for tables and messages.
std::string format_duration(std::chrono::milliseconds d);

}  // namespace dlock::cli
