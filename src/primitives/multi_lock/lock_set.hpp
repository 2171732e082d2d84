// Several lock names taken together (a MultiLock, over the rows of the
// plain lock: (1, name, 0)), all or none, in one transaction:
//
//   START TRANSACTION
//   UPDATE ... every fresh name's row, while free (one IN list)
//   [UPDATE ... each name the owner holds already, counted up]
//   COMMIT, or ROLLBACK when any row was not taken
//
// Rows are matched by primary key in one IN list, so InnoDB locks them in
// key order: two sets over overlapping names, listed in any order, queue
// on their first common row and never deadlock. A name's row is made on
// its first use here (one INSERT of the missing rows, before the
// transaction). Waiting, the release (the engine's free_all, ringing) and
// renewal are the engine's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/known_rows.hpp"
#include "engine/hold_kind.hpp"

namespace dlock::details {

class LockSet {
 public:
  explicit LockSet(const HoldRows& rows);

  // HoldKind::take_set for the lock kind; `known` is its rows made here.
  HoldKind::SetTaken take(Engine& e, KnownRows& known, const std::vector<HoldKind::SetMember>& members,
                          const Holder& holder, std::int64_t lease_us, bool watchdog) const;

 private:
  void make_rows(Engine& e, KnownRows& known, const std::vector<std::string>& names) const;
  // The transaction; false when refused (rolled back).
  bool run(Engine& e, Connection& c, const std::vector<std::string>& fresh,
           const std::vector<HoldKind::SetMember>& again, const Holder& holder, std::int64_t lease_us,
           bool watchdog, const std::string* bell, std::optional<std::string>& lost) const;
  // What blocks the fresh names (after a refusal).
  void look(Engine& e, const std::vector<std::string>& fresh, HoldKind::SetTaken& t, KnownRows& known) const;

  std::string quoted_;
  std::string take_sql_;       // + placeholders: bind_hold, client key, names..., hold id, client key
  std::string look_sql_;       // + placeholders: names...
};

}  // namespace dlock::details
