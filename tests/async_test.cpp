// The asynchronous API (<dlock/asio.hpp>) against the real database: each
// completion token (callback, use_future, use_awaitable, a strand-bound
// handler), owners shared between the synchronous and asynchronous calls,
// every error type through the handler, cancellation by owner and by the
// client's destruction, a coroutine woken by a release in another process,
// and pending waits that hold no thread.
#include <dlock/asio.hpp>
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "holds_error.hpp"
#include "test_env.hpp"
#include "thread_count.hpp"

namespace dlock {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using test::holds_error;
using test::ChildProcess;
using test::fresh_options;
using test::same_table;
using test::url_for;
using test::thread_count;
using test::wait_until;

TEST(Async, CallbackRunsOnALibraryThreadAfterTheInitiatingCallReturns) {
  DatabaseDistributedLock client(fresh_options());
  Lock lock = client.get_lock("cb", Owner::create());
  std::promise<std::pair<std::exception_ptr, std::thread::id>> done;
  std::atomic<bool> returned{false};
  std::atomic<bool> ran_before_return{false};
  async_lock(lock, [&](std::exception_ptr e) {
    if (!returned) ran_before_return = true;
    done.set_value({e, std::this_thread::get_id()});
  });
  returned = true;
  auto [error, thread] = done.get_future().get();
  EXPECT_FALSE(error);
  EXPECT_FALSE(ran_before_return) << "the handler ran inside the initiating call";
  EXPECT_NE(thread, std::this_thread::get_id());
  EXPECT_EQ(lock.hold_count(), 1);
  EXPECT_TRUE(client.is_locked("cb"));
  lock.unlock();
  EXPECT_FALSE(client.is_locked("cb"));
}

TEST(Async, HandlerWithAnExecutorRunsThereAndNeverInsideTheCall) {
  DatabaseDistributedLock client(fresh_options());
  asio::io_context io;
  Lock lock = client.get_lock("exec", Owner::create());
  bool done = false;
  std::thread::id ran_on;
  async_lock(lock, asio::bind_executor(io, [&](std::exception_ptr e) {
               EXPECT_FALSE(e);
               ran_on = std::this_thread::get_id();
               done = true;
             }));
  EXPECT_FALSE(done);
  io.run();  // returns only once the handler ran: the operation counts as work
  EXPECT_TRUE(done);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_EQ(lock.hold_count(), 1);
  lock.unlock();
}

TEST(Async, FutureTokenAndTryLockReturnTheirValues) {
  const Options o = fresh_options();
  DatabaseDistributedLock client(o);
  DatabaseDistributedLock other(same_table(o));
  Lock mine = client.get_lock("fut", Owner::create());
  async_lock(mine, asio::use_future).get();
  EXPECT_TRUE(async_try_lock(mine, 0ms, asio::use_future).get()) << "reentrant";
  EXPECT_EQ(mine.hold_count(), 2);
  Lock theirs = other.get_lock("fut", Owner::create());
  EXPECT_FALSE(async_try_lock(theirs, 0ms, asio::use_future).get());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(async_try_lock(theirs, 300ms, asio::use_future).get());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms) << "gave up before the deadline";
  async_unlock(mine, asio::use_future).get();
  async_unlock(mine, asio::use_future).get();
  EXPECT_TRUE(async_try_lock(theirs, 5s, 20s, asio::use_future).get());
  const auto ttl = theirs.remaining_ttl();
  ASSERT_TRUE(ttl.has_value());
  EXPECT_LE(*ttl, 20s) << "the fixed lease was used";
  EXPECT_GT(*ttl, 10s);
  async_unlock(theirs, asio::use_future).get();
}

TEST(Async, CoroutineLocksOnOneThreadAndUnlocksOnAnother) {
  DatabaseDistributedLock client(fresh_options());
  const Owner owner = Owner::create();
  Lock lock = client.get_lock("coro", owner);
  asio::thread_pool pool(2);
  std::thread::id locked_on;
  auto job = [&]() -> asio::awaitable<void> {
    co_await async_lock(lock, asio::use_awaitable);
    locked_on = std::this_thread::get_id();
  };
  asio::co_spawn(pool, job(), asio::use_future).get();
  EXPECT_NE(locked_on, std::this_thread::get_id());
  EXPECT_EQ(lock.hold_count(), 1);
  lock.unlock();  // this thread, the same owner
  EXPECT_FALSE(client.is_locked("coro"));
  EXPECT_THROW(lock.unlock(), NotHeldError);
  pool.join();  // see StrandBoundHandlerRunsOnTheStrand
}

TEST(Async, SyncAndAsyncOnOneOwnerShareItsHoldCount) {
  DatabaseDistributedLock client(fresh_options());
  Lock lock = client.get_lock("mixed", Owner::create());
  lock.lock();
  async_lock(lock, asio::use_future).get();
  EXPECT_EQ(lock.hold_count(), 2);
  const auto fence = lock.fencing_token();
  async_unlock(lock, asio::use_future).get();
  EXPECT_EQ(lock.hold_count(), 1);
  EXPECT_EQ(lock.fencing_token(), fence);
  lock.unlock();
  EXPECT_FALSE(client.is_locked("mixed"));
}

TEST(Async, ThreadHandleActsForTheInitiatingThread) {
  DatabaseDistributedLock client(fresh_options());
  Lock lock = client.get_lock("thread-handle");
  async_lock(lock, asio::use_future).get();
  EXPECT_TRUE(client.is_held_by_current_thread("thread-handle"));
  EXPECT_EQ(client.hold_count("thread-handle"), 1);
  async_unlock(lock, asio::use_future).get();
  EXPECT_FALSE(client.is_locked("thread-handle"));
}

TEST(Async, StrandBoundHandlerRunsOnTheStrand) {
  DatabaseDistributedLock client(fresh_options());
  asio::thread_pool pool(3);
  auto strand = asio::make_strand(pool);
  Lock lock = client.get_lock("strand", Owner::create());
  std::promise<bool> on_strand;
  async_lock(lock, asio::bind_executor(strand, [&](std::exception_ptr e) {
               EXPECT_FALSE(e);
               on_strand.set_value(strand.running_in_this_thread());
             }));
  EXPECT_TRUE(on_strand.get_future().get());
  std::promise<bool> unlocked_on_strand;
  async_unlock(lock, asio::bind_executor(strand, [&](std::exception_ptr e) {
                 EXPECT_FALSE(e);
                 unlocked_on_strand.set_value(strand.running_in_this_thread());
               }));
  EXPECT_TRUE(unlocked_on_strand.get_future().get());
  // The pool's destructor stops it without waiting for outstanding work;
  // join() waits until the library has let go of the handler's executor,
  // which it does right after dispatching the handler.
  pool.join();
}

TEST(Async, ErrorsArriveThroughTheHandler) {
  const Options o = fresh_options();
  DatabaseDistributedLock client(o);
  Lock lock = client.get_lock("errors", Owner::create());
  auto unlock_error = [&] {
    std::promise<std::exception_ptr> p;
    async_unlock(lock, [&](std::exception_ptr e) { p.set_value(e); });
    return p.get_future().get();
  };
  auto lock_error = [&](std::optional<Millis> lease) {
    std::promise<std::exception_ptr> p;
    if (lease) {
      async_lock(lock, *lease, [&](std::exception_ptr e) { p.set_value(e); });
    } else {
      async_lock(lock, [&](std::exception_ptr e) { p.set_value(e); });
    }
    return p.get_future().get();
  };
  EXPECT_TRUE(holds_error<NotHeldError>(unlock_error()));
  EXPECT_TRUE(holds_error<std::invalid_argument>(lock_error(0ms))) << "a bad lease, before any SQL";
  EXPECT_TRUE(holds_error<std::invalid_argument>(lock_error(Millis(366LL * 24 * 3600 * 1000))));
  EXPECT_FALSE(client.is_locked("errors"));

  // A lost hold: force-unlocked while the owner still owes an unlock.
  EXPECT_FALSE(lock_error(std::nullopt));
  DatabaseDistributedLock other(same_table(o));
  ASSERT_TRUE(other.force_unlock("errors"));
  EXPECT_TRUE(holds_error<LockLostError>(lock_error(std::nullopt)));
  EXPECT_FALSE(unlock_error()) << "the owed unlock returns normally";
  EXPECT_FALSE(lock_error(std::nullopt)) << "acquiring works again after the owed unlocks";
  EXPECT_FALSE(unlock_error());

  // The database failing: the table is gone.
  test::execute_sql("DROP TABLE `" + o.table + "`");
  const std::exception_ptr backend = lock_error(std::nullopt);
  ASSERT_TRUE(holds_error<BackendError>(backend));
  try {
    std::rethrow_exception(backend);
  } catch (const BackendError& e) {
    EXPECT_EQ(e.code(), 1146) << e.what();
  }
}

TEST(Async, ErrorsAreRethrownByAwaitableAndFuture) {
  DatabaseDistributedLock client(fresh_options());
  Lock lock = client.get_lock("rethrow", Owner::create());
  EXPECT_THROW(async_unlock(lock, asio::use_future).get(), NotHeldError);
  asio::io_context io;
  bool caught = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        try {
          co_await async_unlock(lock, asio::use_awaitable);
        } catch (const NotHeldError&) {
          caught = true;
        }
      },
      asio::detached);
  io.run();
  EXPECT_TRUE(caught);
}

TEST(Async, CancelOwnerEndsItsPendingWaitsOnly) {
  const Options o = fresh_options();
  DatabaseDistributedLock holder(o);
  holder.lock("cancel");
  DatabaseDistributedLock client(same_table(o));
  const Owner a = Owner::create();
  const Owner b = Owner::create();
  std::promise<std::exception_ptr> a_done;
  std::promise<std::exception_ptr> b_done;
  async_lock(client.get_lock("cancel", a), [&](std::exception_ptr e) { a_done.set_value(e); });
  auto b_future = b_done.get_future();
  async_lock(client.get_lock("cancel", b), [&](std::exception_ptr e) { b_done.set_value(e); });
  // Both parked (cancel also works before; this covers a parked wait).
  ASSERT_TRUE(test::wait_for_waiters(client, MetricKind::kLock, 2));
  client.cancel(a);
  auto a_future = a_done.get_future();
  ASSERT_EQ(a_future.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(holds_error<Cancelled>(a_future.get()));
  EXPECT_EQ(client.get_lock("cancel", a).hold_count(), 0) << "a cancelled operation holds nothing";
  EXPECT_EQ(b_future.wait_for(300ms), std::future_status::timeout) << "another owner's wait was cancelled";
  holder.unlock("cancel");
  ASSERT_EQ(b_future.wait_for(10s), std::future_status::ready);
  EXPECT_FALSE(b_future.get());
  Lock b_lock = client.get_lock("cancel", b);
  EXPECT_EQ(b_lock.hold_count(), 1);
  b_lock.unlock();
}

TEST(Async, DestroyingTheClientCancelsPendingWaits) {
  const Options o = fresh_options();
  DatabaseDistributedLock holder(o);
  holder.lock("shutdown");
  auto client = std::make_unique<DatabaseDistributedLock>(same_table(o));
  std::vector<std::future<bool>> waits;
  for (int i = 0; i < 5; ++i) {
    waits.push_back(async_try_lock(client->get_lock("shutdown", Owner::create()), 60s, asio::use_future));
  }
  ASSERT_TRUE(test::wait_for_waiters(*client, MetricKind::kLock, 5));
  const auto start = std::chrono::steady_clock::now();
  client.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  for (auto& w : waits) EXPECT_THROW(w.get(), Cancelled);
  EXPECT_TRUE(holder.is_held_by_current_thread("shutdown"));
  holder.unlock("shutdown");
}

TEST(Async, CoroutineWokenByAReleaseInAnotherProcess) {
  Options o = fresh_options();
  // With fast wake-up the release itself wakes the coroutine; without it,
  // a short poll does (this test runs both ways).
  o.poll_interval = test::fast_wakeup_enabled() ? 60s : 300ms;
  DatabaseDistributedLock client(o);
  ChildProcess holder(test::helper_path(), {url_for(o), "hold-for", "xproc-async", "1500"});
  ASSERT_TRUE(holder.wait_for_line("acquired", 20s).has_value());
  asio::io_context io;
  Lock lock = client.get_lock("xproc-async", Owner::create());
  std::chrono::steady_clock::time_point acquired_at;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await async_lock(lock, asio::use_awaitable);
        acquired_at = std::chrono::steady_clock::now();
      },
      asio::detached);
  std::thread runner([&] { io.run(); });
  const auto released = holder.wait_for_line("released", 20s);
  const auto released_at = std::chrono::steady_clock::now();
  runner.join();
  ASSERT_TRUE(released.has_value());
  EXPECT_EQ(lock.hold_count(), 1);
  EXPECT_LT(acquired_at - released_at, 5s) << "woken by the poll fallback or worse";
  lock.unlock();
}

TEST(Async, PendingWaitsHoldNoThreadAndAllGetTheLockInTurn) {
  const Options o = fresh_options();
  DatabaseDistributedLock holder(o);
  holder.lock("many");
  // One wake-up connection: a bell watch still ending after the warm-up
  // below would otherwise let the next watch start a second one (up to
  // wakeup_connections threads are part of the client's fixed set).
  Options c = same_table(o);
  c.wakeup_connections = 1;
  DatabaseDistributedLock client(c);
  // The first asynchronous call starts the client's workers, and the first
  // wait on a holder elsewhere its wake-up connection's thread: both are
  // part of the client's fixed set of threads.
  EXPECT_FALSE(async_try_lock(client.get_lock("many", Owner::create()), 100ms, asio::use_future).get());
  const std::size_t threads_before = thread_count();
  constexpr int kWaiters = 200;
  asio::io_context io;
  std::atomic<int> done{0};
  std::atomic<int> inside{0};
  std::atomic<bool> overlap{false};
  for (int i = 0; i < kWaiters; ++i) {
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          Lock lock = client.get_lock("many", Owner::create());
          co_await async_lock(lock, asio::use_awaitable);
          if (++inside != 1) overlap = true;
          --inside;
          co_await async_unlock(lock, asio::use_awaitable);
          ++done;
        },
        asio::detached);
  }
  std::thread runner([&] { io.run(); });
  // Not a wait for a condition: the bound holds at every moment; the pause
  // only makes it cover the waits once they are all initiated and parked.
  std::this_thread::sleep_for(300ms);
  EXPECT_LE(thread_count(), threads_before + 1) << "pending waits took threads (+1: the runner)";
  EXPECT_EQ(done.load(), 0);
  holder.unlock("many");
  runner.join();
  EXPECT_EQ(done.load(), kWaiters);
  EXPECT_FALSE(overlap.load());
  EXPECT_LE(thread_count(), threads_before);
  EXPECT_FALSE(client.is_locked("many"));
}

}  // namespace
}  // namespace dlock
