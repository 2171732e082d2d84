#include "sql/election_rows.hpp"

#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>

#include "sql/statement.hpp"

namespace dlock::details {

ElectionRows::ElectionRows(const HoldRows& rows) : rows_(rows) {
  const std::string where = " WHERE kind = 6 AND lock_name = ? AND slot = 0";
  read_sql_ = "SELECT " + fragments::live() +
              ", revision, fence, hold_id, value, machine_id, holder_host, holder_pid,"
              " DATE_FORMAT(acquired_at, '%Y-%m-%dT%H:%i:%s.%f'), TIMESTAMPDIFF(MICROSECOND, NOW(6), expire_time), bell"
              " FROM " +
              rows.quoted() + where;
  proclaim_sql_ = "UPDATE " + rows.quoted() + " SET value = ?, revision = revision + 1" + where +
                  " AND hold_id = ? AND " + fragments::live();
}

ElectionRow ElectionRows::read(Connection& c, std::string_view name) const {
  return rows_.run(c, "reading an election", [&] {
    auto& ps = c.prepared(read_sql_);
    Binder b(ps);
    b.text(name);
    std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
    ElectionRow row;
    if (!rs->next()) return row;
    row.exists = true;
    row.live = rs->getInt(1) == 1;
    row.revision = rs->getUInt64(2);
    row.fence = rs->getUInt64(3);
    if (!row.live) return row;
    row.hold_id = rs->getUInt64(4);
    if (!rs->isNull(5)) row.value = rs->getString(5);
    row.machine = rs->getString(6);
    row.host = rs->getString(7);
    row.pid = static_cast<std::uint32_t>(rs->getUInt(8));
    row.acquired_at = rs->getString(9);
    row.ttl_us = rs->getInt64(10);
    if (!rs->isNull(11)) row.bell = rs->getString(11);
    return row;
  });
}

bool ElectionRows::proclaim(Connection& c, std::string_view name, std::uint64_t hold_id,
                            std::string_view value) const {
  return rows_.run(c, "proclaiming", [&] {
           auto& ps = c.prepared(proclaim_sql_);
           Binder b(ps);
           b.text(value).text(name).u64(hold_id);
           return execute_update(ps);
         }) > 0;
}

}  // namespace dlock::details
