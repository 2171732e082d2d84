// WaiterRegistry, no database: wakes go to parked continuations first, then
// to blocked threads, else are kept as permits (never more than there are
// subscribers); a continuation is resumed exactly once per park, by a wake
// or by unpark (its timeout), never both.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

#include "wakeup/waiter_registry.hpp"

namespace dlock::details {
namespace {

using namespace std::chrono_literals;

struct Counter final : WaiterRegistry::Parked {
  std::atomic<int> wakes{0};
  void wake() override { ++wakes; }
};

TEST(WaiterRegistry, WakeGoesToAParkedContinuationAndRemovesIt) {
  WaiterRegistry registry;
  WaiterRegistry::Subscription sub(registry, "n");
  auto c = std::make_shared<Counter>();
  ASSERT_TRUE(sub.park(c));
  registry.wake_one("n");
  EXPECT_EQ(c->wakes, 1);
  EXPECT_FALSE(sub.unpark(*c)) << "already taken out by the wake";
  registry.wake_one("n");
  EXPECT_EQ(c->wakes, 1) << "woken twice for one park";
  EXPECT_FALSE(sub.park(c)) << "the second wake was kept as a permit";
}

TEST(WaiterRegistry, UnparkWinsOverALaterWake) {
  WaiterRegistry registry;
  WaiterRegistry::Subscription sub(registry, "n");
  auto c = std::make_shared<Counter>();
  ASSERT_TRUE(sub.park(c));
  EXPECT_TRUE(sub.unpark(*c));
  registry.wake_one("n");
  EXPECT_EQ(c->wakes, 0);
  EXPECT_FALSE(sub.park(c)) << "the wake became a permit for the next look";
  EXPECT_TRUE(sub.park(c));
}

TEST(WaiterRegistry, PermitsNeverExceedSubscribers) {
  WaiterRegistry registry;
  WaiterRegistry::Subscription sub(registry, "n");
  for (int i = 0; i < 5; ++i) registry.wake_one("n");
  auto c = std::make_shared<Counter>();
  EXPECT_FALSE(sub.park(c));
  EXPECT_TRUE(sub.park(c)) << "five wakes for one subscriber left more than one permit";
  EXPECT_TRUE(sub.unpark(*c));
}

TEST(WaiterRegistry, WakeAllWakesEveryParkedContinuationAndEveryThread) {
  WaiterRegistry registry;
  WaiterRegistry::Subscription a(registry, "n");
  WaiterRegistry::Subscription b(registry, "n");
  WaiterRegistry::Subscription blocked(registry, "n");
  auto ca = std::make_shared<Counter>();
  auto cb = std::make_shared<Counter>();
  ASSERT_TRUE(a.park(ca));
  ASSERT_TRUE(b.park(cb));
  std::atomic<bool> woke{false};
  std::thread t([&] { woke = blocked.wait_for(10s); });
  registry.wake_all("n");
  t.join();
  EXPECT_TRUE(woke);
  EXPECT_EQ(ca->wakes, 1);
  EXPECT_EQ(cb->wakes, 1);
}

TEST(WaiterRegistry, ABlockedThreadGetsAWakeWhenNothingIsParked) {
  WaiterRegistry registry;
  WaiterRegistry::Subscription sub(registry, "n");
  std::atomic<bool> woke{false};
  std::thread t([&] { woke = sub.wait_for(10s); });
  // The wake lands before or during the wait: either way it is not lost.
  registry.wake_one("n");
  t.join();
  EXPECT_TRUE(woke);
  EXPECT_FALSE(sub.wait_for(1ms)) << "one wake, one permit";
}

TEST(WaiterRegistry, NamesListSubscribedNamesOnly) {
  WaiterRegistry registry;
  {
    WaiterRegistry::Subscription sub(registry, "x");
    EXPECT_TRUE(registry.has("x"));
    EXPECT_EQ(registry.names().size(), 1u);
  }
  EXPECT_FALSE(registry.has("x"));
  EXPECT_TRUE(registry.empty());
  registry.wake_one("x");  // nobody: nothing happens
}

}  // namespace
}  // namespace dlock::details
