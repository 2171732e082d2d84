// libFuzzer target: lock-name, lease and table-name validation.
//
// The first input byte picks the check, the rest is its input. Each check is
// compared with a plain statement of the rule, so an accepted bad input or a
// refused good one aborts, as does any exception but std::invalid_argument.
#include <dlock/options.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string_view>

#include "base/validation.hpp"

namespace {

template <typename Fn>
bool accepted(Fn&& check) {
  try {
    check();
    return true;
  } catch (const std::invalid_argument& e) {
    if (std::string_view(e.what()).empty()) std::abort();
    return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0: {  // lock names: 1..255 bytes, no NUL, anything else allowed
      const bool ok = accepted([&] { dlock::details::validate_name(rest); });
      const bool rule = !rest.empty() && rest.size() <= 255 && rest.find('\0') == std::string_view::npos;
      if (ok != rule) std::abort();
      break;
    }
    case 1: {  // leases: > 0 and <= 365 days
      std::int64_t raw = 0;
      std::memcpy(&raw, rest.data(), std::min(rest.size(), sizeof raw));
      const dlock::Millis lease(raw);
      const bool ok = accepted([&] { dlock::details::validate_lease(lease); });
      const bool rule = raw > 0 && lease <= std::chrono::hours(24 * 365);
      if (ok != rule) std::abort();
      break;
    }
    default: {  // table identifiers: [A-Za-z0-9_$]{1,64}
      const bool ok = accepted([&] { dlock::details::validate_table_name(rest); });
      const bool rule = !rest.empty() && rest.size() <= 64 && std::all_of(rest.begin(), rest.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$';
      });
      if (ok != rule) std::abort();
      break;
    }
  }
  return 0;
}
