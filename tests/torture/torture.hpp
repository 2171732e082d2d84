// dlock_torture: a Jepsen-style fault-injection run. Worker processes take
// locks and do fenced read-modify-writes while a nemesis injects faults; a
// checker reads the audit trail and the workers' histories afterwards.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace dlock::torture {

// Lease lengths the workers use: watchdog mode renews a 2 s lease, lease
// mode takes 3 s. A pause of 4 s outlives both.
inline constexpr int kWatchdogMs = 2000;
inline constexpr int kLeaseMs = 3000;
inline constexpr int kPollMs = 1000;

inline std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct WorkerArgs {
  std::string url;
  std::string machine_id;    // "w<index>-<incarnation>"
  std::string history_path;  // appended to, one line per event
  std::string log_path;      // the worker's stderr
  int threads = 2;
  int names = 3;
  int pool_size = 4;
  bool fenced = true;
  std::int64_t until_us = 0;  // wall-clock end of the run
};

int run_worker(const WorkerArgs& args);

}  // namespace dlock::torture
