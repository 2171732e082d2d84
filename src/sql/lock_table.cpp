#include "sql/lock_table.hpp"

#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>

#include <algorithm>
#include <memory>
#include <random>
#include <set>

#include "sql/statement.hpp"

namespace dlock::details {

static_assert(LockTable::kChunk == kInListChunk);

template <class Body>
auto LockTable::run(Connection& c, const char* what, Body&& body) const {
  return run_statement(c, logger_, what, std::forward<Body>(body));
}

namespace {

// Row columns in the order every SELECT below lists them. A freed row
// keeps its last hold's columns (see the release statements); they are
// read as NULL (watchdog 0) once is_locked = 0, so a LockRow tells no
// hold, live or expired, that has been released.
const char* const kRowColumns =
    "lock_name, IF(is_locked = 1, machine_id, NULL), IF(is_locked = 1, thread_id, NULL), state,"
    " (is_locked = 1 AND expire_time > NOW(6)), fence,"
    " IF(is_locked = 1, TIMESTAMPDIFF(MICROSECOND, NOW(6), expire_time), NULL), is_locked = 1 AND watchdog = 1,"
    " IF(is_locked = 1, hold_id, NULL), IF(is_locked = 1, holder_host, NULL), IF(is_locked = 1, holder_pid, NULL),"
    " IF(is_locked = 1, DATE_FORMAT(acquired_at, '%Y-%m-%dT%H:%i:%s.%f'), NULL),"
    " IF(is_locked = 1, TIMESTAMPDIFF(MICROSECOND, acquired_at, NOW(6)), NULL)";

}  // namespace

LockRow to_lock_row(sql::ResultSet& rs, int first) {
  const auto col = [first](int i) { return static_cast<std::uint32_t>(first + i - 1); };
  LockRow row;
  row.exists = true;
  row.name = rs.getString(col(1));
  row.machine = rs.isNull(col(2)) ? std::string() : std::string(rs.getString(col(2)));
  row.thread = rs.isNull(col(3)) ? 0 : rs.getUInt64(col(3));
  row.state = rs.getUInt(col(4));
  row.held = !rs.isNull(col(5)) && rs.getInt(col(5)) == 1;
  row.fence = rs.getUInt64(col(6));
  if (!rs.isNull(col(7))) row.ttl_us = rs.getInt64(col(7));
  row.watchdog = rs.getInt(col(8)) == 1;
  row.hold_id = rs.isNull(col(9)) ? 0 : rs.getUInt64(col(9));
  if (row.held) {
    row.host = rs.isNull(col(10)) ? std::string() : std::string(rs.getString(col(10)));
    row.pid = rs.isNull(col(11)) ? 0 : rs.getUInt(col(11));
    row.acquired_at = rs.isNull(col(12)) ? std::string() : std::string(rs.getString(col(12)));
    if (!rs.isNull(col(13))) row.held_for_us = rs.getInt64(col(13));
  }
  return row;
}

LockTable::LockTable(std::string table, std::shared_ptr<spdlog::logger> logger)
    : table_(std::move(table)), logger_(std::move(logger)), quoted_("`" + table_ + "`") {
  // A row is free for the taking when unlocked or expired. The third case is
  // this very statement's own earlier run (same fresh hold id), met only when
  // a statement whose outcome was unknown is run again: a fresh hold id
  // matches no live row, so no live hold is ever taken over.
  const std::string takeable = "(is_locked = 0 OR expire_time <= NOW(6) OR hold_id <=> ?)";
  const std::string mine = "(hold_id <=> ?)";
  // ON DUPLICATE KEY UPDATE assigns left to right and later expressions see
  // earlier assignments. So every column the `takeable` test reads
  // (is_locked, expire_time, hold_id) is assigned after its last use; once
  // hold_id is assigned, "the hold id is ours" is the outcome, and the
  // columns after it follow it. A refused attempt changes no column, so the
  // server reports 0 affected rows; 1 = inserted, 2 = taken.
  // Every take records the taking session's bell and clears the waiters
  // mark (doorbell.hpp, "Session bells"): plain values, no user-lock call.
  acquire_sql_ = "INSERT INTO " + quoted_ +
                 " (lock_name, machine_id, thread_id, hold_id, holder_host, holder_pid, acquired_at, state, is_locked,"
                 " watchdog, expire_time, fence, bell, waiters)"
                 " VALUES (?, ?, ?, ?, ?, ?, NOW(6), ?, 1, ?, NOW(6) + INTERVAL ? MICROSECOND, 1, ?, 0)"
                 " ON DUPLICATE KEY UPDATE"
                 " fence = IF(" + takeable + ", fence + 1, fence),"
                 " state = IF(" + takeable + ", ?, state),"
                 " watchdog = IF(" + takeable + ", ?, watchdog),"
                 " thread_id = IF(" + takeable + ", ?, thread_id),"
                 " machine_id = IF(" + takeable + ", ?, machine_id),"
                 " holder_host = IF(" + takeable + ", ?, holder_host),"
                 " holder_pid = IF(" + takeable + ", ?, holder_pid),"
                 " acquired_at = IF(" + takeable + ", NOW(6), acquired_at),"
                 " hold_id = IF(" + takeable + ", ?, hold_id),"
                 " bell = IF(" + mine + ", ?, bell),"
                 " waiters = IF(" + mine + ", 0, waiters),"
                 " expire_time = IF(" + mine + ", NOW(6) + INTERVAL ? MICROSECOND, expire_time),"
                 " is_locked = IF(" + mine + ", 1, is_locked)";
  take_sql_ = "UPDATE " + quoted_ +
              " SET fence = fence + 1, state = ?, watchdog = ?, machine_id = ?, thread_id = ?, hold_id = ?,"
              " holder_host = ?, holder_pid = ?, acquired_at = NOW(6), is_locked = 1, bell = ?, waiters = 0,"
              " expire_time = NOW(6) + INTERVAL ? MICROSECOND WHERE lock_name = ? AND " + takeable;
  const std::string live = "is_locked = 1 AND expire_time > NOW(6)";
  const std::string live_hold = " WHERE lock_name = ? AND hold_id = ? AND " + live;
  reacquire_sql_ = "UPDATE " + quoted_ + " SET state = ?, watchdog = ?, expire_time = NOW(6) + INTERVAL ? MICROSECOND" +
                   live_hold;
  release_sql_ = "UPDATE " + quoted_ + " SET state = ?" + live_hold;
  // The fence is assigned before hold_id, so its IF still sees the hold the
  // row had: a re-run that finds its own earlier run applied adds nothing.
  // The bell and the waiters mark stay: the new hold is rung from the same
  // session, and its release rings for the waiters who marked the row.
  hand_over_sql_ = "UPDATE " + quoted_ +
                   " SET fence = IF(hold_id = ?, fence, fence + 1), state = 1, watchdog = ?, thread_id = ?,"
                   " hold_id = ?, acquired_at = NOW(6), expire_time = NOW(6) + INTERVAL ? MICROSECOND"
                   " WHERE lock_name = ? AND hold_id IN (?, ?) AND " + live;
  // Freeing a row sets is_locked = 0 and leaves the last hold's columns
  // (holder, hold id, expiry, bell) as they are: every statement and read
  // that cares about a hold asks for is_locked = 1 and an unexpired lease
  // (`live`), and a fresh take overwrites them all. Why not NULL them:
  // InnoDB updates a record in place only when no column changes its
  // length, and a NULL has none. A release that NULLed the holder's
  // columns and the take that filled them again each rewrote the whole
  // record: 40 % more redo per statement than a take and release that
  // write the same lengths, and more of the server's CPU per commit, the
  // bottleneck of many threads on distinct names.
  const std::string cleared = "state = 0, waiters = 0";
  free_row_sql_ = "UPDATE " + quoted_ + " SET is_locked = 0, " + cleared + live_hold;
  free_unwaited_sql_ = free_row_sql_ + " AND waiters = 0";
  // The ring rides in the is_locked assignment ("0 *" keeps the value,
  // COALESCE keeps a NULL from reaching it), evaluated only when the row
  // matched: the session takes its next bell before it gives back the one
  // the waiters block on, so it is never without one. The bell is given
  // back while the statement still holds the row lock: a woken waiter's
  // attempt waits for that lock and then reads the freed row.
  // GET_LOCK nests, and on Galera a statement that failed certification
  // at commit is run again after its user-lock calls took effect: the next
  // bell is taken only if this session does not hold it yet, so a re-run
  // cannot leave it held twice (and then never rung by one RELEASE_LOCK).
  free_ringing_sql_ = "UPDATE " + quoted_ +
                      " SET is_locked = 0 * COALESCE(IF(IS_USED_LOCK(?) <=> CONNECTION_ID(), 1, GET_LOCK(?, 0)) +"
                      " RELEASE_LOCK(?), 0), " + cleared + live_hold;
  free_ringing_marked_sql_ = free_ringing_sql_ + " AND waiters = 1";
  restamp_sql_ = "UPDATE " + quoted_ + " SET bell = ? WHERE lock_name = ? AND hold_id = ? AND bell = ?";
  // Marks the live hold that records the bell the waiter will wait on.
  // Matched by the bell, not the hold id: a local handoff makes a new hold
  // but keeps the bell (and the mark), so on a hot lock, where the hold id
  // changes every commit, the mark still lands and the release that ends
  // the chain rings. A row without a bell (fast wake-up off, an older
  // client) matches nothing: it never pays for a ring nobody hears.
  mark_sql_ = "UPDATE " + quoted_ + " SET waiters = 1 WHERE lock_name = ? AND bell = ? AND " + live;
  // What a waiter needs to know before it marks and waits.
  watched_sql_ = "SELECT " + live + ", hold_id, waiters, bell FROM " + quoted_ + " WHERE lock_name = ?";
  read_sql_ = std::string("SELECT ") + kRowColumns + " FROM " + quoted_ + " WHERE lock_name = ?";
  free_sql_ = "SELECT lock_name FROM " + quoted_ + " WHERE (is_locked = 0 OR expire_time <= NOW(6)) AND lock_name IN (";
  force_sql_ = "UPDATE " + quoted_ + " SET is_locked = 0, " + cleared +
               " WHERE lock_name = ? AND is_locked = 1 AND expire_time > NOW(6)";
  release_all_sql_ = "UPDATE " + quoted_ + " SET is_locked = 0, " + cleared + " WHERE is_locked = 1 AND lock_name IN (";
}

std::string LockTable::create_table_sql() const {
  return "CREATE TABLE IF NOT EXISTS " + quoted_ +
         " (\n"
         "  lock_name    VARBINARY(255)  NOT NULL COMMENT 'lock name; bytes, compared exactly',\n"
         "  machine_id   VARBINARY(64)   NULL     COMMENT 'label of the holding client (Options::machine_id)',\n"
         "  thread_id    BIGINT UNSIGNED NULL     COMMENT 'holding owner within that client',\n"
         "  hold_id      BIGINT UNSIGNED NULL     COMMENT 'random id of the current or last hold (is_locked says which)',\n"
         "  holder_host  VARBINARY(255)  NULL     COMMENT 'host name of the holding client',\n"
         "  holder_pid   INT UNSIGNED    NULL     COMMENT 'process id of the holding client',\n"
         "  acquired_at  DATETIME(6)     NULL     COMMENT 'server clock (UTC): when the hold was taken',\n"
         "  state        INT UNSIGNED    NOT NULL DEFAULT 0 COMMENT 'hold count (reentrancy)',\n"
         "  is_locked    TINYINT(1)      NOT NULL DEFAULT 0,\n"
         "  watchdog     TINYINT(1)      NOT NULL DEFAULT 0 COMMENT '1: the holder renews the lease',\n"
         "  expire_time  DATETIME(6)     NULL     COMMENT 'server clock (UTC); the hold is void from then',\n"
         "  fence        BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'fencing token of the current or last hold',\n"
         "  bell         VARBINARY(64)   NULL     COMMENT 'user-level lock of the holding session (fast wake-up)',\n"
         "  waiters      TINYINT(1)      NOT NULL DEFAULT 0 COMMENT '1: a waiter elsewhere waits for the bell',\n"
         "  gmt_create   DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),\n"
         "  gmt_modified DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),\n"
         "  PRIMARY KEY (lock_name)\n"
         ") ENGINE=InnoDB COMMENT='dlock: one row per lock name, never deleted'";
}

namespace {

struct AddedColumn {
  const char* name;
  const char* definition;
};
// Columns added since 0.1.0, in the order they follow each other.
const AddedColumn kAddedColumns[] = {
    {"hold_id", "BIGINT UNSIGNED NULL COMMENT 'random id of the current or last hold (is_locked says which)' AFTER thread_id"},
    {"holder_host", "VARBINARY(255) NULL COMMENT 'host name of the holding client' AFTER hold_id"},
    {"holder_pid", "INT UNSIGNED NULL COMMENT 'process id of the holding client' AFTER holder_host"},
    {"acquired_at", "DATETIME(6) NULL COMMENT 'server clock (UTC): when the hold was taken' AFTER holder_pid"},
    {"bell", "VARBINARY(64) NULL COMMENT 'user-level lock of the holding session (fast wake-up)' AFTER fence"},
    {"waiters", "TINYINT(1) NOT NULL DEFAULT 0 COMMENT '1: a waiter elsewhere waits for the bell' AFTER bell"},
};

// nullopt: no such table. Otherwise the added columns it lacks.
std::optional<std::vector<std::string>> missing_columns(Connection& c, const std::string& table) {
  auto& ps = c.prepared(
      "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?");
  ps.setString(1, table);
  std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
  std::set<std::string> present;
  while (rs->next()) present.insert(rs->getString(1));
  if (present.empty()) return std::nullopt;
  std::vector<std::string> missing;
  for (const auto& column : kAddedColumns)
    if (present.count(column.name) == 0) missing.emplace_back(column.name);
  return missing;
}

}  // namespace

const std::vector<std::string>& LockTable::added_columns() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& column : kAddedColumns) n.emplace_back(column.name);
    return n;
  }();
  return names;
}

std::string LockTable::upgrade_sql(const std::vector<std::string>& missing) const {
  // One ALTER with only what is missing (MySQL 8 has no ADD COLUMN IF NOT
  // EXISTS). Rows of an older table are all taken as free or expired by
  // their next acquire, which fills the new columns in.
  std::string sql = "ALTER TABLE " + quoted_;
  const char* separator = " ";
  for (const auto& column : kAddedColumns) {
    if (std::find(missing.begin(), missing.end(), column.name) == missing.end()) continue;
    sql += separator + std::string("ADD COLUMN ") + column.name + " " + column.definition;
    separator = ", ";
  }
  return sql;
}

void LockTable::create_table(Connection& c) const {
  run(c, "creating the lock table", [&] {
    c.execute_plain(create_table_sql());
    const auto missing = missing_columns(c, table_);
    if (missing && !missing->empty()) {
      if (logger_) logger_->info("dlock: upgrading lock table {} (adding {} column(s))", table_, missing->size());
      c.execute_plain(upgrade_sql(*missing));
    }
    return 0;
  });
}

void LockTable::check_schema(Connection& c) const {
  const auto missing = run(c, "checking the lock table", [&] { return missing_columns(c, table_); });
  if (!missing) {
    throw BackendError("dlock: lock table " + table_ + " does not exist; create it with `dlock init` (or let the "
                           "client create it: Options::create_table)",
                       1146, "42S02");
  }
  if (!missing->empty()) {
    throw BackendError("dlock: lock table " + table_ + " was created by an earlier dlock version (it lacks " +
                           missing->front() + "); upgrade it with `dlock init` (or let the client do it: "
                           "Options::create_table)",
                       1054, "42S22");
  }
}

AcquireResult LockTable::acquire(Connection& c, std::string_view name, const Holder& holder, unsigned state,
                                 std::int64_t lease_us, bool watchdog, const std::string* bell) const {
  const auto affected = run(c, "acquiring a lock", [&] {
    auto& ps = c.prepared(acquire_sql_);
    Binder b(ps);
    b.text(name).text(holder.label).u64(holder.owner).u64(holder.hold_id).text(holder.host).u64(holder.pid);
    b.u64(state).flag(watchdog).i64(lease_us).text_or_null(bell);
    b.u64(holder.hold_id);                          // fence
    b.u64(holder.hold_id).u64(state);               // state
    b.u64(holder.hold_id).flag(watchdog);           // watchdog
    b.u64(holder.hold_id).u64(holder.owner);        // thread_id
    b.u64(holder.hold_id).text(holder.label);       // machine_id
    b.u64(holder.hold_id).text(holder.host);        // holder_host
    b.u64(holder.hold_id).u64(holder.pid);          // holder_pid
    b.u64(holder.hold_id);                          // acquired_at
    b.u64(holder.hold_id).u64(holder.hold_id);      // hold_id
    b.u64(holder.hold_id).text_or_null(bell);       // bell
    b.u64(holder.hold_id);                          // waiters
    b.u64(holder.hold_id).i64(lease_us);            // expire_time
    b.u64(holder.hold_id);                          // is_locked
    return execute_update(ps);
  });
  if (affected == 1) return AcquireResult::kInserted;
  if (affected == 2) return AcquireResult::kTaken;
  return AcquireResult::kRefused;
}

bool LockTable::take(Connection& c, std::string_view name, const Holder& holder, unsigned state,
                     std::int64_t lease_us, bool watchdog, const std::string* bell) const {
  return run(c, "acquiring a lock", [&] {
           auto& ps = c.prepared(take_sql_);
           Binder b(ps);
           b.u64(state).flag(watchdog).text(holder.label).u64(holder.owner).u64(holder.hold_id);
           b.text(holder.host).u64(holder.pid).text_or_null(bell);
           b.i64(lease_us).text(name).u64(holder.hold_id);
           return execute_update(ps);
         }) > 0;
}

bool LockTable::reacquire(Connection& c, std::string_view name, std::uint64_t hold_id, unsigned state,
                          std::int64_t lease_us, bool watchdog) const {
  return run(c, "re-acquiring a held lock", [&] {
           auto& ps = c.prepared(reacquire_sql_);
           Binder(ps).u64(state).flag(watchdog).i64(lease_us).text(name).u64(hold_id);
           return execute_update(ps);
         }) > 0;
}

bool LockTable::release(Connection& c, std::string_view name, std::uint64_t hold_id, unsigned state) const {
  return run(c, "releasing a lock", [&] {
           auto& ps = c.prepared(state == 0 ? free_row_sql_ : release_sql_);
           Binder b(ps);
           if (state != 0) b.u64(state);
           b.text(name).u64(hold_id);
           return execute_update(ps);
         }) > 0;
}

bool LockTable::release_unwaited(Connection& c, std::string_view name, std::uint64_t hold_id) const {
  return run(c, "releasing a lock", [&] {
           auto& ps = c.prepared(free_unwaited_sql_);
           Binder(ps).text(name).u64(hold_id);
           return execute_update(ps);
         }) > 0;
}

bool LockTable::release_ringing(Connection& c, std::string_view name, std::uint64_t hold_id,
                                bool only_marked) const {
  const std::string next = c.bell.next();
  bool freed = false;
  try {
    freed = run(c, "releasing a lock", [&] {
              auto& ps = c.prepared(only_marked ? free_ringing_marked_sql_ : free_ringing_sql_);
              Binder(ps).text(next).text(next).text(c.bell.current()).text(name).u64(hold_id);
              return execute_update(ps);
            }) > 0;
  } catch (const BackendError&) {
    // Which bell the session holds is unknown now (user-level locks are not
    // transactional): closing it gives back whatever it holds, which wakes
    // the waiters, and the next session starts with a bell of its own.
    c.mark_broken();
    throw;
  }
  // A statement that matched no row evaluated neither call.
  if (freed) c.bell.advanced();
  return freed;
}

void LockTable::ring(Connection& c) const {
  if (c.bell.current().empty()) return;
  const std::string next = c.bell.next();
  bool took = false;
  try {
    took = run(c, "ringing a session bell", [&] {
      auto& ps = c.prepared("SELECT GET_LOCK(?, 0), RELEASE_LOCK(?)");
      Binder(ps).text(next).text(c.bell.current());
      std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
      return rs->next() && !rs->isNull(1) && rs->getInt(1) == 1;
    });
  } catch (const BackendError&) {
    c.mark_broken();  // as in release_ringing
    throw;
  }
  if (took) {
    c.bell.advanced();
  } else {
    c.bell.lost();
  }
}

std::size_t LockTable::restamp(Connection& c, const std::vector<NamedHold>& holds, const std::string& from,
                               const std::string* to) const {
  std::size_t moved = 0;
  for (const auto& hold : holds) {
    moved += static_cast<std::size_t>(run(c, "re-stamping a session bell", [&] {
      auto& ps = c.prepared(restamp_sql_);
      Binder(ps).text_or_null(to).text(hold.name).u64(hold.hold_id).text(from);
      return execute_update(ps);
    }));
  }
  return moved;
}

bool LockTable::hand_over(Connection& c, std::string_view name, std::uint64_t from, std::uint64_t to,
                          std::uint64_t owner, std::int64_t lease_us, bool watchdog) const {
  return run(c, "handing a lock over", [&] {
           auto& ps = c.prepared(hand_over_sql_);
           Binder(ps).u64(to).flag(watchdog).u64(owner).u64(to).i64(lease_us).text(name).u64(from).u64(to);
           return execute_update(ps);
         }) > 0;
}

const std::string* LockTable::session_bell(Connection& c) const {
  if (!c.bell.tried()) {
    thread_local std::mt19937_64 random(std::random_device{}());
    std::string prefix = SessionBell::prefix_for(random());
    bool ok = false;
    try {
      ok = take_doorbell(c, prefix + "0");
    } catch (const OutcomeUnknown&) {
      throw;
    } catch (const BackendError& e) {
      // Not worth failing a lock for: its waiters elsewhere poll instead.
      if (logger_) logger_->info("dlock: could not take a session bell: {}", e.what());
    }
    c.bell.taken(std::move(prefix), ok);
  }
  return c.bell.current().empty() ? nullptr : &c.bell.current();
}

bool LockTable::take_doorbell(Connection& c, const std::string& doorbell) const {
  return run(c, "taking a doorbell", [&] {
    auto& ps = c.prepared("SELECT GET_LOCK(?, 0)");
    Binder(ps).text(doorbell);
    std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
    return rs->next() && !rs->isNull(1) && rs->getInt(1) == 1;
  });
}

void LockTable::drop_doorbell(Connection& c, const std::string& doorbell) const {
  run(c, "giving back a doorbell", [&] {
    auto& ps = c.prepared("SELECT RELEASE_LOCK(?)");
    Binder(ps).text(doorbell);
    std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
    return 0;
  });
}

LockTable::Ring LockTable::wait_for_doorbell(Connection& c, const std::string& doorbell, int wait_seconds) const {
  // IS_FREE_LOCK first: a free doorbell means the holder has none (or it was
  // just given back), and GET_LOCK would "ring" at once on every retry.
  // Select-list items are evaluated left to right, so RELEASE_LOCK gives back
  // what GET_LOCK just took (and is a no-op otherwise).
  try {
    return run(c, "waiting on a doorbell", [&] {
      auto& ps = c.prepared(std::string(kDoorbellWaitPrefix) + "?) = 1, 2, GET_LOCK(?, ?)), RELEASE_LOCK(?)");
      Binder(ps).text(doorbell).text(doorbell).i64(wait_seconds).text(doorbell);
      std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
      // MariaDB answers a KILL QUERY of GET_LOCK with NULL.
      if (!rs->next() || rs->isNull(1)) return Ring::kInterrupted;
      switch (rs->getInt(1)) {
        case 1:
          return Ring::kRung;
        case 2:
          return Ring::kNoDoorbell;
        default:
          return Ring::kTimedOut;
      }
    });
  } catch (const BackendError& e) {
    // MySQL answers it with ER_QUERY_INTERRUPTED.
    if (e.code() == mysql_error::kQueryInterrupted) return Ring::kInterrupted;
    throw;
  }
}

LockTable::Watched LockTable::watched(Connection& c, std::string_view name) const {
  return run(c, "reading a waited-for lock row", [&] {
    auto& ps = c.prepared(watched_sql_);
    Binder(ps).text(name);
    std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
    Watched w;
    if (!rs->next() || rs->isNull(1) || rs->getInt(1) != 1) return w;  // no live hold
    w.live = true;
    w.hold_id = rs->isNull(2) ? 0 : rs->getUInt64(2);
    w.marked = rs->getInt(3) == 1;
    if (!rs->isNull(4)) w.bell = rs->getString(4);
    return w;
  });
}

LockTable::Ring LockTable::wait_for_release(Connection& c, std::string_view name, int wait_seconds,
                                            const std::function<bool(std::uint64_t)>& ours) const {
  // Read, mark that very hold, then wait on the bell read, in statements of
  // their own: a statement that read the table while it blocked in
  // GET_LOCK would hold a read view open for the whole wait, and hold back
  // purge for seconds.
  const Watched seen = watched(c, name);
  // No live hold: try now. A hold of this client's own (taken since the
  // waiter looked): its release wakes the waiter here; a mark would only
  // make it ring for nobody.
  if (!seen.live || (ours && ours(seen.hold_id))) return Ring::kReleased;
  if (seen.bell.empty()) return Ring::kNoDoorbell;
  // Still a live hold on the bell read: the same hold, or one a local
  // handoff of the same client made from it (a handoff keeps the bell).
  const auto same_bell = [&](const Watched& now) { return now.live && now.bell == seen.bell; };
  if (!seen.marked) {
    const auto marked = run(c, "marking a lock row as waited for", [&] {
      auto& ps = c.prepared(mark_sql_);
      Binder(ps).text(name).text(seen.bell);
      return execute_update(ps);
    });
    // 0: the hold ended or moved to its session's next bell (or another
    // waiter marked it just now: then it still records the bell, marked).
    if (marked == 0) {
      const Watched now = watched(c, name);
      if (!same_bell(now) || !now.marked) return Ring::kReleased;
    }
  }
  const Ring ring = wait_for_doorbell(c, seen.bell, wait_seconds);
  if (ring != Ring::kNoDoorbell) return ring;
  // Free: rung between the read and the wait (the hold ended, or its row
  // moved to its session's next bell), or its session is gone.
  return same_bell(watched(c, name)) ? Ring::kNoDoorbell : Ring::kReleased;
}

namespace {

// Binds the names of `holds[first, first + count)`, then their hold ids,
// each padded to `bucket` by repeating the last one.
void bind_holds(Binder& b, const std::vector<NamedHold>& holds, std::size_t first, std::size_t count,
                std::size_t bucket) {
  for (std::size_t i = 0; i < bucket; ++i) b.text(holds[first + std::min(i, count - 1)].name);
  for (std::size_t i = 0; i < bucket; ++i) b.u64(holds[first + std::min(i, count - 1)].hold_id);
}

template <class Each>
void for_each_hold_chunk(const std::vector<NamedHold>& holds, Each&& each) {
  for (std::size_t first = 0; first < holds.size(); first += kInListChunk) {
    const std::size_t count = std::min(kInListChunk, holds.size() - first);
    each(first, count, in_list_bucket(count));
  }
}

}  // namespace

// Hold ids are random 64-bit values, so matching names and ids as two
// independent lists cannot pair one hold's name with another's id.
std::string LockTable::renew_sql(std::size_t bucket) const {
  return "UPDATE " + quoted_ +
         " SET expire_time = NOW(6) + INTERVAL ? MICROSECOND"
         " WHERE is_locked = 1 AND watchdog = 1 AND expire_time > NOW(6) AND lock_name IN (" +
         placeholders(bucket) + ") AND hold_id IN (" + placeholders(bucket) + ")";
}

std::size_t LockTable::renew(Connection& c, const std::vector<NamedHold>& holds, std::int64_t lease_us) const {
  std::size_t renewed = 0;
  for_each_hold_chunk(holds, [&](std::size_t first, std::size_t count, std::size_t bucket) {
    renewed += static_cast<std::size_t>(run(c, "renewing leases", [&] {
      auto& ps = c.prepared(renew_sql(bucket));
      Binder b(ps);
      b.i64(lease_us);
      bind_holds(b, holds, first, count, bucket);
      return execute_update(ps);
    }));
  });
  return renewed;
}

std::size_t LockTable::renew_skipping_locked(Connection& c, const std::vector<NamedHold>& holds,
                                             std::int64_t lease_us) const {
  std::size_t renewed = 0;
  for_each_hold_chunk(holds, [&](std::size_t first, std::size_t count, std::size_t bucket) {
    renewed += static_cast<std::size_t>(run(c, "renewing leases around locked rows", [&] {
      c.execute_plain("START TRANSACTION");
      try {
        std::vector<NamedHold> unlocked;
        {
          auto& ps = c.prepared("SELECT lock_name, hold_id FROM " + quoted_ +
                                " WHERE is_locked = 1 AND watchdog = 1 AND lock_name IN (" + placeholders(bucket) +
                                ") AND hold_id IN (" + placeholders(bucket) + ") FOR UPDATE SKIP LOCKED");
          Binder b(ps);
          bind_holds(b, holds, first, count, bucket);
          std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
          while (rs->next()) unlocked.push_back(NamedHold{rs->getString(1), rs->getUInt64(2)});
        }
        std::int64_t n = 0;
        if (!unlocked.empty()) {
          const std::size_t b2 = in_list_bucket(unlocked.size());
          auto& ps = c.prepared(renew_sql(b2));
          Binder b(ps);
          b.i64(lease_us);
          bind_holds(b, unlocked, 0, unlocked.size(), b2);
          n = execute_update(ps);
        }
        c.execute_plain("COMMIT");
        return n;
      } catch (...) {
        try {
          c.execute_plain("ROLLBACK");
        } catch (const sql::SQLException&) {
          c.mark_broken();
        }
        throw;
      }
    }));
  });
  return renewed;
}

std::vector<std::string> LockTable::free_among(Connection& c, const std::vector<std::string>& names) const {
  std::vector<std::string> free;
  for_each_chunk(names, [&](std::size_t first, std::size_t count, std::size_t bucket) {
    run(c, "polling waited-for locks", [&] {
      auto& ps = c.prepared(free_sql_ + placeholders(bucket) + ")");
      Binder b(ps);
      bind_texts(b, names, first, count, bucket);
      std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
      while (rs->next()) free.emplace_back(rs->getString(1));
      return 0;
    });
  });
  return free;
}

LockRow LockTable::read(Connection& c, std::string_view name) const {
  return run(c, "reading a lock row", [&] {
    auto& ps = c.prepared(read_sql_);
    Binder(ps).text(name);
    std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
    if (rs->next()) return to_lock_row(*rs);
    LockRow none;
    none.name = std::string(name);
    return none;
  });
}

std::vector<LockRow> LockTable::read_many(Connection& c, const std::vector<std::string>& names) const {
  std::vector<LockRow> rows;
  for_each_chunk(names, [&](std::size_t first, std::size_t count, std::size_t bucket) {
    run(c, "reading lock rows", [&] {
      auto& ps = c.prepared(std::string("SELECT ") + kRowColumns + " FROM " + quoted_ + " WHERE lock_name IN (" +
                            placeholders(bucket) + ")");
      Binder b(ps);
      bind_texts(b, names, first, count, bucket);
      std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
      while (rs->next()) rows.push_back(to_lock_row(*rs));
      return 0;
    });
  });
  return rows;
}

std::vector<LockRow> LockTable::read_held(Connection& c) const {
  return run(c, "listing held locks", [&] {
    auto& ps = c.prepared(std::string("SELECT ") + kRowColumns + " FROM " + quoted_ +
                          " WHERE is_locked = 1 AND expire_time > NOW(6) ORDER BY lock_name");
    std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
    std::vector<LockRow> rows;
    while (rs->next()) rows.push_back(to_lock_row(*rs));
    return rows;
  });
}

bool LockTable::force_release(Connection& c, std::string_view name) const {
  return run(c, "force-unlocking", [&] {
           auto& ps = c.prepared(force_sql_);
           Binder(ps).text(name);
           return execute_update(ps);
         }) > 0;
}

std::size_t LockTable::release_all(Connection& c, const std::vector<NamedHold>& holds) const {
  std::size_t released = 0;
  for_each_hold_chunk(holds, [&](std::size_t first, std::size_t count, std::size_t bucket) {
    released += static_cast<std::size_t>(run(c, "releasing this client's holds", [&] {
      auto& ps = c.prepared(release_all_sql_ + placeholders(bucket) + ") AND hold_id IN (" + placeholders(bucket) + ")");
      Binder b(ps);
      bind_holds(b, holds, first, count, bucket);
      return execute_update(ps);
    }));
  });
  return released;
}

}  // namespace dlock::details
