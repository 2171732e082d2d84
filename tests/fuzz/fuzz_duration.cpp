// libFuzzer target: the dlock command's duration parser ("500ms", "30s").
//
// Accepted text must give a duration in (0, 365 days] that survives a round
// trip through format_duration; anything else must be std::invalid_argument.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "duration.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::chrono::milliseconds d{};
  try {
    d = dlock::cli::parse_duration(text);
  } catch (const std::invalid_argument& e) {
    if (std::string_view(e.what()).empty()) std::abort();
    return 0;
  }
  if (d <= std::chrono::milliseconds::zero() || d > std::chrono::hours(24 * 365)) std::abort();
  (void)dlock::cli::format_duration(d);  // must not throw or crash for any accepted value
  return 0;
}
