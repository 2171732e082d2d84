// The asynchronous driver of the acquire engine (see acquire_request.hpp):
// one pending async_lock / async_try_lock.
//
// Everything the operation does runs on its own strand over the client's
// workers: each step (one attempt in the database, blocking a worker for
// one statement or two), parking, the timer. Between steps it holds no
// thread: it is parked in the name's WaiterRegistry entry with a timer set
// to the holder's remaining lease or the caller's deadline. Whichever comes
// first resumes it, exactly once per park: a wake (a release in this
// client, a doorbell ring, the poller), the timer, or a cancellation.
//
// Lifetime: shared; the registry entry, the timer's handler and posted
// steps keep it alive. It ends by calling its completion exactly once, then
// AsyncOperations::end.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <atomic>
#include <memory>
#include <optional>

#include "core/acquire_request.hpp"
#include "core/async_operations.hpp"
#include "dlock/asio.hpp"
#include "wakeup/waiter_registry.hpp"

namespace dlock::details {

class Client;

class AsyncAcquire final : public WaiterRegistry::Parked,
                           public AsyncOperations::Cancellable,
                           public std::enable_shared_from_this<AsyncAcquire> {
 public:
  // Starts an operation for `request` on `client`'s workers; `completion`
  // gets void(exception, acquired). Returns the id per-operation
  // cancellation uses (0 if there is nothing to cancel).
  static std::uint64_t start(Client& client, AcquireRequest request, std::unique_ptr<asio_impl::AsyncCompletion> completion);

  AsyncAcquire(Client& client, AcquireRequest request, std::unique_ptr<asio_impl::AsyncCompletion> completion,
               AsyncOperations::Executor executor);

  void wake() override;    // WaiterRegistry: woken while parked
  void cancel() override;  // AsyncOperations: cancel(owner), a slot, shutdown

 private:
  void step();  // on the strand
  void park(std::chrono::microseconds wait);
  void on_timer(std::uint64_t park);
  void resume();  // on the strand, after a successful unpark or a wake
  void finish(std::exception_ptr error, bool acquired);

  Client& client_;
  const AcquireRequest request_;
  std::unique_ptr<asio_impl::AsyncCompletion> completion_;
  boost::asio::strand<AsyncOperations::Executor> strand_;
  boost::asio::steady_timer timer_;  // touched on the strand only
  std::optional<WaiterRegistry::Subscription> subscription_;
  std::atomic<bool> cancelled_{false};
  std::uint64_t id_ = 0;         // in AsyncOperations
  std::uint64_t parks_ = 0;      // which park a timer belongs to (strand only)
  bool finished_ = false;        // strand only
};

}  // namespace dlock::details
