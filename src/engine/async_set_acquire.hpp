// The asynchronous driver of a set of lock names acquired together (a
// MultiLock's async_lock / async_try_lock): the set's counterpart of
// AsyncAcquire, over the same step (Engine::set_step).
//
// A step runs on one of the client's workers. On a refusal the operation
// parks: it watches every name of the set (WaiterRegistry::Watch, which
// takes no wake from the names' other waiters) and puts its deadline in
// the client's DeadlineQueue; it holds no thread. The first of a wake of
// any name, the deadline or a cancellation resumes it, once per park (the
// `parked_` flag decides who), and resuming posts the next step. A wake
// that lands while a step runs is kept (`woken_`) and resumes the park
// that follows at once.
//
// Lifetime: shared; the watches, the deadline queue and posted steps keep
// it alive. It ends by calling its completion exactly once, then
// AsyncOperations::end.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "dlock/asio.hpp"
#include "engine/engine.hpp"
#include "engine/request.hpp"
#include "runtime/async_operations.hpp"
#include "runtime/deadline_queue.hpp"
#include "wakeup/waiter_registry.hpp"

namespace dlock::details {

class AsyncSetAcquire final : public WaiterRegistry::Watcher,
                              public DeadlineQueue::Waiter,
                              public AsyncOperations::Cancellable,
                              public std::enable_shared_from_this<AsyncSetAcquire> {
 public:
  // Starts an operation for `request` on `engine`'s workers; `completion`
  // gets void(exception, acquired: the owner, or 0). Returns the id
  // per-operation cancellation uses (0 if there is nothing to cancel).
  // `on_end` (may be empty) runs once, right before the completion.
  static std::uint64_t start(Engine& engine, SetRequest request,
                             std::unique_ptr<asio_impl::AsyncCompletion> completion,
                             std::function<void()> on_end = {});

  AsyncSetAcquire(Engine& engine, SetRequest request, std::unique_ptr<asio_impl::AsyncCompletion> completion,
                  std::function<void()> on_end);

  void woken() override;                      // WaiterRegistry: a wake of one of the names
  void expired(std::uint64_t park) override;  // DeadlineQueue: a park's deadline passed
  void cancel() override;                     // cancel(owner), a slot, shutdown

 private:
  void step();  // on a worker
  void park(std::chrono::microseconds wait);
  void resume();  // the parked operation, once
  void post_step();
  void finish(std::exception_ptr error, bool acquired);

  Engine& engine_;
  const SetRequest request_;
  std::unique_ptr<asio_impl::AsyncCompletion> completion_;
  std::function<void()> on_end_;
  // Made by start() (none for a single attempt), gone at finish().
  std::vector<std::unique_ptr<WaiterRegistry::Watch>> watches_;
  std::optional<Engine::SetWaiting> waiting_;
  std::atomic<bool> woken_{false};      // a wake since the current step began (any thread)
  std::atomic<bool> parked_{false};     // parked, not yet resumed (any thread)
  std::atomic<bool> cancelled_{false};  // any thread
  std::atomic<std::uint64_t> parks_{0};
  std::uint64_t id_ = 0;
};

}  // namespace dlock::details
