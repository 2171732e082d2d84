// The asynchronous driver of a set of lock names acquired together (a
// MultiLock's async_lock / async_try_lock): the set's counterpart of
// AsyncAcquire, over the same step (MultiLocks::step). It watches every
// name of the set and parks between attempts as a WatchedOperation; the
// first wake of any name, the deadline or a cancellation brings the next
// attempt.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "engine/engine.hpp"
#include "engine/watched_operation.hpp"
#include "primitives/multi_lock/multi_locks.hpp"

namespace dlock::details {

class AsyncSetAcquire final : public WatchedOperation {
 public:
  // Starts an operation for `request` on the engine's workers; `completion`
  // gets void(exception, acquired: the owner, or 0). Returns the id
  // per-operation cancellation uses (0 if there is nothing to cancel).
  // `on_end` (may be empty) runs once, right before the completion.
  static std::uint64_t start(MultiLocks& locks, SetRequest request,
                             std::unique_ptr<asio_impl::AsyncCompletion> completion,
                             std::function<void()> on_end = {});

  AsyncSetAcquire(MultiLocks& locks, SetRequest request, std::unique_ptr<asio_impl::AsyncCompletion> completion,
                  std::function<void()> on_end);

 private:
  Outcome run_step() override;
  void waiting_started() override;
  void waiting_ended(std::uint64_t value) override;
  void ended(const std::exception_ptr& error, std::uint64_t value) noexcept override;
  void wait_ran_out() noexcept override;  // a lease-end wake, as the synchronous wait counts it

  MultiLocks& locks_;
  const SetRequest request_;
  std::optional<Engine::WatchOnly> watching_;
  const SteadyTime started_ = std::chrono::steady_clock::now();
  std::optional<Engine::CountedWait> counted_;  // from the first refusal to the end
};

}  // namespace dlock::details
