#include "sql/rw_table.hpp"

#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>

#include <stdexcept>

#include "sql/statement.hpp"

namespace dlock::details {

namespace {

// The head row's write side and read state, as RwHead reads them: the 13
// columns of to_lock_row, then reads counted, read lease left, intent live,
// intent id, intent lease left.
const char* const kHeadColumns =
    "h.rw_name, h.machine_id, h.thread_id, h.state, (h.hold_id IS NOT NULL AND h.expire_time > NOW(6)), h.fence,"
    " TIMESTAMPDIFF(MICROSECOND, NOW(6), h.expire_time), h.watchdog, h.hold_id, h.holder_host, h.holder_pid,"
    " DATE_FORMAT(h.acquired_at, '%Y-%m-%dT%H:%i:%s.%f'), TIMESTAMPDIFF(MICROSECOND, h.acquired_at, NOW(6)),"
    " (h.readers > 0 AND h.read_expire > NOW(6)), TIMESTAMPDIFF(MICROSECOND, NOW(6), h.read_expire),"
    " (h.intent_id IS NOT NULL AND h.intent_expire > NOW(6)), h.intent_id,"
    " TIMESTAMPDIFF(MICROSECOND, NOW(6), h.intent_expire)";
constexpr int kHeadColumnCount = 18;

// A reader slot row: the 13 columns of to_lock_row, then client_key, slot.
const char* const kReaderColumns =
    "r.rw_name, r.machine_id, r.thread_id, r.state, (r.hold_id IS NOT NULL AND r.expire_time > NOW(6)), r.fence,"
    " TIMESTAMPDIFF(MICROSECOND, NOW(6), r.expire_time), r.watchdog, r.hold_id, r.holder_host, r.holder_pid,"
    " DATE_FORMAT(r.acquired_at, '%Y-%m-%dT%H:%i:%s.%f'), TIMESTAMPDIFF(MICROSECOND, r.acquired_at, NOW(6)),"
    " r.client_key, r.slot";

// The holder columns of a row (head: the writer; slot: the reader),
// cleared. `p` is the table alias with its dot, or empty.
std::string cleared(const std::string& p) {
  return p + "watchdog = 0, " + p + "machine_id = NULL, " + p + "thread_id = NULL, " + p + "hold_id = NULL, " + p +
         "holder_host = NULL, " + p + "holder_pid = NULL, " + p + "acquired_at = NULL, " + p + "expire_time = NULL";
}

// A read lease raises read_expire, never lowers it.
const char* const kRaiseReadExpire =
    "h.read_expire = GREATEST(COALESCE(h.read_expire, NOW(6)), NOW(6) + INTERVAL ? MICROSECOND)";

RwHead to_head(sql::ResultSet& rs) {
  RwHead head;
  head.writer = to_lock_row(rs, 1);
  head.reads_counted = !rs.isNull(14) && rs.getInt(14) == 1;
  head.read_ttl_us = rs.isNull(15) ? 0 : rs.getInt64(15);
  head.intent = !rs.isNull(16) && rs.getInt(16) == 1;
  head.intent_id = rs.isNull(17) ? 0 : rs.getUInt64(17);
  head.intent_ttl_us = rs.isNull(18) ? 0 : rs.getInt64(18);
  return head;
}

ReaderRow to_reader(sql::ResultSet& rs) {
  ReaderRow row;
  row.hold = to_lock_row(rs, 1);
  row.slot.client_key = rs.getUInt64(14);
  row.slot.slot = rs.getUInt(15);
  return row;
}

}  // namespace

RwTable::RwTable(const std::string& lock_table, std::shared_ptr<spdlog::logger> logger)
    : logger_(std::move(logger)), head_(lock_table + "_rw"), readers_(lock_table + "_rwr") {
  if (!names_fit(lock_table)) {
    throw std::invalid_argument("dlock: read-write locks live in table " + readers_ +
                                ", longer than MySQL's 64 characters; use an Options::table of at most 60");
  }
  qh_ = "`" + head_ + "`";
  qr_ = "`" + readers_ + "`";
  // A write is taken only from no live write and no counted read. The count
  // is forgotten with it (it is 0, or every counted read has expired), and
  // the read epoch moves on, so a lost read found later is not subtracted
  // from a count that no longer has it. The taking client's own
  // waiting-writer mark goes with the take (its other writers, if any, mark
  // again when refused). The doorbell rides in the state assignment ("0 *"
  // keeps the value; COALESCE keeps a NULL out). Assigned left to right, as
  // single-table UPDATEs are: intent_expire sees the new intent_id.
  const auto take_write = [&](const std::string& state) {
    return "UPDATE " + qh_ + " SET fence = fence + 2, state = " + state +
           ", watchdog = ?, machine_id = ?, thread_id = ?, hold_id = ?, holder_host = ?, holder_pid = ?,"
           " acquired_at = NOW(6), expire_time = NOW(6) + INTERVAL ? MICROSECOND, readers = 0,"
           " read_epoch = read_epoch + 1, intent_id = IF(intent_id <=> ?, NULL, intent_id),"
           " intent_expire = IF(intent_id IS NULL, NULL, intent_expire)"
           " WHERE rw_name = ? AND (hold_id IS NULL OR expire_time <= NOW(6))"
           " AND (readers = 0 OR read_expire IS NULL OR read_expire <= NOW(6))";
  };
  take_write_sql_ = take_write("?");
  take_write_bell_sql_ = take_write("? + 0 * COALESCE(GET_LOCK(?, 0), 0)");
  const auto free_write = [&](const std::string& state) {
    return "UPDATE " + qh_ + " SET state = " + state + ", " + cleared("") +
           " WHERE rw_name = ? AND hold_id = ? AND expire_time > NOW(6)";
  };
  free_write_sql_ = free_write("0");
  free_write_bell_sql_ = free_write("0 * COALESCE(RELEASE_LOCK(?), 0)");
  // As take_write's, the count is forgotten with the write taken (it is 0,
  // or every counted read has expired), and the client's own
  // waiting-writer mark goes with it. The fence, count and epoch are
  // assigned before hold_id, so their IFs still see the hold the row had: a
  // re-run that finds its own earlier run applied changes none of them.
  hand_over_write_sql_ = "UPDATE " + qh_ +
                         " SET fence = IF(hold_id = ?, fence, fence + 2), readers = IF(hold_id = ?, readers, 0),"
                         " read_epoch = IF(hold_id = ?, read_epoch, read_epoch + 1), state = 1, watchdog = ?,"
                         " thread_id = ?, hold_id = ?, acquired_at = NOW(6),"
                         " expire_time = NOW(6) + INTERVAL ? MICROSECOND,"
                         " intent_id = IF(intent_id <=> ?, NULL, intent_id),"
                         " intent_expire = IF(intent_id IS NULL, NULL, intent_expire)"
                         " WHERE rw_name = ? AND hold_id IN (?, ?) AND expire_time > NOW(6)"
                         " AND (readers = 0 OR read_expire IS NULL OR read_expire <= NOW(6))";
  // A read is taken from a free (or expired) slot of this client while no
  // write and no writer's intent is live, or while the live write is the
  // same owner's (a downgrade, which no intent holds back). It is counted
  // in the epoch it was taken in. Once read_expire has passed, every read
  // counted has expired (a crashed client's, say): the count starts over at
  // 1 in a new epoch, so reads lost in the old one are never subtracted
  // from it. The head's assignments read read_expire before the last one
  // moves it (MySQL and MariaDB assign one table's columns in the order
  // written); r.epoch comes out the same whether the head's row was
  // assigned before it or not. Were an engine to assign read_expire first,
  // the count would only stay too high (writers wait for read_expire),
  // never too low.
  const auto take_read = [&](const std::string& state) {
    return "UPDATE " + qh_ + " h JOIN " + qr_ + " r ON r.rw_name = h.rw_name SET r.state = " + state +
           ", r.watchdog = ?, r.machine_id = ?, r.thread_id = ?, r.hold_id = ?, r.holder_host = ?,"
           " r.holder_pid = ?, r.acquired_at = NOW(6), r.expire_time = NOW(6) + INTERVAL ? MICROSECOND,"
           " r.fence = h.fence + 1, r.epoch = h.read_epoch + IF(h.read_expire > NOW(6), 0, 1),"
           " h.readers = IF(h.read_expire > NOW(6), h.readers, 0) + 1,"
           " h.read_epoch = h.read_epoch + IF(h.read_expire > NOW(6), 0, 1), " + kRaiseReadExpire +
           " WHERE h.rw_name = ? AND r.client_key = ? AND r.slot = ?"
           " AND (r.hold_id IS NULL OR r.expire_time <= NOW(6))"
           " AND (((h.hold_id IS NULL OR h.expire_time <= NOW(6))"
           " AND (h.intent_id IS NULL OR h.intent_expire <= NOW(6)))"
           " OR (h.hold_id = ? AND h.expire_time > NOW(6)))";
  };
  take_read_sql_ = take_read("?");
  take_read_bell_sql_ = take_read("? + 0 * COALESCE(GET_LOCK(?, 0), 0)");
  // Frees the slot and uncounts the read, if it was counted in the current
  // epoch (a write since then has forgotten the count already).
  const auto free_read = [&](const std::string& state) {
    return "UPDATE " + qh_ + " h JOIN " + qr_ + " r ON r.rw_name = h.rw_name SET r.state = " + state + ", " +
           cleared("r.") +
           ", h.readers = IF(h.readers > 0 AND r.epoch = h.read_epoch, h.readers - 1, h.readers)"
           " WHERE h.rw_name = ? AND r.client_key = ? AND r.slot = ? AND r.hold_id = ? AND r.expire_time > NOW(6)";
  };
  free_read_sql_ = free_read("0");
  free_read_bell_sql_ = free_read("0 * COALESCE(RELEASE_LOCK(?), 0)");
}

std::vector<std::string> RwTable::create_tables_sql() const {
  const std::string holder =
      "  machine_id    VARBINARY(64)   NULL     COMMENT 'label of the holding client (Options::machine_id)',\n"
      "  thread_id     BIGINT UNSIGNED NULL     COMMENT 'holding owner within that client',\n"
      "  hold_id       BIGINT UNSIGNED NULL     COMMENT 'random id of the current hold; NULL when free',\n"
      "  holder_host   VARBINARY(255)  NULL     COMMENT 'host name of the holding client',\n"
      "  holder_pid    INT UNSIGNED    NULL     COMMENT 'process id of the holding client',\n"
      "  acquired_at   DATETIME(6)     NULL     COMMENT 'server clock (UTC): when the hold was taken',\n"
      "  state         INT UNSIGNED    NOT NULL DEFAULT 0 COMMENT 'hold count (reentrancy)',\n"
      "  watchdog      TINYINT(1)      NOT NULL DEFAULT 0 COMMENT '1: the holder renews the lease',\n"
      "  expire_time   DATETIME(6)     NULL     COMMENT 'server clock (UTC); the hold is void from then',\n";
  const std::string stamps =
      "  gmt_create    DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),\n"
      "  gmt_modified  DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),\n";
  return {
      "CREATE TABLE IF NOT EXISTS " + qh_ +
          " (\n"
          "  rw_name       VARBINARY(255)  NOT NULL COMMENT 'read-write lock name; bytes, compared exactly',\n" +
          holder +
          "  fence         BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'last write token (even); reads get fence + 1',\n"
          "  readers       INT UNSIGNED    NOT NULL DEFAULT 0 COMMENT 'read holds counted (void once read_expire passed)',\n"
          "  read_expire   DATETIME(6)     NULL     COMMENT 'no counted read hold lasts past this',\n"
          "  read_epoch    BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'moves on with every write take',\n"
          "  intent_id     BIGINT UNSIGNED NULL     COMMENT 'a waiting writer''s client; new reads wait while live',\n"
          "  intent_expire DATETIME(6)     NULL,\n" +
          stamps +
          "  PRIMARY KEY (rw_name),\n"
          "  UNIQUE KEY uk_hold_id (hold_id)\n"
          ") ENGINE=InnoDB COMMENT='dlock: read-write locks, the write side and the read count; rows never deleted'",
      "CREATE TABLE IF NOT EXISTS " + qr_ +
          " (\n"
          "  rw_name       VARBINARY(255)  NOT NULL COMMENT 'read-write lock name',\n"
          "  client_key    BIGINT UNSIGNED NOT NULL COMMENT 'the client this slot row belongs to',\n"
          "  slot          INT UNSIGNED    NOT NULL COMMENT 'one row per read hold the client has at once',\n" +
          holder +
          "  fence         BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'read token of the current or last hold',\n"
          "  epoch         BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'the head''s read_epoch it was counted in',\n" +
          stamps +
          "  PRIMARY KEY (rw_name, client_key, slot),\n"
          "  UNIQUE KEY uk_hold_id (hold_id),\n"
          "  KEY ix_client_key (client_key)\n"
          ") ENGINE=InnoDB COMMENT='dlock: read holds of read-write locks, in slot rows each client reuses'"};
}

void RwTable::create_tables(Connection& c) const {
  for (const auto& sql : create_tables_sql()) {
    run_statement(c, logger_, "creating the read-write lock tables", [&] {
      c.execute_plain(sql);
      return 0;
    });
  }
}

void RwTable::check_schema(Connection& c) const {
  const auto count = run_statement(c, logger_, "checking the read-write lock tables", [&] {
    auto& ps = c.prepared(
        "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN (?, ?)");
    Binder(ps).text(head_).text(readers_);
    std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
    return rs->next() ? rs->getInt(1) : 0;
  });
  if (count != 2) {
    throw BackendError("dlock: read-write lock tables " + head_ + " and " + readers_ +
                           " do not both exist; create them with `dlock init` (or let the client create them: "
                           "Options::create_table)",
                       1146, "42S02");
  }
}

void RwTable::ensure_head(Connection& c, std::string_view name) const {
  run_statement(c, logger_, "making a read-write lock's row", [&] {
    auto& ps = c.prepared("INSERT INTO " + qh_ + " (rw_name) VALUES (?) ON DUPLICATE KEY UPDATE rw_name = rw_name");
    Binder(ps).text(name);
    return execute_update(ps);
  });
}

void RwTable::ensure_slot(Connection& c, std::string_view name, ReaderSlot slot) const {
  run_statement(c, logger_, "making a reader slot row", [&] {
    auto& ps = c.prepared("INSERT INTO " + qr_ +
                          " (rw_name, client_key, slot) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE slot = slot");
    Binder(ps).text(name).u64(slot.client_key).u64(slot.slot);
    return execute_update(ps);
  });
}

void RwTable::give_back(Connection& c, const std::string& doorbell) const {
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

// ---------------------------------------------------------------- write side

bool RwTable::take_write(Connection& c, std::string_view name, const Holder& holder, unsigned state,
                         std::int64_t lease_us, bool watchdog, std::uint64_t client_key,
                         const std::string* doorbell) const {
  return run_statement(
             c, logger_, "taking a write lock",
             [&] {
               auto& ps = c.prepared(doorbell != nullptr ? take_write_bell_sql_ : take_write_sql_);
               Binder b(ps);
               b.u64(state);
               if (doorbell != nullptr) b.text(*doorbell);
               b.flag(watchdog).text(holder.label).u64(holder.owner).u64(holder.hold_id).text(holder.host);
               b.u64(holder.pid).i64(lease_us).u64(client_key).text(name);
               return execute_update(ps);
             },
             [&] {
               if (doorbell != nullptr) give_back(c, *doorbell);
             }) == 1;
}

bool RwTable::retake_write(Connection& c, std::string_view name, std::uint64_t hold_id, unsigned state,
                           std::int64_t lease_us, bool watchdog) const {
  return run_statement(c, logger_, "re-entering a write lock", [&] {
           auto& ps = c.prepared("UPDATE " + qh_ +
                                 " SET state = ?, watchdog = ?, expire_time = NOW(6) + INTERVAL ? MICROSECOND"
                                 " WHERE rw_name = ? AND hold_id = ? AND expire_time > NOW(6)");
           Binder(ps).u64(state).flag(watchdog).i64(lease_us).text(name).u64(hold_id);
           return execute_update(ps);
         }) == 1;
}

bool RwTable::release_write(Connection& c, std::string_view name, std::uint64_t hold_id, unsigned state,
                            const std::string* doorbell) const {
  const bool released = run_statement(c, logger_, "releasing a write lock", [&] {
                          if (state > 0) {
                            auto& ps = c.prepared("UPDATE " + qh_ +
                                                  " SET state = ? WHERE rw_name = ? AND hold_id = ?"
                                                  " AND expire_time > NOW(6)");
                            Binder(ps).u64(state).text(name).u64(hold_id);
                            return execute_update(ps);
                          }
                          auto& ps = c.prepared(doorbell != nullptr ? free_write_bell_sql_ : free_write_sql_);
                          Binder b(ps);
                          if (doorbell != nullptr) b.text(*doorbell);
                          b.text(name).u64(hold_id);
                          return execute_update(ps);
                        }) == 1;
  // A lost hold's statement matched no row: its doorbell is still ours.
  if (!released && doorbell != nullptr) give_back(c, *doorbell);
  return released;
}

bool RwTable::hand_over_write(Connection& c, std::string_view name, std::uint64_t from, std::uint64_t to,
                              std::uint64_t owner, std::int64_t lease_us, bool watchdog,
                              std::uint64_t client_key) const {
  return run_statement(c, logger_, "handing a write lock over", [&] {
           auto& ps = c.prepared(hand_over_write_sql_);
           Binder b(ps);
           b.u64(to).u64(to).u64(to).flag(watchdog).u64(owner).u64(to).i64(lease_us).u64(client_key);
           b.text(name).u64(from).u64(to);
           return execute_update(ps);
         }) > 0;
}

bool RwTable::forget_stale_reads(Connection& c, std::string_view name) const {
  return run_statement(c, logger_, "recounting a read-write lock's reads", [&] {
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
      auto& head = c.prepared("SELECT readers FROM " + qh_ + " WHERE rw_name = ? FOR UPDATE");
      Binder(head).text(name);
      std::unique_ptr<sql::ResultSet> rs(head.executeQuery());
    }
    std::int64_t live = 0;
    {
      auto& count = c.prepared("SELECT COUNT(*) FROM " + qr_ +
                               " WHERE rw_name = ? AND hold_id IS NOT NULL AND expire_time > NOW(6) LOCK IN SHARE MODE");
      Binder(count).text(name);
      std::unique_ptr<sql::ResultSet> rs(count.executeQuery());
      if (rs->next()) live = rs->getInt64(1);
    }
    bool reset = false;
    if (live == 0) {
      auto& forget = c.prepared("UPDATE " + qh_ +
                                " SET readers = 0, read_epoch = read_epoch + 1 WHERE rw_name = ? AND readers > 0");
      Binder(forget).text(name);
      reset = forget.executeUpdate() > 0;
    }
    c.execute_plain("COMMIT");
    rollback.done = true;
    return reset;
  });
}

void RwTable::set_intent(Connection& c, std::string_view name, std::uint64_t client_key,
                         std::int64_t lease_us) const {
  set_intents(c, {std::string(name)}, client_key, lease_us);
}

void RwTable::set_intents(Connection& c, const std::vector<std::string>& names, std::uint64_t client_key,
                          std::int64_t lease_us) const {
  for_each_chunk(names, [&](std::size_t first, std::size_t count, std::size_t bucket) {
    run_statement(c, logger_, "marking a waiting writer", [&] {
      auto& ps = c.prepared("UPDATE " + qh_ +
                            " SET intent_id = ?, intent_expire = NOW(6) + INTERVAL ? MICROSECOND"
                            " WHERE (intent_id IS NULL OR intent_expire <= NOW(6) OR intent_id = ?)"
                            " AND rw_name IN (" + placeholders(bucket) + ")");
      Binder b(ps);
      b.u64(client_key).i64(lease_us).u64(client_key);
      bind_texts(b, names, first, count, bucket);
      return execute_update(ps);
    });
  });
}

void RwTable::clear_intent(Connection& c, std::string_view name, std::uint64_t client_key) const {
  run_statement(c, logger_, "unmarking a waiting writer", [&] {
    auto& ps = c.prepared("UPDATE " + qh_ +
                          " SET intent_id = NULL, intent_expire = NULL WHERE rw_name = ? AND intent_id = ?");
    Binder(ps).text(name).u64(client_key);
    return execute_update(ps);
  });
}

// ---------------------------------------------------------------- read side

bool RwTable::take_read(Connection& c, std::string_view name, ReaderSlot slot, const Holder& holder, unsigned state,
                        std::int64_t lease_us, bool watchdog, std::uint64_t write_hold_id,
                        const std::string* doorbell) const {
  return run_statement(
             c, logger_, "taking a read lock",
             [&] {
               auto& ps = c.prepared(doorbell != nullptr ? take_read_bell_sql_ : take_read_sql_);
               Binder b(ps);
               b.u64(state);
               if (doorbell != nullptr) b.text(*doorbell);
               b.flag(watchdog).text(holder.label).u64(holder.owner).u64(holder.hold_id).text(holder.host);
               b.u64(holder.pid).i64(lease_us).i64(lease_us).text(name).u64(slot.client_key).u64(slot.slot);
               b.u64(write_hold_id);
               return execute_update(ps);
             },
             [&] {
               if (doorbell != nullptr) give_back(c, *doorbell);
             }) > 0;
}

bool RwTable::retake_read(Connection& c, std::string_view name, ReaderSlot slot, std::uint64_t hold_id,
                          unsigned state, std::int64_t lease_us, bool watchdog) const {
  return run_statement(c, logger_, "re-entering a read lock", [&] {
           auto& ps = c.prepared("UPDATE " + qh_ + " h JOIN " + qr_ +
                                 " r ON r.rw_name = h.rw_name SET r.state = ?, r.watchdog = ?,"
                                 " r.expire_time = NOW(6) + INTERVAL ? MICROSECOND, " + kRaiseReadExpire +
                                 " WHERE h.rw_name = ? AND r.client_key = ? AND r.slot = ? AND r.hold_id = ?"
                                 " AND r.expire_time > NOW(6)");
           Binder(ps).u64(state).flag(watchdog).i64(lease_us).i64(lease_us).text(name).u64(slot.client_key).u64(
               slot.slot).u64(hold_id);
           return execute_update(ps);
         }) > 0;
}

bool RwTable::release_read(Connection& c, std::string_view name, ReaderSlot slot, std::uint64_t hold_id,
                           unsigned state, const std::string* doorbell) const {
  const bool released = run_statement(c, logger_, "releasing a read lock", [&] {
                          if (state > 0) {
                            auto& ps = c.prepared("UPDATE " + qr_ +
                                                  " SET state = ? WHERE rw_name = ? AND client_key = ? AND slot = ?"
                                                  " AND hold_id = ? AND expire_time > NOW(6)");
                            Binder(ps).u64(state).text(name).u64(slot.client_key).u64(slot.slot).u64(hold_id);
                            return execute_update(ps);
                          }
                          auto& ps = c.prepared(doorbell != nullptr ? free_read_bell_sql_ : free_read_sql_);
                          Binder b(ps);
                          if (doorbell != nullptr) b.text(*doorbell);
                          b.text(name).u64(slot.client_key).u64(slot.slot).u64(hold_id);
                          return execute_update(ps);
                        }) > 0;
  if (!released) {
    if (doorbell != nullptr) give_back(c, *doorbell);
    if (state == 0) {
      // Lost (its lease ran out): free the slot anyway, and uncount the
      // read if no write has forgotten the count since it was taken, so a
      // lost read does not hold writers back until read_expire.
      run_statement(c, logger_, "clearing a lost read lock", [&] {
        auto& ps = c.prepared("UPDATE " + qh_ + " h JOIN " + qr_ + " r ON r.rw_name = h.rw_name SET r.state = 0, " +
                              cleared("r.") +
                              ", h.readers = IF(h.readers > 0 AND r.epoch = h.read_epoch, h.readers - 1, h.readers)"
                              " WHERE h.rw_name = ? AND r.client_key = ? AND r.slot = ? AND r.hold_id = ?");
        Binder(ps).text(name).u64(slot.client_key).u64(slot.slot).u64(hold_id);
        return execute_update(ps);
      });
    }
  }
  return released;
}

// ---------------------------------------------------------------- reads

RwHead RwTable::read_head(Connection& c, std::string_view name, ReaderSlot slot) const {
  return run_statement(c, logger_, "reading a read-write lock", [&] {
    // GROUP_CONCAT keeps it one row; group_concat_max_len (1024 bytes by
    // default) may cut a long list, and only the first few ids are used.
    auto& ps = c.prepared(std::string("SELECT ") + kHeadColumns + ", EXISTS(SELECT 1 FROM " + qr_ +
                          " r WHERE r.rw_name = h.rw_name AND r.client_key = ? AND r.slot = ?),"
                          " (SELECT GROUP_CONCAT(r.hold_id ORDER BY r.expire_time SEPARATOR ',') FROM " + qr_ +
                          " r WHERE r.rw_name = h.rw_name AND r.hold_id IS NOT NULL AND r.expire_time > NOW(6)) FROM " +
                          qh_ + " h WHERE h.rw_name = ?");
    Binder(ps).u64(slot.client_key).u64(slot.slot).text(name);
    std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
    RwHead head;
    head.writer.name = std::string(name);
    if (!rs->next()) return head;
    head = to_head(*rs);
    head.slot_exists = rs->getInt(kHeadColumnCount + 1) == 1;
    if (!rs->isNull(kHeadColumnCount + 2)) {
      const std::string ids = rs->getString(kHeadColumnCount + 2);
      std::size_t start = 0;
      while (start < ids.size() && head.first_readers.size() < kFirstReaders) {
        const std::size_t end = ids.find(',', start);
        // The last one may be cut short by group_concat_max_len.
        if (end == std::string::npos && ids.size() >= 1024) break;
        const std::string id = ids.substr(start, end == std::string::npos ? std::string::npos : end - start);
        if (!id.empty()) head.first_readers.push_back(std::stoull(id));
        if (end == std::string::npos) break;
        start = end + 1;
      }
    }
    return head;
  });
}

ReaderRow RwTable::read_slot(Connection& c, std::string_view name, ReaderSlot slot) const {
  return run_statement(c, logger_, "reading a reader slot", [&] {
    auto& ps = c.prepared(std::string("SELECT ") + kReaderColumns + " FROM " + qr_ +
                          " r WHERE r.rw_name = ? AND r.client_key = ? AND r.slot = ?");
    Binder(ps).text(name).u64(slot.client_key).u64(slot.slot);
    std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
    ReaderRow row;
    row.slot = slot;
    row.hold.name = std::string(name);
    if (rs->next()) row = to_reader(*rs);
    return row;
  });
}

std::vector<ReaderRow> RwTable::live_readers(Connection& c, std::string_view name) const {
  return run_statement(c, logger_, "reading read holds", [&] {
    auto& ps = c.prepared(std::string("SELECT ") + kReaderColumns + " FROM " + qr_ +
                          " r WHERE r.rw_name = ? AND r.hold_id IS NOT NULL AND r.expire_time > NOW(6)"
                          " ORDER BY r.expire_time DESC");
    Binder(ps).text(name);
    std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
    std::vector<ReaderRow> rows;
    while (rs->next()) rows.push_back(to_reader(*rs));
    return rows;
  });
}

std::vector<RwHead> RwTable::read_held_heads(Connection& c) const {
  return run_statement(c, logger_, "listing read-write locks", [&] {
    auto& ps = c.prepared(std::string("SELECT ") + kHeadColumns + " FROM " + qh_ +
                          " h WHERE (h.hold_id IS NOT NULL AND h.expire_time > NOW(6))"
                          " OR (h.readers > 0 AND h.read_expire > NOW(6)) ORDER BY h.rw_name");
    std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
    std::vector<RwHead> heads;
    while (rs->next()) heads.push_back(to_head(*rs));
    return heads;
  });
}

std::vector<ReaderRow> RwTable::read_held_readers(Connection& c) const {
  return run_statement(c, logger_, "listing read holds", [&] {
    auto& ps = c.prepared(std::string("SELECT ") + kReaderColumns + " FROM " + qr_ +
                          " r WHERE r.hold_id IS NOT NULL AND r.expire_time > NOW(6)"
                          " ORDER BY r.rw_name, r.acquired_at");
    std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
    std::vector<ReaderRow> rows;
    while (rs->next()) rows.push_back(to_reader(*rs));
    return rows;
  });
}

std::vector<RwPoll> RwTable::poll(Connection& c, const std::vector<std::string>& names) const {
  std::vector<RwPoll> polls;
  for_each_chunk(names, [&](std::size_t first, std::size_t count, std::size_t bucket) {
    run_statement(c, logger_, "polling waited-for read-write locks", [&] {
      auto& ps = c.prepared("SELECT rw_name, (hold_id IS NULL OR expire_time <= NOW(6)),"
                            " (readers = 0 OR read_expire IS NULL OR read_expire <= NOW(6)),"
                            " (intent_id IS NULL OR intent_expire <= NOW(6)) FROM " + qh_ +
                            " WHERE rw_name IN (" + placeholders(bucket) + ")");
      Binder b(ps);
      bind_texts(b, names, first, count, bucket);
      std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
      while (rs->next()) {
        polls.push_back(RwPoll{rs->getString(1), rs->getInt(2) == 1, rs->getInt(3) == 1, rs->getInt(4) == 1});
      }
      return 0;
    });
  });
  return polls;
}

// ---------------------------------------------------------------- watchdog, shutdown

std::size_t RwTable::renew_writes(Connection& c, const std::vector<std::uint64_t>& hold_ids,
                                  std::int64_t lease_us) const {
  std::size_t renewed = 0;
  for_each_chunk(hold_ids, [&](std::size_t first, std::size_t count, std::size_t bucket) {
    renewed += static_cast<std::size_t>(run_statement(c, logger_, "renewing write locks", [&] {
      auto& ps = c.prepared("UPDATE " + qh_ +
                            " SET expire_time = NOW(6) + INTERVAL ? MICROSECOND"
                            " WHERE expire_time > NOW(6) AND hold_id IN (" + placeholders(bucket) + ")");
      Binder b(ps);
      b.i64(lease_us);
      bind_u64s(b, hold_ids, first, count, bucket);
      return execute_update(ps);
    }));
  });
  return renewed;
}

std::size_t RwTable::renew_reads(Connection& c, const std::vector<std::uint64_t>& hold_ids,
                                 std::int64_t lease_us) const {
  std::size_t affected = 0;
  for_each_chunk(hold_ids, [&](std::size_t first, std::size_t count, std::size_t bucket) {
    affected += static_cast<std::size_t>(run_statement(c, logger_, "renewing read locks", [&] {
      auto& ps = c.prepared("UPDATE " + qh_ + " h JOIN " + qr_ +
                            " r ON r.rw_name = h.rw_name SET r.expire_time = NOW(6) + INTERVAL ? MICROSECOND, " +
                            kRaiseReadExpire + " WHERE r.expire_time > NOW(6) AND r.hold_id IN (" +
                            placeholders(bucket) + ")");
      Binder b(ps);
      b.i64(lease_us).i64(lease_us);
      bind_u64s(b, hold_ids, first, count, bucket);
      return execute_update(ps);
    }));
  });
  return affected;
}

namespace {
std::vector<std::uint64_t> live_among(Connection& c, const std::shared_ptr<spdlog::logger>& logger,
                                      const std::string& table, const std::vector<std::uint64_t>& hold_ids) {
  std::vector<std::uint64_t> live;
  for_each_chunk(hold_ids, [&](std::size_t first, std::size_t count, std::size_t bucket) {
    run_statement(c, logger, "reading read-write holds", [&] {
      auto& ps = c.prepared("SELECT hold_id FROM " + table + " WHERE expire_time > NOW(6) AND hold_id IN (" +
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
}  // namespace

std::vector<std::uint64_t> RwTable::live_writes_among(Connection& c, const std::vector<std::uint64_t>& hold_ids) const {
  return live_among(c, logger_, qh_, hold_ids);
}

std::vector<std::uint64_t> RwTable::live_reads_among(Connection& c, const std::vector<std::uint64_t>& hold_ids) const {
  return live_among(c, logger_, qr_, hold_ids);
}

void RwTable::free_write_by_id(Connection& c, std::uint64_t hold_id) const {
  run_statement(c, logger_, "releasing a write lock at shutdown", [&] {
    auto& ps = c.prepared("UPDATE " + qh_ + " SET state = 0, " + cleared("") + " WHERE hold_id = ?");
    Binder(ps).u64(hold_id);
    return execute_update(ps);
  });
}

void RwTable::free_read_by_id(Connection& c, std::uint64_t hold_id) const {
  run_statement(c, logger_, "releasing a read lock at shutdown", [&] {
    auto& ps = c.prepared("UPDATE " + qh_ + " h JOIN " + qr_ + " r ON r.rw_name = h.rw_name SET r.state = 0, " +
                          cleared("r.") +
                          ", h.readers = IF(h.readers > 0 AND r.epoch = h.read_epoch, h.readers - 1, h.readers)"
                          " WHERE r.hold_id = ?");
    Binder(ps).u64(hold_id);
    return execute_update(ps);
  });
}

void RwTable::delete_slots(Connection& c, std::uint64_t client_key) const {
  run_statement(c, logger_, "deleting this client's reader slots", [&] {
    auto& ps = c.prepared("DELETE FROM " + qr_ +
                          " WHERE client_key = ? AND (hold_id IS NULL OR expire_time <= NOW(6))");
    Binder(ps).u64(client_key);
    return execute_update(ps);
  });
}

// ---------------------------------------------------------------- operator tools

bool RwTable::force_write(Connection& c, std::string_view name) const {
  return run_statement(c, logger_, "force-releasing a write lock", [&] {
           auto& ps = c.prepared("UPDATE " + qh_ + " SET state = 0, " + cleared("") +
                                 " WHERE rw_name = ? AND hold_id IS NOT NULL AND expire_time > NOW(6)");
           Binder(ps).text(name);
           return execute_update(ps);
         }) == 1;
}

std::size_t RwTable::force_reads(Connection& c, std::string_view name) const {
  const auto live = live_readers(c, name).size();
  // One statement for the slots and the count, so no read is taken in
  // between; the epoch moves on, so the cleared holds' owners, finding them
  // lost, subtract nothing.
  run_statement(c, logger_, "force-releasing read locks", [&] {
    auto& ps = c.prepared("UPDATE " + qh_ + " h LEFT JOIN " + qr_ +
                          " r ON r.rw_name = h.rw_name AND r.hold_id IS NOT NULL"
                          " SET h.readers = 0, h.read_expire = NULL, h.read_epoch = h.read_epoch + 1, r.state = 0, " +
                          cleared("r.") + " WHERE h.rw_name = ?");
    Binder(ps).text(name);
    return execute_update(ps);
  });
  return live;
}

}  // namespace dlock::details
