// Metrics -> Prometheus metric families (dlock/prometheus.hpp lists them).
#include <limits>

#include "dlock/prometheus.hpp"

namespace dlock::prometheus {

namespace {

using ::prometheus::ClientMetric;
using ::prometheus::MetricFamily;
using ::prometheus::MetricType;

constexpr std::array<MetricKind, kMetricKindCount> kKinds = {
    MetricKind::kLock,  MetricKind::kFairLock,  MetricKind::kSemaphore, MetricKind::kRead,
    MetricKind::kWrite, MetricKind::kMultiLock, MetricKind::kElection};

// Families are filled one series at a time, each with the caller's labels.
class Families {
 public:
  explicit Families(const ::prometheus::Labels& labels) : labels_(labels) {}

  MetricFamily& family(const char* name, const char* help, MetricType type) {
    out_.push_back(MetricFamily{name, help, type, {}});
    return out_.back();
  }
  ClientMetric& series(MetricFamily& f, std::initializer_list<std::pair<const char*, std::string_view>> own = {}) {
    ClientMetric m;
    for (const auto& [name, value] : labels_) m.label.push_back({name, value});
    for (const auto& [name, value] : own) m.label.push_back({name, std::string(value)});
    f.metric.push_back(std::move(m));
    return f.metric.back();
  }
  void counter(MetricFamily& f, double value,
               std::initializer_list<std::pair<const char*, std::string_view>> own = {}) {
    series(f, own).counter.value = value;
  }
  void gauge(MetricFamily& f, double value, std::initializer_list<std::pair<const char*, std::string_view>> own = {}) {
    series(f, own).gauge.value = value;
  }
  void histogram(MetricFamily& f, const HistogramSnapshot& h,
                 std::initializer_list<std::pair<const char*, std::string_view>> own = {}) {
    ClientMetric& m = series(f, own);
    m.histogram.sample_count = h.count;
    m.histogram.sample_sum = h.sum;
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < h.counts.size(); ++i) {
      cumulative += h.counts[i];
      const double bound =
          i < HistogramSnapshot::kBounds.size() ? HistogramSnapshot::kBounds[i] : std::numeric_limits<double>::infinity();
      m.histogram.bucket.push_back(ClientMetric::Bucket{cumulative, bound});
    }
  }
  std::vector<MetricFamily> take() { return std::move(out_); }

 private:
  const ::prometheus::Labels& labels_;
  std::vector<MetricFamily> out_;
};

double d(std::uint64_t v) { return static_cast<double>(v); }

}  // namespace

std::vector<MetricFamily> to_families(const Metrics& m, const ::prometheus::Labels& labels) {
  Families fs(labels);
  {
    auto& f = fs.family("dlock_acquisitions_total", "Acquire calls by kind of hold and how they ended",
                        MetricType::Counter);
    for (MetricKind k : kKinds)
      for (std::size_t r = 0; r < kAcquireResultCount; ++r)
        fs.counter(f, d(m.of(k).acquisitions[r]),
                   {{"kind", to_string(k)}, {"result", to_string(static_cast<AcquireResult>(r))}});
  }
  {
    auto& f = fs.family("dlock_reentrant_acquisitions_total", "Acquisitions that re-entered a hold of the owner",
                        MetricType::Counter);
    for (MetricKind k : kKinds) fs.counter(f, d(m.of(k).reentrant), {{"kind", to_string(k)}});
  }
  {
    auto& f = fs.family("dlock_wait_seconds", "Time in acquire calls, whatever their result", MetricType::Histogram);
    for (MetricKind k : kKinds) fs.histogram(f, m.of(k).wait_seconds, {{"kind", to_string(k)}});
  }
  {
    auto& f = fs.family("dlock_hold_seconds", "Time from acquisition to the release of the last count",
                        MetricType::Histogram);
    for (MetricKind k : kKinds) fs.histogram(f, m.of(k).hold_seconds, {{"kind", to_string(k)}});
  }
  {
    auto& f = fs.family("dlock_lost_holds_total", "Holds lost while their owner held them, by cause",
                        MetricType::Counter);
    for (MetricKind k : kKinds)
      for (std::size_t c = 0; c < kLossCauseCount; ++c)
        fs.counter(f, d(m.of(k).lost[c]), {{"kind", to_string(k)}, {"cause", to_string(static_cast<LossCause>(c))}});
  }
  {
    auto& f = fs.family("dlock_renewals_total", "Holds renewed by the watchdog", MetricType::Counter);
    for (MetricKind k : kKinds) fs.counter(f, d(m.of(k).renewals), {{"kind", to_string(k)}});
  }
  {
    auto& f = fs.family("dlock_holds", "Holds this client has now", MetricType::Gauge);
    for (MetricKind k : kKinds) fs.gauge(f, d(m.of(k).held), {{"kind", to_string(k)}});
  }
  {
    auto& f = fs.family("dlock_waiters", "Acquire calls waiting now", MetricType::Gauge);
    for (MetricKind k : kKinds) fs.gauge(f, d(m.of(k).waiting), {{"kind", to_string(k)}});
  }
  fs.histogram(fs.family("dlock_renewal_seconds", "Round trips of the watchdog's renewal statements",
                         MetricType::Histogram),
               m.renewal_seconds);
  fs.counter(fs.family("dlock_watchdog_failed_ticks_total", "Watchdog ticks that failed with a database error",
                       MetricType::Counter),
             d(m.watchdog_ticks_failed));
  {
    auto& f = fs.family("dlock_wakeups_total", "Wake-ups of waiting acquire calls, by source", MetricType::Counter);
    for (std::size_t s = 0; s < kWakeSourceCount; ++s)
      fs.counter(f, d(m.wakeups[s]), {{"source", to_string(static_cast<WakeSource>(s))}});
  }
  fs.counter(fs.family("dlock_statements_total", "SQL statements sent", MetricType::Counter), d(m.statements));
  {
    auto& f = fs.family("dlock_statement_retries_total", "Statements run again after a rolled-back attempt",
                        MetricType::Counter);
    fs.counter(f, d(m.retries_lock_wait_timeout), {{"reason", "lock_wait_timeout"}});
    fs.counter(f, d(m.retries_deadlock), {{"reason", "deadlock"}});
  }
  fs.counter(fs.family("dlock_unknown_outcomes_reconciled_total",
                       "Statements whose connection died, settled by reading what they did", MetricType::Counter),
             d(m.unknown_outcomes_reconciled));
  fs.counter(fs.family("dlock_connections_opened_total", "Database connections opened", MetricType::Counter),
             d(m.connections_opened));
  fs.counter(fs.family("dlock_failovers_total", "Moves to the next server of the failover list", MetricType::Counter),
             d(m.failovers));
  fs.gauge(fs.family("dlock_pool_connections_in_use", "Pooled connections lent out now", MetricType::Gauge),
           d(m.pool_in_use));
  fs.gauge(fs.family("dlock_pool_connections_max", "The pool's bound (Options::pool_size)", MetricType::Gauge),
           d(m.pool_size));
  return fs.take();
}

MetricsCollectable::MetricsCollectable(const DatabaseDistributedLock& client, ::prometheus::Labels labels)
    : client_(&client), labels_(std::move(labels)) {}

std::vector<MetricFamily> MetricsCollectable::Collect() const {
  std::lock_guard<std::mutex> guard(mutex_);
  if (client_ == nullptr) return {};
  return to_families(client_->metrics(), labels_);
}

void MetricsCollectable::detach() {
  std::lock_guard<std::mutex> guard(mutex_);
  client_ = nullptr;
}

}  // namespace dlock::prometheus
