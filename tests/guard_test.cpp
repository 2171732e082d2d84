// Guarded transactions (docs/guarded-transactions.md): a transaction of the
// caller's own on the lock table's database runs a hold's guard statement
// last, and commits only while the hold is live.
#include <dlock/connector.hpp>
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <cppconn/connection.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sql/connection.hpp"
#include "sql/guard_statement.hpp"
#include "test_env.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A connection of the caller's own (not the client's), and the table its
// transactions write: one counter per name.
class Data {
 public:
  explicit Data(const Options& o) : table_(o.table + "_data"), qualified_("`" + o.database + "`.`" + table_ + "`") {
    c_ = details::Connection::open(details::ConnectionSettings::from(o));
    exec("DROP TABLE IF EXISTS `" + table_ + "`");
    exec("CREATE TABLE `" + table_ + "` (name VARCHAR(64) PRIMARY KEY, counter BIGINT NOT NULL) ENGINE=InnoDB");
  }
  sql::Connection& raw() { return c_->raw_for_session_change(); }
  void exec(const std::string& sql) {
    std::unique_ptr<sql::Statement> st(raw().createStatement());
    st->execute(sql);
  }
  long counter(const std::string& name) {
    std::unique_ptr<sql::Statement> st(raw().createStatement());
    std::unique_ptr<sql::ResultSet> rs(st->executeQuery("SELECT counter FROM " + qualified_ + " WHERE name = '" + name + "'"));
    return rs->next() ? static_cast<long>(rs->getInt64(1)) : 0;
  }
  // BEGIN; the increment of `name`'s counter; then `before_commit` (the
  // guard); COMMIT. Rolls back and rethrows what the guard threw.
  void increment(const std::string& name, const std::function<void(sql::Connection&)>& before_commit) {
    raw().setAutoCommit(false);
    try {
      exec("INSERT INTO " + qualified_ + " (name, counter) VALUES ('" + name +
           "', 1) ON DUPLICATE KEY UPDATE counter = counter + 1");
      before_commit(raw());
      raw().commit();
    } catch (...) {
      raw().rollback();
      raw().setAutoCommit(true);
      throw;
    }
    raw().setAutoCommit(true);
  }

 private:
  std::string table_;
  std::string qualified_;  // with its database: the connection's default database may change
  std::unique_ptr<details::Connection> c_;
};

TEST(Guard, EveryKindOfHoldGuardsATransaction) {
  const Options o = test::fresh_options();
  DatabaseDistributedLock client(o);
  Data data(o);
  const auto guarded = [&](const std::string& label, const std::function<void(sql::Connection&)>& guard_it) {
    SCOPED_TRACE(label);
    EXPECT_NO_THROW(data.increment(label, guard_it));
    EXPECT_EQ(data.counter(label), 1);
  };
  Lock lock = client.get_lock("plain");
  lock.lock();
  guarded("lock", [&](sql::Connection& tx) { guard(tx, lock); });
  lock.unlock();
  Lock fair = client.get_fair_lock("fair");
  fair.lock();
  guarded("fair", [&](sql::Connection& tx) { guard(tx, fair); });
  fair.unlock();
  ReadWriteLock rw = client.get_read_write_lock("rw");
  rw.lock();
  guarded("write", [&](sql::Connection& tx) { guard(tx, rw.write_lock()); });
  rw.unlock();
  rw.lock_shared();
  guarded("read", [&](sql::Connection& tx) { guard(tx, rw.read_lock()); });
  rw.unlock_shared();
  {
    Permit permit = client.get_semaphore("sem", 3).acquire();
    guarded("permit", [&](sql::Connection& tx) { guard(tx, permit); });
  }
  MultiLock set = client.get_multi_lock({"a", "b", "c"});
  set.lock();
  guarded("set", [&](sql::Connection& tx) { guard(tx, set); });
  set.unlock();
  Election election = client.get_election("leader", Owner::create());
  election.campaign("me");
  guarded("leadership", [&](sql::Connection& tx) { guard(tx, election); });
  election.resign();
}

// Before any SQL: nothing held, or a hold counted lost.
TEST(Guard, GuardSqlOfNoHoldOrOfALostOneThrows) {
  const Options o = test::fresh_options();
  DatabaseDistributedLock client(o);
  DatabaseDistributedLock other(test::same_table(o));
  Lock lock = client.get_lock("n");
  EXPECT_THROW((void)lock.guard_sql(), NotHeldError);
  EXPECT_THROW((void)client.get_multi_lock({"x", "y"}).guard_sql(), NotHeldError);
  EXPECT_THROW((void)client.get_election("e").guard_sql(), NotHeldError);
  EXPECT_THROW((void)Permit().guard_sql(), NotHeldError);
  lock.lock();
  ASSERT_TRUE(other.force_unlock("n"));
  EXPECT_FALSE(lock.is_held_by_current_thread());  // the loss is found and counted
  EXPECT_THROW((void)lock.guard_sql(), LockLostError);
  lock.unlock();
}

// The statement names one hold: it fails once that hold ended, even when
// the owner holds the name again, and works from a connection whose default
// database is another one, in every ordinary sql_mode.
TEST(Guard, TheStatementNamesOneHoldAndRunsFromAnyDatabaseInAnySqlMode) {
  const Options o = test::fresh_options();
  DatabaseDistributedLock client(o);
  Data data(o);
  client.lock("n");
  const std::string first = client.get_lock("n").guard_sql();
  EXPECT_NE(first.find("`" + o.database + "`.`" + o.table + "`"), std::string::npos) << first;
  for (const char* mode : {"", "ANSI", "TRADITIONAL", "ANSI_QUOTES,NO_BACKSLASH_ESCAPES,PIPES_AS_CONCAT",
                           "STRICT_ALL_TABLES,ONLY_FULL_GROUP_BY", "REAL_AS_FLOAT,IGNORE_SPACE,NO_ZERO_DATE"}) {
    SCOPED_TRACE(mode);
    data.exec(std::string("SET SESSION sql_mode = '") + mode + "'");
    data.exec("USE mysql");
    EXPECT_NO_THROW(data.increment("m", [&](sql::Connection& tx) {
      std::unique_ptr<sql::Statement>(tx.createStatement())->execute(first);
    }));
    data.exec("USE `" + o.database + "`");
  }
  client.unlock("n");
  client.lock("n");
  const auto counted = data.counter("m");
  try {
    data.increment("m", [&](sql::Connection& tx) { std::unique_ptr<sql::Statement>(tx.createStatement())->execute(first); });
    FAIL() << "the first hold's statement passed for the second hold";
  } catch (const sql::SQLException& e) {
    EXPECT_EQ(e.getErrorCode(), details::kGuardFailed);
  }
  EXPECT_EQ(data.counter("m"), counted) << "rolled back";
  EXPECT_NO_THROW(data.increment("m", [&](sql::Connection& tx) { guard(tx, client.get_lock("n")); }));
  client.unlock("n");
}

// A holder paused past its lease after its writes and before its guard:
// its guard fails and its transaction rolls back; the next holder's
// transaction commits; no update is lost.
TEST(Guard, AHolderPausedPastItsLeaseCannotCommitAndNoUpdateIsLost) {
  const Options o = test::fresh_options();
  DatabaseDistributedLock a(o);
  DatabaseDistributedLock b(test::same_table(o));
  Data data_a(o), data_b(o);
  Lock la = a.get_lock("account", Owner::create());
  Lock lb = b.get_lock("account", Owner::create());
  la.lock(300ms);
  std::thread next_holder;
  std::atomic<bool> b_committed{false};
  EXPECT_THROW(data_a.increment("account",
                                [&](sql::Connection& tx) {
                                  // Paused past the lease, after the write: meanwhile B takes the lock and
                                  // begins its own update (which waits for A's row).
                                  next_holder = std::thread([&] {
                                    lb.lock();
                                    data_b.increment("account", [&](sql::Connection& btx) { guard(btx, lb); });
                                    b_committed = true;
                                    lb.unlock();
                                  });
                                  std::this_thread::sleep_for(1s);
                                  guard(tx, la);
                                }),
               LockLostError);
  next_holder.join();
  EXPECT_TRUE(b_committed.load());
  EXPECT_EQ(data_a.counter("account"), 1) << "only B's increment";
  la.unlock();
}

// While a guarded transaction stays open, nobody else takes the hold (its
// acquire waits, or fails as at a foreign row lock); it never succeeds
// before the commit, even once the lease has run out.
TEST(Guard, AnOpenGuardedTransactionKeepsEveryOtherOwnerOutUntilItsCommit) {
  Options o = test::fresh_options();
  o.io_timeout = 3s;
  DatabaseDistributedLock a(o);
  DatabaseDistributedLock b(test::same_table(o));
  Data data(o);
  Lock la = a.get_lock("n", Owner::create());
  la.lock(500ms);
  data.raw().setAutoCommit(false);
  guard(data.raw(), la);  // the row is this transaction's until it ends
  const auto guarded_at = Clock::now();
  std::atomic<bool> committed{false};
  Clock::time_point b_got{};
  std::thread taker([&] {
    const auto until = Clock::now() + 15s;
    while (Clock::now() < until) {
      try {
        if (b.try_lock("n", 1s)) {
          b_got = Clock::now();
          EXPECT_TRUE(committed.load()) << "taken while the guarded transaction was still open";
          b.unlock("n");
          return;
        }
      } catch (const BackendError&) {
        // the row lock, as a foreign transaction's: try again
      }
    }
  });
  std::this_thread::sleep_for(2s);  // past the 500 ms lease
  committed = true;
  data.raw().commit();
  data.raw().setAutoCommit(true);
  taker.join();
  EXPECT_GT(b_got - guarded_at, 2s);
  la.unlock();
}

// The holder's own watchdog renews around a guarded row (it waits on the
// transaction's row lock like on a foreign one) and loses nothing: neither
// the guarded hold while its lease runs, nor its other holds.
TEST(Guard, TheWatchdogRenewsAroundAGuardedRowAndLosesNothing) {
  Options o = test::fresh_options();
  o.watchdog_timeout = 3s;  // renewed every second; a row lock waits a second
  auto lost = std::make_shared<std::atomic<int>>(0);
  o.on_lock_lost = [lost](std::string_view, std::uint64_t) { ++*lost; };
  DatabaseDistributedLock client(o);
  Data data(o);
  Lock guarded_lock = client.get_lock("guarded", Owner::create());
  Lock other = client.get_lock("other", Owner::create());
  guarded_lock.lock();
  other.lock();
  data.raw().setAutoCommit(false);
  guard(data.raw(), guarded_lock);
  std::this_thread::sleep_for(2500ms);  // renewals wait on the guarded row meanwhile
  data.raw().commit();
  data.raw().setAutoCommit(true);
  std::this_thread::sleep_for(3500ms);  // past every lease since the guard
  EXPECT_EQ(lost->load(), 0);
  EXPECT_TRUE(guarded_lock.is_held_by_current_thread());
  EXPECT_TRUE(other.is_held_by_current_thread());
  guarded_lock.unlock();
  other.unlock();
}

// Hostile names are guarded as the bytes they are and touch nothing else.
TEST(Guard, HostileNamesAreGuardedAndTouchNothingElse) {
  const Options o = test::fresh_options();
  DatabaseDistributedLock client(o);
  Data data(o);
  std::string every_byte;
  for (int b = 1; b <= 255; ++b) every_byte.push_back(static_cast<char>(b));
  const std::vector<std::string> names = {"it's",  "back\\slash", "a -- comment", "x'; DROP TABLE t; --",
                                          "\"dq\"", "`bt`",       every_byte,     std::string(255, '\'')};
  client.lock("bystander");
  for (const auto& name : names) {
    Lock lock = client.get_lock(name);
    lock.lock();
    const std::string sql = lock.guard_sql();
    EXPECT_EQ(sql.find(name), std::string::npos) << "the name is written as hex only";
    EXPECT_NO_THROW(data.increment("hostile", [&](sql::Connection& tx) { guard(tx, lock); }));
    lock.unlock();
  }
  MultiLock set = client.get_multi_lock(names);
  set.lock();
  EXPECT_NO_THROW(data.increment("hostile", [&](sql::Connection& tx) { guard(tx, set); }));
  set.unlock();
  EXPECT_EQ(data.counter("hostile"), static_cast<long>(names.size()) + 1);
  EXPECT_EQ(test::query_scalar("SELECT COUNT(*) FROM `" + o.table + "` WHERE kind = 1"),
            std::to_string(names.size() + 1))
      << "one row per name, nothing else";
  EXPECT_TRUE(client.is_held_by_current_thread("bystander"));
  client.unlock("bystander");
}

}  // namespace
}  // namespace dlock
