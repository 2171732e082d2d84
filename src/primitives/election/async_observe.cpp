#include "primitives/election/async_observe.hpp"

namespace dlock::details {

std::uint64_t AsyncObserve::start(Elections& elections, ObserveRequest request,
                                  std::unique_ptr<asio_impl::AsyncCompletion> completion, std::function<void()> on_end) {
  const bool waits = !request.single_attempt;
  const std::uint64_t owner = request.owner;
  const NameKey key = Elections::key(request.name);
  auto op = std::make_shared<AsyncObserve>(elections, std::move(request), std::move(completion), std::move(on_end));
  return WatchedOperation::start(op, owner, waits, {key});
}

AsyncObserve::AsyncObserve(Elections& elections, ObserveRequest request,
                           std::unique_ptr<asio_impl::AsyncCompletion> completion, std::function<void()> on_end)
    : WatchedOperation(elections.engine(), std::move(completion), std::move(on_end),
                       "dlock: observing the election was cancelled"),
      elections_(elections),
      request_(std::move(request)) {}

WatchedOperation::Outcome AsyncObserve::run_step() {
  ObserveStep next = elections_.observe_step(request_);
  Outcome o;
  if (next.row) {
    completion().set_view(to_leader_view(*next.row));
    o.value = 1;
    return o;
  }
  o.wait = next.step.next == AcquireStep::Next::kWait;
  o.wait_for = next.step.wait;
  return o;
}

}  // namespace dlock::details
