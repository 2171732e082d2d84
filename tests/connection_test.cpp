// Connections: the pool's bounds and session reset, and statements whose
// connection dies being reconciled instead of blindly re-run.
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <cppconn/connection.h>
#include <cppconn/statement.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sql/connection_pool.hpp"
#include "test_env.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::fresh_options;
using test::same_table;

std::string now_year(details::Connection& c) {
  std::unique_ptr<sql::ResultSet> rs(c.prepared("SELECT YEAR(NOW(6))").executeQuery());
  rs->next();
  return rs->getString(1);
}

TEST(Pool, ResetsASessionChangedByItsLastUser) {
  details::ConnectionPool pool(details::ConnectionSettings::from(Options::from_url(test::database_url())), 1);
  {
    auto c = pool.acquire();
    std::unique_ptr<sql::Statement> st(c->raw_for_session_change().createStatement());
    st->execute("SET timestamp = 1000000000");  // 2001: would bend NOW(6) and every expiry
    EXPECT_EQ(now_year(*c), "2001");
  }
  auto c = pool.acquire();
  EXPECT_NE(now_year(*c), "2001") << "a leftover SET timestamp survived the return to the pool";
  EXPECT_EQ(pool.open_count(), 1u);
}

TEST(Pool, NeverOpensMoreThanItsSizeAndHandsOutReturnedConnections) {
  details::ConnectionPool pool(details::ConnectionSettings::from(Options::from_url(test::database_url())), 2);
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        auto c = pool.acquire();
        EXPECT_LE(pool.open_count(), 2u);
        now_year(*c);
      }
      ++done;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(done.load(), 8);
  EXPECT_LE(pool.open_count(), 2u);
}

TEST(Pool, PrefersTheAskedForIdleConnection) {
  details::ConnectionPool pool(details::ConnectionSettings::from(Options::from_url(test::database_url())), 2);
  std::uint64_t first = 0;
  std::uint64_t second = 0;
  {
    auto a = pool.acquire();
    auto b = pool.acquire();
    first = a->session_key();
    second = b->session_key();
  }  // b returned last: plain LIFO would hand it out next
  auto c = pool.acquire(first);
  EXPECT_EQ(c->session_key(), first);
  auto d = pool.acquire(first);  // in use: any other
  EXPECT_EQ(d->session_key(), second);
}

TEST(Pool, SessionBoundJobRunsOnThatSessionWhenItIsIdle) {
  details::ConnectionPool pool(details::ConnectionSettings::from(Options::from_url(test::database_url())), 2);
  std::vector<std::uint64_t> ran_on;
  auto job = [&](details::Connection& c) { ran_on.push_back(c.session_key()); };
  std::uint64_t id = 0;
  {
    auto held = pool.acquire();
    id = held->session_key();
    EXPECT_FALSE(pool.try_acquire_session(id).has_value()) << "in use by this thread";
    pool.run_when_idle(id, job);
    EXPECT_TRUE(ran_on.empty()) << "must wait for the session to be returned";
  }  // returned: the job runs on it before anyone else gets it
  ASSERT_EQ(ran_on.size(), 1u);
  EXPECT_EQ(ran_on[0], id);
  pool.run_when_idle(id, job);  // idle now: runs at once, on the caller's thread
  ASSERT_EQ(ran_on.size(), 2u);
  EXPECT_EQ(ran_on[1], id);
  {
    auto again = pool.try_acquire_session(id);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ((*again)->session_key(), id);
  }
  pool.run_when_idle(id + 1'000'000, job);  // no such session: nothing to do
  EXPECT_EQ(ran_on.size(), 2u);
}

// A job posted while another thread takes and returns the session over
// and over is never dropped: it runs on its session, once, either at once
// or when the session comes back.
TEST(Pool, ASessionBoundJobIsNeverDroppedWhileOthersTakeTheSession) {
  details::ConnectionPool pool(details::ConnectionSettings::from(Options::from_url(test::database_url())), 1);
  std::uint64_t id = 0;
  {
    auto first = pool.acquire();
    id = first->session_key();
  }
  std::atomic<bool> stop{false};
  std::thread taker([&] {
    while (!stop.load()) {
      auto c = pool.acquire(id);
      std::this_thread::yield();
    }
  });
  constexpr int kJobs = 20'000;
  std::atomic<int> ran{0};
  std::atomic<int> elsewhere{0};
  for (int i = 0; i < kJobs; ++i) {
    pool.run_when_idle(id, [&](details::Connection& c) {
      if (c.session_key() != id) elsewhere.fetch_add(1);
      ran.fetch_add(1);
    });
  }
  stop = true;
  taker.join();
  { auto settle = pool.acquire(id); }  // the last posted jobs run at this return
  EXPECT_EQ(ran.load(), kJobs) << "jobs were dropped";
  EXPECT_EQ(elsewhere.load(), 0);
}

TEST(Pool, ExhaustedPoolGivesBackendErrorAfterIoTimeout) {
  auto settings = details::ConnectionSettings::from(Options::from_url(test::database_url()));
  settings.io_timeout = 300ms;
  details::ConnectionPool pool(settings, 1);
  auto held = pool.acquire();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(pool.acquire(), BackendError);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
}

TEST(Pool, MoreThreadsThanConnectionsStillMakeProgress) {
  Options options = fresh_options();
  options.pool_size = 2;
  DatabaseDistributedLock client(options);
  std::vector<std::thread> threads;
  std::atomic<int> acquired{0};
  for (int t = 0; t < 10; ++t) {
    threads.emplace_back([&, t] {
      const std::string name = "p" + std::to_string(t % 3);
      for (int i = 0; i < 5; ++i) {
        client.lock(name);
        ++acquired;
        client.unlock(name);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(acquired.load(), 50);
}

// An account of each test's own (test::private_account), so killing "this
// client's connections" cannot touch tests running in parallel: ctest runs
// each test of this fixture, and the fast_wakeup_off copy of each, as a
// process of its own, at the same time.
class KilledConnections : public ::testing::Test {
 protected:
  void SetUp() override {
    options_ = test::as_private_account(fresh_options());
    account_ = options_.user;
    options_.pool_size = 1;
  }
  void kill_all_of_the_account() { test::kill_sessions_of(account_); }
  std::string account_;
  Options options_;
};

TEST_F(KilledConnections, AcquireAndReleaseRecoverWithoutDriftingTheCount) {
  DatabaseDistributedLock client(options_);
  DatabaseDistributedLock other(same_table(options_));
  client.lock("k");  // warm the pooled connection
  kill_all_of_the_account();
  client.lock("k");  // reentrant acquire on a dead connection
  EXPECT_EQ(client.hold_count("k"), 2);
  kill_all_of_the_account();
  client.unlock("k");
  EXPECT_EQ(test::query_scalar("SELECT state FROM `" + options_.table + "` WHERE lock_name = 'k'"), "1");
  kill_all_of_the_account();
  client.unlock("k");
  EXPECT_TRUE(other.try_lock("k")) << "the count drifted: the lock stayed held";
  other.unlock("k");
  kill_all_of_the_account();
  client.lock("k");  // fresh acquire on a dead connection
  EXPECT_EQ(client.hold_count("k"), 1);
  client.unlock("k");
  EXPECT_FALSE(other.is_locked("k"));
}

TEST_F(KilledConnections, WatchdogReplacesItsKilledConnection) {
  options_.watchdog_timeout = 900ms;
  DatabaseDistributedLock client(options_);
  DatabaseDistributedLock other(same_table(options_));
  client.lock("wd");
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(400ms);
    kill_all_of_the_account();
  }
  // Renewals every 300 ms: one failure per kill at most, so the lease holds.
  std::this_thread::sleep_for(1s);
  EXPECT_FALSE(other.try_lock("wd"));
  EXPECT_TRUE(client.is_held_by_current_thread("wd"));
  client.unlock("wd");
}

// A loopback port nothing listens on (bound, then closed: connections to it
// are refused at once).
unsigned closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  return ok ? ntohs(a.sin_port) : 1;
}

// The database's options, with a dead server first and the database as the
// failover server.
Options dead_first(Options options) {
  options.failover_servers = {{options.host, options.port}};
  options.host = "127.0.0.1";
  options.port = closed_port();
  return options;
}

TEST(Failover, AServerThatCannotBeReachedIsSkippedAndNotReturnedTo) {
  const auto settings = details::ConnectionSettings::from(dead_first(fresh_options()));
  ASSERT_NE(settings.servers, nullptr);
  int moves = 0;
  settings.servers->on_move([&](const details::ServerChoice::Server&, const details::ServerChoice::Server&) { ++moves; });
  auto c = details::Connection::open(settings);
  EXPECT_EQ(c->server_index(), 1u);
  EXPECT_EQ(settings.servers->current(), 1u);
  auto again = details::Connection::open(settings);
  EXPECT_EQ(again->server_index(), 1u) << "the next connection goes straight to the server that works";
  EXPECT_EQ(moves, 1);
  // The profile was found out on the server it moved to: it says what that
  // server says of itself (a single MariaDB, or a node of the Galera test bed
  // under scripts/cluster-test.sh).
  std::unique_ptr<sql::ResultSet> wsrep(
      c->prepared("SELECT COALESCE(@@global.wsrep_on, 0)").executeQuery());
  ASSERT_TRUE(wsrep->next());
  EXPECT_EQ(c->profile().galera, wsrep->getInt(1) == 1);
}

TEST(Failover, ARefusedAccountIsNoReasonToMove) {
  Options options = fresh_options();
  options.password += "-wrong";
  options.failover_servers = {{options.host, options.port}};
  const auto settings = details::ConnectionSettings::from(options);
  int moves = 0;
  settings.servers->on_move([&](const details::ServerChoice::Server&, const details::ServerChoice::Server&) { ++moves; });
  try {
    details::Connection::open(settings);
    ADD_FAILURE() << "a wrong password connected";
  } catch (const BackendError& e) {
    EXPECT_FALSE(details::is_connection_error(e.code())) << e.what();
  }
  EXPECT_EQ(moves, 0) << "every node of a cluster would refuse the account alike";
  EXPECT_EQ(settings.servers->current(), 0u);
}

// A second private server (scripts/db.sh in a directory of its own), made
// read-only like a replica. Stopped and deleted when the test ends.
class ReadOnlyServer {
 public:
  ReadOnlyServer()
      : dir_(std::string(DLOCK_TEST_WORK_DIR) + "/read-only-db-" + std::to_string(::getpid())), port_(closed_port()) {
    db("wipe");  // one a crashed run left behind
    ok_ = db("start") == 0 && db("client -e 'SET GLOBAL read_only = 1'") == 0;
  }
  ~ReadOnlyServer() { db("wipe"); }
  ReadOnlyServer(const ReadOnlyServer&) = delete;
  ReadOnlyServer& operator=(const ReadOnlyServer&) = delete;
  bool ok() const { return ok_; }
  unsigned port() const { return port_; }

 private:
  int db(const std::string& command) const {
    const std::string line = "DLOCK_DB_DIR='" + dir_ + "' DLOCK_DB_PORT=" + std::to_string(port_) + " bash '" +
                             DLOCK_SOURCE_DIR "/scripts/db.sh' " + command + " >/dev/null 2>&1";
    return std::system(line.c_str());
  }
  std::string dir_;
  unsigned port_;
  bool ok_ = false;
};

TEST(Failover, AReadOnlyServerIsRefusedAtConnectAndTheClientMovesOn) {
  const ReadOnlyServer replica;
  ASSERT_TRUE(replica.ok()) << "could not start a second private server";
  const Options options = fresh_options();
  Options replica_first = options;
  replica_first.host = "127.0.0.1";
  replica_first.port = replica.port();
  Options alone = replica_first;
  replica_first.failover_servers = {{options.host, options.port}};
  try {
    details::Connection::open(details::ConnectionSettings::from(alone));
    ADD_FAILURE() << "a read-only server was accepted";
  } catch (const BackendError& e) {
    EXPECT_EQ(e.code(), details::mysql_error::kReadOnly);
    EXPECT_NE(std::string(e.what()).find("read-only"), std::string::npos) << e.what();
    EXPECT_TRUE(details::is_connection_error(e.code())) << "refused like an unreachable server";
  }
  DatabaseDistributedLock client(replica_first);
  DatabaseDistributedLock plain(same_table(options));
  client.lock("replica");
  EXPECT_FALSE(plain.try_lock("replica")) << "the client moved on to the writable server";
  Permit permit = client.get_semaphore("replica", 1).acquire();
  EXPECT_FALSE(plain.get_semaphore("replica", 1).try_acquire().has_value());
  permit.release();
  client.unlock("replica");
  EXPECT_TRUE(plain.try_lock("replica"));
  plain.unlock("replica");
}

TEST(Failover, AClientWhoseFirstServerIsDownLocksThroughTheNext) {
  const Options options = fresh_options();
  DatabaseDistributedLock client(dead_first(options));
  DatabaseDistributedLock plain(same_table(options));
  client.lock("failover");
  EXPECT_FALSE(plain.try_lock("failover")) << "both clients see the same lock row";
  EXPECT_GT(client.fencing_token("failover"), 0u);
  client.unlock("failover");
  EXPECT_TRUE(plain.try_lock("failover"));
  plain.unlock("failover");
}

}  // namespace
}  // namespace dlock
