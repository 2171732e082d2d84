// async_wake_probe: where an asynchronous lock+unlock cycle's extra time
// goes. Interleaves, cycle by cycle on one client, the synchronous cycle,
// the asynchronous one with the caller blocked in std::future::get() (as
// the benchmark's dlock-async contender waits), and the asynchronous one
// with the caller polling its futures (yielding between looks), and prints
// each median and its ratio to the synchronous one. If polling closes the
// gap, the gap is the caller's own wake-up from its blocking wait, which
// the library does not control.
//
//   build-release/bench/async_wake_probe URL [cycles]
#include <dlock/asio.hpp>
#include <dlock/dlock.hpp>

#include <boost/asio/use_future.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

template <class Future>
void poll_until_ready(Future&& f) {
  while (f.wait_for(std::chrono::seconds(0)) != std::future_status::ready) std::this_thread::yield();
  f.get();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: async_wake_probe URL [cycles]\n");
    return 2;
  }
  try {
    const int cycles = argc > 2 ? std::stoi(argv[2]) : 3000;
    dlock::Options options = dlock::Options::from_url(argv[1]);
    options.table = "bench_dlock";
    dlock::DatabaseDistributedLock client(options);
    const dlock::Owner owner = dlock::Owner::create();
    dlock::Lock sync = client.get_lock("probe-sync");
    dlock::Lock blocking = client.get_lock("probe-async-get", owner);
    dlock::Lock polling = client.get_lock("probe-async-poll", owner);
    std::vector<double> us[3];
    for (int i = 0; i < cycles; ++i) {
      for (int k = 0; k < 3; ++k) {
        const auto t0 = Clock::now();
        if (k == 0) {
          sync.lock();
          sync.unlock();
        } else if (k == 1) {
          dlock::async_lock(blocking, boost::asio::use_future).get();
          dlock::async_unlock(blocking, boost::asio::use_future).get();
        } else {
          poll_until_ready(dlock::async_lock(polling, boost::asio::use_future));
          poll_until_ready(dlock::async_unlock(polling, boost::asio::use_future));
        }
        us[k].push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      }
    }
    const char* const names[] = {"lock() + unlock()", "async, caller blocks in get()", "async, caller polls"};
    double base = 0;
    for (int k = 0; k < 3; ++k) {
      std::sort(us[k].begin(), us[k].end());
      const double median = us[k][us[k].size() / 2];
      if (k == 0) base = median;
      std::printf("%-30s median %7.1f us  %.2f x\n", names[k], median, median / base);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "async_wake_probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
