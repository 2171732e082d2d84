#include "sql/schema.hpp"

#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <spdlog/spdlog.h>

#include <map>
#include <optional>
#include <set>

#include "sql/statement.hpp"

namespace dlock::details {

namespace {

// Server time in a free row's DATETIME columns: long past, and never NULL
// (a NULL has no length in InnoDB's row format, so a column that is NULL
// in a free row makes every take and release rewrite the whole record).
constexpr const char* kLongAgo = "'1970-01-02 00:00:00'";

struct TableInfo {
  bool exists = false;
  bool view = false;
  std::string comment;
};

TableInfo table_info(Connection& c, const std::string& name) {
  auto& ps = c.prepared(
      "SELECT TABLE_TYPE, TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND "
      "TABLE_NAME = ?");
  Binder(ps).text(name);
  std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
  TableInfo info;
  if (!rs->next()) return info;
  info.exists = true;
  info.view = rs->getString(1) == "VIEW";
  info.comment = rs->getString(2);
  return info;
}

std::set<std::string> columns_of(Connection& c, const std::string& name) {
  auto& ps = c.prepared(
      "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?");
  Binder(ps).text(name);
  std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
  std::set<std::string> out;
  while (rs->next()) out.insert(rs->getString(1));
  return out;
}

std::string quoted(const std::string& name) { return "`" + name + "`"; }

// The version a table comment states ("dlock schema N"), or nullopt.
std::optional<int> stated_version(const std::string& comment) {
  const std::string mark = "dlock schema ";
  const auto at = comment.find(mark);
  if (at == std::string::npos) return std::nullopt;
  int version = 0;
  for (std::size_t i = at + mark.size(); i < comment.size() && comment[i] >= '0' && comment[i] <= '9'; ++i)
    version = version * 10 + (comment[i] - '0');
  return version > 0 ? std::optional<int>(version) : std::nullopt;
}

std::string describe(int version) {
  switch (version) {
    case 1:
      return "schema 1 (dlock 0.1)";
    case 2:
      return "schema 2 (dlock 0.2)";
    default:
      return "schema " + std::to_string(version);
  }
}

// The old tables beside a dlock 0.2 lock table.
std::vector<std::string> old_tables(const std::string& table) {
  std::vector<std::string> out;
  for (const char* suffix : {"_sem", "_rw", "_rwr"})
    if (table.size() + std::char_traits<char>::length(suffix) <= 64) out.push_back(table + suffix);
  return out;
}

// The expression that reads column `column` of an old row, or `fallback`
// when the old table lacks it (dlock 0.1 had no holder details).
std::string old_column(const std::set<std::string>& present, const std::string& column, const std::string& fallback) {
  return present.count(column) != 0 ? "COALESCE(" + column + ", " + fallback + ")" : fallback;
}

}  // namespace

Schema::Schema(std::string table, std::shared_ptr<spdlog::logger> logger)
    : table_(std::move(table)), logger_(std::move(logger)) {}

std::string Schema::create_sql() const { return create_sql_for(table_); }

std::string Schema::create_sql_for(const std::string& name) const {
  const std::string long_ago = kLongAgo;
  return "CREATE TABLE IF NOT EXISTS " + quoted(name) +
         " (\n"
         "  kind          TINYINT UNSIGNED NOT NULL COMMENT '1 lock, 2 semaphore slot, 3 read-write lock, 4 read hold, "
         "5 fair lock, 6 election, 7 parked election observer',\n"
         "  lock_name     VARBINARY(255)   NOT NULL COMMENT 'the name; bytes, compared exactly',\n"
         "  slot          BIGINT UNSIGNED  NOT NULL DEFAULT 0 COMMENT 'semaphore: 0..bound-1; read hold: its client "
         "and slot; fair lock: 0 the hold, n > 0 the queue',\n"
         "  hold_id       BIGINT UNSIGNED  NOT NULL DEFAULT 0 COMMENT 'random id of the current or last hold',\n"
         "  owner_id      BIGINT UNSIGNED  NOT NULL DEFAULT 0 COMMENT 'the holding owner within its client',\n"
         "  machine_id    VARBINARY(64)    NOT NULL DEFAULT '' COMMENT 'label of the holding client',\n"
         "  holder_host   VARBINARY(255)   NOT NULL DEFAULT '' COMMENT 'host name of the holding client',\n"
         "  holder_pid    INT UNSIGNED     NOT NULL DEFAULT 0 COMMENT 'process id of the holding client',\n"
         "  acquired_at   DATETIME(6)      NOT NULL DEFAULT " + long_ago +
         " COMMENT 'server clock (UTC): when the hold was granted',\n"
         "  expire_time   DATETIME(6)      NOT NULL DEFAULT " + long_ago +
         " COMMENT 'server clock (UTC): the hold is live until then; a release moves it into the past',\n"
         "  state         INT UNSIGNED     NOT NULL DEFAULT 0 COMMENT 'hold count (reentrancy); 0 once released',\n"
         "  watchdog      TINYINT(1)       NOT NULL DEFAULT 0 COMMENT '1: the holder renews the lease',\n"
         "  fence         BIGINT UNSIGNED  NOT NULL DEFAULT 0 COMMENT 'fencing token of the current or last hold',\n"
         "  bell          VARBINARY(64)    NOT NULL DEFAULT '' COMMENT 'user-level lock of the holding session',\n"
         "  waiters       TINYINT(1)       NOT NULL DEFAULT 0 COMMENT '1: a waiter elsewhere waits for the bell',\n"
         "  intent_id     BIGINT UNSIGNED  NOT NULL DEFAULT 0 COMMENT 'client whose waiter goes next while "
         "intent_expire is ahead',\n"
         "  intent_expire DATETIME(6)      NOT NULL DEFAULT " + long_ago + ",\n"
         "  bound         INT UNSIGNED     NOT NULL DEFAULT 0 COMMENT 'semaphore slot: the bound of its permit',\n"
         "  read_taken    TINYINT(1)       NOT NULL DEFAULT 0 COMMENT 'read-write lock: 1 once a read is taken, until a "
         "write is taken that found no live read',\n"
         "  lease_us      BIGINT UNSIGNED  NOT NULL DEFAULT 0 COMMENT 'fair lock queue entry: the lease of its hold',\n"
         "  revision      BIGINT UNSIGNED  NOT NULL DEFAULT 0 COMMENT 'election: grows with every change',\n"
         "  value         MEDIUMBLOB       NULL     COMMENT 'election: what the leader proclaimed',\n"
         "  gmt_create    DATETIME(6)      NOT NULL DEFAULT CURRENT_TIMESTAMP(6),\n"
         "  gmt_modified  DATETIME(6)      NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),\n"
         "  PRIMARY KEY (kind, lock_name, slot)\n"
         ") ENGINE=InnoDB COMMENT='dlock schema " +
         std::to_string(kVersion) + ": the rows of every lock, semaphore and read-write lock'";
}

int Schema::found_version(Connection& c) const {
  return run_statement(c, logger_, "checking the lock table", [&] {
    const TableInfo info = table_info(c, table_);
    if (!info.exists) return 0;
    if (const auto version = stated_version(info.comment)) return *version;
    const auto columns = columns_of(c, table_);
    if (!info.view && columns.count("lock_name") != 0 && columns.count("is_locked") != 0)
      return columns.count("hold_id") != 0 ? 2 : 1;
    throw BackendError("dlock: " + table_ + " exists but is not a dlock lock table; choose another Options::table",
                       0, "");
  });
}

void Schema::prepare(Connection& c, bool create) const {
  if (create) {
    run_statement(c, logger_, "creating the lock table", [&] {
      c.execute_plain(create_sql());
      return 0;
    });
  }
  const int found = found_version(c);
  if (found == kVersion) return;
  if (found == 0) {
    throw BackendError("dlock: lock table " + table_ + " does not exist; create it with `dlock init` (or let the "
                           "client create it: Options::create_table)",
                       mysql_error::kNoSuchTable, "42S02");
  }
  const std::string action = found < kVersion ? "stop every client of the older version and run `dlock init` to "
                                                "migrate the table"
                                              : "upgrade this client";
  throw BackendError("dlock: lock table " + table_ + " has " + describe(found) + "; this client uses " +
                         describe(kVersion) + ": " + action,
                     0, "");
}

std::vector<std::string> Schema::migration_sql(Connection& c, int from, const std::string& into) const {
  std::vector<std::string> out;
  const std::string hold_columns =
      "(kind, lock_name, slot, hold_id, owner_id, machine_id, holder_host, holder_pid, acquired_at, expire_time, state,"
      " watchdog, fence";
  const std::string long_ago = kLongAgo;
  // Locks: a row is held while is_locked = 1 and its lease runs.
  {
    const auto p = columns_of(c, table_);
    const std::string live = "(is_locked = 1 AND expire_time IS NOT NULL)";
    out.push_back("INSERT INTO " + quoted(into) + " " + hold_columns + ") SELECT 1, lock_name, 0, " +
                  old_column(p, "hold_id", "0") + ", COALESCE(thread_id, 0), COALESCE(machine_id, ''), " +
                  old_column(p, "holder_host", "''") + ", " + old_column(p, "holder_pid", "0") + ", " +
                  old_column(p, "acquired_at", long_ago) + ", IF(" + live + ", expire_time, " + long_ago + "), IF(" +
                  live + ", state, 0), watchdog, fence FROM " + quoted(table_));
  }
  if (from < 2) return out;
  const auto tables = old_tables(table_);
  if (tables.size() == 3 && table_info(c, tables[0]).exists && !table_info(c, tables[0]).view) {
    // Semaphore slots: a permit is held while hold_id is set and its lease runs.
    out.push_back("INSERT INTO " + quoted(into) + " " + hold_columns +
                  ", bound) SELECT 2, sem_name, slot, COALESCE(hold_id, 0), 0, COALESCE(machine_id, ''),"
                  " COALESCE(holder_host, ''), COALESCE(holder_pid, 0), COALESCE(acquired_at, " + long_ago +
                  "), IF(hold_id IS NOT NULL AND expire_time IS NOT NULL, expire_time, " + long_ago +
                  "), IF(hold_id IS NOT NULL, 1, 0), watchdog, fence, permits FROM " + quoted(tables[0]));
  }
  if (tables.size() == 3 && table_info(c, tables[1]).exists && !table_info(c, tables[1]).view &&
      table_info(c, tables[2]).exists && !table_info(c, tables[2]).view) {
    const auto held = [&](const std::string& p) {
      return "(" + p + "hold_id IS NOT NULL AND " + p + "expire_time IS NOT NULL)";
    };
    // The write side (the reads are their own rows, below: read_taken makes
    // the first write look at them).
    out.push_back("INSERT INTO " + quoted(into) + " " + hold_columns +
                  ", read_taken, intent_id, intent_expire) SELECT 3, rw_name, 0, COALESCE(hold_id, 0),"
                  " COALESCE(thread_id, 0), COALESCE(machine_id, ''), COALESCE(holder_host, ''),"
                  " COALESCE(holder_pid, 0), COALESCE(acquired_at, " + long_ago + "), IF(" + held("") +
                  ", expire_time, " + long_ago + "), IF(" + held("") +
                  ", state, 0), watchdog, fence, 1, COALESCE(intent_id, 0) & 281474976710655, COALESCE(intent_expire, " +
                  long_ago + ") FROM " + quoted(tables[1]));
    // Read holds: a client's key (48 bits of it) and its slot make the slot.
    out.push_back("INSERT INTO " + quoted(into) + " " + hold_columns +
                  ") SELECT 4, r.rw_name, ((r.client_key & 281474976710655) << 16) | (r.slot & 65535),"
                  " COALESCE(r.hold_id, 0), COALESCE(r.thread_id, 0), COALESCE(r.machine_id, ''),"
                  " COALESCE(r.holder_host, ''), COALESCE(r.holder_pid, 0), COALESCE(r.acquired_at, " + long_ago +
                  "), IF(" + held("r.") + ", r.expire_time, " + long_ago + "), IF(" + held("r.") +
                  ", r.state, 0), r.watchdog, r.fence FROM " + quoted(tables[2]) + " r");
  }
  return out;
}

std::string Schema::migrate(Connection& c) const {
  const int found = found_version(c);
  if (found == kVersion) return "lock table " + table_ + " is ready (" + describe(kVersion) + ")";
  if (found > kVersion) {
    throw BackendError("dlock: lock table " + table_ + " has " + describe(found) + ", newer than this dlock's " +
                           describe(kVersion) + "; upgrade dlock",
                       0, "");
  }
  if (found == 0) {
    run_statement(c, logger_, "creating the lock table", [&] {
      c.execute_plain(create_sql());
      return 0;
    });
    return "lock table " + table_ + " created (" + describe(kVersion) + ")";
  }
  // Built beside the old tables under a name of its own, filled, then put in
  // the old lock table's place in one RENAME.
  const std::string into = "dlock_migrating_" + std::to_string(std::hash<std::string>{}(table_) % 1000000000);
  const std::string retired = "dlock_retired_" + std::to_string(std::hash<std::string>{}(table_) % 1000000000);
  const auto statements = migration_sql(c, found, into);
  const auto old = old_tables(table_);
  std::size_t moved = 0;
  run_statement(c, logger_, "migrating the lock tables", [&] {
    c.execute_plain("DROP TABLE IF EXISTS " + quoted(into));
    c.execute_plain(create_sql_for(into));
    return 0;
  });
  for (const auto& sql : statements) {
    moved += static_cast<std::size_t>(run_statement(c, logger_, "migrating the lock tables", [&] {
      auto& ps = c.prepared(sql);
      return ps.executeUpdate();
    }));
  }
  run_statement(c, logger_, "migrating the lock tables", [&] {
    c.execute_plain("DROP TABLE IF EXISTS " + quoted(retired));
    c.execute_plain("RENAME TABLE " + quoted(table_) + " TO " + quoted(retired) + ", " + quoted(into) + " TO " +
                    quoted(table_));
    c.execute_plain("DROP TABLE " + quoted(retired));
    // An old client finds a view where its semaphore or read-write lock
    // table was: every statement it sends fails, rather than working on
    // rows no new client reads.
    for (const auto& name : old) {
      const TableInfo info = table_info(c, name);
      if (info.exists && !info.view) c.execute_plain("DROP TABLE " + quoted(name));
      if (!info.exists || !info.view) {
        c.execute_plain("CREATE VIEW " + quoted(name) + " AS SELECT 'dlock 0.3 moved these rows into " + table_ +
                        " (schema 3): upgrade this client' AS moved");
      }
    }
    return 0;
  });
  if (logger_) logger_->info("dlock: migrated lock table {} from {} ({} rows)", table_, describe(found), moved);
  return "lock table " + table_ + " migrated from " + describe(found) + " to " + describe(kVersion) + " (" +
         std::to_string(moved) + " rows)";
}

}  // namespace dlock::details
