#include "engine/async_observe.hpp"

#include "dlock/errors.hpp"

namespace dlock::details {

namespace {
std::exception_ptr cancelled_error() {
  return std::make_exception_ptr(Cancelled("dlock: observing the election was cancelled"));
}
}  // namespace

std::uint64_t AsyncObserve::start(Engine& engine, Engine::ObserveRequest request,
                                  std::unique_ptr<asio_impl::AsyncCompletion> completion, std::function<void()> on_end) {
  AsyncOperations& operations = engine.async();
  const auto id = operations.begin();
  if (!id) {
    if (on_end) on_end();
    asio_impl::AsyncCompletion::finish(std::move(completion), cancelled_error(), 0);
    return 0;
  }
  const bool cancellable = !request.single_attempt;
  const std::uint64_t owner = request.owner;
  auto op = std::make_shared<AsyncObserve>(engine, std::move(request), std::move(completion), std::move(on_end));
  op->id_ = *id;
  if (cancellable) {
    // Watching before the first look, so no change between a look and the
    // park is missed.
    op->watch_ = std::make_unique<WaiterRegistry::Watch>(engine.waiters(),
                                                         NameKey(Kind::kElection, op->request_.name), op);
    operations.attach(*id, owner, op);
  }
  op->post_step();
  return cancellable ? *id : 0;
}

AsyncObserve::AsyncObserve(Engine& engine, Engine::ObserveRequest request,
                           std::unique_ptr<asio_impl::AsyncCompletion> completion, std::function<void()> on_end)
    : engine_(engine), request_(std::move(request)), completion_(std::move(completion)), on_end_(std::move(on_end)) {}

void AsyncObserve::post_step() {
  engine_.async().run([self = shared_from_this()] { self->step(); });
}

void AsyncObserve::step() {
  if (cancelled_) return finish(cancelled_error(), std::nullopt);
  woken_ = false;  // wakes from here on resume the next park
  Engine::ObserveStep next;
  try {
    const Engine::WarmestConnection warmest;
    next = engine_.observe_step(request_);
  } catch (...) {
    return finish(std::current_exception(), std::nullopt);
  }
  if (next.row) return finish(nullptr, std::move(next.row));
  if (next.step.next != AcquireStep::Next::kWait) return finish(nullptr, std::nullopt);
  park(next.step.wait);
}

void AsyncObserve::park(std::chrono::microseconds wait) {
  const std::uint64_t park = ++parks_;
  engine_.async().deadlines().add(shared_from_this(), park, DeadlineQueue::Clock::now() + wait);
  parked_ = true;
  if (woken_ || cancelled_) resume();
}

void AsyncObserve::resume() {
  if (parked_.exchange(false)) post_step();
}

void AsyncObserve::woken() {
  woken_ = true;
  resume();
}

void AsyncObserve::expired(std::uint64_t park) {
  if (park == parks_) resume();
}

void AsyncObserve::cancel() {
  cancelled_ = true;
  resume();
}

void AsyncObserve::finish(std::exception_ptr error, std::optional<ElectionRow> row) {
  if (parks_ != 0) engine_.async().deadlines().remove(shared_from_this(), parks_);
  watch_.reset();
  if (on_end_) on_end_();
  if (row) completion_->set_view(to_leader_view(*row));
  asio_impl::AsyncCompletion::finish(std::move(completion_), std::move(error), row ? 1 : 0);
  engine_.async().end(id_);
}

}  // namespace dlock::details
