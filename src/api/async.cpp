// The compiled entry points behind <dlock/asio.hpp>: the header's templates
// wrap the caller's handler in an AsyncCompletion and call these. The
// calling thread's owner is resolved here, in the initiating call; errors,
// bad input included, go to the completion, from a worker thread.
#include <mutex>

#include "base/identity.hpp"
#include "base/kinds_table.hpp"
#include "dlock/asio.hpp"
#include "engine/async_wait.hpp"
#include "engine/engine.hpp"
#include "primitives/primitives.hpp"
#include "runtime/worker_threads.hpp"

namespace dlock {

namespace details {
struct AsyncAccess {
  static Engine& engine(const Lock& lock) { return *lock.client_->engine_; }
  static Engine& engine(const Semaphore& semaphore) { return *semaphore.client_->engine_; }
  static NameKeyView key(const Lock& lock) { return key_of(lock.side_, lock.name_); }
  static const std::string& name(const Semaphore& semaphore) { return semaphore.name_; }
  static std::uint32_t permits(const Semaphore& semaphore) { return semaphore.permits_; }
  static std::uint64_t owner(const Lock& lock) { return lock.owner_ != 0 ? lock.owner_ : current_thread_id(); }
  static MultiLocks& locks(const MultiLock& set) { return set.client_->primitives_->multi_locks; }
  static std::uint64_t owner(const MultiLock& set) { return set.owner_ != 0 ? set.owner_ : current_thread_id(); }
  static Engine& engine(const Election& election) { return *election.client_->engine_; }
  static Elections& elections(const Election& election) { return election.client_->primitives_->elections; }
  static const std::string& name(const Election& election) { return election.name_; }
  static std::uint64_t owner(const Election& election) { return election.owner(); }
};
}  // namespace details

namespace asio_impl {

using details::AcquireRequest;
using details::AsyncAccess;
using details::Engine;
using details::Wait;

// A cancellation slot's view of one operation. The operation's end sets
// `done` (under the mutex) before its completion runs, and the engine
// outlives every operation, so a cancellation that finds `done` false may
// reach the engine, and one that finds it true touches nothing.
struct CancellationState {
  std::mutex mutex;
  Engine* engine = nullptr;  // set once the operation has an id
  std::uint64_t id = 0;
  bool requested = false;  // cancelled before the operation had an id
  bool done = false;
};

std::shared_ptr<CancellationState> make_cancellation_state() { return std::make_shared<CancellationState>(); }

void cancel_async_operation(const std::shared_ptr<CancellationState>& state) noexcept {
  if (!state) return;
  try {
    std::lock_guard<std::mutex> guard(state->mutex);
    if (state->done) return;
    if (state->engine == nullptr) {
      state->requested = true;
      return;
    }
    state->engine->async().cancel_one(state->id);
  } catch (...) {
    // cancel_one allocates; on failure the wait simply goes on.
  }
}

namespace {

std::exception_ptr shutting_down() {
  return std::make_exception_ptr(Cancelled("dlock: the client is being destroyed"));
}

// Delivers `error` from a worker thread (never inside the initiating call).
void fail_later(Engine& engine, std::unique_ptr<AsyncCompletion> completion, std::exception_ptr error) {
  engine.async().post([completion = std::move(completion), error](bool run) mutable {
    AsyncCompletion::finish(std::move(completion), run ? error : shutting_down(), 0);
  });
}

// The operation has ended: a cancellation from now on touches nothing.
void mark_done(const std::shared_ptr<CancellationState>& cancel) {
  if (!cancel) return;
  std::lock_guard<std::mutex> guard(cancel->mutex);
  cancel->done = true;
}

// Validates and fixes the request now (`make` throws std::invalid_argument
// for bad input, delivered through the completion), and starts its Wait.
template <class MakeWait>
void start_wait(Engine& engine, std::unique_ptr<AsyncCompletion> completion, std::shared_ptr<CancellationState> cancel,
                MakeWait&& make) {
  std::unique_ptr<Wait> wait;
  try {
    wait = make();
  } catch (...) {
    mark_done(cancel);
    fail_later(engine, std::move(completion), std::current_exception());
    return;
  }
  std::function<void()> on_end;
  if (cancel) on_end = [cancel] { mark_done(cancel); };
  const std::uint64_t id =
      details::AsyncWait::start(engine, std::move(wait), std::move(completion), std::move(on_end));
  if (!cancel || id == 0) return;
  std::lock_guard<std::mutex> guard(cancel->mutex);
  if (cancel->done) return;
  cancel->engine = &engine;
  cancel->id = id;
  if (cancel->requested) engine.async().cancel_one(id);
}

// An acquire request's Wait.
std::unique_ptr<Wait> acquire_wait(Engine& engine, AcquireRequest request) {
  return std::make_unique<details::OwnedAcquireWait>(engine, std::move(request));
}

// Runs `release` on a worker, then completes.
template <class Release>
void start_release(Engine& engine, std::unique_ptr<AsyncCompletion> completion, Release&& release) {
  auto job = [&engine, release = std::forward<Release>(release), completion = std::move(completion)](bool run) mutable {
    std::exception_ptr error = run ? nullptr : shutting_down();
    if (run) {
      // An asynchronous waiter this release hands the hold to is completed
      // here, on this worker, before the unlock is: no other worker is woken
      // for it, and the handoff is what someone has been waiting for.
      details::WorkerThreads::Deferring handoff_first;
      try {
        const Engine::WarmestConnection warmest;
        release();
      } catch (...) {
        error = std::current_exception();
      }
      handoff_first.close();
    }
    AsyncCompletion::finish(std::move(completion), std::move(error), 0);
  };
  engine.async().post(std::move(job));
}

}  // namespace

void start_async_lock(const Lock& lock, std::optional<Millis> lease, std::optional<Millis> wait,
                      std::unique_ptr<AsyncCompletion> completion, std::shared_ptr<CancellationState> cancel) {
  Engine& engine = AsyncAccess::engine(lock);
  start_wait(engine, std::move(completion), std::move(cancel), [&] {
    return acquire_wait(engine, engine.make_request(AsyncAccess::key(lock), AsyncAccess::owner(lock), lease, wait));
  });
}

void start_async_unlock(const Lock& lock, std::unique_ptr<AsyncCompletion> completion) {
  Engine& engine = AsyncAccess::engine(lock);
  start_release(engine, std::move(completion),
                [&engine, key = details::NameKey(AsyncAccess::key(lock)), owner = AsyncAccess::owner(lock)] {
                  engine.release(key, owner);
                });
}

void start_async_lock(const MultiLock& set, std::optional<Millis> lease, std::optional<Millis> wait,
                      std::unique_ptr<AsyncCompletion> completion, std::shared_ptr<CancellationState> cancel) {
  details::MultiLocks& locks = AsyncAccess::locks(set);
  start_wait(locks.engine(), std::move(completion), std::move(cancel), [&] {
    return std::make_unique<details::SetWait>(locks, locks.make_request(set.names(), AsyncAccess::owner(set), lease, wait));
  });
}

void start_async_unlock(const MultiLock& set, std::unique_ptr<AsyncCompletion> completion) {
  details::MultiLocks& locks = AsyncAccess::locks(set);
  start_release(locks.engine(), std::move(completion),
                [&locks, names = set.names(), owner = AsyncAccess::owner(set)] { locks.release(names, owner); });
}

namespace {

// A campaign's completion: the acquire's success becomes the term (read
// if not known yet, on the worker that completes it).
class TermCompletion final : public AsyncCompletion {
 public:
  TermCompletion(details::Elections& elections, std::string name, std::uint64_t owner,
                 std::unique_ptr<AsyncCompletion> inner)
      : elections_(elections), name_(std::move(name)), owner_(owner), inner_(std::move(inner)) {}
  void complete(std::exception_ptr error, std::uint64_t value) noexcept override {
    std::unique_ptr<TermCompletion> self(this);
    std::uint64_t term = 0;
    if (!error && value != 0) {
      try {
        term = elections_.term_after_campaign(name_, owner_);
      } catch (...) {
        error = std::current_exception();
      }
    }
    AsyncCompletion::finish(std::move(inner_), std::move(error), term);
  }

 private:
  details::Elections& elections_;
  const std::string name_;
  const std::uint64_t owner_;
  std::unique_ptr<AsyncCompletion> inner_;
};

}  // namespace

void start_async_campaign(const Election& election, std::string_view value,
                          std::unique_ptr<AsyncCompletion> completion, std::shared_ptr<CancellationState> cancel) {
  details::Elections& elections = AsyncAccess::elections(election);
  Engine& engine = elections.engine();
  const std::string& name = AsyncAccess::name(election);
  const std::uint64_t owner = AsyncAccess::owner(election);
  const details::NameKey key = details::Elections::key(name);
  auto wrapped = std::make_unique<TermCompletion>(elections, name, owner, std::move(completion));
  if (engine.holds().find(key, owner)) {
    // Leads already (or lost a leadership it has not resigned): the term,
    // or the error, from a worker (the term may take a read).
    mark_done(cancel);
    engine.async().post([wrapped = std::move(wrapped)](bool run) mutable {
      AsyncCompletion::finish(std::move(wrapped), run ? nullptr : shutting_down(), 1);
    });
    return;
  }
  start_wait(engine, std::move(wrapped), std::move(cancel), [&] {
    details::AcquireRequest r = engine.make_request(key, owner, std::nullopt, std::nullopt);
    if (value.size() > details::kMaxElectionValue)
      throw std::invalid_argument("dlock: an election's value is at most 64 KiB (" + std::to_string(value.size()) +
                                  " bytes given)");
    r.value = std::string(value);
    return acquire_wait(engine, std::move(r));
  });
}

void start_async_observe(const Election& election, std::uint64_t after_revision,
                         std::unique_ptr<AsyncCompletion> completion, std::shared_ptr<CancellationState> cancel) {
  details::Elections& elections = AsyncAccess::elections(election);
  start_wait(elections.engine(), std::move(completion), std::move(cancel), [&] {
    return std::make_unique<details::ObserveWait>(
        elections, elections.make_observe_request(AsyncAccess::name(election), AsyncAccess::owner(election),
                                                  after_revision, std::nullopt));
  });
}

void start_async_acquire(const Semaphore& semaphore, std::optional<Millis> lease, std::optional<Millis> wait,
                         std::unique_ptr<AsyncCompletion> completion, std::shared_ptr<CancellationState> cancel) {
  Engine& engine = AsyncAccess::engine(semaphore);
  start_wait(engine, std::move(completion), std::move(cancel), [&] {
    if (AsyncAccess::permits(semaphore) == 0) throw std::invalid_argument("dlock: a semaphore's permits must be 1..100000");
    return acquire_wait(engine, engine.make_request(details::NameKeyView{details::Kind::kSemaphore, AsyncAccess::name(semaphore)},
                                                    details::new_owner_id(), lease, wait, AsyncAccess::permits(semaphore)));
  });
}

}  // namespace asio_impl
}  // namespace dlock
