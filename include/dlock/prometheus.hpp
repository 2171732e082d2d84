// dlock/prometheus.hpp
//
// A client's metrics (<dlock/metrics.hpp>) for Prometheus, through
// prometheus-cpp. Part of the optional dlock::prometheus target, built when
// prometheus-cpp is found (Debian: prometheus-cpp-dev); the core library
// does not depend on it.
//
//   prometheus::Exposer exposer("0.0.0.0:9464");
//   dlock::DatabaseDistributedLock client(options);
//   auto registration = dlock::prometheus::register_metrics(exposer, client);
//   // GET /metrics now shows dlock_acquisitions_total{kind="lock",result="acquired"} ...
//
// What is exposed (kind: lock, fair, semaphore, read, write, multi, election)
//   dlock_acquisitions_total{kind,result}   counter  result: acquired, timed_out, refused, cancelled, failed
//   dlock_reentrant_acquisitions_total{kind} counter
//   dlock_wait_seconds{kind}                histogram  time in acquire calls
//   dlock_hold_seconds{kind}                histogram  acquisition to last release
//   dlock_lost_holds_total{kind,cause}      counter  cause: lease_ran_out, taken_over, forced
//   dlock_renewals_total{kind}              counter
//   dlock_holds{kind}                       gauge    holds this client has now
//   dlock_waiters{kind}                     gauge    acquire calls waiting now
//   dlock_renewal_seconds                   histogram  the watchdog's renewal statements
//   dlock_watchdog_failed_ticks_total       counter
//   dlock_wakeups_total{source}             counter  source: local, bell, poll, lease_end
//   dlock_statements_total                  counter
//   dlock_statement_retries_total{reason}   counter  reason: lock_wait_timeout, deadlock
//   dlock_unknown_outcomes_reconciled_total counter
//   dlock_connections_opened_total          counter
//   dlock_failovers_total                   counter
//   dlock_pool_connections_in_use           gauge
//   dlock_pool_connections_max              gauge
// Every series also carries the labels given to register_metrics (for
// several clients in one process: {client="billing"}). The set of series is
// fixed: nothing is labelled by lock name.
//
// Values are read from client.metrics() at each scrape (no thread, no
// copy kept between scrapes).
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/labels.h>
#include <prometheus/metric_family.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dlock/distributed_lock.hpp"
#include "dlock/export.hpp"
#include "dlock/metrics.hpp"

namespace dlock::prometheus {

// The metric families of one snapshot, each series with `labels` added.
// Pure: for a Collectable of one's own, or a push gateway.
DLOCK_API std::vector<::prometheus::MetricFamily> to_families(const Metrics& metrics,
                                                              const ::prometheus::Labels& labels = {});

// A Collectable that reads a client's metrics at each Collect(). Safe to
// collect from any thread; detach() ends its use of the client.
class DLOCK_API MetricsCollectable final : public ::prometheus::Collectable {
 public:
  MetricsCollectable(const DatabaseDistributedLock& client, ::prometheus::Labels labels);
  std::vector<::prometheus::MetricFamily> Collect() const override;
  // From its return on, Collect() returns nothing and never touches the
  // client (waits for a Collect() in progress).
  void detach();

 private:
  mutable std::mutex mutex_;
  const DatabaseDistributedLock* client_;
  const ::prometheus::Labels labels_;
};

// Keeps a client's metrics registered with an exposer; its destruction
// unregisters them and detaches from the client, so it must end before the
// client and the exposer do. Movable, not copyable.
class DLOCK_API MetricsRegistration {
 public:
  MetricsRegistration() = default;
  MetricsRegistration(::prometheus::Exposer& exposer, std::shared_ptr<MetricsCollectable> collectable,
                      std::string uri);
  ~MetricsRegistration();
  MetricsRegistration(MetricsRegistration&& other) noexcept;
  MetricsRegistration& operator=(MetricsRegistration&& other) noexcept;
  MetricsRegistration(const MetricsRegistration&) = delete;
  MetricsRegistration& operator=(const MetricsRegistration&) = delete;

 private:
  void reset() noexcept;
  ::prometheus::Exposer* exposer_ = nullptr;
  std::shared_ptr<MetricsCollectable> collectable_;
  std::string uri_;
};

// One call: `client`'s metrics are served by `exposer` at `uri` (its
// default endpoint "/metrics", beside whatever else is registered there),
// with `labels` on every series. Keep the result for as long as they
// should be served, and no longer than `client` and `exposer` live.
// Throws what Exposer::RegisterCollectable throws.
[[nodiscard]] DLOCK_API MetricsRegistration register_metrics(::prometheus::Exposer& exposer,
                                                             const DatabaseDistributedLock& client,
                                                             ::prometheus::Labels labels = {},
                                                             const std::string& uri = "/metrics");

}  // namespace dlock::prometheus
