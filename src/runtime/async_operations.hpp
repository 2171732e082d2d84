// The client's asynchronous machinery: a fixed set of worker threads that
// run statements for asynchronous operations, and the registry of pending
// operations that cancel(owner), per-operation cancellation and the client's
// destruction end.
//
// Workers: Options::pool_size threads (one per pooled connection, so no
// worker ever waits for a connection another worker holds for long; see
// WorkerThreads), and the DeadlineQueue's thread, started by the first
// asynchronous call: a client used only synchronously starts none. A
// pending wait holds no worker: it is parked in the WaiterRegistry with an
// entry in the DeadlineQueue (AsyncWait).
//
// Shutdown (the client's destructor, first thing): no new operation starts
// (each completes with Cancelled), every pending one is cancelled, and the
// destructor waits until all have completed before the workers are joined
// and the rest of the client goes away.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "runtime/deadline_queue.hpp"
#include "runtime/worker_threads.hpp"

namespace dlock::details {

class AsyncOperations {
 public:

  // What a pending operation offers the registry.
  class Cancellable {
   public:
    virtual ~Cancellable() = default;
    // Ends the operation with Cancelled if it is still waiting. Any thread.
    virtual void cancel() = 0;
  };

  explicit AsyncOperations(std::size_t threads);
  ~AsyncOperations();  // shutdown()
  AsyncOperations(const AsyncOperations&) = delete;
  AsyncOperations& operator=(const AsyncOperations&) = delete;

  // Runs `job()` on a worker; starts the workers on first use. Only for an
  // operation begun and not yet ended (so never after shutdown()).
  template <class Job>
  void run(Job&& job) {
    workers().post(std::forward<Job>(job));
  }
  // Inside a WorkerThreads::Deferring scope on one of the workers: runs
  // `job()` on that worker when the scope closes and returns true; false
  // anywhere else (see WorkerThreads::defer).
  template <class Job>
  [[nodiscard]] bool defer(Job&& job) {
    return workers().defer(std::forward<Job>(job));
  }
  // The deadlines of parked waits (started with the workers).
  DeadlineQueue& deadlines();

  // Counts an operation as running until end(id): nullopt once shutting
  // down (the caller completes it with Cancelled instead, and must not use
  // executor()). Ids are never 0.
  [[nodiscard]] std::optional<std::uint64_t> begin();
  // Makes a begun operation of `owner` cancellable (cancel_owner,
  // cancel_one, shutdown); one that is never attached is still waited for.
  void attach(std::uint64_t id, std::uint64_t owner, std::weak_ptr<Cancellable> cancellable);
  void end(std::uint64_t id);

  // Runs `job(true)` on a worker as one operation (an unlock, a failure to
  // deliver). Once shutting down, runs `job(false)` here instead (the job
  // then completes its caller with Cancelled).
  template <class Job>
  void post(Job&& job) {
    const auto id = begin();
    if (!id) {
      job(false);
      return;
    }
    run([this, id = *id, job = std::forward<Job>(job)]() mutable {
      job(true);
      end(id);
    });
  }

  // Cancels the pending operations of `owner` / the one with `id`.
  void cancel_owner(std::uint64_t owner);
  void cancel_one(std::uint64_t id);

  // Stops accepting operations, cancels the pending ones and waits until
  // every operation has ended; then joins the workers. Idempotent.
  void shutdown();

 private:
  struct Pending {
    std::uint64_t owner;
    std::weak_ptr<Cancellable> cancellable;
  };
  void cancel_where(bool (*match)(std::uint64_t key, const Pending& p, std::uint64_t wanted), std::uint64_t wanted);

  const std::size_t threads_;
  mutable std::mutex mutex_;
  std::condition_variable idle_;
  bool closing_ = false;
  std::size_t running_ = 0;
  std::uint64_t next_id_ = 1;
  std::unordered_map<std::uint64_t, Pending> pending_;  // cancellable ones, by id
  void start_workers();
  WorkerThreads& workers();

  std::once_flag started_;
  std::unique_ptr<WorkerThreads> workers_;             // set once (started_); reset by shutdown
  std::unique_ptr<DeadlineQueue> deadlines_;           // likewise
};

}  // namespace dlock::details
