// Semaphore and Permit: handles on the engine's semaphore kind. A permit is
// a hold of an owner of its own (made for each acquire), so it can be
// released from any thread.
#include "dlock/semaphore.hpp"

#include "base/printable.hpp"

#include <utility>

#include "base/identity.hpp"
#include "base/validation.hpp"
#include "dlock/asio.hpp"
#include "dlock/distributed_lock.hpp"
#include "engine/engine.hpp"

namespace dlock {

namespace details {
struct SemaphoreAccess {
  static Engine& engine(DatabaseDistributedLock* lock) { return *lock->engine_; }
};
}  // namespace details

using details::SemaphoreAccess;

namespace {
constexpr std::uint32_t kMaxPermits = 100'000;
details::NameKeyView key(const std::string& name) { return details::NameKeyView{details::Kind::kSemaphore, name}; }
}  // namespace

Semaphore DatabaseDistributedLock::get_semaphore(std::string name, std::uint32_t permits) {
  details::validate_name(name);
  if (permits == 0 || permits > kMaxPermits) {
    throw std::invalid_argument("dlock: a semaphore's permits must be 1.." + std::to_string(kMaxPermits) + ", not " +
                                std::to_string(permits));
  }
  return Semaphore(this, std::move(name), permits);
}

Permit::Permit(Permit&& other) noexcept
    : client_(std::exchange(other.client_, nullptr)),
      name_(std::move(other.name_)),
      id_(std::exchange(other.id_, 0)),
      slot_(std::exchange(other.slot_, 0)),
      fence_(std::exchange(other.fence_, 0)) {}

Permit& Permit::operator=(Permit&& other) noexcept {
  if (this != &other) {
    release();
    client_ = std::exchange(other.client_, nullptr);
    name_ = std::move(other.name_);
    id_ = std::exchange(other.id_, 0);
    slot_ = std::exchange(other.slot_, 0);
    fence_ = std::exchange(other.fence_, 0);
  }
  return *this;
}

void Permit::read_slot() {
  if (fence_ != 0 || id_ == 0 || client_ == nullptr) return;
  if (const auto hold = SemaphoreAccess::engine(client_).confirmed_hold(key(name_), id_)) {
    slot_ = static_cast<std::uint32_t>(hold->slot);
    fence_ = hold->fence;
  }
}

std::uint32_t Permit::slot() {
  read_slot();
  return fence_ != 0 ? slot_ : 0;
}

std::uint64_t Permit::fencing_token() {
  read_slot();
  return fence_;
}

std::string Permit::guard_sql() const {
  if (id_ == 0 || client_ == nullptr)
    throw NotHeldError("dlock: guard_sql of a permit of \"" + details::printable(name_) +
                       "\" that is not held (released or moved from)");
  return SemaphoreAccess::engine(client_).guard_sql({details::NameKey(key(name_))}, id_);
}

Permit::~Permit() { release(); }

void Permit::release() noexcept {
  if (id_ == 0 || client_ == nullptr) return;
  const std::uint64_t owner = std::exchange(id_, 0);
  slot_ = 0;
  fence_ = 0;
  try {
    SemaphoreAccess::engine(client_).release(key(name_), owner);
  } catch (...) {
    // Database trouble is logged there (the lease will end); nothing else
    // can be wrong with a permit this handle held.
  }
}

std::optional<Permit> Semaphore::acquire_for(std::optional<Millis> lease, std::optional<Millis> wait) {
  details::Engine& engine = SemaphoreAccess::engine(client_);
  const details::AcquireRequest request = engine.make_request(key(name_), details::new_owner_id(), lease, wait, permits_);
  if (engine.drive(request).next != details::AcquireStep::Next::kAcquired) return std::nullopt;
  return Permit(client_, name_, request.owner);
}

Permit Semaphore::acquire() { return std::move(*acquire_for(std::nullopt, std::nullopt)); }
Permit Semaphore::acquire(Millis lease) { return std::move(*acquire_for(lease, std::nullopt)); }
std::optional<Permit> Semaphore::try_acquire() { return acquire_for(std::nullopt, Millis::zero()); }
std::optional<Permit> Semaphore::try_acquire(Millis wait) { return acquire_for(std::nullopt, wait); }
std::optional<Permit> Semaphore::try_acquire(Millis wait, Millis lease) { return acquire_for(lease, wait); }

std::uint32_t Semaphore::available_permits() {
  details::Engine& engine = SemaphoreAccess::engine(client_);
  details::CallBudget budget(engine.options().io_timeout);
  const std::size_t live = engine.read([&](details::Connection& c) {
    return engine.rows().count_live(c, details::Kind::kSemaphore, name_);
  });
  return live >= permits_ ? 0 : permits_ - static_cast<std::uint32_t>(live);
}

namespace asio_impl {
Permit PermitAccess::adopt(const Semaphore& semaphore, std::uint64_t id) noexcept {
  return Permit(semaphore.client_, semaphore.name_, id);
}
}  // namespace asio_impl

}  // namespace dlock
