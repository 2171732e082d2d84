// Database load of a waiting client with fast wake-up on, and the loss of its
// bell connection (serial: these read the server-wide statement counter
// and kill sessions by state, so nothing else may run meanwhile).
//
// A waiter costs its poll (one statement per tick for all names) plus one
// bell wait per name every few seconds. A holder without a bell must
// not turn the bell into a busy loop: the waiter looks once, then leaves
// the name to the poll.
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <cstdio>
#include <future>
#include <string>
#include <thread>

#include "test_env.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::fresh_options;
using test::same_table;

double statements_per_second_while(std::chrono::milliseconds window) {
  const auto before = std::stoll(test::query_scalar("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                                                    "WHERE VARIABLE_NAME = 'QUESTIONS'"));
  std::this_thread::sleep_for(window);
  const auto after = std::stoll(test::query_scalar("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                                                   "WHERE VARIABLE_NAME = 'QUESTIONS'"));
  return static_cast<double>(after - before - 1) / std::chrono::duration<double>(window).count();
}

void expect_bounded_waiting_load(bool holder_has_bell) {
  Options o = fresh_options();
  o.poll_interval = 250ms;  // 4 polls per second
  o.watchdog_timeout = 60s;  // no renewal inside the window
  Options h = same_table(o);
  h.fast_wakeup = holder_has_bell && test::fast_wakeup_enabled();
  DatabaseDistributedLock holder(h);
  DatabaseDistributedLock waiter(o);
  holder.lock("load");
  auto waited = std::async(std::launch::async, [&] {
    const bool ok = waiter.try_lock("load", 30s);
    if (ok) waiter.unlock("load");
    return ok;
  });
  ASSERT_TRUE(test::wait_for_waiters(waiter, MetricKind::kLock, 1));
  // Past its first round (the refused take, the watch's read and mark, the
  // first polls): the window measures a waiter settled in its wait.
  std::this_thread::sleep_for(1s);
  const double rate = statements_per_second_while(3s);
  std::printf("waiting load (%s): %.2f statements/s\n", holder_has_bell ? "bell holder" : "no bell", rate);
  // 4 polls + a bell wait every 4 s (io_timeout 5 s), with room for the
  // odd housekeeping statement; a busy loop would run thousands.
  EXPECT_LT(rate, 12.0) << (holder_has_bell ? "bell holder" : "holder without bell");
  EXPECT_GT(rate, 2.0) << "the poll should be running";
  holder.unlock("load");
  EXPECT_TRUE(waited.get());
}

TEST(WaitingLoad, WaiterOnABellHolderCostsItsPollAndARareBellWait) { expect_bounded_waiting_load(true); }

// The waiter signs in as an account of this test's own, so the session it
// kills is its bell wait and nothing else's.
TEST(WaitingLoad, KilledBellConnectionIsNotALostWakeChannel) {
  if (!test::fast_wakeup_enabled()) GTEST_SKIP() << "tests the bell itself; runs with it on";
  Options o = fresh_options();
  o.poll_interval = 60s;  // the poll cannot be what hands the lock over
  o.watchdog_timeout = 30s;
  DatabaseDistributedLock holder(o);
  const Options waiter_options = test::as_private_account(same_table(o));
  DatabaseDistributedLock waiter(waiter_options);
  holder.lock("cut");
  auto waited = std::async(std::launch::async, [&] {
    const bool ok = waiter.try_lock("cut", 30s);
    if (ok) waiter.unlock("cut");
    return ok;
  });
  const std::string blocked = std::string("SELECT ID FROM information_schema.PROCESSLIST WHERE ") +
                              test::kBellWaitCondition + " AND USER = '" + waiter_options.user + "'";
  ASSERT_TRUE(test::wait_until([&] { return !test::query_scalar(blocked).empty(); }, 15s));
  const std::string killed = test::query_scalar(blocked);
  test::execute_sql("KILL CONNECTION " + killed);
  // The waiter is woken by the failure, is refused, and arms again on a
  // fresh connection (after a 1 s pause).
  ASSERT_TRUE(test::wait_until(
      [&] {
        const std::string now = test::query_scalar(blocked);
        return !now.empty() && now != killed;
      },
      15s))
      << "the bell connection was not replaced";
  const auto released_at = std::chrono::steady_clock::now();
  holder.unlock("cut");
  EXPECT_TRUE(waited.get());
  EXPECT_LT(std::chrono::steady_clock::now() - released_at, 10s);
}

TEST(WaitingLoad, WaiterOnAHolderWithoutBellDoesNotSpin) { expect_bounded_waiting_load(false); }

}  // namespace
}  // namespace dlock
