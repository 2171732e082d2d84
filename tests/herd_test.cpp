// Herds: many clients (each its own DatabaseDistributedLock) waiting for one
// name. A release wakes the one client whose turn it is (the lock: the
// front of the name's line; the fair lock: the client granted), waiting
// costs about one statement per poll interval, and a client whose wake-up
// is cut (its wake-up connection killed, its process paused) delays the
// others by at most a poll interval.
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>
#include <signal.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sql/connection.hpp"
#include "support/child_process.hpp"
#include "support/test_env.hpp"

using namespace dlock;
using namespace std::chrono_literals;
using test::fresh_options;
using test::same_table;
using Clock = std::chrono::steady_clock;

namespace {

// The two kinds whose clients take turns.
enum class Flavor { kLock, kFair };

Lock lock_of(DatabaseDistributedLock& client, Flavor flavor, const std::string& name) {
  return flavor == Flavor::kFair ? client.get_fair_lock(name) : client.get_lock(name);
}

MetricKind metric_of(Flavor flavor) { return flavor == Flavor::kFair ? MetricKind::kFairLock : MetricKind::kLock; }

// An account of the test's own besides test::private_account(), for the
// herd, so the other waiters' sessions are not counted with it.
Options as_herd_account(Options o) {
  const std::string user = test::private_account() + "h";
  test::execute_sql("CREATE USER IF NOT EXISTS '" + user + "'@'127.0.0.1' IDENTIFIED BY '" +
                    test::private_account_password + "'");
  test::execute_sql("GRANT ALL PRIVILEGES ON *.* TO '" + user + "'@'127.0.0.1'");
  o.user = user;
  o.password = test::private_account_password;
  return o;
}

// `n` waiting clients, started one after another, each only once the one
// before it waits on the database (its wake-up connection blocked), so
// their order is known: the line's, or the queue's. They sign in as one
// account of the test's own, so their sessions can be counted and killed.
class Herd {
 public:
  Herd(const Options& base, Flavor flavor, const std::string& name, int n) : flavor_(flavor), name_(name) {
    Options o = as_herd_account(same_table(base));
    o.logger = base.logger;  // a test may watch what the herd logs
    user_ = o.user;
    for (int i = 0; i < n; ++i) clients_.push_back(std::make_unique<DatabaseDistributedLock>(o));
  }
  ~Herd() {
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

  // Starts every waiter: each takes the name once (unlocking at once unless
  // `hold` says to wait for release()), in the order of its index.
  void start(bool hold = false) {
    hold_ = hold;
    for (std::size_t i = 0; i < clients_.size(); ++i) {
      threads_.emplace_back([this, i] { run(i); });
      ASSERT_TRUE(test::wait_for_waiters(*clients_[i], metric_of(flavor_), 1)) << "waiter " << i;
      ASSERT_TRUE(test::wait_for_bell_waits(user_, static_cast<int>(i) + 1)) << "waiter " << i << " not watching";
    }
  }
  // Lets the waiter holding the name (with `hold`) unlock it.
  void release() {
    std::lock_guard<std::mutex> guard(mutex_);
    ++releases_;
    released_.notify_all();
  }
  // The indexes of the waiters that have had the name, in order.
  std::vector<std::size_t> order() const {
    std::lock_guard<std::mutex> guard(mutex_);
    return order_;
  }
  bool all_done(std::chrono::milliseconds timeout) const {
    return test::wait_until([&] { return order().size() == clients_.size(); }, timeout);
  }
  DatabaseDistributedLock& client(std::size_t i) { return *clients_[i]; }
  std::size_t size() const { return clients_.size(); }
  const std::string& user() const { return user_; }
  // Bell wake-ups each client has had so far.
  std::vector<std::uint64_t> bell_wakes() const {
    std::vector<std::uint64_t> out;
    for (const auto& c : clients_) out.push_back(c->metrics().wakeups[index(WakeSource::kBell)]);
    return out;
  }
  std::uint64_t statements(std::size_t i) const { return clients_[i]->metrics().statements; }

 private:
  void run(std::size_t i) {
    Lock lock = lock_of(*clients_[i], flavor_, name_);
    if (!lock.try_lock_for(60s)) return;
    std::unique_lock<std::mutex> guard(mutex_);
    order_.push_back(i);
    const std::size_t mine = order_.size();
    if (hold_) released_.wait(guard, [&] { return releases_ >= mine; });
    guard.unlock();
    lock.unlock();
  }

  const Flavor flavor_;
  const std::string name_;
  std::string user_;
  std::vector<std::unique_ptr<DatabaseDistributedLock>> clients_;
  std::vector<std::thread> threads_;
  bool hold_ = false;
  mutable std::mutex mutex_;
  std::condition_variable released_;
  std::vector<std::size_t> order_;
  std::size_t releases_ = 0;
};

class Turns : public ::testing::TestWithParam<Flavor> {
 protected:
  void SetUp() override {
    if (!test::fast_wakeup_enabled()) GTEST_SKIP() << "tests fast wake-up itself; runs with it on";
  }
};

std::string flavor_name(const ::testing::TestParamInfo<Flavor>& info) {
  return info.param == Flavor::kFair ? "fair" : "lock";
}

}  // namespace

// With a 30 s poll only a wake-up can hand the name on in time: each
// release must wake the next client, and only that one.
TEST_P(Turns, EachReleaseWakesOneWaitingClientAndEveryClientGetsItsTurn) {
  const Options o = test::slow_poll(fresh_options());
  DatabaseDistributedLock holder(o);
  Lock first = lock_of(holder, GetParam(), "herd");
  first.lock();
  Herd herd(o, GetParam(), "herd", 6);
  herd.start(/*hold=*/true);
  for (std::size_t turn = 0; turn < herd.size(); ++turn) {
    const std::vector<std::uint64_t> before = herd.bell_wakes();
    const auto released_at = Clock::now();
    if (turn == 0) {
      first.unlock();
    } else {
      herd.release();
    }
    ASSERT_TRUE(test::wait_until([&] { return herd.order().size() == turn + 1; }, 10s)) << "turn " << turn;
    EXPECT_LT(Clock::now() - released_at, 5s) << "turn " << turn;
    // A window for wake-ups of clients whose turn it is not (all of them
    // were woken at once before clients took turns).
    std::this_thread::sleep_for(300ms);
    const std::vector<std::uint64_t> after = herd.bell_wakes();
    std::vector<std::size_t> woken;
    for (std::size_t i = 0; i < after.size(); ++i)
      if (after[i] != before[i]) woken.push_back(i);
    EXPECT_LE(woken.size(), 1u) << "turn " << turn << ": " << woken.size() << " clients woken by one release";
  }
  herd.release();
  ASSERT_TRUE(herd.all_done(10s));
  // The fair lock in queue order; the lock in the line's (first come,
  // first served), which is the same here.
  const std::vector<std::size_t> order = herd.order();
  for (std::size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], i) << "turn " << i;
}

// Every waiting client keeps one bell connection blocked, and waiting
// costs each about one statement per poll interval.
TEST_P(Turns, WaitingCostsAboutOneStatementPerPollIntervalPerClient) {
  Options o = fresh_options();
  o.poll_interval = 200ms;
  o.watchdog_timeout = 30s;  // the holder's renewals are not in the window
  DatabaseDistributedLock holder(o);
  Lock first = lock_of(holder, GetParam(), "load");
  first.lock();
  Herd herd(o, GetParam(), "load", 5);
  herd.start();
  std::vector<std::uint64_t> before;
  for (std::size_t i = 0; i < herd.size(); ++i) before.push_back(herd.statements(i));
  const auto window = 3s;
  std::this_thread::sleep_for(window);
  const double polls = std::chrono::duration<double>(window) / o.poll_interval;
  for (std::size_t i = 0; i < herd.size(); ++i) {
    const double per_poll = static_cast<double>(herd.statements(i) - before[i]) / polls;
    EXPECT_LE(per_poll, 1.2) << "client " << i;
  }
  // One blocked wake-up connection per client, whatever its place.
  EXPECT_EQ(test::sessions_of(herd.user(), true), static_cast<int>(herd.size()));
  first.unlock();
  ASSERT_TRUE(herd.all_done(20s));
}

// The client whose turn it is has its wake-up connection killed: the line
// (or queue) goes on to the others at once, or by their poll at the latest.
TEST_P(Turns, KillingTheWakeupConnectionOfTheClientWhoseTurnItIsStopsNobody) {
  Options o = fresh_options();
  o.poll_interval = 1s;
  DatabaseDistributedLock holder(o);
  Lock first = lock_of(holder, GetParam(), "cut");
  first.lock();
  // The first waiter signs in as an account of its own: its wake-up
  // connection is the one killed.
  const Options front_options = test::as_private_account(same_table(o));
  DatabaseDistributedLock front(front_options);
  auto front_done = std::async(std::launch::async, [&] {
    Lock l = lock_of(front, GetParam(), "cut");
    if (!l.try_lock_for(60s)) return false;
    l.unlock();
    return true;
  });
  ASSERT_TRUE(test::wait_for_waiters(front, metric_of(GetParam()), 1));
  ASSERT_TRUE(test::wait_for_bell_waits(front_options.user, 1));
  Herd herd(o, GetParam(), "cut", 3);
  herd.start();
  const std::string waiting = test::query_scalar(
      std::string("SELECT ID FROM information_schema.PROCESSLIST WHERE ") + test::kBellWaitCondition +
      " AND USER = '" + front_options.user + "'");
  ASSERT_FALSE(waiting.empty());
  test::execute_sql("KILL CONNECTION " + waiting);
  const auto released_at = Clock::now();
  first.unlock();
  ASSERT_TRUE(herd.all_done(15s));
  EXPECT_LT(Clock::now() - released_at, 10s);
  EXPECT_TRUE(front_done.get());
}

// A waiting client in another process is stopped (SIGSTOP) while it is the
// one whose turn it is: the others get the name by their poll at the
// latest (the lock: the stopped client keeps its place in line; the fair
// lock: its grant's short lease runs out).
TEST_P(Turns, AStoppedProcessWhoseTurnItIsDelaysTheOthersByAboutAPollOrItsGrant) {
  Options o = fresh_options();
  o.poll_interval = 1s;
  DatabaseDistributedLock holder(o);
  Lock first = lock_of(holder, GetParam(), "stop");
  first.lock();
  const std::string user = test::private_account();
  test::ChildProcess child(test::helper_path(),
                           {test::database_url_as(user, "table=" + o.table + "&poll_interval_ms=1000"),
                            GetParam() == Flavor::kFair ? "wait-fair" : "wait", "stop", "60000"});
  ASSERT_TRUE(child.wait_for_line("waiting", 20s));
  ASSERT_TRUE(test::wait_for_bell_waits(user, 1));
  Herd herd(o, GetParam(), "stop", 3);
  herd.start();
  child.kill(SIGSTOP);
  const auto released_at = Clock::now();
  first.unlock();
  ASSERT_TRUE(herd.all_done(30s));
  EXPECT_LT(Clock::now() - released_at, 15s);
  child.kill(SIGCONT);
  EXPECT_TRUE(child.wait_for_line("acquired", 30s));
  child.wait(10s);
}

INSTANTIATE_TEST_SUITE_P(Herd, Turns, ::testing::Values(Flavor::kLock, Flavor::kFair), flavor_name);

// A fair queue longer than the server's deadlock search depth (a chain of
// 32 lock waits is reported as a deadlock, 1213): its clients do not wait
// entry behind entry all the way back (wake_policy.hpp, chain_target), so no
// wait fails as a deadlock, and the queue still drains in its order.
TEST(Herd, AFairQueueLongerThanTheServersDeadlockDepthDrainsWithoutDeadlocks) {
  if (!test::fast_wakeup_enabled()) GTEST_SKIP() << "tests the wait chain of fast wake-up";
  std::ostringstream seen;
  auto logger = std::make_shared<spdlog::logger>("herd_deadlocks", std::make_shared<spdlog::sinks::ostream_sink_mt>(seen));
  logger->set_level(spdlog::level::debug);
  Options o = test::slow_poll(fresh_options());
  DatabaseDistributedLock holder(o);
  Lock first = holder.get_fair_lock("long");
  first.lock();
  Options waiting = o;
  waiting.logger = logger;
  Herd herd(waiting, Flavor::kFair, "long", 100);
  herd.start();
  first.unlock();
  ASSERT_TRUE(herd.all_done(60s));
  const std::vector<std::size_t> order = herd.order();
  for (std::size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], i) << "turn " << i;
  logger->flush();
  EXPECT_EQ(seen.str().find("1213"), std::string::npos) << seen.str().substr(0, 2000);
}

// A waiting client watches through one wake-up connection per waited name,
// at most Options::wakeup_connections of them, however many names it waits
// for; the others are left to the poll.
TEST(Herd, AClientWaitingForManyNamesUsesAtMostItsWakeupConnections) {
  if (!test::fast_wakeup_enabled()) GTEST_SKIP() << "counts wake-up connections";
  Options o = fresh_options();
  o.poll_interval = 300ms;
  DatabaseDistributedLock holder(o);
  Options waiting_options = test::as_private_account(same_table(o));
  waiting_options.pool_size = 16;
  DatabaseDistributedLock waiting(waiting_options);
  constexpr int kNames = 10;
  for (int i = 0; i < kNames; ++i) holder.lock("n" + std::to_string(i));
  std::vector<std::thread> threads;
  for (int i = 0; i < kNames; ++i) {
    threads.emplace_back([&, i] {
      const std::string name = "n" + std::to_string(i);
      if (waiting.try_lock(name, 60s)) waiting.unlock(name);
    });
  }
  ASSERT_TRUE(test::wait_for_waiters(waiting, MetricKind::kLock, kNames));
  ASSERT_TRUE(test::wait_for_bell_waits(waiting_options.user, static_cast<int>(waiting_options.wakeup_connections)));
  EXPECT_TRUE(test::holds_throughout(
      [&] { return test::sessions_of(waiting_options.user, true) <= static_cast<int>(waiting_options.wakeup_connections); },
      1s));
  for (int i = 0; i < kNames; ++i) holder.unlock("n" + std::to_string(i));
  for (auto& t : threads) t.join();
}

// A server (here: the account) at its connection limit refuses a connection
// outright; the client asks again within connect_timeout rather than fail
// at the first refusal.
TEST(ConnectionLimit, ARefusedConnectIsTriedAgainWithinConnectTimeout) {
  const Options base = fresh_options();
  Options o = test::as_private_account(same_table(base));
  o.connect_timeout = 5s;
  test::execute_sql("ALTER USER '" + o.user + "'@'127.0.0.1' WITH MAX_USER_CONNECTIONS 3");
  {
    // Every connection the account may have, taken for 700 ms.
    std::vector<std::unique_ptr<details::Connection>> occupants;
    for (int i = 0; i < 3; ++i) occupants.push_back(details::Connection::open(details::ConnectionSettings::from(o)));
    auto built = std::async(std::launch::async, [&] {
      DatabaseDistributedLock client(o);
      return client.is_locked("x");
    });
    std::this_thread::sleep_for(700ms);
    occupants.clear();
    EXPECT_FALSE(built.get());
  }
  // Never free within connect_timeout: BackendError after it, not at once.
  test::execute_sql("ALTER USER '" + o.user + "'@'127.0.0.1' WITH MAX_USER_CONNECTIONS 1");
  auto occupant = details::Connection::open(details::ConnectionSettings::from(o));
  o.connect_timeout = 2s;
  const auto started = Clock::now();
  try {
    DatabaseDistributedLock client(o);
    ADD_FAILURE() << "connected past the account's limit";
  } catch (const BackendError& e) {
    EXPECT_TRUE(details::is_connection_limit(e.code())) << e.what();
  }
  const auto took = Clock::now() - started;
  EXPECT_GE(took, 1500ms);
  EXPECT_LT(took, 6s);
}

// A waiter whose client cannot open a wake-up connection (the account's
// limit is taken by its pool and its io thread) still gets the name, by
// its poll.
TEST(ConnectionLimit, AWaiterWithoutAWakeupConnectionGetsTheNameByItsPoll) {
  Options o = fresh_options();
  o.poll_interval = 300ms;
  DatabaseDistributedLock holder(o);
  holder.lock("limit");
  Options limited = test::as_private_account(same_table(o));
  limited.pool_size = 1;
  limited.connect_timeout = 1s;
  test::execute_sql("ALTER USER '" + limited.user + "'@'127.0.0.1' WITH MAX_USER_CONNECTIONS 2");
  DatabaseDistributedLock waiter(limited);
  auto got = std::async(std::launch::async, [&] {
    if (!waiter.try_lock("limit", 30s)) return false;
    waiter.unlock("limit");
    return true;
  });
  ASSERT_TRUE(test::wait_for_waiters(waiter, MetricKind::kLock, 1));
  std::this_thread::sleep_for(1500ms);  // past the wake-up connection's connect_timeout
  const auto released_at = Clock::now();
  holder.unlock("limit");
  EXPECT_TRUE(got.get());
  EXPECT_LT(Clock::now() - released_at, 5s);
}
