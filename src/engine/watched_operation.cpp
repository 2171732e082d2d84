#include "engine/watched_operation.hpp"

#include "dlock/errors.hpp"
#include "engine/engine.hpp"

namespace dlock::details {

WatchedOperation::WatchedOperation(Engine& engine, std::unique_ptr<asio_impl::AsyncCompletion> completion,
                                   std::function<void()> on_end, std::string cancelled)
    : engine_(engine),
      completion_(std::move(completion)),
      on_end_(std::move(on_end)),
      cancelled_(std::move(cancelled)) {}

std::uint64_t WatchedOperation::start(const std::shared_ptr<WatchedOperation>& op, std::uint64_t owner, bool waits,
                                      const std::vector<NameKey>& keys) {
  AsyncOperations& operations = op->engine_.async();
  const auto id = operations.begin();
  if (!id) {
    // The client is being destroyed (the caller broke "the client must
    // outlive the operation"): nothing can run any more.
    if (op->on_end_) op->on_end_();
    op->ended(op->cancelled_error(), 0);
    asio_impl::AsyncCompletion::finish(std::move(op->completion_), op->cancelled_error(), 0);
    return 0;
  }
  op->id_ = *id;
  if (waits) {
    for (const auto& key : keys)
      op->watches_.push_back(std::make_unique<WaiterRegistry::Watch>(op->engine_.waiters(), key, op));
    op->waiting_started();
    operations.attach(*id, owner, op);
  }
  op->post_step();
  return waits ? *id : 0;
}

std::exception_ptr WatchedOperation::cancelled_error() const { return std::make_exception_ptr(Cancelled(cancelled_)); }

void WatchedOperation::post_step() {
  engine_.async().run([self = shared_from_this()] { self->step(); });
}

void WatchedOperation::step() {
  if (cancelled_flag_) return finish(cancelled_error(), 0);
  woken_ = false;  // wakes from here on resume the next park
  Outcome next;
  std::exception_ptr error;
  try {
    const Engine::WarmestConnection warmest;
    next = run_step();
  } catch (...) {
    error = std::current_exception();
  }
  // Completed outside the handler: the exception is then only the
  // exception_ptr's, not also the runtime's while the caller reads it.
  if (error) return finish(std::move(error), 0);
  if (next.wait) return park(next.wait_for);
  finish(nullptr, next.value);
}

void WatchedOperation::park(std::chrono::microseconds wait) {
  const std::uint64_t park = ++parks_;
  engine_.async().deadlines().add(shared_from_this(), park, DeadlineQueue::Clock::now() + wait);
  parked_ = true;
  // A wake or a cancel that came while the step ran found nothing parked.
  if (woken_ || cancelled_flag_) resume();
}

void WatchedOperation::resume() {
  if (parked_.exchange(false)) post_step();
}

void WatchedOperation::woken() {
  woken_ = true;
  resume();
}

void WatchedOperation::expired(std::uint64_t park) {
  if (park != parks_ || !parked_.exchange(false)) return;
  // Counted before the step is posted: once it is, the operation may end
  // and the client go.
  wait_ran_out();
  post_step();
}

void WatchedOperation::cancel() {
  cancelled_flag_ = true;
  resume();  // parked: its next step ends it; running: that step sees the flag
}

void WatchedOperation::finish(std::exception_ptr error, std::uint64_t value) {
  if (parks_ != 0) engine_.async().deadlines().remove(shared_from_this(), parks_);
  if (!watches_.empty()) {
    watches_.clear();
    waiting_ended(value);
  }
  ended(error, value);
  // Completed before end(): once end() has let the client's destructor go
  // on, nothing here may touch the client.
  if (on_end_) on_end_();
  asio_impl::AsyncCompletion::finish(std::move(completion_), std::move(error), value);
  engine_.async().end(id_);
}

}  // namespace dlock::details
