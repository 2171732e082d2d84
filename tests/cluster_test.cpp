// Failover on the Galera test bed (scripts/cluster.sh): node 1 is killed
// while clients use it, through a multi-host URL (Options::failover_servers)
// and through HAProxy. Run by scripts/cluster-test.sh, which starts the
// cluster and sets DLOCK_CLUSTER_SCRIPT and DLOCK_TEST_URL (node 1); skipped
// anywhere else (the test command excludes the "cluster" label).
//
// Besides its assertions, the test prints the availability the issue asks
// to report: from node 1's death to the next successful lock through each
// path, beside a raw write on node 2 measured in the same run (the time the
// cluster itself needs to evict the dead node).
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <cppconn/exception.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "sql/connection.hpp"
#include "test_env.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string cluster_script() {
  const char* s = std::getenv("DLOCK_CLUSTER_SCRIPT");
  return s != nullptr ? s : "";
}

// Runs scripts/cluster.sh with `args`; its output goes to the test's log.
bool cluster(const std::string& args) { return std::system((cluster_script() + " " + args + " >&2").c_str()) == 0; }

std::string cluster_url(const std::string& which) {
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen((cluster_script() + " url " + which).c_str(), "r"), pclose);
  if (!p) return out;
  char buf[512];
  while (fgets(buf, sizeof buf, p.get()) != nullptr) out += buf;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

// `base` (table, leases, timeouts) pointed at the servers of `url`.
Options at(const Options& base, const std::string& url) {
  const Options where = Options::from_url(url);
  Options o = base;
  o.host = where.host;
  o.port = where.port;
  o.failover_servers = where.failover_servers;
  return o;
}

unsigned port_of(details::Connection& c) {
  std::unique_ptr<sql::ResultSet> rs(c.prepared("SELECT @@port").executeQuery());
  return rs->next() ? rs->getUInt(1) : 0;
}

double seconds_since(Clock::time_point t0, Clock::time_point t) {
  return std::chrono::duration<double>(t - t0).count();
}

class Failover : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cluster_script().empty()) {
      GTEST_SKIP() << "DLOCK_CLUSTER_SCRIPT is not set (scripts/cluster-test.sh sets it)";
    }
    ASSERT_TRUE(cluster("start")) << "the cluster did not come up";
  }
  void TearDown() override {
    if (!cluster_script().empty()) {
      EXPECT_TRUE(cluster("start")) << "the cluster did not come back whole";
    }
  }
};

// Until `deadline`, tries `attempt` every 20 ms; the time of its first success.
template <class Attempt>
std::optional<Clock::time_point> first_success(Attempt attempt, Clock::time_point deadline) {
  while (Clock::now() < deadline) {
    try {
      if (attempt()) return Clock::now();
    } catch (const std::exception&) {
      // The node died under this attempt, or the cluster is still evicting it.
    }
    std::this_thread::sleep_for(20ms);
  }
  return std::nullopt;
}

TEST_F(Failover, NodeDeathFailsOverOnceKeepsFencesAndWakesWaiters) {
  Options base = test::fresh_options();
  base.watchdog_timeout = 60s;  // a hold that outlives the test: only a release frees it
  // The hold below was taken on node 1, and its bell died with node 1's
  // session: after the failover its waiter is woken by the poll, not the
  // release (see README "On a Galera cluster"). A poll of 2 s against a 60 s
  // lease still tells "woken soon after the release" from "slept out the lease".
  base.poll_interval = 2s;
  base.io_timeout = 10s;
  base.connect_timeout = 2s;
  const Options multi = at(base, cluster_url("all"));
  ASSERT_EQ(multi.failover_servers.size(), 2u);
  const Options proxied = at(base, cluster_url("proxy"));
  const Options node2 = at(base, cluster_url("2"));

  DatabaseDistributedLock holder_client(multi);
  DatabaseDistributedLock waiter_client(multi);
  DatabaseDistributedLock multi_probe(multi);
  DatabaseDistributedLock proxy_probe(proxied);

  // The choice of servers, seen at the connection level.
  const auto settings = details::ConnectionSettings::from(multi);
  ASSERT_EQ(port_of(*details::Connection::open(settings)), multi.port) << "starts on the first server";

  // A raw write on node 2: the floor (the cluster's own eviction time).
  auto floor_connection = details::Connection::open(details::ConnectionSettings::from(node2));
  floor_connection->execute_plain(
      "CREATE TABLE IF NOT EXISTS dlock_failover_floor (id INT PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB");

  auto held = holder_client.get_lock("held");
  held.lock();
  const std::uint64_t fence_before = held.fencing_token();
  std::promise<std::uint64_t> waiter_fence;
  std::jthread waiter([&] {
    auto lock = waiter_client.get_lock("held");
    bool got = false;
    try {
      got = lock.try_lock_for(90s);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "the waiter got an error instead of the lock: " << e.what();
    }
    waiter_fence.set_value(got ? lock.fencing_token() : 0);
    if (got) lock.unlock();
  });
  // Refused once: it watches the holder's bell on node 1.
  ASSERT_TRUE(test::wait_for_waiters(waiter_client, MetricKind::kLock, 1));

  const auto killed = Clock::now();
  ASSERT_TRUE(cluster("kill 1"));
  const auto give_up = killed + 60s;
  // The first moment `client` can take a lock (a new name per attempt).
  const auto first_lock = [&](DatabaseDistributedLock& client, const std::string& prefix) {
    int n = 0;
    return first_success(
        [&] {
          auto lock = client.get_lock(prefix + std::to_string(++n));
          const bool got = lock.try_lock();
          if (got) lock.unlock();
          return got;
        },
        give_up);
  };
  auto floor_at = std::async(std::launch::async, [&] {
    return first_success(
        [&] {
          auto& ps = floor_connection->prepared(
              "INSERT INTO dlock_failover_floor VALUES (1, 1) ON DUPLICATE KEY UPDATE n = n + 1");
          ps.executeUpdate();
          return true;
        },
        give_up);
  });
  auto proxy_at = std::async(std::launch::async, [&] { return first_lock(proxy_probe, "proxy-"); });
  const auto multi_at = first_lock(multi_probe, "multi-");
  const auto floor_time = floor_at.get();
  const auto proxy_time = proxy_at.get();
  ASSERT_TRUE(floor_time.has_value()) << "node 2 took no write within 60 s of node 1's death";
  ASSERT_TRUE(multi_at.has_value()) << "no lock through the multi-host URL within 60 s";
  ASSERT_TRUE(proxy_time.has_value()) << "no lock through HAProxy within 60 s";
  const double floor_s = seconds_since(killed, *floor_time);
  const double multi_s = seconds_since(killed, *multi_at);
  const double proxy_s = seconds_since(killed, *proxy_time);
  std::printf("availability after kill -9 of node 1: raw write on node 2 %.2f s (the cluster's eviction); "
              "multi-host URL %.2f s (+%.2f); HAProxy %.2f s (+%.2f)\n",
              floor_s, multi_s, multi_s - floor_s, proxy_s, proxy_s - floor_s);
  // The goal is eviction + 1 s; the assertion leaves room for a loaded VM.
  EXPECT_LT(multi_s, floor_s + 3.0);
  EXPECT_LT(proxy_s, floor_s + 5.0);

  // New connections go to node 2 now.
  EXPECT_EQ(port_of(*details::Connection::open(settings)), multi.failover_servers[0].port);

  // The hold survived on node 2 (the watchdog renews it there); after its
  // release the waiter in the other client gets it at the next poll at the
  // latest, and the waiter's hold is a new one with a greater token.
  auto waiter_got = waiter_fence.get_future();
  EXPECT_EQ(waiter_got.wait_for(0s), std::future_status::timeout) << "the waiter got a lock that was held";
  const auto released = Clock::now();
  ASSERT_NO_THROW(held.unlock());
  ASSERT_EQ(waiter_got.wait_for(20s), std::future_status::ready) << "the waiter was not woken by the release";
  const double woken_s = seconds_since(released, Clock::now());
  std::printf("a waiter in another client, on the new server, had the lock %.3f s after the release\n", woken_s);
  EXPECT_LT(woken_s, 6.0) << "not woken by the release or the next poll";
  const std::uint64_t fence_after = waiter_got.get();
  EXPECT_GT(fence_after, fence_before);
  waiter.join();
  held.lock();
  EXPECT_GT(held.fencing_token(), fence_after) << "fences never repeat across the failover";
  held.unlock();

  // Holds taken after the move have their bells on node 2: a release
  // there wakes the waiter in the other client at once. Five rounds, each
  // well under the 2 s poll (a poll-woken waiter would pass one round in
  // four by chance).
  double slowest = 0;
  for (int round = 0; round < 5; ++round) {
    auto mine = holder_client.get_lock("after-move");
    mine.lock();
    std::promise<Clock::time_point> got;
    auto got_at = got.get_future();
    std::jthread other([&] {
      auto theirs = waiter_client.get_lock("after-move");
      const bool ok = theirs.try_lock_for(30s);
      got.set_value(ok ? Clock::now() : Clock::time_point{});
      if (ok) theirs.unlock();
    });
    // Refused, and watching the bell.
    ASSERT_TRUE(test::wait_for_waiters(waiter_client, MetricKind::kLock, 1));
    const auto released_at = Clock::now();
    mine.unlock();
    const auto at = got_at.get();
    ASSERT_NE(at, Clock::time_point{}) << "round " << round << ": the waiter never got the lock";
    slowest = std::max(slowest, seconds_since(released_at, at));
  }
  std::printf("after the move, the slowest of 5 cross-client handoffs on node 2: %.3f s after the release\n", slowest);
  EXPECT_LT(slowest, 0.5) << "the bells do not ring on the new server";

  // Node 1 comes back (IST): the client does not move back to it.
  ASSERT_TRUE(cluster("restart 1"));
  EXPECT_EQ(port_of(*details::Connection::open(settings)), multi.failover_servers[0].port)
      << "moved back to the old server";
  auto again = holder_client.get_lock("after");
  EXPECT_TRUE(again.try_lock());
  again.unlock();
}

}  // namespace
}  // namespace dlock

namespace dlock {
namespace {

// A guarded transaction on node 2 and a take of its hold on node 1 never
// both commit (docs/guarded-transactions.md): the guard writes the hold's
// row, so Galera's certification aborts one of them. Here the guard runs
// while the hold is live; the hold's lease then ends and a client on node 1
// takes the name; the transaction, still open on node 2, must not commit.
TEST_F(Failover, AGuardedTransactionAndATakeOnAnotherNodeNeverBothCommit) {
  Options base = test::fresh_options();
  const Options node1 = at(base, cluster_url("1"));
  const Options node2 = at(base, cluster_url("2"));
  DatabaseDistributedLock holder(node1);
  DatabaseDistributedLock taker(node1);
  auto data = details::Connection::open(details::ConnectionSettings::from(node2));
  data->execute_plain("DROP TABLE IF EXISTS `" + base.table + "_data`");
  data->execute_plain("CREATE TABLE `" + base.table + "_data` (id INT PRIMARY KEY, counter INT NOT NULL) ENGINE=InnoDB");
  data->execute_plain("INSERT INTO `" + base.table + "_data` VALUES (1, 0)");
  Lock lock = holder.get_lock("account", Owner::create());
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE(round);
    ASSERT_TRUE(lock.try_lock(5s, 800ms));
    data->execute_plain("START TRANSACTION");
    data->execute_plain("UPDATE `" + base.table + "_data` SET counter = counter + 1 WHERE id = 1");
    data->execute_plain(lock.guard_sql());  // passes: the hold is live (node 2 sees node 1's take)
    // The lease ends; node 1 knows nothing of node 2's row lock.
    ASSERT_TRUE(taker.try_lock("account", 10s)) << "the take on node 1";
    bool committed = true;
    try {
      data->execute_plain("COMMIT");
    } catch (const sql::SQLException& e) {
      committed = false;
      EXPECT_EQ(e.getErrorCode(), details::mysql_error::kDeadlock) << e.what();  // certification failure
    }
    EXPECT_FALSE(committed) << "the guarded transaction committed after the hold was taken on another node";
    taker.unlock("account");
    lock.unlock();
    data = details::Connection::open(details::ConnectionSettings::from(node2));
  }
  EXPECT_EQ(test::query_scalar("SELECT COUNT(*) FROM `" + base.table + "_data` WHERE counter > 0"), "0");
}

}  // namespace
}  // namespace dlock
