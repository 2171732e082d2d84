#include "engine/async_acquire.hpp"

#include <spdlog/spdlog.h>

#include "engine/engine.hpp"

namespace dlock::details {

namespace {
std::exception_ptr cancelled_error() {
  return std::make_exception_ptr(Cancelled("dlock: the wait was cancelled before the lock was acquired"));
}
}  // namespace

std::uint64_t AsyncAcquire::start(Engine& engine, AcquireRequest request,
                                  std::unique_ptr<asio_impl::AsyncCompletion> completion,
                                  std::function<void()> on_end) {
  AsyncOperations& operations = engine.async();
  const auto id = operations.begin();
  if (!id) {
    // The client is being destroyed (the caller broke "the client must
    // outlive the operation"): nothing can run any more.
    if (on_end) on_end();
    engine.count_acquire(metric_kind(request.key.kind), std::chrono::steady_clock::now(), false,
                         request.single_attempt, false, cancelled_error());
    asio_impl::AsyncCompletion::finish(std::move(completion), cancelled_error(), 0);
    return 0;
  }
  const bool cancellable = !request.single_attempt;
  const std::uint64_t owner = request.owner;
  auto op = std::make_shared<AsyncAcquire>(engine, std::move(request), std::move(completion), std::move(on_end));
  op->id_ = *id;
  if (cancellable) operations.attach(*id, owner, op);
  op->post_step();
  return cancellable ? *id : 0;
}

AsyncAcquire::AsyncAcquire(Engine& engine, AcquireRequest request,
                           std::unique_ptr<asio_impl::AsyncCompletion> completion, std::function<void()> on_end)
    : engine_(engine), request_(std::move(request)), completion_(std::move(completion)), on_end_(std::move(on_end)) {
  // Subscribed before the first attempt (the synchronous driver subscribes
  // only after a refusal): a release between a refused attempt and the
  // park is kept as a permit, and cancel() may look at the subscription
  // from another worker at any time, so it must not appear later.
  if (!request_.single_attempt) {
    subscription_.emplace(engine_.waiters(), request_.key);
    engine_.waiting_started(request_);
  }
}

void AsyncAcquire::post_step() {
  engine_.async().run([self = shared_from_this()] { self->step(); });
}

void AsyncAcquire::step() {
  // Handed the hold by a local release while parked (even if a cancel came
  // meanwhile: the wait ended with the hold, as if acquired just before).
  if (take_grant() != 0) return finish(nullptr, true);
  if (cancelled_) return finish(cancelled_error(), false);
  AcquireStep next;
  std::exception_ptr error;
  try {
    const Engine::WarmestConnection warmest;
    next = engine_.attempt_step(request_);
  } catch (...) {
    error = std::current_exception();
  }
  // Completed outside the handler: the exception is then only the
  // exception_ptr's, not also the runtime's while the caller reads it.
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

void AsyncAcquire::park(std::chrono::microseconds wait) {
  if (cancelled_) return finish(cancelled_error(), false);
  if (!counted_) counted_.emplace(engine_.counters(), metric_kind(request_.key.kind));
  const std::uint64_t park = ++parks_;
  const auto deadline = DeadlineQueue::Clock::now() + wait;
  if (!subscription_->park(shared_from_this())) {
    // A wake was already waiting for us: try again now.
    return post_step();
  }
  // From here a wake may already have resumed us on another worker; only
  // the queue entry (checked against `park`) is added.
  engine_.async().deadlines().add(shared_from_this(), park, deadline);
  // A cancel() that came before the park found nothing parked: look again.
  if (cancelled_ && subscription_->unpark(*this)) {
    engine_.async().deadlines().remove(shared_from_this(), park);
    post_step();
  }
}

void AsyncAcquire::wake() {
  // Handed the hold by an async_unlock's release (on one of our workers):
  // that worker completes us right after the release, before it completes
  // the unlock, instead of waking another worker for a step that only
  // delivers the lock.
  if (granted() && engine_.async().defer([self = shared_from_this()] { self->step(); })) return;
  // Only the step is posted: waking a second worker just to drop the queue
  // entry would cost the handoff a thread wake. The entry is stale now (its
  // number no longer parked); the next park replaces it and finish() drops
  // it.
  post_step();
}

const void* AsyncAcquire::handoff_request() const {
  if (cancelled_ || !engine_.kind(request_.key.kind).traits.hands_over) return nullptr;
  return &request_;
}

void AsyncAcquire::expired(std::uint64_t park) {
  if (park == parks_ && subscription_->unpark(*this)) {
    engine_.timed_wait_ended(request_.forever, request_.deadline);
    post_step();
  }
}

void AsyncAcquire::cancel() {
  cancelled_ = true;
  // Parked: take it out and let its next step end it. Running: that step
  // sees the flag before it would park again.
  engine_.async().run([self = shared_from_this()] {
    if (self->subscription_ && self->subscription_->unpark(*self)) {
      self->engine_.async().deadlines().remove(self, self->parks_);
      self->step();
    }
  });
}

void AsyncAcquire::finish(std::exception_ptr error, bool acquired) {
  // A woken park's queue entry, if any: dropped by this worker (it stays
  // hot for a moment after this job) rather than at the wake.
  if (parks_ != 0) engine_.async().deadlines().remove(shared_from_this(), parks_);
  if (subscription_) {
    subscription_->unsubscribe();
    engine_.waiting_ended(request_.key, acquired);
  }
  try {
    engine_.kind(request_.key.kind).request_ended(engine_, request_, acquired);
  } catch (const std::exception& e) {
    engine_.logger()->debug("dlock: ending a wait: {}", e.what());
  }
  counted_.reset();
  engine_.count_acquire(metric_kind(request_.key.kind), started_, acquired, request_.single_attempt, false, error);
  // Completed before end(): once end() has let the client's destructor go
  // on, nothing here may touch the client.
  if (on_end_) on_end_();
  // The value a completion takes: the owner of what was acquired (a
  // permit's handle needs it), never 0.
  asio_impl::AsyncCompletion::finish(std::move(completion_), std::move(error), acquired ? request_.owner : 0);
  engine_.async().end(id_);
}

}  // namespace dlock::details
