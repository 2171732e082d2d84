#include "sql/connection.hpp"

#include <cppconn/exception.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>
#include <mysql_connection.h>
#include <mysql_driver.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

namespace dlock::details {

namespace {

// The driver is a process-wide singleton whose creation is not thread-safe.
sql::mysql::MySQL_Driver* driver() {
  static std::once_flag once;
  static sql::mysql::MySQL_Driver* instance = nullptr;
  std::call_once(once, [] { instance = sql::mysql::get_mysql_driver_instance(); });
  return instance;
}

// CR_SSL_CONNECTION_ERROR, and MySQL's ER_SECURE_TRANSPORT_REQUIRED.
constexpr int kTlsError = 2026;
constexpr int kInsecureTransport = 3159;

// The client library counts timeouts in whole seconds; round up so a timeout
// is never shorter than asked.
int whole_seconds(Millis value) {
  const auto seconds = (value.count() + 999) / 1000;
  return static_cast<int>(seconds < 1 ? 1 : seconds);
}

// The connection properties of `tls`. Debian's Connector/C++ runs on
// MariaDB Connector/C, which (checked against a real server) honours
// sslEnforce only as "ask for TLS", refuses a server without TLS only when
// it also checks the host name (sslVerify), checks the chain whenever a CA
// is given, and ignores OPT_SSL_MODE. So the modes map to properties here,
// and Connection::check_encryption refuses what the library let through.
void apply_tls(sql::ConnectOptionsMap& props, const ConnectionSettings::Tls& tls) {
  if (tls.mode == TlsMode::kDisabled) return;  // no property: no TLS
  props["sslEnforce"] = true;
  const std::pair<const char*, const std::string*> files[] = {
      {"sslCA", &tls.ca},     {"sslCAPath", &tls.capath}, {"sslCert", &tls.cert},
      {"sslKey", &tls.key},   {"sslCRL", &tls.crl},       {"sslCipher", &tls.cipher},
  };
  for (const auto& [property, value] : files)
    if (!value->empty()) props[property] = sql::SQLString(*value);
  if (tls.mode == TlsMode::kVerifyIdentity) props["sslVerify"] = true;
}

// A failed connect, with what the TLS settings have to do with it.
BackendError connect_error(const sql::SQLException& e, const std::string& server, TlsMode mode) {
  BackendError plain = to_backend_error(e, "cannot connect to " + server);
  std::string hint;
  if (e.getErrorCode() == kTlsError) {
    hint = " (ssl_mode " + std::string(to_string(mode)) +
           ": the TLS handshake failed, or the server's certificate did not pass the check)";
  } else if (mode == TlsMode::kDisabled && (e.getErrorCode() == 1045 || e.getErrorCode() == kInsecureTransport)) {
    hint = " (ssl_mode disabled: the session was not encrypted, and a server that requires secure transport "
           "refuses plaintext sessions, MariaDB with this error)";
  }
  if (hint.empty()) return plain;
  return BackendError(plain.what() + hint, plain.code(), plain.sql_state());
}

}  // namespace

ConnectionSettings ConnectionSettings::from(const Options& options) {
  ConnectionSettings s;
  s.host = options.host;
  s.port = options.port;
  if (!options.failover_servers.empty()) {
    std::vector<ServerChoice::Server> servers{{options.host, options.port}};
    servers.insert(servers.end(), options.failover_servers.begin(), options.failover_servers.end());
    s.servers = std::make_shared<ServerChoice>(std::move(servers));
  }
  s.user = options.user;
  s.password = options.password;
  s.database = options.database;
  s.tls.mode = tls_mode(options);
  s.tls.ca = options.ssl_ca;
  s.tls.capath = options.ssl_capath;
  s.tls.cert = options.ssl_cert;
  s.tls.key = options.ssl_key;
  s.tls.crl = options.ssl_crl;
  s.tls.cipher = options.ssl_cipher;
  s.connect_timeout = options.connect_timeout;
  s.io_timeout = options.io_timeout;
  return s;
}

namespace {
thread_local CallBudget::Clock::time_point call_deadline = CallBudget::Clock::time_point::max();
}  // namespace

CallBudget::CallBudget(Millis budget) : enclosing_(call_deadline) {
  call_deadline = std::min(call_deadline, Clock::now() + budget);
}

CallBudget::~CallBudget() { call_deadline = enclosing_; }

CallBudget::Clock::time_point CallBudget::deadline() { return call_deadline; }

bool CallBudget::allows(Clock::duration more) {
  return call_deadline == Clock::time_point::max() || Clock::now() + more < call_deadline;
}

bool is_connection_error(int code) {
  switch (code) {
    case 1053:  // ER_SERVER_SHUTDOWN
    case 1077:  // ER_NORMAL_SHUTDOWN
    case 1152:  // ER_ABORTING_CONNECTION
    case 1927:  // ER_CONNECTION_KILLED (MariaDB)
    case 4031:  // ER_CLIENT_INTERACTION_TIMEOUT (MySQL 8)
    case mysql_error::kWsrepNotReady:  // ER_UNKNOWN_COM_ERROR: Galera node not in the primary component
    case mysql_error::kReadOnly:       // a read-only server (a replica) takes no lock
      return true;
    default:
      // 2000..2999 are client-library errors: can't connect, server gone,
      // lost connection, timeouts, malformed packets, commands out of sync.
      return code >= 2000 && code < 3000;
  }
}

bool is_connection_limit(int code) {
  return code == mysql_error::kTooManyConnections || code == mysql_error::kTooManyUserConnections ||
         code == mysql_error::kUserLimitReached;
}

bool is_retryable(int code) { return code == mysql_error::kDeadlock || code == mysql_error::kLockWaitTimeout; }

BackendError to_backend_error(const sql::SQLException& e, const std::string& context) {
  std::string state = e.getSQLState();
  return BackendError("dlock: " + context + ": " + e.what() + " (MySQL error " + std::to_string(e.getErrorCode()) +
                          (state.empty() ? "" : ", SQLSTATE " + state) + ")",
                      e.getErrorCode(), state);
}

namespace {

// Connects; a server (or account) at its connection limit is asked again
// with a growing pause (10 ms doubling to 500 ms, jittered) until
// `connect_timeout` (or the caller's budget) would pass, then its refusal
// is what the caller sees.
std::unique_ptr<sql::Connection> connect_within_limits(sql::ConnectOptionsMap& props, Millis connect_timeout) {
  using Clock = std::chrono::steady_clock;
  const auto give_up = Clock::now() + connect_timeout;
  thread_local std::mt19937 jitter(std::random_device{}());
  for (int pause_ms = 10;; pause_ms = std::min(pause_ms * 2, 500)) {
    try {
      return std::unique_ptr<sql::Connection>(driver()->connect(props));
    } catch (const sql::SQLException& e) {
      if (!is_connection_limit(e.getErrorCode())) throw;
      const Millis pause(pause_ms / 2 + static_cast<int>(jitter() % static_cast<unsigned>(pause_ms / 2 + 1)));
      if (Clock::now() + pause >= give_up || !CallBudget::allows(pause)) throw;
      std::this_thread::sleep_for(pause);
    }
  }
}

}  // namespace

std::unique_ptr<Connection> Connection::open(const ConnectionSettings& settings) {
  if (!settings.servers) return open_at(settings, settings.host, settings.port, 0);
  ServerChoice& choice = *settings.servers;
  std::optional<BackendError> last;
  for (std::size_t tried = 0; tried < choice.size(); ++tried) {
    const std::size_t at = choice.current();
    const auto& server = choice.server(at);
    try {
      return open_at(settings, server.host, server.port, at);
    } catch (const BackendError& e) {
      // A server that refuses the account or the schema refuses it on every
      // node of a cluster: that is no reason to move.
      if (!is_connection_error(e.code())) throw;
      last = e;
      choice.move_on(at);
    }
  }
  throw BackendError(std::string(last->what()) + " (every server of " + choice.describe() + " failed)", last->code(),
                     last->sql_state());
}

std::unique_ptr<Connection> Connection::open_at(const ConnectionSettings& settings, const std::string& host,
                                                unsigned port, std::size_t server_index) {
  static std::atomic<std::uint64_t> next_session_key{0};
  std::unique_ptr<Connection> c(new Connection());
  c->session_key_ = ++next_session_key;
  c->server_index_ = server_index;
  c->io_timeout_seconds_ = whole_seconds(settings.io_timeout);
  c->lock_wait_seconds_ = settings.lock_wait_seconds > 0 ? settings.lock_wait_seconds
                                                         : std::max(1, c->io_timeout_seconds_ - 1);
  sql::ConnectOptionsMap props;
  // Connector/C++ 1.1 reads a bare hostName as host[:port], so an IPv6
  // address ("::1") must go in its URI form, bracketed.
  if (host.find(':') != std::string::npos) {
    props["hostName"] = sql::SQLString("tcp://[" + host + "]:" + std::to_string(port));
  } else {
    props["hostName"] = sql::SQLString(host);
  }
  props["port"] = static_cast<int>(port);
  props["userName"] = sql::SQLString(settings.user);
  props["password"] = sql::SQLString(settings.password);
  props["schema"] = sql::SQLString(settings.database);
  props["OPT_CONNECT_TIMEOUT"] = whole_seconds(settings.connect_timeout);
  props["OPT_READ_TIMEOUT"] = c->io_timeout_seconds_;
  props["OPT_WRITE_TIMEOUT"] = c->io_timeout_seconds_;
  // A silent reconnect would lose session settings and hide an unknown
  // statement outcome; the pool replaces broken connections instead.
  props["OPT_RECONNECT"] = false;
  // Names are byte strings: bind them without character-set conversion.
  props["OPT_CHARSET_NAME"] = sql::SQLString("binary");
  props["CLIENT_MULTI_STATEMENTS"] = false;
  apply_tls(props, settings.tls);
  c->server_ = host + ":" + std::to_string(port);
  try {
    c->connection_ = connect_within_limits(props, settings.connect_timeout);
    c->check_encryption(settings.tls.mode);
    c->profile_ = ServerProfile::detect(*c->connection_);
    c->apply_session_settings();
    c->counters_ = settings.counters;
    if (c->counters_) c->counters_->connection_opened();
  } catch (const BackendError& e) {
    throw BackendError("dlock: cannot use " + host + ":" + std::to_string(port) + ": " + e.what(), e.code(),
                       e.sql_state());
  } catch (const sql::SQLException& e) {
    throw connect_error(e, host + ":" + std::to_string(port), settings.tls.mode);
  }
  return c;
}

void Connection::check_encryption(TlsMode mode) {
  if (mode == TlsMode::kDisabled) return;
  {
    std::unique_ptr<sql::Statement> st(connection_->createStatement());
    std::unique_ptr<sql::ResultSet> rs(st->executeQuery("SHOW SESSION STATUS LIKE 'Ssl\\_cipher'"));
    if (rs->next()) tls_cipher_ = rs->getString(2);
  }
  if (requires_tls(mode) && tls_cipher_.empty()) {
    throw BackendError("the server did not encrypt the session, and ssl_mode " + std::string(to_string(mode)) +
                           " requires TLS (does the server offer it?); the session was closed before any statement",
                       kTlsError, "HY000");
  }
}

Connection::~Connection() {
  // Prepared statements must be closed before their connection.
  statements_.clear();
  try {
    if (connection_) connection_->close();
  } catch (const sql::SQLException&) {
    // Closing a dead connection can fail; there is nothing left to release.
  }
}

void Connection::apply_session_settings() {
  std::unique_ptr<sql::Statement> st(connection_->createStatement());
  // UTC: DATETIME expiries compare the same in every session and never jump
  // with daylight saving. timestamp=DEFAULT undoes any SET timestamp, which
  // would otherwise bend NOW(6) and every expiry computed from it. The
  // server-side lock wait ends before the client's read timeout, so a
  // contended row gives a retryable 1205 rather than a lost connection.
  st->execute("SET SESSION time_zone = '+00:00', autocommit = 1, timestamp = DEFAULT, innodb_lock_wait_timeout = " +
              std::to_string(lock_wait_seconds_) + profile_.session_settings());
  st->execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED");
  std::unique_ptr<sql::ResultSet> rs(st->executeQuery("SELECT CONNECTION_ID()"));
  if (rs->next()) server_id_ = rs->getUInt64(1);
  session_dirty_ = false;
}

void Connection::reset_session() {
  try {
    apply_session_settings();
  } catch (const sql::SQLException& e) {
    broken_ = true;
    throw to_backend_error(e, "resetting a pooled session");
  }
}

sql::PreparedStatement& Connection::prepared(const std::string& sql) {
  if (counters_) counters_->statement();
  auto it = statements_.find(sql);
  if (it != statements_.end()) return *it->second;
  std::unique_ptr<sql::PreparedStatement> ps(connection_->prepareStatement(sql));
  return *statements_.emplace(sql, std::move(ps)).first->second;
}

void Connection::execute_plain(const std::string& sql) {
  if (counters_) counters_->statement();
  std::unique_ptr<sql::Statement> st(connection_->createStatement());
  st->execute(sql);
}

std::uint64_t Connection::scalar_plain(const std::string& sql) {
  if (counters_) counters_->statement();
  std::unique_ptr<sql::Statement> st(connection_->createStatement());
  std::unique_ptr<sql::ResultSet> rs(st->executeQuery(sql));
  if (!rs->next() || rs->isNull(1)) return 0;
  return rs->getUInt64(1);
}

sql::Connection& Connection::raw_for_session_change() {
  session_dirty_ = true;
  return *connection_;
}

void settle_lost_session(Connection& c, SessionAddress lost) {
  if (lost.server_id == 0 || c.server_index() != lost.server_index || lost.server_id == c.server_id()) return;
  try {
    // Sent as text (Connection::scalar_plain); the id is ours.
    const std::string find = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = " +
                             std::to_string(lost.server_id) + " AND USER = SUBSTRING_INDEX(CURRENT_USER(), '@', 1)";
    const auto present = [&] { return c.scalar_plain(find) > 0; };
    if (!present()) return;
    try {
      c.execute_plain("KILL CONNECTION " + std::to_string(lost.server_id));
    } catch (const sql::SQLException& e) {
      if (e.getErrorCode() != mysql_error::kUnknownThread) throw;
      return;  // ended meanwhile
    }
    // A killed statement rolls back before its session goes.
    for (int pause_ms = 1; present(); pause_ms = std::min(pause_ms * 2, 50)) {
      if (!CallBudget::allows(std::chrono::milliseconds(pause_ms)))
        throw BackendError("dlock: the session of a statement whose outcome is unknown did not end in time", 0, "");
      std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    }
  } catch (const sql::SQLException& e) {
    if (e.getErrorCode() == 0 || is_connection_error(e.getErrorCode())) c.mark_broken();
    throw to_backend_error(e, "ending the session of a statement whose outcome is unknown");
  }
}

bool Connection::ping() {
  try {
    if (connection_->isValid()) return true;
  } catch (const sql::SQLException&) {
  }
  broken_ = true;
  return false;
}

}  // namespace dlock::details
