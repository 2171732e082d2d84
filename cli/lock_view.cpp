#include "lock_view.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <stdexcept>

#include "duration.hpp"


namespace dlock::cli {

namespace {

std::int64_t ms_of(std::optional<std::int64_t> us) { return std::max<std::int64_t>(0, us.value_or(0) / 1000); }

}  // namespace

bool is_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    std::uint32_t cp = 0, min = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1, cp = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2, cp = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3, cp = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    for (std::size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return false;
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;  // overlong, range, surrogate
    i += n + 1;
  }
  return true;
}

std::string readable_name(std::string_view bytes) {
  if (!is_utf8(bytes)) return details::printable(bytes);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    if (c < 0x20 || c == 0x7f || c == '\\') {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

std::string to_hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 0xf]);
  }
  return out;
}

std::string from_hex(std::string_view hex) {
  const auto value = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    throw std::invalid_argument("\"" + details::printable(hex) + "\" is not hex (0-9, a-f, in pairs)");
  };
  if (hex.size() % 2 != 0) throw std::invalid_argument("\"" + details::printable(hex) + "\" has an odd number of hex digits");
  std::string out;
  for (std::size_t i = 0; i < hex.size(); i += 2) out.push_back(static_cast<char>(value(hex[i]) * 16 + value(hex[i + 1])));
  return out;
}

std::string row_json(const details::HoldRow& row) {
  // Keys in a fixed order for people reading the lines; nlohmann::ordered_json.
  nlohmann::ordered_json j;
  j["name"] = row.key.name;
  if (!is_utf8(row.key.name)) j["name_hex"] = to_hex(row.key.name);
  j["held"] = row.live;
  if (row.live) {
    j["machine_id"] = row.machine;
    j["host"] = row.host;
    j["pid"] = row.pid;
    j["thread"] = row.owner;
    j["count"] = row.state;
    j["fence"] = row.fence;
    j["acquired_at"] = row.acquired_at.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(row.acquired_at + "Z");
    j["held_for_ms"] = ms_of(row.held_for_us);
    j["expires_in_ms"] = ms_of(row.ttl_us);
    j["watchdog"] = row.watchdog;
  } else {
    for (const char* key : {"machine_id", "host", "pid", "thread"}) j[key] = nullptr;
    j["count"] = 0;
    j["fence"] = row.fence;
    for (const char* key : {"acquired_at", "held_for_ms", "expires_in_ms"}) j[key] = nullptr;
    j["watchdog"] = false;
  }
  // A name that is not UTF-8 is shown with U+FFFD; name_hex is exact.
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string holder_summary(const details::HoldRow& row) {
  if (!row.live) return "nobody";
  if (row.state == 0) {
    // Released with unlock_at_least (dlock run --at-least): taken by no one.
    return "nobody: it is kept taken (--at-least) after a run by " + readable_name(row.machine) + " (host " +
           readable_name(row.host) + ", pid " + std::to_string(row.pid) + ") that began " +
           format_duration(Millis(ms_of(row.held_for_us))) + " ago; free in " +
           format_duration(Millis(ms_of(row.ttl_us)));
  }
  std::string s = readable_name(row.machine) + " (host " + readable_name(row.host) + ", pid " +
                  std::to_string(row.pid) + ", owner " + std::to_string(row.owner) + ")";
  if (row.held_for_us) s += ", held for " + format_duration(Millis(ms_of(row.held_for_us)));
  s += ", expires in " + format_duration(Millis(ms_of(row.ttl_us))) + (row.watchdog ? " unless renewed" : "");
  s += ", fence " + std::to_string(row.fence);
  return s;
}

}  // namespace dlock::cli
