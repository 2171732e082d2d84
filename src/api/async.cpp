// The compiled entry points behind <dlock/asio.hpp>: the header's templates
// wrap the caller's handler in an AsyncCompletion and call these. The
// calling thread's owner is resolved here, in the initiating call; errors,
// bad input included, go to the completion, from a worker thread.
#include "core/async_acquire.hpp"
#include "core/client.hpp"
#include "core/thread_identity.hpp"
#include "core/worker_threads.hpp"
#include "dlock/asio.hpp"

namespace dlock::details {

struct AsyncAccess {
  static DatabaseDistributedLock* handle_client(const Lock& lock) { return lock.client_; }
  static Client& client(DatabaseDistributedLock* lock) { return *lock->client_; }
  static const std::string& name(const Lock& lock) { return lock.name_; }
  static DatabaseDistributedLock* handle_client(const Semaphore& semaphore) { return semaphore.client_; }
  static const std::string& name(const Semaphore& semaphore) { return semaphore.name_; }
  static std::uint32_t permits(const Semaphore& semaphore) { return semaphore.permits_; }
  static LockSide side(const Lock& lock) { return lock.side_; }
  static std::uint64_t owner(const Lock& lock) {
    return lock.owner_ != 0 ? lock.owner_ : current_thread_id();
  }
};

}  // namespace dlock::details

namespace dlock::asio_impl {

using details::AsyncAccess;
using details::AcquireRequest;
using details::AsyncAcquire;
using details::Client;

namespace {

std::exception_ptr shutting_down() {
  return std::make_exception_ptr(Cancelled("dlock: the client is being destroyed"));
}

// Delivers `error` from a worker thread (never inside the initiating call).
void fail_later(Client& client, std::unique_ptr<AsyncCompletion> completion, std::exception_ptr error) {
  client.async().post([completion = std::move(completion), error](bool run) mutable {
    AsyncCompletion::finish(std::move(completion), run ? error : shutting_down(), 0);
  });
}

// Validates and fixes the request now (`make` throws std::invalid_argument
// for bad input, delivered through the completion), then starts it.
template <class MakeRequest>
AsyncOperationId start_acquire(DatabaseDistributedLock* handle, std::unique_ptr<AsyncCompletion> completion,
                               MakeRequest&& make) {
  Client& client = AsyncAccess::client(handle);
  AcquireRequest request;
  try {
    request = make(client);
  } catch (...) {
    fail_later(client, std::move(completion), std::current_exception());
    return {};
  }
  return {handle, AsyncAcquire::start(client, std::move(request), std::move(completion))};
}

}  // namespace

AsyncOperationId start_async_lock(const Lock& lock, std::optional<Millis> lease, std::optional<Millis> wait,
                                  std::unique_ptr<AsyncCompletion> completion) {
  return start_acquire(AsyncAccess::handle_client(lock), std::move(completion), [&](Client& client) {
    return client.make_request(AsyncAccess::name(lock), AsyncAccess::owner(lock), lease, wait,
                               AsyncAccess::side(lock));
  });
}

void start_async_unlock(const Lock& lock, std::unique_ptr<AsyncCompletion> completion) {
  Client& client = AsyncAccess::client(AsyncAccess::handle_client(lock));
  auto job = [&client, name = AsyncAccess::name(lock), owner = AsyncAccess::owner(lock),
              side = AsyncAccess::side(lock), completion = std::move(completion)](bool run) mutable {
    std::exception_ptr error = run ? nullptr : shutting_down();
    if (run) {
      // An asynchronous waiter this release hands the lock to is completed
      // here, on this worker, before the unlock is: no other worker is woken
      // for it, and the handoff is what someone has been waiting for.
      details::WorkerThreads::Deferring handoff_first;
      try {
        const Client::WarmestConnection warmest;
        client.release(name, owner, side);
      } catch (...) {
        error = std::current_exception();
      }
      handoff_first.close();
    }
    AsyncCompletion::finish(std::move(completion), std::move(error), 0);
  };
  client.async().post(std::move(job));
}

AsyncOperationId start_async_acquire(const Semaphore& semaphore, std::optional<Millis> lease,
                                     std::optional<Millis> wait, std::unique_ptr<AsyncCompletion> completion) {
  return start_acquire(AsyncAccess::handle_client(semaphore), std::move(completion), [&](Client& client) {
    return client.make_permit_request(AsyncAccess::name(semaphore), AsyncAccess::permits(semaphore), lease, wait);
  });
}

void cancel_async_operation(AsyncOperationId operation) noexcept {
  if (operation.client == nullptr || operation.id == 0) return;
  try {
    AsyncAccess::client(operation.client).async().cancel_one(operation.id);
  } catch (...) {
    // cancel_one allocates; on failure the wait simply goes on.
  }
}

}  // namespace dlock::asio_impl
