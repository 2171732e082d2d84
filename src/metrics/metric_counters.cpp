#include "metrics/metric_counters.hpp"

#include <algorithm>

namespace dlock::details {

namespace {
// The bucket bounds in whole microseconds (every bound is one).
constexpr auto kBoundsUs = [] {
  std::array<std::int64_t, HistogramSnapshot::kBounds.size()> us{};
  for (std::size_t i = 0; i < us.size(); ++i)
    us[i] = static_cast<std::int64_t>(HistogramSnapshot::kBounds[i] * 1'000'000 + 0.5);
  return us;
}();

thread_local WakeSource t_wake_source = WakeSource::kLocal;
}  // namespace

std::size_t DurationHistogram::bucket_of(std::chrono::microseconds d) noexcept {
  return static_cast<std::size_t>(std::lower_bound(kBoundsUs.begin(), kBoundsUs.end(), d.count()) - kBoundsUs.begin());
}

void DurationHistogram::observe(std::chrono::microseconds d) noexcept {
  if (d.count() < 0) d = std::chrono::microseconds::zero();
  counts_[bucket_of(d)].fetch_add(1, std::memory_order_relaxed);
  sum_us_.fetch_add(static_cast<std::uint64_t>(d.count()), std::memory_order_relaxed);
}

HistogramSnapshot DurationHistogram::snapshot() const noexcept {
  HistogramSnapshot s;
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    s.counts[i] = counts_[i].load(std::memory_order_relaxed);
    s.count += s.counts[i];
  }
  s.sum = static_cast<double>(sum_us_.load(std::memory_order_relaxed)) / 1e6;
  return s;
}

void MetricCounters::acquire_ended(MetricKind kind, AcquireResult result, Clock::duration waited) noexcept {
  Kind& k = of(kind);
  bump(k.acquisitions[index(result)]);
  k.wait.observe(std::chrono::duration_cast<std::chrono::microseconds>(waited));
}

void MetricCounters::hold_ended(MetricKind kind, Clock::duration held) noexcept {
  of(kind).hold.observe(std::chrono::duration_cast<std::chrono::microseconds>(held));
}

void MetricCounters::renewal_statement(Clock::duration took) noexcept {
  renewal_.observe(std::chrono::duration_cast<std::chrono::microseconds>(took));
}

void MetricCounters::retry(int code) noexcept {
  if (code == 1213) {
    bump(retries_deadlock_);
  } else {
    bump(retries_lock_wait_);
  }
}

Metrics MetricCounters::snapshot() const noexcept {
  Metrics m;
  for (std::size_t i = 0; i < kinds_.size(); ++i) {
    const Kind& k = kinds_[i];
    KindMetrics& out = m.kinds[i];
    for (std::size_t r = 0; r < k.acquisitions.size(); ++r) out.acquisitions[r] = k.acquisitions[r].load(std::memory_order_relaxed);
    out.reentrant = k.reentrant.load(std::memory_order_relaxed);
    out.wait_seconds = k.wait.snapshot();
    out.hold_seconds = k.hold.snapshot();
    for (std::size_t c = 0; c < k.lost.size(); ++c) out.lost[c] = k.lost[c].load(std::memory_order_relaxed);
    out.renewals = k.renewals.load(std::memory_order_relaxed);
    out.held = static_cast<std::uint64_t>(std::max<std::int64_t>(0, k.held.load(std::memory_order_relaxed)));
    out.waiting = static_cast<std::uint64_t>(std::max<std::int64_t>(0, k.waiting.load(std::memory_order_relaxed)));
  }
  m.renewal_seconds = renewal_.snapshot();
  m.watchdog_ticks_failed = watchdog_ticks_failed_.load(std::memory_order_relaxed);
  for (std::size_t s = 0; s < wakeups_.size(); ++s) m.wakeups[s] = wakeups_[s].load(std::memory_order_relaxed);
  m.statements = statements_.load(std::memory_order_relaxed);
  m.retries_lock_wait_timeout = retries_lock_wait_.load(std::memory_order_relaxed);
  m.retries_deadlock = retries_deadlock_.load(std::memory_order_relaxed);
  m.unknown_outcomes_reconciled = reconciled_.load(std::memory_order_relaxed);
  m.connections_opened = connections_opened_.load(std::memory_order_relaxed);
  m.failovers = failovers_.load(std::memory_order_relaxed);
  return m;
}

WakeSourceScope::WakeSourceScope(WakeSource source) noexcept : previous_(t_wake_source) { t_wake_source = source; }
WakeSourceScope::~WakeSourceScope() { t_wake_source = previous_; }
WakeSource WakeSourceScope::current() noexcept { return t_wake_source; }

}  // namespace dlock::details
