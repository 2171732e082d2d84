// Owners that are not threads: Owner::create() and handles bound to an
// owner, which lock on one thread and unlock on another, share one hold
// count across threads, and stay exact when several threads use one owner
// at once.
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "test_env.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::fresh_options;
using test::same_table;

using test::on_other_thread;

TEST(Owner, IdsAreUniqueNonzeroAndAThreadKeepsItsOwn) {
  std::set<std::uint64_t> ids;
  for (int i = 0; i < 100; ++i) {
    const Owner o = Owner::create();
    EXPECT_NE(o.id(), 0u);
    EXPECT_TRUE(ids.insert(o.id()).second) << "owner id reused";
  }
  const Owner mine = Owner::this_thread();
  EXPECT_EQ(mine, Owner::this_thread());
  EXPECT_EQ(ids.count(mine.id()), 0u);
  Owner other = mine;
  on_other_thread([&] { other = Owner::this_thread(); });
  EXPECT_NE(other, mine);
  EXPECT_NE(other.id(), 0u);
}

TEST(Owner, BoundHandleLocksOnOneThreadAndUnlocksOnAnother) {
  const Options o = fresh_options();
  DatabaseDistributedLock client(o);
  DatabaseDistributedLock other(same_table(o));
  const Owner request = Owner::create();
  Lock lock = client.get_lock("hop", request);
  on_other_thread([&] { lock.lock(); });
  EXPECT_TRUE(lock.is_held_by_current_thread()) << "the owner's hold, asked from any thread";
  EXPECT_EQ(lock.hold_count(), 1);
  EXPECT_NE(lock.fencing_token(), 0u);
  EXPECT_FALSE(client.is_held_by_current_thread("hop")) << "this thread is another owner";
  EXPECT_FALSE(client.try_lock("hop")) << "the calling thread is not the request's owner";
  EXPECT_THROW(client.unlock("hop"), NotHeldError);
  EXPECT_FALSE(other.try_lock("hop"));
  on_other_thread([&] { lock.lock(); });  // reentrant, from a third thread
  EXPECT_EQ(lock.hold_count(), 2);
  on_other_thread([&] { lock.unlock(); });
  EXPECT_TRUE(other.is_locked("hop"));
  lock.unlock();
  EXPECT_FALSE(other.is_locked("hop"));
  EXPECT_THROW(lock.unlock(), NotHeldError);
}

TEST(Owner, StandardGuardsWorkWithBoundHandles) {
  const Options o = fresh_options();
  DatabaseDistributedLock client(o);
  const Owner job = Owner::create();
  Lock a = client.get_lock("a", job);
  Lock b = client.get_lock("b", job);
  {
    std::scoped_lock both(a, b);
    EXPECT_TRUE(a.is_held_by_current_thread());
    EXPECT_TRUE(b.is_held_by_current_thread());
  }
  {
    std::unique_lock<Lock> maybe(a, std::defer_lock);
    EXPECT_TRUE(maybe.try_lock_for(1s));
    std::unique_lock<Lock> moved = std::move(maybe);
    on_other_thread([&] { moved.unlock(); });  // released from another thread
  }
  EXPECT_FALSE(client.is_locked("a"));
  EXPECT_FALSE(client.is_locked("b"));
}

TEST(Owner, OneOwnerUsedByManyThreadsAtOnceKeepsAnExactCount) {
  const Options o = fresh_options();
  DatabaseDistributedLock client(o);
  const Owner shared = Owner::create();
  Lock lock = client.get_lock("count", shared);
  lock.lock();  // the outer hold: everything below is reentrant
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 15; ++i) {
        try {
          lock.lock();
          lock.unlock();
        } catch (const std::exception&) {
          ++failures;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(lock.hold_count(), 1);
  EXPECT_EQ(test::query_scalar("SELECT state FROM `" + o.table + "` WHERE lock_name = 'count'"), "1")
      << "the count in the database drifted";
  lock.unlock();
  EXPECT_FALSE(client.is_locked("count"));
}

TEST(Owner, ALostHoldOfAnOwnerThrowsLockLostErrorUntilItsUnlocksAreMade) {
  const Options o = fresh_options();
  DatabaseDistributedLock client(o);
  DatabaseDistributedLock admin(same_table(o));
  const Owner job = Owner::create();
  Lock lock = client.get_lock("lost", job);
  lock.lock();
  ASSERT_TRUE(admin.force_unlock("lost"));
  on_other_thread([&] { EXPECT_THROW(lock.lock(), LockLostError); });
  on_other_thread([&] { EXPECT_NO_THROW(lock.unlock()); });
  EXPECT_TRUE(lock.try_lock());
  lock.unlock();
}

TEST(Owner, TheSameOwnerInTwoClientsIsTwoOwners) {
  const Options o = fresh_options();
  DatabaseDistributedLock a(o);
  DatabaseDistributedLock b(same_table(o));
  const Owner job = Owner::create();
  Lock in_a = a.get_lock("two", job);
  Lock in_b = b.get_lock("two", job);
  in_a.lock();
  EXPECT_FALSE(in_b.try_lock());
  EXPECT_FALSE(in_b.is_held_by_current_thread());
  in_a.unlock();
}

}  // namespace
}  // namespace dlock
