#include "engine/async_observe.hpp"

#include "sql/election_rows.hpp"

namespace dlock::details {

std::uint64_t AsyncObserve::start(Engine& engine, Engine::ObserveRequest request,
                                  std::unique_ptr<asio_impl::AsyncCompletion> completion, std::function<void()> on_end) {
  const bool waits = !request.single_attempt;
  const std::uint64_t owner = request.owner;
  const NameKey key(Kind::kElection, request.name);
  auto op = std::make_shared<AsyncObserve>(engine, std::move(request), std::move(completion), std::move(on_end));
  return WatchedOperation::start(op, owner, waits, {key});
}

AsyncObserve::AsyncObserve(Engine& engine, Engine::ObserveRequest request,
                           std::unique_ptr<asio_impl::AsyncCompletion> completion, std::function<void()> on_end)
    : WatchedOperation(engine, std::move(completion), std::move(on_end), "dlock: observing the election was cancelled"),
      request_(std::move(request)) {}

WatchedOperation::Outcome AsyncObserve::run_step() {
  Engine::ObserveStep next = engine_.observe_step(request_);
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
