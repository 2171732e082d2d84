// A call run on a thread of its own, for tests that wait for it with a
// deadline (a waiter blocked in lock() or acquire()): whether it has
// ended, what it returned and when. Joined on destruction.
#pragma once

#include <chrono>
#include <future>
#include <optional>
#include <thread>
#include <utility>

namespace dlock::test {

template <class T>
class InBackground {
 public:
  using Clock = std::chrono::steady_clock;

  // Starts `fn()` (returning T) on a new thread.
  template <class Fn>
  explicit InBackground(Fn fn)
      : thread_([this, fn = std::move(fn)]() mutable {
          T value = fn();
          ended_at_ = Clock::now();
          value_.emplace(std::move(value));
          done_.set_value();
        }) {}
  InBackground(const InBackground&) = delete;
  InBackground& operator=(const InBackground&) = delete;
  ~InBackground() { thread_.join(); }

  // Whether the call has ended, waiting up to `timeout` for it.
  bool ended(Clock::duration timeout) { return ended_.wait_for(timeout) == std::future_status::ready; }
  // What it returned, and when it returned: valid once ended() was true.
  T& value() { return *value_; }
  Clock::time_point ended_at() const { return ended_at_; }

 private:
  std::promise<void> done_;
  std::future<void> ended_ = done_.get_future();
  std::optional<T> value_;
  Clock::time_point ended_at_{};
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace dlock::test
