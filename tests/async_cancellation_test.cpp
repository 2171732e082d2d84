// Per-operation cancellation in <dlock/asio.hpp>: a signal bound to the
// handler's cancellation slot ends a pending wait with Cancelled and leaves
// nothing held; a signal emitted after the operation ended (also after the
// client is gone) does nothing; signals racing with completions lose no
// hold and no handler; a coroutine racing a lock against a timer holds
// nothing when the timer wins. The same for a MultiLock's, an observer's
// and a candidate's waits.
//
// Asio has cancellation slots from Boost 1.77 on. This file is built against
// the Boost 1.81 headers scripts/install-deps.sh unpacks (tests/CMakeLists.txt),
// linked to a shared libdlock, and uses the public API alone.
#include <dlock/asio.hpp>
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/version.hpp>

#include <atomic>
#include <cstdlib>
#include <future>
#include <optional>
#include <string>
#include <thread>

#include "holds_error.hpp"

static_assert(BOOST_VERSION >= 107700, "this test needs Asio's cancellation slots (Boost 1.77 or later)");

namespace dlock {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using test::holds_error;

// The private test database (scripts/db.sh), one table per test.
Options options_for(const std::string& test) {
  const char* url = std::getenv("DLOCK_TEST_URL");
  Options o = Options::from_url(url != nullptr ? url : "mysql://dlock:dlock-test@127.0.0.1:33306/dlock_test");
  o.table = "cancellation_" + test;
  o.watchdog_timeout = 1500ms;
  o.poll_interval = 200ms;
  o.io_timeout = 5s;
  return o;
}

TEST(Cancellation, ASignalEndsAPendingLockWithCancelledAndLeavesNothingHeld) {
  const Options o = options_for("pending");
  DatabaseDistributedLock client(o);
  DatabaseDistributedLock other(o);
  other.lock("name");
  asio::io_context io;
  asio::cancellation_signal signal;
  Lock lock = client.get_lock("name", Owner::create());
  std::optional<std::exception_ptr> result;
  async_lock(lock, asio::bind_cancellation_slot(signal.slot(), asio::bind_executor(io, [&](std::exception_ptr e) {
                                                  result = e;
                                                })));
  asio::steady_timer timer(io, 300ms);
  timer.async_wait([&](boost::system::error_code) { signal.emit(asio::cancellation_type::terminal); });
  io.run_for(10s);
  ASSERT_TRUE(result.has_value()) << "the cancelled wait never completed";
  EXPECT_TRUE(holds_error<Cancelled>(*result));
  EXPECT_EQ(lock.hold_count(), 0);
  other.unlock("name");
  EXPECT_TRUE(other.try_lock("name")) << "the cancelled wait took the lock afterwards";
  other.unlock("name");
}

TEST(Cancellation, ASignalEndsAPendingPermitWaitAndTheSemaphoreKeepsItsPermits) {
  const Options o = options_for("permit");
  DatabaseDistributedLock client(o);
  DatabaseDistributedLock other(o);
  Permit held = other.get_semaphore("sem", 1).acquire();
  asio::io_context io;
  asio::cancellation_signal signal;
  std::optional<std::exception_ptr> result;
  bool got_permit = false;
  async_acquire(client.get_semaphore("sem", 1),
                asio::bind_cancellation_slot(signal.slot(), asio::bind_executor(io, [&](std::exception_ptr e, Permit p) {
                                               result = e;
                                               got_permit = p.held();
                                             })));
  asio::steady_timer timer(io, 300ms);
  timer.async_wait([&](boost::system::error_code) { signal.emit(asio::cancellation_type::terminal); });
  io.run_for(10s);
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(holds_error<Cancelled>(*result));
  EXPECT_FALSE(got_permit);
  held.release();
  EXPECT_EQ(other.get_semaphore("sem", 1).available_permits(), 1u);
}

// The other waits a slot can end: a MultiLock's (it holds none of its
// names after), an observer's, and a candidate's (it leads nothing after).
TEST(Cancellation, ASignalEndsPendingSetObserverAndCampaignWaits) {
  const Options o = options_for("watched");
  DatabaseDistributedLock client(o);
  DatabaseDistributedLock other(o);
  other.lock("b");
  Election led = other.get_election("e", Owner::create());
  (void)led.campaign("other");
  asio::io_context io;
  asio::cancellation_signal set_signal, observe_signal, campaign_signal;
  MultiLock set = client.get_multi_lock({"a", "b"}, Owner::create());
  Election election = client.get_election("e", Owner::create());
  std::optional<std::exception_ptr> set_result, observe_result, campaign_result;
  async_lock(set, asio::bind_cancellation_slot(set_signal.slot(), asio::bind_executor(io, [&](std::exception_ptr e) {
                                                 set_result = e;
                                               })));
  async_observe(election, election.leader().revision,
                asio::bind_cancellation_slot(observe_signal.slot(),
                                             asio::bind_executor(io, [&](std::exception_ptr e, LeaderView) {
                                               observe_result = e;
                                             })));
  async_campaign(election, "mine",
                 asio::bind_cancellation_slot(campaign_signal.slot(),
                                              asio::bind_executor(io, [&](std::exception_ptr e, std::uint64_t) {
                                                campaign_result = e;
                                              })));
  asio::steady_timer timer(io, 300ms);
  timer.async_wait([&](boost::system::error_code) {
    for (auto* signal : {&set_signal, &observe_signal, &campaign_signal}) signal->emit(asio::cancellation_type::terminal);
  });
  io.run_for(10s);
  for (const auto* result : {&set_result, &observe_result, &campaign_result}) {
    ASSERT_TRUE(result->has_value()) << "a cancelled wait never completed";
    EXPECT_TRUE(holds_error<Cancelled>(**result));
  }
  EXPECT_EQ(set.fencing_token("a"), 0u) << "the set holds a name after its wait was cancelled";
  EXPECT_FALSE(client.is_locked("a")) << "the set held part of itself after its wait was cancelled";
  EXPECT_FALSE(election.is_leader());
  other.unlock("b");
  led.resign();
  EXPECT_TRUE(other.try_lock("a")) << "the cancelled set took a name afterwards";
  other.unlock("a");
}

// The slot is cleared when the handler runs: a signal emitted then, or
// after the client is destroyed, reaches nothing (ASan/TSan builds check
// that no stale handler naming the client is left in the slot).
TEST(Cancellation, ASignalAfterTheOperationEndedDoesNothing) {
  const Options o = options_for("after");
  DatabaseDistributedLock other(o);
  asio::io_context io;
  asio::cancellation_signal signal;
  {
    std::optional<DatabaseDistributedLock> client(std::in_place, o);
    {
      Lock lock = client->get_lock("name", Owner::create());
      std::optional<std::exception_ptr> result;
      async_lock(lock, asio::bind_cancellation_slot(signal.slot(), asio::bind_executor(io, [&](std::exception_ptr e) {
                                                      result = e;
                                                      signal.emit(asio::cancellation_type::terminal);
                                                    })));
      io.run_for(10s);
      ASSERT_TRUE(result.has_value());
      EXPECT_FALSE(*result);
      EXPECT_EQ(lock.hold_count(), 1) << "a signal after the completion took the hold away";
      EXPECT_FALSE(other.try_lock("name"));
      lock.unlock();
    }
    client.reset();
  }
  signal.emit(asio::cancellation_type::terminal);

  // A wait the client's destruction ends: the signal is emitted after the
  // client is gone and before the handler has run.
  io.restart();
  other.lock("busy");
  std::optional<std::exception_ptr> result;
  {
    DatabaseDistributedLock client(o);
    async_lock(client.get_lock("busy", Owner::create()),
               asio::bind_cancellation_slot(signal.slot(),
                                            asio::bind_executor(io, [&](std::exception_ptr e) { result = e; })));
  }
  signal.emit(asio::cancellation_type::terminal);
  io.run_for(10s);
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(holds_error<Cancelled>(*result));
  other.unlock("busy");
}

// Signals emitted right after each start, while another client keeps the
// name busy: each operation completes exactly once, with the hold (the
// cancellation came too late), refused, or with Cancelled, and nothing is
// held afterwards that nobody owns.
TEST(Cancellation, SignalsRacingWithCompletionsLoseNoHoldAndNoHandler) {
  const Options o = options_for("race");
  DatabaseDistributedLock client(o);
  DatabaseDistributedLock other(o);
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    Lock theirs = other.get_lock("name", Owner::create());
    while (!stop.load()) {
      if (theirs.try_lock_for(20ms)) {
        std::this_thread::sleep_for(1ms);
        theirs.unlock();
      }
    }
  });
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  Lock lock = client.get_lock("name", Owner::create());
  constexpr int kOperations = 200;
  int calls = 0;  // these three on the io thread only
  int acquired = 0;
  int cancelled = 0;
  for (int i = 0; i < kOperations; ++i) {
    auto signal = std::make_shared<asio::cancellation_signal>();
    std::promise<void> completed;
    asio::post(io, [&, signal] {
      async_try_lock(lock, i % 2 == 0 ? 0ms : 50ms,
                     asio::bind_cancellation_slot(signal->slot(),
                                                  asio::bind_executor(io, [&](std::exception_ptr e, bool got) {
                                                    ++calls;
                                                    if (got) {
                                                      ++acquired;
                                                      lock.unlock();
                                                    } else if (holds_error<Cancelled>(e)) {
                                                      ++cancelled;
                                                    } else if (e) {
                                                      ADD_FAILURE() << "an error other than Cancelled";
                                                    }
                                                    completed.set_value();
                                                  })));
      // On the handler's executor, as Asio asks of a slot's signal.
      asio::post(io, [signal] { signal->emit(asio::cancellation_type::terminal); });
    });
    ASSERT_EQ(completed.get_future().wait_for(10s), std::future_status::ready) << "operation " << i << " never ended";
  }
  stop = true;
  busy.join();
  work.reset();
  runner.join();
  EXPECT_EQ(lock.hold_count(), 0);
  EXPECT_TRUE(other.try_lock("name")) << "a cancelled attempt left the name held";
  other.unlock("name");
  EXPECT_EQ(calls, kOperations) << "a handler ran twice";
  EXPECT_GT(cancelled, 0) << "no signal came in time: the test proves nothing";
}

// co_await (lock || timer): when the timer wins, the lock operation is
// cancelled and the owner holds nothing, and may lock again at once.
TEST(Cancellation, ACoroutineThatRacesALockAgainstATimerHoldsNothingWhenTheTimerWins) {
  using namespace asio::experimental::awaitable_operators;
  const Options o = options_for("coroutine");
  DatabaseDistributedLock client(o);
  DatabaseDistributedLock other(o);
  other.lock("name");
  asio::io_context io;
  Lock lock = client.get_lock("name", Owner::create());
  std::optional<std::size_t> winner;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        asio::steady_timer timer(co_await asio::this_coro::executor, 300ms);
        const auto r = co_await (async_lock(lock, asio::use_awaitable) || timer.async_wait(asio::use_awaitable));
        winner = r.index();
      },
      asio::detached);
  io.run_for(10s);
  ASSERT_TRUE(winner.has_value()) << "the race never ended";
  EXPECT_EQ(*winner, 1u) << "the lock won while another client held it";
  EXPECT_EQ(lock.hold_count(), 0);
  other.unlock("name");
  EXPECT_TRUE(lock.try_lock()) << "the owner could not lock again after its cancelled wait";
  lock.unlock();
}

}  // namespace
}  // namespace dlock
