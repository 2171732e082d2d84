// The asynchronous driver of an election's observer (async_observe): the
// counterpart of Engine::observe over the same step (Engine::observe_step),
// as AsyncSetAcquire is for a set of names.
//
// A look runs on one of the client's workers. When the view has not moved
// past the revision asked about, the operation parks: it watches the
// election's name (WaiterRegistry::Watch, which keeps nobody out and takes
// no wake from candidates) and puts its next look's time in the client's
// DeadlineQueue; it holds no thread. A wake, that time or a cancellation
// resumes it, once per park (`parked_` decides who); a wake that lands
// while a look runs is kept (`woken_`) and resumes the next park at once.
//
// Lifetime: shared; the watch, the deadline queue and posted looks keep it
// alive. It ends by calling its completion exactly once (with the view
// set, when it saw one), then AsyncOperations::end.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <optional>

#include "dlock/asio.hpp"
#include "engine/engine.hpp"
#include "runtime/async_operations.hpp"
#include "runtime/deadline_queue.hpp"
#include "sql/election_rows.hpp"
#include "wakeup/waiter_registry.hpp"

namespace dlock::details {

class AsyncObserve final : public WaiterRegistry::Watcher,
                           public DeadlineQueue::Waiter,
                           public AsyncOperations::Cancellable,
                           public std::enable_shared_from_this<AsyncObserve> {
 public:
  // Starts an observer for `request` on `engine`'s workers; `completion`
  // gets void(exception, 1 when it saw a view: set_view() gave it first).
  // Returns the id per-operation cancellation uses (0 if there is nothing
  // to cancel). `on_end` (may be empty) runs once, right before the
  // completion.
  static std::uint64_t start(Engine& engine, Engine::ObserveRequest request,
                             std::unique_ptr<asio_impl::AsyncCompletion> completion, std::function<void()> on_end = {});

  AsyncObserve(Engine& engine, Engine::ObserveRequest request, std::unique_ptr<asio_impl::AsyncCompletion> completion,
               std::function<void()> on_end);

  void woken() override;                      // WaiterRegistry: a change may have come
  void expired(std::uint64_t park) override;  // DeadlineQueue: time for the next look
  void cancel() override;                     // cancel(owner), a slot, shutdown

 private:
  void step();  // on a worker
  void park(std::chrono::microseconds wait);
  void resume();
  void post_step();
  void finish(std::exception_ptr error, std::optional<ElectionRow> row);

  Engine& engine_;
  const Engine::ObserveRequest request_;
  std::unique_ptr<asio_impl::AsyncCompletion> completion_;
  std::function<void()> on_end_;
  std::unique_ptr<WaiterRegistry::Watch> watch_;  // made by start(), gone at finish()
  std::atomic<bool> woken_{false};
  std::atomic<bool> parked_{false};
  std::atomic<bool> cancelled_{false};
  std::atomic<std::uint64_t> parks_{0};
  std::uint64_t id_ = 0;
};

}  // namespace dlock::details
