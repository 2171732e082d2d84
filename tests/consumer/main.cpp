// Builds against the installed headers and library only.
#include <dlock/asio.hpp>       // needs only Boost's headers besides dlock
#include <dlock/connector.hpp>  // needs Connector/C++'s headers (and its library once guard() is called)
#include <dlock/dlock.hpp>

#include <boost/asio/use_future.hpp>

#include <iostream>
#include <mutex>

int main(int argc, char** argv) {
  const auto options = dlock::Options::from_url(argc > 1 ? argv[1] : "mysql://u:p@127.0.0.1:3306/d");
  if (argc < 2) {
    std::cout << "parsed " << options.host << " " << DLOCK_VERSION_STRING << "\n";
    return 0;
  }
  dlock::DatabaseDistributedLock client(options);
  dlock::Lock lock = client.get_lock("consumer");
  std::lock_guard<dlock::Lock> guard(lock);
  std::cout << "locked with fence " << lock.fencing_token() << "\n";
  std::cout << "guard statement " << (lock.guard_sql().rfind("UPDATE ", 0) == 0 ? "made" : "MALFORMED") << "\n";
  const dlock::Lock async = client.get_lock("consumer-async", dlock::Owner::create());
  dlock::async_lock(async, boost::asio::use_future).get();
  dlock::async_unlock(async, boost::asio::use_future).get();
  std::cout << "async lock and unlock done\n";
  return 0;
}
