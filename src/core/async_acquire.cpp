#include "core/async_acquire.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>

#include "core/client.hpp"

namespace dlock::details {

namespace {
std::exception_ptr cancelled_error(const AcquireRequest& request) {
  (void)request;
  return std::make_exception_ptr(Cancelled("dlock: the wait was cancelled before the lock was acquired"));
}
}  // namespace

std::uint64_t AsyncAcquire::start(Client& client, AcquireRequest request,
                                  std::unique_ptr<asio_impl::AsyncCompletion> completion) {
  AsyncOperations& operations = client.async();
  const auto id = operations.begin();
  if (!id) {
    // The client is being destroyed (the caller broke "the client must
    // outlive the operation"): nothing can run any more.
    completion->complete(cancelled_error(request), false);
    return 0;
  }
  const bool cancellable = !request.single_attempt;
  const std::uint64_t owner = request.owner;
  auto op = std::make_shared<AsyncAcquire>(client, std::move(request), std::move(completion), operations.executor());
  op->id_ = *id;
  if (cancellable) operations.attach(*id, owner, op);
  boost::asio::post(op->strand_, [op] { op->step(); });
  return cancellable ? *id : 0;
}

AsyncAcquire::AsyncAcquire(Client& client, AcquireRequest request, std::unique_ptr<asio_impl::AsyncCompletion> completion,
                           AsyncOperations::Executor executor)
    : client_(client),
      request_(std::move(request)),
      completion_(std::move(completion)),
      strand_(boost::asio::make_strand(executor)),
      timer_(strand_) {}

void AsyncAcquire::step() {
  if (finished_) return;
  if (cancelled_) return finish(cancelled_error(request_), false);
  // Subscribed before the first attempt, as the synchronous driver is: a
  // release between a refused attempt and the park is kept as a permit.
  if (!subscription_ && !request_.single_attempt) subscription_.emplace(client_.waiters(), request_.name);
  AcquireStep next;
  try {
    next = client_.attempt_step(request_);
  } catch (...) {
    return finish(std::current_exception(), false);
  }
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
  if (cancelled_) return finish(cancelled_error(request_), false);
  if (!subscription_->park(shared_from_this())) {
    // A wake was already waiting for us: try again now.
    boost::asio::post(strand_, [self = shared_from_this()] { self->step(); });
    return;
  }
  const std::uint64_t park = ++parks_;
  timer_.expires_after(wait);
  timer_.async_wait([self = shared_from_this(), park](const boost::system::error_code&) { self->on_timer(park); });
}

void AsyncAcquire::on_timer(std::uint64_t park) {
  // A stale timer (an earlier park's, cancelled by its wake) or one that
  // lost the race to a wake: the wake resumes us, not the timer.
  if (finished_ || park != parks_) return;
  if (subscription_->unpark(*this)) resume();
}

void AsyncAcquire::resume() {
  timer_.cancel();
  step();
}

void AsyncAcquire::wake() {
  boost::asio::post(strand_, [self = shared_from_this()] {
    if (!self->finished_) self->resume();
  });
}

void AsyncAcquire::cancel() {
  cancelled_ = true;
  // Parked: resume it, and its step ends it. Running: its step sees the
  // flag before it would park again.
  boost::asio::post(strand_, [self = shared_from_this()] {
    if (!self->finished_ && self->subscription_ && self->subscription_->unpark(*self)) self->resume();
  });
}

void AsyncAcquire::finish(std::exception_ptr error, bool acquired) {
  finished_ = true;
  timer_.cancel();
  if (subscription_) {
    subscription_.reset();
    client_.waiting_ended(request_.name);
  }
  // Completed before end(): once end() has let the client's destructor go
  // on, nothing here may touch the client.
  std::unique_ptr<asio_impl::AsyncCompletion> completion = std::move(completion_);
  completion->complete(std::move(error), acquired);
  completion.reset();
  client_.async().end(id_);
}

}  // namespace dlock::details
