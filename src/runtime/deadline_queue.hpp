// One timer for every pending asynchronous wait of a client: a queue of
// deadlines served by one thread of its own (an io_context), with one
// steady_timer armed for the earliest. A pending wait costs one queue node
// (tens of bytes), not a timer and its pending operation each.
//
// An entry is (waiter, sequence number): when its deadline passes,
// Waiter::expired(seq) runs on the queue's thread (it must not block); the
// waiter compares the number with its current park to ignore an entry
// from an earlier one. A waiter has at most one entry; add() replaces it.
//
// Thread safety: add/remove/stop may be called from any thread; they post to
// the queue's thread, in order.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <thread>

namespace dlock::details {

class DeadlineQueue {
 public:
  using Clock = std::chrono::steady_clock;

  class Waiter {
   public:
    virtual ~Waiter() = default;
    // The deadline of entry `seq` has passed. On the queue's thread; must not block.
    virtual void expired(std::uint64_t seq) = 0;

   private:
    friend class DeadlineQueue;
    struct Slot {
      std::uint64_t seq;
      std::shared_ptr<Waiter> waiter;
    };
    // The waiter's entry, if queued (the queue's thread only).
    bool queued_ = false;
    std::multimap<Clock::time_point, Slot>::iterator where_;
  };

  DeadlineQueue();
  ~DeadlineQueue();  // stop()
  DeadlineQueue(const DeadlineQueue&) = delete;
  DeadlineQueue& operator=(const DeadlineQueue&) = delete;

  void add(std::shared_ptr<Waiter> waiter, std::uint64_t seq, Clock::time_point when);
  // Drops the waiter's entry if it is still entry `seq`.
  void remove(std::shared_ptr<Waiter> waiter, std::uint64_t seq);
  // Drops every entry, cancels the timer and joins the thread. Idempotent.
  void stop();

 private:
  void arm();  // on the queue's thread only, like the members below
  void fire();

  boost::asio::io_context io_{1};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  boost::asio::steady_timer timer_{io_};
  std::multimap<Clock::time_point, Waiter::Slot> entries_;
  Clock::time_point armed_for_ = Clock::time_point::max();
  bool stopped_ = false;
  std::thread thread_;  // last: started once the rest exists
};

}  // namespace dlock::details
