#include "primitives/election/election_rows.hpp"

#include "base/kinds_table.hpp"

#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>

#include "sql/statement.hpp"

namespace dlock::details {

ElectionRows::ElectionRows(const HoldRows& rows) : rows_(rows) {
  const std::string where = " WHERE kind = " + kind_sql(Kind::kElection) + " AND lock_name = ? AND slot = 0";
  read_sql_ = "SELECT " + fragments::live() +
              ", revision, fence, hold_id, value, machine_id, holder_host, holder_pid,"
              " DATE_FORMAT(acquired_at, '%Y-%m-%dT%H:%i:%s.%f'), TIMESTAMPDIFF(MICROSECOND, NOW(6), expire_time), bell"
              " FROM " +
              rows.quoted() + where;
  proclaim_sql_ = "UPDATE " + rows.quoted() + " SET value = ?, revision = revision + 1" + where +
                  " AND hold_id = ? AND " + fragments::live();
  // The election's row and its parked observers, in one read.
  after_take_sql_ = "SELECT kind, slot, fence, hold_id, bell, " + fragments::live() + " FROM " + rows.quoted() +
                    " WHERE (kind = " + kind_sql(Kind::kElection) + " AND lock_name = ? AND slot = 0) OR (kind = " + kind_sql(Kind::kObserver) + " AND lock_name = ?)";
  park_sql_ = "INSERT INTO " + rows.quoted() +
              " (kind, lock_name, slot, hold_id, bell, expire_time) VALUES (7, ?, ?, ?, ?, NOW(6) + INTERVAL ? SECOND)"
              " ON DUPLICATE KEY UPDATE hold_id = ?, bell = ?, expire_time = NOW(6) + INTERVAL ? SECOND";
  unpark_sql_ = "DELETE FROM " + rows.quoted() + " WHERE kind = " + kind_sql(Kind::kObserver) + " AND lock_name = ? AND slot = ? AND hold_id = ?";
}

AfterElectionTake ElectionRows::read_after_take(Connection& c, std::string_view name, std::uint64_t hold_id) const {
  return rows_.query(
      c, "reading an election after a take", after_take_sql_, [&](Binder& b) { b.text(name).text(name); },
      [&](sql::ResultSet& rs) {
        AfterElectionTake after;
        while (rs.next()) {
          const bool live = rs.getInt(6) == 1;
          if (rs.getUInt(1) == 6) {
            after.held = live && rs.getUInt64(4) == hold_id;
            if (after.held) after.fence = rs.getUInt64(3);
            continue;
          }
          after.observers.push_back(ParkedObserver{rs.getUInt64(2), rs.getUInt64(4), rs.getString(5), live});
        }
        return after;
      });
}

void ElectionRows::park_observer(Connection& c, std::string_view name, const ParkedObserver& o, int seconds) const {
  rows_.update(c, "parking an observer", park_sql_, [&](Binder& b) {
    b.text(name).u64(o.slot).u64(o.token).text(o.lock).i64(seconds).u64(o.token).text(o.lock).i64(seconds);
  });
}

void ElectionRows::unpark_observers(Connection& c, std::string_view name,
                                    const std::vector<ParkedObserver>& parked) const {
  for (const auto& o : parked) {
    rows_.update(c, "removing a parked observer", unpark_sql_,
                 [&](Binder& b) { b.text(name).u64(o.slot).u64(o.token); });
  }
}

ElectionRow ElectionRows::read(Connection& c, std::string_view name) const {
  return rows_.query(
      c, "reading an election", read_sql_, [&](Binder& b) { b.text(name); },
      [&](sql::ResultSet& rs) {
        ElectionRow row;
        if (!rs.next()) return row;
        row.exists = true;
        row.live = rs.getInt(1) == 1;
        row.revision = rs.getUInt64(2);
        row.fence = rs.getUInt64(3);
        if (!row.live) return row;
        row.hold_id = rs.getUInt64(4);
        if (!rs.isNull(5)) row.value = rs.getString(5);
        row.machine = rs.getString(6);
        row.host = rs.getString(7);
        row.pid = static_cast<std::uint32_t>(rs.getUInt(8));
        row.acquired_at = rs.getString(9);
        row.ttl_us = rs.getInt64(10);
        if (!rs.isNull(11)) row.bell = rs.getString(11);
        return row;
      });
}

bool ElectionRows::proclaim(Connection& c, std::string_view name, std::uint64_t hold_id,
                            std::string_view value) const {
  return rows_.update(c, "proclaiming", proclaim_sql_, [&](Binder& b) { b.text(value).text(name).u64(hold_id); }) > 0;
}

}  // namespace dlock::details
