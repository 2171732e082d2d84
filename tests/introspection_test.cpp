// Introspection (dlock/introspection.hpp) against the real database: every
// kind of hold is shown with its holder, count, fence and lease; filters
// and the limit cut what is asked; waiters show as the database records
// them (a fair lock's queue in order, a mark or intent on other holds).
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "support/test_env.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::fresh_options;
using test::same_table;
using test::wait_until;

std::size_t held(const Activity& a, HoldType t) { return a.held[static_cast<std::size_t>(t)]; }

std::vector<HoldInfo> of_type(const Activity& a, HoldType t) {
  std::vector<HoldInfo> out;
  std::copy_if(a.holds.begin(), a.holds.end(), std::back_inserter(out), [&](const HoldInfo& h) { return h.type == t; });
  return out;
}

TEST(Introspection, TypesHaveStableNames) {
  for (HoldType t : {HoldType::kLock, HoldType::kFairLock, HoldType::kSemaphore, HoldType::kWrite, HoldType::kRead,
                     HoldType::kElection})
    EXPECT_EQ(parse_hold_type(to_string(t)), t);
  EXPECT_EQ(to_string(HoldType::kFairLock), "fair");
  EXPECT_FALSE(parse_hold_type("Lock").has_value());
  EXPECT_FALSE(parse_hold_type("").has_value());
}

TEST(Introspection, EveryKindOfHoldIsShownWithItsHolder) {
  const Options o = fresh_options();
  DatabaseDistributedLock client(o);
  client.lock("plain");
  client.lock("plain");  // reentrant: count 2
  Lock fair = client.get_fair_lock("fair");
  fair.lock();
  Semaphore sem = client.get_semaphore("sem", 3);
  Permit p1 = sem.acquire();
  Permit p2 = sem.acquire(20s);
  ReadWriteLock rw = client.get_read_write_lock("rw-w");
  rw.lock();
  ReadWriteLock rr = client.get_read_write_lock("rw-r");
  rr.lock_shared();
  Election e = client.get_election("elect", Owner::create());
  const std::uint64_t term = e.campaign("v");

  const Activity a = inspect(o);
  EXPECT_EQ(a.held_total(), 7u);
  EXPECT_EQ(a.holds.size(), 7u);
  EXPECT_EQ(held(a, HoldType::kLock), 1u);
  EXPECT_EQ(held(a, HoldType::kFairLock), 1u);
  EXPECT_EQ(held(a, HoldType::kSemaphore), 2u);
  EXPECT_EQ(held(a, HoldType::kWrite), 1u);
  EXPECT_EQ(held(a, HoldType::kRead), 1u);
  EXPECT_EQ(held(a, HoldType::kElection), 1u);
  EXPECT_TRUE(a.waiters.empty());
  for (const HoldInfo& h : a.holds) {
    SCOPED_TRACE(h.name);
    EXPECT_EQ(h.machine, client.machine_id());
    EXPECT_EQ(h.pid, static_cast<std::uint32_t>(::getpid()));
    EXPECT_FALSE(h.host.empty());
    EXPECT_GT(h.fence, 0u);
    EXPECT_GT(h.expires_in.count(), 0);
    EXPECT_GE(h.held_for.count(), 0);
    EXPECT_EQ(h.acquired_at.size(), 26u) << h.acquired_at;
    EXPECT_NE(h.owner, 0u);
  }
  const auto plain = of_type(a, HoldType::kLock);
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].name, "plain");
  EXPECT_EQ(plain[0].count, 2u);
  EXPECT_TRUE(plain[0].watchdog);
  EXPECT_EQ(plain[0].fence, client.fencing_token("plain"));
  const auto permits = of_type(a, HoldType::kSemaphore);
  ASSERT_EQ(permits.size(), 2u);
  EXPECT_NE(permits[0].slot, permits[1].slot);
  for (const auto& p : permits) {
    EXPECT_EQ(p.name, "sem");
    EXPECT_EQ(p.bound, 3u);
    EXPECT_LT(p.slot, 3u);
  }
  EXPECT_EQ(std::count_if(permits.begin(), permits.end(), [](const HoldInfo& h) { return !h.watchdog; }), 1)
      << "the permit with a fixed lease";
  EXPECT_EQ(of_type(a, HoldType::kWrite).at(0).name, "rw-w");
  EXPECT_EQ(of_type(a, HoldType::kRead).at(0).name, "rw-r");
  EXPECT_EQ(of_type(a, HoldType::kFairLock).at(0).name, "fair");
  const auto leader = of_type(a, HoldType::kElection);
  ASSERT_EQ(leader.size(), 1u);
  EXPECT_EQ(leader[0].fence, term) << "an election's fence is its term";

  // Longest held first: the order the holds were taken in.
  for (std::size_t i = 1; i < a.holds.size(); ++i) EXPECT_LE(a.holds[i - 1].acquired_at, a.holds[i].acquired_at);
  EXPECT_EQ(a.holds.front().name, "plain");

  // The member reads the same on the client's pool.
  const Activity mine = client.inspect();
  EXPECT_EQ(mine.held, a.held);
  EXPECT_EQ(mine.holds.size(), a.holds.size());

  e.resign();
  rr.unlock_shared();
  rw.unlock();
  p2.release();
  p1.release();
  fair.unlock();
  client.unlock("plain");
  client.unlock("plain");
  EXPECT_EQ(client.inspect().held_total(), 0u) << "released holds are not shown";
}

TEST(Introspection, NamesTypesAndTheLimitCutTheSnapshot) {
  const Options o = fresh_options();
  DatabaseDistributedLock client(o);
  Owner owner = Owner::create();
  std::vector<Lock> locks;
  for (const char* name : {"a", "b", "c", "d", "e"}) {
    locks.push_back(client.get_lock(name, owner));
    locks.back().lock();
    std::this_thread::sleep_for(2ms);  // distinct grant times, so the order is known
  }
  Semaphore sem = client.get_semaphore("a", 2);
  Permit p = sem.acquire();

  ActivityQuery by_name;
  by_name.names = {"c", "a", "c", "never-used"};
  const Activity named = client.inspect(by_name);
  EXPECT_EQ(named.held_total(), 3u) << "c, a and a's permit; a name asked twice counts once";
  EXPECT_EQ(named.holds.size(), 3u);

  ActivityQuery by_type;
  by_type.types = {HoldType::kSemaphore};
  const Activity permits = client.inspect(by_type);
  ASSERT_EQ(permits.holds.size(), 1u);
  EXPECT_EQ(permits.holds[0].type, HoldType::kSemaphore);
  EXPECT_EQ(permits.held_total(), 1u);

  ActivityQuery limited;
  limited.types = {HoldType::kLock};
  limited.limit = 2;
  const Activity first_two = inspect(o, limited);
  ASSERT_EQ(first_two.holds.size(), 2u);
  EXPECT_EQ(first_two.holds[0].name, "a");
  EXPECT_EQ(first_two.holds[1].name, "b");
  EXPECT_EQ(held(first_two, HoldType::kLock), 5u) << "the totals count every hold, not only those returned";
  p.release();
  for (auto& l : locks) l.unlock();
}

TEST(Introspection, BadInputIsRefusedBeforeAnySql) {
  const Options unreachable = Options::from_url("mysql://nobody@127.0.0.1:1/none");
  ActivityQuery empty_name;
  empty_name.names = {""};
  EXPECT_THROW((void)inspect(unreachable, empty_name), std::invalid_argument);
  ActivityQuery too_long;
  too_long.names = {std::string(256, 'x')};
  EXPECT_THROW((void)inspect(unreachable, too_long), std::invalid_argument);
  ActivityQuery bad_type;
  bad_type.types = {static_cast<HoldType>(42)};
  EXPECT_THROW((void)inspect(unreachable, bad_type), std::invalid_argument);
}

TEST(Introspection, AFairLocksQueueIsListedInOrder) {
  const Options o = fresh_options();
  DatabaseDistributedLock a(o), b(same_table(o));
  Lock held = a.get_fair_lock("queue", Owner::create());
  held.lock();
  std::atomic<bool> stop{false};
  std::vector<std::thread> waiters;
  const Owner first = Owner::create(), second = Owner::create();
  for (Owner w : {first, second}) {
    waiters.emplace_back([&, w] {
      Lock l = b.get_fair_lock("queue", w);
      if (l.try_lock_for(30s)) l.unlock();
    });
    // The second arrives after the first is in line.
    ASSERT_TRUE(wait_until([&] { return a.inspect().waiting == waiters.size(); }, 10s));
  }
  const Activity s = a.inspect();
  ASSERT_EQ(s.waiters.size(), 2u);
  EXPECT_EQ(s.waiters[0].position, 1u);
  EXPECT_EQ(s.waiters[0].owner, first.id());
  EXPECT_EQ(s.waiters[1].position, 2u);
  EXPECT_EQ(s.waiters[1].owner, second.id());
  for (const auto& w : s.waiters) {
    EXPECT_EQ(w.name, "queue");
    EXPECT_EQ(w.type, HoldType::kFairLock);
    EXPECT_EQ(w.machine, b.machine_id());
    EXPECT_EQ(w.waiting_since.size(), 26u);
  }
  ASSERT_EQ(s.holds.size(), 1u);
  EXPECT_EQ(s.holds[0].waiters, 2u);
  ActivityQuery one;
  one.limit = 1;
  const Activity limited = a.inspect(one);
  ASSERT_EQ(limited.waiters.size(), 1u);
  EXPECT_EQ(limited.waiters[0].owner, first.id());
  EXPECT_EQ(limited.waiting, 2u);
  ActivityQuery locks_only;
  locks_only.types = {HoldType::kLock};
  EXPECT_TRUE(a.inspect(locks_only).waiters.empty()) << "a fair lock's waiters belong to its type";
  held.unlock();  // hands the hold down the line
  for (auto& t : waiters) t.join();
}

TEST(Introspection, AWaiterInAnotherClientIsSeenOnTheHold) {
  if (!test::fast_wakeup_enabled()) GTEST_SKIP() << "without fast wake-up a waiter that only polls leaves no mark";
  const Options o = fresh_options();
  DatabaseDistributedLock a(o), b(same_table(o));
  a.lock("busy");
  EXPECT_EQ(a.inspect().holds.at(0).waiters, 0u);
  std::thread waiter([&] {
    if (b.try_lock("busy", 20s)) b.unlock("busy");
  });
  // A waiter elsewhere marks the hold it waits behind (fast wake-up).
  EXPECT_TRUE(wait_until([&] { return a.inspect().holds.at(0).waiters == 1; }, 10s));
  a.unlock("busy");
  waiter.join();
}

// Without fast wake-up nothing marks the hold; a writer elsewhere that waits
// records its intent to go next on the head row at once, and that counts.
TEST(Introspection, AWritersIntentElsewhereCountsAsAWaiterWithoutFastWakeup) {
  Options o = fresh_options();
  o.fast_wakeup = false;
  Options other = same_table(o);
  other.fast_wakeup = false;
  DatabaseDistributedLock a(o), b(other);
  ReadWriteLock doc = a.get_read_write_lock("doc");
  doc.lock();
  EXPECT_EQ(a.inspect().holds.at(0).waiters, 0u);
  std::thread writer([&] {
    ReadWriteLock wants = b.get_read_write_lock("doc");
    if (wants.try_lock_for(20s)) wants.unlock();
  });
  EXPECT_TRUE(wait_until([&] { return a.inspect().holds.at(0).waiters == 1; }, 10s))
      << "the waiting writer's intent is not shown";
  const Activity waiting = a.inspect();
  EXPECT_EQ(waiting.holds.size(), 1u) << "a waiting writer's intent row is no hold";
  EXPECT_EQ(held(waiting, HoldType::kWrite), 1u);
  doc.unlock();
  writer.join();
}

TEST(Introspection, ANameKeptByUnlockAtLeastShowsCountZero) {
  const Options o = fresh_options();
  DatabaseDistributedLock client(o);
  Lock job = client.get_lock("cron", Owner::create());
  job.lock();
  job.unlock_at_least(30s);
  const Activity s = client.inspect();
  ASSERT_EQ(s.holds.size(), 1u);
  EXPECT_EQ(s.holds[0].count, 0u);
  EXPECT_GT(s.holds[0].expires_in, 20s);
}

}  // namespace
}  // namespace dlock
