#include "runtime/async_operations.hpp"

#include <vector>

namespace dlock::details {

AsyncOperations::AsyncOperations(std::size_t threads) : threads_(threads == 0 ? 1 : threads) {}

AsyncOperations::~AsyncOperations() { shutdown(); }

void AsyncOperations::start_workers() {
  std::call_once(started_, [this] {
    // A lock's unlock usually follows within a fraction of a millisecond.
    workers_ = std::make_unique<WorkerThreads>(threads_, std::chrono::microseconds(300));
    deadlines_ = std::make_unique<DeadlineQueue>();
  });
}

WorkerThreads& AsyncOperations::workers() {
  start_workers();
  return *workers_;
}

DeadlineQueue& AsyncOperations::deadlines() {
  start_workers();
  return *deadlines_;
}

std::optional<std::uint64_t> AsyncOperations::begin() {
  std::lock_guard<std::mutex> guard(mutex_);
  if (closing_) return std::nullopt;
  ++running_;
  return next_id_++;
}

void AsyncOperations::attach(std::uint64_t id, std::uint64_t owner, std::weak_ptr<Cancellable> cancellable) {
  std::lock_guard<std::mutex> guard(mutex_);
  pending_.emplace(id, Pending{owner, std::move(cancellable)});
}

void AsyncOperations::end(std::uint64_t id) {
  std::lock_guard<std::mutex> guard(mutex_);
  pending_.erase(id);
  if (--running_ == 0) idle_.notify_all();
}

void AsyncOperations::cancel_where(bool (*match)(std::uint64_t, const Pending&, std::uint64_t),
                                   std::uint64_t wanted) {
  std::vector<std::shared_ptr<Cancellable>> chosen;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    for (const auto& [id, p] : pending_) {
      if (!match(id, p, wanted)) continue;
      if (auto c = p.cancellable.lock()) chosen.push_back(std::move(c));
    }
  }
  // Outside the mutex: cancel() may end the operation at once.
  for (auto& c : chosen) c->cancel();
}

void AsyncOperations::cancel_owner(std::uint64_t owner) {
  cancel_where([](std::uint64_t, const Pending& p, std::uint64_t o) { return p.owner == o; }, owner);
}

void AsyncOperations::cancel_one(std::uint64_t id) {
  cancel_where([](std::uint64_t key, const Pending&, std::uint64_t wanted) { return key == wanted; }, id);
}

void AsyncOperations::shutdown() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (closing_) return;
    closing_ = true;
  }
  cancel_where([](std::uint64_t, const Pending&, std::uint64_t) { return true; }, 0);
  {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [&] { return running_ == 0; });
  }
  // Every operation has ended: nothing can start the workers any more.
  if (!workers_) return;
  deadlines_->stop();  // no more expiries: nothing posts jobs any more
  workers_->join();
  deadlines_.reset();
  workers_.reset();
}

}  // namespace dlock::details
