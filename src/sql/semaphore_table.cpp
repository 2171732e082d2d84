#include "sql/semaphore_table.hpp"

#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>

#include <stdexcept>

#include "sql/statement.hpp"

namespace dlock::details {

namespace {

constexpr int kDuplicateKey = 1062;

// Columns in the order every permit SELECT below lists them.
const char* const kPermitColumns =
    "sem_name, slot, permits, hold_id, machine_id, holder_host, holder_pid,"
    " DATE_FORMAT(acquired_at, '%Y-%m-%dT%H:%i:%s.%f'), TIMESTAMPDIFF(MICROSECOND, acquired_at, NOW(6)),"
    " TIMESTAMPDIFF(MICROSECOND, NOW(6), expire_time), watchdog, fence";

// A permit is live while its slot carries its id and the lease runs.
const char* const kLive = "hold_id IS NOT NULL AND expire_time > NOW(6)";

const char* const kCleared =
    "hold_id = NULL, machine_id = NULL, holder_host = NULL, holder_pid = NULL, acquired_at = NULL, watchdog = 0,"
    " expire_time = NULL";

PermitRow to_permit(sql::ResultSet& rs) {
  PermitRow row;
  row.name = rs.getString(1);
  row.slot = rs.getUInt(2);
  row.permits = rs.getUInt(3);
  row.hold_id = rs.isNull(4) ? 0 : rs.getUInt64(4);
  row.machine = rs.isNull(5) ? std::string() : std::string(rs.getString(5));
  row.host = rs.isNull(6) ? std::string() : std::string(rs.getString(6));
  row.pid = rs.isNull(7) ? 0 : rs.getUInt(7);
  row.acquired_at = rs.isNull(8) ? std::string() : std::string(rs.getString(8));
  if (!rs.isNull(9)) row.held_for_us = rs.getInt64(9);
  row.ttl_us = rs.isNull(10) ? 0 : rs.getInt64(10);
  row.watchdog = rs.getInt(11) == 1;
  row.fence = rs.getUInt64(12);
  return row;
}

}  // namespace

std::string SemaphoreTable::name_for(const std::string& lock_table) {
  std::string name = lock_table + "_sem";
  if (name.size() > 64) {
    throw std::invalid_argument("dlock: semaphores keep their permits in table " + name +
                                ", longer than MySQL's 64 characters; use an Options::table of at most 60");
  }
  return name;
}

SemaphoreTable::SemaphoreTable(std::string lock_table, std::shared_ptr<spdlog::logger> logger)
    : table_(name_for(lock_table)), logger_(std::move(logger)), quoted_("`" + table_ + "`") {
  // The lowest free or expired slot below the bound. Only the slot taken
  // changes, so the server reports 1 affected row for a take, 0 otherwise.
  // The doorbell rides in the watchdog assignment, evaluated only for the
  // row taken ("0 *" keeps the value, COALESCE keeps a NULL out).
  const auto take_sql = [&](const std::string& watchdog) {
    return "UPDATE " + quoted_ +
           " SET fence = fence + 1, permits = ?, hold_id = ?, machine_id = ?, holder_host = ?, holder_pid = ?,"
           " acquired_at = NOW(6), watchdog = " + watchdog + ", expire_time = NOW(6) + INTERVAL ? MICROSECOND"
           " WHERE sem_name = ? AND slot < ? AND (hold_id IS NULL OR expire_time <= NOW(6))"
           " ORDER BY slot LIMIT 1";
  };
  take_sql_ = take_sql("?");
  take_doorbell_sql_ = take_sql("? + 0 * COALESCE(GET_LOCK(?, 0), 0)");
  // Slots are numbered 0, 1, ... in the order they are added and never
  // deleted, so the next one is the count of existing ones. Two clients
  // adding the same slot meet at the primary key: one gets a duplicate-key
  // error and takes again. (MySQL and MariaDB both read the table into a
  // temporary one first when an INSERT ... SELECT reads its own table.)
  grow_sql_ = "INSERT INTO " + quoted_ +
              " (sem_name, slot, permits, hold_id, machine_id, holder_host, holder_pid, acquired_at, watchdog,"
              " expire_time, fence)"
              " SELECT ?, COUNT(*), ?, ?, ?, ?, ?, NOW(6), ?, NOW(6) + INTERVAL ? MICROSECOND, 1 FROM " + quoted_ +
              " WHERE sem_name = ? HAVING COUNT(*) < ?";
  release_sql_ = "UPDATE " + quoted_ + " SET " + kCleared + " WHERE hold_id = ? AND expire_time > NOW(6)";
  // Given back while the statement still holds the row lock: a woken
  // waiter's take waits for that lock and then sees the freed slot.
  release_doorbell_sql_ = "UPDATE " + quoted_ + " SET " + kCleared +
                          ", permits = permits + 0 * COALESCE(RELEASE_LOCK(?), 0)"
                          " WHERE hold_id = ? AND expire_time > NOW(6)";
  // Same id, same client: holder columns stay; the doorbell named after
  // the id stays held by its session.
  hand_over_sql_ = "UPDATE " + quoted_ +
                   " SET fence = fence + 1, permits = ?, acquired_at = NOW(6), watchdog = ?,"
                   " expire_time = NOW(6) + INTERVAL ? MICROSECOND WHERE hold_id = ? AND expire_time > NOW(6)";
  read_permit_sql_ = std::string("SELECT ") + kPermitColumns + " FROM " + quoted_ +
                     " WHERE hold_id = ? AND expire_time > NOW(6)";
  // GROUP_CONCAT keeps the statement one row; the server's
  // group_concat_max_len (1024 bytes by default) cuts a long list, and
  // only the first few ids are used.
  use_sql_ = "SELECT COUNT(*), MIN(TIMESTAMPDIFF(MICROSECOND, NOW(6), expire_time)),"
             " GROUP_CONCAT(hold_id ORDER BY expire_time SEPARATOR ',') FROM " + quoted_ +
             " WHERE sem_name = ? AND " + kLive;
  force_sql_ = "UPDATE " + quoted_ + " SET " + kCleared + " WHERE sem_name = ? AND " + kLive;
}

std::string SemaphoreTable::create_table_sql() const {
  return "CREATE TABLE IF NOT EXISTS " + quoted_ +
         " (\n"
         "  sem_name     VARBINARY(255)  NOT NULL COMMENT 'semaphore name; bytes, compared exactly',\n"
         "  slot         INT UNSIGNED    NOT NULL COMMENT '0 .. bound-1; holds at most one permit',\n"
         "  permits      INT UNSIGNED    NOT NULL DEFAULT 0 COMMENT 'the bound its holder acquired under',\n"
         "  hold_id      BIGINT UNSIGNED NULL     COMMENT 'random id of the permit held here; NULL when free',\n"
         "  machine_id   VARBINARY(64)   NULL     COMMENT 'label of the holding client (Options::machine_id)',\n"
         "  holder_host  VARBINARY(255)  NULL     COMMENT 'host name of the holding client',\n"
         "  holder_pid   INT UNSIGNED    NULL     COMMENT 'process id of the holding client',\n"
         "  acquired_at  DATETIME(6)     NULL     COMMENT 'server clock (UTC): when the permit was taken',\n"
         "  watchdog     TINYINT(1)      NOT NULL DEFAULT 0 COMMENT '1: the holder renews the lease',\n"
         "  expire_time  DATETIME(6)     NULL     COMMENT 'server clock (UTC); the permit is void from then',\n"
         "  fence        BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'bumped by every take of this slot',\n"
         "  gmt_create   DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),\n"
         "  gmt_modified DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),\n"
         "  PRIMARY KEY (sem_name, slot),\n"
         "  UNIQUE KEY uk_hold_id (hold_id)\n"
         ") ENGINE=InnoDB COMMENT='dlock: semaphore slots, one permit each; rows never deleted'";
}

void SemaphoreTable::create_table(Connection& c) const {
  run_statement(c, logger_, "creating the semaphore table", [&] {
    c.execute_plain(create_table_sql());
    return 0;
  });
}

void SemaphoreTable::check_schema(Connection& c) const {
  const bool exists = run_statement(c, logger_, "checking the semaphore table", [&] {
    auto& ps = c.prepared(
        "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?");
    Binder(ps).text(table_);
    std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
    return rs->next() && rs->getInt(1) > 0;
  });
  if (!exists) {
    throw BackendError("dlock: semaphore table " + table_ + " does not exist; create it with `dlock init` (or let "
                           "the client create it: Options::create_table)",
                       1146, "42S02");
  }
}

bool SemaphoreTable::take(Connection& c, std::string_view name, std::uint32_t permits, const PermitHolder& holder,
                          std::int64_t lease_us, bool watchdog, const std::string* doorbell) const {
  return run_statement(
             c, logger_, "taking a semaphore permit",
             [&] {
               auto& ps = c.prepared(doorbell != nullptr ? take_doorbell_sql_ : take_sql_);
               Binder b(ps);
               b.u64(permits).u64(holder.hold_id).text(holder.label).text(holder.host).u64(holder.pid).flag(watchdog);
               if (doorbell != nullptr) b.text(*doorbell);
               b.i64(lease_us).text(name).u64(permits);
               return execute_update(ps);
             },
             [&] {
               // A failed run may have taken the doorbell (user-level locks
               // are not transactional): give it back.
               if (doorbell != nullptr) give_back(c, *doorbell);
             }) == 1;
}

void SemaphoreTable::give_back(Connection& c, const std::string& doorbell) const {
  try {
    run_statement(c, logger_, "giving back a doorbell", [&] {
      auto& ps = c.prepared("SELECT RELEASE_LOCK(?)");
      Binder(ps).text(doorbell);
      std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
      return 0;
    });
  } catch (const BackendError&) {
    // A lost connection took it with its session; otherwise it goes when
    // the session ends.
  }
}

SemaphoreTable::Grow SemaphoreTable::grow(Connection& c, std::string_view name, std::uint32_t permits,
                                          const PermitHolder& holder, std::int64_t lease_us, bool watchdog) const {
  try {
    const auto added = run_statement(c, logger_, "adding a semaphore slot", [&] {
      auto& ps = c.prepared(grow_sql_);
      Binder(ps)
          .text(name)
          .u64(permits)
          .u64(holder.hold_id)
          .text(holder.label)
          .text(holder.host)
          .u64(holder.pid)
          .flag(watchdog)
          .i64(lease_us)
          .text(name)
          .u64(permits);
      return execute_update(ps);
    });
    return added == 1 ? Grow::kGrown : Grow::kFull;
  } catch (const OutcomeUnknown&) {
    throw;
  } catch (const BackendError& e) {
    if (e.code() == kDuplicateKey) return Grow::kRaced;
    throw;
  }
}

bool SemaphoreTable::release(Connection& c, std::uint64_t hold_id, const std::string* doorbell) const {
  const bool released = run_statement(c, logger_, "releasing a semaphore permit", [&] {
                          auto& ps = c.prepared(doorbell != nullptr ? release_doorbell_sql_ : release_sql_);
                          Binder b(ps);
                          if (doorbell != nullptr) b.text(*doorbell);
                          b.u64(hold_id);
                          return execute_update(ps);
                        }) == 1;
  // A lost permit's statement matched no row: its doorbell is still ours.
  if (!released && doorbell != nullptr) give_back(c, *doorbell);
  return released;
}

bool SemaphoreTable::hand_over(Connection& c, std::uint64_t hold_id, std::uint32_t permits, std::int64_t lease_us,
                               bool watchdog) const {
  return run_statement(c, logger_, "handing over a semaphore permit", [&] {
           auto& ps = c.prepared(hand_over_sql_);
           Binder(ps).u64(permits).flag(watchdog).i64(lease_us).u64(hold_id);
           return execute_update(ps);
         }) == 1;
}

std::size_t SemaphoreTable::renew(Connection& c, const std::vector<std::uint64_t>& hold_ids,
                                  std::int64_t lease_us) const {
  std::size_t renewed = 0;
  for_each_chunk(hold_ids, [&](std::size_t first, std::size_t count, std::size_t bucket) {
    renewed += static_cast<std::size_t>(run_statement(c, logger_, "renewing semaphore permits", [&] {
      auto& ps = c.prepared("UPDATE " + quoted_ +
                            " SET expire_time = NOW(6) + INTERVAL ? MICROSECOND"
                            " WHERE watchdog = 1 AND expire_time > NOW(6) AND hold_id IN (" +
                            placeholders(bucket) + ")");
      Binder b(ps);
      b.i64(lease_us);
      bind_u64s(b, hold_ids, first, count, bucket);
      return execute_update(ps);
    }));
  });
  return renewed;
}

std::vector<std::uint64_t> SemaphoreTable::live_among(Connection& c, const std::vector<std::uint64_t>& hold_ids) const {
  std::vector<std::uint64_t> live;
  for_each_chunk(hold_ids, [&](std::size_t first, std::size_t count, std::size_t bucket) {
    run_statement(c, logger_, "reading semaphore permits", [&] {
      auto& ps = c.prepared("SELECT hold_id FROM " + quoted_ + " WHERE expire_time > NOW(6) AND hold_id IN (" +
                            placeholders(bucket) + ")");
      Binder b(ps);
      bind_u64s(b, hold_ids, first, count, bucket);
      std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
      while (rs->next()) live.push_back(rs->getUInt64(1));
      return 0;
    });
  });
  return live;
}

std::optional<PermitRow> SemaphoreTable::read_permit(Connection& c, std::uint64_t hold_id) const {
  return run_statement(c, logger_, "reading a semaphore permit", [&]() -> std::optional<PermitRow> {
    auto& ps = c.prepared(read_permit_sql_);
    Binder(ps).u64(hold_id);
    std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
    if (!rs->next()) return std::nullopt;
    return to_permit(*rs);
  });
}

SemaphoreUse SemaphoreTable::use(Connection& c, std::string_view name) const {
  return run_statement(c, logger_, "counting semaphore permits", [&] {
    auto& ps = c.prepared(use_sql_);
    Binder(ps).text(name);
    std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
    SemaphoreUse use;
    use.name = std::string(name);
    if (rs->next()) {
      use.live = rs->getUInt(1);
      if (!rs->isNull(2)) use.next_expiry_us = rs->getInt64(2);
      if (!rs->isNull(3)) {
        const std::string ids = rs->getString(3);
        std::size_t start = 0;
        while (start < ids.size() && use.first_ids.size() < kFirstIds) {
          const std::size_t end = ids.find(',', start);
          const std::string id = ids.substr(start, end == std::string::npos ? std::string::npos : end - start);
          // The last one may be cut short by group_concat_max_len.
          if (end == std::string::npos && ids.size() >= 1024) break;
          if (!id.empty()) use.first_ids.push_back(std::stoull(id));
          if (end == std::string::npos) break;
          start = end + 1;
        }
      }
    }
    return use;
  });
}

std::vector<SemaphoreUse> SemaphoreTable::use_many(Connection& c, const std::vector<std::string>& names) const {
  std::vector<SemaphoreUse> uses;
  for (const auto& name : names) uses.push_back(SemaphoreUse{name, 0, std::nullopt, {}});
  for_each_chunk(names, [&](std::size_t first, std::size_t count, std::size_t bucket) {
    run_statement(c, logger_, "polling waited-for semaphores", [&] {
      auto& ps = c.prepared("SELECT sem_name, COUNT(*), MIN(TIMESTAMPDIFF(MICROSECOND, NOW(6), expire_time)) FROM " +
                            quoted_ + " WHERE " + kLive + " AND sem_name IN (" + placeholders(bucket) +
                            ") GROUP BY sem_name");
      Binder b(ps);
      bind_texts(b, names, first, count, bucket);
      std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
      while (rs->next()) {
        const std::string name = rs->getString(1);
        for (std::size_t i = first; i < first + count; ++i) {
          if (uses[i].name != name) continue;
          uses[i].live = rs->getUInt(2);
          if (!rs->isNull(3)) uses[i].next_expiry_us = rs->getInt64(3);
        }
      }
      return 0;
    });
  });
  return uses;
}

std::vector<PermitRow> SemaphoreTable::read_held(Connection& c) const {
  return run_statement(c, logger_, "listing semaphore permits", [&] {
    auto& ps = c.prepared(std::string("SELECT ") + kPermitColumns + " FROM " + quoted_ + " WHERE " + kLive +
                          " ORDER BY sem_name, slot");
    std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
    std::vector<PermitRow> rows;
    while (rs->next()) rows.push_back(to_permit(*rs));
    return rows;
  });
}

std::size_t SemaphoreTable::force_release(Connection& c, std::string_view name) const {
  return static_cast<std::size_t>(run_statement(c, logger_, "force-releasing semaphore permits", [&] {
    auto& ps = c.prepared(force_sql_);
    Binder(ps).text(name);
    return execute_update(ps);
  }));
}

std::size_t SemaphoreTable::release_all(Connection& c, const std::vector<std::uint64_t>& hold_ids) const {
  std::size_t released = 0;
  for_each_chunk(hold_ids, [&](std::size_t first, std::size_t count, std::size_t bucket) {
    released += static_cast<std::size_t>(run_statement(c, logger_, "releasing this client's permits", [&] {
      auto& ps = c.prepared("UPDATE " + quoted_ + " SET " + kCleared + " WHERE hold_id IN (" + placeholders(bucket) +
                            ")");
      Binder b(ps);
      bind_u64s(b, hold_ids, first, count, bucket);
      return execute_update(ps);
    }));
  });
  return released;
}

}  // namespace dlock::details
