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
// transaction). Waiting is the multi-lock's (multi_locks.hpp); the release
// (Engine::free_rows, ringing) and renewal are the engine's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/known_rows.hpp"
#include "engine/holds.hpp"
#include "sql/hold_rows.hpp"

namespace dlock::details {

class Engine;

class LockSet {
 public:
  // `known`: the lock rows this client knows exist (the lock kind's).
  LockSet(const HoldRows& rows, KnownRows& known);

  struct Member {
    std::string name;
    std::uint64_t hold_id = 0;  // the owner's live hold to count up; 0: a fresh hold
    unsigned count = 0;         // a counted-up hold's new count
  };
  struct Taken {
    bool taken = false;
    std::uint64_t bell_session = 0;  // the session whose bell the fresh holds' rows record
    // Refused: the first blocking hold (or intent) ends within this
    // (0: look again at once), and the names a hold of another client
    // blocks (watch their bells).
    std::int64_t ttl_us = 0;
    std::vector<std::string> foreign;
    // A counted-up hold found lost (nothing was taken).
    std::optional<std::string> lost;
  };
  // Takes every member, or none, in one transaction: the fresh ones for
  // `holder` (each row gets holder.hold_id), the others counted up;
  // `members` is sorted by name, so two sets lock their rows in one order.
  // Reconciles an unknown outcome (Engine::run_reconciled). Throws
  // BackendError.
  Taken take(Engine& e, const std::vector<Member>& members, const Holder& holder, std::int64_t lease_us,
             bool watchdog);

 private:
  void make_rows(Engine& e, const std::vector<std::string>& names);
  // The transaction; false when refused (rolled back).
  bool run(Engine& e, Connection& c, const std::vector<std::string>& fresh, const std::vector<Member>& again,
           const Holder& holder, std::int64_t lease_us, bool watchdog, const std::string* bell,
           std::optional<std::string>& lost) const;
  // What blocks the fresh names (after a refusal).
  void look(Engine& e, const std::vector<std::string>& fresh, Taken& t);

  KnownRows& known_;  // lock rows this client has made or seen
  std::string quoted_;
  std::string take_sql_;       // + placeholders: bind_hold, client key, names..., hold id, client key
  std::string look_sql_;       // + placeholders: names...
};

}  // namespace dlock::details
