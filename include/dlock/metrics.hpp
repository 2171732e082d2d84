// dlock/metrics.hpp
//
// What a client has done and how long it took: acquisitions by result, wait
// and hold times, lost holds by cause, renewals, wake-ups by source,
// statements, retries, connections and failovers, and gauges of what is held
// and waited for now. Kept per kind of hold (never per name, so the number of
// series is fixed), counted with relaxed atomics in the library itself: no
// dependency, and nothing to set up.
//
//   const dlock::Metrics m = client.metrics();
//   const auto& locks = m.of(dlock::MetricKind::kLock);
//   std::cout << locks.acquisitions[dlock::index(dlock::AcquireResult::kTimedOut)]
//             << " lock waits timed out\n";
//
// For Prometheus, <dlock/prometheus.hpp> (the optional dlock::prometheus
// target) exposes the same snapshot at each scrape.
//
// Semantics
//   Counters only grow, from 0 when the client was made. Gauges are what is
//   true at the snapshot. A snapshot is read field by field, without a lock:
//   counters that move together (a histogram's buckets and its count) may be
//   a few events apart while operations run; each one is exact once they stop.
//   Options::metrics = false turns the counting off (every field stays 0,
//   gauges included). It is on by default: a few relaxed atomic additions
//   per call, no lock, no I/O.
//
// Thread safety: metrics() may be called from any thread at any time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "dlock/export.hpp"

namespace dlock {

// The kinds of hold metrics are kept for: the primitives and the two sides
// of a read-write lock. A MultiLock's acquisitions count here, not under
// kLock (its names are plain locks in the database and in inspect()).
enum class MetricKind : std::uint8_t {
  kLock,       // get_lock and the name-based members
  kFairLock,   // get_fair_lock
  kSemaphore,  // get_semaphore: one acquisition per permit
  kRead,       // the read side of get_read_write_lock
  kWrite,      // the write side of get_read_write_lock
  kMultiLock,  // get_multi_lock: one acquisition per set
  kElection,   // get_election: campaigns
};
inline constexpr std::size_t kMetricKindCount = 7;

// How an acquire call ended.
enum class AcquireResult : std::uint8_t {
  kAcquired,   // the owner holds it (re-entries included; see KindMetrics::reentrant)
  kTimedOut,   // refused until its wait (> 0) ran out
  kRefused,    // refused by its only attempt (try_lock(), a wait <= 0)
  kCancelled,  // ended by cancel(owner), a cancellation slot, or the client's destruction
  kFailed,     // threw: BackendError, LockLostError, a misuse error (not bad input: that is never counted)
};
inline constexpr std::size_t kAcquireResultCount = 5;

// Why a hold this client had was lost (found while its owner still held it).
// A loss is found by a statement that no longer matches the hold (a
// renewal, a re-entry, an unlock, a check such as is_held_by_current_thread).
enum class LossCause : std::uint8_t {
  kLeaseRanOut,  // its lease ended unrenewed (a fixed lease, renewals that failed); the other cases' fallback
  kTakenOver,    // the row read when it was found showed another holder
  kForced,       // freed while its lease still ran: force_unlock (here or elsewhere)
};
inline constexpr std::size_t kLossCauseCount = 3;

// What woke a waiting acquire to try again.
enum class WakeSource : std::uint8_t {
  kLocal,     // a release, loss or force-unlock in this client
  kBell,      // a release in another client rang this client's bell (fast wake-up)
  kPoll,      // the poller found the name free
  kLeaseEnd,  // the wait ended when the blocking hold's lease was due to end
};
inline constexpr std::size_t kWakeSourceCount = 4;

// "lock", "fair", "semaphore", "read", "write", "multi", "election".
DLOCK_API std::string_view to_string(MetricKind kind) noexcept;
// "acquired", "timed_out", "refused", "cancelled", "failed".
DLOCK_API std::string_view to_string(AcquireResult result) noexcept;
// "lease_ran_out", "taken_over", "forced".
DLOCK_API std::string_view to_string(LossCause cause) noexcept;
// "local", "bell", "poll", "lease_end".
DLOCK_API std::string_view to_string(WakeSource source) noexcept;

// The position of an enumerator in the arrays below.
constexpr std::size_t index(MetricKind v) noexcept { return static_cast<std::size_t>(v); }
constexpr std::size_t index(AcquireResult v) noexcept { return static_cast<std::size_t>(v); }
constexpr std::size_t index(LossCause v) noexcept { return static_cast<std::size_t>(v); }
constexpr std::size_t index(WakeSource v) noexcept { return static_cast<std::size_t>(v); }

// A histogram of durations in seconds, with fixed buckets from 100 us to
// 10 min (the same for every histogram, so they can be added up).
struct HistogramSnapshot {
  // Upper bounds, in seconds, of every bucket but the last (which has none:
  // +Inf). A duration d lands in the first bucket with d <= bound.
  static constexpr std::array<double, 21> kBounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                     0.025,  0.05,    0.1,    0.25,  0.5,    1,     2.5,
                                                     5,      10,      30,     60,    120,   300,   600};
  // Per bucket, not cumulative: counts[i] for bounds[i-1] < d <= bounds[i];
  // counts[21] for d > 600 s.
  std::array<std::uint64_t, kBounds.size() + 1> counts{};
  std::uint64_t count = 0;  // the sum of counts
  double sum = 0;           // seconds, over every observation (microsecond resolution)
};

// What one kind of hold did.
struct KindMetrics {
  // Acquire calls by how they ended (index with index(AcquireResult)).
  std::array<std::uint64_t, kAcquireResultCount> acquisitions{};
  // Acquisitions that re-entered a hold the owner had (also in kAcquired).
  std::uint64_t reentrant = 0;
  // Time in each acquire call, from the call to its end, whatever the result.
  HistogramSnapshot wait_seconds;
  // Time from a hold's acquisition (or handoff) to the release of its last
  // count by its owner. A lost hold is not observed here (see lost).
  HistogramSnapshot hold_seconds;
  // Holds lost, by cause (index with index(LossCause)).
  std::array<std::uint64_t, kLossCauseCount> lost{};
  // Holds the watchdog renewed (each hold once per renewal).
  std::uint64_t renewals = 0;
  // Gauges: holds this client has now (for kMultiLock, sets acquired and not
  // released; their names count under kLock too), and acquire calls waiting
  // now (refused at least once and not yet ended).
  std::uint64_t held = 0;
  std::uint64_t waiting = 0;
};

// A client's metrics (DatabaseDistributedLock::metrics()).
struct Metrics {
  std::array<KindMetrics, kMetricKindCount> kinds{};
  const KindMetrics& of(MetricKind kind) const noexcept { return kinds[index(kind)]; }

  // The watchdog: its renewal statements' round trips, and ticks that failed
  // (a database error left holds unrenewed until the next tick).
  HistogramSnapshot renewal_seconds;
  std::uint64_t watchdog_ticks_failed = 0;
  // Wake-ups of waiting acquire calls by source (index with
  // index(WakeSource)): one per name woken, however many waiters it woke.
  std::array<std::uint64_t, kWakeSourceCount> wakeups{};
  // Statements sent (each retry counts), and the retries after a lock wait
  // timeout (1205) and after a deadlock or Galera certification conflict (1213).
  std::uint64_t statements = 0;
  std::uint64_t retries_lock_wait_timeout = 0;
  std::uint64_t retries_deadlock = 0;
  // Statements whose connection died mid-way, settled by reading what they
  // did (never by running them blindly again).
  std::uint64_t unknown_outcomes_reconciled = 0;
  // Connections opened (pool, io thread, wake-up connections), and moves to
  // the next server of Options::failover_servers.
  std::uint64_t connections_opened = 0;
  std::uint64_t failovers = 0;
  // Gauges: pooled connections lent out now, and the pool's bound.
  std::uint64_t pool_in_use = 0;
  std::uint64_t pool_size = 0;
};

}  // namespace dlock
