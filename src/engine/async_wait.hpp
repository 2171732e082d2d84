// The asynchronous driver of every wait (engine/wait.hpp): one pending
// async_lock, async_try_lock, async_acquire, a multi-lock's, a campaign, an
// observer.
//
// A step (a statement or two) runs on one of the engine's workers. When it
// says wait, the operation parks and holds no thread: a taker in its key's
// WaiterRegistry entry (which gives a wake to one taker, or a handed-over
// hold), a watcher by a flag its watches' wakes find; and its next step's
// time goes into the DeadlineQueue. Whichever comes first resumes it,
// exactly once per park (unpark() decides): a wake, that time, or a
// cancellation. Resuming posts the next step. A watcher's wake that lands
// while a step runs is kept (`woken_`) and resumes the park that follows.
//
// So a step never runs concurrently with another step of the same
// operation, and the fields below are touched by one step at a time
// (except where marked).
//
// Lifetime: shared; the registry entry or watches, the deadline queue and
// posted steps keep it alive. It ends by calling its completion exactly
// once, then AsyncOperations::end.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "dlock/asio.hpp"
#include "engine/engine.hpp"
#include "engine/wait.hpp"
#include "runtime/async_operations.hpp"
#include "runtime/deadline_queue.hpp"
#include "wakeup/waiter_registry.hpp"

namespace dlock::details {

class AsyncWait final : public WaiterRegistry::Parked,
                        public WaiterRegistry::Watcher,
                        public DeadlineQueue::Waiter,
                        public AsyncOperations::Cancellable,
                        public std::enable_shared_from_this<AsyncWait> {
 public:
  // Starts `wait` on `engine`'s workers; `completion` gets void(exception,
  // the Wait's deliver() once done, else 0). Listening begins before the
  // first step, so no wake between a step and its park is lost. Returns
  // the id per-operation cancellation uses (0 if there is nothing to
  // cancel). `on_end` (may be empty) runs once, right before the
  // completion. An engine being destroyed completes it at once with
  // Cancelled.
  static std::uint64_t start(Engine& engine, std::unique_ptr<Wait> wait,
                             std::unique_ptr<asio_impl::AsyncCompletion> completion,
                             std::function<void()> on_end = {});

  AsyncWait(Engine& engine, std::unique_ptr<Wait> wait, std::unique_ptr<asio_impl::AsyncCompletion> completion,
            std::function<void()> on_end);

  void wake() override;                       // WaiterRegistry, a taker: woken while parked
  const void* handoff_request() const override;  // WaiterRegistry, a taker: accepts a hold handed over
  void woken() override;                      // WaiterRegistry, a watcher: a wake of one of its keys
  void expired(std::uint64_t park) override;  // DeadlineQueue: a park's time passed
  void cancel() override;                     // cancel(owner), a slot, shutdown

 private:
  void listen();  // a wait that may wait, before its first step
  void step();    // on a worker
  void park(std::chrono::microseconds wait);
  bool unpark();  // true for the one caller who resumes the parked operation
  void post_step();
  void finish(std::exception_ptr error, bool done);

  Engine& engine_;
  const std::unique_ptr<Wait> wait_;
  std::unique_ptr<asio_impl::AsyncCompletion> completion_;
  std::function<void()> on_end_;
  // A taker's; made by listen() and never replaced, so the deadline queue
  // and cancel() may use it while a step runs.
  std::optional<WaiterRegistry::Subscription> subscription_;
  std::vector<std::unique_ptr<WaiterRegistry::Watch>> watches_;  // a watcher's, gone at finish()
  std::atomic<bool> woken_{false};      // a watcher: a wake since the current step began (any thread)
  std::atomic<bool> parked_{false};     // a watcher: parked, not yet resumed (any thread)
  std::atomic<bool> cancelled_{false};  // any thread
  std::atomic<std::uint64_t> parks_{0};  // the current park's number; read by the deadline queue's thread
  std::uint64_t id_ = 0;                 // in AsyncOperations
  const SteadyTime started_ = std::chrono::steady_clock::now();
  std::optional<Engine::CountedWait> counted_;  // a counted wait, from the first park to the end
};

}  // namespace dlock::details
