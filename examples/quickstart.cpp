// The README's example, compiled with the project so it cannot rot.
//   quickstart mysql://user:password@host:port/database
#include <dlock/dlock.hpp>

#include <chrono>
#include <iostream>
#include <mutex>
#include <thread>

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  if (argc != 2) {
    std::cerr << "usage: quickstart mysql://user:password@host:port/database\n";
    return 2;
  }
  dlock::DatabaseDistributedLock client(dlock::Options::from_url(argv[1]));

  // Blocking, watchdog-renewed, reentrant.
  client.lock("billing:customer:42");
  std::cout << "fence " << client.fencing_token("billing:customer:42") << "\n";
  client.unlock("billing:customer:42");

  // Standard guards work with a Lock handle; unlock() in a guard's
  // destructor never throws for database trouble.
  dlock::Lock report = client.get_lock("nightly-report");
  {
    std::lock_guard<dlock::Lock> guard(report);
    std::cout << "report fence " << report.fencing_token() << "\n";
  }
  std::unique_lock<dlock::Lock> maybe(report, std::defer_lock);
  if (maybe.try_lock_for(2s)) std::cout << "got it within 2 s\n";

  // Work that moves between threads gets an owner of its own: lock on one
  // thread, unlock on another.
  dlock::Lock job = client.get_lock("order:7", dlock::Owner::create());
  std::thread([&] { job.lock(); }).join();
  job.unlock();

  // Wait up to 1 s, then hold for a fixed 10 s lease (no watchdog): the
  // wait comes first, the lease second.
  if (client.try_lock("cache-warmup", /*wait=*/1s, /*lease=*/10s)) {
    client.unlock("cache-warmup");
  }
  return 0;
}
