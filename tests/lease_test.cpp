// Leases: fixed leases expire by the server's clock and are taken over;
// the watchdog keeps watchdog-mode holds alive and reports the ones it
// cannot; remaining_ttl reports what the row says.
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include "test_env.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::fresh_options;
using test::same_table;

TEST(Lease, FixedLeaseExpiresAndAnotherClientTakesOver) {
  const Options base = fresh_options();
  std::atomic<int> lost{0};
  Options with_callback = base;
  with_callback.on_lock_lost = [&](std::string_view, std::uint64_t) { ++lost; };
  DatabaseDistributedLock a(with_callback);
  DatabaseDistributedLock b(same_table(base));
  const auto start = std::chrono::steady_clock::now();
  a.lock("lease", 600ms);
  const auto fence_a = a.fencing_token("lease");
  ASSERT_TRUE(b.try_lock("lease", 10s));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 500ms) << "taken over before the lease ran out";
  EXPECT_GT(b.fencing_token("lease"), fence_a);
  EXPECT_FALSE(a.is_held_by_current_thread("lease"));
  EXPECT_EQ(a.fencing_token("lease"), 0u) << "a lost hold has no token";
  EXPECT_NO_THROW(a.unlock("lease"));
  EXPECT_TRUE(b.is_held_by_current_thread("lease")) << "the old holder's unlock freed the new holder";
  EXPECT_TRUE(test::wait_until([&] { return lost.load() >= 1; }, 5s)) << "on_lock_lost not called";
  b.unlock("lease");
}

TEST(Lease, RemainingTtl) {
  const Options options = fresh_options();
  DatabaseDistributedLock a(options);
  DatabaseDistributedLock b(same_table(options));
  EXPECT_FALSE(a.remaining_ttl("ttl").has_value());
  a.lock("ttl", 4s);
  auto ttl = b.remaining_ttl("ttl");
  ASSERT_TRUE(ttl.has_value());
  EXPECT_GT(*ttl, 3s);
  EXPECT_LE(*ttl, 4s);
  a.lock("ttl", 20s);  // reentrant with a lease: expiry reset to the new lease
  ttl = b.remaining_ttl("ttl");
  ASSERT_TRUE(ttl.has_value());
  EXPECT_GT(*ttl, 15s);
  a.lock("ttl", 2s);
  ttl = a.remaining_ttl("ttl");
  ASSERT_TRUE(ttl.has_value());
  EXPECT_LE(*ttl, 2s);
  a.unlock("ttl");
  a.unlock("ttl");
  a.unlock("ttl");
  EXPECT_FALSE(b.remaining_ttl("ttl").has_value());

  a.lock("wd");  // watchdog mode: lease is watchdog_timeout (1.5 s in tests)
  ttl = b.remaining_ttl("wd");
  ASSERT_TRUE(ttl.has_value());
  EXPECT_GT(*ttl, 0ms);
  EXPECT_LE(*ttl, options.watchdog_timeout);
  a.unlock("wd");
}

TEST(Lease, WatchdogKeepsHoldAliveWellPastItsLease) {
  const Options options = fresh_options();  // watchdog_timeout 1.5 s
  DatabaseDistributedLock a(options);
  DatabaseDistributedLock b(same_table(options));
  a.lock("wd");
  const auto fence = a.fencing_token("wd");
  const auto until = std::chrono::steady_clock::now() + options.watchdog_timeout * 4;
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_FALSE(b.try_lock("wd")) << "the hold expired while the watchdog should renew it";
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(a.is_held_by_current_thread("wd"));
  EXPECT_EQ(a.fencing_token("wd"), fence);
  a.unlock("wd");
  EXPECT_TRUE(b.try_lock("wd"));
  b.unlock("wd");
}

TEST(Lease, NoRenewalOutlivesItsUnlock) {
  Options options = fresh_options();
  options.watchdog_timeout = 30ms;  // renewals every 10 ms race every unlock below
  DatabaseDistributedLock a(options);
  DatabaseDistributedLock b(same_table(options));
  for (int i = 0; i < 100; ++i) {
    a.lock("race");
    a.unlock("race");
    ASSERT_TRUE(b.try_lock("race")) << "a renewal revived a released hold at round " << i;
    b.unlock("race");
  }
}

TEST(Lease, WatchdogReportsHoldItCannotRenew) {
  const Options base = fresh_options();
  std::atomic<int> lost{0};
  Options with_callback = base;
  with_callback.on_lock_lost = [&](std::string_view name, std::uint64_t) {
    if (name == "taken") ++lost;
  };
  DatabaseDistributedLock a(with_callback);
  DatabaseDistributedLock b(same_table(base));
  a.lock("taken");
  a.lock("kept");
  ASSERT_TRUE(b.force_unlock("taken"));
  ASSERT_TRUE(b.try_lock("taken"));
  // The watchdog's next round renews "kept" and finds "taken" gone.
  EXPECT_TRUE(test::wait_until([&] { return lost.load() == 1; }, 5s));
  EXPECT_TRUE(b.is_held_by_current_thread("taken"));
  EXPECT_TRUE(a.is_held_by_current_thread("kept"));
  EXPECT_NO_THROW(a.unlock("taken"));
  EXPECT_TRUE(b.is_held_by_current_thread("taken"));
  // "kept" is still renewed.
  std::this_thread::sleep_for(base.watchdog_timeout * 2);
  EXPECT_TRUE(a.is_held_by_current_thread("kept"));
  EXPECT_EQ(lost.load(), 1) << "a loss is reported once";
  a.unlock("kept");
  b.unlock("taken");
}

TEST(Lease, ReentrantLeaseAcquireStopsRenewal) {
  const Options options = fresh_options();
  DatabaseDistributedLock a(options);
  DatabaseDistributedLock b(same_table(options));
  a.lock("mode");
  a.lock("mode", 500ms);  // now a fixed lease: the watchdog must leave it alone
  EXPECT_TRUE(b.try_lock("mode", 10s));
  b.unlock("mode");
  EXPECT_NO_THROW(a.unlock("mode"));
  EXPECT_NO_THROW(a.unlock("mode"));
}

}  // namespace
}  // namespace dlock
