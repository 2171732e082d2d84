#include "primitives/multi_lock/async_set_acquire.hpp"

#include <spdlog/spdlog.h>

namespace dlock::details {

std::uint64_t AsyncSetAcquire::start(MultiLocks& locks, SetRequest request,
                                     std::unique_ptr<asio_impl::AsyncCompletion> completion,
                                     std::function<void()> on_end) {
  const std::vector<NameKey> keys = MultiLocks::keys(request.names);
  const bool waits = !request.single_attempt;
  const std::uint64_t owner = request.owner;
  auto op = std::make_shared<AsyncSetAcquire>(locks, std::move(request), std::move(completion), std::move(on_end));
  return WatchedOperation::start(op, owner, waits, keys);
}

AsyncSetAcquire::AsyncSetAcquire(MultiLocks& locks, SetRequest request,
                                 std::unique_ptr<asio_impl::AsyncCompletion> completion, std::function<void()> on_end)
    : WatchedOperation(locks.engine(), std::move(completion), std::move(on_end),
                       "dlock: the wait was cancelled before the locks were acquired"),
      locks_(locks),
      request_(std::move(request)) {}

WatchedOperation::Outcome AsyncSetAcquire::run_step() {
  const AcquireStep next = locks_.step(request_);
  Outcome o;
  o.wait = next.next == AcquireStep::Next::kWait;
  o.wait_for = next.wait;
  if (o.wait && !counted_) counted_.emplace(engine_.counters(), MetricKind::kMultiLock);
  // The value a completion takes: the owner of what was acquired, never 0.
  if (next.next == AcquireStep::Next::kAcquired) o.value = request_.owner;
  return o;
}

void AsyncSetAcquire::wait_ran_out() noexcept { engine_.timed_wait_ended(request_.forever, request_.deadline); }

void AsyncSetAcquire::waiting_started() { watching_.emplace(engine_, MultiLocks::keys(request_.names)); }

void AsyncSetAcquire::waiting_ended(std::uint64_t value) {
  watching_.reset();
  try {
    locks_.waiting_ended(request_, value != 0);
  } catch (const std::exception& e) {
    engine_.logger()->debug("dlock: ending a wait: {}", e.what());
  }
}

void AsyncSetAcquire::ended(const std::exception_ptr& error, std::uint64_t value) noexcept {
  counted_.reset();
  engine_.count_acquire(MetricKind::kMultiLock, started_, value != 0, request_.single_attempt, false, error);
}

}  // namespace dlock::details
