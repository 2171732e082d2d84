// The herd scenario: N waiting clients (each its own DatabaseDistributedLock,
// default options) on one name held by another client; the holder lets go
// and every waiter takes the name once and lets it go at once.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace dlock::bench {

struct HerdCase {
  bool fair = false;         // the fair lock, else the lock
  int waiters = 1;           // waiting clients
  bool fast_wakeup = true;   // Options::fast_wakeup of every client
  double window_s = 3;       // how long the waiting load is counted
};

struct HerdResult {
  double drain_ms = 0;        // the holder's unlock() to the last waiter's lock() returning
  double per_handoff_ms = 0;  // drain_ms / waiters
  double longest_wait_ms = 0; // the last waiter's wait after the holder's unlock()
  double statements_per_s = 0;  // server-counted while the waiters wait
  double connections_per_client = 0;  // server sessions per waiting client while they wait
  bool in_order = true;       // every waiter had the name (the fair lock: in queue order)
};

// Server probes: statements since the last call (not counting the probe),
// and one global status value.
struct HerdProbes {
  std::function<std::int64_t()> statements_since_last;
  std::function<std::int64_t(const std::string& status)> global_status;
};

HerdResult run_herd(const std::string& url, const HerdCase& c, const HerdProbes& probes);

}  // namespace dlock::bench
