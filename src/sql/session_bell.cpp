#include "sql/session_bell.hpp"

#include <utility>

namespace dlock::details {

std::string SessionBell::prefix_for(std::uint64_t random) {
  static const char digits[] = "0123456789abcdef";
  std::string out = "dlock-s:";
  for (int shift = 60; shift >= 0; shift -= 4) out.push_back(digits[(random >> shift) & 0xf]);
  out.push_back(':');
  return out;
}

void SessionBell::taken(std::string prefix, bool ok) {
  tried_ = true;
  prefix_ = std::move(prefix);
  generation_ = 0;
  current_ = ok ? prefix_ + "0" : std::string();
}

void SessionBell::advanced() {
  ++generation_;
  current_ = prefix_ + std::to_string(generation_);
}

void SessionBell::lost() { current_.clear(); }

}  // namespace dlock::details
