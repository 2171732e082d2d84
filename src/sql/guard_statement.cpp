#include "sql/guard_statement.hpp"

namespace dlock::details {

std::string hex_literal(std::string_view text) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out = "X'";
  out.reserve(3 + 2 * text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    out.push_back(kDigits[byte >> 4]);
    out.push_back(kDigits[byte & 15]);
  }
  out.push_back('\'');
  return out;
}

std::string quoted_identifier(std::string_view identifier) {
  std::string out = "`";
  for (const char c : identifier) {
    if (c == '`') out.push_back('`');
    out.push_back(c);
  }
  out.push_back('`');
  return out;
}

std::string guard_statement(std::string_view database, std::string_view table, const std::vector<GuardedHold>& holds) {
  // The holds as a derived table, one row each, so a hold whose row is gone
  // still meets the check (the LEFT JOIN gives it a row of NULLs).
  std::string expected;
  for (const auto& h : holds) {
    expected += expected.empty() ? "SELECT " : " UNION ALL SELECT ";
    expected += std::to_string(static_cast<unsigned>(h.kind)) + " AS kind, " + hex_literal(h.name) + " AS lock_name, " +
                std::to_string(h.slot) + " AS slot, " + std::to_string(h.hold_id) + " AS hold_id";
  }
  return "UPDATE (" + expected + ") AS g LEFT JOIN " + quoted_identifier(database) + "." + quoted_identifier(table) +
         " AS r ON r.kind = g.kind AND r.lock_name = g.lock_name AND r.slot = g.slot"
         " SET r.gmt_modified = NOW(6)"
         " WHERE IF(r.hold_id = g.hold_id AND r.state > 0 AND r.expire_time > NOW(6), 1,"
         " (SELECT r.kind UNION ALL SELECT r.kind)) = 1";
}

}  // namespace dlock::details
