// A WaiterRegistry::Watcher that a blocked thread waits on: told of every
// wake of the names it watches, and sticky, so a wake that lands between a
// look at the database and the wait is not lost (clear() before the look,
// wait_for() after it). The blocking driver's watchers wait on one (a set
// of names waited for together, an election's observer).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "wakeup/waiter_registry.hpp"

namespace dlock::details {

class StickyWake final : public WaiterRegistry::Watcher {
 public:
  void woken() override {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      woken_ = true;
    }
    cv_.notify_all();
  }
  void clear() {
    std::lock_guard<std::mutex> guard(mutex_);
    woken_ = false;
  }
  // Until a wake since the last clear(), or `timeout` (then false).
  bool wait_for(std::chrono::microseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return woken_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool woken_ = false;
};

}  // namespace dlock::details
