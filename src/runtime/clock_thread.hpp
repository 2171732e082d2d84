// The client's clock: a thread that runs no database work, so nothing it
// does ever waits behind a statement, a reconnect or a ping. It counts holds
// lost at their local deadlines (its `tick`) and calls on_lock_lost (posted
// jobs). One Boost.Asio io_context with one steady_timer armed for the next
// wake-up.
//
// Thread safety: wake_at and post may be called from any thread; start and
// stop from the owner's.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <thread>

namespace dlock::details {

class ClockThread {
 public:
  using Clock = std::chrono::steady_clock;
  // Runs on the thread at each wake-up; returns when to wake next
  // (time_point::max(): only when wake_at asks).
  using Tick = std::function<Clock::time_point()>;

  explicit ClockThread(Tick tick);
  ~ClockThread();  // stop()
  ClockThread(const ClockThread&) = delete;
  ClockThread& operator=(const ClockThread&) = delete;

  void start();
  // Runs the tick at `when`, if that is before the next wake-up. Cheap when
  // it is not (one atomic load): a renewal moving deadlines later posts nothing.
  void wake_at(Clock::time_point when);
  // Runs `job` on the thread, after the jobs posted before it. Jobs must not
  // block for long (they are callbacks the contract says must not).
  void post(std::function<void()> job);
  // Runs the jobs already posted, then joins. Idempotent.
  void stop();

 private:
  void arm(Clock::time_point when);  // on the thread
  void fire();                       // on the thread
  static Clock::rep ticks(Clock::time_point t) { return t.time_since_epoch().count(); }

  Tick tick_;
  boost::asio::io_context io_{1};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  boost::asio::steady_timer timer_{io_};
  Clock::time_point armed_for_ = Clock::time_point::max();  // the thread's
  // The earliest wake-up asked for and not yet served (any thread).
  std::atomic<Clock::rep> asked_{ticks(Clock::time_point::max())};
  bool stopping_ = false;  // the thread's
  std::thread thread_;
};

}  // namespace dlock::details
