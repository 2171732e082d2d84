// The read-write lock's statements and the reads and repairs both of its
// sides use (primitives/read_write_lock/read_write_rows.hpp).
#include "base/kinds_table.hpp"
#include "primitives/read_write_lock/read_write_rows.hpp"

#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <spdlog/spdlog.h>

#include "base/micros.hpp"
#include "base/printable.hpp"
#include "engine/kind_context.hpp"
#include "sql/bells.hpp"
#include "sql/statement.hpp"

namespace dlock::details {

ReadWriteRows::ReadWriteRows(const HoldRows& rows) : q(rows.quoted()) {
  const std::string h = " h.kind = " + kind_sql(Kind::kWrite) + " AND h.lock_name = ? AND h.slot = 0";
  // The live reads of the head's name, as an anti-join: a row of r joined
  // means a read is live (the head is still updated once, however many join).
  const std::string live_reads =
      " LEFT JOIN " + q + " r ON r.kind = " + kind_sql(Kind::kRead) + " AND r.lock_name = h.lock_name AND r.expire_time > NOW(6)";
  // A write is taken at once while no read was taken since the last write
  // (read_taken = 0: one row, one table); else by looking at the reads
  // themselves, which clears read_taken when none is live.
  take_write = "UPDATE " + q + " SET " + fragments::take_assignments("", "fence + 2") +
               " WHERE kind = " + kind_sql(Kind::kWrite) + " AND lock_name = ? AND slot = 0 AND (expire_time <= NOW(6) OR hold_id = ?) AND"
               " read_taken = 0";
  take_write_past_reads = "UPDATE " + q + " h" + live_reads + " SET " +
                          fragments::take_assignments("h.", "h.fence + 2") + ", h.read_taken = 0 WHERE" + h +
                          " AND (h.expire_time <= NOW(6) OR h.hold_id = ?) AND r.slot IS NULL";
  // A read taken under the write (a downgrade) keeps the write from being
  // handed on.
  hand_over_write = "UPDATE " + q + " SET " + fragments::hand_over_assignments("", 2) +
                    " WHERE kind = " + kind_sql(Kind::kWrite) + " AND lock_name = ? AND slot = 0 AND hold_id IN (?, ?) AND " + fragments::live() +
                    " AND read_taken = 0";
  // A waiting writer's intent: its client's row, live while it waits.
  intend = "INSERT INTO " + q + " (kind, lock_name, slot, owner_id, machine_id, holder_host, holder_pid, acquired_at,"
         " expire_time) VALUES (3, ?, ?, 0, ?, ?, ?, NOW(6), NOW(6) + INTERVAL ? MICROSECOND) ON DUPLICATE KEY"
         " UPDATE acquired_at = IF(expire_time > NOW(6), acquired_at, NOW(6)),"
         " expire_time = NOW(6) + INTERVAL ? MICROSECOND";
  withdraw = "UPDATE " + q + " SET expire_time = acquired_at WHERE kind = " + kind_sql(Kind::kWrite) + " AND lock_name = ? AND slot = ?";
  // The head's intent_expire says until when some writer's intent is live,
  // so a read take looks at one row, not at every intent: an intent raises it
  // (before making its row), a clear sets it to the latest intent row
  // still live. An intent's lease is three polls, renewed every poll, so an
  // clear that misses a concurrent first intent holds readers back again at
  // that writer's next poll at the latest.
  intend_head = "UPDATE " + q + " SET intent_expire = GREATEST(intent_expire, NOW(6) + INTERVAL ? MICROSECOND) WHERE"
              " kind = " + kind_sql(Kind::kWrite) + " AND lock_name = ? AND slot = 0";
  withdraw_head = "UPDATE " + q + " h JOIN (SELECT COALESCE(MAX(expire_time), '1970-01-02 00:00:00') AS until FROM " + q +
                " WHERE kind = " + kind_sql(Kind::kWrite) + " AND lock_name = ? AND slot > 0 AND expire_time > NOW(6)) marks SET h.intent_expire ="
                " marks.until WHERE" + h;
  const std::string intents_ttl =
      "IF(h.intent_expire > NOW(6), TIMESTAMPDIFF(MICROSECOND, NOW(6), h.intent_expire), NULL)";
  // The head is named first and locked (it is updated), so a read take and
  // a write take of one name queue on the head: a write that finds no live
  // read is never joined by a read until it commits, and a read that is
  // taken sets read_taken, so the next write looks at the reads. Only the
  // slot row gets the hold. Assignments read only columns no assignment
  // changes (neither server promises an order for them).
  take_read = "UPDATE " + q + " h JOIN " + q + " r ON r.kind = " + kind_sql(Kind::kRead) + " AND r.lock_name = h.lock_name AND r.slot = ? SET"
              " h.read_taken = 1, " + fragments::take_assignments("r.", "h.fence + 1") + " WHERE" + h +
              " AND (r.expire_time <= NOW(6) OR r.hold_id = ?) AND ((h.expire_time <= NOW(6) AND h.intent_expire <="
              " NOW(6)) OR (h.hold_id = ? AND h.expire_time > NOW(6)))";
  const std::string reads = " FROM " + q + " r WHERE r.kind = " + kind_sql(Kind::kRead) + " AND r.lock_name = h.lock_name AND r.expire_time > NOW(6)";
  head = "SELECT " + fragments::row_columns("h.") + ", (SELECT COUNT(*)" + reads +
         "), (SELECT MAX(TIMESTAMPDIFF(MICROSECOND, NOW(6), r.expire_time))" + reads + "), (SELECT COUNT(*)" + reads +
         " AND r.hold_id >> 48 <> ? AND r.bell <> ''), " + intents_ttl + " FROM " + q + " h WHERE" + h;
  poll = "SELECT h.lock_name, h.expire_time > NOW(6), (SELECT COUNT(*)" + reads + "), h.intent_expire > NOW(6) FROM " + q + " h WHERE h.kind = " + kind_sql(Kind::kWrite) + " AND h.slot = 0 AND h.lock_name IN (";
}

ReadWriteRows::Head ReadWriteRows::read_head(KindContext& e, std::string_view name) const {
  return e.read([&](Connection& c) {
    return e.rows().query(
        c, "reading a read-write lock", head, [&](Binder& b) { b.u64(e.hold_tag()).text(name); },
        [&](sql::ResultSet& rs) {
          Head out;
          out.row.key = RowKey{Kind::kWrite, std::string(name), 0};
          if (!rs.next()) return out;
          out.row = to_hold_row(rs);
          constexpr int n = fragments::kRowColumns;
          out.live_reads = rs.getUInt64(n + 1);
          if (!rs.isNull(n + 2)) out.read_ttl_us = rs.getInt64(n + 2);
          out.foreign_reads = rs.getUInt64(n + 3);
          if (!rs.isNull(n + 4)) out.intents_ttl_us = rs.getInt64(n + 4);
          return out;
        });
  });
}

void ReadWriteRows::ensure_head(KindContext& e, Connection& c, std::string_view name) {
  if (heads.contains(name)) return;
  e.rows().update(c, "making a read-write lock's row",
                  "INSERT INTO " + q +
                      " (kind, lock_name, slot) VALUES (3, ?, 0) ON DUPLICATE KEY UPDATE"
                      " slot = slot",
                  [&](Binder& b) { b.text(name); });
  heads.add(name);
}

void ReadWriteRows::sweep(KindContext& e, Connection& c, const std::string_view* name, Millis kept) {
  const std::int64_t kept_us = micros(kept);
  const std::string stale = swept_rows_sql() +
                            " AND expire_time < NOW(6) - INTERVAL ? MICROSECOND AND gmt_modified < NOW(6) - INTERVAL ?"
                            " MICROSECOND";
  std::vector<HeldRow> found;
  e.rows().query(
      c, "finding stale reader slots",
      "SELECT kind, lock_name, slot FROM " + q + " WHERE " + stale + (name != nullptr ? " AND lock_name = ?" : "") +
          " LIMIT 512",
      [&](Binder& b) {
        b.i64(kept_us).i64(kept_us);
        if (name != nullptr) b.text(*name);
      },
      [&](sql::ResultSet& rs) {
        while (rs.next())
          found.push_back(HeldRow{RowKey{static_cast<Kind>(rs.getUInt(1)), rs.getString(2), rs.getUInt64(3)}, 0});
      });
  if (found.empty()) return;
  std::string keys;
  for (std::size_t i = 0; i < found.size(); ++i) keys += i == 0 ? "(?,?,?)" : ",(?,?,?)";
  e.rows().update(c, "deleting stale reader slots",
                  "DELETE FROM " + q + " WHERE (kind, lock_name, slot) IN (" + keys + ") AND " + stale, [&](Binder& b) {
                    for (const auto& row : found)
                      b.u64(static_cast<std::uint64_t>(row.key.kind)).text(row.key.name).u64(row.key.slot);
                    b.i64(kept_us).i64(kept_us);
                  });
}

}  // namespace dlock::details
