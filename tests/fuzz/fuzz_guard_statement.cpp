// libFuzzer target: the guard statement builder (sql/guard_statement.hpp).
//
// The input is split into a database name, and one to four holds' names (any
// bytes); the statement is built and checked against plain statements of
// the rule: apart from its hex literals and backtick-quoted identifiers it is
// the fixed template (printable ASCII, no quote, no name byte), each hex
// literal decodes back to the name given, and each quoted identifier to the
// identifier given. Anything else aborts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "sql/guard_statement.hpp"

namespace {

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Takes the literals and identifiers out of `sql` (they are checked and
// collected), leaving the template.
std::string strip(const std::string& sql, std::vector<std::string>& literals, std::vector<std::string>& identifiers) {
  std::string rest;
  for (std::size_t i = 0; i < sql.size(); ++i) {
    if (sql.compare(i, 2, "X'") == 0) {
      std::string bytes;
      std::size_t j = i + 2;
      for (; j < sql.size() && sql[j] != '\''; j += 2) {
        if (j + 1 >= sql.size() || hex(sql[j]) < 0 || hex(sql[j + 1]) < 0) std::abort();
        bytes.push_back(static_cast<char>(hex(sql[j]) * 16 + hex(sql[j + 1])));
      }
      if (j >= sql.size()) std::abort();  // unterminated
      literals.push_back(bytes);
      rest += "X''";
      i = j;
    } else if (sql[i] == '`') {
      std::string id;
      std::size_t j = i + 1;
      for (;; ++j) {
        if (j >= sql.size()) std::abort();  // unterminated
        if (sql[j] == '`') {
          if (j + 1 < sql.size() && sql[j + 1] == '`') {
            id.push_back('`');
            ++j;
            continue;
          }
          break;
        }
        id.push_back(sql[j]);
      }
      identifiers.push_back(id);
      rest += "``";
      i = j;
    } else {
      rest.push_back(sql[i]);
    }
  }
  return rest;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  // Fields separated by 0x00: the database, then the names.
  std::vector<std::string> fields(1);
  for (const char c : in) {
    if (c == '\0') {
      fields.emplace_back();
    } else {
      fields.back().push_back(c);
    }
  }
  if (fields.size() < 2 || fields.size() > 5) return 0;
  std::vector<dlock::details::GuardedHold> holds;
  for (std::size_t i = 1; i < fields.size(); ++i)
    holds.push_back({dlock::details::Kind::kLock, fields[i], i, 1000 + i});
  const std::string sql = dlock::details::guard_statement(fields[0], "distributed_lock", holds);
  std::vector<std::string> literals, identifiers;
  const std::string rest = strip(sql, literals, identifiers);
  for (const char c : rest)
    if (c < 0x20 || c > 0x7e || c == '\'' || c == '"' || c == '\\' || c == ';') std::abort();
  if (literals.size() != holds.size()) std::abort();
  for (std::size_t i = 0; i < holds.size(); ++i)
    if (literals[i] != holds[i].name) std::abort();
  if (identifiers.size() != 2 || identifiers[0] != fields[0] || identifiers[1] != "distributed_lock") std::abort();
  // The same template for every input (the literals and identifiers aside).
  static const std::string kOneHold = [] {
    std::vector<std::string> l, id;
    return strip(dlock::details::guard_statement("d", "t", {{dlock::details::Kind::kLock, "n", 1, 1001}}), l, id);
  }();
  if (holds.size() == 1 && rest != kOneHold) std::abort();
  return 0;
}
