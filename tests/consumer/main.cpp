// Builds against the installed headers and library only.
#include <dlock/dlock.hpp>

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
  return 0;
}
