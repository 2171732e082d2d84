// One MySQL connection with its prepared-statement cache, and the mapping of
// Connector/C++ exceptions to dlock::BackendError. Connector types stay
// inside src/.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "base/string_map.hpp"
#include "base/tls.hpp"
#include "dlock/errors.hpp"
#include "dlock/options.hpp"
#include "metrics/metric_counters.hpp"
#include "sql/server_choice.hpp"
#include "sql/server_profile.hpp"
#include "sql/session_bell.hpp"

namespace sql {
class Connection;
class PreparedStatement;
class SQLException;
}  // namespace sql

namespace dlock::details {

// What a connection needs from Options.
struct ConnectionSettings {
  // Where to connect: host:port alone, or, when `servers` is set (Options::
  // failover_servers), the server `servers` has chosen now. Copies of one
  // settings object share `servers`, so every connection of a client follows
  // the same choice.
  std::string host;
  unsigned port = 3306;
  std::shared_ptr<ServerChoice> servers;
  std::string user;
  std::string password;
  std::string database;
  // TLS (Options::ssl_mode and the ssl_ files, checked by validate_tls).
  struct Tls {
    TlsMode mode = TlsMode::kPreferred;
    std::string ca, capath, cert, key, crl, cipher;
  } tls;
  Millis connect_timeout{5'000};
  Millis io_timeout{10'000};
  // Server-side row lock wait (innodb_lock_wait_timeout), whole seconds.
  // 0: one second less than io_timeout, so a contended row gives a
  // retryable 1205 rather than a lost connection.
  int lock_wait_seconds = 0;
  // Where statements, retries and opened connections are counted; null:
  // nowhere (Options::metrics off, tools).
  std::shared_ptr<MetricCounters> counters;

  static ConnectionSettings from(const Options& options);
};

// The time budget of one library call, as a deadline for the calling
// thread. A nested CallBudget can only narrow it (a step of a call that
// must end sooner), never extend it; the enclosing one is back when it ends.
// Statement retries and waits for a pooled connection stay inside it, so a
// call made of several statements (an acquire and its reconciling read, an
// unlock) still ends within about io_timeout in total.
class CallBudget {
 public:
  using Clock = std::chrono::steady_clock;
  explicit CallBudget(Millis budget);
  ~CallBudget();
  CallBudget(const CallBudget&) = delete;
  CallBudget& operator=(const CallBudget&) = delete;
  // The deadline in force on this thread, or time_point::max() if none.
  static Clock::time_point deadline();
  // True if `more` fits before the deadline (always true without one).
  static bool allows(Clock::duration more);

 private:
  Clock::time_point enclosing_;
};

// MySQL error numbers the library reacts to.
namespace mysql_error {
inline constexpr int kLockWaitTimeout = 1205;
inline constexpr int kDeadlock = 1213;
inline constexpr int kQueryInterrupted = 1317;
inline constexpr int kUnknownThread = 1094;
inline constexpr int kWsrepNotReady = 1047;
inline constexpr int kReadOnly = 1290;  // ER_OPTION_PREVENTS_STATEMENT: read_only / super_read_only
inline constexpr int kDuplicateKey = 1062;
inline constexpr int kNoSuchTable = 1146;
// The server (1040) or the account (1203, 1226) is at its connection limit.
inline constexpr int kTooManyConnections = 1040;
inline constexpr int kTooManyUserConnections = 1203;
inline constexpr int kUserLimitReached = 1226;
}  // namespace mysql_error

// True for a refusal at a connection limit: a connect is tried again with a
// growing pause within connect_timeout (a slow connect, not a failure).
bool is_connection_limit(int code);

// True for errors that mean the connection is gone (or never came up), or
// that its server cannot serve it now (a Galera node out of the primary
// component: 1047; a read-only server: 1290): the statement's outcome is
// unknown and the connection must not be reused. At connect, such a server
// is passed over for the next one of the list.
bool is_connection_error(int code);
// True for errors after which the statement was rolled back and may be run
// again as it is (deadlock or Galera certification conflict, lock wait
// timeout).
bool is_retryable(int code);
// Converts a Connector/C++ exception; `context` says what was being done.
BackendError to_backend_error(const sql::SQLException& e, const std::string& context);

// A session on one server of the client's list (Connection::server_id and
// Connection::server_index): connection ids are unique on one server only.
struct SessionAddress {
  std::uint64_t server_id = 0;
  std::size_t server_index = 0;
};

// The connection died while a statement was in flight: it may or may not
// have been applied, and on the server it may even still be running.
// Callers settle the session (settle_lost_session) and then reconcile by
// reading on another connection, never by running the statement again
// blindly.
class OutcomeUnknown : public BackendError {
 public:
  OutcomeUnknown(const BackendError& cause, SessionAddress session) : BackendError(cause), session_(session) {}
  // The server session the statement was sent on.
  SessionAddress session() const { return session_; }

 private:
  SessionAddress session_;
};


class Connection {
 public:
  // Connects and prepares the session (UTC time zone, autocommit, READ
  // COMMITTED, server-side lock wait below the client's read timeout, and
  // what the server's profile adds). With failover servers: to the current
  // server, moving on to the next while a connection cannot be made, each
  // server tried at most once. Throws BackendError (the last server's error).
  static std::unique_ptr<Connection> open(const ConnectionSettings& settings);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // The prepared statement for `sql`, prepared on first use and cached for
  // the life of the connection (a prepare is a round trip of its own).
  // Each call is counted as one statement run (MetricCounters).
  sql::PreparedStatement& prepared(const std::string& sql);
  // Runs statements that take no parameters (DDL, session settings).
  void execute_plain(const std::string& sql);
  // The first column of the first row of a query that takes no parameters,
  // sent as text, never prepared (0 when there is no row or it is NULL).
  // For reads of information_schema.PROCESSLIST: MariaDB 10.11 has been seen
  // to crash re-executing such a prepared statement (in free_tmp_table).
  std::uint64_t scalar_plain(const std::string& sql);

  // Direct access for code that changes session state (tests, tools). Marks
  // the session dirty, so the pool resets it before anyone else uses it.
  sql::Connection& raw_for_session_change();
  bool session_dirty() const { return session_dirty_; }
  // Re-applies the session settings. Throws BackendError.
  void reset_session();

  // Seconds the server lets a statement wait for a row lock (session's
  // innodb_lock_wait_timeout).
  int lock_wait_seconds() const { return lock_wait_seconds_; }

  // Server-side id (CONNECTION_ID()), for diagnostics and KILL. Unique on
  // one server only: two servers of a cluster may hand out the same id.
  std::uint64_t server_id() const { return server_id_; }
  // Unique among every connection this process opened (never 0): how the
  // pool and the holds that took a bell on a session name it.
  std::uint64_t session_key() const { return session_key_; }
  // Which server of the settings' list this connection talks to (0 without
  // failover servers). A KILL for a session goes only to its own server.
  std::size_t server_index() const { return server_index_; }
  const ServerProfile& profile() const { return profile_; }
  // The TLS cipher the session uses; empty: not encrypted.
  const std::string& tls_cipher() const { return tls_cipher_; }
  // "host:port" of the server this connection talks to.
  const std::string& server() const { return server_; }
  bool broken() const { return broken_; }
  void mark_broken() { broken_ = true; }
  // The client's counters (ConnectionSettings::counters), or null.
  MetricCounters* counters() const { return counters_.get(); }
  // Cheap liveness check (COM_PING, not a statement). False marks it broken.
  bool ping();

  std::chrono::steady_clock::time_point last_used() const { return last_used_; }
  void touch() { last_used_ = std::chrono::steady_clock::now(); }

  // The pool's error epoch when this connection was last known to be alive
  // (see ConnectionPool).
  std::uint64_t checked_epoch = 0;
  // This session's own bell, taken on its first lock take (see
  // sql/session_bell.hpp). Lives and dies with the session.
  SessionBell bell;

 private:
  Connection() = default;
  static std::unique_ptr<Connection> open_at(const ConnectionSettings& settings, const std::string& host,
                                             unsigned port, std::size_t server_index);
  void apply_session_settings();
  // Reads the session's cipher; refuses a session that `mode` says must be
  // encrypted and is not. Throws BackendError.
  void check_encryption(TlsMode mode);

  std::unique_ptr<sql::Connection> connection_;
  std::shared_ptr<MetricCounters> counters_;
  StringMap<std::unique_ptr<sql::PreparedStatement>> statements_;
  std::uint64_t server_id_ = 0;
  std::uint64_t session_key_ = 0;
  std::size_t server_index_ = 0;
  ServerProfile profile_;
  std::string tls_cipher_;
  std::string server_;
  int io_timeout_seconds_ = 10;
  int lock_wait_seconds_ = 9;
  bool broken_ = false;
  bool session_dirty_ = false;
  std::chrono::steady_clock::time_point last_used_ = std::chrono::steady_clock::now();
};

// Makes sure a statement sent on `lost` can no longer land: kills that
// session (only if it is this account's, on `c`'s server) and waits until
// the server has let it go, within the calling thread's CallBudget. After
// it, a read on `c` shows the statement's final outcome. Nothing to do for
// a session on another server (its statement lands or not with that
// server) or one already gone. Throws BackendError.
void settle_lost_session(Connection& c, SessionAddress lost);

}  // namespace dlock::details
