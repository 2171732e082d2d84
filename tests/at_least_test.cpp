// Lock::unlock_at_least (ShedLock's lockAtLeastFor): the owner's last
// release leaves the name taken by no one until `held_for` after the grant,
// by the server's clock, for every kind of Lock handle.
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "test_env.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Side = Lock::Side;
using test::fresh_options;
using test::same_table;
using test::wait_until;

// A poll so slow that a waiter it woke would be far too late: waits below
// end at the kept lease's end, which the refusal told them.
Options slow_poll(Options o) {
  o.poll_interval = 30s;
  o.watchdog_timeout = 30s;
  return o;
}

// The side under test of `name` (a read hold is tested against writers).
Lock handle(DatabaseDistributedLock& client, Side side, const std::string& name) {
  switch (side) {
    case Side::kRead:
      return client.get_read_write_lock(name).read_lock();
    case Side::kWrite:
      return client.get_read_write_lock(name).write_lock();
    case Side::kFair:
      return client.get_fair_lock(name);
    case Side::kMutex:
      break;
  }
  return client.get_lock(name);
}
// What the hold of `side` keeps out: itself, or writers for a read hold.
Lock rival(DatabaseDistributedLock& client, Side side, const std::string& name) {
  return handle(client, side == Side::kRead ? Side::kWrite : side, name);
}

class AtLeast : public ::testing::TestWithParam<Side> {};

TEST_P(AtLeast, KeepsTheNameTakenByNobodyUntilHeldForAfterTheGrantThenWakesTheWaiterThen) {
  const Options o = slow_poll(fresh_options());
  DatabaseDistributedLock a(o), b(same_table(o));
  Lock mine = handle(a, GetParam(), "job");
  Lock theirs = rival(b, GetParam(), "job");
  const auto before_grant = Clock::now();
  mine.lock();
  const std::uint64_t fence = mine.fencing_token();
  mine.unlock_at_least(1500ms);

  EXPECT_FALSE(mine.is_held_by_current_thread());
  EXPECT_EQ(mine.hold_count(), 0);
  Lock seen = handle(b, GetParam(), "job");
  EXPECT_TRUE(seen.is_locked()) << "the name was freed at the release";
  const auto ttl = seen.remaining_ttl();
  ASSERT_TRUE(ttl.has_value());
  EXPECT_GT(*ttl, 0ms);
  EXPECT_LE(*ttl, 1500ms);
  EXPECT_FALSE(theirs.try_lock()) << "another client took a name kept taken";
  EXPECT_FALSE(rival(a, GetParam(), "job").try_lock()) << "the releasing owner took it back inside the window";

  // A waiter elsewhere gets it at the window's end, not at the 30 s poll.
  ASSERT_TRUE(theirs.try_lock_for(20s));
  const auto waited = Clock::now() - before_grant;
  EXPECT_GE(waited, 1490ms) << "taken before held_for had passed since the grant";
  EXPECT_LT(waited, 10s) << "the waiter was not woken at the window's end";
  if (GetParam() != Side::kRead) {
    EXPECT_GT(theirs.fencing_token(), fence);
  }
  theirs.unlock();
}

TEST_P(AtLeast, AHoldOlderThanHeldForIsFreedAtOnce) {
  const Options o = slow_poll(fresh_options());
  DatabaseDistributedLock a(o), b(same_table(o));
  Lock mine = handle(a, GetParam(), "job");
  mine.lock();
  std::this_thread::sleep_for(400ms);  // ages the hold; nothing is awaited
  mine.unlock_at_least(100ms);
  Lock theirs = rival(b, GetParam(), "job");
  EXPECT_TRUE(theirs.try_lock()) << "a hold older than held_for was kept taken";
  theirs.unlock();
}

TEST_P(AtLeast, ANestedReleaseIsAPlainUnlock) {
  const Options o = slow_poll(fresh_options());
  DatabaseDistributedLock a(o), b(same_table(o));
  Lock mine = handle(a, GetParam(), "job");
  mine.lock();
  mine.lock();
  mine.unlock_at_least(1h);
  EXPECT_EQ(mine.hold_count(), 1);
  EXPECT_TRUE(mine.is_held_by_current_thread());
  mine.unlock();
  Lock theirs = rival(b, GetParam(), "job");
  EXPECT_TRUE(theirs.try_lock()) << "held_for of a nested release was applied to the last one";
  theirs.unlock();
}

TEST_P(AtLeast, ALocalWaiterWakesAtTheWindowsEnd) {
  const Options o = slow_poll(fresh_options());
  DatabaseDistributedLock a(o);
  Lock mine = handle(a, GetParam(), "job");
  Lock waiter = rival(a, GetParam(), "job");
  const auto before_grant = Clock::now();
  mine.lock();
  auto waited = std::async(std::launch::async, [&] {
    const bool had = waiter.try_lock_for(20s);
    const auto at = Clock::now();
    if (had) waiter.unlock();
    return std::make_pair(had, at);
  });
  // The waiter is refused by the hold before the release (or by the kept
  // lease after it): either way its wait ends with the window.
  mine.unlock_at_least(1200ms);
  const auto [had, at] = waited.get();
  EXPECT_TRUE(had);
  EXPECT_GE(at - before_grant, 1190ms) << "a local waiter took the name inside the window";
  EXPECT_LT(at - before_grant, 10s) << "the local waiter was not woken at the window's end";
}

TEST_P(AtLeast, ForceUnlockEndsTheWindow) {
  const Options o = slow_poll(fresh_options());
  DatabaseDistributedLock a(o), b(same_table(o));
  Lock mine = handle(a, GetParam(), "job");
  mine.lock();
  mine.unlock_at_least(1h);
  Lock theirs = rival(b, GetParam(), "job");
  EXPECT_FALSE(theirs.try_lock());
  EXPECT_TRUE(handle(b, GetParam(), "job").force_unlock()) << "the kept name was not seen as taken";
  EXPECT_TRUE(theirs.try_lock());
  theirs.unlock();
}

INSTANTIATE_TEST_SUITE_P(EveryLockHandle, AtLeast, ::testing::Values(Side::kMutex, Side::kFair, Side::kWrite, Side::kRead),
                         [](const ::testing::TestParamInfo<Side>& p) {
                           switch (p.param) {
                             case Side::kFair:
                               return std::string("fair");
                             case Side::kWrite:
                               return std::string("write");
                             case Side::kRead:
                               return std::string("read");
                             case Side::kMutex:
                               break;
                           }
                           return std::string("lock");
                         });

TEST(AtLeastArguments, AreCheckedBeforeAnySqlAndReleaseNothing) {
  const Options o = fresh_options();
  DatabaseDistributedLock a(o), b(same_table(o));
  Lock mine = a.get_lock("job");
  EXPECT_THROW(mine.unlock_at_least(5s), NotHeldError);
  mine.lock();
  EXPECT_THROW(mine.unlock_at_least(-1ms), std::invalid_argument);
  EXPECT_THROW(mine.unlock_at_least(std::chrono::hours(24 * 366)), std::invalid_argument);
  EXPECT_EQ(mine.hold_count(), 1) << "a refused unlock_at_least released a hold";
  mine.unlock_at_least(0ms);  // a plain unlock
  Lock theirs = b.get_lock("job");
  EXPECT_TRUE(theirs.try_lock());
  theirs.unlock();
}

TEST(AtLeastReads, AReaderSlotKeptTakenIsNotReusedByTheNextReadHere) {
  const Options o = slow_poll(fresh_options());
  DatabaseDistributedLock a(o), b(same_table(o));
  Lock read = a.get_read_write_lock("rw").read_lock();
  read.lock();
  read.unlock_at_least(1h);
  // The next read of this client takes another slot row, at once.
  const auto start = Clock::now();
  ASSERT_TRUE(read.try_lock_for(5s));
  EXPECT_LT(Clock::now() - start, 2s);
  read.unlock();
  // The kept slot row still keeps writers out.
  EXPECT_FALSE(b.get_read_write_lock("rw").write_lock().try_lock());
}

}  // namespace
}  // namespace dlock
