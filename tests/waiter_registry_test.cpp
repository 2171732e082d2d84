// WaiterRegistry, no database: wakes go to parked continuations first, then
// to blocked threads, else are kept as permits (never more than there are
// subscribers); a continuation is resumed exactly once per park, by a wake
// or by unpark (its timeout), never both. Handoff claims take the longest
// parked waiter that accepts one, and the claimed waiter resumes only
// through the claim's resolution.
#include <gtest/gtest.h>

#include <time.h>

#include <atomic>
#include <memory>
#include <thread>

#include "engine/request.hpp"
#include "wakeup/waiter_registry.hpp"

namespace dlock::details {
namespace {

// A lock's key: these tests are about names, and every kind behaves alike.
inline NameKey K(std::string_view name) { return NameKey(Kind::kLock, name); }

using namespace std::chrono_literals;

struct Counter final : WaiterRegistry::Parked {
  std::atomic<int> wakes{0};
  void wake() override { ++wakes; }
};

TEST(WaiterRegistry, WakeGoesToAParkedContinuationAndRemovesIt) {
  WaiterRegistry registry;
  WaiterRegistry::Subscription sub(registry, K("n"));
  auto c = std::make_shared<Counter>();
  ASSERT_TRUE(sub.park(c));
  registry.wake_one(K("n"));
  EXPECT_EQ(c->wakes, 1);
  EXPECT_FALSE(sub.unpark(*c)) << "already taken out by the wake";
  registry.wake_one(K("n"));
  EXPECT_EQ(c->wakes, 1) << "woken twice for one park";
  EXPECT_FALSE(sub.park(c)) << "the second wake was kept as a permit";
}

TEST(WaiterRegistry, WakeAllWakesEachSubscriberOnceHoweverFastOneLooksAgain) {
  // Two subscribers not parked when wake_all comes (about to look): the
  // first to look must not use up the other's wake by looking twice.
  WaiterRegistry registry;
  WaiterRegistry::Subscription fast(registry, K("n"));
  WaiterRegistry::Subscription slow(registry, K("n"));
  registry.wake_all(K("n"));
  EXPECT_TRUE(fast.wait_for(0us)) << "woken";
  EXPECT_FALSE(fast.wait_for(1ms)) << "woken twice by one wake_all";
  EXPECT_TRUE(slow.wait_for(0us)) << "the other subscriber's wake was used up";
  // A parked one is woken directly, and its next park does not count the
  // same wake_all again.
  auto c = std::make_shared<Counter>();
  ASSERT_TRUE(slow.park(c));
  registry.wake_all(K("n"));
  EXPECT_EQ(c->wakes, 1);
  EXPECT_TRUE(slow.park(c)) << "parked again: that wake_all was delivered already";
  EXPECT_TRUE(slow.unpark(*c));
  EXPECT_TRUE(fast.wait_for(0us));
}

struct Heard final : WaiterRegistry::Watcher {
  std::atomic<int> times{0};
  void woken() override { ++times; }
};

TEST(WaiterRegistry, AWatcherHearsEveryWakeAndTakesNoneFromTheWaiters) {
  WaiterRegistry registry;
  auto heard = std::make_shared<Heard>();
  {
    WaiterRegistry::Watch watch(registry, K("n"), heard);
    EXPECT_TRUE(registry.has(K("n"))) << "a watched name is not polled";
    EXPECT_EQ(registry.names().size(), 1u);
    WaiterRegistry::Subscription sub(registry, K("n"));
    auto c = std::make_shared<Counter>();
    ASSERT_TRUE(sub.park(c));
    registry.wake_one(K("n"));
    EXPECT_EQ(heard->times, 1);
    EXPECT_EQ(c->wakes, 1) << "the watcher took the wake from the parked waiter";
    registry.wake_one(K("n"));  // nobody parked: kept as the subscriber's permit
    EXPECT_EQ(heard->times, 2);
    EXPECT_FALSE(sub.park(c)) << "the permit went to the watcher";
    registry.wake_all(K("n"));
    EXPECT_EQ(heard->times, 3);
    EXPECT_EQ(registry.claim(K("n")), nullptr) << "a watcher was claimed for a handoff";
    registry.wake_one(K("other"));
    EXPECT_EQ(heard->times, 3) << "heard a wake of another name";
  }
  EXPECT_FALSE(registry.has(K("n"))) << "the entry outlived its last watch";
  EXPECT_TRUE(registry.empty());
  registry.wake_one(K("n"));
  EXPECT_EQ(heard->times, 3);
}

TEST(WaiterRegistry, UnparkWinsOverALaterWake) {
  WaiterRegistry registry;
  WaiterRegistry::Subscription sub(registry, K("n"));
  auto c = std::make_shared<Counter>();
  ASSERT_TRUE(sub.park(c));
  EXPECT_TRUE(sub.unpark(*c));
  registry.wake_one(K("n"));
  EXPECT_EQ(c->wakes, 0);
  EXPECT_FALSE(sub.park(c)) << "the wake became a permit for the next look";
  EXPECT_TRUE(sub.park(c));
}

TEST(WaiterRegistry, PermitsNeverExceedSubscribers) {
  WaiterRegistry registry;
  WaiterRegistry::Subscription sub(registry, K("n"));
  for (int i = 0; i < 5; ++i) registry.wake_one(K("n"));
  auto c = std::make_shared<Counter>();
  EXPECT_FALSE(sub.park(c));
  EXPECT_TRUE(sub.park(c)) << "five wakes for one subscriber left more than one permit";
  EXPECT_TRUE(sub.unpark(*c));
}

TEST(WaiterRegistry, WakeAllWakesEveryParkedContinuationAndEveryThread) {
  WaiterRegistry registry;
  WaiterRegistry::Subscription a(registry, K("n"));
  WaiterRegistry::Subscription b(registry, K("n"));
  WaiterRegistry::Subscription blocked(registry, K("n"));
  auto ca = std::make_shared<Counter>();
  auto cb = std::make_shared<Counter>();
  ASSERT_TRUE(a.park(ca));
  ASSERT_TRUE(b.park(cb));
  std::atomic<bool> woke{false};
  std::thread t([&] { woke = blocked.wait_for(10s); });
  registry.wake_all(K("n"));
  t.join();
  EXPECT_TRUE(woke);
  EXPECT_EQ(ca->wakes, 1);
  EXPECT_EQ(cb->wakes, 1);
}

TEST(WaiterRegistry, ABlockedThreadGetsAWakeWhenNothingIsParked) {
  WaiterRegistry registry;
  WaiterRegistry::Subscription sub(registry, K("n"));
  std::atomic<bool> woke{false};
  std::thread t([&] { woke = sub.wait_for(10s); });
  // The wake lands before or during the wait: either way it is not lost.
  registry.wake_one(K("n"));
  t.join();
  EXPECT_TRUE(woke);
  EXPECT_FALSE(sub.wait_for(1ms)) << "one wake, one permit";
}

struct Claimable final : WaiterRegistry::Parked {
  AcquireRequest request;
  bool accepts = true;
  std::atomic<int> wakes{0};
  std::atomic<int> claims{0};
  void wake() override { ++wakes; }
  void on_claimed() override { ++claims; }
  const void* handoff_request() const override { return accepts ? &request : nullptr; }
};

TEST(WaiterRegistry, AClaimTakesTheLongestParkedWaiterThatAcceptsAHandoff) {
  WaiterRegistry registry;
  WaiterRegistry::Subscription a(registry, K("n")), b(registry, K("n")), c(registry, K("n"));
  auto only_wakes = std::make_shared<Counter>();
  auto first = std::make_shared<Claimable>();
  auto second = std::make_shared<Claimable>();
  ASSERT_TRUE(a.park(only_wakes));
  ASSERT_TRUE(b.park(first));
  ASSERT_TRUE(c.park(second));
  auto claimed = registry.claim(K("n"));
  ASSERT_EQ(claimed.get(), first.get());
  EXPECT_FALSE(b.unpark(*first)) << "a claimed waiter is no longer parked (its timeout must not resume it)";
  EXPECT_EQ(first->wakes, 0) << "claiming is not waking";
  WaiterRegistry::resolve(claimed, true);
  EXPECT_EQ(first->wakes, 1);
  EXPECT_TRUE(first->take_grant());
  EXPECT_FALSE(first->take_grant()) << "a grant is consumed once";
  registry.wake_one(K("n"));
  EXPECT_EQ(only_wakes->wakes, 1) << "plain wakes still go to the longest parked";
  EXPECT_TRUE(c.unpark(*second));
  EXPECT_EQ(registry.claim(K("n")), nullptr);
  EXPECT_EQ(registry.claim(K("other")), nullptr);
}

// A claimed waiter is told at the claim, before the releaser's statement
// (a blocked thread then waits for the resolution awake); a wake or another
// waiter's claim does not tell it.
TEST(WaiterRegistry, AClaimTellsTheClaimedWaiterOnceAndNoOther) {
  WaiterRegistry registry;
  WaiterRegistry::Subscription a(registry, K("n")), b(registry, K("n"));
  auto first = std::make_shared<Claimable>();
  auto second = std::make_shared<Claimable>();
  ASSERT_TRUE(a.park(first));
  ASSERT_TRUE(b.park(second));
  auto claimed = registry.claim(K("n"));
  ASSERT_EQ(claimed.get(), first.get());
  EXPECT_EQ(first->claims, 1);
  EXPECT_EQ(first->wakes, 0) << "told of the claim, not woken: the resolution wakes it";
  EXPECT_EQ(second->claims, 0);
  registry.wake_one(K("n"));
  EXPECT_EQ(second->wakes, 1);
  EXPECT_EQ(second->claims, 0) << "a plain wake is not a claim";
  WaiterRegistry::resolve(claimed, 1);
  EXPECT_EQ(first->claims, 1);
  EXPECT_EQ(first->wakes, 1);
}

TEST(WaiterRegistry, AWaiterThatDeclinesHandoffsIsNeverClaimed) {
  WaiterRegistry registry;
  WaiterRegistry::Subscription sub(registry, K("n"));
  auto declining = std::make_shared<Claimable>();
  declining->accepts = false;
  ASSERT_TRUE(sub.park(declining));
  EXPECT_EQ(registry.claim(K("n")), nullptr);
  EXPECT_TRUE(sub.unpark(*declining));
}

TEST(WaiterRegistry, AClaimableThreadIsGrantedOrWokenByTheResolution) {
  for (bool granted : {true, false}) {
    WaiterRegistry registry;
    WaiterRegistry::Subscription sub(registry, K("n"));
    AcquireRequest request;
    std::atomic<int> result{-1};
    std::thread t([&] { result = static_cast<int>(sub.wait_claimable(10s, &request, nullptr)); });
    std::shared_ptr<WaiterRegistry::Parked> claimed;
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (!claimed && std::chrono::steady_clock::now() < give_up) {
      claimed = registry.claim(K("n"));
      if (!claimed) std::this_thread::sleep_for(1ms);
    }
    ASSERT_TRUE(claimed);
    EXPECT_EQ(claimed->handoff_request(), &request);
    WaiterRegistry::resolve(claimed, granted);
    t.join();
    using Woken = WaiterRegistry::Subscription::Woken;
    EXPECT_EQ(result, static_cast<int>(granted ? Woken::kGranted : Woken::kWoken));
  }
}

TEST(WaiterRegistry, AClaimedThreadWaitsPastItsTimeoutForTheResolution) {
  WaiterRegistry registry;
  WaiterRegistry::Subscription sub(registry, K("n"));
  AcquireRequest request;
  std::atomic<bool> returned{false};
  std::thread t([&] {
    EXPECT_EQ(sub.wait_claimable(200ms, &request, nullptr), WaiterRegistry::Subscription::Woken::kGranted);
    returned = true;
  });
  std::shared_ptr<WaiterRegistry::Parked> claimed;
  while (!claimed && !returned) claimed = registry.claim(K("n"));
  if (!claimed) {
    t.join();
    FAIL() << "the thread timed out before it was claimed";
  }
  std::this_thread::sleep_for(500ms);
  EXPECT_FALSE(returned) << "the claimed thread gave up while its handoff was under way";
  WaiterRegistry::resolve(claimed, true);
  t.join();
  EXPECT_TRUE(returned);
}

// A claimed thread waits for its resolution awake only about as long as
// resolutions took before (here: at once), never for the whole of a slow
// one: past that it blocks, and a 300 ms resolution costs it no core.
TEST(WaiterRegistry, AClaimedThreadWaitsAwakeOnlyBriefly) {
  WaiterRegistry registry;
  WaiterRegistry::Subscription sub(registry, K("n"));
  AcquireRequest request;
  const auto cpu_now = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
  };
  const auto claim_when_parked = [&] {
    std::shared_ptr<WaiterRegistry::Parked> claimed;
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (!claimed && std::chrono::steady_clock::now() < give_up) {
      claimed = registry.claim(K("n"));
      if (!claimed) std::this_thread::sleep_for(1ms);
    }
    return claimed;
  };
  for (const auto resolve_after : {0ms, 0ms, 0ms, 300ms}) {
    std::atomic<long long> cpu_ns{-1};
    std::thread t([&] {
      const auto before = cpu_now();
      EXPECT_EQ(sub.wait_claimable(10s, &request, nullptr), WaiterRegistry::Subscription::Woken::kGranted);
      cpu_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(cpu_now() - before).count();
    });
    auto claimed = claim_when_parked();
    ASSERT_TRUE(claimed);
    std::this_thread::sleep_for(resolve_after);
    WaiterRegistry::resolve(claimed, 1);
    t.join();
    if (resolve_after > 0ms) {
      EXPECT_LT(cpu_ns.load(), std::chrono::nanoseconds(100ms).count()) << "it spun through the resolution";
    }
  }
}

TEST(WaiterRegistry, AnInterruptedThreadIsNotClaimedAndATimeoutEndsItsWait) {
  WaiterRegistry registry;
  WaiterRegistry::Subscription sub(registry, K("n"));
  AcquireRequest request;
  std::atomic<bool> interrupted{true};
  std::atomic<bool> done{false};
  std::thread t([&] {
    EXPECT_EQ(sub.wait_claimable(300ms, &request, &interrupted), WaiterRegistry::Subscription::Woken::kTimedOut);
    done = true;
  });
  while (!done) {
    EXPECT_EQ(registry.claim(K("n")), nullptr);
    std::this_thread::sleep_for(5ms);
  }
  t.join();
}

TEST(WaiterRegistry, NamesListSubscribedNamesOnly) {
  WaiterRegistry registry;
  {
    WaiterRegistry::Subscription sub(registry, K("x"));
    EXPECT_TRUE(registry.has(K("x")));
    EXPECT_EQ(registry.names().size(), 1u);
  }
  EXPECT_FALSE(registry.has(K("x")));
  EXPECT_TRUE(registry.empty());
  registry.wake_one(K("x"));  // nobody: nothing happens
}

}  // namespace
}  // namespace dlock::details
