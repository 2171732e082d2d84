#include "engine/async_set_acquire.hpp"

#include <spdlog/spdlog.h>

namespace dlock::details {

namespace {
std::exception_ptr cancelled_error() {
  return std::make_exception_ptr(Cancelled("dlock: the wait was cancelled before the locks were acquired"));
}
}  // namespace

std::uint64_t AsyncSetAcquire::start(Engine& engine, SetRequest request,
                                     std::unique_ptr<asio_impl::AsyncCompletion> completion,
                                     std::function<void()> on_end) {
  AsyncOperations& operations = engine.async();
  const auto id = operations.begin();
  if (!id) {
    if (on_end) on_end();
    asio_impl::AsyncCompletion::finish(std::move(completion), cancelled_error(), 0);
    return 0;
  }
  const bool cancellable = !request.single_attempt;
  const std::uint64_t owner = request.owner;
  auto op = std::make_shared<AsyncSetAcquire>(engine, std::move(request), std::move(completion), std::move(on_end));
  op->id_ = *id;
  if (cancellable) {
    // Watching before the first attempt, so no wake between a refusal and
    // the park is lost.
    for (const auto& n : op->request_.names)
      op->watches_.push_back(std::make_unique<WaiterRegistry::Watch>(engine.waiters(), NameKey(Kind::kLock, n), op));
    op->waiting_.emplace(engine, op->request_.names);
    operations.attach(*id, owner, op);
  }
  op->post_step();
  return cancellable ? *id : 0;
}

AsyncSetAcquire::AsyncSetAcquire(Engine& engine, SetRequest request,
                                 std::unique_ptr<asio_impl::AsyncCompletion> completion, std::function<void()> on_end)
    : engine_(engine), request_(std::move(request)), completion_(std::move(completion)), on_end_(std::move(on_end)) {}

void AsyncSetAcquire::post_step() {
  engine_.async().run([self = shared_from_this()] { self->step(); });
}

void AsyncSetAcquire::step() {
  if (cancelled_) return finish(cancelled_error(), false);
  woken_ = false;  // wakes from here on resume the next park
  AcquireStep next;
  std::exception_ptr error;
  try {
    const Engine::WarmestConnection warmest;
    next = engine_.set_step(request_);
  } catch (...) {
    error = std::current_exception();
  }
  if (error) return finish(std::move(error), false);
  switch (next.next) {
    case AcquireStep::Next::kAcquired:
      return finish(nullptr, true);
    case AcquireStep::Next::kGaveUp:
      return finish(nullptr, false);
    case AcquireStep::Next::kWait:
      return park(next.wait);
  }
}

void AsyncSetAcquire::park(std::chrono::microseconds wait) {
  const std::uint64_t park = ++parks_;
  engine_.async().deadlines().add(shared_from_this(), park, DeadlineQueue::Clock::now() + wait);
  parked_ = true;
  // A wake or a cancel that came while the step ran found nothing parked.
  if (woken_ || cancelled_) resume();
}

void AsyncSetAcquire::resume() {
  if (parked_.exchange(false)) post_step();
}

void AsyncSetAcquire::woken() {
  woken_ = true;
  resume();
}

void AsyncSetAcquire::expired(std::uint64_t park) {
  if (park == parks_) resume();
}

void AsyncSetAcquire::cancel() {
  cancelled_ = true;
  resume();  // parked: its next step ends it; running: that step sees the flag
}

void AsyncSetAcquire::finish(std::exception_ptr error, bool acquired) {
  if (parks_ != 0) engine_.async().deadlines().remove(shared_from_this(), parks_);
  if (!watches_.empty()) {
    watches_.clear();
    waiting_.reset();
    try {
      engine_.set_waiting_ended(request_, acquired);
    } catch (const std::exception& e) {
      engine_.logger()->debug("dlock: ending a wait: {}", e.what());
    }
  }
  if (on_end_) on_end_();
  asio_impl::AsyncCompletion::finish(std::move(completion_), std::move(error), acquired ? request_.owner : 0);
  engine_.async().end(id_);
}

}  // namespace dlock::details
