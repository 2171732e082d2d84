#include "dlock/metrics.hpp"

#include "dlock/distributed_lock.hpp"
#include "engine/engine.hpp"

namespace dlock {

std::string_view to_string(MetricKind kind) noexcept {
  switch (kind) {
    case MetricKind::kLock: return "lock";
    case MetricKind::kFairLock: return "fair";
    case MetricKind::kSemaphore: return "semaphore";
    case MetricKind::kRead: return "read";
    case MetricKind::kWrite: return "write";
    case MetricKind::kMultiLock: return "multi";
    case MetricKind::kElection: return "election";
  }
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

Metrics DatabaseDistributedLock::metrics() const { return client_->metrics(); }

}  // namespace dlock
