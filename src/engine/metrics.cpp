// What the engine counts for DatabaseDistributedLock::metrics(): the end of
// every acquire call (both drivers), and the gauges read at the snapshot.
#include "dlock/errors.hpp"
#include "engine/engine.hpp"

namespace dlock::details {

namespace {
bool is_cancelled(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Cancelled&) {
    return true;
  } catch (...) {
    return false;
  }
}
}  // namespace

void AcquireCounting::count_acquire(MetricKind kind, SteadyTime started, bool acquired, bool single_attempt, bool cancelled,
                           const std::exception_ptr& error) noexcept {
  MetricCounters* const m = metrics_.get();
  if (m == nullptr) return;
  AcquireResult result = AcquireResult::kTimedOut;
  if (error) {
    result = is_cancelled(error) ? AcquireResult::kCancelled : AcquireResult::kFailed;
  } else if (acquired) {
    result = AcquireResult::kAcquired;
  } else if (cancelled) {
    result = AcquireResult::kCancelled;
  } else if (single_attempt) {
    result = AcquireResult::kRefused;
  }
  m->acquire_ended(kind, result, std::chrono::steady_clock::now() - started);
}

void AcquireCounting::timed_wait_ended(bool forever, SteadyTime deadline) noexcept {
  if (metrics_ && (forever || std::chrono::steady_clock::now() < deadline)) metrics_->woke(WakeSource::kLeaseEnd);
}

Metrics Engine::metrics() const {
  if (!metrics_) return Metrics{};
  Metrics m = metrics_->snapshot();
  const auto held = holds_.live_by_kind();
  for (const auto& k : kKinds)
    if (k.hold_type) m.kinds[index(k.metric)].held = held[static_cast<std::size_t>(k.kind)];
  m.pool_in_use = pool_.in_use_count();
  m.pool_size = pool_.capacity();
  return m;
}

}  // namespace dlock::details
