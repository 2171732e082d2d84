// Core lock semantics against the real private MariaDB: ownership,
// reentrancy, introspection, force_unlock, fencing, bad input, byte-exact
// names, guards, and cleanup at destruction.
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/tools.hpp"
#include "test_env.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::fresh_options;
using test::same_table;

using test::on_other_thread;

TEST(Lock, LockAndUnlock) {
  DatabaseDistributedLock client(fresh_options());
  EXPECT_FALSE(client.is_locked("job"));
  client.lock("job");
  EXPECT_TRUE(client.is_locked("job"));
  EXPECT_TRUE(client.is_held_by_current_thread("job"));
  EXPECT_EQ(client.hold_count("job"), 1);
  client.unlock("job");
  EXPECT_FALSE(client.is_locked("job"));
  EXPECT_FALSE(client.is_held_by_current_thread("job"));
  EXPECT_EQ(client.hold_count("job"), 0);
}

TEST(Lock, IntrospectionFromOtherThreadsAndClients) {
  const Options options = fresh_options();
  DatabaseDistributedLock a(options);
  DatabaseDistributedLock b(same_table(options));
  a.lock("res");
  EXPECT_TRUE(on_other_thread([&] { return a.is_locked("res"); }));
  EXPECT_FALSE(on_other_thread([&] { return a.is_held_by_current_thread("res"); }));
  EXPECT_EQ(on_other_thread([&] { return a.hold_count("res"); }), 0);
  EXPECT_EQ(on_other_thread([&] { return a.fencing_token("res"); }), 0u);
  EXPECT_TRUE(b.is_locked("res"));
  EXPECT_FALSE(b.is_held_by_current_thread("res"));
  EXPECT_EQ(b.hold_count("res"), 0);
  EXPECT_TRUE(b.remaining_ttl("res").has_value());
  a.unlock("res");
  EXPECT_FALSE(b.is_locked("res"));
}

TEST(Lock, ReentrancyNeedsOneUnlockPerAcquire) {
  const Options options = fresh_options();
  DatabaseDistributedLock a(options);
  DatabaseDistributedLock b(same_table(options));
  a.lock("r");
  const auto fence = a.fencing_token("r");
  ASSERT_TRUE(a.try_lock("r"));
  a.lock("r", 10s);
  EXPECT_EQ(a.hold_count("r"), 3);
  EXPECT_EQ(a.fencing_token("r"), fence) << "reentry keeps the token";
  EXPECT_EQ(test::query_scalar("SELECT state FROM `" + options.table + "` WHERE lock_name = 'r'"), "3");
  EXPECT_FALSE(b.try_lock("r"));
  EXPECT_FALSE(on_other_thread([&] { return a.try_lock("r"); })) << "another thread is another owner";
  a.unlock("r");
  a.unlock("r");
  EXPECT_EQ(a.hold_count("r"), 1);
  EXPECT_FALSE(b.try_lock("r"));
  a.unlock("r");
  EXPECT_TRUE(b.try_lock("r"));
  b.unlock("r");
}

TEST(Lock, UnlockByNonOwnerThrowsNotHeld) {
  const Options options = fresh_options();
  DatabaseDistributedLock a(options);
  DatabaseDistributedLock b(same_table(options));
  EXPECT_THROW(a.unlock("never"), NotHeldError);
  a.lock("held");
  EXPECT_THROW(b.unlock("held"), NotHeldError);
  EXPECT_TRUE(on_other_thread([&] {
    try {
      a.unlock("held");
    } catch (const NotHeldError&) {
      return true;
    }
    return false;
  }));
  EXPECT_TRUE(a.is_held_by_current_thread("held")) << "a failed unlock must not release anything";
  a.unlock("held");
  EXPECT_THROW(a.unlock("held"), NotHeldError) << "one unlock too many";
}

TEST(Lock, ForceUnlockClearsAnyHolderAndOldHolderCannotFreeNewOne) {
  const Options base = fresh_options();
  std::atomic<int> lost{0};
  std::atomic<std::uint64_t> lost_fence{0};
  Options with_callback = base;
  with_callback.on_lock_lost = [&](std::string_view name, std::uint64_t fence) {
    if (name == "f") {
      lost_fence = fence;
      ++lost;
    }
  };
  DatabaseDistributedLock a(with_callback);
  DatabaseDistributedLock b(same_table(base));
  EXPECT_FALSE(b.force_unlock("f")) << "nothing to clear";
  a.lock("f");
  const auto fence_a = a.fencing_token("f");
  EXPECT_TRUE(b.force_unlock("f"));
  EXPECT_FALSE(b.is_locked("f"));
  ASSERT_TRUE(b.try_lock("f"));
  EXPECT_GT(b.fencing_token("f"), fence_a);
  EXPECT_NO_THROW(a.unlock("f"));
  EXPECT_TRUE(b.is_held_by_current_thread("f")) << "the old holder's unlock freed the new holder";
  EXPECT_TRUE(test::wait_until([&] { return lost.load() == 1; }, 5s));
  EXPECT_EQ(lost_fence.load(), fence_a);
  b.unlock("f");
}

TEST(Lock, FencingTokensStrictlyIncrease) {
  const Options options = fresh_options();
  DatabaseDistributedLock a(options);
  DatabaseDistributedLock b(same_table(options));
  EXPECT_EQ(a.fencing_token("fence"), 0u) << "0 when not held";
  std::vector<std::uint64_t> seen;
  a.lock("fence");
  seen.push_back(a.fencing_token("fence"));
  a.lock("fence");
  EXPECT_EQ(a.fencing_token("fence"), seen.back()) << "unchanged on reentry";
  a.unlock("fence");
  a.unlock("fence");
  EXPECT_EQ(a.fencing_token("fence"), 0u);
  b.lock("fence");
  seen.push_back(b.fencing_token("fence"));
  b.force_unlock("fence");  // b's hold is cleared by force
  a.lock("fence");
  seen.push_back(a.fencing_token("fence"));
  a.unlock("fence");
  b.unlock("fence");  // lost hold: no throw
  b.lock("fence", 300ms);
  seen.push_back(b.fencing_token("fence"));
  // b's lease expires; a takes over.
  ASSERT_TRUE(a.try_lock("fence", 5s));
  seen.push_back(a.fencing_token("fence"));
  a.unlock("fence");
  {
    // Across client restarts: a brand-new client continues the sequence.
    DatabaseDistributedLock c(same_table(options));
    c.lock("fence");
    seen.push_back(c.fencing_token("fence"));
    c.unlock("fence");
  }
  for (std::size_t i = 1; i < seen.size(); ++i) EXPECT_GT(seen[i], seen[i - 1]) << "at " << i;
}

TEST(Lock, BadLeasesThrowInvalidArgumentBeforeSql) {
  const Options options = fresh_options();
  DatabaseDistributedLock client(options);
  // Bad names through every entry point: hostile_names_test.cpp.
  for (Millis lease : {0ms, -1ms, Millis(std::chrono::hours(24 * 366))}) {
    EXPECT_THROW(client.lock("ok", lease), std::invalid_argument);
    EXPECT_THROW((void)client.try_lock("ok", 1s, lease), std::invalid_argument);
    EXPECT_THROW(client.get_lock("ok").lock(lease), std::invalid_argument);
  }
  // Nothing reached the table, and the client still works.
  EXPECT_EQ(test::query_scalar("SELECT COUNT(*) FROM `" + options.table + "`"), "0");
  client.lock("ok");
  client.unlock("ok");
}

TEST(Lock, NamesAreComparedByteExactly) {
  const Options options = fresh_options();
  DatabaseDistributedLock a(options);
  DatabaseDistributedLock b(same_table(options));
  const std::string pairs[][2] = {{"Abc", "abc"}, {"a", "a "}, {"e\xcc\x81", "\xc3\xa9"}, {"x", "X"}};
  for (const auto& p : pairs) {
    a.lock(p[0]);
    EXPECT_TRUE(b.try_lock(p[1])) << "'" << p[0] << "' and '" << p[1] << "' must be distinct locks";
    EXPECT_FALSE(b.try_lock(p[0]));
    b.unlock(p[1]);
    a.unlock(p[0]);
  }
  // Hostile bytes (quotes, wildcards, invalid UTF-8, SQL text, ...):
  // hostile_names_test.cpp.
  // '%' and '_' are not wildcards: no other row is affected.
  a.lock("under_score");
  EXPECT_TRUE(b.try_lock("underXscore"));
  b.unlock("underXscore");
  a.unlock("under_score");
}

TEST(Lock, RowsDeletedBehindTheClientsBackAreRecreated) {
  const Options options = fresh_options();
  DatabaseDistributedLock client(options);
  client.lock("gone");
  const auto fence = client.fencing_token("gone");
  client.unlock("gone");
  // A DBA cleans the table up: the client's knowledge that the row exists
  // is now wrong, and acquiring must still work (and not report a conflict).
  test::execute_sql("DELETE FROM `" + options.table + "`");
  EXPECT_TRUE(client.try_lock("gone"));
  EXPECT_GE(client.fencing_token("gone"), 1u);
  EXPECT_LE(client.fencing_token("gone"), fence) << "the fence restarted with the row (documented)";
  client.unlock("gone");
  test::execute_sql("DELETE FROM `" + options.table + "`");
  client.lock("gone");  // blocking path
  EXPECT_EQ(client.hold_count("gone"), 1);
  client.unlock("gone");
}

TEST(Lock, DestructorReleasesItsHolds) {
  const Options options = fresh_options();
  DatabaseDistributedLock b(same_table(options));
  {
    DatabaseDistributedLock a(options);
    a.lock("d1");
    a.lock("d1");
    a.lock("d2", 60s);
    ASSERT_TRUE(a.try_lock("d3"));
    EXPECT_FALSE(b.try_lock("d1"));
  }
  for (const char* n : {"d1", "d2", "d3"}) {
    EXPECT_TRUE(b.try_lock(n)) << n;
    b.unlock(n);
  }
}

TEST(Lock, TwoClientsInOneProcessAreDistinctOwners) {
  const Options options = fresh_options();
  DatabaseDistributedLock a(options);
  DatabaseDistributedLock b(same_table(options));
  EXPECT_NE(a.machine_id(), b.machine_id());
  a.lock("x");
  EXPECT_FALSE(b.try_lock("x")) << "same thread, other client: not reentrant";
  a.unlock("x");
}

TEST(Lock, ThreadIdentityIsNeverReusedByANewThread) {
  const Options options = fresh_options();
  DatabaseDistributedLock client(options);
  // Threads that exit while holding: their OS and std::thread ids get reused
  // by the threads below, but a library-assigned id never is.
  for (int i = 0; i < 5; ++i) std::thread([&, i] { client.lock("orphan-" + std::to_string(i), 30s); }).join();
  for (int i = 0; i < 5; ++i) {
    std::thread([&, i] {
      const std::string name = "orphan-" + std::to_string(i);
      EXPECT_FALSE(client.try_lock(name)) << "a new thread inherited a dead thread's hold";
      EXPECT_EQ(client.hold_count(name), 0);
      EXPECT_THROW(client.unlock(name), NotHeldError);
    }).join();
  }
}

// A take clears its own client's intent on the row in the same statement
// (only a client with an intent there runs that clause), and forgets it:
// another client gets the name at the release, not when the intent's lease
// (3 poll intervals) ends.
TEST(Lock, ATakeClearsItsOwnClientsIntentSoAnotherClientGetsInAtTheRelease) {
  Options o = fresh_options();
  o.poll_interval = 10s;  // the intent's lease, 30 s, cannot end within the test
  DatabaseDistributedLock a(o);
  DatabaseDistributedLock b(same_table(o));
  a.lock("intent");
  a.unlock("intent");  // the row exists
  details::Engine& engine = details::EngineAccess::of(a);
  const details::NameKeyView key{details::Kind::kLock, "intent"};
  engine.set_intent(key);
  ASSERT_TRUE(engine.intends(key)) << "the intent was not set";
  EXPECT_FALSE(b.try_lock("intent", 0ms)) << "another client's live intent did not hold b back";
  a.lock("intent");
  EXPECT_FALSE(engine.intends(key)) << "the client still counts the intent its take cleared";
  a.unlock("intent");
  EXPECT_TRUE(b.try_lock("intent", 0ms)) << "the intent stayed on the row after its own client took the name";
  b.unlock("intent");
}

TEST(Lock, StandardGuardsWork) {
  const Options options = fresh_options();
  DatabaseDistributedLock client(options);
  DatabaseDistributedLock other(same_table(options));
  Lock a = client.get_lock("guard-a");
  Lock b = client.get_lock("guard-b");
  EXPECT_EQ(a.name(), "guard-a");
  {
    std::lock_guard<Lock> guard(a);
    EXPECT_TRUE(a.is_held_by_current_thread());
    EXPECT_EQ(a.hold_count(), 1);
    EXPECT_GT(a.fencing_token(), 0u);
    EXPECT_TRUE(a.remaining_ttl().has_value());
  }
  EXPECT_FALSE(a.is_locked());
  {
    std::scoped_lock both(a, b);
    EXPECT_TRUE(a.is_held_by_current_thread());
    EXPECT_TRUE(b.is_held_by_current_thread());
    EXPECT_FALSE(other.try_lock("guard-a"));
    EXPECT_FALSE(other.try_lock("guard-b"));
  }
  EXPECT_FALSE(a.is_locked());
  EXPECT_FALSE(b.is_locked());

  other.lock("guard-a");
  {
    std::unique_lock<Lock> maybe(a, std::defer_lock);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_FALSE(maybe.try_lock_for(300ms));
    EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
    EXPECT_FALSE(maybe.try_lock_until(std::chrono::steady_clock::now() - 1s)) << "past deadline: one attempt";
    other.unlock("guard-a");
    EXPECT_TRUE(maybe.try_lock_for(2s));
    EXPECT_TRUE(a.is_held_by_current_thread());
  }
  EXPECT_FALSE(a.is_locked());
  Lock copy = a;  // cheap copies name the same lock
  copy.lock(5s);
  EXPECT_TRUE(a.is_held_by_current_thread());
  a.unlock();
}

TEST(Lock, ForceUnlockThroughHandle) {
  const Options options = fresh_options();
  DatabaseDistributedLock a(options);
  DatabaseDistributedLock b(same_table(options));
  a.lock("h");
  Lock h = b.get_lock("h");
  EXPECT_TRUE(h.is_locked());
  EXPECT_TRUE(h.force_unlock());
  EXPECT_FALSE(h.is_locked());
  EXPECT_FALSE(a.is_held_by_current_thread("h"));
  EXPECT_EQ(a.hold_count("h"), 0);
  EXPECT_NO_THROW(a.unlock("h"));
}

TEST(Lock, UnreachableDatabaseAtConstruction) {
  Options o = fresh_options();
  o.port = 1;  // nothing listens there
  o.connect_timeout = 2s;
  const auto start = std::chrono::steady_clock::now();
  try {
    DatabaseDistributedLock client(o);
    FAIL() << "constructed without a database";
  } catch (const BackendError& e) {
    EXPECT_NE(e.code(), 0) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

}  // namespace
}  // namespace dlock
