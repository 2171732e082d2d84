// MultiLock (get_multi_lock): several plain lock names held together, all
// or nothing, in any order, with one wait and one lease; reentrant per
// name; its holds are ordinary lock holds (fences, renewal, losses).
#include <dlock/asio.hpp>
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <boost/asio/use_future.hpp>

#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "test_env.hpp"

// A MultiLock of 64 names holds up to 64 of its client's internal mutexes at
// once (the owner's stripe of each name), past the 64 locks per thread that
// ThreadSanitizer's deadlock detector can track (it stops with a CHECK
// failure, not a report). Its race detection stays on.
extern "C" const char* __tsan_default_options() { return "detect_deadlocks=0"; }

namespace dlock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::ChildProcess;
using test::fresh_options;
using test::same_table;
using test::slow_poll;
using test::url_for;
using test::wait_until;

bool free_elsewhere(DatabaseDistributedLock& other, const std::string& name) {
  if (!other.try_lock(name)) return false;
  other.unlock(name);
  return true;
}

TEST(MultiLock, TakesEveryNameOrNone) {
  const Options o = fresh_options();
  DatabaseDistributedLock a(o), b(same_table(o));
  b.lock("b");
  MultiLock set = a.get_multi_lock({"c", "b", "a"});
  EXPECT_FALSE(set.try_lock()) << "taken while one of its names was held elsewhere";
  EXPECT_TRUE(free_elsewhere(b, "a")) << "a refused set kept a name";
  EXPECT_TRUE(free_elsewhere(b, "c")) << "a refused set kept a name";
  EXPECT_FALSE(a.try_lock("b", 0ms));
  b.unlock("b");
  ASSERT_TRUE(set.try_lock());
  for (const char* n : {"a", "b", "c"}) {
    EXPECT_TRUE(a.is_held_by_current_thread(n)) << n;
    EXPECT_FALSE(b.try_lock(n)) << n;
    EXPECT_GT(set.fencing_token(n), 0u) << n;
  }
  set.unlock();
  for (const char* n : {"a", "b", "c"}) EXPECT_TRUE(free_elsewhere(b, n)) << n << " stayed taken after unlock()";
}

TEST(MultiLock, NamesAreSortedOnceAndBadInputThrowsBeforeAnySql) {
  const Options o = fresh_options();
  DatabaseDistributedLock a(o);
  MultiLock set = a.get_multi_lock({"z", "a", "m", "a"});
  EXPECT_EQ(set.names(), (std::vector<std::string>{"a", "m", "z"}));
  EXPECT_EQ(set.fencing_token("a"), 0u) << "not held yet";
  EXPECT_THROW((void)a.get_multi_lock({}), std::invalid_argument);
  EXPECT_THROW((void)a.get_multi_lock({"a", ""}), std::invalid_argument);
  EXPECT_THROW((void)a.get_multi_lock({"a", std::string(256, 'x')}), std::invalid_argument);
  std::vector<std::string> many;
  for (int i = 0; i < 65; ++i) many.push_back("n" + std::to_string(i));
  EXPECT_THROW((void)a.get_multi_lock(many), std::invalid_argument);
  many.pop_back();
  many.push_back("n0");  // a duplicate counts once: 64 names
  MultiLock big = a.get_multi_lock(many);
  EXPECT_EQ(big.names().size(), 64u);
  ASSERT_TRUE(big.try_lock());
  EXPECT_TRUE(a.is_held_by_current_thread("n63"));
  big.unlock();
  EXPECT_FALSE(a.is_locked("n63"));
  EXPECT_EQ(test::query_scalar("SELECT COUNT(*) FROM `" + o.table + "` WHERE kind = 1"), "64");
}

TEST(MultiLock, UnlockWithoutEveryHoldIsNotHeldErrorAndReleasesNothing) {
  const Options o = fresh_options();
  DatabaseDistributedLock a(o);
  MultiLock set = a.get_multi_lock({"a", "b"});
  EXPECT_THROW(set.unlock(), NotHeldError);
  a.lock("a");
  EXPECT_THROW(set.unlock(), NotHeldError);
  EXPECT_EQ(a.hold_count("a"), 1) << "a failed unlock() released a name";
  a.unlock("a");
}

TEST(MultiLock, NamesTheOwnerHoldsAreCountedReentrantly) {
  const Options o = fresh_options();
  DatabaseDistributedLock a(o), b(same_table(o));
  a.lock("a");
  const std::uint64_t fence = a.fencing_token("a");
  MultiLock set = a.get_multi_lock({"a", "b"});
  set.lock();
  EXPECT_EQ(a.hold_count("a"), 2);
  EXPECT_EQ(a.hold_count("b"), 1);
  EXPECT_EQ(set.fencing_token("a"), fence) << "a re-entered hold got a new token";
  set.lock();  // the whole set again
  EXPECT_EQ(a.hold_count("a"), 3);
  EXPECT_EQ(a.hold_count("b"), 2);
  set.unlock();
  set.unlock();
  EXPECT_EQ(a.hold_count("a"), 1);
  EXPECT_TRUE(free_elsewhere(b, "b"));
  EXPECT_FALSE(b.try_lock("a"));
  a.unlock("a");
}

TEST(MultiLock, AWaitingSetKeepsNoNameAndWakesAtALocalReleaseAtOnce) {
  const Options o = slow_poll(fresh_options());
  DatabaseDistributedLock a(o), b(same_table(o));
  const Owner holder = Owner::create();
  Lock held = a.get_lock("b", holder);
  held.lock();
  MultiLock set = a.get_multi_lock({"a", "b"}, Owner::create());
  std::atomic<bool> waiting{true};
  auto waited = std::async(std::launch::async, [&] {
    const bool had = set.try_lock_for(20s);
    waiting = false;
    return std::make_pair(had, Clock::now());
  });
  // While it waits, the free name stays free for everyone.
  EXPECT_TRUE(test::holds_throughout([&] { return !waiting || free_elsewhere(b, "a"); }, 300ms));
  const auto released = Clock::now();
  held.unlock();
  const auto [had, at] = waited.get();
  ASSERT_TRUE(had);
  EXPECT_LT(at - released, 3s) << "the set waited for the poll, not the release";
  set.unlock();
}

TEST(MultiLock, WakesAtAReleaseInAnotherClient) {
  if (!test::fast_wakeup_enabled()) GTEST_SKIP() << "a release elsewhere rings only with fast_wakeup";
  const Options o = slow_poll(fresh_options());
  DatabaseDistributedLock a(o), b(same_table(o));
  b.lock("y");
  MultiLock set = a.get_multi_lock({"x", "y", "z"}, Owner::create());
  auto waited = std::async(std::launch::async, [&] {
    const bool had = set.try_lock_for(25s);
    return std::make_pair(had, Clock::now());
  });
  // Refused once: it watches the holder's bell.
  ASSERT_TRUE(test::wait_for_waiters(a, MetricKind::kMultiLock, 1));
  const auto released = Clock::now();
  b.unlock("y");
  const auto [had, at] = waited.get();
  ASSERT_TRUE(had);
  EXPECT_LT(at - released, 5s) << "the set was not woken by the release elsewhere";
  set.unlock();
}

TEST(MultiLock, OneWaitAndOneLeaseCoverTheSet) {
  const Options o = fresh_options();
  DatabaseDistributedLock a(o), b(same_table(o));
  b.lock("q");
  MultiLock set = a.get_multi_lock({"p", "q"});
  const auto start = Clock::now();
  EXPECT_FALSE(set.try_lock(700ms, 5s));
  const auto took = Clock::now() - start;
  EXPECT_GE(took, 700ms);
  EXPECT_LT(took, 5s);
  b.unlock("q");
  ASSERT_TRUE(set.try_lock(0ms, 600ms));  // a fixed lease, not renewed
  const auto ttl = a.remaining_ttl("p");
  ASSERT_TRUE(ttl.has_value());
  EXPECT_LE(*ttl, 600ms);
  EXPECT_TRUE(wait_until([&] { return !a.is_locked("p") && !a.is_locked("q"); }, 10s)) << "the fixed lease was renewed";
  set.unlock();  // the lease ran out: nothing to free, no throw
}

TEST(MultiLock, OppositeOrdersOnManyThreadsNeverDeadlockNorOverlap) {
  const Options o = fresh_options();
  DatabaseDistributedLock a(o), b(same_table(o));
  std::vector<std::string> names;
  for (int i = 0; i < 8; ++i) names.push_back("acct" + std::to_string(i));
  std::vector<std::string> reversed(names.rbegin(), names.rend());
  std::mutex inside_mutex;
  int inside = 0;
  std::atomic<int> overlaps{0}, timeouts{0};
  const auto worker = [&](DatabaseDistributedLock& client, const std::vector<std::string>& order) {
    MultiLock set = client.get_multi_lock(order);
    for (int i = 0; i < 100; ++i) {
      if (!set.try_lock_for(30s)) {
        ++timeouts;
        return;
      }
      {
        std::lock_guard<std::mutex> g(inside_mutex);
        if (++inside != 1) ++overlaps;
      }
      {
        std::lock_guard<std::mutex> g(inside_mutex);
        --inside;
      }
      set.unlock();
    }
  };
  std::vector<std::thread> threads;
  threads.emplace_back(worker, std::ref(a), names);
  threads.emplace_back(worker, std::ref(a), reversed);
  threads.emplace_back(worker, std::ref(b), reversed);
  threads.emplace_back(worker, std::ref(b), names);
  for (auto& t : threads) t.join();
  EXPECT_EQ(timeouts.load(), 0);
  EXPECT_EQ(overlaps.load(), 0);
}

TEST(MultiLock, TwoProcessesInOppositeOrdersAThousandTimesNeverDeadlockNorOverlap) {
  const Options o = fresh_options();
  const std::string counter = o.table + "_counter";
  test::execute_sql("DROP TABLE IF EXISTS `" + counter + "`");
  test::execute_sql("CREATE TABLE `" + counter + "` (id INT PRIMARY KEY, value BIGINT NOT NULL)");
  test::execute_sql("INSERT INTO `" + counter + "` VALUES (1, 0)");
  constexpr int kRounds = 1000;
  ChildProcess forward(test::helper_path(),
                       {url_for(o), "multi-rmw", "acct", "8", std::to_string(kRounds), "fwd", counter});
  ChildProcess backward(test::helper_path(),
                        {url_for(o), "multi-rmw", "acct", "8", std::to_string(kRounds), "rev", counter});
  for (ChildProcess* p : {&forward, &backward}) {
    const auto line = p->wait_for_line("", 240s);
    ASSERT_TRUE(line.has_value());
    EXPECT_EQ(*line, "done");
    const auto status = p->wait(10s);
    ASSERT_TRUE(status.has_value());
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  }
  EXPECT_EQ(test::query_scalar("SELECT value FROM `" + counter + "` WHERE id = 1"), std::to_string(2 * kRounds))
      << "two holders of the set overlapped";
  test::execute_sql("DROP TABLE `" + counter + "`");
}

TEST(MultiLock, AHoldLostWhileTheOthersAreHeldIsReportedAndTheNextAcquireThrows) {
  Options o = fresh_options();
  o.watchdog_timeout = 1500ms;  // renewed every 500 ms: a loss is found then
  std::mutex lost_mutex;
  std::vector<std::string> lost;
  o.on_lock_lost = [&](std::string_view name, std::uint64_t) {
    std::lock_guard<std::mutex> g(lost_mutex);
    lost.emplace_back(name);
  };
  DatabaseDistributedLock a(o), b(same_table(o));
  MultiLock set = a.get_multi_lock({"l1", "l2"});
  set.lock();
  ASSERT_TRUE(b.force_unlock("l2"));
  ASSERT_TRUE(wait_until(
      [&] {
        std::lock_guard<std::mutex> g(lost_mutex);
        return !lost.empty();
      },
      10s));
  {
    std::lock_guard<std::mutex> g(lost_mutex);
    EXPECT_EQ(lost, std::vector<std::string>{"l2"});
  }
  EXPECT_THROW(set.lock(), LockLostError);
  EXPECT_TRUE(a.is_held_by_current_thread("l1")) << "the refused acquire gave up the names it held";
  set.unlock();  // owed for the lost hold; frees l1
  EXPECT_TRUE(free_elsewhere(b, "l1"));
  set.lock();
  set.unlock();
}

TEST(MultiLock, AnUnlockThatFindsOneNameTakenOverFreesTheOthersAndReportsIt) {
  Options o = fresh_options();
  o.watchdog_timeout = 30s;  // the unlock, not the watchdog, finds the loss
  std::mutex lost_mutex;
  std::vector<std::string> lost;
  o.on_lock_lost = [&](std::string_view name, std::uint64_t) {
    std::lock_guard<std::mutex> g(lost_mutex);
    lost.emplace_back(name);
  };
  DatabaseDistributedLock a(o), b(same_table(o)), c(same_table(o));
  MultiLock set = a.get_multi_lock({"t1", "t2", "t3"});
  set.lock();
  // A waiter elsewhere on t3, rung by the unlock below.
  Lock t3 = c.get_lock("t3", Owner::create());
  auto waiter = std::async(std::launch::async, [&] { return t3.try_lock_for(20s); });
  ASSERT_TRUE(b.force_unlock("t2"));
  ASSERT_TRUE(b.try_lock("t2"));
  // The unlock tells a hold taken over before it from one taken after it
  // freed the row by the new hold's age against the time since it was sent
  // (Engine::report_row_losses): a takeover a moment before the unlock is a
  // race of two round trips. This one is clearly earlier.
  ASSERT_TRUE(wait_until(
      [&] {
        return std::stoll("0" + test::query_scalar("SELECT TIMESTAMPDIFF(MICROSECOND, acquired_at, NOW(6)) FROM `" +
                                                   o.table + "` WHERE kind = 1 AND lock_name = 't2'")) > 300000;
      },
      10s));
  set.unlock();
  EXPECT_TRUE(wait_until(
      [&] {
        std::lock_guard<std::mutex> g(lost_mutex);
        return lost == std::vector<std::string>{"t2"};
      },
      10s));
  EXPECT_TRUE(free_elsewhere(b, "t1"));
  EXPECT_FALSE(c.try_lock("t2", 0ms)) << "the new holder's hold was freed";
  EXPECT_TRUE(waiter.get());
  t3.unlock();
  b.unlock("t2");
  set.lock();  // the client goes on (its ringing session was closed)
  set.unlock();
}

TEST(MultiLock, WorksWithTheStandardGuardsAndForAnOwnerAcrossThreads) {
  const Options o = fresh_options();
  DatabaseDistributedLock a(o), b(same_table(o));
  MultiLock set = a.get_multi_lock({"g1", "g2"}, Owner::create());
  {
    std::unique_lock<MultiLock> guard(set, std::defer_lock);
    ASSERT_TRUE(guard.try_lock_for(2s));
    EXPECT_FALSE(b.try_lock("g1"));
  }
  EXPECT_TRUE(free_elsewhere(b, "g1"));
  std::thread([&] { set.lock(); }).join();
  std::thread([&] { set.unlock(); }).join();  // another thread, the same owner
  EXPECT_TRUE(free_elsewhere(b, "g2"));
}

TEST(MultiLockAsync, LocksWaitsForAReleaseAndUnlocks) {
  const Options o = slow_poll(fresh_options());
  DatabaseDistributedLock a(o), b(same_table(o));
  const Owner owner = Owner::create();
  const MultiLock set = a.get_multi_lock({"s1", "s2"}, owner);
  async_lock(set, boost::asio::use_future).get();
  EXPECT_FALSE(b.try_lock("s1"));
  EXPECT_FALSE(b.try_lock("s2"));
  async_unlock(set, boost::asio::use_future).get();
  EXPECT_TRUE(free_elsewhere(b, "s2"));

  b.lock("s2");
  EXPECT_FALSE(async_try_lock(set, 0ms, boost::asio::use_future).get());
  auto waiting = async_try_lock(set, 20s, boost::asio::use_future);
  EXPECT_TRUE(free_elsewhere(b, "s1")) << "a waiting set kept a name";
  const auto released = Clock::now();
  b.unlock("s2");
  ASSERT_TRUE(waiting.get());
  if (test::fast_wakeup_enabled()) {
    EXPECT_LT(Clock::now() - released, 5s) << "woken by the poll, not the release";
  }
  async_lock(set, boost::asio::use_future).get();  // reentrant
  EXPECT_EQ(a.get_lock("s1", owner).hold_count(), 2);
  async_unlock(set, boost::asio::use_future).get();
  async_unlock(set, boost::asio::use_future).get();
  EXPECT_THROW(async_unlock(set, boost::asio::use_future).get(), NotHeldError);
}

TEST(MultiLockAsync, CancelEndsAPendingWaitHoldingNothing) {
  const Options o = slow_poll(fresh_options());
  DatabaseDistributedLock a(o), b(same_table(o));
  const Owner owner = Owner::create();
  const MultiLock set = a.get_multi_lock({"c1", "c2"}, owner);
  b.lock("c1");
  auto waiting = async_lock(set, boost::asio::use_future);
  EXPECT_EQ(waiting.wait_for(300ms), std::future_status::timeout);
  a.cancel(owner);
  EXPECT_THROW(waiting.get(), Cancelled);
  b.unlock("c1");
  EXPECT_TRUE(free_elsewhere(b, "c2"));
  EXPECT_TRUE(free_elsewhere(b, "c1"));
  ASSERT_TRUE(async_try_lock(set, 500ms, 5s, boost::asio::use_future).get());
  async_unlock(set, boost::asio::use_future).get();
}

}  // namespace
}  // namespace dlock
