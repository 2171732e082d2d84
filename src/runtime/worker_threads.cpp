#include "runtime/worker_threads.hpp"

namespace dlock::details {

thread_local WorkerThreads* WorkerThreads::current_ = nullptr;
thread_local bool WorkerThreads::deferring_ = false;
thread_local std::deque<std::unique_ptr<WorkerThreads::Job>>* WorkerThreads::deferred_ = nullptr;

WorkerThreads::WorkerThreads(std::size_t threads, std::chrono::microseconds spin) : spin_(spin) {
  threads_.reserve(threads);
  for (std::size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
}

WorkerThreads::~WorkerThreads() { join(); }

void WorkerThreads::push(std::unique_ptr<Job> job) {
  std::lock_guard<std::mutex> guard(mutex_);
  jobs_.push_back(std::move(job));
  queued_.store(jobs_.size(), std::memory_order_release);
  // A spinning worker will take it; otherwise wake a sleeping one. Notified
  // under the mutex: once the job can have run, its operation can have
  // ended and the client's shutdown can be destroying this queue, so a
  // poster that is not a worker (a bell thread) must be done with it
  // when it lets the mutex go.
  if (!spinning_ && sleeping_ > 0) {
    ++wakeups_;
    wake_.notify_one();
  }
}

std::unique_ptr<WorkerThreads::Job> WorkerThreads::pop_locked() {
  if (jobs_.empty()) return nullptr;
  std::unique_ptr<Job> job = std::move(jobs_.front());
  jobs_.pop_front();
  queued_.store(jobs_.size(), std::memory_order_release);
  return job;
}

bool WorkerThreads::deferring_here() const { return current_ == this && deferring_; }

void WorkerThreads::defer_job(std::unique_ptr<Job> job) { deferred_->push_back(std::move(job)); }

WorkerThreads::Deferring::Deferring() { deferring_ = current_ != nullptr; }

void WorkerThreads::Deferring::close() {
  if (!deferring_) return;
  deferring_ = false;
  auto& deferred = *deferred_;
  while (!deferred.empty()) {
    std::unique_ptr<Job> job = std::move(deferred.front());
    deferred.pop_front();
    job->run();
  }
}

void WorkerThreads::run() {
  using Clock = std::chrono::steady_clock;
  std::deque<std::unique_ptr<Job>> deferred;
  current_ = this;
  deferred_ = &deferred;
  std::unique_lock<std::mutex> lock(mutex_);
  bool worked = false;  // ran a job since this thread last slept
  for (;;) {
    if (auto job = pop_locked()) {
      ++running_;
      lock.unlock();
      job->run();
      job.reset();
      lock.lock();
      --running_;
      worked = true;
      continue;
    }
    if (stopping_ && running_ == 0) {
      // Nothing queued and nothing running that could queue more.
      wake_.notify_all();
      current_ = nullptr;
      deferred_ = nullptr;
      return;
    }
    if (worked && !spinning_ && spin_.count() > 0 && !stopping_) {
      // Stay hot: look for the next job a moment before sleeping.
      spinning_ = true;
      lock.unlock();
      const auto until = Clock::now() + spin_;
      while (queued_.load(std::memory_order_acquire) == 0 && Clock::now() < until) std::this_thread::yield();
      lock.lock();
      spinning_ = false;
      worked = false;
      continue;  // takes what came, or sleeps
    }
    worked = false;
    ++sleeping_;
    wake_.wait(lock, [&] { return !jobs_.empty() || (stopping_ && running_ == 0); });
    --sleeping_;
  }
}

std::size_t WorkerThreads::wakeups() {
  std::lock_guard<std::mutex> guard(mutex_);
  return wakeups_;
}

bool WorkerThreads::spinning() {
  std::lock_guard<std::mutex> guard(mutex_);
  return spinning_;
}

std::size_t WorkerThreads::sleeping() {
  std::lock_guard<std::mutex> guard(mutex_);
  return sleeping_;
}

void WorkerThreads::join() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  // Jobs posted after the threads left (by nothing of ours, but be safe).
  for (;;) {
    std::unique_ptr<Job> job;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      job = pop_locked();
    }
    if (!job) return;
    job->run();
  }
}

}  // namespace dlock::details
