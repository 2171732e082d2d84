// The metrics' counters without a database: bucket bounds, histogram
// sums, the names operators see, and the option that turns counting off.
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include "metrics/metric_counters.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using details::DurationHistogram;
using details::MetricCounters;

TEST(MetricCounters, ADurationLandsInTheFirstBucketWhoseBoundIsNotBelowIt) {
  EXPECT_EQ(DurationHistogram::bucket_of(0us), 0u);
  EXPECT_EQ(DurationHistogram::bucket_of(100us), 0u);  // d <= 100 us
  EXPECT_EQ(DurationHistogram::bucket_of(101us), 1u);
  EXPECT_EQ(DurationHistogram::bucket_of(1ms), 3u);
  EXPECT_EQ(DurationHistogram::bucket_of(2500us), 4u);
  EXPECT_EQ(DurationHistogram::bucket_of(600s), HistogramSnapshot::kBounds.size() - 1);
  EXPECT_EQ(DurationHistogram::bucket_of(601s), HistogramSnapshot::kBounds.size());  // +Inf
  EXPECT_EQ(HistogramSnapshot::kBounds.front(), 0.0001);
  EXPECT_EQ(HistogramSnapshot::kBounds.back(), 600.0);
}

TEST(MetricCounters, AHistogramKeepsCountsAndTheSumInSeconds) {
  DurationHistogram h;
  h.observe(50us);
  h.observe(3ms);
  h.observe(20min);
  h.observe(-5us);  // a clock that went back counts as 0
  const HistogramSnapshot s = h.snapshot();
  EXPECT_EQ(s.count, 4u);
  EXPECT_EQ(s.counts[0], 2u);
  EXPECT_EQ(s.counts[5], 1u);  // 2.5 ms < 3 ms <= 5 ms
  EXPECT_EQ(s.counts.back(), 1u);
  EXPECT_NEAR(s.sum, 1200.00305, 1e-9);
}

TEST(MetricCounters, EachCounterMovesOnlyItsOwnField) {
  MetricCounters m;
  m.acquire_ended(MetricKind::kSemaphore, AcquireResult::kTimedOut, 2s);
  m.reentered(MetricKind::kLock);
  m.hold_ended(MetricKind::kWrite, 10ms);
  m.lost(MetricKind::kElection, LossCause::kForced);
  m.renewed(MetricKind::kRead, 3);
  m.renewal_statement(400us);
  m.watchdog_tick_failed();
  m.woke(WakeSource::kBell);
  m.statement();
  m.retry(1205);
  m.retry(1213);
  m.reconciled();
  m.connection_opened();
  m.failover();
  m.waiting(MetricKind::kFairLock, 1);
  m.sets_held(1);
  const Metrics s = m.snapshot();
  const auto& sem = s.of(MetricKind::kSemaphore);
  EXPECT_EQ(sem.acquisitions[index(AcquireResult::kTimedOut)], 1u);
  EXPECT_EQ(sem.acquisitions[index(AcquireResult::kAcquired)], 0u);
  EXPECT_EQ(sem.wait_seconds.count, 1u);
  EXPECT_EQ(sem.wait_seconds.counts[13], 1u);  // 1 s < 2 s <= 2.5 s
  EXPECT_EQ(s.of(MetricKind::kLock).reentrant, 1u);
  EXPECT_EQ(s.of(MetricKind::kLock).wait_seconds.count, 0u);
  EXPECT_EQ(s.of(MetricKind::kWrite).hold_seconds.count, 1u);
  EXPECT_EQ(s.of(MetricKind::kElection).lost[index(LossCause::kForced)], 1u);
  EXPECT_EQ(s.of(MetricKind::kRead).renewals, 3u);
  EXPECT_EQ(s.renewal_seconds.count, 1u);
  EXPECT_EQ(s.watchdog_ticks_failed, 1u);
  EXPECT_EQ(s.wakeups[index(WakeSource::kBell)], 1u);
  EXPECT_EQ(s.wakeups[index(WakeSource::kLocal)], 0u);
  EXPECT_EQ(s.statements, 1u);
  EXPECT_EQ(s.retries_lock_wait_timeout, 1u);
  EXPECT_EQ(s.retries_deadlock, 1u);
  EXPECT_EQ(s.unknown_outcomes_reconciled, 1u);
  EXPECT_EQ(s.connections_opened, 1u);
  EXPECT_EQ(s.failovers, 1u);
  EXPECT_EQ(s.of(MetricKind::kFairLock).waiting, 1u);
  EXPECT_EQ(s.of(MetricKind::kMultiLock).held, 1u);
}

TEST(MetricCounters, WakeUpsCountUnderTheSourceOfTheThreadsScope) {
  EXPECT_EQ(details::WakeSourceScope::current(), WakeSource::kLocal);
  {
    const details::WakeSourceScope poll(WakeSource::kPoll);
    EXPECT_EQ(details::WakeSourceScope::current(), WakeSource::kPoll);
    {
      const details::WakeSourceScope bell(WakeSource::kBell);
      EXPECT_EQ(details::WakeSourceScope::current(), WakeSource::kBell);
    }
    EXPECT_EQ(details::WakeSourceScope::current(), WakeSource::kPoll);
  }
  EXPECT_EQ(details::WakeSourceScope::current(), WakeSource::kLocal);
}

TEST(MetricCounters, NamesAreStableLabelValues) {
  EXPECT_EQ(to_string(MetricKind::kLock), "lock");
  EXPECT_EQ(to_string(MetricKind::kFairLock), "fair");
  EXPECT_EQ(to_string(MetricKind::kMultiLock), "multi");
  EXPECT_EQ(to_string(MetricKind::kElection), "election");
  EXPECT_EQ(to_string(AcquireResult::kTimedOut), "timed_out");
  EXPECT_EQ(to_string(LossCause::kLeaseRanOut), "lease_ran_out");
  EXPECT_EQ(to_string(WakeSource::kLeaseEnd), "lease_end");
}

TEST(MetricCounters, TheOptionIsOnByDefaultAndTheUrlTurnsItOff) {
  EXPECT_TRUE(Options{}.metrics);
  EXPECT_FALSE(Options::from_url("mysql://u@h/db?metrics=false").metrics);
  EXPECT_TRUE(Options::from_url("mysql://u@h/db?metrics=1").metrics);
  EXPECT_THROW((void)Options::from_url("mysql://u@h/db?metrics=maybe"), std::invalid_argument);
}

}  // namespace
}  // namespace dlock
