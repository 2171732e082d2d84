#include "fair_view.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

#include "duration.hpp"
#include "lock_view.hpp"

namespace dlock::cli {

namespace {
std::int64_t ms_of(std::optional<std::int64_t> us) { return std::max<std::int64_t>(0, us.value_or(0) / 1000); }
}  // namespace

std::vector<FairView> group_fair(const std::vector<details::HoldRow>& rows,
                                 const std::vector<details::FairQueue>& queues) {
  std::map<std::string, FairView> by_name;
  for (const auto& row : rows) {
    if (row.key.kind != details::Kind::kFair || row.key.slot != 0 || !row.live) continue;
    FairView& v = by_name[row.key.name];
    v.name = row.key.name;
    v.hold = row;
  }
  for (const auto& q : queues) {
    FairView& v = by_name[q.name];
    v.name = q.name;
    v.queue = q;
  }
  std::vector<FairView> views;
  for (auto& [name, view] : by_name) views.push_back(std::move(view));
  return views;
}

std::string fair_json(const FairView& view) {
  nlohmann::ordered_json j;
  j["kind"] = "fair";
  j["name"] = view.name;
  if (!is_utf8(view.name)) j["name_hex"] = to_hex(view.name);
  const details::HoldRow& h = view.hold;
  j["held"] = h.live;
  j["machine_id"] = h.live ? nlohmann::ordered_json(h.machine) : nlohmann::ordered_json();
  j["host"] = h.live ? nlohmann::ordered_json(h.host) : nlohmann::ordered_json();
  j["pid"] = h.live ? nlohmann::ordered_json(h.pid) : nlohmann::ordered_json();
  j["fence"] = h.fence;
  j["expires_in_ms"] = h.live ? nlohmann::ordered_json(ms_of(h.ttl_us)) : nlohmann::ordered_json();
  j["watchdog"] = h.live && h.watchdog;
  j["queued"] = view.queue.length;
  if (view.queue.length == 0) {
    j["first_waiter"] = nullptr;
  } else {
    nlohmann::ordered_json w;
    w["machine_id"] = view.queue.machine;
    w["host"] = view.queue.host;
    w["pid"] = view.queue.pid;
    w["waiting_since"] = view.queue.waiting_since + "Z";
    w["waited_ms"] = ms_of(view.queue.waited_us);
    j["first_waiter"] = std::move(w);
  }
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::vector<std::vector<std::string>> fair_cells(const std::vector<FairView>& views) {
  std::vector<std::vector<std::string>> cells;
  cells.push_back({"FAIR LOCK", "HOLDER", "HOST", "PID", "EXPIRES IN", "FENCE", "QUEUED", "FIRST WAITER",
                   "WAITING FOR"});
  for (const auto& v : views) {
    const details::HoldRow& h = v.hold;
    const bool q = v.queue.length > 0;
    cells.push_back({readable_name(v.name), h.live ? readable_name(h.machine) + "/" + std::to_string(h.owner) : "-",
                     h.live ? readable_name(h.host) : "-", h.live ? std::to_string(h.pid) : "-",
                     h.live ? format_duration(Millis(ms_of(h.ttl_us))) : "-", std::to_string(h.fence),
                     std::to_string(v.queue.length),
                     q ? readable_name(v.queue.machine) + " (" + readable_name(v.queue.host) + ", pid " +
                             std::to_string(v.queue.pid) + ")"
                       : "-",
                     q ? format_duration(Millis(ms_of(v.queue.waited_us))) : "-"});
  }
  return cells;
}

}  // namespace dlock::cli
