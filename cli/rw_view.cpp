#include "rw_view.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "duration.hpp"
#include "lock_view.hpp"

namespace dlock::cli {

namespace {

Millis ms_of(std::optional<std::int64_t> us) { return Millis(std::max<std::int64_t>(0, us.value_or(0) / 1000)); }

// A hold's fields as `status --json` shows a lock's, without the name.
nlohmann::ordered_json hold_json(const details::HoldRow& row) {
  auto j = nlohmann::ordered_json::parse(row_json(row), nullptr, true);
  for (const char* key : {"name", "name_hex", "held"}) j.erase(key);
  return j;
}

}  // namespace

std::vector<RwView> group_rw(const std::vector<details::HoldRow>& rows) {
  std::vector<RwView> views;
  const auto view_of = [&](const std::string& name) -> RwView& {
    auto it = std::find_if(views.begin(), views.end(), [&](const RwView& v) { return v.name == name; });
    if (it != views.end()) return *it;
    views.push_back(RwView{name, {}, {}});
    views.back().writer.key.name = name;
    return views.back();
  };
  for (const auto& row : rows) {
    if (!row.live) continue;
    if (row.key.kind == details::Kind::kWrite) view_of(row.key.name).writer = row;
    if (row.key.kind == details::Kind::kRead) view_of(row.key.name).readers.push_back(row);
  }
  std::sort(views.begin(), views.end(), [](const RwView& a, const RwView& b) { return a.name < b.name; });
  return views;
}

std::string rw_json(const RwView& view) {
  nlohmann::ordered_json j;
  j["kind"] = "rwlock";
  j["name"] = view.name;
  if (!is_utf8(view.name)) j["name_hex"] = to_hex(view.name);
  j["readers_count"] = view.readers.size();
  j["writer"] = view.writer.live ? hold_json(view.writer) : nlohmann::ordered_json();
  auto readers = nlohmann::ordered_json::array();
  for (const auto& r : view.readers) readers.push_back(hold_json(r));
  j["readers"] = std::move(readers);
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::vector<std::vector<std::string>> rw_cells(const std::vector<RwView>& views) {
  std::vector<std::vector<std::string>> cells;
  cells.push_back({"RWLOCK", "SIDE", "HOLDER", "HOST", "PID", "HELD FOR", "EXPIRES IN", "RENEWAL", "COUNT", "FENCE"});
  const auto row = [&](const std::string& name, const char* side, const details::HoldRow& h) {
    cells.push_back({readable_name(name), side, readable_name(h.machine) + "/" + std::to_string(h.owner),
                     readable_name(h.host), std::to_string(h.pid),
                     h.held_for_us ? format_duration(ms_of(h.held_for_us)) : "-", format_duration(ms_of(h.ttl_us)),
                     h.state == 0 ? "kept" : h.watchdog ? "watchdog" : "fixed", std::to_string(h.state), std::to_string(h.fence)});
  };
  for (const auto& v : views) {
    if (v.writer.live) row(v.name, "write", v.writer);
    for (const auto& r : v.readers) row(v.name, "read", r);
  }
  return cells;
}

std::string rw_summary(const RwView& view) {
  if (view.writer.live) return "a writer: " + holder_summary(view.writer);
  if (!view.readers.empty()) return std::to_string(view.readers.size()) + " reader(s)";
  return "a waiting writer (new readers wait behind it)";
}

}  // namespace dlock::cli
