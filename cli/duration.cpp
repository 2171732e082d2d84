#include "duration.hpp"

#include <iterator>
#include <cstdint>
#include <cstdio>
#include <stdexcept>

namespace dlock::cli {

namespace {

// Sums are kept in microseconds; fractional digits beyond what a microsecond
// can hold only round the result up.
constexpr std::uint64_t kMaxUs = 365ULL * 24 * 3'600'000'000ULL;

}  // namespace

std::chrono::milliseconds parse_duration(std::string_view text, bool allow_zero) {
  const auto fail = [&](const char* why) {
    throw std::invalid_argument("invalid duration \"" + std::string(text) + "\": " + why +
                                " (write seconds like 5 or 0.5, or e.g. 500ms, 1.5s, 1m30s, 2h)");
  };
  if (text.empty()) fail("it is empty");
  // Units from largest to smallest, in microseconds.
  struct Unit {
    std::string_view name;
    std::uint64_t us;
  };
  static constexpr Unit kUnits[] = {{"h", 3'600'000'000ULL}, {"m", 60'000'000ULL}, {"s", 1'000'000ULL}, {"ms", 1'000ULL}};
  std::uint64_t total_us = 0;
  bool round_up = false;  // digits finer than a microsecond were dropped
  std::size_t next_unit = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    std::uint64_t whole = 0, frac_us_num = 0, frac_den = 1;
    std::size_t digits = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      if (whole > kMaxUs) fail("longer than 365 days");
      whole = whole * 10 + static_cast<std::uint64_t>(text[i] - '0');
      ++i;
      ++digits;
    }
    std::size_t frac_digits = 0;
    if (i < text.size() && text[i] == '.') {
      ++i;
      while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
        if (frac_den < 1'000'000'000ULL) {  // 9 digits: the product below fits 64 bits
          frac_us_num = frac_us_num * 10 + static_cast<std::uint64_t>(text[i] - '0');
          frac_den *= 10;
        } else if (text[i] != '0') {
          round_up = true;
        }
        ++i;
        ++frac_digits;
      }
      if (frac_digits == 0) fail("a '.' must be followed by digits");
    }
    if (digits == 0 && frac_digits == 0) fail("expected a number");
    std::size_t unit_end = i;
    while (unit_end < text.size() && ((text[unit_end] >= 'a' && text[unit_end] <= 'z'))) ++unit_end;
    const std::string_view unit_text = text.substr(i, unit_end - i);
    std::uint64_t scale = 0;
    if (unit_text.empty()) {
      // A plain number is seconds, and only alone.
      if (i != text.size() || total_us != 0 || next_unit != 0) fail("a number without a unit must stand alone");
      scale = 1'000'000ULL;
    } else {
      std::size_t u = next_unit;
      while (u < std::size(kUnits) && kUnits[u].name != unit_text) ++u;
      if (u == std::size(kUnits)) {
        bool known = false;
        for (const auto& k : kUnits) known = known || k.name == unit_text;
        fail(known ? "units must go from largest to smallest, each once" : "unknown unit (use ms, s, m or h)");
      }
      scale = kUnits[u].us;
      next_unit = u + 1;
    }
    if (whole > kMaxUs / scale) fail("longer than 365 days");
    std::uint64_t part = whole * scale;
    // frac_us_num / frac_den of a unit, in microseconds, rounded up.
    const std::uint64_t frac = frac_us_num * scale;  // < 1e9 * 3.6e9
    const std::uint64_t frac_us = frac / frac_den;
    if (frac % frac_den != 0) round_up = true;
    part += frac_us;
    total_us += part;
    if (total_us > kMaxUs) fail("longer than 365 days");
    i = unit_end;
  }
  std::uint64_t ms = total_us / 1000 + ((total_us % 1000 != 0 || round_up) ? 1 : 0);
  if (ms * 1000 > kMaxUs) fail("longer than 365 days");
  if (ms == 0 && !allow_zero) fail("must be greater than zero");
  return std::chrono::milliseconds(static_cast<std::int64_t>(ms));
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
