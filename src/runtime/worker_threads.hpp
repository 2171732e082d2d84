// The client's worker threads for asynchronous operations: a fixed number
// of threads taking jobs from one queue, one of which stays "hot" for a
// moment after each job.
//
// Why not an io_context (or boost::asio::thread_pool) run by N threads:
// every post there wakes a sleeping thread, and a worker that sleeps as
// soon as it runs out of work must be woken for the very next job. On a
// virtual machine waking an idle thread can cost as much as a statement
// (bench/results/HISTORY.md), and a woken thread competes for the CPU with
// the database. An
// asynchronous lock is usually followed by its unlock within a fraction of
// a millisecond, so after a job one worker at a time keeps looking for the
// next for `spin` (yielding the CPU between looks), and a job posted
// meanwhile wakes nobody: the spinning worker takes it. And a job may defer
// work to itself (Deferring, defer()): an async_unlock that hands the lock
// to a parked asynchronous waiter completes that waiter on its own worker
// right after the release, rather than waking another worker for it.
//
// Thread safety: post() from any thread; join() once, from a thread that
// is not a worker.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace dlock::details {

class WorkerThreads {
 public:
  WorkerThreads(std::size_t threads, std::chrono::microseconds spin);
  ~WorkerThreads();  // join()
  WorkerThreads(const WorkerThreads&) = delete;
  WorkerThreads& operator=(const WorkerThreads&) = delete;

  // Runs `job()` on a worker (move-only jobs welcome). After join() has
  // begun, the job is run by join() itself.
  template <class Fn>
  void post(Fn&& fn) {
    push(std::make_unique<Model<std::decay_t<Fn>>>(std::forward<Fn>(fn)));
  }

  // While a Deferring scope is open in a job on one of these workers:
  // queues `fn` to run on this same worker when the scope closes, and
  // returns true. Anywhere else (no scope open, another thread, another
  // pool's worker): returns false and does nothing (post it instead). For
  // work that should follow a step of the current job at once and is not
  // worth waking another thread for: an asynchronous waiter handed a lock
  // by a release this worker runs.
  template <class Fn>
  [[nodiscard]] bool defer(Fn&& fn) {
    if (!deferring_here()) return false;
    defer_job(std::make_unique<Model<std::decay_t<Fn>>>(std::forward<Fn>(fn)));
    return true;
  }

  // A scope in which defer() queues work on this thread; close() (or the
  // destructor) closes it and runs that work, in order, before returning.
  // The work runs with the scope closed: what it does is not deferred
  // again (a handler run there that blocks cannot hold up another
  // deferral). Not nested; a no-op on a thread that is not a worker.
  class Deferring {
   public:
    Deferring();
    ~Deferring() { close(); }
    Deferring(const Deferring&) = delete;
    Deferring& operator=(const Deferring&) = delete;
    void close();
  };

  // For tests: sleeping workers woken by post() so far, whether a worker
  // is spinning now, and how many sleep now.
  std::size_t wakeups();
  bool spinning();
  std::size_t sleeping();

  // Lets the threads finish every job posted (including jobs those jobs
  // post), then joins them. Idempotent.
  void join();

 private:
  struct Job {
    virtual ~Job() = default;
    virtual void run() = 0;
  };
  template <class Fn>
  struct Model final : Job {
    explicit Model(Fn&& f) : fn(std::move(f)) {}
    explicit Model(const Fn& f) : fn(f) {}
    void run() override { fn(); }
    Fn fn;
  };

  void push(std::unique_ptr<Job> job);
  // True on a worker of this pool with a Deferring scope open; defer_job
  // queues in that scope. (The thread-local state below is touched only in
  // worker_threads.cpp: read from inline code in other translation units,
  // a thread_local member goes through a TLS wrapper that UBSan saw return
  // null.)
  bool deferring_here() const;
  static void defer_job(std::unique_ptr<Job> job);
  void run();
  // Pops a job if there is one (mutex held).
  std::unique_ptr<Job> pop_locked();

  // The pool this thread is a worker of, whether a Deferring scope is
  // open, and what was deferred in it; null/false on any other thread,
  // join()'s included.
  static thread_local WorkerThreads* current_;
  static thread_local bool deferring_;
  static thread_local std::deque<std::unique_ptr<Job>>* deferred_;

  const std::chrono::microseconds spin_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Job>> jobs_;  // guarded by mutex_
  std::atomic<std::size_t> queued_{0};     // jobs_.size(), for the spinner to look without the mutex
  bool spinning_ = false;                  // guarded by mutex_: a worker is looking; posts wake nobody
  std::size_t sleeping_ = 0;               // guarded by mutex_
  std::size_t running_ = 0;                // guarded by mutex_: jobs being run now
  std::size_t wakeups_ = 0;                // guarded by mutex_
  bool stopping_ = false;                  // guarded by mutex_
  std::vector<std::thread> threads_;
};

}  // namespace dlock::details
