// The counters behind DatabaseDistributedLock::metrics(): relaxed atomics,
// bumped where things happen (drivers, release, watchdog, waiter registry,
// statements, connections) and read field by field into a dlock::Metrics
// snapshot. A layer holds a MetricCounters* that is null when
// Options::metrics is off, so counting off costs one branch.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "dlock/metrics.hpp"

namespace dlock::details {

// A duration histogram with HistogramSnapshot's buckets.
class DurationHistogram {
 public:
  void observe(std::chrono::microseconds d) noexcept;
  HistogramSnapshot snapshot() const noexcept;
  // The bucket a duration lands in (HistogramSnapshot::counts' index).
  static std::size_t bucket_of(std::chrono::microseconds d) noexcept;

 private:
  std::array<std::atomic<std::uint64_t>, HistogramSnapshot::kBounds.size() + 1> counts_{};
  std::atomic<std::uint64_t> sum_us_{0};
};

class MetricCounters {
 public:
  using Clock = std::chrono::steady_clock;

  struct Kind {
    std::array<std::atomic<std::uint64_t>, kAcquireResultCount> acquisitions{};
    std::atomic<std::uint64_t> reentrant{0};
    DurationHistogram wait;
    DurationHistogram hold;
    std::array<std::atomic<std::uint64_t>, kLossCauseCount> lost{};
    std::atomic<std::uint64_t> renewals{0};
    std::atomic<std::int64_t> held{0};  // only kMultiLock's; the others are read off the hold registry
    std::atomic<std::int64_t> waiting{0};
  };

  Kind& of(MetricKind kind) noexcept { return kinds_[index(kind)]; }

  // An acquire call ended after `waited`.
  void acquire_ended(MetricKind kind, AcquireResult result, Clock::duration waited) noexcept;
  void reentered(MetricKind kind) noexcept { bump(of(kind).reentrant); }
  void hold_ended(MetricKind kind, Clock::duration held) noexcept;
  void lost(MetricKind kind, LossCause cause) noexcept { bump(of(kind).lost[index(cause)]); }
  void renewed(MetricKind kind, std::uint64_t holds) noexcept {
    of(kind).renewals.fetch_add(holds, std::memory_order_relaxed);
  }
  void renewal_statement(Clock::duration took) noexcept;
  void watchdog_tick_failed() noexcept { bump(watchdog_ticks_failed_); }
  void woke(WakeSource source) noexcept { bump(wakeups_[index(source)]); }
  void statement() noexcept { bump(statements_); }
  // A statement runs again after MySQL error `code` (1205 or 1213).
  void retry(int code) noexcept;
  void reconciled() noexcept { bump(reconciled_); }
  void connection_opened() noexcept { bump(connections_opened_); }
  void failover() noexcept { bump(failovers_); }
  void waiting(MetricKind kind, int delta) noexcept {
    of(kind).waiting.fetch_add(delta, std::memory_order_relaxed);
  }
  void sets_held(int delta) noexcept { of(MetricKind::kMultiLock).held.fetch_add(delta, std::memory_order_relaxed); }

  // Everything counted here; the caller adds the gauges it reads elsewhere
  // (holds held, the pool).
  Metrics snapshot() const noexcept;

 private:
  static void bump(std::atomic<std::uint64_t>& counter) noexcept { counter.fetch_add(1, std::memory_order_relaxed); }

  std::array<Kind, kMetricKindCount> kinds_{};
  DurationHistogram renewal_;
  std::atomic<std::uint64_t> watchdog_ticks_failed_{0};
  std::array<std::atomic<std::uint64_t>, kWakeSourceCount> wakeups_{};
  std::atomic<std::uint64_t> statements_{0};
  std::atomic<std::uint64_t> retries_lock_wait_{0};
  std::atomic<std::uint64_t> retries_deadlock_{0};
  std::atomic<std::uint64_t> reconciled_{0};
  std::atomic<std::uint64_t> connections_opened_{0};
  std::atomic<std::uint64_t> failovers_{0};
};

// Which source the wake-ups the calling thread causes count under while
// one lives (the bell watcher's ring, the poller); kLocal otherwise.
class WakeSourceScope {
 public:
  explicit WakeSourceScope(WakeSource source) noexcept;
  ~WakeSourceScope();
  WakeSourceScope(const WakeSourceScope&) = delete;
  WakeSourceScope& operator=(const WakeSourceScope&) = delete;
  static WakeSource current() noexcept;

 private:
  WakeSource previous_;
};

}  // namespace dlock::details
