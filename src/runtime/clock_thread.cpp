#include "runtime/clock_thread.hpp"

#include <boost/asio/post.hpp>

namespace dlock::details {

ClockThread::ClockThread(Tick tick) : tick_(std::move(tick)), work_(io_.get_executor()) {}

ClockThread::~ClockThread() { stop(); }

void ClockThread::start() {
  thread_ = std::thread([this] { io_.run(); });
}

void ClockThread::wake_at(Clock::time_point when) {
  Clock::rep asked = asked_.load(std::memory_order_acquire);
  do {
    if (ticks(when) >= asked) return;  // a wake-up at or before it is on its way
  } while (!asked_.compare_exchange_weak(asked, ticks(when), std::memory_order_acq_rel));
  boost::asio::post(io_, [this, when] { arm(when); });
}

void ClockThread::post(std::function<void()> job) { boost::asio::post(io_, std::move(job)); }

void ClockThread::stop() {
  if (!thread_.joinable()) return;
  boost::asio::post(io_, [this] {
    stopping_ = true;
    timer_.cancel();
  });
  work_.reset();
  thread_.join();
}

void ClockThread::arm(Clock::time_point when) {
  if (stopping_ || when >= armed_for_) return;
  armed_for_ = when;
  timer_.expires_at(when);
  timer_.async_wait([this](const boost::system::error_code& error) {
    if (error == boost::asio::error::operation_aborted || stopping_) return;
    fire();
  });
}

void ClockThread::fire() {
  armed_for_ = Clock::time_point::max();
  // From here a wake_at for any time posts again: the tick below may not
  // see what it records.
  asked_.store(ticks(Clock::time_point::max()), std::memory_order_release);
  const Clock::time_point next = tick_();
  if (next == Clock::time_point::max()) return;
  wake_at(next);
}

}  // namespace dlock::details
