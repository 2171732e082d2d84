#include "activity_view.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "duration.hpp"
#include "names.hpp"

namespace dlock::cli {

namespace {

using Json = nlohmann::ordered_json;

std::int64_t ms(std::chrono::microseconds us) { return std::max<std::int64_t>(0, us.count() / 1000); }
std::string shown(std::chrono::microseconds us) { return format_duration(Millis(ms(us))); }

std::string dump(const Json& j) {
  // A name that is not UTF-8 is shown with U+FFFD; name_hex is exact.
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

void put_name(Json& j, const std::string& name) {
  j["name"] = name;
  if (!is_utf8(name)) j["name_hex"] = to_hex(name);
}

std::string kind_cell(const HoldInfo& h) {
  std::string kind(to_string(h.type));
  if (h.type == HoldType::kSemaphore) kind += " " + std::to_string(h.slot) + "/" + std::to_string(h.bound);
  return kind;
}

// {"kind", "name", ["name_hex"]}: how every line begins.
Json head(HoldType type, const std::string& name) {
  Json j;
  j["kind"] = std::string(to_string(type));
  put_name(j, name);
  return j;
}

// The client that holds or waits.
void put_client(Json& j, const std::string& machine, const std::string& host, std::uint32_t pid, std::uint64_t owner) {
  j["machine_id"] = machine;
  j["host"] = host;
  j["pid"] = pid;
  j["owner"] = owner;
}

// A server time ("YYYY-MM-DDThh:mm:ss.ffffff", UTC) as ISO 8601 with its zone.
Json utc(const std::string& server_time) { return server_time.empty() ? Json() : Json(server_time + "Z"); }

Json hold_object(const HoldInfo& h) {
  Json j = head(h.type, h.name);
  j["held"] = true;
  put_client(j, h.machine, h.host, h.pid, h.owner);
  j["count"] = h.count;
  j["fence"] = h.fence;
  j["acquired_at"] = utc(h.acquired_at);
  j["held_for_ms"] = ms(h.held_for);
  j["expires_in_ms"] = ms(h.expires_in);
  j["watchdog"] = h.watchdog;
  j["waiters"] = h.waiters;
  if (h.type == HoldType::kSemaphore) {
    j["slot"] = h.slot;
    j["bound"] = h.bound;
  }
  return j;
}

Json waiter_object(const WaiterInfo& w) {
  Json j = head(w.type, w.name);
  j["waiting"] = true;
  j["position"] = w.position;
  put_client(j, w.machine, w.host, w.pid, w.owner);
  j["waiting_since"] = utc(w.waiting_since);
  j["waited_ms"] = ms(w.waited_for);
  return j;
}

}  // namespace

std::string hold_json(const HoldInfo& h) { return dump(hold_object(h)); }
std::string waiter_json(const WaiterInfo& w) { return dump(waiter_object(w)); }

std::string snapshot_json(const Activity& a) {
  Json j;
  Json held;
  for (std::size_t i = 0; i < kHoldTypeCount; ++i) held[std::string(to_string(static_cast<HoldType>(i)))] = a.held[i];
  j["held"] = std::move(held);
  j["waiting"] = a.waiting;
  Json holds = Json::array();
  for (const auto& h : a.holds) holds.push_back(hold_object(h));
  j["holds"] = std::move(holds);
  Json waiters = Json::array();
  for (const auto& w : a.waiters) waiters.push_back(waiter_object(w));
  j["waiters"] = std::move(waiters);
  return dump(j);
}

std::string free_name_json(const std::string& name) {
  Json j;
  j["kind"] = nullptr;
  put_name(j, name);
  j["held"] = false;
  return dump(j);
}

Cells hold_cells(const std::vector<HoldInfo>& holds, const std::vector<std::string>& free_names) {
  Cells cells;
  cells.push_back({"NAME", "KIND", "HOLDER", "HOST", "PID", "HELD FOR", "EXPIRES IN", "RENEWAL", "COUNT", "FENCE",
                   "WAITERS"});
  for (const auto& h : holds)
    cells.push_back({readable_name(h.name), kind_cell(h), readable_name(h.machine) + "/" + std::to_string(h.owner),
                     readable_name(h.host), std::to_string(h.pid), shown(h.held_for), shown(h.expires_in),
                     h.count == 0 ? "kept" : h.watchdog ? "watchdog" : "fixed", std::to_string(h.count),
                     std::to_string(h.fence), std::to_string(h.waiters)});
  for (const auto& name : free_names)
    cells.push_back({readable_name(name), "-", "-", "-", "-", "-", "-", "-", "0", "-", "-"});
  return cells;
}

Cells waiter_cells(const std::vector<WaiterInfo>& waiters) {
  Cells cells;
  cells.push_back({"WAITING FOR", "KIND", "IN LINE", "WAITER", "HOST", "PID", "WAITED"});
  for (const auto& w : waiters)
    cells.push_back({readable_name(w.name), std::string(to_string(w.type)), std::to_string(w.position),
                     readable_name(w.machine) + "/" + std::to_string(w.owner), readable_name(w.host),
                     std::to_string(w.pid), shown(w.waited_for)});
  return cells;
}

std::string summary_line(const Activity& a) {
  const std::size_t total = a.held_total();
  std::string s = std::to_string(total) + (total == 1 ? " hold" : " holds");
  std::string parts;
  for (std::size_t i = 0; i < kHoldTypeCount; ++i) {
    if (a.held[i] == 0) continue;
    if (!parts.empty()) parts += ", ";
    parts += std::to_string(a.held[i]) + " " + std::string(to_string(static_cast<HoldType>(i)));
  }
  if (!parts.empty()) s += " (" + parts + ")";
  s += ", " + std::to_string(a.waiting) + " waiting in fair lock queues";
  if (a.holds.size() < total) s += ", showing the " + std::to_string(a.holds.size()) + " longest held";
  return s;
}

std::string format_cells(const Cells& cells) {
  if (cells.empty()) return {};
  // Column widths in characters, not bytes (UTF-8 continuation bytes take no column).
  const auto columns = [](const std::string& text) {
    return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
      return (static_cast<unsigned char>(c) & 0xc0) != 0x80;
    }));
  };
  std::vector<std::size_t> width(cells.front().size(), 0);
  for (const auto& r : cells)
    for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], columns(r[i]));
  std::string out;
  for (const auto& r : cells) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - columns(r[i]) + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string holder_summary(const HoldInfo& h) {
  if (h.count == 0) {
    // Released with unlock_at_least (dlock run --at-least): taken by no one.
    return "nobody: it is kept taken (--at-least) after a run by " + readable_name(h.machine) + " (host " +
           readable_name(h.host) + ", pid " + std::to_string(h.pid) + ") that began " + shown(h.held_for) +
           " ago; free in " + shown(h.expires_in);
  }
  return readable_name(h.machine) + " (host " + readable_name(h.host) + ", pid " + std::to_string(h.pid) +
         ", owner " + std::to_string(h.owner) + "), held for " + shown(h.held_for) + ", expires in " +
         shown(h.expires_in) + (h.watchdog ? " unless renewed" : "") + ", fence " + std::to_string(h.fence);
}

}  // namespace dlock::cli
