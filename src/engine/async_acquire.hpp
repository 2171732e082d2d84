// The asynchronous driver of the acquire engine (see request.hpp):
// one pending async_lock / async_try_lock.
//
// A step (one attempt in the database, a statement or two) runs on one of
// the client's workers. On a refusal the operation parks: it registers in
// the name's WaiterRegistry entry and puts its deadline (the holder's
// remaining lease, or the caller's deadline if sooner) in the client's
// DeadlineQueue. Then it holds no thread. Whichever comes first resumes it,
// exactly once per park, by taking it out of the registry entry: a wake (a
// release in this client, a bell ring, the poller), its deadline, or a
// cancellation. Resuming posts the next step to the workers.
//
// So a step never runs concurrently with another step of the same
// operation, and the fields below are touched by one step at a time
// (except where marked).
//
// Lifetime: shared; the registry entry, the deadline queue and posted steps
// keep it alive. It ends by calling its completion exactly once, then
// AsyncOperations::end.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>

#include "engine/engine.hpp"
#include "engine/request.hpp"
#include "runtime/async_operations.hpp"
#include "runtime/deadline_queue.hpp"
#include "dlock/asio.hpp"
#include "wakeup/waiter_registry.hpp"

namespace dlock::details {

class Engine;

class AsyncAcquire final : public WaiterRegistry::Parked,
                           public DeadlineQueue::Waiter,
                           public AsyncOperations::Cancellable,
                           public std::enable_shared_from_this<AsyncAcquire> {
 public:
  // Starts an operation for `request` on `engine`'s workers; `completion`
  // gets void(exception, acquired: the request's owner, or 0). Returns the
  // id per-operation cancellation uses (0 if there is nothing to cancel).
  // `on_end` (may be empty) runs once, right before the completion, on the
  // thread that ends the operation.
  static std::uint64_t start(Engine& engine, AcquireRequest request,
                             std::unique_ptr<asio_impl::AsyncCompletion> completion,
                             std::function<void()> on_end = {});

  AsyncAcquire(Engine& engine, AcquireRequest request, std::unique_ptr<asio_impl::AsyncCompletion> completion,
               std::function<void()> on_end);

  void wake() override;                       // WaiterRegistry: woken while parked
  // WaiterRegistry: a wait not cancelled, of a kind that hands over,
  // accepts a handed-over hold.
  const void* handoff_request() const override;
  void expired(std::uint64_t park) override;  // DeadlineQueue: a park's deadline passed
  void cancel() override;                     // cancel(owner), a slot, shutdown

 private:
  void step();  // on a worker
  void park(std::chrono::microseconds wait);
  void post_step();
  void finish(std::exception_ptr error, bool acquired);

  Engine& engine_;
  const AcquireRequest request_;
  std::unique_ptr<asio_impl::AsyncCompletion> completion_;
  std::function<void()> on_end_;
  // Set at construction (none for a single attempt) and never replaced, so
  // the deadline queue and cancel() may use it while a step runs.
  std::optional<WaiterRegistry::Subscription> subscription_;
  std::atomic<bool> cancelled_{false};    // any thread
  std::atomic<std::uint64_t> parks_{0};   // the current park's number; read by the deadline queue's thread
  std::uint64_t id_ = 0;                  // in AsyncOperations
  const SteadyTime started_ = std::chrono::steady_clock::now();
  std::optional<Engine::CountedWait> counted_;  // from the first park to the end
};

}  // namespace dlock::details
