// Waiting: try_lock deadlines, local wake on release, remote wake by the
// poller, and the holder's TTL bounding every sleep.
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "test_env.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::fresh_options;
using test::same_table;

TEST(Wait, TryLockWithWaitTimesOutNoEarlierThanAsked) {
  const Options options = fresh_options();
  DatabaseDistributedLock a(options);
  DatabaseDistributedLock b(same_table(options));
  a.lock("w");
  for (Millis wait : {1ms, 50ms, 700ms}) {
    const auto start = Clock::now();
    EXPECT_FALSE(b.try_lock("w", wait));
    const auto waited = Clock::now() - start;
    EXPECT_GE(waited, wait);
    EXPECT_LT(waited, wait + 3s);
  }
  a.unlock("w");
}

TEST(Wait, ZeroOrNegativeWaitIsOneAttempt) {
  const Options options = fresh_options();
  DatabaseDistributedLock a(options);
  DatabaseDistributedLock b(same_table(options));
  a.lock("z");
  for (Millis wait : {0ms, -5ms}) {
    const auto start = Clock::now();
    EXPECT_FALSE(b.try_lock("z", wait));
    EXPECT_FALSE(b.try_lock("z", wait, 5s));
    EXPECT_LT(Clock::now() - start, 2s);
  }
  a.unlock("z");
  EXPECT_TRUE(b.try_lock("z", 0ms));
  b.unlock("z");
}

TEST(Wait, WaiterInSameClientWakesPromptlyOnRelease) {
  Options options = fresh_options();
  options.poll_interval = 30s;  // rule out the poller: only the local wake can be prompt
  options.watchdog_timeout = 30s;
  DatabaseDistributedLock client(options);
  client.lock("local");
  std::promise<Clock::time_point> acquired_at;
  std::thread waiter([&] {
    client.lock("local");
    acquired_at.set_value(Clock::now());
    client.unlock("local");
  });
  // The waiter parks (it subscribes, is refused, and sleeps up to the TTL).
  ASSERT_TRUE(test::wait_for_waiters(client, MetricKind::kLock, 1));
  const auto released_at = Clock::now();
  client.unlock("local");
  auto future = acquired_at.get_future();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  EXPECT_LT(future.get() - released_at, 1s) << "woke by TTL or poll, not by the local release";
  waiter.join();
}

TEST(Wait, WaiterInAnotherClientWakesWithinThePollInterval) {
  Options options = fresh_options();
  options.poll_interval = 300ms;
  options.watchdog_timeout = 30s;  // the TTL bound alone would take 30 s
  DatabaseDistributedLock a(options);
  DatabaseDistributedLock b(same_table(options));
  a.lock("remote");
  std::promise<Clock::time_point> acquired_at;
  std::thread waiter([&] {
    b.lock("remote");
    acquired_at.set_value(Clock::now());
    b.unlock("remote");
  });
  ASSERT_TRUE(test::wait_for_waiters(b, MetricKind::kLock, 1));
  const auto released_at = Clock::now();
  a.unlock("remote");
  auto future = acquired_at.get_future();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  EXPECT_LT(future.get() - released_at, options.poll_interval + 1500ms);
  waiter.join();
}

TEST(Wait, ForceUnlockWakesALocalWaiter) {
  Options options = fresh_options();
  options.poll_interval = 30s;
  options.watchdog_timeout = 30s;
  DatabaseDistributedLock holder(options);
  DatabaseDistributedLock client(same_table(options));
  holder.lock("forced");
  std::promise<Clock::time_point> acquired_at;
  std::thread waiter([&] {
    client.lock("forced");
    acquired_at.set_value(Clock::now());
    client.unlock("forced");
  });
  ASSERT_TRUE(test::wait_for_waiters(client, MetricKind::kLock, 1));
  const auto forced_at = Clock::now();
  ASSERT_TRUE(client.force_unlock("forced"));
  auto future = acquired_at.get_future();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  EXPECT_LT(future.get() - forced_at, 1s);
  waiter.join();
  EXPECT_NO_THROW(holder.unlock("forced"));
}

TEST(Wait, ExpiredHolderIsNoticedWithoutAnyWake) {
  Options options = fresh_options();
  options.poll_interval = 60s;  // no poll help: only the TTL bound
  DatabaseDistributedLock a(options);
  DatabaseDistributedLock b(same_table(options));
  a.lock("ttl-bound", 700ms);
  const auto start = Clock::now();
  ASSERT_TRUE(b.try_lock("ttl-bound", 10s));
  const auto waited = Clock::now() - start;
  EXPECT_GE(waited, 500ms);
  EXPECT_LT(waited, 3s);
  b.unlock("ttl-bound");
}

TEST(Wait, ManyLocalWaitersAllGetTheirTurn) {
  Options options = fresh_options();
  options.poll_interval = 30s;
  options.watchdog_timeout = 30s;
  DatabaseDistributedLock client(options);
  std::atomic<int> inside{0};
  std::atomic<int> done{0};
  std::atomic<bool> overlap{false};
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&] {
      for (int round = 0; round < 5; ++round) {
        client.lock("queue");
        if (inside.fetch_add(1) != 0) overlap = true;
        std::this_thread::sleep_for(2ms);
        inside.fetch_sub(1);
        client.unlock("queue");
      }
      ++done;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(done.load(), 6);
  EXPECT_FALSE(overlap.load());
  EXPECT_LT(Clock::now() - start, 20s) << "handoffs waited for TTLs instead of local wakes";
}

}  // namespace
}  // namespace dlock
