#include "test_env.hpp"

#include <gtest/gtest.h>

#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <cppconn/connection.h>
#include <cppconn/statement.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "sql/connection.hpp"

namespace dlock::test {

std::string database_url() {
  const char* url = std::getenv("DLOCK_TEST_URL");
  std::string base = url != nullptr && *url != '\0' ? url : "mysql://dlock:dlock-test@127.0.0.1:33306/dlock_test";
  if (!fast_wakeup_enabled()) base += std::string(base.find('?') == std::string::npos ? "?" : "&") + "fast_wakeup=false";
  return base;
}

std::string database_url_with(const std::string& parameters) {
  const std::string base = database_url();
  return base + (base.find('?') == std::string::npos ? "?" : "&") + parameters;
}

std::string url_for(const Options& o, const std::string& more) {
  return database_url_with("table=" + o.table + "&watchdog_timeout_ms=" + std::to_string(o.watchdog_timeout.count()) +
                           "&poll_interval_ms=" + std::to_string(o.poll_interval.count()) + more);
}

std::string tls_certificates() {
  const char* dir = std::getenv("DLOCK_TEST_TLS_DIR");
  return dir != nullptr && *dir != '\0' ? dir : std::string(DLOCK_SOURCE_DIR) + "/.dlock/db-tls/tls";
}

std::string tls_database_url() {
  const char* url = std::getenv("DLOCK_TEST_TLS_URL");
  if (url != nullptr && *url != '\0') return url;
  return "mysql://dlock:dlock-test@127.0.0.1:33307/dlock_test?ssl_mode=verify_identity&ssl_ca=" + tls_certificates() +
         "/ca.pem";
}

void execute_tls_sql(const std::string& sql) {
  auto c = details::Connection::open(details::ConnectionSettings::from(Options::from_url(tls_database_url())));
  c->execute_plain(sql);
}

bool fast_wakeup_enabled() {
  const char* value = std::getenv("DLOCK_TEST_FAST_WAKEUP");
  return value == nullptr || std::string(value) != "0";
}

std::string private_account() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string test = info != nullptr ? std::string(info->test_suite_name()) + "." + info->name() : "adhoc";
  // MySQL 8 allows 32 characters in a user name: a hash stands for the test.
  const std::string user = "dlock_a" + std::to_string(std::hash<std::string>{}(test) % 100'000'000) +
                           (fast_wakeup_enabled() ? "" : "q");
  execute_sql("CREATE USER IF NOT EXISTS '" + user + "'@'127.0.0.1' IDENTIFIED BY '" + private_account_password + "'");
  execute_sql("GRANT ALL PRIVILEGES ON *.* TO '" + user + "'@'127.0.0.1'");
  return user;
}

Options as_private_account(Options o) {
  o.user = private_account();
  o.password = private_account_password;
  return o;
}

int sessions_of(const std::string& user, bool only_bell_waits) {
  return std::stoi(query_scalar("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = '" + user + "'" +
                                (only_bell_waits ? std::string(" AND ") + kBellWaitCondition : std::string())));
}

std::string database_url_as(const std::string& user, const std::string& parameters) {
  std::string url = database_url_with(parameters);
  const auto scheme_end = url.find("://");
  const auto at = url.find('@');
  if (scheme_end == std::string::npos || at == std::string::npos || at < scheme_end) {
    throw std::runtime_error("test URL without user: " + url);
  }
  return url.substr(0, scheme_end + 3) + user + ":" + private_account_password + url.substr(at);
}

namespace {

std::string table_for_current_test(const std::string& hint) {
  std::string raw = hint;
  if (raw.empty()) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    raw = info != nullptr ? std::string(info->test_suite_name()) + "_" + info->name() : "adhoc";
  }
  // The fast_wakeup_off copy of a test may run at the same time as the
  // test itself: it gets a table of its own.
  std::string table = fast_wakeup_enabled() ? "t_" : "tq_";
  for (char c : raw) table.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  // At most 60, so the names of dlock 0.2's tables beside it (made by the
  // migration tests) fit MySQL's 64.
  if (table.size() > 60) table = table.substr(0, 48) + "_" + std::to_string(std::hash<std::string>{}(table) % 100000);
  return table;
}

std::unique_ptr<details::Connection> open_connection() {
  return details::Connection::open(details::ConnectionSettings::from(Options::from_url(database_url())));
}

}  // namespace

Options same_table(const Options& base) {
  Options o = Options::from_url(database_url());
  o.table = base.table;
  o.watchdog_timeout = base.watchdog_timeout;
  o.poll_interval = base.poll_interval;
  o.io_timeout = base.io_timeout;
  o.connect_timeout = base.connect_timeout;
  o.fast_wakeup = base.fast_wakeup;
  o.wakeup_connections = base.wakeup_connections;
  return o;
}

Options fresh_options(const std::string& table_hint) {
  Options o = Options::from_url(database_url());
  o.table = table_for_current_test(table_hint);
  o.watchdog_timeout = 1500ms;
  o.poll_interval = 200ms;
  o.io_timeout = 5s;
  o.connect_timeout = 3s;
  execute_sql("DROP TABLE IF EXISTS `" + o.table + "`");
  // dlock 0.2's tables, or the views a migration leaves in their place.
  for (const char* suffix : {"_sem", "_rw", "_rwr"}) {
    execute_sql("DROP TABLE IF EXISTS `" + o.table + suffix + "`");
    execute_sql("DROP VIEW IF EXISTS `" + o.table + suffix + "`");
  }
  return o;
}

Options slow_poll(Options o) {
  o.poll_interval = 30s;
  return o;
}

void execute_sql(const std::string& sql) { open_connection()->execute_plain(sql); }

std::string query_scalar(const std::string& sql) {
  const std::vector<std::string> column = query_column(sql);
  return column.empty() ? "" : column.front();
}

std::vector<std::string> query_column(const std::string& sql) {
  auto c = open_connection();
  // As text, never prepared: PROCESSLIST reads have crashed MariaDB 10.11
  // when re-executed as prepared statements, and one failed as prepared in
  // free_tmp_table ("Error on delete of '/tmp/#sql-temptable-...MAI'",
  // Errcode 2) with a hundred sessions listed (see Connection::scalar_plain).
  std::unique_ptr<sql::Statement> st(c->raw_for_session_change().createStatement());
  std::unique_ptr<sql::ResultSet> rs(st->executeQuery(sql));
  std::vector<std::string> out;
  while (rs->next()) out.push_back(rs->isNull(1) ? "" : std::string(rs->getString(1)));
  return out;
}

void kill_sessions_of(const std::string& user) {
  auto c = open_connection();
  for (const std::string& id : query_column("SELECT id FROM information_schema.PROCESSLIST WHERE user = '" + user + "'")) {
    try {
      c->execute_plain("KILL CONNECTION " + id);
    } catch (const std::exception&) {
      // already gone
    }
  }
}

bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
}

bool wait_for_waiters(const DatabaseDistributedLock& client, MetricKind kind, std::uint64_t n,
                      std::chrono::milliseconds timeout) {
  return wait_until([&] { return client.metrics().of(kind).waiting >= n; }, timeout);
}

bool wait_for_bell_waits(const std::string& user, int n, std::chrono::milliseconds timeout) {
  return wait_until([&] { return sessions_of(user, true) == n; }, timeout);
}

bool holds_throughout(const std::function<bool()>& condition, std::chrono::milliseconds window) {
  // The same loop as wait_until, with the condition turned round.
  return !wait_until([&] { return !condition(); }, window);
}

long database_pid() {
  // Asked afresh each time: a restart test changes it.
  FILE* f = popen(DLOCK_SOURCE_DIR "/scripts/db.sh pid 2>/dev/null", "r");
  if (f == nullptr) return 0;
  long pid = 0;
  if (std::fscanf(f, "%ld", &pid) != 1) pid = 0;
  pclose(f);
  if (pid == 0) {
    if (const char* env = std::getenv("DLOCK_TEST_DB_PID"); env != nullptr) pid = std::atol(env);
  }
  return pid;
}

}  // namespace dlock::test
