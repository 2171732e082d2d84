// contention_demo: one worker of the two-process demo.
//
//   contention_demo URL WORKER ROUNDS LOG_FILE
//
// Each round takes the lock "demo:shared-log" with std::lock_guard, then does
// a fenced write: it appends "fence worker round" to LOG_FILE only if its
// fence is not older than the newest one already there (what a real resource
// would check), holds the lock briefly, and lets go. Run two at once and the
// log shows them taking turns with strictly increasing fences.
#include <dlock/dlock.hpp>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

namespace {

// The newest fence recorded in the log (the resource's own check).
std::uint64_t newest_fence(const std::string& path) {
  std::ifstream in(path);
  std::uint64_t newest = 0;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::uint64_t fence = 0;
    if (fields >> fence && fence > newest) newest = fence;
  }
  return newest;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: contention_demo URL WORKER ROUNDS LOG_FILE\n";
    return 2;
  }
  const std::string worker = argv[2];
  const int rounds = std::stoi(argv[3]);
  const std::string log_path = argv[4];
  try {
    dlock::DatabaseDistributedLock client(dlock::Options::from_url(argv[1]));
    dlock::Lock lock = client.get_lock("demo:shared-log");
    for (int round = 1; round <= rounds; ++round) {
      if (round > 1) std::this_thread::sleep_for(std::chrono::milliseconds(250));  // work outside the lock
      std::lock_guard<dlock::Lock> guard(lock);
      const std::uint64_t fence = lock.fencing_token();
      if (fence < newest_fence(log_path)) {
        std::cout << worker << ": refused a stale write with fence " << fence << "\n";
        continue;
      }
      std::ofstream(log_path, std::ios::app) << fence << " " << worker << " " << round << "\n";
      std::cout << worker << ": round " << round << " holds the lock with fence " << fence << std::endl;
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
    }
  } catch (const std::exception& e) {
    std::cerr << worker << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}
