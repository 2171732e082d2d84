// What metrics() counts of acquire calls, the same for both drivers: the
// blocking one (Engine::wait) wraps its loop in counted(); the asynchronous
// one calls count_acquire from its completion. A call that waits is a
// CountedWait from its first refusal to its end (a gauge).
//
// The engine is one (engine.hpp); the counters are null with
// Options::metrics off, and every member is then one branch.
#pragma once

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>

#include "engine/holds.hpp"
#include "engine/request.hpp"
#include "metrics/metric_counters.hpp"

namespace dlock::details {

class AcquireCounting {
 public:
  explicit AcquireCounting(bool on) : metrics_(on ? std::make_shared<MetricCounters>() : nullptr) {}

  // The counters, or null when Options::metrics is off.
  MetricCounters* counters() const { return metrics_.get(); }
  // An acquire call of `kind` that began at `started` ended: acquired, or
  // with `error`, or gave up (a single attempt: refused; `cancelled`: ended
  // by cancel or an interrupt; else timed out).
  void count_acquire(MetricKind kind, SteadyTime started, bool acquired, bool single_attempt, bool cancelled,
                     const std::exception_ptr& error) noexcept;
  // Runs `acquire` (an uncounted blocking driver: its result says whether
  // it acquired) counted as one acquire call of `kind`.
  template <class Fn>
  auto counted(MetricKind kind, bool single_attempt, const std::atomic<bool>* interrupted, Fn&& acquire) {
    if (!metrics_) return acquire();
    const auto started = std::chrono::steady_clock::now();
    try {
      auto result = acquire();
      count_acquire(kind, started, acquired(result), single_attempt, interrupted != nullptr && interrupted->load(),
                    nullptr);
      return result;
    } catch (...) {
      count_acquire(kind, started, false, single_attempt, false, std::current_exception());
      throw;
    }
  }
  // While it lives, one more acquire call of its kind waits (a gauge).
  class CountedWait {
   public:
    CountedWait(MetricCounters* counters, MetricKind kind) noexcept : counters_(counters), kind_(kind) {
      if (counters_ != nullptr) counters_->waiting(kind_, 1);
    }
    ~CountedWait() {
      if (counters_ != nullptr) counters_->waiting(kind_, -1);
    }
    CountedWait(const CountedWait&) = delete;
    CountedWait& operator=(const CountedWait&) = delete;

   private:
    MetricCounters* const counters_;
    const MetricKind kind_;
  };
  // A timed wait of an acquire ended with no wake: counted as a lease-end
  // wake-up unless the acquire's own deadline has come.
  void timed_wait_ended(bool forever, SteadyTime deadline) noexcept;

 protected:
  const std::shared_ptr<MetricCounters> metrics_;  // null: Options::metrics off

 private:
  static bool acquired(bool result) { return result; }
  static bool acquired(const AcquireStep& step) { return step.next == AcquireStep::Next::kAcquired; }
};

}  // namespace dlock::details
