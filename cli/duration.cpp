#include "duration.hpp"

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <stdexcept>

namespace dlock::cli {

std::chrono::milliseconds parse_duration(std::string_view text, bool allow_zero) {
  const auto fail = [&](const char* why) {
    throw std::invalid_argument("invalid duration \"" + std::string(text) + "\": " + why +
                                " (write e.g. 500ms, 30s, 5m, 1h)");
  };
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) fail("it must start with a whole number");
  std::uint64_t value = 0;
  const auto r = std::from_chars(text.data(), text.data() + digits, value);
  if (r.ec != std::errc()) fail("number out of range");
  const std::string_view unit = text.substr(digits);
  std::uint64_t scale = 0;
  if (unit == "ms") {
    scale = 1;
  } else if (unit == "s") {
    scale = 1000;
  } else if (unit == "m") {
    scale = 60'000;
  } else if (unit == "h") {
    scale = 3'600'000;
  } else {
    fail(unit.empty() ? "missing unit" : "unknown unit");
  }
  constexpr std::uint64_t kMaxMs = 365ULL * 24 * 3'600'000;
  if (value > kMaxMs / scale) fail("longer than 365 days");
  if (value == 0 && !allow_zero) fail("must be greater than zero");
  return std::chrono::milliseconds(static_cast<std::int64_t>(value * scale));
}

std::string format_duration(std::chrono::milliseconds d) {
  const auto ms = d.count();
  char buf[48];
  if (ms < 1000) {
    std::snprintf(buf, sizeof buf, "%lldms", static_cast<long long>(ms));
  } else if (ms < 60'000) {
    std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ms) / 1000.0);
  } else if (ms < 3'600'000) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(ms / 60'000),
                  static_cast<long long>(ms % 60'000 / 1000));
  } else {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(ms / 3'600'000),
                  static_cast<long long>(ms % 3'600'000 / 60'000));
  }
  return buf;
}

}  // namespace dlock::cli
