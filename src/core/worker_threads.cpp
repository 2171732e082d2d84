#include "core/worker_threads.hpp"

namespace dlock::details {

WorkerThreads::WorkerThreads(std::size_t threads, std::chrono::microseconds spin)
    : spin_(spin), io_(static_cast<int>(threads)), work_(io_.get_executor()) {
  threads_.reserve(threads);
  for (std::size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
}

WorkerThreads::~WorkerThreads() { join(); }

void WorkerThreads::join() {
  work_.reset();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void WorkerThreads::run() {
  using Clock = std::chrono::steady_clock;
  // run_one() returns 0 once there is no work left at all (after join()).
  while (io_.run_one() != 0) {
    bool expected = false;
    if (spin_.count() <= 0 || !spinning_.compare_exchange_strong(expected, true)) continue;
    // This thread is the one that stays hot: poll for the next job a
    // moment, from the last one it ran.
    auto until = Clock::now() + spin_;
    while (Clock::now() < until && !io_.stopped()) {
      if (io_.poll_one() != 0) {
        until = Clock::now() + spin_;
      } else {
        std::this_thread::yield();
      }
    }
    spinning_ = false;
  }
}

}  // namespace dlock::details
