#include "herd.hpp"

#include <dlock/dlock.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace dlock::bench {

namespace {

using Clock = std::chrono::steady_clock;

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

Lock lock_of(DatabaseDistributedLock& client, bool fair, const std::string& name) {
  return fair ? client.get_fair_lock(name) : client.get_lock(name);
}

// Waits until every client has an acquire waiting (refused at least once).
void wait_until_waiting(const std::vector<std::unique_ptr<DatabaseDistributedLock>>& clients, bool fair) {
  const auto give_up = Clock::now() + std::chrono::seconds(120);
  const MetricKind kind = fair ? MetricKind::kFairLock : MetricKind::kLock;
  for (const auto& c : clients) {
    while (c->metrics().of(kind).waiting < 1) {
      if (Clock::now() > give_up) throw std::runtime_error("herd: the waiters did not all start waiting");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

}  // namespace

HerdResult run_herd(const std::string& url, const HerdCase& c, const HerdProbes& probes) {
  Options base = Options::from_url(url);
  base.table = "bench_herd";
  base.fast_wakeup = c.fast_wakeup;
  const std::string name = std::string(c.fair ? "fair-" : "lock-") + std::to_string(c.waiters) +
                           (c.fast_wakeup ? "-on" : "-off");
  const std::int64_t sessions_before = probes.global_status("Threads_connected");
  Options holder_options = base;
  holder_options.machine_id = "herd-holder";
  DatabaseDistributedLock holder(holder_options);
  Lock held = lock_of(holder, c.fair, name);
  held.lock();
  std::vector<std::unique_ptr<DatabaseDistributedLock>> clients;
  for (int i = 0; i < c.waiters; ++i) {
    Options o = base;
    o.machine_id = "herd-" + std::to_string(i);
    clients.push_back(std::make_unique<DatabaseDistributedLock>(o));
  }
  std::mutex mutex;
  std::vector<std::pair<int, Clock::time_point>> got;  // waiter, when its lock() returned
  std::vector<std::thread> threads;
  for (int i = 0; i < c.waiters; ++i) {
    threads.emplace_back([&, i] {
      Lock l = lock_of(*clients[static_cast<std::size_t>(i)], c.fair, name);
      l.lock();
      const auto at = Clock::now();
      {
        std::lock_guard<std::mutex> guard(mutex);
        got.emplace_back(i, at);
      }
      l.unlock();
    });
  }
  wait_until_waiting(clients, c.fair);
  // Their wake-up connections settle into line (or behind their queue
  // entries) within a moment of waiting.
  std::this_thread::sleep_for(std::chrono::milliseconds(500 + 10 * c.waiters));
  HerdResult r;
  const std::int64_t sessions = probes.global_status("Threads_connected") - sessions_before;
  r.connections_per_client = static_cast<double>(sessions - 1) / c.waiters;  // the holder has one pooled session
  probes.statements_since_last();
  const auto window_started = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(c.window_s));
  r.statements_per_s = static_cast<double>(probes.statements_since_last()) /
                       std::chrono::duration<double>(Clock::now() - window_started).count();
  // The fair lock's queue, first to last (the waiters' machine ids).
  std::vector<std::string> queue;
  if (c.fair) {
    ActivityQuery query;
    query.names = {name};
    query.types = {HoldType::kFairLock};
    for (const auto& w : holder.inspect(query).waiters) queue.push_back(w.machine);
  }
  const auto released = Clock::now();
  held.unlock();
  for (auto& t : threads) t.join();
  std::sort(got.begin(), got.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  r.drain_ms = got.empty() ? 0 : ms(got.back().second - released);
  r.longest_wait_ms = r.drain_ms;
  r.per_handoff_ms = r.drain_ms / c.waiters;
  r.in_order = static_cast<int>(got.size()) == c.waiters;
  if (c.fair) {
    std::vector<std::string> order;
    for (const auto& [i, at] : got) order.push_back("herd-" + std::to_string(i));
    r.in_order = r.in_order && order == queue;
  }
  return r;
}

}  // namespace dlock::bench
