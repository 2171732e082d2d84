#include "semaphore_view.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "duration.hpp"
#include "lock_view.hpp"

namespace dlock::cli {

namespace {
std::int64_t ms_of(std::optional<std::int64_t> us) { return std::max<std::int64_t>(0, us.value_or(0) / 1000); }
}  // namespace

std::vector<SemaphoreView> group_permits(const std::vector<details::HoldRow>& rows) {
  std::vector<SemaphoreView> views;
  for (const auto& row : rows) {
    if (row.key.kind != details::Kind::kSemaphore || !row.live) continue;
    if (views.empty() || views.back().name != row.key.name) views.push_back(SemaphoreView{row.key.name, 0, {}});
    views.back().bound = std::max(views.back().bound, row.bound);
    views.back().permits.push_back(row);
  }
  return views;
}

std::string semaphore_json(const SemaphoreView& view) {
  nlohmann::ordered_json j;
  j["kind"] = "semaphore";
  j["name"] = view.name;
  if (!is_utf8(view.name)) j["name_hex"] = to_hex(view.name);
  j["holders"] = view.permits.size();
  j["bound"] = view.bound;
  auto permits = nlohmann::ordered_json::array();
  for (const auto& p : view.permits) {
    nlohmann::ordered_json e;
    e["slot"] = p.key.slot;
    e["machine_id"] = p.machine;
    e["host"] = p.host;
    e["pid"] = p.pid;
    e["fence"] = p.fence;
    e["acquired_at"] = p.acquired_at.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(p.acquired_at + "Z");
    e["held_for_ms"] = p.held_for_us ? nlohmann::ordered_json(ms_of(p.held_for_us)) : nlohmann::ordered_json();
    e["expires_in_ms"] = ms_of(p.ttl_us);
    e["watchdog"] = p.watchdog;
    permits.push_back(std::move(e));
  }
  j["permits"] = std::move(permits);
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::vector<std::vector<std::string>> semaphore_cells(const std::vector<SemaphoreView>& views) {
  std::vector<std::vector<std::string>> cells;
  cells.push_back({"SEMAPHORE", "HOLDERS", "SLOT", "HOLDER", "HOST", "PID", "HELD FOR", "EXPIRES IN", "RENEWAL",
                   "FENCE"});
  for (const auto& v : views) {
    const std::string holders = std::to_string(v.permits.size()) + "/" + std::to_string(v.bound);
    for (const auto& p : v.permits) {
      cells.push_back({readable_name(v.name), holders, std::to_string(p.key.slot), readable_name(p.machine),
                       readable_name(p.host), std::to_string(p.pid),
                       p.held_for_us ? format_duration(Millis(ms_of(p.held_for_us))) : "-",
                       format_duration(Millis(ms_of(p.ttl_us))), p.watchdog ? "watchdog" : "fixed",
                       std::to_string(p.fence)});
    }
  }
  return cells;
}

}  // namespace dlock::cli
