#include "runtime/deadline_queue.hpp"

#include <boost/asio/post.hpp>

#include <vector>

namespace dlock::details {

DeadlineQueue::DeadlineQueue() : work_(io_.get_executor()), thread_([this] { io_.run(); }) {}

DeadlineQueue::~DeadlineQueue() { stop(); }

void DeadlineQueue::add(std::shared_ptr<Waiter> waiter, std::uint64_t seq, Clock::time_point when) {
  boost::asio::post(io_, [this, waiter = std::move(waiter), seq, when]() mutable {
    if (stopped_) return;
    Waiter& w = *waiter;
    if (w.queued_) entries_.erase(w.where_);
    w.where_ = entries_.emplace(when, Waiter::Slot{seq, std::move(waiter)});
    w.queued_ = true;
    if (when < armed_for_) arm();
  });
}

void DeadlineQueue::remove(std::shared_ptr<Waiter> waiter, std::uint64_t seq) {
  boost::asio::post(io_, [this, waiter = std::move(waiter), seq] {
    if (!waiter->queued_ || waiter->where_->second.seq != seq) return;
    waiter->queued_ = false;
    entries_.erase(waiter->where_);
    // The timer stays armed for what may now be a later entry: firing
    // early finds nothing due and re-arms.
  });
}

void DeadlineQueue::stop() {
  if (!thread_.joinable()) return;
  boost::asio::post(io_, [this] {
    stopped_ = true;
    for (auto& [when, slot] : entries_) slot.waiter->queued_ = false;
    entries_.clear();
    timer_.cancel();
    armed_for_ = Clock::time_point::max();
  });
  work_.reset();  // the thread ends once the cancelled wait has run
  thread_.join();
}

void DeadlineQueue::arm() {
  if (entries_.empty()) {
    armed_for_ = Clock::time_point::max();
    timer_.cancel();
    return;
  }
  armed_for_ = entries_.begin()->first;
  timer_.expires_at(armed_for_);
  timer_.async_wait([this](const boost::system::error_code& error) {
    if (error == boost::asio::error::operation_aborted || stopped_) return;
    fire();
  });
}

void DeadlineQueue::fire() {
  armed_for_ = Clock::time_point::max();
  const auto now = Clock::now();
  std::vector<Waiter::Slot> due;
  while (!entries_.empty() && entries_.begin()->first <= now) {
    auto it = entries_.begin();
    it->second.waiter->queued_ = false;
    due.push_back(std::move(it->second));
    entries_.erase(it);
  }
  arm();
  for (auto& slot : due) slot.waiter->expired(slot.seq);
}

}  // namespace dlock::details
