// A client cut off from the database by a real partition (a black-hole
// proxy between it and the server: nothing closes, nothing arrives) while
// another client still reaches the server (docs/api.md, "Losses are known
// at the deadline"): the cut-off client's caller is told at the local
// deadline, before anyone else gets the hold; no call outlives its bound;
// an outage shorter than the lease loses nothing; a late answer never
// brings a lost hold back.
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/tools.hpp"
#include "blackhole_proxy.hpp"
#include "test_env.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr auto kToldWithin = 500ms;  // instrumented builds run several times slower
#else
constexpr auto kToldWithin = 100ms;  // the contract
#endif

// What on_lock_lost was called with, and when.
struct Losses {
  std::mutex mutex;
  std::vector<std::pair<std::string, Clock::time_point>> seen;
  void operator()(std::string_view name, std::uint64_t) {
    std::lock_guard<std::mutex> guard(mutex);
    seen.emplace_back(std::string(name), Clock::now());
  }
  std::optional<Clock::time_point> of(const std::string& name) {
    std::lock_guard<std::mutex> guard(mutex);
    for (const auto& [n, at] : seen)
      if (n == name) return at;
    return std::nullopt;
  }
  std::size_t count() {
    std::lock_guard<std::mutex> guard(mutex);
    return seen.size();
  }
};

// A client of the test's table that reaches the server only through `proxy`.
Options through(const test::BlackholeProxy& proxy, Options o, const std::shared_ptr<Losses>& losses) {
  o.host = "127.0.0.1";
  o.port = proxy.port();
  o.io_timeout = 2s;
  o.connect_timeout = 2s;
  o.watchdog_timeout = 3s;
  o.on_lock_lost = [losses](std::string_view name, std::uint64_t fence) { (*losses)(name, fence); };
  return o;
}

unsigned server_port() { return Options::from_url(test::database_url()).port; }

// The one kind of hold a case takes: how A takes it (what it returns keeps
// the hold's handle alive until the test ends), how B then takes it
// (blocking; returns once it holds it), and the name on_lock_lost gets.
struct HoldCase {
  std::string label;
  std::function<std::shared_ptr<void>(DatabaseDistributedLock&)> take;
  std::function<void(DatabaseDistributedLock&)> take_after;
  std::string name;
};

std::vector<HoldCase> hold_cases() {
  using Kept = std::shared_ptr<void>;
  return {
      {"watchdog_lock", [](DatabaseDistributedLock& c) { c.lock("n"); return Kept(); },
       [](DatabaseDistributedLock& c) { c.lock("n"); }, "n"},
      {"fixed_lease", [](DatabaseDistributedLock& c) { c.lock("n", 3s); return Kept(); },
       [](DatabaseDistributedLock& c) { c.lock("n"); }, "n"},
      {"permit", [](DatabaseDistributedLock& c) { return Kept(std::make_shared<Permit>(c.get_semaphore("s", 1).acquire())); },
       [](DatabaseDistributedLock& c) { Permit p = c.get_semaphore("s", 1).acquire(); }, "s"},
      {"write_side", [](DatabaseDistributedLock& c) { c.get_read_write_lock("rw").lock(); return Kept(); },
       [](DatabaseDistributedLock& c) { c.get_read_write_lock("rw").lock(); }, "rw"},
      {"read_side", [](DatabaseDistributedLock& c) { c.get_read_write_lock("rw").lock_shared(); return Kept(); },
       [](DatabaseDistributedLock& c) { c.get_read_write_lock("rw").lock(); }, "rw"},
      {"fair_lock", [](DatabaseDistributedLock& c) { c.get_fair_lock("f").lock(); return Kept(); },
       [](DatabaseDistributedLock& c) { c.get_fair_lock("f").lock(); }, "f"},
      {"multi_lock",
       [](DatabaseDistributedLock& c) {
         auto set = std::make_shared<MultiLock>(c.get_multi_lock({"m1", "m2"}));
         set->lock();
         return Kept(set);
       },
       [](DatabaseDistributedLock& c) { c.lock("m2"); }, "m2"},
      {"leadership", [](DatabaseDistributedLock& c) { (void)c.get_election("e").campaign("a"); return Kept(); },
       [](DatabaseDistributedLock& c) { (void)c.get_election("e").campaign("b"); }, "e"},
  };
}

class CutOff : public ::testing::TestWithParam<int> {};

TEST_P(CutOff, ItsCallerIsToldAtTheDeadlineBeforeAnyoneElseGetsTheHold) {
  const HoldCase hold = hold_cases()[static_cast<std::size_t>(GetParam())];
  const Options o = test::fresh_options();
  test::BlackholeProxy proxy(server_port());
  auto losses = std::make_shared<Losses>();
  DatabaseDistributedLock a(through(proxy, o, losses));
  DatabaseDistributedLock b(test::same_table(o));
  details::Engine& engine = details::EngineAccess::of(a);
  const std::shared_ptr<void> kept = hold.take(a);
  std::this_thread::sleep_for(1200ms);  // a renewal or so: the deadline is not the first one
  proxy.blackhole();
  std::this_thread::sleep_for(50ms);  // nothing gets through from here on
  const Clock::time_point deadline = engine.holds().next_deadline();
  ASSERT_NE(deadline, Clock::time_point::max());
  Clock::time_point b_got{};
  std::thread other([&] {
    hold.take_after(b);
    b_got = Clock::now();
  });
  other.join();
  const auto told = losses->of(hold.name);
  ASSERT_TRUE(told.has_value()) << hold.label << ": not told before the other client got it";
  EXPECT_LT(*told, b_got) << hold.label;
  EXPECT_GE(*told, deadline) << hold.label << ": told before its deadline";
  EXPECT_LT(*told - deadline, kToldWithin) << hold.label << ": told "
                                            << std::chrono::duration_cast<std::chrono::milliseconds>(*told - deadline).count()
                                            << " ms after its deadline";
  proxy.heal();
  // Stays lost after the heal, whatever comes back late.
  EXPECT_TRUE(test::holds_throughout([&] { return engine.holds().next_deadline() == Clock::time_point::max(); }, 1500ms))
      << hold.label;
}

INSTANTIATE_TEST_SUITE_P(EveryKind, CutOff, ::testing::Range(0, 8), [](const auto& param_info) {
  return hold_cases()[static_cast<std::size_t>(param_info.param)].label;
});

TEST(Partition, AThreadsHoldIsFalseFromTheDeadlineOnAndStaysFalseAfterTheHeal) {
  const Options o = test::fresh_options();
  test::BlackholeProxy proxy(server_port());
  auto losses = std::make_shared<Losses>();
  DatabaseDistributedLock a(through(proxy, o, losses));
  a.lock("n");
  proxy.blackhole();
  ASSERT_TRUE(test::wait_until([&] { return losses->count() == 1; }, 10s));
  EXPECT_FALSE(a.is_held_by_current_thread("n"));
  proxy.heal();
  EXPECT_TRUE(test::holds_throughout([&] { return !a.is_held_by_current_thread("n"); }, 3s));
  EXPECT_THROW(a.lock("n"), LockLostError);
  EXPECT_EQ(a.fencing_token("n"), 0u);
  a.unlock("n");  // the owed unlock: normal, no second report
  EXPECT_EQ(losses->count(), 1u);
  a.lock("n");  // and then a fresh hold
  a.unlock("n");
}

// Bound: connect_timeout + io_timeout (+ 1 s) for every call, however many
// pooled connections went dead at once.
TEST(Partition, EveryCallIsBoundedWithEightWarmPooledConnections) {
  Options o = test::fresh_options();
  test::BlackholeProxy proxy(server_port());
  auto losses = std::make_shared<Losses>();
  Options cut = through(proxy, o, losses);
  cut.pool_size = 8;
  cut.io_timeout = 1s;
  cut.connect_timeout = 1s;
  cut.watchdog_timeout = 30s;
  DatabaseDistributedLock a(cut);
  {
    // Eight pooled connections, all opened and warm.
    details::ConnectionPool& pool = details::EngineAccess::of(a).pool();
    std::vector<details::PooledConnection> warm;
    for (int i = 0; i < 8; ++i) warm.push_back(pool.acquire());
    ASSERT_EQ(pool.open_count(), 8u);
  }
  a.lock("held");
  Semaphore semaphore = a.get_semaphore("s", 2);
  ReadWriteLock rw = a.get_read_write_lock("rw");
  Election election = a.get_election("e", Owner::create());
  election.campaign("v");
  proxy.blackhole();
  const auto bound = cut.connect_timeout + cut.io_timeout + 1s;
  struct Call {
    const char* what;
    std::function<void()> run;
    bool may_throw;
  };
  const std::vector<Call> calls = {
      {"lock", [&] { a.lock("other"); }, true},
      {"try_lock", [&] { (void)a.try_lock("other2"); }, true},
      {"unlock", [&] { a.unlock("held"); }, false},
      {"is_locked", [&] { (void)a.is_locked("x"); }, true},
      {"try_acquire", [&] { (void)semaphore.try_acquire(); }, true},
      {"available_permits", [&] { (void)semaphore.available_permits(); }, true},
      {"try_lock_shared", [&] { (void)rw.try_lock_shared(); }, true},
      {"try_lock (write)", [&] { (void)rw.try_lock(); }, true},
      {"try_campaign", [&] { (void)a.get_election("e2").try_campaign("v", 0ms); }, true},
      {"resign", [&] { election.resign(); }, false},
      {"remaining_ttl", [&] { (void)a.remaining_ttl("x"); }, true},
  };
  for (const auto& call : calls) {
    const auto started = Clock::now();
    try {
      call.run();
    } catch (const BackendError&) {
      EXPECT_TRUE(call.may_throw) << call.what << " threw";
    }
    const auto took = Clock::now() - started;
    EXPECT_LT(took, bound) << call.what << " took "
                           << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  }
  proxy.heal();
}

TEST(Partition, AnOutageShorterThanTheLeaseLosesNoHold) {
  const Options o = test::fresh_options();
  test::BlackholeProxy proxy(server_port());
  auto losses = std::make_shared<Losses>();
  Options cut = through(proxy, o, losses);
  cut.watchdog_timeout = 30s;
  DatabaseDistributedLock a(cut);
  DatabaseDistributedLock b(test::same_table(o));
  a.lock("n");
  a.get_election("e").campaign("v");
  proxy.blackhole();
  std::this_thread::sleep_for(5s);
  proxy.heal();
  EXPECT_FALSE(b.try_lock("n"));
  EXPECT_TRUE(a.is_held_by_current_thread("n"));
  EXPECT_TRUE(a.get_election("e").is_leader());
  EXPECT_EQ(losses->count(), 0u);
  a.unlock("n");
  a.get_election("e").resign();
}

TEST(Partition, AFailedRenewalIsTriedAgainWithinASecondSoShortOutagesLoseNothing) {
  const Options o = test::fresh_options();
  test::BlackholeProxy proxy(server_port());
  auto losses = std::make_shared<Losses>();
  DatabaseDistributedLock a(through(proxy, o, losses));  // 3 s lease, renewed every second
  a.lock("n");
  a.get_election("e").campaign("v");
  // Down 1 s, up 0.5 s, for 9 s: every renewal tick may land in a down.
  const auto until = Clock::now() + 9s;
  while (Clock::now() < until) {
    proxy.refuse();
    std::this_thread::sleep_for(1s);
    proxy.heal();
    std::this_thread::sleep_for(500ms);
  }
  EXPECT_EQ(losses->count(), 0u);
  EXPECT_TRUE(a.is_held_by_current_thread("n"));
  EXPECT_TRUE(a.get_election("e").is_leader());
  a.unlock("n");
  a.get_election("e").resign();
}

TEST(Partition, ARenewalWhoseAnswerComesLateDoesNotBringALostHoldBack) {
  const Options o = test::fresh_options();
  test::BlackholeProxy proxy(server_port());
  auto losses = std::make_shared<Losses>();
  DatabaseDistributedLock a(through(proxy, o, losses));  // 3 s lease, renewed every second, 2 s io_timeout
  details::Engine& engine = details::EngineAccess::of(a);
  a.lock("n");
  ASSERT_NE(a.fencing_token("n"), 0u);
  // The renewals go through and commit; their answers never arrive. Then,
  // just before the deadline, the way is cut altogether, and healed a
  // second after it: the renewal that waited for its answer times out
  // about the deadline, and its retry, stuck in the cut, gets through at
  // the heal (the row is still the hold's on the server, extended by the
  // renewal that committed).
  proxy.drop_replies();
  const auto hold = engine.holds().find(details::NameKeyView{details::Kind::kLock, "n"}, Owner::this_thread().id());
  ASSERT_TRUE(hold.has_value());
  std::this_thread::sleep_until(hold->deadline - 100ms);
  proxy.blackhole();
  std::this_thread::sleep_until(hold->deadline + 1s);
  proxy.heal();
  // Renewed in time, or counted lost at the deadline: either way, never
  // first lost and then back (fencing_token asks no statement).
  bool was_lost = false;
  bool came_back = false;
  test::holds_throughout(
      [&] {
        const bool held = a.fencing_token("n") != 0;
        came_back = came_back || (was_lost && held);
        was_lost = was_lost || !held;
        return true;
      },
      6s);
  EXPECT_FALSE(came_back) << "a hold counted lost came back";
  EXPECT_EQ(losses->count(), was_lost ? 1u : 0u);
  if (was_lost) {
    EXPECT_THROW(a.lock("n"), LockLostError);
  }
  a.unlock("n");
}

}  // namespace
}  // namespace dlock
