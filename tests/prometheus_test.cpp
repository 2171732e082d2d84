// The Prometheus adapter (dlock/prometheus.hpp): the families a snapshot
// becomes, and a real exposer scraped over HTTP while a client works.
#include <arpa/inet.h>
#include <dlock/dlock.hpp>
#include <dlock/prometheus.hpp>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <map>
#include <sstream>
#include <string>

#include "support/test_env.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;

const ::prometheus::MetricFamily* find_family(const std::vector<::prometheus::MetricFamily>& fs, const std::string& name) {
  for (const auto& f : fs)
    if (f.name == name) return &f;
  return nullptr;
}

std::string label(const ::prometheus::ClientMetric& m, const std::string& name) {
  for (const auto& l : m.label)
    if (l.name == name) return l.value;
  return "";
}

// docs/security.md: a client's metrics carry no connection detail, so no
// label can show its password (labels are kinds, results, causes and the
// caller's own).
TEST(PrometheusFamilies, NoLabelCarriesTheClientsPassword) {
  Options o = test::fresh_options();
  o.user = "dlock_prom_secret";
  o.password = "Prom-S3cret-9x";
  test::execute_sql("CREATE USER IF NOT EXISTS '" + o.user + "'@'127.0.0.1' IDENTIFIED BY '" + o.password + "'");
  test::execute_sql("GRANT ALL PRIVILEGES ON *.* TO '" + o.user + "'@'127.0.0.1'");
  DatabaseDistributedLock client(o);
  client.lock("n");
  client.unlock("n");
  for (const auto& f : prometheus::to_families(client.metrics(), {{"client", "billing"}})) {
    EXPECT_EQ(f.help.find(o.password), std::string::npos) << f.name;
    for (const auto& m : f.metric)
      for (const auto& l : m.label) {
        EXPECT_EQ(l.value.find(o.password), std::string::npos) << f.name << " " << l.name;
        EXPECT_EQ(l.value.find(o.user), std::string::npos) << f.name << " " << l.name;
      }
  }
}

TEST(PrometheusFamilies, ASnapshotBecomesFixedFamiliesWithCumulativeBuckets) {
  Metrics m;
  m.kinds[index(MetricKind::kSemaphore)].acquisitions[index(AcquireResult::kTimedOut)] = 4;
  HistogramSnapshot& wait = m.kinds[index(MetricKind::kLock)].wait_seconds;
  wait.counts[0] = 2;
  wait.counts[3] = 1;
  wait.counts.back() = 1;
  wait.count = 4;
  wait.sum = 700.5;
  m.retries_deadlock = 3;
  m.pool_size = 8;
  const auto fs = prometheus::to_families(m, {{"client", "billing"}});

  const auto* acq = find_family(fs, "dlock_acquisitions_total");
  ASSERT_NE(acq, nullptr);
  EXPECT_EQ(acq->type, ::prometheus::MetricType::Counter);
  EXPECT_EQ(acq->metric.size(), kMetricKindCount * kAcquireResultCount) << "every series, zero or not";
  bool found = false;
  for (const auto& s : acq->metric) {
    EXPECT_EQ(label(s, "client"), "billing");
    if (label(s, "kind") == "semaphore" && label(s, "result") == "timed_out") {
      EXPECT_EQ(s.counter.value, 4.0);
      found = true;
    }
  }
  EXPECT_TRUE(found);

  const auto* hist = find_family(fs, "dlock_wait_seconds");
  ASSERT_NE(hist, nullptr);
  EXPECT_EQ(hist->type, ::prometheus::MetricType::Histogram);
  const ::prometheus::ClientMetric& lock = hist->metric[index(MetricKind::kLock)];
  EXPECT_EQ(label(lock, "kind"), "lock");
  EXPECT_EQ(lock.histogram.sample_count, 4u);
  EXPECT_EQ(lock.histogram.sample_sum, 700.5);
  ASSERT_EQ(lock.histogram.bucket.size(), HistogramSnapshot::kBounds.size() + 1);
  EXPECT_EQ(lock.histogram.bucket[0].upper_bound, 0.0001);
  EXPECT_EQ(lock.histogram.bucket[0].cumulative_count, 2u);
  EXPECT_EQ(lock.histogram.bucket[3].cumulative_count, 3u);
  EXPECT_EQ(lock.histogram.bucket[20].cumulative_count, 3u);
  EXPECT_TRUE(std::isinf(lock.histogram.bucket.back().upper_bound));
  EXPECT_EQ(lock.histogram.bucket.back().cumulative_count, 4u);

  const auto* retries = find_family(fs, "dlock_statement_retries_total");
  ASSERT_NE(retries, nullptr);
  ASSERT_EQ(retries->metric.size(), 2u);
  EXPECT_EQ(label(retries->metric[1], "reason"), "deadlock");
  EXPECT_EQ(retries->metric[1].counter.value, 3.0);
  const auto* pool = find_family(fs, "dlock_pool_connections_max");
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->type, ::prometheus::MetricType::Gauge);
  EXPECT_EQ(pool->metric.at(0).gauge.value, 8.0);
  for (const auto& f : fs) {
    EXPECT_EQ(f.name.rfind("dlock_", 0), 0u) << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
    if (f.type == ::prometheus::MetricType::Counter) {
      EXPECT_EQ(f.name.substr(f.name.size() - 6), "_total") << f.name;
    }
  }
}

// GET `path` from 127.0.0.1:`port`; the body ("" on failure).
std::string http_get(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return "";
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\nAccept: text/plain\r\n\r\n";
  if (::send(fd, request.data(), request.size(), 0) != static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return "";
  }
  std::string response;
  char buffer[8192];
  for (;;) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    response.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  const auto body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

// The value of the sample line `series` (name and labels exactly as
// exposed) in a text exposition, or NaN.
double sample(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return std::nan("");
}

TEST(PrometheusExposer, AScrapeShowsWhatTheClientDidWithItsLabels) {
  ::prometheus::Exposer exposer("127.0.0.1:0", 1);
  ASSERT_FALSE(exposer.GetListeningPorts().empty());
  const int port = exposer.GetListeningPorts().front();
  const Options o = test::fresh_options();
  DatabaseDistributedLock client(o);
  DatabaseDistributedLock other(test::same_table(o));
  auto registration = prometheus::register_metrics(exposer, client, {{"client", "orders"}});

  client.lock("scraped");
  EXPECT_FALSE(other.try_lock("scraped"));
  std::string text = http_get(port, "/metrics");
  ASSERT_FALSE(text.empty());
  EXPECT_NE(text.find("# TYPE dlock_acquisitions_total counter"), std::string::npos) << text.substr(0, 400);
  EXPECT_NE(text.find("# TYPE dlock_wait_seconds histogram"), std::string::npos);
  EXPECT_EQ(sample(text, R"(dlock_acquisitions_total{client="orders",kind="lock",result="acquired"})"), 1.0);
  EXPECT_EQ(sample(text, R"(dlock_holds{client="orders",kind="lock"})"), 1.0);
  EXPECT_EQ(sample(text, R"(dlock_wait_seconds_count{client="orders",kind="lock"})"), 1.0);
  EXPECT_EQ(sample(text, R"(dlock_wait_seconds_bucket{client="orders",kind="lock",le="+Inf"})"), 1.0);
  EXPECT_GE(sample(text, R"(dlock_statements_total{client="orders"})"), 1.0);

  client.unlock("scraped");
  text = http_get(port, "/metrics");
  EXPECT_EQ(sample(text, R"(dlock_holds{client="orders",kind="lock"})"), 0.0);
  EXPECT_EQ(sample(text, R"(dlock_hold_seconds_count{client="orders",kind="lock"})"), 1.0);
  EXPECT_EQ(sample(text, R"(dlock_acquisitions_total{client="orders",kind="lock",result="refused"})"), 0.0)
      << "the refusal was the other client's, not this one's";

  // Unregistered: the client is no longer read.
  registration = prometheus::MetricsRegistration();
  text = http_get(port, "/metrics");
  EXPECT_EQ(text.find("dlock_acquisitions_total"), std::string::npos);
}

}  // namespace
}  // namespace dlock
