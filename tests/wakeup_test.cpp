// Fast wake-up (Options::fast_wakeup): a waiter in another client or process
// hears a release through the holding session's bell, long before its next
// poll, and every way the bell can be missing or lost falls back to the poll
// without ever letting two owners in.
//
// The poll interval here is long (60 s) wherever the test shows the bell
// did the waking: a waiter that depended on the poll could not finish in time.
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/tools.hpp"
#include "child_process.hpp"
#include "sql/connection_pool.hpp"
#include "test_env.hpp"
#include "wakeup/bell_watcher.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::fresh_options;
using test::same_table;

constexpr auto kLongPoll = 60s;

Options wakeup_options() {
  Options o = fresh_options();
  o.fast_wakeup = true;
  o.poll_interval = kLongPoll;
  o.watchdog_timeout = 30s;
  return o;
}

// The session bell lock row `name` records ("" if none).
std::string row_bell(const Options& o, const std::string& name) {
  return test::query_scalar("SELECT bell FROM `" + o.table + "` WHERE kind = 1 AND lock_name = '" + name + "'");
}

// A column of lock row `name`.
std::string lock_column(const Options& o, const std::string& name, const std::string& column) {
  return test::query_scalar("SELECT " + column + " FROM `" + o.table + "` WHERE kind = 1 AND lock_name = '" + name + "'");
}

// Server id of the session holding the bell lock row `name` records, or ""
// if it records none or nobody holds it.
std::string bell_holder(const Options& o, const std::string& name) {
  return lock_column(o, name, "IS_USED_LOCK(bell)");
}

// Server id of the session holding user-level lock `bell`, or "".
std::string bell_holder(const std::string& bell) { return test::query_scalar("SELECT IS_USED_LOCK('" + bell + "')"); }

// The bell after `bell` ("dlock-s:<hex>:<n>" -> n + 1).
std::string next_bell(const std::string& bell) {
  const auto colon = bell.rfind(':');
  return bell.substr(0, colon + 1) + std::to_string(std::stoull(bell.substr(colon + 1)) + 1);
}

// Hooks for a BellWatcher of a test's own: counts rings, every key is
// waited for, interrupts with KILL QUERY, and a lock waiter is blocked by
// locks.
details::BellWatcher::Hooks counting_hooks(std::atomic<int>& rings) {
  return details::BellWatcher::Hooks{
      [&rings](const details::NameKey&) { ++rings; },
      [](const details::NameKey&) { return true; },
      [](details::SessionAddress session, const std::function<bool()>& still_waiting) {
        if (still_waiting()) test::execute_sql("KILL QUERY " + std::to_string(session.server_id));
      },
      [](details::Kind kind) { return std::vector<details::Kind>{kind}; },
      [](const details::NameKey&) { return true; }};
}

details::NameKey lock_key(const std::string& name) { return details::NameKey(details::Kind::kLock, name); }

// Waits (up to 30 s) for `name` on another thread; the future is true if it
// got the lock, and only after `released` was set.
std::future<bool> acquire_after_release(DatabaseDistributedLock& client, const std::string& name,
                                        const std::atomic<bool>& released) {
  return std::async(std::launch::async, [&client, name, &released] {
    const bool ok = client.try_lock(name, 30s);
    const bool after_release = released.load();
    if (ok) client.unlock(name);
    return ok && after_release;
  });
}

#define SKIP_WHEN_FAST_WAKEUP_IS_OFF()                                                            \
  if (!test::fast_wakeup_enabled()) GTEST_SKIP() << "tests the bell itself; runs with it on"

TEST(FastWakeup, HolderRecordsItsSessionBellAndRingsOnlyForAMarkedRow) {
  SKIP_WHEN_FAST_WAKEUP_IS_OFF();
  const Options o = wakeup_options();
  DatabaseDistributedLock client(o);
  client.lock("bell");  // first insert of the name: records the bell too
  const std::string bell = row_bell(o, "bell");
  ASSERT_EQ(bell.rfind("dlock-s:", 0), 0u) << bell;
  EXPECT_LE(bell.size(), 64u);
  const std::string session = bell_holder(bell);
  ASSERT_NE(session, "") << "the session does not hold the bell its row records";
  client.lock("bell");  // reentrant: the same bell
  client.unlock("bell");
  EXPECT_EQ(row_bell(o, "bell"), bell);
  client.unlock("bell");  // nobody marked the row: freed quietly, nothing rings
  EXPECT_EQ(lock_column(o, "bell", "expire_time > NOW(6)"), "0");
  EXPECT_EQ(row_bell(o, "bell"), bell) << "a release leaves the last hold's columns as they were";
  EXPECT_EQ(bell_holder(bell), session) << "an unmarked release rang";
  client.lock("bell");  // known row: the same session, the same bell
  EXPECT_EQ(row_bell(o, "bell"), bell);
  // A waiter elsewhere marks the row: the release rings, and the session
  // holds its next bell from then on.
  test::execute_sql("UPDATE `" + o.table + "` SET waiters = 1 WHERE kind = 1 AND lock_name = 'bell'");
  client.unlock("bell");
  EXPECT_EQ(lock_column(o, "bell", "expire_time > NOW(6)"), "0");
  EXPECT_EQ(bell_holder(bell), "") << "the marked release did not ring";
  EXPECT_EQ(bell_holder(next_bell(bell)), session) << "the session was left without a bell";
  client.lock("bell");
  EXPECT_EQ(row_bell(o, "bell"), next_bell(bell));
  EXPECT_EQ(lock_column(o, "bell", "waiters"), "0") << "a take must clear the mark";
  client.unlock("bell");
}

TEST(FastWakeup, TurnedOffNoBellIsTaken) {
  Options o = wakeup_options();
  o.fast_wakeup = false;
  DatabaseDistributedLock client(o);
  for (int i = 0; i < 2; ++i) {
    client.lock("quiet");
    EXPECT_EQ(row_bell(o, "quiet"), "");
    client.unlock("quiet");
  }
}

TEST(FastWakeup, WaiterInAnotherClientIsWokenLongBeforeThePoll) {
  SKIP_WHEN_FAST_WAKEUP_IS_OFF();
  const Options o = wakeup_options();
  DatabaseDistributedLock holder(o);
  const Options waiter_options = test::as_private_account(same_table(o));
  DatabaseDistributedLock waiter(waiter_options);
  for (int round = 0; round < 3; ++round) {
    holder.lock("ring");
    std::atomic<bool> released{false};
    auto waited = std::async(std::launch::async, [&] {
      const bool ok = waiter.try_lock("ring", 30s);
      const bool after_release = released.load();
      const auto at = Clock::now();
      if (ok) waiter.unlock("ring");
      return std::make_tuple(ok, after_release, at);
    });
    // The waiter is parked (refused, blocked on the bell) before the release.
    ASSERT_TRUE(test::wait_for_bell_waits(waiter_options.user));
    released = true;
    const auto released_at = Clock::now();
    holder.unlock("ring");
    const auto [ok, after_release, acquired_at] = waited.get();
    ASSERT_TRUE(ok);
    EXPECT_TRUE(after_release) << "the waiter got in while the holder held the lock";
    EXPECT_LT(acquired_at - released_at, 5s) << "round " << round << ": woken by the poll, not the bell";
  }
}

TEST(FastWakeup, WaiterInAnotherProcessIsWokenLongBeforeThePoll) {
  SKIP_WHEN_FAST_WAKEUP_IS_OFF();
  const Options o = wakeup_options();
  DatabaseDistributedLock holder(o);
  holder.lock("remote");
  // The child signs in as an account of this test's own, so the wait below
  // sees its bell wait and no other test's.
  const std::string account = test::private_account();
  const std::string url =
      test::database_url_as(account, "table=" + o.table + "&poll_interval_ms=60000&watchdog_timeout_ms=30000");
  test::ChildProcess waiter(test::helper_path(), {url, "wait", "remote", "30000"});
  // Parked: the child's connection blocks in GET_LOCK on the bell.
  ASSERT_TRUE(test::wait_for_bell_waits(account));
  const auto released_at = Clock::now();
  holder.unlock("remote");
  const auto line = waiter.wait_for_line("acquired", 30s);
  ASSERT_TRUE(line.has_value());
  EXPECT_LT(Clock::now() - released_at, 5s);
}

TEST(FastWakeup, HolderWithoutBellLeavesTheWaiterToThePoll) {
  SKIP_WHEN_FAST_WAKEUP_IS_OFF();
  Options o = wakeup_options();
  o.poll_interval = 300ms;
  Options quiet = same_table(o);
  quiet.fast_wakeup = false;  // an older client, or one behind a proxy
  DatabaseDistributedLock holder(quiet);
  DatabaseDistributedLock waiter(o);
  holder.lock("silent");
  std::atomic<bool> released{false};
  auto waited = acquire_after_release(waiter, "silent", released);
  ASSERT_TRUE(test::wait_for_waiters(waiter, MetricKind::kLock, 1));
  released = true;
  holder.unlock("silent");
  EXPECT_TRUE(waited.get());
}

TEST(FastWakeup, LostBellSessionIsNotALostLock) {
  SKIP_WHEN_FAST_WAKEUP_IS_OFF();
  Options o = wakeup_options();
  o.poll_interval = 300ms;
  DatabaseDistributedLock holder(o);
  const Options w = test::as_private_account(same_table(o));
  DatabaseDistributedLock waiter(w);
  holder.lock("cut");
  std::atomic<bool> released{false};
  auto waited = acquire_after_release(waiter, "cut", released);
  ASSERT_TRUE(test::wait_for_bell_waits(w.user)) << "not on the bell";
  // The holder's pooled session dies: its bell goes with it and rings
  // the waiter, whose attempt must still be refused.
  const std::string session = bell_holder(o, "cut");
  ASSERT_NE(session, "");
  test::execute_sql("KILL CONNECTION " + session);
  ASSERT_TRUE(test::wait_until([&] { return waiter.metrics().wakeups[index(WakeSource::kBell)] >= 1; }, 10s))
      << "the dead session's bell did not ring";
  EXPECT_TRUE(holder.is_held_by_current_thread("cut"));
  EXPECT_EQ(waiter.hold_count("cut"), 0);
  released = true;
  holder.unlock("cut");  // on another session: the poll hands it over
  EXPECT_TRUE(waited.get());
}

TEST(FastWakeup, LostHoldRingsItsBellBeforeItsOwnerUnlocks) {
  SKIP_WHEN_FAST_WAKEUP_IS_OFF();
  Options o = wakeup_options();
  o.watchdog_timeout = 1500ms;  // the watchdog looks every 0.5 s
  DatabaseDistributedLock holder(o);
  DatabaseDistributedLock other(same_table(o));
  holder.lock("taken");
  const std::string bell = row_bell(o, "taken");
  const std::string session = bell_holder(bell);
  ASSERT_NE(session, "");
  ASSERT_TRUE(other.force_unlock("taken"));
  // The watchdog finds the hold lost and rings, so waiters elsewhere blocked
  // on its bell look again, though the owner has not called unlock() yet.
  EXPECT_TRUE(test::wait_until([&] { return bell_holder(bell).empty(); }, 10s));
  EXPECT_EQ(bell_holder(next_bell(bell)), session);
  other.lock("taken");
  const std::string others = row_bell(o, "taken");
  EXPECT_NE(bell_holder(o, "taken"), "");
  holder.unlock("taken");  // the lost hold's unlock: no SQL
  EXPECT_EQ(row_bell(o, "taken"), others);
  EXPECT_NE(bell_holder(o, "taken"), "");
  other.unlock("taken");
}

// One session holding two marked holds: the release of one rings the
// session's bell, and the other's row must record the session's next bell,
// or its waiters, woken for nothing, find a free bell and fall back to the
// poll (60 s here).
TEST(FastWakeup, RingingOneHoldMovesTheSessionsOtherHoldsToItsNextBell) {
  SKIP_WHEN_FAST_WAKEUP_IS_OFF();
  const Options o = wakeup_options();
  Options h = same_table(o);
  h.pool_size = 1;  // both holds on one session
  DatabaseDistributedLock holder(h);
  const Options w = test::as_private_account(same_table(o));
  DatabaseDistributedLock waiter(w);
  holder.lock("one");
  holder.lock("two");
  const std::string bell = row_bell(o, "one");
  ASSERT_EQ(row_bell(o, "two"), bell);
  std::atomic<bool> released_one{false};
  std::atomic<bool> released_two{false};
  auto waited_one = acquire_after_release(waiter, "one", released_one);
  auto waited_two = acquire_after_release(waiter, "two", released_two);
  ASSERT_TRUE(test::wait_until(
      [&] {
        return test::query_scalar("SELECT SUM(waiters) FROM `" + o.table +
                                  "` WHERE kind = 1 AND lock_name IN ('one', 'two')") == "2";
      },
      15s))
      << "the waiters did not mark both rows";
  released_one = true;
  holder.unlock("one");
  EXPECT_TRUE(waited_one.get());
  EXPECT_EQ(row_bell(o, "two"), next_bell(bell)) << "the other hold still records the rung bell";
  EXPECT_NE(bell_holder(o, "two"), "");
  // The waiter on "two", woken by that ring for nothing, blocks on the
  // session's next bell (else it found the old one free and is left to the
  // poll).
  EXPECT_TRUE(test::wait_for_bell_waits(w.user)) << "not blocked on a bell";
  released_two = true;
  const auto released_at = Clock::now();
  holder.unlock("two");
  EXPECT_TRUE(waited_two.get());
  EXPECT_LT(Clock::now() - released_at, 5s) << "left to the 60 s poll";
}

TEST(FastWakeup, MoreWaitedNamesThanConnectionsFallBackToThePoll) {
  SKIP_WHEN_FAST_WAKEUP_IS_OFF();
  Options o = wakeup_options();
  o.poll_interval = 500ms;
  DatabaseDistributedLock holder(o);
  Options w = same_table(o);
  w.wakeup_connections = 1;
  DatabaseDistributedLock waiter(w);
  const std::vector<std::string> names{"n0", "n1", "n2"};
  for (const auto& n : names) holder.lock(n);
  std::atomic<bool> released{false};
  std::vector<std::future<bool>> waits;
  for (const auto& n : names) {
    waits.push_back(acquire_after_release(waiter, n, released));
  }
  ASSERT_TRUE(test::wait_for_waiters(waiter, MetricKind::kLock, names.size()));
  released = true;
  for (const auto& n : names) holder.unlock(n);
  for (auto& f : waits) EXPECT_TRUE(f.get());
}

TEST(FastWakeup, QueuedNameGetsTheConnectionAGaveUpWaiterFrees) {
  SKIP_WHEN_FAST_WAKEUP_IS_OFF();
  const Options o = wakeup_options();  // 60 s poll; a bell wait lasts up to 4 s
  DatabaseDistributedLock holder(o);
  Options w = test::as_private_account(same_table(o));
  w.wakeup_connections = 1;
  DatabaseDistributedLock waiter(w);
  holder.lock("first");
  holder.lock("second");
  std::atomic<bool> released{false};
  // "first" takes the only bell connection; "second" arrives while it is
  // busy and is queued.
  auto gives_up = std::async(std::launch::async, [&] { return waiter.try_lock("first", 1500ms); });
  ASSERT_TRUE(test::wait_for_bell_waits(w.user)) << "\"first\" is not on the bell";
  auto waited = acquire_after_release(waiter, "second", released);
  EXPECT_FALSE(gives_up.get());  // disarm: the connection is interrupted and adopts "second"
  ASSERT_TRUE(test::wait_for_bell_waits(w.user)) << "\"second\" is not on the bell";
  released = true;
  const auto released_at = Clock::now();
  holder.unlock("second");
  EXPECT_TRUE(waited.get());
  EXPECT_LT(Clock::now() - released_at, 5s) << "left to the 60 s poll: the freed connection did not adopt it";
  holder.unlock("first");
}

TEST(FastWakeup, WaiterThatGivesUpFreesItsConnectionAndTheClientClosesPromptly) {
  SKIP_WHEN_FAST_WAKEUP_IS_OFF();
  const Options o = wakeup_options();  // io_timeout 5 s: a bell wait lasts up to 4 s
  DatabaseDistributedLock holder(o);
  holder.lock("busy");
  const auto start = Clock::now();
  {
    DatabaseDistributedLock waiter(same_table(o));
    EXPECT_FALSE(waiter.try_lock("busy", 400ms));
    EXPECT_GE(Clock::now() - start, 400ms);
  }  // the blocked bell wait is interrupted (KILL QUERY), not waited out
  EXPECT_LT(Clock::now() - start, 3s);
  holder.unlock("busy");
}

TEST(FastWakeup, ManyWaitersInManyClientsTakeTurnsOneAtATime) {
  SKIP_WHEN_FAST_WAKEUP_IS_OFF();
  Options o = wakeup_options();
  o.poll_interval = 1s;
  constexpr int kClients = 4;
  constexpr int kRounds = 10;
  std::vector<std::unique_ptr<DatabaseDistributedLock>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(std::make_unique<DatabaseDistributedLock>(same_table(o)));
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      for (int r = 0; r < kRounds; ++r) {
        clients[i]->lock("turns");
        if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
        std::this_thread::sleep_for(2ms);
        inside.fetch_sub(1);
        clients[i]->unlock("turns");
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  // 40 cross-client handoffs: poll-bound they would take about 20 s.
  EXPECT_LT(Clock::now() - start, 15s);
}

// Two clients each looping lock+unlock on one name: a release that rang for
// the other client's waiter holds back this client's own next take for a
// moment, so the woken waiter gets in. Before, the releasing thread re-took
// the row at once nearly every time (2,365 cycles against 1 in one 4 s run).
TEST(FastWakeup, TwoClientsLoopingOnOneNameBothGetIt) {
  SKIP_WHEN_FAST_WAKEUP_IS_OFF();
  const Options o = wakeup_options();
  DatabaseDistributedLock a(o);
  DatabaseDistributedLock b(same_table(o));
  std::atomic<bool> stop{false};
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  const auto loop = [&](DatabaseDistributedLock& client, long& cycles) {
    while (!stop) {
      client.lock("looped");
      if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
      inside.fetch_sub(1);
      client.unlock("looped");
      ++cycles;
    }
  };
  long cycles_a = 0;
  long cycles_b = 0;
  std::thread ta([&] { loop(a, cycles_a); });
  std::thread tb([&] { loop(b, cycles_b); });
  std::this_thread::sleep_for(2s);  // the measured window, not a wait for a condition
  stop = true;
  ta.join();
  tb.join();
  EXPECT_EQ(overlaps.load(), 0);
  const long total = cycles_a + cycles_b;
  ASSERT_GT(total, 0);
  EXPECT_GE(std::min(cycles_a, cycles_b) * 5, total) << cycles_a << " against " << cycles_b;
}

// A release whose bell's session another thread is using frees the row on
// another connection and rings the moment that session is returned, never
// waiting for it.
TEST(FastWakeup, ARingWaitsForTheBellsSessionToBeReturned) {
  SKIP_WHEN_FAST_WAKEUP_IS_OFF();
  Options o = wakeup_options();  // 60 s poll
  o.pool_size = 4;
  DatabaseDistributedLock holder(o);
  Options w = test::as_private_account(same_table(o));
  w.io_timeout = 15s;  // a bell wait lasts 10 s: longer than the bound below
  DatabaseDistributedLock waiter(w);
  holder.lock("later");
  const std::string bell = row_bell(o, "later");
  const std::string bell_session = bell_holder(bell);
  ASSERT_NE(bell_session, "");
  // Another thread (this one) takes the bell's session out of the pool.
  auto& pool = details::EngineAccess::of(holder).pool();
  std::optional<details::PooledConnection> busy;
  {
    std::vector<details::PooledConnection> others;
    for (std::size_t i = 0; i < pool.capacity() && !busy; ++i) {
      auto c = pool.acquire();
      if (std::to_string(c->server_id()) == bell_session) {
        busy.emplace(std::move(c));
      } else {
        others.push_back(std::move(c));
      }
    }
  }
  ASSERT_TRUE(busy.has_value());
  std::atomic<bool> released{false};
  auto waited = acquire_after_release(waiter, "later", released);
  ASSERT_TRUE(test::wait_for_bell_waits(w.user)) << "the waiter is not on the bell";
  released = true;
  holder.unlock("later");  // does not wait for the session
  EXPECT_EQ(lock_column(o, "later", "expire_time > NOW(6)"), "0");
  EXPECT_EQ(bell_holder(bell), bell_session) << "rang before its session was returned";
  const auto returned_at = Clock::now();
  busy.reset();  // returned: the ring runs now
  EXPECT_TRUE(waited.get());
  EXPECT_LT(Clock::now() - returned_at, 3s) << "left to the bell wait's timeout or the poll";
  EXPECT_EQ(bell_holder(bell), "");
}

// A bell connection nobody needs any more is closed after a while (60 s in
// a client; 2 s here), and a fresh one is opened for the next wait. The
// watcher signs in as an account of this test's own, so its sessions can be
// counted.
TEST(FastWakeup, IdleBellConnectionIsClosedAndReopenedWhenNeeded) {
  SKIP_WHEN_FAST_WAKEUP_IS_OFF();
  const Options o = wakeup_options();
  const Options watcher_options = test::as_private_account(o);
  DatabaseDistributedLock holder(o);
  const details::HoldRows rows(o.table, nullptr);
  std::atomic<int> rings{0};
  details::BellWatcher watcher(details::ConnectionSettings::from(watcher_options), rows, /*own_tag=*/0, 1, 1,
                               spdlog::default_logger(), counting_hooks(rings), 2s);
  for (int round = 0; round < 2; ++round) {
    holder.lock("idle");
    const int rung_before = rings.load();
    watcher.arm(lock_key("idle"));
    ASSERT_TRUE(test::wait_for_bell_waits(watcher_options.user))
        << "round " << round << ": no bell wait";
    holder.unlock("idle");  // marked by the watcher: rings
    ASSERT_TRUE(test::wait_until([&] { return rings.load() > rung_before; }, 15s)) << "round " << round;
    ASSERT_TRUE(test::wait_until([&] { return test::sessions_of(watcher_options.user) == 0; }, 15s))
        << "round " << round << ": the idle bell connection stayed open";
  }
}

// The watcher marks a row only for a hold of another client: a hold of its
// own client is released here, which wakes the waiter locally, and a mark
// would make that release ring (and hold back this client's takes) for
// nobody.
TEST(FastWakeup, TheWatcherMarksOnlyHoldsOfOtherClients) {
  SKIP_WHEN_FAST_WAKEUP_IS_OFF();
  const Options o = wakeup_options();
  const Options watcher_options = test::as_private_account(o);
  DatabaseDistributedLock holder(o);
  holder.lock("watched");
  const std::uint64_t holders_tag = details::EngineAccess::of(holder).hold_tag();
  const details::HoldRows rows(o.table, nullptr);
  for (const bool ours : {true, false}) {
    std::atomic<int> rings{0};
    details::BellWatcher watcher(details::ConnectionSettings::from(watcher_options), rows,
                                 ours ? holders_tag : holders_tag ^ 1, 1, 4, spdlog::default_logger(),
                                 counting_hooks(rings));
    watcher.arm(lock_key("watched"));
    if (ours) {
      ASSERT_TRUE(test::wait_until([&] { return rings.load() > 0; }, 15s)) << "the waiter was not woken";
      EXPECT_EQ(lock_column(o, "watched", "waiters"), "0") << "marked a hold of its own client";
      EXPECT_EQ(test::sessions_of(watcher_options.user, true), 0);
    } else {
      ASSERT_TRUE(test::wait_for_bell_waits(watcher_options.user))
          << "no wait on the holder's bell";
      EXPECT_EQ(lock_column(o, "watched", "waiters"), "1");
      EXPECT_EQ(rings.load(), 0);
      watcher.disarm(lock_key("watched"));
    }
  }
  holder.unlock("watched");
}

// On a hot lock the hold id changes at every local handoff (a new hold,
// same bell, mark kept), often between a waiter's read of the row and its
// mark. The mark matches the live rows of the name that are not the
// waiter's own client's, not a hold id, so it still lands and the chain's
// last release rings.
TEST(FastWakeup, TheMarkLandsOnAHoldALocalHandoffMadeAfterTheRead) {
  SKIP_WHEN_FAST_WAKEUP_IS_OFF();
  const Options o = wakeup_options();
  DatabaseDistributedLock holder(o);
  holder.lock("chain");
  const details::HoldRows rows(o.table, nullptr);
  auto c = details::Connection::open(details::ConnectionSettings::from(o));
  const auto seen = rows.watched(*c, {details::Kind::kLock}, "chain");
  ASSERT_EQ(seen.size(), 1u);
  test::execute_sql("UPDATE `" + o.table + "` SET hold_id = hold_id + 1, fence = fence + 1 WHERE kind = 1 AND"
                    " lock_name = 'chain'");
  EXPECT_EQ(rows.mark(*c, {details::Kind::kLock}, "chain", details::EngineAccess::of(holder).hold_tag() ^ 1), 1u);
  EXPECT_EQ(lock_column(o, "chain", "waiters"), "1") << "the new hold was not marked: its release would not ring";
  holder.force_unlock("chain");  // its client still believes in the old hold id
}

// A statement's NOW(6) is fixed when it starts. On a busy server a mark that
// started while a hold was live could run after its release, still find it
// "live" (a freed row expires when it was acquired), and mark the free row;
// the next take cleared the mark, and the waiter's bell never rang (seen as
// one client looping on a name for seconds while another waited). A clock
// ahead on the server that freed the row (a cluster) does the same. A mark
// lands only on a row taken and not freed since.
TEST(FastWakeup, AMarkNeverLandsOnAFreedRowWhateverItsTimes) {
  SKIP_WHEN_FAST_WAKEUP_IS_OFF();
  const Options o = wakeup_options();
  DatabaseDistributedLock holder(o);
  holder.lock("freed");
  holder.unlock("freed");
  // The freed row as the late statement saw it: acquired (and so expiring)
  // after the statement's NOW(6).
  test::execute_sql("UPDATE `" + o.table +
                    "` SET acquired_at = NOW(6) + INTERVAL 10 SECOND, expire_time = NOW(6) + INTERVAL 10 SECOND,"
                    " bell = 'dlock-s:0:0' WHERE kind = 1 AND lock_name = 'freed' AND state = 0");
  const details::HoldRows rows(o.table, nullptr);
  auto c = details::Connection::open(details::ConnectionSettings::from(o));
  EXPECT_EQ(rows.mark(*c, {details::Kind::kLock}, "freed", details::EngineAccess::of(holder).hold_tag() ^ 1), 0u);
  EXPECT_EQ(lock_column(o, "freed", "waiters"), "0") << "a freed row was marked: the next take clears the mark";
  // A hold taken since is marked as before.
  test::execute_sql("UPDATE `" + o.table +
                    "` SET acquired_at = NOW(6), expire_time = NOW(6) WHERE kind = 1 AND"
                    " lock_name = 'freed'");
  ASSERT_TRUE(holder.try_lock("freed"));
  EXPECT_EQ(rows.mark(*c, {details::Kind::kLock}, "freed", details::EngineAccess::of(holder).hold_tag() ^ 1), 1u);
  holder.unlock("freed");
}

// A holder in the same client wakes its local waiters itself at unlock: no
// bell connection is opened for them.
TEST(FastWakeup, WaiterOnAHolderInTheSameClientUsesNoBellConnection) {
  SKIP_WHEN_FAST_WAKEUP_IS_OFF();
  const Options o = test::as_private_account(wakeup_options());
  DatabaseDistributedLock client(o);
  client.lock("local");
  std::atomic<bool> released{false};
  auto waited = acquire_after_release(client, "local", released);
  // The waiter is refused at once; a generous second for it to arm a
  // bell if it were going to.
  EXPECT_TRUE(test::holds_throughout([&] { return test::sessions_of(o.user, true) == 0; }, 1s))
      << "a bell wait was armed against a holder in the same client";
  released = true;
  const auto released_at = Clock::now();
  client.unlock("local");
  EXPECT_TRUE(waited.get());
  EXPECT_LT(Clock::now() - released_at, 5s) << "the local unlock did not wake its waiter";
}

// A bell wait must end before the read timeout; with io_timeout under
// 2 s no wait fits, so the client opens no bell connection and its
// waiters rely on the poll.
TEST(FastWakeup, IoTimeoutTooShortForABellWaitLeavesWaitersToThePoll) {
  SKIP_WHEN_FAST_WAKEUP_IS_OFF();
  const Options o = wakeup_options();
  DatabaseDistributedLock holder(o);
  Options waiter_options = test::as_private_account(same_table(o));
  waiter_options.io_timeout = 1s;
  waiter_options.poll_interval = 300ms;
  waiter_options.watchdog_timeout = 3s;
  waiter_options.pool_size = 1;
  DatabaseDistributedLock waiter(waiter_options);
  holder.lock("short");
  std::atomic<bool> released{false};
  auto waited = acquire_after_release(waiter, "short", released);
  // The pooled connection and the io thread's; a bell connection would be a third.
  EXPECT_TRUE(test::holds_throughout([&] { return test::sessions_of(waiter_options.user) <= 2; }, 1s))
      << "a bell connection was opened";
  released = true;
  holder.unlock("short");
  EXPECT_TRUE(waited.get()) << "the poll did not hand the lock over";
}

}  // namespace
}  // namespace dlock
