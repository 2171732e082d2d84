#include "engine/async_wait.hpp"

#include <spdlog/spdlog.h>

namespace dlock::details {

namespace {
std::exception_ptr cancelled_error(const Wait& wait) { return std::make_exception_ptr(Cancelled(wait.cancelled)); }
}  // namespace

std::uint64_t AsyncWait::start(Engine& engine, std::unique_ptr<Wait> wait,
                               std::unique_ptr<asio_impl::AsyncCompletion> completion, std::function<void()> on_end) {
  AsyncOperations& operations = engine.async();
  const auto id = operations.begin();
  if (!id) {
    // The engine is being destroyed (the caller broke "the client must
    // outlive the operation"): nothing can run any more.
    if (on_end) on_end();
    if (wait->metric)
      engine.count_acquire(*wait->metric, std::chrono::steady_clock::now(), false, wait->rule.single_attempt, false,
                           cancelled_error(*wait));
    asio_impl::AsyncCompletion::finish(std::move(completion), cancelled_error(*wait), 0);
    return 0;
  }
  const bool waits = !wait->rule.single_attempt;
  const std::uint64_t owner = wait->owner;
  auto op = std::make_shared<AsyncWait>(engine, std::move(wait), std::move(completion), std::move(on_end));
  op->id_ = *id;
  if (waits) {
    op->listen();
    operations.attach(*id, owner, op);
  }
  op->post_step();
  return waits ? *id : 0;
}

AsyncWait::AsyncWait(Engine& engine, std::unique_ptr<Wait> wait, std::unique_ptr<asio_impl::AsyncCompletion> completion,
                     std::function<void()> on_end)
    : engine_(engine), wait_(std::move(wait)), completion_(std::move(completion)), on_end_(std::move(on_end)) {}

void AsyncWait::listen() {
  std::vector<NameKey> keys = wait_->keys();
  if (wait_->listen == Wait::Listen::kTake) {
    subscription_.emplace(engine_.waiters(), std::move(keys.front()));
  } else {
    watches_.reserve(keys.size());
    for (auto& key : keys) watches_.push_back(std::make_unique<WaiterRegistry::Watch>(engine_.waiters(), key, shared_from_this()));
  }
  wait_->started();
}

void AsyncWait::post_step() {
  engine_.async().run([self = shared_from_this()] { self->step(); });
}

void AsyncWait::step() {
  // Handed the hold by a local release while parked (even if a cancel came
  // meanwhile: the wait ended with the hold, as if acquired just before).
  if (take_grant() != 0) return finish(nullptr, true);
  if (cancelled_) return finish(cancelled_error(*wait_), false);
  woken_ = false;  // a watcher's wakes from here on resume the next park
  AcquireStep next;
  std::exception_ptr error;
  try {
    const Engine::WarmestConnection warmest;
    next = wait_->step();
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

void AsyncWait::park(std::chrono::microseconds wait) {
  if (cancelled_) return finish(cancelled_error(*wait_), false);
  if (!counted_ && wait_->metric) counted_.emplace(engine_.counters(), *wait_->metric);
  const std::uint64_t park = ++parks_;
  // A taker's wake already waiting as a permit: step again now.
  if (subscription_ && !subscription_->park(shared_from_this())) return post_step();
  // From here a taker's wake may already have resumed it on another
  // worker; only the queue entry (checked against `park`) is added.
  engine_.async().deadlines().add(shared_from_this(), park, DeadlineQueue::Clock::now() + wait);
  if (!subscription_) parked_ = true;
  // A cancel (or a watcher's wake) that came before the park found nothing
  // parked: look again.
  if ((cancelled_ || woken_) && unpark()) {
    engine_.async().deadlines().remove(shared_from_this(), park);
    post_step();
  }
}

bool AsyncWait::unpark() { return subscription_ ? subscription_->unpark(*this) : parked_.exchange(false); }

void AsyncWait::wake() {
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

const void* AsyncWait::handoff_request() const { return cancelled_ ? nullptr : wait_->handoff_request(); }

void AsyncWait::woken() {
  woken_ = true;
  if (parked_.exchange(false)) post_step();
}

void AsyncWait::expired(std::uint64_t park) {
  if (park != parks_ || !unpark()) return;
  // Counted before the step is posted: once it is, the operation may end
  // and the engine go.
  if (wait_->metric) engine_.timed_wait_ended(wait_->rule.forever, wait_->rule.deadline);
  post_step();
}

void AsyncWait::cancel() {
  cancelled_ = true;
  // Parked: take it out and let its next step end it. Running: that step
  // sees the flag before it would park again.
  engine_.async().run([self = shared_from_this()] {
    if (self->unpark()) {
      self->engine_.async().deadlines().remove(self, self->parks_);
      self->step();
    }
  });
}

void AsyncWait::finish(std::exception_ptr error, bool done) {
  // A woken park's queue entry, if any: dropped by this worker (it stays
  // hot for a moment after this job) rather than at the wake.
  if (parks_ != 0) engine_.async().deadlines().remove(shared_from_this(), parks_);
  if (subscription_) subscription_->unsubscribe();
  watches_.clear();
  engine_.wait_ended(*wait_, done);
  std::uint64_t value = 0;
  if (done && !error) {
    try {
      value = wait_->deliver(*completion_);
    } catch (...) {
      error = std::current_exception();
    }
  }
  counted_.reset();
  if (wait_->metric) engine_.count_acquire(*wait_->metric, started_, done, wait_->rule.single_attempt, false, error);
  // Completed before end(): once end() has let the engine's destructor go
  // on, nothing here may touch the engine.
  if (on_end_) on_end_();
  asio_impl::AsyncCompletion::finish(std::move(completion_), std::move(error), value);
  engine_.async().end(id_);
}

}  // namespace dlock::details
