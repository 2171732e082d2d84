// DatabaseDistributedLock::metrics() against the real database: each metric
// moves when the thing it counts happens (and only then), per kind of hold.
#include <dlock/asio.hpp>
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <boost/asio/use_future.hpp>
#include <atomic>
#include <future>
#include <thread>

#include "holds_error.hpp"
#include "sql/connection.hpp"
#include "sql/statement.hpp"
#include "support/test_env.hpp"

namespace dlock {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using test::fresh_options;
using test::same_table;
using test::wait_until;

std::uint64_t acquisitions(const Metrics& m, MetricKind kind, AcquireResult result) {
  return m.of(kind).acquisitions[index(result)];
}

TEST(Metrics, AnUncontendedCycleCountsOneAcquisitionTwoStatementsAWaitAndAHold) {
  DatabaseDistributedLock client(fresh_options());
  client.lock("warm");  // the first take creates the row and prepares statements
  client.unlock("warm");
  const Metrics before = client.metrics();
  client.lock("m");
  const Metrics holding = client.metrics();
  EXPECT_EQ(holding.of(MetricKind::kLock).held, 1u);
  client.unlock("m");
  const Metrics after = client.metrics();
  const auto& lock = after.of(MetricKind::kLock);
  EXPECT_EQ(lock.acquisitions[index(AcquireResult::kAcquired)] -
                before.of(MetricKind::kLock).acquisitions[index(AcquireResult::kAcquired)],
            1u);
  EXPECT_EQ(lock.wait_seconds.count - before.of(MetricKind::kLock).wait_seconds.count, 1u);
  EXPECT_EQ(lock.hold_seconds.count - before.of(MetricKind::kLock).hold_seconds.count, 1u);
  EXPECT_GT(lock.hold_seconds.sum, 0.0);
  EXPECT_EQ(lock.held, 0u);
  EXPECT_EQ(lock.reentrant, 0u);
  EXPECT_EQ(after.statements - before.statements, 2u) << "an uncontended lock and unlock are two statements";
  EXPECT_GE(after.connections_opened, 1u);
  EXPECT_EQ(after.pool_size, fresh_options().pool_size);
  EXPECT_EQ(after.pool_in_use, 0u);
  for (std::size_t k = 0; k < kMetricKindCount; ++k) {
    if (k == index(MetricKind::kLock)) continue;
    EXPECT_EQ(after.kinds[k].acquisitions[index(AcquireResult::kAcquired)], 0u) << to_string(MetricKind(k));
  }
}

TEST(Metrics, AReentrantAcquireIsCountedAsAcquiredAndReentrant) {
  DatabaseDistributedLock client(fresh_options());
  client.lock("r");
  client.lock("r");
  const Metrics m = client.metrics();
  EXPECT_EQ(acquisitions(m, MetricKind::kLock, AcquireResult::kAcquired), 2u);
  EXPECT_EQ(m.of(MetricKind::kLock).reentrant, 1u);
  EXPECT_EQ(m.of(MetricKind::kLock).held, 1u);  // one hold, counted twice
  client.unlock("r");
  EXPECT_EQ(client.metrics().of(MetricKind::kLock).hold_seconds.count, 0u) << "the hold goes on";
  client.unlock("r");
  EXPECT_EQ(client.metrics().of(MetricKind::kLock).hold_seconds.count, 1u);
}

TEST(Metrics, RefusedTimedOutAndWaitingAreToldApart) {
  const Options o = fresh_options();
  DatabaseDistributedLock holder(o);
  DatabaseDistributedLock client(same_table(o));
  holder.lock("busy");
  EXPECT_FALSE(client.try_lock("busy"));
  Metrics m = client.metrics();
  EXPECT_EQ(acquisitions(m, MetricKind::kLock, AcquireResult::kRefused), 1u);
  EXPECT_EQ(acquisitions(m, MetricKind::kLock, AcquireResult::kTimedOut), 0u);
  EXPECT_EQ(m.of(MetricKind::kLock).waiting, 0u) << "a single attempt never waits";

  std::atomic<bool> gave_up{false};
  std::thread waiter([&] { gave_up = !client.try_lock("busy", 1500ms); });
  EXPECT_TRUE(wait_until([&] { return client.metrics().of(MetricKind::kLock).waiting == 1; }, 5s));
  waiter.join();
  EXPECT_TRUE(gave_up);
  m = client.metrics();
  EXPECT_EQ(acquisitions(m, MetricKind::kLock, AcquireResult::kTimedOut), 1u);
  EXPECT_EQ(m.of(MetricKind::kLock).waiting, 0u);
  const HistogramSnapshot& wait = m.of(MetricKind::kLock).wait_seconds;
  EXPECT_EQ(wait.count, 2u);
  EXPECT_GE(wait.sum, 1.5);
  // The timed-out wait landed in the (1, 2.5] s bucket.
  EXPECT_EQ(wait.counts[13], 1u);
  holder.unlock("busy");
}

TEST(Metrics, EveryKindOfHoldCountsUnderItsOwnKind) {
  DatabaseDistributedLock client(fresh_options());
  Lock fair = client.get_fair_lock("fair");
  fair.lock();
  fair.unlock();
  Semaphore sem = client.get_semaphore("sem", 2);
  { Permit p = sem.acquire(); }
  ReadWriteLock rw = client.get_read_write_lock("rw");
  rw.lock_shared();
  rw.unlock_shared();
  rw.lock();
  rw.unlock();
  MultiLock set = client.get_multi_lock({"a", "b", "c"});
  set.lock();
  EXPECT_EQ(client.metrics().of(MetricKind::kMultiLock).held, 1u);
  EXPECT_EQ(client.metrics().of(MetricKind::kLock).held, 3u) << "a set's names are lock holds";
  set.unlock();
  Election e = client.get_election("e", Owner::create());
  (void)e.campaign("v");
  e.resign();
  const Metrics m = client.metrics();
  for (MetricKind k : {MetricKind::kFairLock, MetricKind::kSemaphore, MetricKind::kRead, MetricKind::kWrite,
                       MetricKind::kMultiLock, MetricKind::kElection}) {
    EXPECT_EQ(acquisitions(m, k, AcquireResult::kAcquired), 1u) << to_string(k);
    EXPECT_EQ(m.of(k).wait_seconds.count, 1u) << to_string(k);
    EXPECT_EQ(m.of(k).held, 0u) << to_string(k);
  }
  for (MetricKind k : {MetricKind::kFairLock, MetricKind::kSemaphore, MetricKind::kRead, MetricKind::kWrite,
                       MetricKind::kMultiLock})
    EXPECT_EQ(m.of(k).hold_seconds.count, 1u) << to_string(k);
  EXPECT_EQ(acquisitions(m, MetricKind::kLock, AcquireResult::kAcquired), 0u) << "the set counts as one multi-lock";
}

TEST(Metrics, AsynchronousAcquisitionsAndCancelledWaitsAreCounted) {
  const Options o = fresh_options();
  DatabaseDistributedLock holder(o);
  DatabaseDistributedLock client(same_table(o));
  const Owner owner = Owner::create();
  Lock lock = client.get_lock("async", owner);
  async_lock(lock, asio::use_future).get();
  async_unlock(lock, asio::use_future).get();
  holder.lock("async");
  auto pending = async_lock(lock, asio::use_future);
  EXPECT_TRUE(wait_until([&] { return client.metrics().of(MetricKind::kLock).waiting == 1; }, 5s));
  client.cancel(owner);
  EXPECT_THROW(pending.get(), Cancelled);
  const Metrics m = client.metrics();
  EXPECT_EQ(acquisitions(m, MetricKind::kLock, AcquireResult::kAcquired), 1u);
  EXPECT_EQ(acquisitions(m, MetricKind::kLock, AcquireResult::kCancelled), 1u);
  EXPECT_EQ(m.of(MetricKind::kLock).waiting, 0u);
  EXPECT_EQ(m.of(MetricKind::kLock).hold_seconds.count, 1u);
  holder.unlock("async");
}

TEST(Metrics, ALostHoldIsCountedOnceUnderItsCause) {
  Options o = fresh_options();
  DatabaseDistributedLock client(o);
  DatabaseDistributedLock other(same_table(o));
  // Forced: freed while its lease ran.
  client.lock("forced");
  ASSERT_TRUE(other.force_unlock("forced"));
  EXPECT_FALSE(client.is_held_by_current_thread("forced"));
  // Taken over: another owner holds it now.
  client.lock("taken");
  ASSERT_TRUE(other.force_unlock("taken"));
  other.lock("taken");
  EXPECT_FALSE(client.is_held_by_current_thread("taken"));
  // Lease ran out: a fixed lease nobody renews; its owner's next acquire finds it.
  client.lock("ran-out", 300ms);
  ASSERT_TRUE(wait_until([&] { return !other.is_locked("ran-out"); }, 5s));
  EXPECT_THROW(client.lock("ran-out"), LockLostError);
  const Metrics m = client.metrics();
  const auto& lost = m.of(MetricKind::kLock).lost;
  EXPECT_EQ(lost[index(LossCause::kForced)], 1u);
  EXPECT_EQ(lost[index(LossCause::kTakenOver)], 1u);
  EXPECT_EQ(lost[index(LossCause::kLeaseRanOut)], 1u);
  EXPECT_EQ(acquisitions(m, MetricKind::kLock, AcquireResult::kFailed), 1u) << "the acquire that found the loss";
  client.unlock("forced");
  client.unlock("taken");
  client.unlock("ran-out");
  EXPECT_EQ(client.metrics().of(MetricKind::kLock).hold_seconds.count, 0u) << "lost holds end in `lost`, not here";
  other.unlock("taken");
}

// The one loss path: a loss first found by an unlock (of a lock, of a set)
// is told and counted like any other, once.
TEST(Metrics, ALossFirstFoundAtUnlockIsToldAndCountedOnce) {
  Options o = fresh_options();
  auto told = std::make_shared<std::atomic<int>>(0);
  o.on_lock_lost = [told](std::string_view, std::uint64_t) { ++*told; };
  DatabaseDistributedLock client(o);
  DatabaseDistributedLock other(same_table(o));
  client.lock("forced");
  ASSERT_TRUE(other.force_unlock("forced"));
  client.unlock("forced");  // finds it gone
  MultiLock set = client.get_multi_lock({"x", "y"});
  set.lock();
  ASSERT_TRUE(other.force_unlock("y"));
  other.lock("y");
  set.unlock();  // frees x, finds y taken over
  ASSERT_TRUE(wait_until([&] { return told->load() == 2; }, 5s)) << "told " << told->load() << " time(s)";
  const Metrics m = client.metrics();
  const auto& lost = m.of(MetricKind::kLock).lost;
  EXPECT_EQ(lost[index(LossCause::kForced)], 1u);
  EXPECT_EQ(lost[index(LossCause::kTakenOver)], 1u);
  EXPECT_TRUE(test::holds_throughout([&] { return told->load() == 2; }, 500ms)) << "told twice";
  other.unlock("y");
}

// Whether the client's lock holds and permits have each been renewed `times`
// times within `timeout`.
bool lock_and_permit_renewed(DatabaseDistributedLock& client, std::uint64_t times, std::chrono::milliseconds timeout) {
  return wait_until(
      [&] {
        const Metrics m = client.metrics();
        return m.of(MetricKind::kLock).renewals >= times && m.of(MetricKind::kSemaphore).renewals >= times;
      },
      timeout);
}

TEST(Metrics, TheWatchdogCountsRenewalsAndTheirRoundTrips) {
  Options o = fresh_options();
  o.watchdog_timeout = 600ms;  // a renewal every 200 ms
  DatabaseDistributedLock client(o);
  client.lock("renewed");
  Semaphore sem = client.get_semaphore("sem", 1);
  Permit p = sem.acquire();
  EXPECT_TRUE(lock_and_permit_renewed(client, 3, 10s));
  const Metrics m = client.metrics();
  EXPECT_GE(m.renewal_seconds.count, 3u);
  EXPECT_GT(m.renewal_seconds.sum, 0.0);
  EXPECT_EQ(m.of(MetricKind::kWrite).renewals, 0u);
  EXPECT_EQ(m.watchdog_ticks_failed, 0u);
  client.unlock("renewed");
}

TEST(Metrics, RenewalsAroundARowLockedByAnotherTransactionAreCountedPerKind) {
  Options o = fresh_options();
  o.watchdog_timeout = 6s;  // a renewal tick every 2 s; an unrenewed hold is lost after 6 s
  DatabaseDistributedLock client(o);
  client.lock("renewed");
  client.lock("locked-row");
  Semaphore sem = client.get_semaphore("sem", 1);
  Permit p = sem.acquire();
  auto foreign = details::Connection::open(details::ConnectionSettings::from(o));
  foreign->execute_plain("START TRANSACTION");
  (void)foreign->scalar_plain("SELECT state FROM `" + o.table + "` WHERE lock_name = 'locked-row' FOR UPDATE");
  // Each tick renews the other two around the locked row (the first after
  // one lock wait); the locked row's hold stays live for its lease.
  EXPECT_TRUE(lock_and_permit_renewed(client, 2, 20s));
  const Metrics m = client.metrics();
  std::uint64_t lost = 0;
  for (const std::uint64_t n : m.of(MetricKind::kLock).lost) lost += n;
  EXPECT_EQ(lost, 0u) << "counted only once the locked row's hold was lost";
  EXPECT_LE(m.of(MetricKind::kLock).renewals, m.of(MetricKind::kSemaphore).renewals + 1)
      << "the locked row's hold was counted as renewed";
  foreign->execute_plain("ROLLBACK");
  client.unlock("locked-row");
  client.unlock("renewed");
}

TEST(Metrics, AReleaseInThisClientIsOneLocalWakeUp) {
  Options o = fresh_options();
  DatabaseDistributedLock client(test::slow_poll(o));
  client.lock("local");
  std::thread waiter([&] {
    client.lock("local");
    client.unlock("local");
  });
  ASSERT_TRUE(wait_until([&] { return client.metrics().of(MetricKind::kLock).waiting == 1; }, 5s));
  client.unlock("local");
  waiter.join();
  const Metrics m = client.metrics();
  EXPECT_EQ(m.wakeups[index(WakeSource::kLocal)], 1u);
  EXPECT_EQ(m.wakeups[index(WakeSource::kBell)], 0u);
  EXPECT_EQ(m.wakeups[index(WakeSource::kPoll)], 0u);
}

TEST(Metrics, AReleaseElsewhereIsOneBellWakeUpOrAPollOne) {
  const Options o = fresh_options();
  DatabaseDistributedLock holder(o);
  const Options w = test::as_private_account(same_table(o));
  DatabaseDistributedLock client(w);  // polls every 200 ms
  holder.lock("elsewhere");
  std::thread waiter([&] {
    client.lock("elsewhere");
    client.unlock("elsewhere");
  });
  ASSERT_TRUE(wait_until([&] { return client.metrics().of(MetricKind::kLock).waiting == 1; }, 5s));
  // With fast wake-up the waiter watches the holder's bell.
  if (test::fast_wakeup_enabled()) {
    ASSERT_TRUE(test::wait_for_bell_waits(w.user));
  }
  const Metrics before = client.metrics();
  holder.unlock("elsewhere");
  waiter.join();
  const Metrics m = client.metrics();
  const auto woke = [&](WakeSource s) { return m.wakeups[index(s)] - before.wakeups[index(s)]; };
  if (test::fast_wakeup_enabled()) {
    EXPECT_EQ(woke(WakeSource::kBell), 1u);
  } else {
    EXPECT_GE(woke(WakeSource::kPoll), 1u);
    EXPECT_EQ(woke(WakeSource::kBell), 0u);
  }
  EXPECT_EQ(woke(WakeSource::kLocal), 0u);
}

TEST(Metrics, AWaitBehindAFixedLeaseWakesAtItsEndSynchronousOrNot) {
  const Options o = test::slow_poll(fresh_options());
  Options quiet = same_table(o);
  quiet.fast_wakeup = false;  // nothing rings: the lease's end is what wakes it
  DatabaseDistributedLock holder(o);
  DatabaseDistributedLock client(quiet);
  holder.lock("leased", 800ms);
  EXPECT_TRUE(client.try_lock("leased", 10s));
  Metrics m = client.metrics();
  const std::uint64_t lease_ends = m.wakeups[index(WakeSource::kLeaseEnd)];
  EXPECT_GE(lease_ends, 1u);
  EXPECT_EQ(acquisitions(m, MetricKind::kLock, AcquireResult::kAcquired), 1u);
  client.unlock("leased");
  // The same wait, asynchronous and for a set of names.
  holder.lock("leased-a", 800ms);
  MultiLock both = client.get_multi_lock({"leased-a", "leased-b"}, Owner::create());
  EXPECT_TRUE(async_try_lock(both, 10s, asio::use_future).get());
  m = client.metrics();
  EXPECT_GT(m.wakeups[index(WakeSource::kLeaseEnd)], lease_ends);
  EXPECT_EQ(acquisitions(m, MetricKind::kMultiLock, AcquireResult::kAcquired), 1u);
  async_unlock(both, asio::use_future).get();
}

TEST(Metrics, ALockWaitTimeoutRetriedIsCountedAsARetryAndEachRunAsAStatement) {
  const Options o = fresh_options();
  DatabaseDistributedLock client(o);
  client.lock("row");  // the row exists
  client.unlock("row");
  auto counters = std::make_shared<details::MetricCounters>();
  details::ConnectionSettings settings = details::ConnectionSettings::from(o);
  settings.lock_wait_seconds = 1;
  settings.counters = counters;
  auto c = details::Connection::open(settings);
  auto foreign = details::Connection::open(details::ConnectionSettings::from(o));
  foreign->execute_plain("START TRANSACTION");
  (void)foreign->scalar_plain("SELECT state FROM `" + o.table + "` WHERE lock_name = 'row' FOR UPDATE");
  std::thread release([&] {
    // Once the first lock wait has timed out (its retry is counted before it runs).
    (void)wait_until([&] { return counters->snapshot().retries_lock_wait_timeout >= 1; }, 20s);
    foreign->execute_plain("ROLLBACK");
  });
  const details::CallBudget budget(10s);
  // Returns once the foreign transaction has ended (the second run).
  (void)details::run_statement(*c, nullptr, "a test update", [&] {
    return c->prepared("UPDATE `" + o.table + "` SET state = state WHERE lock_name = 'row'").executeUpdate();
  });
  release.join();
  const Metrics m = counters->snapshot();
  EXPECT_EQ(m.retries_lock_wait_timeout, 1u);
  EXPECT_EQ(m.retries_deadlock, 0u);
  EXPECT_EQ(m.statements, 2u);
  EXPECT_EQ(m.connections_opened, 1u);
}

TEST(Metrics, APooledConnectionLentOutIsInUse) {
  const Options o = fresh_options();
  DatabaseDistributedLock client(o);
  client.lock("held-row");
  client.unlock("held-row");
  auto foreign = details::Connection::open(details::ConnectionSettings::from(o));
  foreign->execute_plain("START TRANSACTION");
  (void)foreign->scalar_plain("SELECT state FROM `" + o.table + "` WHERE lock_name = 'held-row' FOR UPDATE");
  std::thread blocked([&] {  // its take waits for the row
    if (client.try_lock("held-row")) client.unlock("held-row");
  });
  const bool in_use = wait_until([&] { return client.metrics().pool_in_use == 1; }, 5s);
  foreign->execute_plain("ROLLBACK");
  blocked.join();
  EXPECT_TRUE(in_use);
  EXPECT_EQ(client.metrics().pool_in_use, 0u);
}

TEST(Metrics, AStatementWhoseConnectionDiedIsCountedAsReconciled) {
  Options o = test::as_private_account(fresh_options());
  const std::string account = o.user;
  o.pool_size = 1;
  DatabaseDistributedLock client(o);
  client.lock("k");
  client.lock("k");
  const Metrics before = client.metrics();
  EXPECT_EQ(before.unknown_outcomes_reconciled, 0u);
  test::kill_sessions_of(account);
  client.unlock("k");  // a count down on a dead connection: read, then run again
  const Metrics m = client.metrics();
  EXPECT_EQ(m.unknown_outcomes_reconciled, 1u);
  EXPECT_GT(m.connections_opened, before.connections_opened);
  EXPECT_EQ(client.hold_count("k"), 1);
  client.unlock("k");
}

// A release right after one that rang for a waiter elsewhere goes straight
// to the session whose bell the row records. When that session died, what
// the release did is read, never assumed: the hold was not lost, and the
// row is free after the unlock.
TEST(Metrics, AnUnlockWhoseBellSessionDiedIsReconciledNotReportedLost) {
  if (!test::fast_wakeup_enabled()) GTEST_SKIP() << "no bells without fast wake-up";
  Options o = test::as_private_account(fresh_options());
  const std::string account = o.user;
  o.pool_size = 1;
  std::atomic<int> reported{0};
  o.on_lock_lost = [&](std::string_view, std::uint64_t) { ++reported; };
  DatabaseDistributedLock client(o);
  DatabaseDistributedLock other(same_table(fresh_options()));
  client.lock("b");
  std::thread waiter([&] {
    other.lock("b");  // marks the row, and is rung for
    other.unlock("b");
  });
  ASSERT_TRUE(wait_until(
      [&] {
        return test::query_scalar("SELECT waiters FROM `" + o.table + "` WHERE lock_name = 'b'") == "1";
      },
      5s));
  client.unlock("b");
  waiter.join();
  client.lock("b");
  test::kill_sessions_of(account);
  client.unlock("b");
  EXPECT_FALSE(other.is_locked("b")) << "the unlock left the row held";
  const Metrics m = client.metrics();
  EXPECT_EQ(m.unknown_outcomes_reconciled, 1u);
  for (std::uint64_t n : m.of(MetricKind::kLock).lost) EXPECT_EQ(n, 0u);
  EXPECT_EQ(m.of(MetricKind::kLock).hold_seconds.count, 2u);
  // on_lock_lost would run on the io thread.
  EXPECT_TRUE(test::holds_throughout([&] { return reported.load() == 0; }, 300ms));
}

TEST(Metrics, AWatchdogTickThatCannotReachTheDatabaseIsCountedAsFailed) {
  Options o = test::as_private_account(fresh_options());
  const std::string account = o.user;
  o.watchdog_timeout = 3s;  // a renewal every second, well inside the lease
  DatabaseDistributedLock client(o);
  client.lock("w");
  test::execute_sql("ALTER USER '" + account + "'@'127.0.0.1' ACCOUNT LOCK");
  test::kill_sessions_of(account);
  const bool failed = wait_until([&] { return client.metrics().watchdog_ticks_failed >= 1; }, 10s);
  test::execute_sql("ALTER USER '" + account + "'@'127.0.0.1' ACCOUNT UNLOCK");
  EXPECT_TRUE(failed);
}

TEST(Metrics, AMoveToTheNextServerIsAFailover) {
  Options o = fresh_options();
  o.failover_servers = {{o.host, o.port}};
  o.host = "127.0.0.1";
  o.port = 1;  // nothing listens there
  DatabaseDistributedLock client(o);
  client.lock("f");
  client.unlock("f");
  EXPECT_GE(client.metrics().failovers, 1u);
}

TEST(Metrics, CountingOffLeavesEveryMetricAtZero) {
  Options o = fresh_options();
  o.metrics = false;
  DatabaseDistributedLock client(o);
  client.lock("z");
  const Metrics m = client.metrics();
  EXPECT_EQ(acquisitions(m, MetricKind::kLock, AcquireResult::kAcquired), 0u);
  EXPECT_EQ(m.of(MetricKind::kLock).held, 0u);
  EXPECT_EQ(m.statements, 0u);
  EXPECT_EQ(m.connections_opened, 0u);
  EXPECT_EQ(m.pool_size, 0u);
  client.unlock("z");
}

}  // namespace
}  // namespace dlock
