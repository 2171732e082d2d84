// Builds against the installed adapter (dlock::prometheus) only: serves a
// client's metrics on an exposer and prints how many families one snapshot
// makes.
#include <dlock/dlock.hpp>
#include <dlock/prometheus.hpp>

#include <iostream>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cout << "families " << dlock::prometheus::to_families(dlock::Metrics{}).size() << "\n";
    return 0;
  }
  dlock::DatabaseDistributedLock client(dlock::Options::from_url(argv[1]));
  prometheus::Exposer exposer("127.0.0.1:0", 1);
  const auto registration = dlock::prometheus::register_metrics(exposer, client, {{"client", "consumer"}});
  client.lock("consumer-prometheus");
  client.unlock("consumer-prometheus");
  const dlock::Metrics m = client.metrics();
  std::cout << "families " << dlock::prometheus::to_families(m).size() << ", acquired "
            << m.of(dlock::MetricKind::kLock).acquisitions[dlock::index(dlock::AcquireResult::kAcquired)] << "\n";
  return 0;
}
