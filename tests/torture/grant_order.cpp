#include "torture/grant_order.hpp"

#include <algorithm>
#include <set>

namespace dlock::torture {

GrantOrderResult check_grant_order(const std::vector<QueueSnapshot>& snapshots,
                                   const std::vector<RecordedGrant>& grants, std::size_t max_examples) {
  GrantOrderResult out;
  // Per name: fence -> hold id, and hold id -> fence.
  std::map<std::string, std::map<std::uint64_t, std::uint64_t>> by_fence;
  std::map<std::string, std::map<std::uint64_t, std::uint64_t>> fence_of;
  for (const auto& g : grants) {
    by_fence[g.name][g.fence] = g.hold_id;
    fence_of[g.name][g.hold_id] = g.fence;
  }
  std::set<std::pair<std::string, std::uint64_t>> checked;
  // Each (waiting hold, offending fence) once: consecutive snapshots often
  // show the same queue.
  std::set<std::pair<std::uint64_t, std::uint64_t>> reported;
  const auto violation = [&](std::uint64_t waiting, std::uint64_t fence, const std::string& what) {
    if (!reported.insert({waiting, fence}).second) return;
    ++out.violations;
    if (out.examples.size() < max_examples) out.examples.push_back(what);
  };
  for (const auto& s : snapshots) {
    const auto name_fences = fence_of.find(s.name);
    if (name_fences == fence_of.end()) continue;
    const auto& fences = by_fence[s.name];
    for (std::size_t i = 0; i < s.queue.size(); ++i) {
      const std::uint64_t waiting = s.queue[i];
      const auto granted = name_fences->second.find(waiting);
      if (granted == name_fences->second.end()) continue;  // not granted, or not recorded
      const std::uint64_t g = granted->second;
      checked.insert({s.name, waiting});
      const std::string queued = "hold " + std::to_string(waiting) + " of fair lock " + s.name +
                                 " (queued in position " + std::to_string(i + 1) + " at fence " +
                                 std::to_string(s.head_fence) + ", granted fence " + std::to_string(g) + ")";
      if (g <= s.head_fence) {
        violation(waiting, g, queued + " was granted before the snapshot that shows it queued");
        continue;
      }
      const auto first_ahead = s.queue.begin();
      const auto end_ahead = s.queue.begin() + static_cast<std::ptrdiff_t>(i);
      for (auto it = fences.upper_bound(s.head_fence); it != fences.end() && it->first < g; ++it) {
        if (std::find(first_ahead, end_ahead, it->second) != end_ahead) continue;
        violation(waiting, it->first,
                  queued + " was overtaken: fence " + std::to_string(it->first) + " went to hold " +
                      std::to_string(it->second) + ", not queued ahead of it");
      }
    }
  }
  out.holds_checked = static_cast<long>(checked.size());
  return out;
}

}  // namespace dlock::torture
