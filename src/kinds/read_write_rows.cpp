// The read-write lock's statements and the reads and repairs both of its
// sides use (kinds/read_write_rows.hpp).
#include "kinds/read_write_rows.hpp"

#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <spdlog/spdlog.h>

#include "base/micros.hpp"
#include "base/printable.hpp"
#include "engine/engine.hpp"
#include "sql/bells.hpp"
#include "sql/statement.hpp"

namespace dlock::details {

ReadWriteRows::ReadWriteRows(const HoldRows& rows) : q(rows.quoted()) {
  const std::string h = " h.kind = 3 AND h.lock_name = ? AND h.slot = 0";
  take_write = "UPDATE " + q + " SET " + fragments::take_assignments("", "fence + 2") +
               " WHERE kind = 3 AND lock_name = ? AND slot = 0 AND (expire_time <= NOW(6) OR hold_id = ?)"
               " AND readers = 0";
  // A read taken under the write (a downgrade) keeps the write from being
  // handed on.
  hand_over_write = "UPDATE " + q + " SET " + fragments::hand_over_assignments(2) +
                    " WHERE kind = 3 AND lock_name = ? AND slot = 0 AND hold_id IN (?, ?) AND " + fragments::live() +
                    " AND readers = 0";
  // A waiting writer's mark: its client's row, live while it waits.
  mark = "INSERT INTO " + q + " (kind, lock_name, slot, owner_id, machine_id, holder_host, holder_pid, acquired_at,"
         " expire_time) VALUES (3, ?, ?, 0, ?, ?, ?, NOW(6), NOW(6) + INTERVAL ? MICROSECOND) ON DUPLICATE KEY"
         " UPDATE acquired_at = IF(expire_time > NOW(6), acquired_at, NOW(6)),"
         " expire_time = NOW(6) + INTERVAL ? MICROSECOND";
  unmark = "UPDATE " + q + " SET expire_time = acquired_at WHERE kind = 3 AND lock_name = ? AND slot = ?";
  const std::string marks_ttl = "(SELECT MAX(TIMESTAMPDIFF(MICROSECOND, NOW(6), m.expire_time)) FROM " + q +
                            " m WHERE m.kind = 3 AND m.lock_name = h.lock_name AND m.slot > 0 AND m.expire_time"
                            " > NOW(6))";
  // In multi-table UPDATEs neither MySQL nor MariaDB promises an order
  // for the assignments, so each reads only columns no assignment changes.
  // The writers' marks are an anti-join: a row of m joined means a mark
  // is live (each row is still updated once, however many marks join).
  take_read = "UPDATE " + q + " h JOIN " + q +
              " r ON r.kind = 4 AND r.lock_name = h.lock_name AND r.slot = ? LEFT JOIN " + q +
              " m ON m.kind = 3 AND m.lock_name = h.lock_name AND m.slot > 0 AND m.expire_time > NOW(6) SET " +
              fragments::take_assignments("r.", "h.fence + 1") +
              ", r.read_epoch = h.read_epoch, h.readers = h.readers + 1 WHERE" + h +
              " AND (r.expire_time <= NOW(6) OR r.hold_id = ?) AND ((h.expire_time <= NOW(6) AND m.slot IS NULL)"
              " OR (h.hold_id = ? AND h.expire_time > NOW(6)))";
  const std::string uncount =
      ", h.readers = IF(h.readers > 0 AND r.read_epoch = h.read_epoch AND r.acquired_at + INTERVAL ? MICROSECOND"
      " <= NOW(6), h.readers - 1, h.readers)";
  const auto build_free = [&](bool ring, const char* marks) {
    return "UPDATE " + q + " r JOIN " + q +
           " h ON h.kind = 3 AND h.lock_name = r.lock_name AND h.slot = 0 SET " +
           (ring ? std::string("r.state = ") + kRingTerm + ", " : std::string()) +
           fragments::free_assignments("r.") + uncount +
           " WHERE r.kind = 4 AND r.lock_name = ? AND r.slot = ? AND r.hold_id = ? AND r.expire_time > NOW(6)" +
           marks;
  };
  for (int ring = 0; ring < 2; ++ring) {
    free_read[ring][0] = build_free(ring == 1, "");
    free_read[ring][1] = build_free(ring == 1, " AND r.waiters = 0");
    free_read[ring][2] = build_free(ring == 1, " AND r.waiters = 1");
  }
  const std::string readers = "(SELECT COUNT(*) FROM " + q +
                              " r WHERE r.kind = 4 AND r.lock_name = h.lock_name AND r.expire_time > NOW(6))";
  head = "SELECT " + fragments::row_columns("h.") + ", " + readers + ", (SELECT MAX(TIMESTAMPDIFF(MICROSECOND,"
         " NOW(6), r.expire_time)) FROM " + q + " r WHERE r.kind = 4 AND r.lock_name = h.lock_name AND"
         " r.expire_time > NOW(6)), (SELECT COUNT(*) FROM " + q + " r WHERE r.kind = 4 AND r.lock_name ="
         " h.lock_name AND r.expire_time > NOW(6) AND r.hold_id >> 48 <> ? AND r.bell <> ''), " + marks_ttl + " FROM " +
         q + " h WHERE" + h;
  poll = "SELECT h.lock_name, h.expire_time > NOW(6), h.readers, " + readers + ", " + marks_ttl +
         " IS NOT NULL FROM " + q + " h WHERE h.kind = 3 AND h.slot = 0 AND h.lock_name IN (";
}

ReadWriteRows::Head ReadWriteRows::read_head(Engine& e, std::string_view name) const {
  return e.read([&](Connection& c) {
    return e.rows().run(c, "reading a read-write lock", [&] {
      auto& ps = c.prepared(head);
      Binder(ps).u64(e.hold_tag()).text(name);
      std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
      Head out;
      out.row.key = RowKey{Kind::kWrite, std::string(name), 0};
      if (!rs->next()) return out;
      out.row = to_hold_row(*rs);
      constexpr int n = 22;  // fragments::row_columns
      out.live_reads = rs->getUInt64(n + 1);
      if (!rs->isNull(n + 2)) out.read_ttl_us = rs->getInt64(n + 2);
      out.foreign_reads = rs->getUInt64(n + 3);
      if (!rs->isNull(n + 4)) out.marks_ttl_us = rs->getInt64(n + 4);
      return out;
    });
  });
}

void ReadWriteRows::ensure_head(Engine& e, Connection& c, std::string_view name) {
  if (heads.contains(name)) return;
  e.rows().run(c, "making a read-write lock's row", [&] {
    auto& ps = c.prepared("INSERT INTO " + q + " (kind, lock_name, slot) VALUES (3, ?, 0) ON DUPLICATE KEY UPDATE"
                          " slot = slot");
    Binder(ps).text(name);
    return execute_update(ps);
  });
  heads.add(name);
}

bool ReadWriteRows::recount(Engine& e, std::string_view name) {
  try {
    const bool reset = e.with_connection([&](Connection& c) {
      return e.rows().run(c, "recounting a read-write lock's reads", [&] {
        struct Rollback {
          Connection& c;
          bool done = false;
          ~Rollback() {
            if (done) return;
            try {
              c.execute_plain("ROLLBACK");
            } catch (...) {
              // A dead session rolls back on its own.
            }
          }
        };
        c.execute_plain("START TRANSACTION");
        Rollback rollback{c};
        {
          auto& lock = c.prepared("SELECT readers FROM " + q + " WHERE kind = 3 AND lock_name = ? AND slot = 0"
                                  " FOR UPDATE");
          Binder(lock).text(name);
          std::unique_ptr<sql::ResultSet> rs(lock.executeQuery());
        }
        std::int64_t live = 0;
        {
          auto& count = c.prepared("SELECT COUNT(*) FROM " + q + " WHERE kind = 4 AND lock_name = ? AND " +
                                   fragments::live() + " LOCK IN SHARE MODE");
          Binder(count).text(name);
          std::unique_ptr<sql::ResultSet> rs(count.executeQuery());
          if (rs->next()) live = rs->getInt64(1);
        }
        bool changed = false;
        if (live == 0) {
          auto& forget = c.prepared("UPDATE " + q + " SET readers = 0, read_epoch = read_epoch + 1 WHERE"
                                    " kind = 3 AND lock_name = ? AND slot = 0 AND readers > 0");
          Binder(forget).text(name);
          changed = forget.executeUpdate() > 0;
        }
        c.execute_plain("COMMIT");
        rollback.done = true;
        return changed;
      });
    });
    if (reset) e.logger()->info("dlock: read-write lock {}: forgot a count of reads no live read holds", printable(name));
    return reset;
  } catch (const BackendError& err) {
    // Whatever it did was safe; the next attempt looks again.
    e.logger()->debug("dlock: could not recount the reads of {}: {}", printable(name), err.what());
    return false;
  }
}

void ReadWriteRows::sweep(Engine& e, Connection& c, const std::string_view* name, Millis kept) {
  const std::int64_t kept_us = micros(kept);
  const std::string stale = "(kind = 4 OR (kind = 3 AND slot > 0)) AND expire_time < NOW(6) - INTERVAL ? MICROSECOND"
                            " AND gmt_modified < NOW(6) - INTERVAL ? MICROSECOND";
  std::vector<HeldRow> found;
  e.rows().run(c, "finding stale reader slots", [&] {
    auto& ps = c.prepared("SELECT kind, lock_name, slot FROM " + q + " WHERE " + stale +
                          (name != nullptr ? " AND lock_name = ?" : "") + " LIMIT 512");
    Binder b(ps);
    b.i64(kept_us).i64(kept_us);
    if (name != nullptr) b.text(*name);
    std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
    while (rs->next())
      found.push_back(HeldRow{RowKey{static_cast<Kind>(rs->getUInt(1)), rs->getString(2), rs->getUInt64(3)}, 0});
    return 0;
  });
  if (found.empty()) return;
  e.rows().run(c, "deleting stale reader slots", [&] {
    std::string keys;
    for (std::size_t i = 0; i < found.size(); ++i) keys += i == 0 ? "(?,?,?)" : ",(?,?,?)";
    auto& ps = c.prepared("DELETE FROM " + q + " WHERE (kind, lock_name, slot) IN (" + keys + ") AND " + stale);
    Binder b(ps);
    for (const auto& row : found) b.u64(static_cast<std::uint64_t>(row.key.kind)).text(row.key.name).u64(row.key.slot);
    b.i64(kept_us).i64(kept_us);
    return execute_update(ps);
  });
}

}  // namespace dlock::details
