// dlock/asio.hpp
//
// Asynchronous lock operations on Boost.Asio completion tokens: a callback,
// `boost::asio::use_future`, `boost::asio::use_awaitable` (C++20 coroutines),
// `boost::asio::bind_executor(strand, ...)`, or any other token. The only
// public dlock header that includes Asio (1.74 or later).
//
//   boost::asio::awaitable<void> job(dlock::DatabaseDistributedLock& client) {
//     const dlock::Lock lock = client.get_lock("orders/42", dlock::Owner::create());
//     co_await dlock::async_lock(lock, boost::asio::use_awaitable);
//     ...                                      // may resume on another thread
//     co_await dlock::async_unlock(lock, boost::asio::use_awaitable);
//   }
//
// Semantics are those of the synchronous call each function mirrors
// (Lock::lock, Lock::try_lock, Lock::unlock): the same leases, reentrancy,
// fencing, LockLostError and failure rules. On a handle bound to an owner
// (get_lock(name, owner)) an operation acts for that owner; on a thread
// handle, for the thread that initiates it. Use owner-bound handles in
// coroutines: a coroutine may resume on another thread.
//
// Handlers
//   * Signatures: void(std::exception_ptr) for async_lock and async_unlock;
//     void(std::exception_ptr, bool acquired) for async_try_lock. With
//     use_future and use_awaitable the exception is rethrown.
//   * Every error arrives through the handler, std::invalid_argument for a bad
//     lease included; the initiating call itself throws nothing (beyond
//     std::bad_alloc). Errors: BackendError, LockLostError, NotHeldError
//     (async_unlock by an owner holding nothing), Cancelled.
//   * The handler is invoked through its associated executor (a coroutine
//     resumes on its own executor; a handler bound to a strand runs on it),
//     never from inside the initiating call. A handler with no associated
//     executor (a plain lambda, use_future) runs on a library thread: keep it
//     short and do not block there.
//   * Outstanding work is counted on the handler's executor while the
//     operation is pending, so io_context::run() does not return early.
//
// Threads and memory
//   Statements run on the client's worker threads (Options::pool_size of
//   them, plus one that keeps every pending wait's deadline; started by the
//   first asynchronous call). A pending wait holds no thread: it is a
//   registered continuation that a release in this client, a bell ring
//   from another client, the poller or its deadline resumes.
//
// Lifetime
//   The Lock handle may be destroyed as soon as the initiating call returns.
//   The client must outlive the operation; destroying it ends every pending
//   wait with Cancelled. The handler's execution context must outlive the
//   operation's outstanding work, which is released on a library thread
//   right after the handler has been dispatched (as Asio's own operations
//   do): let io_context::run() return, or join() a thread_pool (its
//   destructor stops it without waiting for outstanding work).
//
// Cancellation
//   * DatabaseDistributedLock::cancel(owner) ends that owner's pending waits
//     in the client with Cancelled.
//   * Per operation (Boost 1.77 or later, where Asio has cancellation slots;
//     this header is compiled in your translation unit, so your Boost
//     decides): emitting a cancellation signal bound to the handler does the
//     same for that one operation; any cancellation type but `none` counts.
//     Emit it where the handler runs (its executor or strand), as Asio asks
//     of every slot. The slot is connected before the operation starts and
//     cleared when its handler runs; a signal emitted after the operation
//     ended, or after the client is gone, does nothing. `co_await (lock ||
//     timer)` with Asio's awaitable operators works this way. Semaphore
//     acquires (async_acquire, async_try_acquire) are cancelled alike.
//   * A cancelled operation holds nothing afterwards. An attempt already
//     running in the database finishes first: if it acquired, the operation
//     completes successfully (the cancellation came too late) and holds.
#pragma once

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/version.hpp>
#if BOOST_VERSION >= 107700
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/cancellation_type.hpp>
#endif

#include <exception>
#include <memory>
#include <optional>
#include <cstdint>
#include <type_traits>

#include "dlock/distributed_lock.hpp"
#include "dlock/election.hpp"
#include "dlock/export.hpp"
#include "dlock/lock.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/semaphore.hpp"

namespace dlock {

// The header's machinery. In a namespace of its own, not details::, because
// its entry points are exported from a shared libdlock.
namespace asio_impl {

// The compiled side sees every handler through this interface: the header's
// templates wrap the handler, the library calls complete() exactly once,
// from one of its threads, never inside the initiating call.
class AsyncCompletion {
 public:
  virtual ~AsyncCompletion() = default;
  // Consumes the object: it is deleted before the handler runs (so nothing
  // of the caller's outlives the upcall here). Call as
  // `std::move(ptr).release()->complete(...)`-style: ownership ends here.
  // `value`: nonzero when acquired: for a semaphore, the permit's own
  // owner, which the completion turns into the handler's Permit (so a
  // handler that never runs still releases it). Ignored by async_unlock.
  // For async_campaign, `value` is the term.
  virtual void complete(std::exception_ptr error, std::uint64_t value) noexcept = 0;
  // async_observe: the view its handler gets, given right before complete().
  virtual void set_view(LeaderView view) noexcept { (void)view; }
  static void finish(std::unique_ptr<AsyncCompletion> completion, std::exception_ptr error,
                     std::uint64_t value) noexcept {
    completion.release()->complete(std::move(error), value);
  }
};

// What a cancellation slot's handler holds: the library's view of one
// operation, disconnected from the client when the operation ends, so a
// cancellation emitted late (or after the client is gone) does nothing.
struct CancellationState;
DLOCK_API std::shared_ptr<CancellationState> make_cancellation_state();
// Ends the operation's wait with Cancelled if it is still pending (or as
// soon as it starts, if it has not yet). Any thread.
DLOCK_API void cancel_async_operation(const std::shared_ptr<CancellationState>& state) noexcept;

// The compiled entry points. lease: nullopt = watchdog mode; wait: nullopt =
// forever, <= 0 = one attempt. `cancel` (may be null): the state a
// cancellation slot's handler holds. They never throw (but std::bad_alloc):
// every error goes to `completion`.
DLOCK_API void start_async_lock(const Lock& lock, std::optional<Millis> lease, std::optional<Millis> wait,
                                std::unique_ptr<AsyncCompletion> completion,
                                std::shared_ptr<CancellationState> cancel);
DLOCK_API void start_async_unlock(const Lock& lock, std::unique_ptr<AsyncCompletion> completion);
DLOCK_API void start_async_lock(const MultiLock& set, std::optional<Millis> lease, std::optional<Millis> wait,
                                std::unique_ptr<AsyncCompletion> completion,
                                std::shared_ptr<CancellationState> cancel);
DLOCK_API void start_async_unlock(const MultiLock& set, std::unique_ptr<AsyncCompletion> completion);
DLOCK_API void start_async_campaign(const Election& election, std::string_view value,
                                    std::unique_ptr<AsyncCompletion> completion,
                                    std::shared_ptr<CancellationState> cancel);
DLOCK_API void start_async_observe(const Election& election, std::uint64_t after_revision,
                                   std::unique_ptr<AsyncCompletion> completion,
                                   std::shared_ptr<CancellationState> cancel);
DLOCK_API void start_async_acquire(const Semaphore& semaphore, std::optional<Millis> lease,
                                   std::optional<Millis> wait, std::unique_ptr<AsyncCompletion> completion,
                                   std::shared_ptr<CancellationState> cancel);

// Makes the Permit a completed asynchronous acquire hands its handler.
struct DLOCK_API PermitAccess {
  static Permit adopt(const Semaphore& semaphore, std::uint64_t id) noexcept;
};

// What a handler is called with after the std::exception_ptr.
enum class Result {
  kNone,           // void(std::exception_ptr)
  kAcquired,       // void(std::exception_ptr, bool)
  kPermit,         // void(std::exception_ptr, Permit)
  kOptionalPermit,  // void(std::exception_ptr, std::optional<Permit>)
  kTerm,            // void(std::exception_ptr, std::uint64_t)
  kLeaderView       // void(std::exception_ptr, LeaderView)
};
// Wraps a completion handler: counts outstanding work on its executor
// while pending and invokes it there, as Asio's own operations do (dispatch
// through the executor, with the work tracked by the executor copy that
// dispatches, released last); a handler without an executor runs on the
// library thread.
template <class Handler, Result R>
class HandlerCompletion final : public AsyncCompletion {
  using Executor = boost::asio::associated_executor_t<Handler, boost::asio::system_executor>;
  // No work to track without an executor: doing so on the system executor
  // would start Asio's system thread pool for nothing.
  static constexpr bool kNoExecutor = std::is_same_v<Executor, boost::asio::system_executor>;
  static constexpr bool kStandardExecutor = boost::asio::execution::is_executor<Executor>::value;
  struct NoWork {};

  static auto make_work(const Handler& handler) {
    if constexpr (kNoExecutor) {
      return NoWork{};
    } else if constexpr (kStandardExecutor) {
      return boost::asio::prefer(boost::asio::get_associated_executor(handler),
                                 boost::asio::execution::outstanding_work.tracked);
    } else {
      return boost::asio::executor_work_guard<Executor>(boost::asio::get_associated_executor(handler));
    }
  }
  using Work = decltype(make_work(std::declval<const Handler&>()));

 public:
  HandlerCompletion(Handler&& handler, std::optional<Semaphore> semaphore)
      : handler_(std::move(handler)), work_(make_work(handler_)), semaphore_(std::move(semaphore)) {}

  void complete(std::exception_ptr error, std::uint64_t id) noexcept override {
    Work work(std::move(work_));
    // Owned by the call from here: released if the handler never runs.
    Permit permit = semaphore_ && id != 0 ? PermitAccess::adopt(*semaphore_, id) : Permit();
    // Boxed, and the box alone travels: once dispatched, the handler may run
    // at once and its execution context go away, so this library thread
    // must hold nothing of it but the tracked work (released right after
    // the dispatch). A moved-from handler may still hold a copy of its
    // executor (an executor_binder's move copies it): the moved-from member
    // goes with `delete this`, before the dispatch, and the moved-from
    // lambda below holds only an empty box.
    auto call = std::make_unique<Call>(std::move(handler_), std::move(error), id, std::move(permit), std::move(view_));
    delete this;
    auto run = [call = std::move(call)]() mutable { call->run(); };
    if constexpr (kNoExecutor) {
      run();
    } else if constexpr (kStandardExecutor) {
      boost::asio::dispatch(work, std::move(run));
    } else {
      boost::asio::dispatch(work.get_executor(), std::move(run));
      work.reset();
    }
  }

 private:
  struct Call {
    Call(Handler&& h, std::exception_ptr e, std::uint64_t v, Permit p, LeaderView l)
        : handler(std::move(h)), error(std::move(e)), value(v), permit(std::move(p)), view(std::move(l)) {}
    void run() {
#if BOOST_VERSION >= 107700
      // The operation is over: the cancellation handler it installed (which
      // names the client) must not outlive it. Cleared here, on the
      // handler's executor, where the slot's signal is emitted.
      boost::asio::get_associated_cancellation_slot(handler).clear();
#endif
      invoke(handler, std::move(error), value, std::move(permit), std::move(view));
    }
    Handler handler;
    std::exception_ptr error;
    std::uint64_t value;
    Permit permit;
    LeaderView view;
  };

  static void invoke(Handler& handler, std::exception_ptr error, std::uint64_t value, Permit permit, LeaderView view) {
    if constexpr (R == Result::kNone) {
      std::move(handler)(std::move(error));
    } else if constexpr (R == Result::kAcquired) {
      std::move(handler)(std::move(error), value != 0);
    } else if constexpr (R == Result::kTerm) {
      std::move(handler)(std::move(error), value);
    } else if constexpr (R == Result::kLeaderView) {
      std::move(handler)(std::move(error), std::move(view));
    } else if constexpr (R == Result::kPermit) {
      std::move(handler)(std::move(error), std::move(permit));
    } else {
      std::optional<Permit> maybe;
      if (permit.held()) maybe.emplace(std::move(permit));
      std::move(handler)(std::move(error), std::move(maybe));
    }
  }

  void set_view(LeaderView view) noexcept override { view_ = std::move(view); }

  Handler handler_;
  Work work_;
  std::optional<Semaphore> semaphore_;  // set for the permit results
  LeaderView view_;                     // set for async_observe
};

template <Result R, class Handler>
std::unique_ptr<AsyncCompletion> wrap_handler(Handler&& handler, std::optional<Semaphore> semaphore = std::nullopt) {
  return std::make_unique<HandlerCompletion<std::decay_t<Handler>, R>>(std::forward<Handler>(handler),
                                                                       std::move(semaphore));
}

// The handler's cancellation slot, connected to a new operation's state
// before the operation starts (so nothing races with the operation's end,
// which clears the slot), or null when the handler has no slot.
template <class Handler>
std::shared_ptr<CancellationState> connect_cancellation(const Handler& handler) {
#if BOOST_VERSION >= 107700
  auto slot = boost::asio::get_associated_cancellation_slot(handler);
  if (!slot.is_connected()) return nullptr;
  auto state = make_cancellation_state();
  slot.assign([state](boost::asio::cancellation_type type) {
    if (type != boost::asio::cancellation_type::none) cancel_async_operation(state);
  });
  return state;
#else
  (void)handler;
  return nullptr;
#endif
}

// `Lockable`: a Lock or a MultiLock.
template <Result R>
struct LockInitiation {
  template <class Handler, class Lockable>
  void operator()(Handler&& handler, const Lockable* lock, std::optional<Millis> lease,
                  std::optional<Millis> wait) const {
    auto cancel = connect_cancellation(handler);
    start_async_lock(*lock, lease, wait, wrap_handler<R>(std::move(handler)), std::move(cancel));
  }
};

template <Result R>
struct AcquireInitiation {
  template <class Handler>
  void operator()(Handler&& handler, const Semaphore* semaphore, std::optional<Millis> lease,
                  std::optional<Millis> wait) const {
    auto cancel = connect_cancellation(handler);
    start_async_acquire(*semaphore, lease, wait, wrap_handler<R>(std::move(handler), *semaphore), std::move(cancel));
  }
};

struct CampaignInitiation {
  template <class Handler>
  void operator()(Handler&& handler, const Election* election, const std::string& value) const {
    auto cancel = connect_cancellation(handler);
    start_async_campaign(*election, value, wrap_handler<Result::kTerm>(std::move(handler)), std::move(cancel));
  }
};

struct ObserveInitiation {
  template <class Handler>
  void operator()(Handler&& handler, const Election* election, std::uint64_t after_revision) const {
    auto cancel = connect_cancellation(handler);
    start_async_observe(*election, after_revision, wrap_handler<Result::kLeaderView>(std::move(handler)),
                        std::move(cancel));
  }
};

struct UnlockInitiation {
  template <class Handler, class Lockable>
  void operator()(Handler&& handler, const Lockable* lock) const {
    start_async_unlock(*lock, wrap_handler<Result::kNone>(std::move(handler)));
  }
};

}  // namespace asio_impl

// Acquires `lock` in watchdog mode, waiting as long as it takes (like
// Lock::lock()). Handler: void(std::exception_ptr).
template <class Token>
auto async_lock(const Lock& lock, Token&& token) {
  return boost::asio::async_initiate<Token, void(std::exception_ptr)>(
      asio_impl::LockInitiation<asio_impl::Result::kNone>{}, token, &lock, std::optional<Millis>(), std::optional<Millis>());
}

// Acquires `lock` with a fixed `lease` (no watchdog), waiting as long as it
// takes (like Lock::lock(lease)). A bad lease is std::invalid_argument
// through the handler. Handler: void(std::exception_ptr).
template <class Token>
auto async_lock(const Lock& lock, Millis lease, Token&& token) {
  return boost::asio::async_initiate<Token, void(std::exception_ptr)>(
      asio_impl::LockInitiation<asio_impl::Result::kNone>{}, token, &lock, std::optional<Millis>(lease), std::optional<Millis>());
}

// Releases one hold (like Lock::unlock()): NotHeldError through the handler
// if the owner holds nothing; a hold found lost is logged and reported to
// on_lock_lost, and database failures are logged, not delivered (the lease
// will expire). Handler: void(std::exception_ptr).
template <class Token>
auto async_unlock(const Lock& lock, Token&& token) {
  return boost::asio::async_initiate<Token, void(std::exception_ptr)>(asio_impl::UnlockInitiation{}, token, &lock);
}

// Waits up to `wait` for `lock` in watchdog mode (like Lock::try_lock_for):
// never false before `wait` has passed; a wait <= 0 is one attempt; a wait of
// about a century or more waits forever. Handler:
// void(std::exception_ptr, bool acquired).
template <class Token>
auto async_try_lock(const Lock& lock, Millis wait, Token&& token) {
  return boost::asio::async_initiate<Token, void(std::exception_ptr, bool)>(
      asio_impl::LockInitiation<asio_impl::Result::kAcquired>{}, token, &lock, std::optional<Millis>(), std::optional<Millis>(wait));
}

// As above, then holds with a fixed `lease`. Handler:
// void(std::exception_ptr, bool acquired).
template <class Token>
auto async_try_lock(const Lock& lock, Millis wait, Millis lease, Token&& token) {
  return boost::asio::async_initiate<Token, void(std::exception_ptr, bool)>(
      asio_impl::LockInitiation<asio_impl::Result::kAcquired>{}, token, &lock, std::optional<Millis>(lease), std::optional<Millis>(wait));
}

// The same four operations on a MultiLock (its names all together, all or
// nothing, like MultiLock::lock(), try_lock(wait, lease), unlock()), with
// the same handlers, executors, cancellation and errors. A MultiLock bound
// to an owner (get_multi_lock(names, owner)) acts for it; cancel(owner)
// ends its pending waits.
template <class Token>
auto async_lock(const MultiLock& set, Token&& token) {
  return boost::asio::async_initiate<Token, void(std::exception_ptr)>(
      asio_impl::LockInitiation<asio_impl::Result::kNone>{}, token, &set, std::optional<Millis>(), std::optional<Millis>());
}
template <class Token>
auto async_lock(const MultiLock& set, Millis lease, Token&& token) {
  return boost::asio::async_initiate<Token, void(std::exception_ptr)>(
      asio_impl::LockInitiation<asio_impl::Result::kNone>{}, token, &set, std::optional<Millis>(lease), std::optional<Millis>());
}
template <class Token>
auto async_unlock(const MultiLock& set, Token&& token) {
  return boost::asio::async_initiate<Token, void(std::exception_ptr)>(asio_impl::UnlockInitiation{}, token, &set);
}
template <class Token>
auto async_try_lock(const MultiLock& set, Millis wait, Token&& token) {
  return boost::asio::async_initiate<Token, void(std::exception_ptr, bool)>(
      asio_impl::LockInitiation<asio_impl::Result::kAcquired>{}, token, &set, std::optional<Millis>(), std::optional<Millis>(wait));
}
template <class Token>
auto async_try_lock(const MultiLock& set, Millis wait, Millis lease, Token&& token) {
  return boost::asio::async_initiate<Token, void(std::exception_ptr, bool)>(
      asio_impl::LockInitiation<asio_impl::Result::kAcquired>{}, token, &set, std::optional<Millis>(lease), std::optional<Millis>(wait));
}

// Campaigns in `election` with `value`, waiting as long as it takes (like
// Election::campaign): the term once this owner leads (at once when it
// leads already). Bind the Election to an owner (get_election(name,
// owner)) when the leadership is used from a coroutine. Cancelled (by
// cancel(owner), a cancellation slot or the client's destruction): it
// leads nothing. Errors as for campaign: LockLostError, BackendError,
// std::invalid_argument (a value over 64 KiB), Cancelled. Handler:
// void(std::exception_ptr, std::uint64_t term).
template <class Token>
auto async_campaign(const Election& election, std::string_view value, Token&& token) {
  return boost::asio::async_initiate<Token, void(std::exception_ptr, std::uint64_t)>(
      asio_impl::CampaignInitiation{}, token, &election, std::string(value));  // a copy: a deferred token runs it later
}

// Waits until `election`'s revision is greater than `after_revision` (at
// once if it already is; like Election::observe without a time limit: use
// a cancellation slot, e.g. `co_await (async_observe(...) || timer)`, or
// cancel(owner) of the Election's owner to stop it). Handler:
// void(std::exception_ptr, LeaderView).
template <class Token>
auto async_observe(const Election& election, std::uint64_t after_revision, Token&& token) {
  return boost::asio::async_initiate<Token, void(std::exception_ptr, LeaderView)>(
      asio_impl::ObserveInitiation{}, token, &election, after_revision);
}

// Acquires a permit of `semaphore`, waiting as long as it takes, with a
// watchdog-renewed lease (like Semaphore::acquire()). The Permit releases
// itself when destroyed, also if the handler never runs. Semaphore waits
// have no owner: DatabaseDistributedLock::cancel(owner) does not end them;
// destroying the client or a cancellation slot does. Handler:
// void(std::exception_ptr, Permit).
template <class Token>
auto async_acquire(const Semaphore& semaphore, Token&& token) {
  return boost::asio::async_initiate<Token, void(std::exception_ptr, Permit)>(
      asio_impl::AcquireInitiation<asio_impl::Result::kPermit>{}, token, &semaphore, std::optional<Millis>(),
      std::optional<Millis>());
}

// As above with a fixed `lease` (no watchdog). Handler:
// void(std::exception_ptr, Permit).
template <class Token>
auto async_acquire(const Semaphore& semaphore, Millis lease, Token&& token) {
  return boost::asio::async_initiate<Token, void(std::exception_ptr, Permit)>(
      asio_impl::AcquireInitiation<asio_impl::Result::kPermit>{}, token, &semaphore, std::optional<Millis>(lease),
      std::optional<Millis>());
}

// Waits up to `wait` for a permit (like Semaphore::try_acquire(wait)): never
// empty before `wait` has passed; a wait <= 0 is one attempt. Handler:
// void(std::exception_ptr, std::optional<Permit>).
template <class Token>
auto async_try_acquire(const Semaphore& semaphore, Millis wait, Token&& token) {
  return boost::asio::async_initiate<Token, void(std::exception_ptr, std::optional<Permit>)>(
      asio_impl::AcquireInitiation<asio_impl::Result::kOptionalPermit>{}, token, &semaphore,
      std::optional<Millis>(), std::optional<Millis>(wait));
}

// As above, then a fixed `lease`. Handler:
// void(std::exception_ptr, std::optional<Permit>).
template <class Token>
auto async_try_acquire(const Semaphore& semaphore, Millis wait, Millis lease, Token&& token) {
  return boost::asio::async_initiate<Token, void(std::exception_ptr, std::optional<Permit>)>(
      asio_impl::AcquireInitiation<asio_impl::Result::kOptionalPermit>{}, token, &semaphore,
      std::optional<Millis>(lease), std::optional<Millis>(wait));
}

}  // namespace dlock
