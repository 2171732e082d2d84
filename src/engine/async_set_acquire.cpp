#include "engine/async_set_acquire.hpp"

#include <spdlog/spdlog.h>

namespace dlock::details {

std::uint64_t AsyncSetAcquire::start(Engine& engine, SetRequest request,
                                     std::unique_ptr<asio_impl::AsyncCompletion> completion,
                                     std::function<void()> on_end) {
  std::vector<NameKey> keys;
  for (const auto& n : request.names) keys.emplace_back(Kind::kLock, n);
  const bool waits = !request.single_attempt;
  const std::uint64_t owner = request.owner;
  auto op = std::make_shared<AsyncSetAcquire>(engine, std::move(request), std::move(completion), std::move(on_end));
  return WatchedOperation::start(op, owner, waits, keys);
}

AsyncSetAcquire::AsyncSetAcquire(Engine& engine, SetRequest request,
                                 std::unique_ptr<asio_impl::AsyncCompletion> completion, std::function<void()> on_end)
    : WatchedOperation(engine, std::move(completion), std::move(on_end),
                       "dlock: the wait was cancelled before the locks were acquired"),
      request_(std::move(request)) {}

WatchedOperation::Outcome AsyncSetAcquire::run_step() {
  const AcquireStep next = engine_.set_step(request_);
  Outcome o;
  o.wait = next.next == AcquireStep::Next::kWait;
  o.wait_for = next.wait;
  if (o.wait && !counted_) counted_.emplace(engine_.counters(), MetricKind::kMultiLock);
  // The value a completion takes: the owner of what was acquired, never 0.
  if (next.next == AcquireStep::Next::kAcquired) o.value = request_.owner;
  return o;
}

void AsyncSetAcquire::wait_ran_out() noexcept { engine_.timed_wait_ended(request_.forever, request_.deadline); }

void AsyncSetAcquire::waiting_started() { waiting_.emplace(engine_, request_.names); }

void AsyncSetAcquire::waiting_ended(std::uint64_t value) {
  waiting_.reset();
  try {
    engine_.set_waiting_ended(request_, value != 0);
  } catch (const std::exception& e) {
    engine_.logger()->debug("dlock: ending a wait: {}", e.what());
  }
}

void AsyncSetAcquire::ended(const std::exception_ptr& error, std::uint64_t value) noexcept {
  counted_.reset();
  engine_.count_acquire(MetricKind::kMultiLock, started_, value != 0, request_.single_attempt, false, error);
}

}  // namespace dlock::details
