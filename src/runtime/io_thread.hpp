// The client's one background thread: a Boost.Asio io_context running
// periodic tasks (the watchdog and the poller) on steady_timers, plus posted
// one-off jobs (on_lock_lost callbacks). It owns a connection of its own,
// opened on first need, so renewals never queue behind callers for a pooled
// connection. A task that fails is logged and runs again at its next tick;
// a broken connection is replaced at the next tick that needs one.
//
// Thread safety: post() may be called from any thread; every() only before
// start(). stop() runs the jobs already posted, then joins.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "sql/connection.hpp"

namespace spdlog {
class logger;
}

namespace dlock::details {

class IoThread {
 public:
  // Gives the thread's connection, opening it if needed (throws
  // BackendError). A task calls it only when it has SQL to run, so an idle
  // client holds no background connection at all.
  using ConnectionSource = std::function<Connection&()>;
  using Task = std::function<void(const ConnectionSource& connection)>;

  IoThread(ConnectionSettings settings, std::shared_ptr<spdlog::logger> logger);
  ~IoThread();
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  // Registers `task` to run every `period`, first after one period.
  void every(Millis period, std::string what, Task task);
  void start();
  void post(std::function<void()> job);
  // Posts a one-off job that runs SQL on the thread's connection; `what`
  // names it in the warning logged if it throws.
  void post(std::string what, Task task);
  // The same, once `delay` has passed (a retry).
  void after(Millis delay, std::string what, Task task);
  void stop();

 private:
  struct Periodic {
    Millis period;
    std::string what;
    Task task;
    std::unique_ptr<boost::asio::steady_timer> timer;
  };
  void arm(Periodic& p);
  void tick(Periodic& p);
  // Runs `task` on this thread with its connection; logs what it throws.
  void run_logged(const std::string& what, const Task& task);
  Connection& connection();

  ConnectionSettings settings_;
  std::shared_ptr<spdlog::logger> logger_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::vector<std::unique_ptr<Periodic>> periodic_;
  std::vector<std::shared_ptr<boost::asio::steady_timer>> one_shots_;  // after(), pending (the thread's)
  std::unique_ptr<Connection> connection_;
  std::thread thread_;
  bool stopping_ = false;  // touched on the io thread only
};

}  // namespace dlock::details
