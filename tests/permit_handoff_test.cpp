// Direct handoff of a semaphore permit: a release with a local waiter hands
// its permit straight to it in one statement (same slot and id, the new
// holder's bound, lease mode and lease, fence + 1, the slot never free),
// for synchronous and asynchronous waiters; never to a waiter whose bound
// the slot might not fit; a permit found lost at the handoff is reported
// and the waiter still gets a slot the usual way; chains end after their
// bound like the mutex's.
#include <dlock/asio.hpp>
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <boost/asio/use_future.hpp>

#include <atomic>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "background.hpp"
#include "api/tools.hpp"
#include "test_env.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::fresh_options;
using test::query_scalar;
using test::wait_until;

std::uint64_t handoffs(DatabaseDistributedLock& client) { return details::EngineAccess::of(client).handoffs(); }

// Waits until `n` waiters of `client` are parked (threads waiting for a
// handoff park like continuations): the handoff needs a waiter that waits,
// not one between attempts.
void wait_for_parked(DatabaseDistributedLock& client, std::size_t n) {
  ASSERT_TRUE(wait_until([&] { return details::EngineAccess::of(client).waiters().parked() == n; }, 10s));
}

// A thread that waits up to `wait` for a permit of `semaphore` (fixed
// `lease` if given) and keeps it until released through permit().
class PermitWaiter : public test::InBackground<std::optional<Permit>> {
 public:
  PermitWaiter(Semaphore semaphore, Clock::duration wait, std::optional<Millis> lease = std::nullopt)
      : InBackground([semaphore, wait, lease]() mutable {
          const auto ms = std::chrono::duration_cast<Millis>(wait);
          return lease ? semaphore.try_acquire(ms, *lease) : semaphore.try_acquire(ms);
        }) {}

  // Valid once ended(): the permit (empty if the wait timed out) and when.
  std::optional<Permit>& permit() { return value(); }
  Clock::time_point acquired_at() const { return ended_at(); }
};

TEST(PermitHandoff, ALocalWaiterIsHandedThePermitInItsSlotAndLeaseMode) {
  Options options = fresh_options();
  options.poll_interval = 30s;  // only a local release can end the waits
  options.watchdog_timeout = 30s;
  DatabaseDistributedLock client(options);
  // Two handoffs in one chain, with checks between them that can take
  // longer than a chain's 50 ms on a loaded machine or through a proxy.
  details::EngineAccess::of(client).set_handoff_chain_for_tests(60s);
  Semaphore semaphore = client.get_semaphore("ph", 1);
  Permit first = semaphore.acquire();
  const std::uint64_t token = first.fencing_token();
  ASSERT_NE(token, 0u);
  {
    PermitWaiter waiter(semaphore, 20s, 4s);
    wait_for_parked(client, 1);
    first.release();
    ASSERT_TRUE(waiter.ended(10s));
    ASSERT_TRUE(waiter.permit().has_value()) << "the waiter was not given a permit";
    EXPECT_EQ(handoffs(client), 1u) << "the release freed the slot instead of handing the permit over";
    Permit& handed = *waiter.permit();
    EXPECT_EQ(handed.slot(), 0u);
    EXPECT_EQ(handed.fencing_token(), token + 1) << "a handoff is a new take of the slot";
    const std::string table = options.table;
    EXPECT_EQ(query_scalar("SELECT watchdog FROM " + table + " WHERE kind = 2 AND lock_name = 'ph'"), "0")
        << "the waiter asked for a fixed lease; the handed permit kept the watchdog mode";
    // The row carries the 4 s lease and the margin every written lease has
    // (sql/hold_rows.hpp, written_lease_us), far from the watchdog's 30 s.
    EXPECT_LE(std::stoll(query_scalar("SELECT TIMESTAMPDIFF(MICROSECOND, NOW(6), expire_time) FROM " + table +
                                      " WHERE kind = 2 AND lock_name = 'ph'")),
              details::written_lease_us(4'000'000))
        << "the handed permit kept the watchdog's 30 s lease";
    EXPECT_EQ(semaphore.available_permits(), 0u);
    // Handed on once more, to an asynchronous waiter, then released.
    auto pending = async_acquire(semaphore, boost::asio::use_future);
    wait_for_parked(client, 1);
    handed.release();
    ASSERT_EQ(pending.wait_for(10s), std::future_status::ready);
    Permit last = pending.get();
    EXPECT_EQ(handoffs(client), 2u);
    EXPECT_EQ(last.fencing_token(), token + 2);
    EXPECT_EQ(query_scalar("SELECT watchdog FROM " + table + " WHERE kind = 2 AND lock_name = 'ph'"), "1");
    last.release();
  }
  EXPECT_EQ(semaphore.available_permits(), 1u);
}

// A permit's slot is below the bound it was taken under, not necessarily
// below a waiter's lower bound: such a waiter is never handed it.
TEST(PermitHandoff, AWaiterUnderALowerBoundIsNotHandedAPermitAboveIt) {
  Options options = fresh_options();
  options.poll_interval = 30s;
  options.watchdog_timeout = 30s;
  DatabaseDistributedLock client(options);
  Semaphore two = client.get_semaphore("pb", 2);
  Permit slot0 = two.acquire();
  Permit slot1 = two.acquire();
  ASSERT_EQ(slot0.slot(), 0u);
  ASSERT_EQ(slot1.slot(), 1u);
  PermitWaiter waiter(client.get_semaphore("pb", 1), 20s);
  wait_for_parked(client, 1);
  slot1.release();
  EXPECT_FALSE(waiter.ended(500ms)) << "a waiter under a bound of 1 got a permit while slot 0 was held";
  EXPECT_EQ(handoffs(client), 0u);
  slot0.release();
  ASSERT_TRUE(waiter.ended(10s));
  ASSERT_TRUE(waiter.permit().has_value());
  EXPECT_EQ(waiter.permit()->slot(), 0u);
  waiter.permit()->release();
}

TEST(PermitHandoff, APermitLostBeforeItsReleaseIsNotHandedOverAndTheWaiterIsWoken) {
  Options options = fresh_options();
  options.poll_interval = 30s;  // nothing else wakes the waiter in time
  options.watchdog_timeout = 30s;
  std::atomic<int> lost{0};
  options.on_lock_lost = [&](std::string_view, std::uint64_t) { ++lost; };
  DatabaseDistributedLock client(options);
  Semaphore semaphore = client.get_semaphore("pl", 1);
  Permit first = semaphore.acquire();
  const std::uint64_t token = first.fencing_token();
  PermitWaiter waiter(semaphore, 60s);
  wait_for_parked(client, 1);
  // Freed behind the holder's back (as `dlock force-unlock --semaphore` does).
  test::execute_sql("UPDATE " + options.table + " SET state = 0, expire_time = acquired_at WHERE kind = 2 AND"
                    " lock_name = 'pl'");
  first.release();  // the handoff statement finds the permit gone
  ASSERT_TRUE(waiter.ended(10s)) << "the waiter was not woken by the failed handoff";
  ASSERT_TRUE(waiter.permit().has_value());
  EXPECT_TRUE(wait_until([&] { return lost.load() == 1; }, 10s)) << "the lost permit was not reported";
  EXPECT_EQ(handoffs(client), 0u);
  EXPECT_GT(waiter.permit()->fencing_token(), token);
  waiter.permit()->release();
}

// As for the mutex: a chain of permit handoffs ends 50 ms after its first
// handoff; the release that ends it frees the slot even with a local
// waiter, and this client's own takes hold back 5 ms so that a waiter in
// another client gets in first.
TEST(PermitHandoff, AChainEndsAfterItsBoundAndTheClientHoldsBackItsOwnTakes) {
  Options options = fresh_options();
  options.poll_interval = 30s;
  options.watchdog_timeout = 30s;
  DatabaseDistributedLock client(options);
  Semaphore semaphore = client.get_semaphore("pc", 1);
  Permit first = semaphore.acquire();
  std::optional<Permit> second;
  {
    PermitWaiter waiter(semaphore, 20s);
    wait_for_parked(client, 1);
    first.release();  // handed over: the chain begins
    ASSERT_TRUE(waiter.ended(10s));
    ASSERT_TRUE(waiter.permit().has_value());
    second = std::move(waiter.permit());
  }
  ASSERT_EQ(handoffs(client), 1u);
  PermitWaiter waiter(semaphore, 20s);
  wait_for_parked(client, 1);
  std::this_thread::sleep_for(60ms);  // past the chain's 50 ms
  const auto t0 = Clock::now();
  second->release();  // ends the chain: frees the slot, the waiter takes it itself
  ASSERT_TRUE(waiter.ended(10s));
  ASSERT_TRUE(waiter.permit().has_value());
  EXPECT_EQ(handoffs(client), 1u) << "the chain went on past its bound (a handed permit forgot when its chain began)";
  EXPECT_GE(waiter.acquired_at() - t0, 5ms) << "the client took the slot back at once after the chain ended";
  waiter.permit()->release();
}

}  // namespace
}  // namespace dlock
