// The watchdog: renews every watchdog-mode hold of this client on the io
// thread, one statement per round (watchdog.cpp). Part of the engine
// (engine.hpp), whose holds and rows it works on; io thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <vector>

#include "engine/holds.hpp"
#include "runtime/io_thread.hpp"
#include "sql/hold_rows.hpp"

namespace dlock::details {

class Engine;

class Watchdog {
 public:
  explicit Watchdog(Engine& engine) : e_(engine) {}
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // One renewal round; false when some live hold was skipped (its row
  // locked by another transaction) and wants another round soon.
  bool tick(const IoThread::ConnectionSource& connection);
  // A round, and when it fails or skips a hold, another one soon
  // (Engine::kRenewRetry) until all get through: the holds' deadlines are
  // at stake.
  void tick_or_retry(const IoThread::ConnectionSource& connection);

 private:
  // The watchdog holds still within their local deadline; the others are
  // reported lost.
  std::vector<HoldRef> unexpired_watchdog_holds();
  // The renewal statement over `holds` (around rows locked by another
  // transaction when one was lately): how many it renewed, and when it was
  // sent.
  std::size_t run_renewal(const IoThread::ConnectionSource& connection, const std::vector<HeldRow>& holds,
                          std::chrono::steady_clock::time_point& sent);
  // After a renewal that renewed fewer rows than `live` has holds: reads
  // which are gone (reported lost) and which are live for how long. False
  // when some live hold still wants a renewal soon.
  bool settle_partial_renewal(Connection& connection, const std::vector<HoldRef>& live,
                              const std::vector<HeldRow>& holds, std::size_t renewed);
  void again_soon();
  void count_renewals(const std::vector<HoldRef>& renewed);

  Engine& e_;
  bool around_locked_rows_ = false;  // see tick
  bool retry_armed_ = false;         // see tick_or_retry
};

}  // namespace dlock::details
