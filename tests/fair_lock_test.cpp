// The fair lock (get_fair_lock): grants in arrival order across clients
// and processes, handed over by the release itself, no barging, waiters
// that stop waiting or die delay nobody for long.
#include <dlock/asio.hpp>
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>
#include <signal.h>

#include <boost/asio/use_future.hpp>

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "test_env.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::ChildProcess;
using test::fresh_options;
using test::same_table;
using test::url_for;
using test::wait_until;

// A poll too slow to explain any prompt grant below (with fast_wakeup
// off, the poll is how a waiter elsewhere hears of its grant).
Options slow_poll_options() {
  Options o = fresh_options();
  o.poll_interval = test::fast_wakeup_enabled() ? 20s : 300ms;
  o.watchdog_timeout = 30s;
  return o;
}

// Live queue entries of fair lock `name`.
int queued(const Options& o, const std::string& name) {
  return std::stoi(test::query_scalar("SELECT COUNT(*) FROM `" + o.table + "` WHERE kind = 5 AND lock_name = '" +
                                      name + "' AND slot > 0 AND intent_expire > NOW(6)"));
}

TEST(FairLock, IsALockOfItsOwnNamespace) {
  const Options o = fresh_options();
  DatabaseDistributedLock client(o);
  Lock fair = client.get_fair_lock("f");
  Lock plain = client.get_lock("f");
  plain.lock();
  ASSERT_TRUE(fair.try_lock()) << "a plain lock of the same name blocked the fair lock";
  EXPECT_TRUE(fair.is_locked());
  EXPECT_GT(fair.fencing_token(), 0u);
  fair.lock();  // reentrant
  EXPECT_EQ(fair.hold_count(), 2);
  fair.unlock();
  EXPECT_TRUE(fair.is_held_by_current_thread());
  fair.unlock();
  EXPECT_FALSE(fair.is_locked());
  plain.unlock();
  EXPECT_THROW(fair.unlock(), NotHeldError);
  EXPECT_THROW(client.get_fair_lock(""), std::invalid_argument);
}

TEST(FairLock, TheReleaseHandsTheHoldToAWaiterElsewhereWithTheNextFence) {
  const Options o = slow_poll_options();
  DatabaseDistributedLock holder(o);
  DatabaseDistributedLock other(same_table(o));
  Lock held = holder.get_fair_lock("handoff");
  held.lock();
  const std::uint64_t fence = held.fencing_token();
  std::atomic<std::uint64_t> got{0};
  std::thread waiter([&] {
    Lock mine = other.get_fair_lock("handoff");
    mine.lock();
    got = mine.fencing_token();
    mine.unlock();
  });
  ASSERT_TRUE(wait_until([&] { return queued(o, "handoff") == 1; }, 10s));
  const auto released = Clock::now();
  held.unlock();
  ASSERT_TRUE(wait_until([&] { return got.load() != 0; }, 10s));
  EXPECT_LT(Clock::now() - released, 5s) << "the waiter heard of the release only at a poll";
  EXPECT_EQ(got.load(), fence + 1);
  waiter.join();
  EXPECT_EQ(queued(o, "handoff"), 0);
}

TEST(FairLock, GrantsFollowArrivalAcrossClientsAndThreads) {
  const Options o = slow_poll_options();
  DatabaseDistributedLock a(o);
  DatabaseDistributedLock b(same_table(o));
  DatabaseDistributedLock c(same_table(o));
  Lock held = a.get_fair_lock("order");
  held.lock();
  std::mutex mutex;
  std::vector<std::string> order;
  std::vector<std::uint64_t> fences;
  std::vector<std::thread> waiters;
  const auto join = [&](DatabaseDistributedLock& client, const std::string& label, int position) {
    waiters.emplace_back([&, label] {
      Lock mine = client.get_fair_lock("order");
      mine.lock();
      {
        std::lock_guard<std::mutex> guard(mutex);
        order.push_back(label);
        fences.push_back(mine.fencing_token());
      }
      std::this_thread::sleep_for(20ms);
      mine.unlock();
    });
    ASSERT_TRUE(wait_until([&] { return queued(o, "order") == position; }, 10s)) << label << " never queued";
  };
  join(b, "b1", 1);
  join(c, "c1", 2);
  join(b, "b2", 3);
  join(a, "a2", 4);  // a thread of the holder's own client queues like anyone
  join(c, "c2", 5);
  held.unlock();
  for (auto& t : waiters) t.join();
  EXPECT_EQ(order, (std::vector<std::string>{"b1", "c1", "b2", "a2", "c2"}));
  for (std::size_t i = 1; i < fences.size(); ++i) EXPECT_EQ(fences[i], fences[i - 1] + 1);
}

TEST(FairLock, NoAttemptOvertakesAQueuedWaiter) {
  const Options o = slow_poll_options();
  DatabaseDistributedLock a(o);
  DatabaseDistributedLock b(same_table(o));
  DatabaseDistributedLock c(same_table(o));
  Lock held = a.get_fair_lock("barge");
  held.lock();
  std::atomic<bool> b_holds{false};
  std::atomic<bool> b_done{false};
  std::thread waiter([&] {
    Lock mine = b.get_fair_lock("barge");
    mine.lock();
    b_holds = true;
    while (!b_done) std::this_thread::sleep_for(5ms);
    mine.unlock();
  });
  ASSERT_TRUE(wait_until([&] { return queued(o, "barge") == 1; }, 10s));
  Lock other = c.get_fair_lock("barge");
  EXPECT_FALSE(other.try_lock());
  held.unlock();
  EXPECT_FALSE(test::on_other_thread([&] { return a.get_fair_lock("barge").try_lock(); }))
      << "the releasing client took the name back past the waiter";
  EXPECT_FALSE(other.try_lock());
  ASSERT_TRUE(wait_until([&] { return b_holds.load(); }, 10s));
  b_done = true;
  waiter.join();
  // Nobody waits now (the head's queue intent is stale): a try goes through.
  EXPECT_TRUE(other.try_lock());
  other.unlock();
}

TEST(FairLock, AWaiterThatTimesOutLeavesTheQueueAndDelaysNobody) {
  const Options o = slow_poll_options();
  DatabaseDistributedLock a(o);
  DatabaseDistributedLock b(same_table(o));
  DatabaseDistributedLock c(same_table(o));
  Lock held = a.get_fair_lock("leave");
  held.lock();
  std::atomic<bool> gave_up{false};
  std::thread quitter([&] { gave_up = !b.get_fair_lock("leave").try_lock_for(1500ms); });
  ASSERT_TRUE(wait_until([&] { return queued(o, "leave") == 1; }, 10s));
  std::atomic<bool> got{false};
  std::thread stayer([&] {
    Lock mine = c.get_fair_lock("leave");
    mine.lock();
    got = true;
    mine.unlock();
  });
  ASSERT_TRUE(wait_until([&] { return queued(o, "leave") == 2; }, 10s));
  quitter.join();
  EXPECT_TRUE(gave_up.load());
  EXPECT_EQ(queued(o, "leave"), 1) << "the waiter that gave up is still queued";
  const auto released = Clock::now();
  held.unlock();
  ASSERT_TRUE(wait_until([&] { return got.load(); }, 10s));
  EXPECT_LT(Clock::now() - released, 5s);
  stayer.join();
}

TEST(FairLock, AWatchdogHoldGrantedFromTheQueueKeepsItsLeasePastOneMark) {
  // A watchdog waiter is granted for one mark's lease (1 s here); its
  // client's poller must renew it to the whole watchdog lease.
  Options o = fresh_options();
  o.poll_interval = 300ms;
  o.watchdog_timeout = 30s;
  DatabaseDistributedLock a(o);
  DatabaseDistributedLock b(same_table(o));
  Lock held = a.get_fair_lock("mark");
  held.lock();
  std::atomic<bool> got{false};
  std::atomic<bool> done{false};
  std::atomic<bool> still_held{false};
  std::thread waiter([&] {
    Lock mine = b.get_fair_lock("mark");
    mine.lock();
    got = true;
    std::this_thread::sleep_for(2500ms);
    still_held = mine.is_held_by_current_thread();
    mine.unlock();
    done = true;
  });
  ASSERT_TRUE(wait_until([&] { return queued(o, "mark") == 1; }, 10s));
  held.unlock();
  ASSERT_TRUE(wait_until([&] { return got.load(); }, 10s));
  ASSERT_TRUE(wait_until([&] { return done.load(); }, 15s));
  waiter.join();
  EXPECT_TRUE(still_held.load()) << "the granted hold ran out after one mark's lease";
}

TEST(FairLock, AsynchronousWaitersQueueAndACancelledOneLeavesTheQueue) {
  const Options o = slow_poll_options();
  DatabaseDistributedLock a(o);
  DatabaseDistributedLock b(same_table(o));
  Lock held = a.get_fair_lock("async");
  held.lock();
  const Owner first = Owner::create();
  const Owner cancelled = Owner::create();
  const Owner second = Owner::create();
  auto first_done = async_lock(b.get_fair_lock("async", first), boost::asio::use_future);
  ASSERT_TRUE(wait_until([&] { return queued(o, "async") == 1; }, 10s));
  auto cancelled_done = async_lock(b.get_fair_lock("async", cancelled), boost::asio::use_future);
  ASSERT_TRUE(wait_until([&] { return queued(o, "async") == 2; }, 10s));
  auto second_done = async_lock(a.get_fair_lock("async", second), boost::asio::use_future);
  ASSERT_TRUE(wait_until([&] { return queued(o, "async") == 3; }, 10s));
  b.cancel(cancelled);
  EXPECT_THROW(cancelled_done.get(), Cancelled);
  ASSERT_TRUE(wait_until([&] { return queued(o, "async") == 2; }, 10s)) << "the cancelled waiter is still queued";
  held.unlock();
  ASSERT_EQ(first_done.wait_for(10s), std::future_status::ready);
  first_done.get();
  Lock first_lock = b.get_fair_lock("async", first);
  EXPECT_EQ(first_lock.fencing_token(), 2u);
  EXPECT_EQ(second_done.wait_for(300ms), std::future_status::timeout);
  async_unlock(first_lock, boost::asio::use_future).get();
  ASSERT_EQ(second_done.wait_for(10s), std::future_status::ready);
  second_done.get();
  Lock second_lock = a.get_fair_lock("async", second);
  EXPECT_EQ(second_lock.fencing_token(), 3u);
  second_lock.unlock();
}

TEST(FairLock, AFirstWaiterInAnotherProcessIsGrantedFirst) {
  const Options o = slow_poll_options();
  DatabaseDistributedLock a(o);
  Lock held = a.get_fair_lock("xproc");
  held.lock();
  const std::uint64_t fence = held.fencing_token();
  ChildProcess child(test::helper_path(), {url_for(o), "fair-wait", "xproc", "60000"}, false, true);
  ASSERT_TRUE(child.wait_for_line("waiting", 15s).has_value());
  ASSERT_TRUE(wait_until([&] { return queued(o, "xproc") == 1; }, 10s));
  std::atomic<std::uint64_t> local{0};
  std::thread waiter([&] {
    DatabaseDistributedLock b(same_table(o));
    Lock mine = b.get_fair_lock("xproc");
    mine.lock();
    local = mine.fencing_token();
    mine.unlock();
  });
  ASSERT_TRUE(wait_until([&] { return queued(o, "xproc") == 2; }, 10s));
  held.unlock();
  const auto line = child.wait_for_line("acquired", 10s);
  ASSERT_TRUE(line.has_value()) << "the first waiter (another process) was not granted";
  EXPECT_EQ(std::stoull(line->substr(line->find(' ') + 1)), fence + 1);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(local.load(), 0u) << "the second waiter got in while the first held";
  child.write("\n");
  ASSERT_TRUE(wait_until([&] { return local.load() != 0; }, 10s));
  EXPECT_EQ(local.load(), fence + 2);
  waiter.join();
}

TEST(FairLock, AQueuedWaiterKilledDelaysTheNextAtMostThreePollIntervals) {
  Options o = fresh_options();
  o.poll_interval = 300ms;  // marks last max(1 s, 3 polls) = 1 s
  o.watchdog_timeout = 30s;
  DatabaseDistributedLock a(o);
  Lock held = a.get_fair_lock("dead");
  held.lock();
  ChildProcess child(test::helper_path(), {url_for(o), "fair-wait", "dead", "60000"}, false, true);
  ASSERT_TRUE(child.wait_for_line("waiting", 15s).has_value());
  ASSERT_TRUE(wait_until([&] { return queued(o, "dead") == 1; }, 10s));
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    DatabaseDistributedLock b(same_table(o));
    Lock mine = b.get_fair_lock("dead");
    mine.lock();
    got = true;
    mine.unlock();
  });
  ASSERT_TRUE(wait_until([&] { return queued(o, "dead") == 2; }, 10s));
  child.kill(SIGKILL);
  ASSERT_TRUE(child.wait(5s).has_value());
  const auto released = Clock::now();
  held.unlock();  // may grant the dead waiter: its mark is still live
  ASSERT_TRUE(wait_until([&] { return got.load(); }, 10s));
  EXPECT_LT(Clock::now() - released, 3 * 1s + 1s) << "a dead queued waiter held the line up";
  waiter.join();
}

// A waiter of `a` (an Owner of its own) queues for fair lock `name`, then
// `between` runs, then a waiter of `b` queues behind it. `release` grants
// the first one, which holds 100 ms and releases: the waiter in `b` must
// hear of that release at once, not at a poll (20 s).
void expect_the_next_waiter_rung(const Options& o, DatabaseDistributedLock& a, DatabaseDistributedLock& b,
                                 const std::string& name, const std::function<void()>& between,
                                 const std::function<void()>& release) {
  std::atomic<bool> first_got{false}, second_got{false};
  std::thread first([&] {
    Lock mine = a.get_fair_lock(name, Owner::create());
    mine.lock();
    first_got = true;
    std::this_thread::sleep_for(100ms);
    mine.unlock();
  });
  ASSERT_TRUE(wait_until([&] { return queued(o, name) == 1; }, 10s));
  between();
  std::thread second([&] {
    Lock mine = b.get_fair_lock(name);
    mine.lock();
    second_got = true;
    mine.unlock();
  });
  ASSERT_TRUE(wait_until([&] { return queued(o, name) == 2; }, 10s));
  release();
  ASSERT_TRUE(wait_until([&] { return first_got.load(); }, 10s));
  const auto granted = Clock::now();
  ASSERT_TRUE(wait_until([&] { return second_got.load(); }, 30s));
  EXPECT_LT(Clock::now() - granted, 5s) << "the waiter elsewhere heard of the release only at a poll";
  first.join();
  second.join();
}

// A client with one pooled connection: its waiters join on the session
// that also releases. A grant made by a ringing release on that session
// must record the bell the session rings next, not the one it just gave
// back, or a waiter elsewhere behind the grantee finds that bell free.
TEST(FairLock, AGrantToAWaiterOfTheReleasingSessionKeepsWaitersElsewhereWoken) {
  Options o = slow_poll_options();
  o.pool_size = 1;
  DatabaseDistributedLock a(o);
  DatabaseDistributedLock b(same_table(o));
  Lock held = a.get_fair_lock("one-session");
  held.lock();
  // The release grants the waiter of `a`, on the one session, ringing.
  expect_the_next_waiter_rung(o, a, b, "one-session", [] {}, [&] { held.unlock(); });
}

// A queued entry records its session's bell. When that session rings for
// another name while the entry waits, the entry must follow it to the next
// bell, or the hold granted from it records a bell nobody holds.
TEST(FairLock, AQueuedEntryFollowsItsSessionsBellWhenTheSessionRingsForAnotherName) {
  if (!test::fast_wakeup_enabled()) GTEST_SKIP() << "about session bells";
  Options o = slow_poll_options();
  o.pool_size = 1;
  DatabaseDistributedLock a(o);
  DatabaseDistributedLock b(same_table(o));
  DatabaseDistributedLock c(same_table(o));
  // `a`'s one session holds plain lock "other", which a waiter in `b` marks.
  Lock other = a.get_lock("other");
  other.lock();
  std::atomic<bool> other_got{false};
  std::thread other_waiter([&] {
    Lock mine = b.get_lock("other");
    mine.lock();
    other_got = true;
    mine.unlock();
  });
  ASSERT_TRUE(wait_until(
      [&] {
        return test::query_scalar("SELECT COUNT(*) FROM `" + o.table +
                                  "` WHERE kind = 1 AND lock_name = 'other' AND waiters = 1") == "1";
      },
      10s));
  // Fair lock "q" is held in `c`; a waiter of `a` queues on that session.
  Lock q = c.get_fair_lock("q");
  q.lock();
  expect_the_next_waiter_rung(
      o, a, b, "q",
      [&] {
        other.unlock();  // the session rings for "other": it moves to its next bell
        EXPECT_TRUE(wait_until([&] { return other_got.load(); }, 10s));
        other_waiter.join();
      },
      [&] { q.unlock(); });  // released in `c`: the entry's bell is copied as it is
}

}  // namespace
}  // namespace dlock
