#include "runtime/io_thread.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>

#include <algorithm>

namespace dlock::details {

IoThread::IoThread(ConnectionSettings settings, std::shared_ptr<spdlog::logger> logger)
    : settings_(std::move(settings)), logger_(std::move(logger)), work_(boost::asio::make_work_guard(io_)) {}

IoThread::~IoThread() { stop(); }

void IoThread::every(Millis period, std::string what, Task task) {
  auto p = std::make_unique<Periodic>();
  p->period = period;
  p->what = std::move(what);
  p->task = std::move(task);
  p->timer = std::make_unique<boost::asio::steady_timer>(io_);
  periodic_.push_back(std::move(p));
}

void IoThread::start() {
  for (auto& p : periodic_) arm(*p);
  thread_ = std::thread([this] { io_.run(); });
}

void IoThread::post(std::function<void()> job) { boost::asio::post(io_, std::move(job)); }

void IoThread::post(std::string what, Task task) {
  boost::asio::post(io_, [this, what = std::move(what), task = std::move(task)] { run_logged(what, task); });
}

void IoThread::after(Millis delay, std::string what, Task task) {
  boost::asio::post(io_, [this, delay, what = std::move(what), task = std::move(task)]() mutable {
    if (stopping_) return;
    auto timer = std::make_shared<boost::asio::steady_timer>(io_, delay);
    one_shots_.push_back(timer);
    timer->async_wait([this, timer, what = std::move(what), task = std::move(task)](const boost::system::error_code& ec) {
      one_shots_.erase(std::find(one_shots_.begin(), one_shots_.end(), timer));
      if (ec || stopping_) return;
      run_logged(what, task);
    });
  });
}

void IoThread::stop() {
  if (!thread_.joinable()) return;
  boost::asio::post(io_, [this] {
    stopping_ = true;
    for (auto& p : periodic_) p->timer->cancel();
    for (auto& t : one_shots_) t->cancel();
  });
  work_.reset();
  thread_.join();
  connection_.reset();
}

void IoThread::arm(Periodic& p) {
  p.timer->expires_after(p.period);
  p.timer->async_wait([this, &p](const boost::system::error_code& ec) {
    if (ec || stopping_) return;
    tick(p);
    if (!stopping_) arm(p);
  });
}

Connection& IoThread::connection() {
  if (connection_ && connection_->broken()) connection_.reset();
  if (!connection_) connection_ = Connection::open(settings_);
  return *connection_;
}

void IoThread::tick(Periodic& p) { run_logged(p.what, p.task); }

void IoThread::run_logged(const std::string& what, const Task& task) {
  try {
    task([this]() -> Connection& { return connection(); });
  } catch (const std::exception& e) {
    logger_->warn("dlock: {} failed: {}", what, e.what());
  }
}

}  // namespace dlock::details
