// The guard statement (docs/guarded-transactions.md): one complete SQL
// statement, every value written in (names as hex literals, the table
// qualified with its database), that a caller's transaction runs last
// before COMMIT. While each hold it names is live (its row carries the
// hold's id, a count and an unexpired lease, by the server's clock) it
// locks and writes those rows (gmt_modified), so no other owner takes them
// before the transaction ends and, on Galera, a take on another node and
// the transaction cannot both commit. When any is not live (lease ran out,
// taken over, forced, released, row gone) it fails with MySQL error 1242
// ("Subquery returns more than 1 row"): a scalar subquery of two rows,
// correlated to the row so it is evaluated only then. Runs unchanged on
// MySQL 8.0 and MariaDB 10.6+ in any sql_mode made of the ordinary flags.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/keys.hpp"

namespace dlock::details {

// One hold the statement guards: its row and its id.
struct GuardedHold {
  Kind kind = Kind::kLock;
  std::string name;
  std::uint64_t slot = 0;
  std::uint64_t hold_id = 0;
};

// The error a guard statement fails with when a hold is not live.
inline constexpr int kGuardFailed = 1242;

// `holds`: 1 or more, in the order their rows are to be locked (a
// MultiLock's: sorted by name, as its takes lock them).
std::string guard_statement(std::string_view database, std::string_view table, const std::vector<GuardedHold>& holds);
// `text` as a hex literal (X'...'; X'' for empty).
std::string hex_literal(std::string_view text);
// `identifier` quoted with backticks (a backtick inside doubled).
std::string quoted_identifier(std::string_view identifier);

}  // namespace dlock::details
