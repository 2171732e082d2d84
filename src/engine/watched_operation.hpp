// What the asynchronous drivers that watch names share (AsyncSetAcquire
// for a MultiLock, AsyncObserve for an election's observer): the park,
// the resume, cancellation and the one completion, around a step each
// driver gives.
//
// A step (one attempt or one look, a statement or two) runs on one of the
// client's workers, never two of one operation at once. When it decides to
// wait, the operation parks: it already watches its names
// (WaiterRegistry::Watch, which keeps nobody out and takes no wake from the
// names' other waiters) and puts its next step's time in the client's
// DeadlineQueue; it holds no thread. A wake of any of its names, that time
// or a cancellation resumes it, once per park (`parked_` decides who), and
// resuming posts the next step. A wake that lands while a step runs is kept
// (`woken_`) and resumes the park that follows at once.
//
// Lifetime: shared; the watches, the deadline queue and posted steps keep
// it alive. It ends by calling its completion exactly once, then
// AsyncOperations::end.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/keys.hpp"
#include "dlock/asio.hpp"
#include "runtime/async_operations.hpp"
#include "runtime/deadline_queue.hpp"
#include "wakeup/waiter_registry.hpp"

namespace dlock::details {

class Engine;

class WatchedOperation : public WaiterRegistry::Watcher,
                         public DeadlineQueue::Waiter,
                         public AsyncOperations::Cancellable,
                         public std::enable_shared_from_this<WatchedOperation> {
 public:
  void woken() final;                      // WaiterRegistry: a wake of one of the names
  void expired(std::uint64_t park) final;  // DeadlineQueue: time for the next step
  void cancel() final;                     // cancel(owner), a slot, shutdown

 protected:
  // What a step decided: wait (up to `wait`) and step again, or end with
  // `value` for the completion (0: nothing gained).
  struct Outcome {
    bool wait = false;
    std::chrono::microseconds wait_for{0};
    std::uint64_t value = 0;
  };

  // `cancelled`: the message of the Cancelled error a cancellation ends it with.
  WatchedOperation(Engine& engine, std::unique_ptr<asio_impl::AsyncCompletion> completion,
                   std::function<void()> on_end, std::string cancelled);

  // Starts `op`: an id in AsyncOperations; when it may wait (`waits`), the
  // watches of `keys` (made before the first step, so no wake between a
  // step and its park is lost), then waiting_started(); then the first
  // step. Returns the id per-operation cancellation uses (0 if there is
  // nothing to cancel). A client being destroyed completes it at once with
  // Cancelled.
  static std::uint64_t start(const std::shared_ptr<WatchedOperation>& op, std::uint64_t owner, bool waits,
                             const std::vector<NameKey>& keys);

  // One step, on a worker (on the warmest connection). May throw: the
  // operation then ends with that error.
  virtual Outcome run_step() = 0;
  // After the watches are made (an operation that may wait).
  virtual void waiting_started() {}
  // Once, as it ends, after the watches are gone and before the completion:
  // what waiting_started() set up. `value` is the completion's.
  virtual void waiting_ended(std::uint64_t /*value*/) {}
  // Once, as it ends (after waiting_ended, before the completion), with
  // what the completion gets; whether it was cancelled is in `error`.
  virtual void ended(const std::exception_ptr& /*error*/, std::uint64_t /*value*/) noexcept {}
  // A park ended by its time, not by a wake (any thread; just before the
  // next step is posted).
  virtual void wait_ran_out() noexcept {}

  Engine& engine_;
  asio_impl::AsyncCompletion& completion() { return *completion_; }

 private:
  void step();
  void park(std::chrono::microseconds wait);
  void resume();  // the parked operation, once
  void post_step();
  void finish(std::exception_ptr error, std::uint64_t value);
  std::exception_ptr cancelled_error() const;

  std::unique_ptr<asio_impl::AsyncCompletion> completion_;
  std::function<void()> on_end_;
  const std::string cancelled_;
  std::vector<std::unique_ptr<WaiterRegistry::Watch>> watches_;  // made by start(), gone at finish()
  std::atomic<bool> woken_{false};      // a wake since the current step began (any thread)
  std::atomic<bool> parked_{false};     // parked, not yet resumed (any thread)
  std::atomic<bool> cancelled_flag_{false};  // any thread
  std::atomic<std::uint64_t> parks_{0};
  std::uint64_t id_ = 0;
};

}  // namespace dlock::details
