// Rules a review found broken, each with the test that reproduced it:
// ownership (two clients are distinct owners whatever their machine_id; a
// lost hold is never silently replaced; renewal matches the hold itself),
// waits of any length, recovery after the server killed every connection,
// rows locked by a foreign transaction, a take picked as a deadlock's victim
// running again, bells given back when a release fails, KILL QUERY only
// for our own bell waits, and no on_lock_lost once the client is being
// destroyed.
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "sql/connection.hpp"
#include "sql/bells.hpp"
#include "engine/holds.hpp"
#include "sql/hold_rows.hpp"
#include "test_env.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::fresh_options;
using test::same_table;

std::unique_ptr<details::Connection> raw_connection(const Options& o) {
  return details::Connection::open(details::ConnectionSettings::from(o));
}

// ---------------------------------------------------------------- identity

TEST(Identity, TwoClientsWithOneMachineIdInOneProcessAreDistinctOwners) {
  Options o = fresh_options();
  o.machine_id = "web01";
  DatabaseDistributedLock a(o);
  DatabaseDistributedLock b(same_table(o));
  a.lock("x");
  // Same thread, same label: before hold ids, b took a's live row as its own.
  EXPECT_FALSE(b.try_lock("x"));
  EXPECT_FALSE(b.is_held_by_current_thread("x"));
  EXPECT_THROW(b.unlock("x"), NotHeldError);
  a.unlock("x");
  EXPECT_TRUE(b.try_lock("x"));
  EXPECT_FALSE(a.try_lock("x"));
  b.unlock("x");
}

TEST(Identity, TwoProcessesWithOneMachineIdAreDistinctOwners) {
  Options o = fresh_options();
  o.machine_id = "web01";
  DatabaseDistributedLock client(o);
  test::ChildProcess holder(test::helper_path(), {test::url_for(o, "&machine_id=web01"), "hold", "x", "0"});
  ASSERT_TRUE(holder.wait_for_line("acquired", 15s).has_value()) << "helper never acquired";
  // Both processes' first threads have owner id 1: only the hold id differs.
  EXPECT_FALSE(client.try_lock("x"));
  EXPECT_FALSE(client.try_lock("x", 300ms));
  holder.kill(SIGKILL);
}

TEST(Identity, ALiveRowIsNeverTakenWhateverItsLabelAndOwner) {
  Options o = fresh_options();
  o.machine_id = "m";
  DatabaseDistributedLock client(o);
  client.lock("t");
  client.unlock("t");
  // Someone else's live hold with this client's label and this thread's
  // owner id: only the hold id differs.
  test::execute_sql("UPDATE `" + o.table + "` SET hold_id = 111, machine_id = 'm', owner_id = " +
                    std::to_string(Owner::this_thread().id()) +
                    ", state = 1, expire_time = NOW(6) + INTERVAL 10 SECOND WHERE kind = 1 AND lock_name = 't'");
  EXPECT_FALSE(client.try_lock("t"));
  EXPECT_FALSE(client.is_held_by_current_thread("t"));
  auto c = raw_connection(o);
  const details::HoldRows rows(o.table, nullptr);
  const details::HoldRow row = rows.read(*c, details::RowKey{details::Kind::kLock, "t", 0});
  EXPECT_TRUE(row.held_by(111));
  EXPECT_THROW(client.unlock("t"), NotHeldError);
}

TEST(Identity, ALostHoldIsNeverRevivedByALateReentrantRecord) {
  details::HoldRegistry registry;
  const details::NameKey key(details::Kind::kLock, "n");
  details::Hold fresh;
  fresh.hold_id = 99;
  fresh.count = 1;
  fresh.watchdog = true;
  fresh.deadline = Clock::now() + 10s;
  fresh.fence = 5;
  registry.record_fresh(key, 7, fresh);
  const auto hold = registry.find(key, 7);
  ASSERT_TRUE(hold.has_value());
  ASSERT_TRUE(registry.mark_lost(key, 7, hold->generation).has_value());
  EXPECT_FALSE(registry.record_reentrant(key, 7, hold->generation, 2, true, fresh.deadline));
  EXPECT_TRUE(registry.find(key, 7)->lost);
  EXPECT_EQ(registry.find(key, 7)->count, 1u);
  EXPECT_TRUE(registry.watchdog_holds().empty()) << "the watchdog would renew a lost hold";
}

TEST(Identity, RenewalMatchesTheHoldNotJustTheClientsLabel) {
  Options o = fresh_options();
  o.machine_id = "web01";
  o.watchdog_timeout = 900ms;
  std::atomic<int> b_lost{0};
  Options ob = same_table(o);
  ob.on_lock_lost = [&](std::string_view, std::uint64_t) { ++b_lost; };
  DatabaseDistributedLock a(same_table(o));
  DatabaseDistributedLock b(ob);
  DatabaseDistributedLock admin(same_table(o));
  b.lock("r");
  ASSERT_TRUE(admin.force_unlock("r"));
  // Another thread of another client with b's label takes the free row.
  std::atomic<bool> taken{false}, done{false};
  std::thread other([&] {
    a.lock("r");
    taken = true;
    test::wait_until([&] { return done.load(); }, 20s);
    a.unlock("r");
  });
  ASSERT_TRUE(test::wait_until([&] { return taken.load(); }, 5s));
  // b's watchdog must find its hold gone, not renew a's row in its place.
  EXPECT_TRUE(test::wait_until([&] { return b_lost.load() > 0; }, 5s)) << "b never learned that it lost the lock";
  EXPECT_THROW(b.lock("r"), LockLostError);
  b.unlock("r");
  done = true;
  other.join();
}

// ---------------------------------------------------------------- lost holds

TEST(LostHold, ReentrantAcquireAfterALossThrowsUntilTheOwedUnlocksAreMade) {
  const Options o = fresh_options();
  DatabaseDistributedLock a(o);
  DatabaseDistributedLock admin(same_table(o));
  a.lock("l");
  a.lock("l");
  const auto first = a.fencing_token("l");
  ASSERT_TRUE(admin.force_unlock("l"));
  // Before: the row was free, so the acquire silently took a new hold (a new
  // fence under the caller's feet).
  EXPECT_THROW(a.lock("l"), LockLostError);
  EXPECT_THROW((void)a.try_lock("l"), LockLostError);
  EXPECT_THROW((void)a.try_lock("l", 200ms, 5s), LockLostError);
  EXPECT_FALSE(admin.is_locked("l")) << "the lost hold was replaced";
  EXPECT_NO_THROW(a.unlock("l"));
  EXPECT_THROW(a.lock("l"), LockLostError) << "one unlock is still owed";
  EXPECT_NO_THROW(a.unlock("l"));
  EXPECT_THROW(a.unlock("l"), NotHeldError);
  a.lock("l");
  EXPECT_GT(a.fencing_token("l"), first);
  a.unlock("l");
}

TEST(LostHold, LockLostErrorThroughAHandleAndAGuard) {
  const Options o = fresh_options();
  DatabaseDistributedLock a(o);
  DatabaseDistributedLock b(same_table(o));
  Lock handle = a.get_lock("g");
  std::lock_guard<Lock> guard(handle);
  ASSERT_TRUE(b.force_unlock("g"));
  ASSERT_TRUE(b.try_lock("g"));
  EXPECT_THROW(handle.lock(), LockLostError);
  EXPECT_THROW((void)handle.try_lock_for(100ms), LockLostError);
  b.unlock("g");
  // The guard's unlock() owes nothing to the database and does not throw.
}

// ---------------------------------------------------------------- waits

TEST(Waits, TheLongestWaitsMeanForeverNotGiveUpAtOnce) {
  const Options o = fresh_options();
  DatabaseDistributedLock holder(o);
  DatabaseDistributedLock waiter(same_table(o));
  Lock lock = waiter.get_lock("w");
  const std::vector<std::function<bool()>> waits = {
      [&] { return waiter.try_lock("w", Millis::max()); },
      [&] { return waiter.try_lock("w", Millis::max(), 5s); },
      [&] { return lock.try_lock_for(std::chrono::seconds::max()); },
      [&] { return lock.try_lock_for(std::chrono::nanoseconds::max()); },
      [&] { return lock.try_lock_for(std::chrono::duration<double>(1e300)); },
      [&] { return lock.try_lock_until(std::chrono::steady_clock::time_point::max()); },
      [&] { return lock.try_lock_until(std::chrono::system_clock::time_point::max()); },
  };
  for (std::size_t i = 0; i < waits.size(); ++i) {
    holder.lock("w", 400ms);
    const auto start = Clock::now();
    EXPECT_TRUE(waits[i]()) << "wait #" << i << " gave up";
    EXPECT_GE(Clock::now() - start, 300ms) << "wait #" << i << " did not wait for the lease";
    waiter.unlock("w");
    holder.unlock("w");  // lost (expired): returns normally
  }
}

TEST(Waits, TryLockTakesAnyDurationTypeWaitFirstLeaseSecond) {
  const Options o = fresh_options();
  DatabaseDistributedLock client(o);
  ASSERT_TRUE(client.try_lock("d", std::chrono::microseconds(1500)));
  client.unlock("d");
  ASSERT_TRUE(client.try_lock("d", std::chrono::duration<double>(0.25), std::chrono::minutes(1)));
  const auto ttl = client.remaining_ttl("d");
  ASSERT_TRUE(ttl.has_value());
  EXPECT_GT(*ttl, 50s) << "the second duration is the lease";
  client.unlock("d");
  Lock handle = client.get_lock("d");
  ASSERT_TRUE(handle.try_lock(std::chrono::seconds(1), std::chrono::seconds(30)));
  handle.unlock();
  EXPECT_THROW((void)client.try_lock("d", 1s, std::chrono::nanoseconds(0)), std::invalid_argument);
}

TEST(Waits, SaturatingConversionRoundsUpAndNeverOverflows) {
  using details::saturating_wait;
  EXPECT_EQ(saturating_wait(std::chrono::microseconds(1)), Millis(1));
  EXPECT_EQ(saturating_wait(std::chrono::microseconds(1001)), Millis(2));
  EXPECT_EQ(saturating_wait(Millis(0)), Millis(0));
  EXPECT_EQ(saturating_wait(Millis(-5)), Millis(0));
  EXPECT_EQ(saturating_wait(std::chrono::duration<double>(std::nan(""))), Millis(0));
  EXPECT_EQ(saturating_wait(std::chrono::hours::max()), Millis::max());
  EXPECT_EQ(saturating_wait(std::chrono::seconds::max()), Millis::max());
  EXPECT_EQ(saturating_wait(Millis::max()), Millis::max());
  EXPECT_EQ(saturating_wait(std::chrono::duration<double>(1e300)), Millis::max());
}

// ---------------------------------------------------------------- killed connections

// The server kills every connection of this test's own account (as after a
// restart): the next unlock() must free the row then, not leave it held for
// a lease because the pool handed out dead idle connections and reconciled
// on another dead one.
TEST(Recovery, UnlockAfterEveryConnectionWasKilledFreesTheRowAtOnce) {
  Options o = test::as_private_account(fresh_options());
  const std::string account = o.user;
  o.pool_size = 4;
  DatabaseDistributedLock client(o);
  DatabaseDistributedLock other(same_table(fresh_options()));
  // Open all four pooled connections: four threads ask at once until the
  // server shows four sessions of the account.
  {
    std::atomic<bool> done{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i)
      threads.emplace_back([&] {
        while (!done) (void)client.is_locked("warm");
      });
    const bool four = test::wait_until(
        [&] {
          return test::query_scalar("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE user = '" + account +
                                    "'") == "4";
        },
        10s);
    done = true;
    for (auto& t : threads) t.join();
    ASSERT_TRUE(four) << "the pool never opened four connections";
  }
  client.lock("k");
  auto admin = raw_connection(Options::from_url(test::database_url()));
  {
    const std::vector<std::string> ids =
        test::query_column("SELECT id FROM information_schema.PROCESSLIST WHERE user = '" + account + "'");
    ASSERT_GE(ids.size(), 4u);
    for (const auto& id : ids) {
      try {
        admin->execute_plain("KILL CONNECTION " + id);
      } catch (const std::exception&) {
      }
    }
  }
  client.unlock("k");
  EXPECT_FALSE(other.is_locked("k")) << "unlock() left the row held after the connections were killed";
  // And the next calls just work.
  EXPECT_TRUE(client.try_lock("k"));
  client.unlock("k");
}

// ---------------------------------------------------------------- foreign transactions

class ForeignLock : public ::testing::Test {
 protected:
  void SetUp() override {
    options_ = fresh_options();
    options_.io_timeout = 2s;
  }
  // Locks `name`'s row in a transaction of its own until release().
  void lock_row(const std::string& name) {
    foreign_ = raw_connection(options_);
    foreign_->execute_plain("START TRANSACTION");
    auto& ps = foreign_->prepared("SELECT * FROM `" + options_.table + "` WHERE lock_name = ? FOR UPDATE");
    ps.setString(1, name);
    std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
  }
  void release() {
    if (foreign_) foreign_->execute_plain("ROLLBACK");
    foreign_.reset();
  }
  void TearDown() override { release(); }

  Options options_;
  std::unique_ptr<details::Connection> foreign_;
};

TEST_F(ForeignLock, CallsFailWithinAboutIoTimeoutInTotal) {
  DatabaseDistributedLock client(options_);
  DatabaseDistributedLock other(same_table(options_));
  client.lock("f");
  other.lock("g");
  other.unlock("g");  // `other` knows the row exists: its acquire is the UPDATE
  lock_row("f");
  auto start = Clock::now();
  client.unlock("f");  // logs an error, never throws
  // Before: 8 lock-wait timeouts of 1 s each.
  EXPECT_LT(Clock::now() - start, 3500ms) << "unlock() waited far past io_timeout";
  start = Clock::now();
  EXPECT_THROW((void)other.try_lock("f", 10s), BackendError);
  EXPECT_LT(Clock::now() - start, 3500ms);
  start = Clock::now();
  EXPECT_THROW(other.lock("f"), BackendError);
  EXPECT_LT(Clock::now() - start, 3500ms);
  release();
  EXPECT_TRUE(other.try_lock("f", 40s)) << "the row never came back";
  other.unlock("f");
}

TEST_F(ForeignLock, DoesNotStallTheWatchdogForOtherHolds) {
  // The default io_timeout: the watchdog's own retries must still fit its
  // tick, far inside a lease shorter than io_timeout.
  options_.io_timeout = 10s;
  options_.watchdog_timeout = 2400ms;
  std::atomic<int> lost_b{0};
  Options o = options_;
  o.on_lock_lost = [&](std::string_view name, std::uint64_t) {
    if (name == "b") ++lost_b;
  };
  DatabaseDistributedLock client(o);
  client.lock("a");
  client.lock("b");
  lock_row("a");
  // Three leases' worth: before, every renewal (both rows in one statement)
  // waited on row a and failed, so b was lost after one lease.
  EXPECT_TRUE(test::holds_throughout([&] { return lost_b.load() == 0; }, 6s)) << "b was lost: the watchdog stalled";
  release();
  EXPECT_TRUE(client.is_held_by_current_thread("b"));
  client.unlock("b");
  client.unlock("a");  // a was lost (its row could not be renewed): returns normally
}

TEST_F(ForeignLock, AFailedReleaseLeavesTheSessionItsBell) {
  if (!test::fast_wakeup_enabled()) GTEST_SKIP() << "about the session bell";
  DatabaseDistributedLock client(options_);
  client.lock("d");
  const std::string bell_of_row =
      "SELECT IS_USED_LOCK(bell) FROM `" + options_.table + "` WHERE kind = 1 AND lock_name = 'd'";
  ASSERT_NE(test::query_scalar(bell_of_row), "") << "the hold recorded no bell";
  test::execute_sql("UPDATE `" + options_.table + "` SET waiters = 1 WHERE kind = 1 AND lock_name = 'd'");
  lock_row("d");
  client.unlock("d");  // the freeing UPDATE times out
  release();
  // The hold stays in the row until its lease ends; the session kept a bell
  // (a ring that failed gives back nothing), so the next hold records one
  // that someone holds.
  client.force_unlock("d");
  client.lock("d");
  EXPECT_NE(test::query_scalar(bell_of_row), "") << "the session lost its bell";
  client.unlock("d");
}

// A take of several rows that the server picks as the victim of a real
// deadlock (error 1213, its statement rolled back) runs again and acquires
// once the other transaction ends: the caller sees a wait, not an error.
TEST_F(ForeignLock, ATakeChosenAsADeadlockVictimRunsAgainAndAcquires) {
  options_.io_timeout = 10s;  // room in the call's budget for the retry's lock wait
  DatabaseDistributedLock client(options_);
  MultiLock both = client.get_multi_lock({"dl-a", "dl-b"}, Owner::create());  // taken on another thread
  both.lock();  // the rows exist: the take is one UPDATE locking dl-a, then dl-b
  both.unlock();
  // The other transaction locks dl-b, after inserting rows of its own: the
  // server rolls back the transaction that changed fewer rows, the take.
  foreign_ = raw_connection(options_);
  foreign_->execute_plain("START TRANSACTION");
  for (int i = 0; i < 20; ++i)
    foreign_->execute_plain("INSERT INTO `" + options_.table + "` (kind, lock_name) VALUES (1, 'dl-weight-" +
                            std::to_string(i) + "')");
  const auto lock_foreign = [&](const std::string& name) {
    (void)foreign_->scalar_plain("SELECT state FROM `" + options_.table + "` WHERE kind = 1 AND lock_name = '" + name +
                                 "' FOR UPDATE");
  };
  lock_foreign("dl-b");
  auto taking = std::async(std::launch::async, [&] { return both.try_lock_for(20s); });
  // The take holds dl-a and waits for dl-b; now the other way round closes
  // the cycle, and the take is rolled back, which lets this read through.
  // Seen as an UPDATE of this table running for over 0.1 s (the processlist,
  // not INNODB_LOCK_WAITS: the server refreshes that only after 0.1 s
  // without a read, which tests polling at once prevent).
  const auto lock_waits = [&] {
    return test::query_scalar("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'Updating' AND"
                              " TIME_MS > 100 AND INFO LIKE 'UPDATE%' AND LOCATE('`" +
                              options_.table + "`', INFO) > 0");
  };
  ASSERT_TRUE(test::wait_until([&] { return lock_waits() == "1"; }, 10s)) << "the take never waited for dl-b";
  EXPECT_NO_THROW(lock_foreign("dl-a")) << "the server rolled back the other transaction, not the take";
  EXPECT_EQ(taking.wait_for(300ms), std::future_status::timeout) << "the take ended while both rows were locked";
  release();  // rolls back the inserted rows too
  EXPECT_TRUE(taking.get()) << "the take failed instead of running again";
  EXPECT_GE(client.metrics().retries_deadlock, 1u);
  EXPECT_GT(both.fencing_token("dl-b"), 0u);
  both.unlock();
  EXPECT_EQ(test::query_scalar("SELECT COUNT(*) FROM `" + options_.table + "` WHERE lock_name LIKE 'dl-weight-%'"),
            "0");
}

// ---------------------------------------------------------------- KILL QUERY

TEST(BellInterrupt, KillsOnlyABellWaitOfItsOwnAccount) {
  if (!test::fast_wakeup_enabled()) GTEST_SKIP() << "about the bells";
  const Options o = fresh_options();
  // A stranger (another account) in a long statement, as after a server
  // restart gave it the id we remembered.
  const Options stranger_options = test::as_private_account(o);
  auto stranger = raw_connection(stranger_options);
  const auto stranger_id = stranger->server_id();
  auto sleeping = std::async(std::launch::async, [&] {
    std::unique_ptr<sql::ResultSet> rs(stranger->prepared("SELECT SLEEP(3)").executeQuery());
    return rs->next() ? rs->getInt(1) : -1;
  });
  auto killer = raw_connection(o);
  ASSERT_TRUE(test::wait_until(
      [&] {
        return test::query_scalar("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = " +
                                  std::to_string(stranger_id) + " AND INFO LIKE 'SELECT SLEEP%'") == "1";
      },
      5s));
  EXPECT_FALSE(details::interrupt_bell_wait(*killer, {stranger_id, 0}));
  EXPECT_EQ(sleeping.get(), 0) << "the stranger's statement was killed";
  EXPECT_FALSE(details::interrupt_bell_wait(*killer, {999'999'999, 0})) << "an unknown id is not an error";

  // Our own bell wait is interrupted.
  const std::string bell = "dlock-s:test:" + std::to_string(stranger_id);
  auto holder = raw_connection(o);
  {
    auto& ps = holder->prepared("SELECT GET_LOCK(?, 0)");
    ps.setString(1, bell);
    std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
  }
  auto waiter = raw_connection(o);
  const auto waiter_id = waiter->server_id();
  auto waiting = std::async(std::launch::async, [&] { return details::wait_for_bell(*waiter, bell, 20, nullptr); });
  ASSERT_TRUE(test::wait_until(
      [&] {
        return test::query_scalar("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = " +
                                  std::to_string(waiter_id) + " AND STATE = 'User lock'") == "1";
      },
      5s));
  const auto start = Clock::now();
  EXPECT_FALSE(details::interrupt_bell_wait(*killer, {waiter_id, 1}))
      << "the same id on another server of the list is another session";
  EXPECT_TRUE(details::interrupt_bell_wait(*killer, {waiter_id, 0}));
  EXPECT_EQ(waiting.get(), details::BellWait::kInterrupted);
  EXPECT_LT(Clock::now() - start, 5s);
}

// ---------------------------------------------------------------- shutdown

TEST(Shutdown, NoOnLockLostCallbackStartsOnceTheClientIsBeingDestroyed) {
  Options o = fresh_options();
  o.watchdog_timeout = 600ms;
  std::atomic<bool> destroying{false};
  std::atomic<int> calls{0};
  std::atomic<int> calls_while_destroying{0};
  o.on_lock_lost = [&](std::string_view, std::uint64_t) {
    if (destroying) ++calls_while_destroying;
    if (++calls == 1) {
      // Hold the io thread until the destructor has started, so the second
      // loss's callback is still queued then.
      test::wait_until([&] { return destroying.load(); }, 10s);
      std::this_thread::sleep_for(300ms);
    }
  };
  auto client = std::make_unique<DatabaseDistributedLock>(o);
  DatabaseDistributedLock admin(same_table(o));
  client->lock("p");
  client->lock("q");
  ASSERT_TRUE(admin.force_unlock("p"));
  ASSERT_TRUE(admin.force_unlock("q"));
  ASSERT_TRUE(test::wait_until([&] { return calls.load() >= 1; }, 5s)) << "the losses were never reported";
  std::thread destroy([&] {
    destroying = true;
    client.reset();
  });
  destroy.join();
  EXPECT_EQ(calls.load(), 1) << "a callback ran during destruction";
  EXPECT_EQ(calls_while_destroying.load(), 0);
}

}  // namespace
}  // namespace dlock
