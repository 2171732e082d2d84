#include "dlock/metrics.hpp"

#include "dlock/distributed_lock.hpp"
#include "base/kinds_table.hpp"
#include "engine/engine.hpp"

namespace dlock {

std::string_view to_string(MetricKind kind) noexcept {
  if (kind == MetricKind::kMultiLock) return "multi";  // names of kind kLock, counted per set
  for (const auto& k : details::kKinds)
    if (k.metric == kind && k.hold_type) return k.name;
  return "?";
}

std::string_view to_string(AcquireResult result) noexcept {
  switch (result) {
    case AcquireResult::kAcquired: return "acquired";
    case AcquireResult::kTimedOut: return "timed_out";
    case AcquireResult::kRefused: return "refused";
    case AcquireResult::kCancelled: return "cancelled";
    case AcquireResult::kFailed: return "failed";
  }
  return "?";
}

std::string_view to_string(LossCause cause) noexcept {
  switch (cause) {
    case LossCause::kLeaseRanOut: return "lease_ran_out";
    case LossCause::kTakenOver: return "taken_over";
    case LossCause::kForced: return "forced";
  }
  return "?";
}

std::string_view to_string(WakeSource source) noexcept {
  switch (source) {
    case WakeSource::kLocal: return "local";
    case WakeSource::kBell: return "bell";
    case WakeSource::kPoll: return "poll";
    case WakeSource::kLeaseEnd: return "lease_end";
  }
  return "?";
}

Metrics DatabaseDistributedLock::metrics() const { return engine_->metrics(); }

}  // namespace dlock
