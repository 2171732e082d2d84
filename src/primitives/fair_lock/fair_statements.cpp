// The fair lock's statements (primitives/fair_lock/fair.cpp says what each one does).
#include "base/kinds_table.hpp"
#include "primitives/fair_lock/fair_statements.hpp"

#include "sql/bells.hpp"

namespace dlock::details {

namespace {

std::string join_statement(const std::string& q) {
  // Joining: the head's queue intent raised and the entry written, in one
  // statement (a two-row upsert whose update keeps the head's hold
  // columns). An entry joins anew at the back. Its place is SYSDATE(6), read
  // as its row is written, after the head row's lock was granted (the rows
  // are written in the order listed): joins serialize on that lock, so the
  // queue's order is the order in which joins committed, and no entry ever
  // lands ahead of one already seen queued. (NOW(6), the statement's start,
  // would let a join that waited for the head's lock land ahead of ones
  // that got it first.)
  const auto keep_head = [](const std::string& column, const std::string& value) {
    return column + " = IF(slot = 0, " + column + ", " + value + ")";
  };
  return "INSERT INTO " + q +
         " (kind, lock_name, slot, hold_id, owner_id, machine_id, holder_host, holder_pid, watchdog, lease_us,"
         " bell, acquired_at, intent_id, intent_expire) VALUES (5, ?, 0, 0, 0, '', '', 0, 0, 0, '', " +
         kFairPast +
         ", 0, NOW(6) + INTERVAL ? MICROSECOND), (5, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, SYSDATE(6), ?, NOW(6) +"
         " INTERVAL ? MICROSECOND) ON DUPLICATE KEY UPDATE " +
         keep_head("hold_id", "?") + ", " + keep_head("owner_id", "?") + ", " + keep_head("machine_id", "?") + ", " +
         keep_head("holder_host", "?") + ", " + keep_head("holder_pid", "?") + ", " + keep_head("watchdog", "?") +
         ", " + keep_head("lease_us", "?") + ", " + keep_head("bell", "?") + ", " + keep_head("acquired_at", "SYSDATE(6)") +
         ", " + keep_head("intent_id", "?") +
         ", intent_expire = IF(slot = 0, GREATEST(intent_expire, NOW(6) + INTERVAL ? MICROSECOND), NOW(6) +"
         " INTERVAL ? MICROSECOND)";
}

// The hold goes to entry e: the head takes e's hold, e leaves the queue.
// `bell`: what the head's bell becomes when granted (e.bell, or, in a
// ringing release, the releasing session's next bell where e.bell is the
// one it rings: see grant).
std::string granting(const std::string& when, const std::string& ring, const std::string& bell) {
  const auto pick = [&](const std::string& column, const std::string& granted) {
    return "h." + column + " = IF(" + when + ", " + granted + ", h." + column + ")";
  };
  return "h.state = IF(" + when + ", 1, 0)" + ring + ", " + pick("fence", "h.fence + 1") + ", " + "h.watchdog = IF(" +
         when + ", e.watchdog, 0), " + pick("owner_id", "e.owner_id") + ", " + pick("hold_id", "e.hold_id") + ", " +
         pick("machine_id", "e.machine_id") + ", " + pick("holder_host", "e.holder_host") + ", " +
         pick("holder_pid", "e.holder_pid") + ", " +
         // Waiters elsewhere that marked the row wait on its bell: a
         // grant that keeps the bell keeps their mark (its release
         // rings them); a free row or a new bell has none. Assigned
         // before the bell, which it compares.
         "h.waiters = IF(" + when + " AND e.bell = h.bell, h.waiters, 0), " + pick("bell", bell) + ", " +
         pick("acquired_at", "NOW(6)") + ", h.expire_time = IF(" + when +
         ", NOW(6) + INTERVAL e.lease_us MICROSECOND, h.acquired_at), "
         "e.intent_expire = " +
         kFairPast;
}

}  // namespace

FairStatements::FairStatements(const HoldRows& rows) {
  const std::string& q = rows.quoted();
  const std::string head = " kind = " + kind_sql(Kind::kFair) + " AND lock_name = ? AND slot = 0";
  make_head = "INSERT INTO " + q + " (kind, lock_name, slot) VALUES (5, ?, 0) ON DUPLICATE KEY UPDATE slot = slot";
  // Free (or its own earlier run) and nobody queued.
  take = "UPDATE " + q + " SET " + fragments::take_assignments("", "fence + 1") + " WHERE" + head +
         " AND (expire_time <= NOW(6) OR hold_id = ?) AND intent_expire <= NOW(6)";
  // The same while the head's queue intent is ahead but no entry is live:
  // the intent is stale, and goes.
  const std::string first_live = "(SELECT slot FROM " + q +
                                 " WHERE kind = " + kind_sql(Kind::kFair) + " AND lock_name = ? AND slot > 0 AND intent_expire > NOW(6)"
                                 " ORDER BY acquired_at, slot LIMIT 1)";
  checked_take = "UPDATE " + q + " h LEFT JOIN " + first_live + " w ON 1 = 1 SET " +
                 fragments::take_assignments("h.", "h.fence + 1") + ", h.intent_expire = " + kFairPast +
                 " WHERE h.kind = " + kind_sql(Kind::kFair) + " AND h.lock_name = ? AND h.slot = 0 AND (h.expire_time <= NOW(6) OR"
                 " h.hold_id = ?) AND w.slot IS NULL";
  join = join_statement(q);
  // A queued waiter looks: the head (waiting for a release's commit) and
  // whether its own entry is still queued.
  look = "SELECT " + fragments::live("h.") +
         ", h.hold_id, h.fence, TIMESTAMPDIFF(MICROSECOND, NOW(6), h.expire_time), IF(e.intent_expire >"
         " NOW(6), 1, 0) FROM " +
         q + " h LEFT JOIN " + q +
         " e ON e.kind = " + kind_sql(Kind::kFair) +
         " AND e.lock_name = h.lock_name AND e.slot = ? AND e.hold_id = ? WHERE h.kind = " + kind_sql(Kind::kFair) +
         " AND h.lock_name = ? AND h.slot = 0 LOCK IN SHARE MODE";
  const std::string queue = "UPDATE " + q + " h LEFT JOIN " + first_live + " f ON 1 = 1 LEFT JOIN " + q +
                            " e ON e.kind = " + kind_sql(Kind::kFair) + " AND e.lock_name = h.lock_name AND e.slot = f.slot SET ";
  // The release with a queue: granted to the first live entry, else freed
  // (and the stale queue intent cleared). A ringing release moves its
  // session to the next bell; an entry that joined on that session recorded
  // the bell being rung, so its grant records the next one (the one its
  // release will ring).
  for (int ring = 0; ring < 2; ++ring) {
    grant[ring] = queue +
                  granting("e.slot IS NOT NULL", ring != 0 ? std::string(" + ") + kRingTerm : "",
                           ring != 0 ? "IF(e.bell = ?, ?, e.bell)" : "e.bell") +
                  ", h.intent_expire = IF(e.slot IS NULL, " + kFairPast +
                  ", h.intent_expire) WHERE h.kind = " + kind_sql(Kind::kFair) +
                  " AND h.lock_name = ? AND h.slot = 0 AND h.hold_id = ? AND " +
                  fragments::live("h.");
  }
  // The first waiter takes a free head itself (it was freed, or its
  // holder's lease ran out, with nobody granted).
  take_first = queue + granting("e.slot IS NOT NULL", "", "e.bell") +
               " WHERE h.kind = " + kind_sql(Kind::kFair) + " AND h.lock_name = ? AND h.slot = 0"
               " AND h.expire_time <= NOW(6) AND e.slot = ? AND e.hold_id = ?";
  quiet_free[0] = "UPDATE " + q + " SET " + fragments::free_assignments() + " WHERE" + head + " AND hold_id = ? AND " +
                  fragments::live() + " AND intent_expire <= NOW(6)";
  quiet_free[1] = "UPDATE " + q + " SET state = " + kRingTerm + ", " + fragments::free_assignments() + " WHERE" + head +
                  " AND hold_id = ? AND " + fragments::live() + " AND intent_expire <= NOW(6)";
  leave = "UPDATE " + q + " SET intent_expire = " + kFairPast +
          " WHERE kind = " + kind_sql(Kind::kFair) + " AND lock_name = ? AND slot = ? AND hold_id = ? AND intent_expire > NOW(6)";
  // The release's grant, whoever holds the head.
  force_grant = queue + granting("e.slot IS NOT NULL", "", "e.bell") + ", h.intent_expire = IF(e.slot IS NULL, " +
                kFairPast + ", h.intent_expire) WHERE h.kind = " + kind_sql(Kind::kFair) + " AND h.lock_name = ? AND h.slot = 0 AND " +
                fragments::live("h.");
  // The poll of a waiting client: its entries renewed where the head is
  // held, so an entry not renewed tells it to look (granted to it, or the
  // head is free: its holder's lease ran out, or it went to a waiter that
  // died). While the head stays free an entry is still renewed once its
  // intent has less than `margin` left, so it is never passed over for that.
  renew_entries = "UPDATE " + q + " e JOIN " + q +
                  " h ON h.kind = " + kind_sql(Kind::kFair) + " AND h.lock_name = e.lock_name AND h.slot = 0"
                  " SET e.intent_expire = NOW(6) + INTERVAL ? MICROSECOND WHERE e.kind = " + kind_sql(Kind::kFair) + " AND e.slot BETWEEN ? AND ?"
                  " AND e.intent_id = ? AND e.intent_expire > NOW(6) AND (h.expire_time > NOW(6) OR"
                  " e.intent_expire < NOW(6) + INTERVAL ? MICROSECOND) AND e.lock_name IN (";
  place = "SELECT slot, hold_id FROM " + q +
          " WHERE kind = " + kind_sql(Kind::kFair) + " AND lock_name = ? AND slot > 0 AND intent_expire > NOW(6) ORDER BY acquired_at, slot";
}

}  // namespace dlock::details
