// The client's worker threads for asynchronous operations: a fixed number
// of threads running one io_context, which stay "hot" for a moment after
// each job.
//
// Why not boost::asio::thread_pool: a worker that sleeps as soon as it runs
// out of work must be woken for the very next job, and on virtual machines
// waking an idle thread costs 0.1 ms or more, as much as a statement. An
// asynchronous lock is usually followed by its unlock within a fraction of
// a millisecond, so after a job one worker at a time keeps polling for the
// next for `spin` (yielding the CPU between polls, so it never starves the
// database or the caller on a small machine), then sleeps.
//
// Thread safety: executor() from any thread; join() once.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

namespace dlock::details {

class WorkerThreads {
 public:
  using Executor = boost::asio::io_context::executor_type;

  WorkerThreads(std::size_t threads, std::chrono::microseconds spin);
  ~WorkerThreads();  // join()
  WorkerThreads(const WorkerThreads&) = delete;
  WorkerThreads& operator=(const WorkerThreads&) = delete;

  Executor executor() { return io_.get_executor(); }
  // Lets the threads finish every job and timer still outstanding, then
  // joins them. Idempotent.
  void join();

 private:
  void run();

  const std::chrono::microseconds spin_;
  boost::asio::io_context io_;
  std::optional<boost::asio::executor_work_guard<Executor>> work_;
  std::atomic<bool> spinning_{false};
  std::vector<std::thread> threads_;
};

}  // namespace dlock::details
