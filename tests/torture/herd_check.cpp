#include "torture/herd_check.hpp"

#include <algorithm>

namespace dlock::torture {

void HerdHistory::waited(const std::string& name, std::int64_t start_us, std::int64_t end_us) {
  names_[name].waits.emplace_back(start_us, end_us);
}

void HerdHistory::acquired(const std::string& name, std::int64_t at_us) {
  const auto it = names_.find(name);
  if (it != names_.end()) it->second.takes.push_back(at_us);
}

void HerdHistory::let_go(const std::string& name, std::int64_t at_us) {
  const auto it = names_.find(name);
  if (it != names_.end()) it->second.releases.push_back(at_us);
}

HerdCheck HerdHistory::check(std::int64_t bound_us,
                             const std::vector<std::pair<std::int64_t, std::int64_t>>& excused,
                             std::size_t max_examples) const {
  HerdCheck out;
  for (auto [name, n] : names_) {
    std::sort(n.takes.begin(), n.takes.end());
    std::sort(n.waits.begin(), n.waits.end());
    for (const std::int64_t released : n.releases) {
      const auto next = std::upper_bound(n.takes.begin(), n.takes.end(), released);
      if (next == n.takes.end()) continue;
      const std::int64_t taken = *next;
      // Some waiter waited from before the release to the take (or later).
      const bool waited = std::any_of(n.waits.begin(), n.waits.end(), [&](const auto& w) {
        return w.first < released && w.second >= taken;
      });
      if (!waited) continue;
      ++out.handoffs;
      const std::int64_t gap = taken - released;
      if (gap <= 100'000) ++out.prompt;
      if (gap <= bound_us) continue;
      const bool fault = std::any_of(excused.begin(), excused.end(), [&](const auto& e) {
        return e.first - 2'000'000 <= taken && e.second >= released;
      });
      if (fault) continue;
      if (out.stuck.size() < max_examples)
        out.stuck.push_back(name + " free from " + std::to_string(released) + " for " + std::to_string(gap / 1000) +
                            " ms while a herd waiter waited");
    }
  }
  return out;
}

}  // namespace dlock::torture
