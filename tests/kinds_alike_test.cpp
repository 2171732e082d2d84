// Every kind of hold gets what the lock gets: renewal around a row a
// foreign transaction locked, a wake at a release in another client, a
// waiting writer's intent that is retried, leases the watchdog never
// stretches, no rows left by clients that ended or died, and an unknown
// outcome that leaves nothing behind. Each case once went wrong for the
// semaphore or the read-write lock while the lock was right.
//
// The wake-up cases run with a 5 s poll: a waiter woken by the poll, not at
// the release, misses their bound.
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/tools.hpp"
#include "background.hpp"
#include "child_process.hpp"
#include "test_env.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::fresh_options;
using test::InBackground;
using test::same_table;
using test::wait_until;

constexpr auto kSlowPoll = 5s;

Options slow_poll_options() {
  Options o = fresh_options();
  o.poll_interval = kSlowPoll;
  o.watchdog_timeout = 30s;
  return o;
}

#define SKIP_WHEN_FAST_WAKEUP_IS_OFF() \
  if (!test::fast_wakeup_enabled()) GTEST_SKIP() << "a wake at the release needs fast_wakeup"

std::string rows_of_kind(const Options& o, int kind) {
  return test::query_scalar("SELECT COUNT(*) FROM `" + o.table + "` WHERE kind = " + std::to_string(kind));
}

// Locks every row of `kinds` of `name` in a transaction of its own until
// destroyed.
class ForeignRowLock {
 public:
  ForeignRowLock(const Options& o, const std::string& kinds, const std::string& name)
      : c_(details::Connection::open(details::ConnectionSettings::from(o))) {
    c_->execute_plain("START TRANSACTION");
    std::unique_ptr<sql::ResultSet> rs(c_->prepared("SELECT * FROM `" + o.table + "` WHERE kind IN (" + kinds +
                                                    ") AND lock_name = '" + name + "' FOR UPDATE")
                                           .executeQuery());
    while (rs->next()) {
    }
  }
  ~ForeignRowLock() { c_->execute_plain("ROLLBACK"); }

 private:
  std::unique_ptr<details::Connection> c_;
};

// A semaphore's or a read-write lock's rows locked by a foreign transaction
// cost the holds on those rows at most: the watchdog renews every other
// hold of every kind around them.
TEST(KindsAlike, ARowLockedByAForeignTransactionLosesNoOtherHold) {
  Options o = fresh_options();
  // A tick every 0.8 s, and one lock wait (1 s) when the watchdog first
  // meets a locked row: the lease has room for both.
  o.watchdog_timeout = 2400ms;
  std::mutex m;
  std::set<std::string> lost;
  o.on_lock_lost = [&](std::string_view name, std::uint64_t) {
    std::lock_guard<std::mutex> g(m);
    lost.emplace(name);
  };
  DatabaseDistributedLock client(o);
  client.lock("lock");
  Permit locked_permit = client.get_semaphore("sem-locked", 2).acquire();
  Permit other_permit = client.get_semaphore("sem-free", 2).acquire();
  ReadWriteLock locked_rw = client.get_read_write_lock("rw-locked");
  locked_rw.lock_shared();
  ReadWriteLock read_rw = client.get_read_write_lock("rw-read");
  read_rw.lock_shared();
  ReadWriteLock write_rw = client.get_read_write_lock("rw-write");
  write_rw.lock();
  {
    const ForeignRowLock semaphore(o, "2", "sem-locked");
    const ForeignRowLock rw(o, "3, 4", "rw-locked");
    // Over two leases' worth of watchdog ticks.
    EXPECT_TRUE(test::holds_throughout(
        [&] {
          std::lock_guard<std::mutex> g(m);
          for (const auto& name : lost)
            if (name != "sem-locked" && name != "rw-locked") return false;
          return true;
        },
        6s))
        << "a hold on a row nobody locked was lost";
  }
  EXPECT_TRUE(client.is_held_by_current_thread("lock"));
  EXPECT_EQ(other_permit.fencing_token(), 1u) << "the permit on unlocked rows was lost";
  EXPECT_EQ(read_rw.read_lock().hold_count(), 1);
  EXPECT_EQ(write_rw.write_lock().hold_count(), 1);
  client.unlock("lock");
  read_rw.unlock_shared();
  write_rw.unlock();
  locked_rw.unlock_shared();
}

// The waiter's own client holds the permits that expire first; the one
// held elsewhere is released: the waiter is woken at that release.
TEST(KindsAlike, ASemaphoreWaiterHearsAForeignReleaseWhenItsOwnPermitsEndFirst) {
  SKIP_WHEN_FAST_WAKEUP_IS_OFF();
  const Options o = slow_poll_options();
  DatabaseDistributedLock waiter(o);
  DatabaseDistributedLock holder(same_table(o));
  Semaphore mine = waiter.get_semaphore("mixed", 4);
  std::vector<Permit> own;
  for (int i = 0; i < 3; ++i) own.push_back(mine.acquire(20s));  // fixed leases: they end first
  Permit foreign = holder.get_semaphore("mixed", 4).acquire();  // 30 s, renewed
  InBackground<bool> wait([&] { return mine.try_acquire(15s).has_value(); });
  EXPECT_FALSE(wait.ended(1s)) << "a fifth permit of four";
  const auto released_at = Clock::now();
  foreign.release();
  ASSERT_TRUE(wait.ended(10s));
  EXPECT_TRUE(wait.value());
  EXPECT_LT(wait.ended_at() - released_at, 2s) << "woken by the poll, not at the release";
}

// A fixed-lease write that ran out, its unlock, and a write taken again on
// the client's pooled sessions: the next release still wakes a writer in
// another client at once.
TEST(KindsAlike, AWriterElsewhereHearsTheReleaseAfterAWriteRanOut) {
  SKIP_WHEN_FAST_WAKEUP_IS_OFF();
  const Options o = slow_poll_options();
  DatabaseDistributedLock holder(o);
  DatabaseDistributedLock waiter(same_table(o));
  Lock write = holder.get_read_write_lock("stale").write_lock();
  write.lock(300ms);
  ASSERT_TRUE(wait_until([&] { return !write.is_locked(); }, 10s));
  write.unlock();  // the lost hold's unlock
  write.lock();
  Lock theirs = waiter.get_read_write_lock("stale", Owner::create()).write_lock();
  InBackground<bool> wait([&] { return theirs.try_lock_for(15s); });
  EXPECT_FALSE(wait.ended(1s));
  const auto released_at = Clock::now();
  write.unlock();
  ASSERT_TRUE(wait.ended(10s));
  EXPECT_TRUE(wait.value());
  EXPECT_LT(wait.ended_at() - released_at, 2s) << "woken by the poll, not at the release";
  theirs.unlock();
}

// A reader held back by a writer of another client, with only its own
// client's reads ahead: when those end, the writer goes, and the reader is
// woken at the writer's release.
TEST(KindsAlike, AReaderHeldBackByAWriterElsewhereHearsItsRelease) {
  SKIP_WHEN_FAST_WAKEUP_IS_OFF();
  const Options o = slow_poll_options();
  DatabaseDistributedLock readers(o);
  DatabaseDistributedLock writers(same_table(o));
  ReadWriteLock ahead = readers.get_read_write_lock("queue", Owner::create());
  ahead.lock_shared();
  Lock writer = writers.get_read_write_lock("queue", Owner::create()).write_lock();
  std::atomic<bool> wrote{false};
  std::atomic<Clock::rep> released_at{0};
  InBackground<bool> writing([&] {
    if (!writer.try_lock_for(20s)) return false;
    wrote = true;
    std::this_thread::sleep_for(300ms);  // the write
    released_at = Clock::now().time_since_epoch().count();
    writer.unlock();
    return true;
  });
  ASSERT_TRUE(wait_until([&] { return test::query_scalar("SELECT COUNT(*) FROM `" + o.table +
                                                         "` WHERE kind = 3 AND slot > 0 AND lock_name = 'queue' AND"
                                                         " expire_time > NOW(6)") == "1"; },
                         10s))
      << "the writer did not mark the lock";
  ReadWriteLock behind = readers.get_read_write_lock("queue", Owner::create());
  InBackground<bool> reading([&] { return behind.read_lock().try_lock_for(20s); });
  EXPECT_FALSE(reading.ended(500ms)) << "a new reader walked past the waiting writer";
  ahead.unlock_shared();
  ASSERT_TRUE(writing.ended(15s));
  ASSERT_TRUE(writing.value());
  ASSERT_TRUE(reading.ended(15s));
  ASSERT_TRUE(reading.value());
  const Clock::time_point released{Clock::duration(released_at.load())};
  EXPECT_LT(reading.ended_at() - released, 2s) << "woken by the poll, not at the writer's release";
  behind.unlock_shared();
}

// Two waiting writers in two clients, and a reader ahead of them: new
// readers wait behind them while either waits, whichever stops first.
TEST(KindsAlike, NewReadersWaitWhileAnyWriterOfAnyClientWaits) {
  Options o = fresh_options();
  o.poll_interval = 5s;  // no poll renews or retries a mark within the test
  DatabaseDistributedLock reader(o);
  DatabaseDistributedLock first(same_table(o));
  DatabaseDistributedLock second(same_table(o));
  DatabaseDistributedLock newcomer(same_table(o));
  ReadWriteLock held = reader.get_read_write_lock("marks");
  held.lock_shared();
  const auto marks = [&] {
    return test::query_scalar("SELECT COUNT(*) FROM `" + o.table +
                              "` WHERE kind = 3 AND slot > 0 AND lock_name = 'marks' AND expire_time > NOW(6)");
  };
  const auto a_new_reader_gets_in = [&] {
    return test::on_other_thread([&] {
      ReadWriteLock rw = newcomer.get_read_write_lock("marks");
      if (!rw.try_lock_shared()) return false;
      rw.unlock_shared();
      return true;
    });
  };
  EXPECT_TRUE(a_new_reader_gets_in()) << "no writer waits yet";
  InBackground<bool> gives_up([&] { return first.get_read_write_lock("marks").write_lock().try_lock_for(1500ms); });
  Lock seconds = second.get_read_write_lock("marks", Owner::create()).write_lock();
  InBackground<bool> waits([&] { return seconds.try_lock_for(20s); });
  ASSERT_TRUE(wait_until([&] { return marks() == "2"; }, 10s)) << "each waiting writer's client marks the lock";
  EXPECT_FALSE(a_new_reader_gets_in()) << "a new reader walked past two waiting writers";
  ASSERT_TRUE(gives_up.ended(10s));
  EXPECT_FALSE(gives_up.value());
  EXPECT_TRUE(wait_until([&] { return marks() == "1"; }, 5s)) << "the writer that stopped waiting left its mark";
  EXPECT_FALSE(a_new_reader_gets_in()) << "a new reader walked past the writer still waiting";
  held.unlock_shared();
  ASSERT_TRUE(waits.ended(15s));
  EXPECT_TRUE(waits.value());
  seconds.unlock();
  ASSERT_TRUE(wait_until([&] { return marks() == "0"; }, 10s)) << "the mark outlived its writer's wait";
  EXPECT_TRUE(a_new_reader_gets_in());
}

// A reentrant acquire with a fixed lease, landing while the watchdog's
// renewal of the same hold (snapshot taken before it) waits for the row:
// the renewal must not stretch the fixed lease to watchdog_timeout.
TEST(KindsAlike, AReentrantFixedLeaseIsNotStretchedByTheWatchdog) {
  Options o = fresh_options();
  o.watchdog_timeout = 1500ms;  // a tick every 0.5 s
  o.io_timeout = 3s;            // a row lock wait of 2 s
  DatabaseDistributedLock client(o);
  DatabaseDistributedLock other(same_table(o));
  const auto check = [&](Lock mine, Lock theirs, const std::string& kinds, const std::string& name) {
    SCOPED_TRACE(name);
    mine.lock();
    {
      // The reentrant acquire and the watchdog's renewals queue on the row
      // lock; whichever goes first, no renewal may extend the row once the
      // acquire has put it on a fixed lease (counted from when it was sent).
      std::optional<ForeignRowLock> row(std::in_place, o, kinds, name);
      InBackground<bool> reenter([&] {
        mine.lock(2500ms);
        return true;
      });
      std::this_thread::sleep_for(1200ms);  // two watchdog ticks queue behind the foreign lock
      EXPECT_FALSE(reenter.ended(0ms));
      row.reset();
      ASSERT_TRUE(reenter.ended(5s));
    }
    // Watchdog renewals would keep the row held as long as the client runs.
    EXPECT_TRUE(wait_until([&] { return theirs.try_lock(); }, 4s)) << "the fixed lease was stretched";
    theirs.unlock();
    mine.unlock();
    mine.unlock();
  };
  const Owner owner = Owner::create();
  check(client.get_lock("stretch", owner), other.get_lock("stretch"), "1", "stretch");
  check(client.get_read_write_lock("stretch", owner).write_lock(), other.get_read_write_lock("stretch").write_lock(),
        "3", "stretch");
}

// A client that read 200 names leaves no slot rows when it ends, and the
// rows of one that died go once they have been free long enough.
TEST(KindsAlike, ReaderSlotRowsDoNotAccumulate) {
  const Options o = fresh_options();
  {
    DatabaseDistributedLock client(o);
    for (int i = 0; i < 200; ++i) {
      ReadWriteLock rw = client.get_read_write_lock("many" + std::to_string(i));
      rw.lock_shared();
      rw.unlock_shared();
    }
    EXPECT_EQ(rows_of_kind(o, 4), "200");
  }
  EXPECT_EQ(rows_of_kind(o, 4), "0") << "a client that ended left its slot rows";

  test::ChildProcess dead(test::helper_path(), {test::url_for(o), "read-many", "dead", "200"});
  ASSERT_TRUE(dead.wait_for_line("acquired", 30s).has_value());
  dead.kill(SIGKILL);
  EXPECT_EQ(rows_of_kind(o, 4), "200");
  DatabaseDistributedLock survivor(o);
  details::EngineAccess::keep_reader_rows_for(survivor, 1s);
  EXPECT_TRUE(wait_until([&] { return rows_of_kind(o, 4) == "0"; }, 30s))
      << "the rows of a client that died stayed: " << rows_of_kind(o, 4);
}

// A take whose connection is lost while the statement waits in the server
// (here: for a table lock held elsewhere): the server session is ended
// before the outcome is read, so the statement cannot land later and leave
// a permit or a read that nobody holds.
TEST(KindsAlike, AnUnknownOutcomeLeavesNoHoldForNobody) {
  Options o = fresh_options();
  o.io_timeout = 2s;  // the read timeout that loses the connection
  DatabaseDistributedLock client(o);
  Semaphore sem = client.get_semaphore("unknown", 2);
  ReadWriteLock rw = client.get_read_write_lock("unknown");
  sem.try_acquire().reset();  // rows exist, statements are prepared
  rw.lock_shared();
  rw.unlock_shared();
  const auto blocked = [&](const std::function<void()>& take) {
    auto lock = details::Connection::open(details::ConnectionSettings::from(o));
    lock->execute_plain("LOCK TABLES `" + o.table + "` WRITE");
    try {
      take();
    } catch (const BackendError&) {
      // Its outcome could not be read while the table was locked either.
    }
    lock->execute_plain("UNLOCK TABLES");
  };
  blocked([&] { (void)sem.try_acquire(); });
  blocked([&] {
    if (rw.read_lock().try_lock()) rw.read_lock().unlock();
  });
  // Had a statement landed after the unlock, a permit or a read would be
  // held by nobody.
  EXPECT_TRUE(test::holds_throughout([&] { return sem.available_permits() == 2; }, 1500ms))
      << "a permit is held by nobody";
  EXPECT_FALSE(rw.read_lock().is_locked()) << "a read is held by nobody";
}

// Redisson's testReadLockLeaseTimeoutDiffThreadsRRW: reader A holds a 2 s
// lease and never unlocks, reader B reads and unlocks at once; a writer in
// another client gets the lock when A's lease ends, not when B's would have.
TEST(KindsAlike, AWriterDoesNotSleepPastAFreeReadSide) {
  Options o = fresh_options();
  o.watchdog_timeout = 30s;
  DatabaseDistributedLock readers(o);
  DatabaseDistributedLock writers(same_table(o));
  ReadWriteLock a = readers.get_read_write_lock("lease", Owner::create());
  ReadWriteLock b = readers.get_read_write_lock("lease", Owner::create());
  a.read_lock().lock(2s);
  b.lock_shared();
  b.unlock_shared();
  const auto t0 = Clock::now();
  Lock writer = writers.get_read_write_lock("lease").write_lock();
  ASSERT_TRUE(writer.try_lock_for(20s));
  const auto waited = Clock::now() - t0;
  EXPECT_GE(waited, 1500ms) << "the writer got in while A's read was live";
  EXPECT_LT(waited, 5s) << "the writer slept past the end of the last live read";
  writer.unlock();
}

}  // namespace
}  // namespace dlock
