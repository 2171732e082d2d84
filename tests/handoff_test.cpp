// Direct handoff: a release with a local waiter hands the hold to it in one
// statement (new owner and hold id, fence + 1, the row never free), for
// synchronous and asynchronous waiters, in the waiter's lease mode; a hold
// found lost at the handoff is reported and the waiter still gets the lock
// the usual way; a chain of handoffs does not keep another client out for
// long.
#include <dlock/asio.hpp>
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <boost/asio/use_future.hpp>

#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "background.hpp"
#include "api/tools.hpp"
#include "test_env.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::fresh_options;
using test::query_scalar;
using test::same_table;
using test::wait_until;

std::uint64_t handoffs(DatabaseDistributedLock& client) { return details::EngineAccess::of(client).handoffs(); }

// `n` threads looping lock+unlock of `name` on `client` until `stop`,
// counting their cycles in `cycles` if given. The caller joins them.
std::vector<std::thread> looping_on(DatabaseDistributedLock& client, const std::string& name, int n,
                                    const std::atomic<bool>& stop, std::atomic<long>* cycles = nullptr) {
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([&client, name, &stop, cycles] {
      while (!stop) {
        client.lock(name);
        client.unlock(name);
        if (cycles != nullptr) ++*cycles;
      }
    });
  }
  return threads;
}

// The row's fence, read straight from the table.
std::uint64_t row_fence(const Options& o, const std::string& name) {
  return std::stoull(query_scalar("SELECT fence FROM " + o.table + " WHERE lock_name = '" + name + "'"));
}

// Waits until `client` has a waiter parked on `name`: the handoff needs one
// that is waiting, not one between attempts (it subscribes before its
// first attempt, and parks once refused).
void wait_for_waiter(DatabaseDistributedLock& client, const std::string& name) {
  const auto& waiters = details::EngineAccess::of(client).waiters();
  ASSERT_TRUE(wait_until(
      [&] { return waiters.has(details::NameKeyView{details::Kind::kLock, name}) && waiters.parked() >= 1; }, 10s));
}

// A thread that waits up to `wait` for `name` as `owner` of `client`. It
// unlocks at once if it gets the lock, unless `keep` (then the test
// releases the hold through `owner`). Joined on destruction.
class Waiter : test::InBackground<std::pair<bool, Clock::time_point>> {
 public:
  Waiter(DatabaseDistributedLock& client, std::string name, Owner owner, Clock::duration wait, bool keep = false)
      : Waiter(client.get_lock(std::move(name), owner), wait, keep) {}
  // The same for any owner-bound lock (a read-write lock's write side).
  Waiter(Lock lock, Clock::duration wait, bool keep = false)
      : InBackground([lock, wait, keep]() mutable {
          const bool ok = lock.try_lock_for(wait);
          const auto at = Clock::now();
          if (ok && !keep) lock.unlock();
          return std::make_pair(ok, at);
        }) {}

  // Whether the wait got the lock, once it has ended; nullopt if it has
  // not ended within `timeout`.
  std::optional<bool> outcome(Clock::duration timeout) {
    if (!ended(timeout)) return std::nullopt;
    return value().first;
  }
  // When the wait ended (valid once outcome() has a value).
  Clock::time_point acquired_at() { return value().second; }
};

TEST(Handoff, ALocalWaiterIsHandedTheHoldInOneStatement) {
  Options options = fresh_options();
  options.poll_interval = 30s;  // only a local release can end the wait
  DatabaseDistributedLock client(options);
  auto lock = client.get_lock("h");
  lock.lock();
  const std::uint64_t first = lock.fencing_token();
  std::promise<std::uint64_t> waiter_token;
  std::thread waiter([&] {
    auto mine = client.get_lock("h");
    mine.lock();
    waiter_token.set_value(mine.fencing_token());
    mine.unlock();
  });
  wait_for_waiter(client, "h");
  const auto before = handoffs(client);
  lock.unlock();
  auto token = waiter_token.get_future();
  ASSERT_EQ(token.wait_for(10s), std::future_status::ready);
  waiter.join();
  EXPECT_EQ(handoffs(client), before + 1) << "the release freed the row instead of handing it over";
  EXPECT_EQ(token.get(), first + 1) << "a handoff is a new hold with the next fencing token";
  EXPECT_EQ(row_fence(options, "h"), first + 1);
  EXPECT_FALSE(client.is_locked("h"));
}

TEST(Handoff, TheHandedHoldIsTheWaitersOwnAndInItsLeaseMode) {
  Options options = fresh_options();
  options.poll_interval = 30s;
  options.watchdog_timeout = 30s;
  DatabaseDistributedLock client(options);
  client.lock("m");
  const Owner other = Owner::create();
  std::promise<bool> got;
  std::thread waiter([&] { got.set_value(client.get_lock("m", other).try_lock(20s, 4s)); });
  wait_for_waiter(client, "m");
  client.unlock("m");
  auto acquired = got.get_future();
  ASSERT_EQ(acquired.wait_for(10s), std::future_status::ready);
  waiter.join();
  ASSERT_TRUE(acquired.get());
  EXPECT_EQ(handoffs(client), 1u);
  auto theirs = client.get_lock("m", other);
  EXPECT_TRUE(theirs.is_held_by_current_thread());
  EXPECT_EQ(theirs.hold_count(), 1);
  EXPECT_FALSE(client.get_lock("m").is_held_by_current_thread()) << "the releasing thread still holds it";
  const auto ttl = theirs.remaining_ttl();
  ASSERT_TRUE(ttl.has_value());
  EXPECT_LE(*ttl, 4s) << "the waiter asked for a 4 s lease; the handed hold kept the watchdog's 30 s";
  EXPECT_EQ(query_scalar("SELECT watchdog FROM " + options.table + " WHERE lock_name = 'm'"), "0");
  // Reentrant on the handed hold, and released by its owner.
  theirs.lock(4s);
  EXPECT_EQ(theirs.hold_count(), 2);
  theirs.unlock();
  theirs.unlock();
  EXPECT_FALSE(client.is_locked("m"));
}

TEST(Handoff, AnAsynchronousWaiterIsHandedTheHold) {
  Options options = fresh_options();
  options.poll_interval = 30s;
  DatabaseDistributedLock client(options);
  client.lock("a");
  const std::uint64_t first = client.get_lock("a").fencing_token();
  const Owner owner = Owner::create();
  auto pending = async_lock(client.get_lock("a", owner), boost::asio::use_future);
  ASSERT_TRUE(wait_until([&] { return details::EngineAccess::of(client).waiters().parked() == 1; }, 10s));
  client.unlock("a");
  ASSERT_EQ(pending.wait_for(10s), std::future_status::ready);
  pending.get();
  EXPECT_EQ(handoffs(client), 1u);
  auto theirs = client.get_lock("a", owner);
  EXPECT_TRUE(theirs.is_held_by_current_thread());
  EXPECT_EQ(theirs.fencing_token(), first + 1);
  async_unlock(theirs, boost::asio::use_future).get();
  EXPECT_FALSE(client.is_locked("a"));
}

// An async_unlock that hands the hold to a parked async waiter delivers it
// on the worker that ran the release, before it completes the unlock
// itself: the handoff costs no second worker's wake, and the waiter (who
// has been waiting) hears first. Handlers without an executor run on the
// library thread, so their threads and order show where each ran.
TEST(Handoff, AnAsyncUnlockDeliversTheHandedHoldFirstOnItsOwnWorker) {
  Options options = fresh_options();
  options.poll_interval = 30s;
  DatabaseDistributedLock client(options);
  const Owner holder = Owner::create();
  const Owner waiter = Owner::create();
  async_lock(client.get_lock("a", holder), boost::asio::use_future).get();
  std::mutex m;
  std::vector<std::pair<std::string, std::thread::id>> order;
  std::promise<void> both;
  const auto note = [&](const char* who) {
    std::lock_guard<std::mutex> g(m);
    order.emplace_back(who, std::this_thread::get_id());
    if (order.size() == 2) both.set_value();
  };
  async_lock(client.get_lock("a", waiter), [&](std::exception_ptr error) {
    EXPECT_FALSE(error);
    note("waiter");
  });
  ASSERT_TRUE(wait_until([&] { return details::EngineAccess::of(client).waiters().parked() == 1; }, 10s));
  async_unlock(client.get_lock("a", holder), [&](std::exception_ptr error) {
    EXPECT_FALSE(error);
    note("unlock");
  });
  ASSERT_EQ(both.get_future().wait_for(10s), std::future_status::ready);
  EXPECT_EQ(handoffs(client), 1u);
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(order[0].first, "waiter");
  EXPECT_EQ(order[1].first, "unlock");
  EXPECT_EQ(order[0].second, order[1].second) << "the handed hold was delivered by another worker";
  EXPECT_TRUE(client.get_lock("a", waiter).is_held_by_current_thread());
  async_unlock(client.get_lock("a", waiter), boost::asio::use_future).get();
  EXPECT_FALSE(client.is_locked("a"));
}

// The write side of a read-write lock: a local writer (a thread, then a
// coroutine's owner) is handed the write side by the release, one hold
// later with the next write token (fence + 2); the readers waiting meanwhile
// still wait, and get in once the last write is released.
TEST(Handoff, ALocalWriterIsHandedTheWriteSide) {
  Options options = fresh_options();
  options.poll_interval = 30s;  // only a local release can end the wait
  DatabaseDistributedLock client(options);
  // Two handoffs in one chain, with waits and checks between them: on a
  // loaded machine or through a proxy those take longer than a chain's
  // 50 ms, and the second release would end the chain instead.
  details::EngineAccess::of(client).set_handoff_chain_for_tests(60s);
  auto write = client.get_read_write_lock("hw").write_lock();
  write.lock();
  const std::uint64_t first = write.fencing_token();
  std::promise<std::uint64_t> waiter_token;
  std::promise<void> waiter_may_unlock;
  std::thread waiter([&] {
    auto mine = client.get_read_write_lock("hw").write_lock();
    mine.lock();
    waiter_token.set_value(mine.fencing_token());
    waiter_may_unlock.get_future().wait();
    mine.unlock();
  });
  ASSERT_TRUE(wait_until([&] { return details::EngineAccess::of(client).waiters().parked() == 1; }, 10s));
  const auto before = handoffs(client);
  write.unlock();
  auto token = waiter_token.get_future();
  ASSERT_EQ(token.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(handoffs(client), before + 1) << "the release freed the write side instead of handing it over";
  EXPECT_EQ(token.get(), first + 2) << "a handoff is a new write with the next write token";
  // An asynchronous writer is next: handed the write side by the thread's
  // release, with the token after that.
  const Owner owner = Owner::create();
  auto theirs = client.get_read_write_lock("hw", owner).write_lock();
  auto pending = async_lock(theirs, boost::asio::use_future);
  ASSERT_TRUE(wait_until([&] { return details::EngineAccess::of(client).waiters().parked() == 1; }, 10s));
  // A reader waits too; the handoff passes it by (the write side is never
  // free in between), and it reads once the last write is released.
  std::promise<void> read;
  std::thread reader([&] {
    auto shared = client.get_read_write_lock("hw").read_lock();
    shared.lock();
    read.set_value();
    shared.unlock();
  });
  ASSERT_TRUE(wait_until([&] { return details::EngineAccess::of(client).waiters().parked() >= 1 &&
                                      details::EngineAccess::of(client).waiters().names().size() == 2; },
                         10s));
  waiter_may_unlock.set_value();
  waiter.join();
  ASSERT_EQ(pending.wait_for(10s), std::future_status::ready);
  pending.get();
  EXPECT_EQ(handoffs(client), before + 2);
  EXPECT_EQ(theirs.fencing_token(), first + 4);
  auto reading = read.get_future();
  EXPECT_EQ(reading.wait_for(0s), std::future_status::timeout) << "a reader got in while the write was handed on";
  async_unlock(theirs, boost::asio::use_future).get();
  EXPECT_EQ(reading.wait_for(10s), std::future_status::ready);
  reader.join();
  EXPECT_FALSE(client.get_read_write_lock("hw").write_lock().is_locked());
}

// A writer that took a read under its write (a downgrade) and then releases
// the write must not hand the write side on while its read is live: the
// waiting writer gets it only once the read ends.
TEST(Handoff, AWriteWithItsOwnersReadUnderItIsNotHandedOver) {
  Options options = fresh_options();
  options.poll_interval = 30s;
  DatabaseDistributedLock client(options);
  const ReadWriteLock rw = client.get_read_write_lock("hd");
  auto write = rw.write_lock();
  auto read = rw.read_lock();
  write.lock();
  read.lock();  // a downgrade: the same owner reads under its write
  std::promise<void> got;
  std::thread waiter([&] {
    auto mine = client.get_read_write_lock("hd").write_lock();
    mine.lock();
    got.set_value();
    mine.unlock();
  });
  ASSERT_TRUE(wait_until([&] { return details::EngineAccess::of(client).waiters().parked() == 1; }, 10s));
  const auto before = handoffs(client);
  write.unlock();
  auto writer = got.get_future();
  // The write side is free now, but a read is live: the writer must wait.
  EXPECT_EQ(writer.wait_for(300ms), std::future_status::timeout) << "a write was granted under a live read";
  EXPECT_EQ(handoffs(client), before);
  read.unlock();
  EXPECT_EQ(writer.wait_for(10s), std::future_status::ready);
  waiter.join();
}

// The releasing hold was force-unlocked (and so lost) while a local waiter
// waited: the handoff statement matches nothing; the loss is reported once
// and the waiter, woken by the failed handoff, takes the free row itself.
TEST(Handoff, AHoldLostBeforeItsReleaseIsNotHandedOverAndTheWaiterIsWoken) {
  Options options = fresh_options();
  options.poll_interval = 30s;  // nothing else wakes the waiter in time
  options.watchdog_timeout = 30s;
  std::atomic<int> lost{0};
  options.on_lock_lost = [&](std::string_view, std::uint64_t) { ++lost; };
  DatabaseDistributedLock client(options);
  DatabaseDistributedLock operator_client(same_table(options));
  client.lock("e");
  const std::uint64_t first = client.get_lock("e").fencing_token();
  Waiter waiter(client, "e", Owner::create(), 60s);
  wait_for_waiter(client, "e");
  ASSERT_TRUE(operator_client.force_unlock("e"));
  client.unlock("e");  // the handoff statement finds the hold gone
  const auto acquired = waiter.outcome(10s);
  ASSERT_TRUE(acquired.has_value()) << "the waiter was not woken by the failed handoff";
  EXPECT_TRUE(*acquired);
  EXPECT_TRUE(wait_until([&] { return lost.load() == 1; }, 10s)) << "the lost hold was not reported";
  EXPECT_EQ(handoffs(client), 0u);
  EXPECT_GT(row_fence(options, "e"), first);
}

// A blocking lock() makes its first attempt before it subscribes to wakes,
// so an uncontended lock never touches the waiter registry. A release that
// lands between that refused attempt and the subscription finds nobody to
// wake or hand the hold to; the waiter must see that a wake went by and
// try again at once, not sleep until the holder's lease would have ended.
TEST(Handoff, AReleaseBeforeTheWaiterSubscribesIsNotMissed) {
  Options options = fresh_options();
  options.poll_interval = 30s;     // nothing else wakes the waiter in time
  options.watchdog_timeout = 30s;  // the refused attempt waits for the holder's lease: 30 s
  DatabaseDistributedLock client(options);
  auto& core = details::EngineAccess::of(client);
  client.lock("gap");
  std::promise<void> in_gap;
  std::promise<void> released;
  std::shared_future<void> released_seen = released.get_future().share();
  int hooked = 0;
  core.refused_before_subscribing = [&] {
    if (hooked++ != 0) return;
    in_gap.set_value();
    released_seen.wait();
  };
  std::promise<std::pair<bool, Clock::duration>> outcome;
  std::thread waiter([&] {
    const auto start = Clock::now();
    Lock lock = client.get_lock("gap", Owner::create());
    const bool got = lock.try_lock_for(10s);
    outcome.set_value({got, Clock::now() - start});
    if (got) lock.unlock();
  });
  auto outcome_seen = outcome.get_future();
  ASSERT_EQ(in_gap.get_future().wait_for(10s), std::future_status::ready);
  client.unlock("gap");  // nobody subscribed: nothing to wake, nothing to hand over
  released.set_value();
  ASSERT_EQ(outcome_seen.wait_for(20s), std::future_status::ready);
  waiter.join();
  const auto [got, took] = outcome_seen.get();
  EXPECT_TRUE(got) << "the waiter slept through the release";
  EXPECT_LT(took, 5s);
  EXPECT_EQ(hooked, 1);
  EXPECT_EQ(handoffs(client), 0u);
  core.refused_before_subscribing = nullptr;
}

// A waiter refused because another owner of its client holds the name
// asks no SQL until that hold ends. When an operator in another client
// clears the hold behind the holder's back, the poller sees the row free
// and the waiter asks the database at once, rather than waiting for the
// watchdog (a third of the lease) to find the hold lost.
TEST(Handoff, ALocalWaiterGetsARowClearedBehindTheLocalHoldersBack) {
  Options options = fresh_options();
  options.watchdog_timeout = 30s;  // the watchdog would find the loss after 10 s
  options.poll_interval = 200ms;
  DatabaseDistributedLock client(options);
  DatabaseDistributedLock operator_client(same_table(options));
  client.lock("f");
  Waiter waiter(client, "f", Owner::create(), 60s);
  wait_for_waiter(client, "f");
  const auto t0 = Clock::now();
  ASSERT_TRUE(operator_client.force_unlock("f"));
  const auto acquired = waiter.outcome(30s);
  ASSERT_TRUE(acquired.has_value());
  EXPECT_TRUE(*acquired);
  EXPECT_LT(waiter.acquired_at() - t0, 5s) << "the waiter trusted the lost local hold until the watchdog found it lost";
  client.unlock("f");  // finds its hold lost
}

// A chain of handoffs ends 50 ms after its first handoff (kHandoffChain):
// the release that ends it frees the row even with a local waiter, and
// this client's own takes of the name hold back 5 ms (kYieldAfterChain) so
// that a waiter in another client, rung by that release, gets in first.
TEST(Handoff, AChainEndsAfterItsBoundAndTheClientHoldsBackItsOwnTakes) {
  Options options = fresh_options();
  options.poll_interval = 30s;  // only the release ends the waits
  options.watchdog_timeout = 30s;
  DatabaseDistributedLock client(options);
  const Owner a = Owner::create();
  const Owner b = Owner::create();
  auto a_lock = client.get_lock("c", a);
  auto b_lock = client.get_lock("c", b);
  a_lock.lock();
  {
    Waiter b_waits(client, "c", b, 20s, /*keep=*/true);
    wait_for_waiter(client, "c");
    a_lock.unlock();  // handed to b: the chain begins
    const auto got = b_waits.outcome(10s);
    ASSERT_TRUE(got.has_value());
    ASSERT_TRUE(*got);
  }
  ASSERT_EQ(handoffs(client), 1u);
  ASSERT_TRUE(b_lock.is_held_by_current_thread());
  Waiter a_waits(client, "c", a, 20s);
  wait_for_waiter(client, "c");
  std::this_thread::sleep_for(60ms);  // past the chain's 50 ms
  const auto t0 = Clock::now();
  b_lock.unlock();  // ends the chain: frees the row, a takes it itself
  const auto got = a_waits.outcome(10s);
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(*got);
  EXPECT_EQ(handoffs(client), 1u) << "the chain went on past its bound (a handed hold forgot when its chain began)";
  EXPECT_GE(a_waits.acquired_at() - t0, 5ms) << "the client took the name back at once after the chain ended";
}

// The same bound and hold-back for the write side of a read-write lock.
TEST(Handoff, AWriteChainEndsAfterItsBoundAndTheClientHoldsBackItsOwnWriters) {
  Options options = fresh_options();
  options.poll_interval = 30s;
  options.watchdog_timeout = 30s;
  DatabaseDistributedLock client(options);
  const Owner a = Owner::create();
  const Owner b = Owner::create();
  auto a_write = client.get_read_write_lock("cw", a).write_lock();
  auto b_write = client.get_read_write_lock("cw", b).write_lock();
  const auto parked = [&](std::size_t n) {
    return wait_until([&] { return details::EngineAccess::of(client).waiters().parked() == n; }, 10s);
  };
  a_write.lock();
  {
    Waiter b_waits(b_write, 20s, /*keep=*/true);
    ASSERT_TRUE(parked(1));
    a_write.unlock();  // handed to b: the chain begins
    const auto got = b_waits.outcome(10s);
    ASSERT_TRUE(got.has_value());
    ASSERT_TRUE(*got);
  }
  ASSERT_EQ(handoffs(client), 1u);
  ASSERT_TRUE(b_write.is_held_by_current_thread());
  Waiter a_waits(a_write, 20s);
  ASSERT_TRUE(parked(1));
  std::this_thread::sleep_for(60ms);  // past the chain's 50 ms
  const auto t0 = Clock::now();
  b_write.unlock();  // ends the chain: frees the write side, a takes it itself
  const auto got = a_waits.outcome(10s);
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(*got);
  EXPECT_EQ(handoffs(client), 1u) << "the write chain went on past its bound";
  EXPECT_GE(a_waits.acquired_at() - t0, 5ms) << "the client took the write side back at once after the chain ended";
}

// Local threads hammer one name (each release has a waiting thread to hand
// to); a client of its own waits for the name over and over meanwhile. A
// chain of handoffs with no end would keep it out for good; bounded chains
// let it in within a fraction of a second each time.
TEST(Handoff, AChainOfHandoffsDoesNotKeepAnotherClientOut) {
  Options options = fresh_options();
  options.watchdog_timeout = 30s;
  DatabaseDistributedLock hot(options);
  DatabaseDistributedLock other(same_table(options));
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads = looping_on(hot, "busy", 4, stop);
  ASSERT_TRUE(wait_until([&] { return handoffs(hot) > 20; }, 20s)) << "no handoffs between the local threads";
  std::vector<double> waits_ms;
  for (int i = 0; i < 10; ++i) {
    const auto t0 = Clock::now();
    const bool got = other.try_lock("busy", 20s);
    waits_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    ASSERT_TRUE(got) << "another client waited 20 s for a lock that local handoffs kept busy";
    other.unlock("busy");
    std::this_thread::sleep_for(10ms);
  }
  stop = true;
  for (auto& t : threads) t.join();
  const double longest = *std::max_element(waits_ms.begin(), waits_ms.end());
  // With the bell the bound is about a chain (50 ms) and a take. By the
  // poll alone (fast_wakeup off), a poll that finds the name held by
  // another hold than the poll before (the waiter lost a race) marks the
  // row: the chain ends at its next release, and the free row waits for the
  // marked waiter's next poll (the holder's threads are refused while the
  // mark is live). A few poll intervals.
  const double poll_ms = std::chrono::duration<double, std::milli>(options.poll_interval).count();
  EXPECT_LT(longest, test::fast_wakeup_enabled() ? 2000.0 : 5 * poll_ms)
      << "waits: " << ::testing::PrintToString(waits_ms);
  EXPECT_GT(handoffs(hot), 20u);
}

// One client waits for a name by a lock and by a multi-lock at once, by
// the poll alone, while another client's threads hand the name on among
// themselves with no bound on the chain. The multi-lock waiting alone sets
// no intent on the row (a set must not keep a name from anyone); once the
// lock waits too, the poll sets the client's intent, the chain ends at its
// next release and the lock gets in; the multi-lock gets in once the
// threads stop, and no intent is left on the row.
TEST(Handoff, ALockAndAMultiLockOfOneClientOnOneNameGetInAndLeaveNoIntent) {
  Options options = fresh_options();
  options.watchdog_timeout = 30s;
  DatabaseDistributedLock hot(options);
  details::EngineAccess::of(hot).set_handoff_chain_for_tests(600s);
  Options by_poll = same_table(options);
  by_poll.fast_wakeup = false;
  DatabaseDistributedLock other(by_poll);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads = looping_on(hot, "mixed", 8, stop);
  ASSERT_TRUE(wait_until([&] { return handoffs(hot) > 20; }, 20s)) << "no handoffs between the local threads";
  const auto live_intent = [&] {
    return query_scalar("SELECT COUNT(*) FROM `" + options.table +
                        "` WHERE kind = 1 AND lock_name = 'mixed' AND intent_id <> 0 AND intent_expire > NOW(6)") != "0";
  };
  // A bounded wait, so a set that never gets in fails the test, not hangs it.
  std::promise<bool> set_in;
  std::thread set_waiter([&] {
    MultiLock set = other.get_multi_lock({"mixed", "mixed-other"});
    const bool in = set.try_lock_for(60s);
    set_in.set_value(in);
    if (in) set.unlock();
  });
  auto set_done = set_in.get_future();
  const details::NameKeyView mixed{details::Kind::kLock, "mixed"};
  EXPECT_TRUE(wait_until([&] { return details::EngineAccess::of(other).waiters().has(mixed); }, 10s));
  // Five polls of the set's alone: no intent.
  EXPECT_FALSE(wait_until(live_intent, 5 * by_poll.poll_interval)) << "a multi-lock's wait set an intent";
  const bool got = other.try_lock("mixed", 20s);
  EXPECT_TRUE(got) << "the lock waited 20 s beside the multi-lock: no intent ended the chain";
  if (got) other.unlock("mixed");
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_TRUE(set_done.get()) << "the multi-lock never got in";
  set_waiter.join();
  EXPECT_FALSE(live_intent()) << "an intent stayed on the row";
}

// Threads of one client taking turns on a name (handoffs off: release, then
// take) never mark its row for a ring: a waiter refused by a hold of its own
// client is woken by that hold's release, and tells it from the row's hold
// id alone, even before the holder has recorded it. A mark there made every
// such release ring and hold this client's takes back 5 ms (the hot lock
// benchmark's release-then-take fell from 1,746 to 270 cycles/s).
TEST(Handoff, ThreadsOfOneClientNeverMarkTheRowForARing) {
  Options o = fresh_options();
  o.fast_wakeup = true;
  DatabaseDistributedLock client(o);
  details::EngineAccess::of(client).enable_handoffs(false);
  client.lock("turns");
  client.unlock("turns");
  std::atomic<bool> stop{false};
  std::atomic<long> cycles{0};
  std::vector<std::thread> threads = looping_on(client, "turns", 6, stop, &cycles);
  int marked = 0;
  const auto end = Clock::now() + 2s;  // the observed window
  while (Clock::now() < end) {
    if (query_scalar("SELECT waiters FROM `" + o.table + "` WHERE kind = 1 AND lock_name = 'turns'") == "1") ++marked;
  }
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_GT(cycles.load(), 0);
  EXPECT_EQ(marked, 0) << "the row was marked in " << marked << " samples";
}

// Threads of one client passing a name around, with its waiters left to
// the poll (fast wake-up off): the poll sees another hold at every look,
// but one of this client's, so it sets no intent on the row (the releases
// here wake those waiters; an intent would only keep other clients out).
TEST(Handoff, ThreadsOfOneClientNeverSetAnIntentOnTheirOwnHolds) {
  Options o = fresh_options();
  o.fast_wakeup = false;
  DatabaseDistributedLock client(o);
  std::atomic<bool> stop{false};
  std::atomic<long> cycles{0};
  std::vector<std::thread> threads = looping_on(client, "own", 6, stop, &cycles);
  int intended = 0;
  const auto end = Clock::now() + 10 * o.poll_interval;  // the observed window
  while (Clock::now() < end) {
    if (query_scalar("SELECT COUNT(*) FROM `" + o.table +
                     "` WHERE kind = 1 AND lock_name = 'own' AND intent_id <> 0 AND intent_expire > NOW(6)") != "0")
      ++intended;
  }
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_GT(cycles.load(), 0);
  EXPECT_EQ(intended, 0) << "the row carried an intent in " << intended << " samples";
}

}  // namespace
}  // namespace dlock
