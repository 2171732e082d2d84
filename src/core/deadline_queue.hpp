// One timer for every pending asynchronous wait of a client: a queue of
// deadlines on a strand over the workers, with one steady_timer armed for
// the earliest. A pending wait costs one queue node (tens of bytes), not a
// timer and its pending operation each.
//
// An entry is (waiter, sequence number): when its deadline passes,
// Waiter::expired(seq) runs on the queue's strand; the waiter compares the
// number with its current park to ignore an entry from an earlier one. A
// waiter has at most one entry; add() replaces it.
//
// Thread safety: add/remove/stop may be called from any thread; they post to
// the strand, in order.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>

namespace dlock::details {

class DeadlineQueue {
 public:
  using Clock = std::chrono::steady_clock;
  using Executor = boost::asio::io_context::executor_type;

  class Waiter {
   public:
    virtual ~Waiter() = default;
    // The deadline of entry `seq` has passed. On the queue's strand.
    virtual void expired(std::uint64_t seq) = 0;

   private:
    friend class DeadlineQueue;
    struct Slot {
      std::uint64_t seq;
      std::shared_ptr<Waiter> waiter;
    };
    // The waiter's entry, if queued (strand only).
    bool queued_ = false;
    std::multimap<Clock::time_point, Slot>::iterator where_;
  };

  explicit DeadlineQueue(Executor executor);
  DeadlineQueue(const DeadlineQueue&) = delete;
  DeadlineQueue& operator=(const DeadlineQueue&) = delete;

  void add(std::shared_ptr<Waiter> waiter, std::uint64_t seq, Clock::time_point when);
  // Drops the waiter's entry if it is still entry `seq`.
  void remove(std::shared_ptr<Waiter> waiter, std::uint64_t seq);
  // Drops every entry and cancels the timer (shutdown: lets the workers'
  // pool run out of work).
  void stop();

 private:
  void arm();  // strand only
  void fire();

  boost::asio::strand<Executor> strand_;
  boost::asio::steady_timer timer_;  // strand only
  std::multimap<Clock::time_point, Waiter::Slot> entries_;  // strand only
  Clock::time_point armed_for_ = Clock::time_point::max();  // strand only
  bool stopped_ = false;                                     // strand only
};

}  // namespace dlock::details
