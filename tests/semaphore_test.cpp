// Semaphores against the real database: the API.md "Semaphores" rules, sync
// and async, across threads, clients and processes.
#include <dlock/asio.hpp>
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <signal.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "api/tools.hpp"
#include "test_env.hpp"

namespace dlock {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::ChildProcess;
using test::fresh_options;
using test::same_table;
using test::url_for;
using test::wait_until;

// Rows of semaphore `name`.
std::string slot_rows(const Options& o, const std::string& name) {
  return test::query_scalar("SELECT COUNT(*) FROM `" + o.table + "` WHERE kind = 2 AND lock_name = '" + name + "'");
}

TEST(Semaphore, BadInputIsRejectedBeforeAnySql) {
  const Options o = fresh_options();
  DatabaseDistributedLock client(o);
  EXPECT_THROW((void)client.get_semaphore("s", 0), std::invalid_argument);
  EXPECT_THROW((void)client.get_semaphore("s", 100'001), std::invalid_argument);
  EXPECT_THROW((void)client.get_semaphore("", 1), std::invalid_argument);
  EXPECT_THROW((void)client.get_semaphore(std::string("a\0b", 3), 1), std::invalid_argument);
  EXPECT_THROW((void)client.get_semaphore(std::string(256, 'x'), 1), std::invalid_argument);
  Semaphore s = client.get_semaphore("s", 100'000);
  EXPECT_THROW((void)s.acquire(Millis(0)), std::invalid_argument);
  EXPECT_THROW((void)s.try_acquire(1s, Millis(-5)), std::invalid_argument);
  EXPECT_THROW((void)s.try_acquire(1s, Millis(366LL * 24 * 3600 * 1000)), std::invalid_argument);
  EXPECT_EQ(slot_rows(o, "s"), "0") << "a slot row was made for bad input";

  // Every kind lives in the lock table: a table name of MySQL's 64
  // characters leaves no other table's name too long.
  Options long_table = fresh_options();
  long_table.table = long_table.table + std::string(64 - long_table.table.size(), 'x');
  DatabaseDistributedLock long_client(long_table);
  EXPECT_TRUE(long_client.get_semaphore("s", 1).try_acquire().has_value());
}

TEST(Semaphore, AtMostPermitsAreHeldAcrossClientsAndThreads) {
  const Options o = fresh_options();
  DatabaseDistributedLock a(o);
  DatabaseDistributedLock b(same_table(o));
  constexpr std::uint32_t kPermits = 3;
  std::atomic<int> inside{0};
  std::atomic<int> most{0};
  std::atomic<int> cycles{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      Semaphore s = (t % 2 == 0 ? a : b).get_semaphore("bounded", kPermits);
      for (int i = 0; i < 15; ++i) {
        Permit p = s.acquire();
        const int now = ++inside;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(2ms);  // the work the permit admits
        --inside;
        p.release();
        ++cycles;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(cycles.load(), 8 * 15);
  EXPECT_LE(most.load(), static_cast<int>(kPermits));
  EXPECT_GE(most.load(), 2) << "permits were never used at once: the test proves nothing";
  EXPECT_EQ(a.get_semaphore("bounded", kPermits).available_permits(), kPermits);
  // Never more than kPermits slot rows: the bound is the primary key's.
  EXPECT_EQ(slot_rows(o, "bounded"), "3");
}

TEST(Semaphore, TryAcquireRulesAndALocalReleaseWakesAWaiterAtOnce) {
  Options o = fresh_options();
  o.poll_interval = 60s;  // only the local release can wake the waiter in time
  DatabaseDistributedLock client(o);
  Semaphore s = client.get_semaphore("try", 2);
  Permit first = s.acquire();
  std::optional<Permit> second = s.try_acquire();
  ASSERT_TRUE(second && second->held());
  EXPECT_EQ(second->name(), "try");
  EXPECT_EQ(s.available_permits(), 0u);
  EXPECT_FALSE(s.try_acquire()) << "one attempt, every permit held";
  EXPECT_FALSE(s.try_acquire(0ms));
  const auto t0 = Clock::now();
  EXPECT_FALSE(s.try_acquire(300ms));
  EXPECT_GE(Clock::now() - t0, 300ms) << "never empty before the wait has passed";

  std::thread releaser([&] {
    // Once the acquire below waits; from another thread: permits belong to
    // the client.
    EXPECT_TRUE(test::wait_for_waiters(client, MetricKind::kSemaphore, 1));
    first.release();
  });
  const auto t1 = Clock::now();
  std::optional<Permit> third = s.try_acquire(30s);
  const auto waited = Clock::now() - t1;
  releaser.join();
  ASSERT_TRUE(third);
  EXPECT_LT(waited, 5s) << "woken by the local release, not by a 60 s poll or a lease";
}

// The poller's "a permit is free" test needs each waited-for semaphore's
// bound; it is kept only while someone here waits, so a client that waits
// on ever new names (a semaphore per entity) does not grow for ever.
TEST(Semaphore, ABoundIsKeptForThePollerOnlyWhileSomeoneWaits) {
  Options o = fresh_options();
  DatabaseDistributedLock holder(o);
  DatabaseDistributedLock waiter(same_table(o));
  details::HoldKind& waiting = details::EngineAccess::of(waiter).kind(details::Kind::kSemaphore);
  std::vector<Permit> held;
  for (int i = 0; i < 3; ++i) held.push_back(holder.get_semaphore("b" + std::to_string(i), 1).acquire());
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(waiter.get_semaphore("b" + std::to_string(i), 1).try_acquire(50ms));
  EXPECT_EQ(waiting.names_kept(), 0u) << "the bounds of ended waits stayed";
  std::promise<bool> got;
  std::thread t([&] { got.set_value(waiter.get_semaphore("b0", 1).try_acquire(30s).has_value()); });
  ASSERT_TRUE(wait_until([&] { return waiting.names_kept() == 1; }, 10s));
  held[0].release();
  auto acquired = got.get_future();
  ASSERT_EQ(acquired.wait_for(20s), std::future_status::ready);
  t.join();
  EXPECT_TRUE(acquired.get());
  EXPECT_EQ(waiting.names_kept(), 0u);
}

TEST(Semaphore, PermitIsMoveOnlyAndReleasesExactlyOnce) {
  DatabaseDistributedLock client(fresh_options());
  Semaphore s = client.get_semaphore("moves", 2);
  {
    Permit a = s.acquire();
    EXPECT_EQ(s.available_permits(), 1u);
    Permit b(std::move(a));
    EXPECT_FALSE(a.held());  // NOLINT(bugprone-use-after-move): moved-from is specified
    EXPECT_TRUE(b.held());
    a.release();  // a moved-from permit releases nothing
    EXPECT_EQ(s.available_permits(), 1u);
    Permit c = s.acquire();
    EXPECT_EQ(s.available_permits(), 0u);
    c = std::move(b);  // releases c's own permit first
    EXPECT_EQ(s.available_permits(), 1u);
    c.release();
    c.release();  // idempotent
    EXPECT_FALSE(c.held());
    EXPECT_EQ(s.available_permits(), 2u);
    Permit d = s.acquire();
    EXPECT_EQ(s.available_permits(), 1u);
  }  // d's destructor releases
  EXPECT_EQ(s.available_permits(), 2u);
  Permit empty;
  EXPECT_FALSE(empty.held());
  EXPECT_TRUE(empty.name().empty());
}

TEST(Semaphore, EachPermitHasASlotBelowTheBoundAndTheSlotsTokenGrows) {
  const Options o = fresh_options();
  DatabaseDistributedLock a(o);
  DatabaseDistributedLock b(same_table(o));
  Semaphore sa = a.get_semaphore("slots", 2);
  Semaphore sb = b.get_semaphore("slots", 2);
  Permit first = sa.acquire();
  Permit second = sb.acquire();
  EXPECT_NE(first.slot(), second.slot());
  EXPECT_LT(first.slot(), 2u);
  EXPECT_LT(second.slot(), 2u);
  const std::uint32_t slot = first.slot();
  const std::uint64_t token = first.fencing_token();
  EXPECT_GT(token, 0u);
  first.release();
  EXPECT_EQ(first.fencing_token(), 0u) << "a released permit has no token";
  // The freed slot is the only one: its next take gets a greater token,
  // in whichever client.
  Permit again = sb.acquire();
  EXPECT_EQ(again.slot(), slot);
  EXPECT_GT(again.fencing_token(), token);
  Permit moved(std::move(again));
  EXPECT_EQ(moved.slot(), slot);
  EXPECT_EQ(again.fencing_token(), 0u);  // NOLINT(bugprone-use-after-move): moved-from is specified
}

TEST(Semaphore, AvailablePermitsCountsEveryClientAndNeverGoesBelowZero) {
  const Options o = fresh_options();
  DatabaseDistributedLock a(o);
  DatabaseDistributedLock b(same_table(o));
  Semaphore small = a.get_semaphore("shared", 2);
  Semaphore large = b.get_semaphore("shared", 5);
  EXPECT_EQ(small.permits(), 2u);
  EXPECT_EQ(small.available_permits(), 2u);
  std::vector<Permit> held;
  for (int i = 0; i < 4; ++i) held.push_back(large.acquire());
  EXPECT_EQ(large.available_permits(), 1u);
  EXPECT_EQ(small.available_permits(), 0u) << "never below 0";
  EXPECT_FALSE(small.try_acquire()) << "a client with a smaller bound never admits more than its bound";
}

TEST(Semaphore, NamesAreTheirOwnNamespace) {
  DatabaseDistributedLock client(fresh_options());
  ASSERT_TRUE(client.try_lock("shared-name"));
  Semaphore s = client.get_semaphore("shared-name", 1);
  std::optional<Permit> p = s.try_acquire();
  EXPECT_TRUE(p) << "a lock of the same name does not meet the semaphore";
  EXPECT_TRUE(client.is_locked("shared-name"));
  client.unlock("shared-name");
  EXPECT_TRUE(p->held());
  EXPECT_TRUE(client.try_lock("shared-name"));
  client.unlock("shared-name");
}

TEST(Semaphore, WatchdogRenewsAPermitPastItsLease) {
  Options o = fresh_options();
  o.watchdog_timeout = 600ms;
  DatabaseDistributedLock holder(o);
  DatabaseDistributedLock other(same_table(o));
  Permit p = holder.get_semaphore("renewed", 1).acquire();
  Semaphore s = other.get_semaphore("renewed", 1);
  EXPECT_TRUE(test::holds_throughout([&] { return !s.try_acquire().has_value(); }, 2s))
      << "the permit expired although the watchdog should renew it";
  p.release();
  EXPECT_TRUE(s.try_acquire());
}

TEST(Semaphore, AFixedLeaseEndsAndItsReleaseReportsTheLoss) {
  Options o = fresh_options();
  std::mutex m;
  std::vector<std::pair<std::string, std::uint64_t>> lost;
  o.on_lock_lost = [&](std::string_view name, std::uint64_t fence) {
    std::lock_guard<std::mutex> g(m);
    lost.emplace_back(std::string(name), fence);
  };
  DatabaseDistributedLock holder(o);
  DatabaseDistributedLock other(same_table(o));
  Permit p = holder.get_semaphore("leased", 1).acquire(300ms);
  Semaphore s = other.get_semaphore("leased", 1);
  EXPECT_FALSE(s.try_acquire());
  std::optional<Permit> taken = s.try_acquire(10s);
  ASSERT_TRUE(taken) << "the fixed lease did not end";
  EXPECT_NO_THROW(p.release());
  EXPECT_FALSE(p.held());
  ASSERT_TRUE(wait_until(
      [&] {
        std::lock_guard<std::mutex> g(m);
        return !lost.empty();
      },
      10s))
      << "on_lock_lost was not called";
  std::lock_guard<std::mutex> g(m);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].first, "leased");
  EXPECT_EQ(lost[0].second, 0u) << "permits report fence 0";
  EXPECT_TRUE(taken->held()) << "the late release did not free the new holder's slot";
}

TEST(Semaphore, ACrashedProcessPermitComesBackWhenItsLeaseEnds) {
  Options o = fresh_options();
  o.watchdog_timeout = 1500ms;
  DatabaseDistributedLock client(o);
  ChildProcess holder(test::helper_path(), {url_for(o), "hold-permit", "crash", "1"});
  ASSERT_TRUE(holder.wait_for_line("acquired", 15s));
  Semaphore s = client.get_semaphore("crash", 1);
  EXPECT_FALSE(s.try_acquire());
  holder.kill(SIGKILL);
  const auto killed = Clock::now();
  std::optional<Permit> p = s.try_acquire(20s);
  ASSERT_TRUE(p) << "the crashed holder's permit never came back";
  EXPECT_LT(Clock::now() - killed, 1500ms + 3s);
}

TEST(Semaphore, AReleaseInAnotherProcessWakesAWaiter) {
  Options o = fresh_options();
  // With fast_wakeup the other process's release rings a bell: no poll
  // comes within the test's bound. Without it, the poll is the way.
  const bool fast = test::fast_wakeup_enabled();
  o.poll_interval = fast ? 60s : 200ms;
  o.watchdog_timeout = 30s;  // no wake at the holders' lease ends either
  DatabaseDistributedLock client(o);
  Semaphore s = client.get_semaphore("xproc", 2);
  ChildProcess first(test::helper_path(), {url_for(o), "permit-for", "xproc", "2", "600"});
  ChildProcess second(test::helper_path(), {url_for(o), "hold-permit", "xproc", "2"});
  ASSERT_TRUE(first.wait_for_line("acquired", 15s));
  ASSERT_TRUE(second.wait_for_line("acquired", 15s));
  const auto t0 = Clock::now();
  std::optional<Permit> p = s.try_acquire(30s);
  ASSERT_TRUE(p) << "the waiter was not woken by the other process's release";
  EXPECT_TRUE(first.wait_for_line("released", 5s));
  if (fast) {
    EXPECT_LT(Clock::now() - t0, 10s) << "woken by the poll, not at the release";
  }
  EXPECT_GE(Clock::now() - t0, 300ms) << "acquired while both permits were held";
}

TEST(Semaphore, AReleaseInAnotherClientWakesAWaiterAtTheRelease) {
  if (!test::fast_wakeup_enabled()) GTEST_SKIP() << "the bell needs fast_wakeup";
  Options o = fresh_options();
  o.poll_interval = 60s;
  o.watchdog_timeout = 30s;  // no wake at the holder's lease end either
  DatabaseDistributedLock holder(o);
  DatabaseDistributedLock waiter(same_table(o));
  Semaphore hs = holder.get_semaphore("xclient", 1);
  Semaphore ws = waiter.get_semaphore("xclient", 1);
  for (int round = 0; round < 5; ++round) {
    Permit held = hs.acquire();
    std::thread t([&] {
      // Once the waiter is refused (it then watches the holder's bell).
      EXPECT_TRUE(test::wait_for_waiters(waiter, MetricKind::kSemaphore, 1));
      held.release();
    });
    const auto t0 = Clock::now();
    std::optional<Permit> p = ws.try_acquire(10s);
    t.join();
    ASSERT_TRUE(p) << "round " << round << ": not woken at the release";
    EXPECT_LT(Clock::now() - t0, 3s) << "round " << round << ": not woken at the release";
  }
}

TEST(Semaphore, DestroyingTheClientReleasesItsPermits) {
  const Options o = fresh_options();
  DatabaseDistributedLock observer(o);
  Semaphore s = observer.get_semaphore("shutdown", 3);
  auto client = std::make_unique<DatabaseDistributedLock>(same_table(o));
  Semaphore mine = client->get_semaphore("shutdown", 3);
  // Permits still held when their client goes. A Permit must not be used
  // (or destroyed) after its client, so these live in raw storage that is
  // never destroyed (a short name: no heap memory to leak).
  alignas(Permit) unsigned char storage[2][sizeof(Permit)];
  new (storage[0]) Permit(mine.acquire());
  new (storage[1]) Permit(mine.acquire());
  EXPECT_EQ(s.available_permits(), 1u);
  client.reset();
  EXPECT_EQ(s.available_permits(), 3u);
}

TEST(Semaphore, WithoutTableCreationTheLockTableIsAllItNeeds) {
  Options o = fresh_options();
  { DatabaseDistributedLock creator(o); }
  o.create_table = false;
  DatabaseDistributedLock client(o);
  auto permit = client.get_semaphore("s", 1).try_acquire();
  ASSERT_TRUE(permit.has_value());
  EXPECT_EQ(permit->fencing_token(), 1u);
}

TEST(Semaphore, AsyncAcquireWithFutureCallbackAndCoroutine) {
  DatabaseDistributedLock client(fresh_options());
  Semaphore s = client.get_semaphore("async", 2);
  Permit a = async_acquire(s, asio::use_future).get();
  EXPECT_TRUE(a.held());
  std::optional<Permit> b = async_try_acquire(s, 0ms, asio::use_future).get();
  ASSERT_TRUE(b);
  std::optional<Permit> none = async_try_acquire(s, 100ms, asio::use_future).get();
  EXPECT_FALSE(none) << "every permit held";

  // A parked coroutine is resumed by a release in this client.
  asio::io_context io;
  std::atomic<bool> got{false};
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        Permit p = co_await async_acquire(s, 5s, asio::use_awaitable);
        got = p.held();
      },
      asio::detached);
  std::thread runner([&] { io.run(); });
  EXPECT_TRUE(test::wait_for_waiters(client, MetricKind::kSemaphore, 1));  // parked
  EXPECT_FALSE(got.load());
  a.release();
  runner.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(s.available_permits(), 1u) << "the coroutine's permit was released when it went out of scope";

  std::promise<std::exception_ptr> bad;
  async_acquire(s, Millis(0), [&](std::exception_ptr e, Permit p) {
    EXPECT_FALSE(p.held());
    bad.set_value(e);
  });
  const auto e = bad.get_future().get();
  ASSERT_TRUE(e);
  EXPECT_THROW(std::rethrow_exception(e), std::invalid_argument);
}

TEST(Semaphore, AsyncWaitsIgnoreCancelByOwnerAndEndWithTheClient) {
  const Options o = fresh_options();
  DatabaseDistributedLock holder(o);
  Permit held = holder.get_semaphore("cancel", 1).acquire();
  auto client = std::make_unique<DatabaseDistributedLock>(same_table(o));
  std::promise<std::exception_ptr> ended;
  async_acquire(client->get_semaphore("cancel", 1), [&](std::exception_ptr e, Permit p) {
    EXPECT_FALSE(p.held());
    ended.set_value(e);
  });
  auto f = ended.get_future();
  client->cancel(Owner::this_thread());
  client->cancel(Owner::create());
  EXPECT_EQ(f.wait_for(300ms), std::future_status::timeout) << "semaphore waits have no owner";
  client.reset();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  const auto e = f.get();
  ASSERT_TRUE(e);
  EXPECT_THROW(std::rethrow_exception(e), Cancelled);
}

}  // namespace
}  // namespace dlock
