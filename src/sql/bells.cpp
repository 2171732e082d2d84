#include "sql/bells.hpp"

#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <spdlog/spdlog.h>

#include <random>

#include "sql/statement.hpp"

namespace dlock::details {

const char* const kRingTerm = "0 * COALESCE(IF(IS_USED_LOCK(?) <=> CONNECTION_ID(), 1, GET_LOCK(?, 0)) + RELEASE_LOCK(?), 0)";
const char* const kBellWaitPrefix = "SELECT IF(IS_FREE_LOCK(";

namespace {

std::string hex16(std::uint64_t value) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int shift = 60; shift >= 0; shift -= 4) out.push_back(kHex[(value >> shift) & 0xf]);
  return out;
}

bool get_lock_now(Connection& c, const std::string& name, const std::shared_ptr<spdlog::logger>& logger) {
  return run_statement(c, logger, "taking a session bell", [&] {
    auto& ps = c.prepared("SELECT GET_LOCK(?, 0)");
    Binder(ps).text(name);
    std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
    return rs->next() && !rs->isNull(1) && rs->getInt(1) == 1;
  });
}

}  // namespace

const std::string* take_session_bell(Connection& c, const std::shared_ptr<spdlog::logger>& logger) {
  if (!c.bell.tried()) {
    thread_local std::mt19937_64 random(std::random_device{}());
    std::string prefix = SessionBell::prefix_for(random());
    bool ok = false;
    try {
      ok = get_lock_now(c, prefix + "0", logger);
    } catch (const OutcomeUnknown&) {
      throw;
    } catch (const BackendError& e) {
      // Not worth failing a take for: its waiters elsewhere poll instead.
      if (logger) logger->info("dlock: could not take a session bell: {}", e.what());
    }
    c.bell.taken(std::move(prefix), ok);
  }
  return c.bell.current().empty() ? nullptr : &c.bell.current();
}

void bind_ring(Binder& b, const Connection& c) {
  const std::string next = c.bell.next();
  b.text(next).text(next).text(c.bell.current());
}

void rang(Connection& c, bool changed) {
  // A statement that matched no row evaluated no user-lock call.
  if (changed) c.bell.advanced();
}

void ring(Connection& c, const std::shared_ptr<spdlog::logger>& logger) {
  if (c.bell.current().empty()) return;
  bool took = false;
  try {
    took = run_statement(c, logger, "ringing a session bell", [&] {
      auto& ps = c.prepared("SELECT GET_LOCK(?, 0), RELEASE_LOCK(?)");
      Binder(ps).text(c.bell.next()).text(c.bell.current());
      std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
      return rs->next() && !rs->isNull(1) && rs->getInt(1) == 1;
    });
  } catch (const BackendError&) {
    // Which bell the session holds is unknown now (user-level locks are not
    // transactional): closing it gives back whatever it holds.
    c.mark_broken();
    throw;
  }
  if (took) {
    c.bell.advanced();
  } else {
    c.bell.lost();
  }
}

BellWait wait_for_bell(Connection& c, const std::string& bell, int wait_seconds,
                       const std::shared_ptr<spdlog::logger>& logger) {
  // IS_FREE_LOCK first: a free bell means its session rang or is gone, and
  // GET_LOCK would "ring" at once on every retry. Select-list items are
  // evaluated left to right, so RELEASE_LOCK gives back what GET_LOCK just
  // took (and is a no-op otherwise).
  try {
    return run_statement(c, logger, "waiting on a session bell", [&] {
      auto& ps = c.prepared(std::string(kBellWaitPrefix) + "?) = 1, 2, GET_LOCK(?, ?)), RELEASE_LOCK(?)");
      Binder(ps).text(bell).text(bell).i64(wait_seconds).text(bell);
      std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
      // MariaDB answers a KILL QUERY of GET_LOCK with NULL.
      if (!rs->next() || rs->isNull(1)) return BellWait::kInterrupted;
      switch (rs->getInt(1)) {
        case 1:
          return BellWait::kRung;
        case 2:
          return BellWait::kFree;
        default:
          return BellWait::kTimedOut;
      }
    });
  } catch (const BackendError& e) {
    // MySQL answers it with ER_QUERY_INTERRUPTED.
    if (e.code() == mysql_error::kQueryInterrupted) return BellWait::kInterrupted;
    throw;
  }
}

std::string observer_lock_name(std::uint64_t token) { return "dlock-observer-" + hex16(token); }

std::string line_lock_name(std::string_view database, std::string_view table, int kind, std::string_view name) {
  // FNV-1a, 64 bits: the same in every process and every build. A
  // collision only puts two names' waiters in one line (the poll still
  // finds each name free).
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  const auto add = [&](std::string_view bytes) {
    for (const char ch : bytes) {
      hash ^= static_cast<unsigned char>(ch);
      hash *= 0x100000001b3ULL;
    }
    hash ^= 0xff;  // a separator no byte string can fake by its own bytes
    hash *= 0x100000001b3ULL;
  };
  add(database);
  add(table);
  add(std::to_string(kind));
  add(name);
  return "dlock-l:" + hex16(hash);
}

std::string entry_lock_name(std::uint64_t hold_id) { return "dlock-e:" + hex16(hold_id); }

LineWait wait_in_line(Connection& c, const std::string& line, int wait_seconds,
                      const std::shared_ptr<spdlog::logger>& logger) {
  try {
    return run_statement(c, logger, "waiting in line", [&] {
      // IS_FREE_LOCK is only there for the prefix (it never answers 2).
      auto& ps = c.prepared(std::string(kBellWaitPrefix) + "?) = 2, 0, GET_LOCK(?, ?))");
      Binder(ps).text(line).text(line).i64(wait_seconds);
      std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
      if (!rs->next() || rs->isNull(1)) return LineWait::kInterrupted;  // MariaDB's answer to a KILL QUERY
      return rs->getInt(1) == 1 ? LineWait::kFront : LineWait::kTimedOut;
    });
  } catch (const BackendError& e) {
    if (e.code() == mysql_error::kQueryInterrupted) return LineWait::kInterrupted;  // MySQL's
    throw;
  }
}

bool take_lock_now(Connection& c, const std::string& lock, const std::shared_ptr<spdlog::logger>& logger) {
  return get_lock_now(c, lock, logger);
}

void give_back_lock(Connection& c, const std::string& lock, const std::shared_ptr<spdlog::logger>& logger) {
  try {
    run_statement(c, logger, "giving back a user lock", [&] {
      auto& ps = c.prepared("SELECT RELEASE_LOCK(?)");
      Binder(ps).text(lock);
      std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
      return 0;
    });
  } catch (const BackendError&) {
    c.mark_broken();
    throw;
  }
}

ParkedWait park_until_interrupted(Connection& c, const std::string& lock, int wait_seconds,
                                  const std::shared_ptr<spdlog::logger>& logger) {
  try {
    return run_statement(c, logger, "parking an observer", [&] {
      // SLEEP answers 1 when a KILL QUERY ends it on MySQL; MariaDB fails
      // the statement with ER_QUERY_INTERRUPTED instead.
      auto& ps = c.prepared(std::string(kBellWaitPrefix) + "?) = 0, SLEEP(?), 0)");
      Binder(ps).text(lock).i64(wait_seconds);
      std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
      if (!rs->next() || rs->isNull(1)) return ParkedWait::kInterrupted;
      return rs->getInt(1) == 1 ? ParkedWait::kInterrupted : ParkedWait::kTimedOut;
    });
  } catch (const BackendError& e) {
    if (e.code() == mysql_error::kQueryInterrupted) return ParkedWait::kInterrupted;
    throw;
  }
}

bool interrupt_parked_wait(Connection& killer, const std::string& lock) {
  std::uint64_t session = 0;
  try {
    auto& ps = killer.prepared("SELECT IS_USED_LOCK(?)");
    Binder(ps).text(lock);
    std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
    if (!rs->next() || rs->isNull(1)) return false;  // ended, or on another server
    session = rs->getUInt64(1);
  } catch (const sql::SQLException& e) {
    if (e.getErrorCode() == 0 || is_connection_error(e.getErrorCode())) killer.mark_broken();
    throw to_backend_error(e, "finding a parked observer");
  }
  return interrupt_bell_wait(killer, SessionAddress{session, killer.server_index()});
}

bool interrupt_bell_wait(Connection& killer, SessionAddress session) {
  if (killer.server_index() != session.server_index) return false;
  try {
    // Sent as text (Connection::scalar_plain): the id and the prefix are ours.
    const std::string prefix(kBellWaitPrefix);
    const bool ours =
        killer.scalar_plain("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = " +
                            std::to_string(session.server_id) +
                            " AND USER = SUBSTRING_INDEX(CURRENT_USER(), '@', 1) AND LEFT(INFO, " +
                            std::to_string(prefix.size()) + ") = '" + prefix + "'") == 1;
    if (!ours) return false;
    killer.execute_plain("KILL QUERY " + std::to_string(session.server_id));
    return true;
  } catch (const sql::SQLException& e) {
    if (e.getErrorCode() == mysql_error::kUnknownThread) return false;  // ended meanwhile
    if (e.getErrorCode() == 0 || is_connection_error(e.getErrorCode())) killer.mark_broken();
    throw to_backend_error(e, "interrupting a bell wait");
  }
}

}  // namespace dlock::details
