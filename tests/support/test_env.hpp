// Shared test support: options pointing at the private MariaDB started by
// scripts/db.sh, one fresh table per test, and deadline-bounded waiting.
#pragma once

#include <dlock/dlock.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <type_traits>
#include <vector>
#include <string>

namespace dlock::test {

using namespace std::chrono_literals;

// DLOCK_TEST_URL, or the URL scripts/db.sh prints by default; with
// fast_wakeup=false appended when DLOCK_TEST_FAST_WAKEUP=0 (the test
// command runs the database tests both ways).
std::string database_url();
// database_url() with more query parameters ("table=t&poll_interval_ms=9").
std::string database_url_with(const std::string& parameters);
// database_url_with() naming the table, lease and poll interval of `o`
// (for child processes that must share a test's table), plus `more`
// ("&machine_id=x").
std::string url_for(const Options& o, const std::string& more = "");
// False when DLOCK_TEST_FAST_WAKEUP=0.
bool fast_wakeup_enabled();

// An account of the running test's own (one per test and per copy, created
// on first use, every privilege), so a test can find or kill exactly its own
// sessions in PROCESSLIST while other tests run in parallel. Returns the user
// name; the password is private_account_password.
std::string private_account();
inline constexpr const char* private_account_password = "k";
// `o` signed in as private_account(), so the sessions of a client built
// from it can be told apart in PROCESSLIST.
Options as_private_account(Options o);
// The PROCESSLIST condition of a session blocked in a wait on a session
// bell (a waiter watching its holder's bell, fast wake-up).
inline constexpr const char* kBellWaitCondition = "STATE = 'User lock' AND INFO LIKE 'SELECT IF(IS_FREE_LOCK%'";
// Sessions of `user` (a private_account()) on the test server; with
// `only_bell_waits`, only those blocked in a wait on a bell.
int sessions_of(const std::string& user, bool only_bell_waits = false);
// Waits until exactly `n` sessions of `user` are blocked in a wait on a
// bell. Returns whether they were within `timeout`.
bool wait_for_bell_waits(const std::string& user, int n = 1,
                         std::chrono::milliseconds timeout = std::chrono::seconds(15));
// Kills every session of `user` (a private_account()) on the test server.
void kill_sessions_of(const std::string& user);
// database_url_with(parameters) signed in as `user` (a private_account()).
std::string database_url_as(const std::string& user, const std::string& parameters);

// Options for the test database with a table of this test's own (dropped
// first, so every test starts from an empty table), short leases and a fast
// poll so tests run in seconds.
Options fresh_options(const std::string& table_hint = "");
// Options for the same table as `base`, without dropping it again.
Options same_table(const Options& base);
// `o` with a 30 s poll: too slow to explain a prompt wake-up in a test.
Options slow_poll(Options o);

// Runs one statement on a connection of its own (test setup and checks).
void execute_sql(const std::string& sql);
// First column of the first row of a query, as a string ("" if no row / NULL),
// sent as text, never prepared (see query_column).
std::string query_scalar(const std::string& sql);
// The first column of every row of a query (sent as text, never prepared).
std::vector<std::string> query_column(const std::string& sql);

// Polls `condition` every few milliseconds until it holds or `timeout`
// passes. Returns whether it held.
bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout);
// Waits until `client` has at least `n` acquire calls of `kind` waiting
// (Metrics: refused at least once and not yet ended), so a release from
// then on is one the waiters must be woken by. Returns whether they were
// within `timeout`. Needs Options::metrics (the default).
bool wait_for_waiters(const DatabaseDistributedLock& client, MetricKind kind, std::uint64_t n,
                      std::chrono::milliseconds timeout = std::chrono::seconds(20));
// Checks `condition` every few milliseconds for `window`. Returns false as
// soon as it fails (for "this must not happen meanwhile" checks).
bool holds_throughout(const std::function<bool()>& condition, std::chrono::milliseconds window);

// The TLS-only test server (scripts/db.sh --tls): its URL (DLOCK_TEST_TLS_URL,
// else what that script prints by default: ssl_mode=verify_identity with the
// test CA), the directory of its throwaway certificates (DLOCK_TEST_TLS_DIR:
// ca.pem, other-ca.pem, client.pem, client-key.pem, capath/,
// crl/revoked.crl, crl/empty.crl), and one statement run there.
std::string tls_database_url();
std::string tls_certificates();
void execute_tls_sql(const std::string& sql);

// Process id of the private server (scripts/db.sh pid, else
// DLOCK_TEST_DB_PID); 0 if unknown.
long database_pid();

// Runs `fn` on a new thread (a different owner than the caller's) and
// returns its result, if any.
template <class Fn>
auto on_other_thread(Fn fn) {
  if constexpr (std::is_void_v<decltype(fn())>) {
    std::thread(fn).join();
  } else {
    decltype(fn()) result{};
    std::thread t([&] { result = fn(); });
    t.join();
    return result;
  }
}

}  // namespace dlock::test
