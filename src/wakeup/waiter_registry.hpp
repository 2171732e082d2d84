// Where local threads wait for a lock name, one entry per name (the seed's
// subscribeMap), each with a counting semaphore.
//
// A thread subscribes *before* its attempt in the database and stays
// subscribed until it gives up or succeeds, so a wake that arrives between a
// failed attempt and the wait is kept as a permit instead of being lost.
// Permits never exceed the number of subscribers, so a burst of wakes cannot
// pile up into a stampede later. A wake is only a hint: a woken thread
// always tries again in the database.
//
// Thread safety: every member is safe to call concurrently.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dlock::details {

class WaiterRegistry {
  struct Entry {
    std::mutex mutex;
    std::condition_variable cv;
    std::size_t subscribers = 0;
    std::size_t permits = 0;
  };

 public:
  // RAII: subscribed for its lifetime.
  class Subscription {
   public:
    Subscription(WaiterRegistry& registry, std::string name);
    ~Subscription();
    Subscription(const Subscription&) = delete;
    Subscription& operator=(const Subscription&) = delete;
    // Sleeps until woken or `timeout` passes. True if woken.
    bool wait_for(std::chrono::microseconds timeout);

   private:
    WaiterRegistry& registry_;
    std::string name_;
    std::shared_ptr<Entry> entry_;
  };

  // Wakes one waiter of `name`, if any.
  void wake_one(std::string_view name);
  // Wakes every waiter of `name`.
  void wake_all(std::string_view name);
  // Names with at least one subscriber (for the poller).
  std::vector<std::string> names() const;
  bool empty() const;
  // True while `name` has a subscriber.
  bool has(const std::string& name) const;

 private:
  std::shared_ptr<Entry> entry_of(std::string_view name) const;

  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<Entry>> entries_;
};

}  // namespace dlock::details
