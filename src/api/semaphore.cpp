// Semaphore and Permit: handles forwarding to the client's semaphore half
// (core/client_semaphore.cpp).
#include "dlock/semaphore.hpp"

#include <utility>

#include "api/validation.hpp"
#include "core/client.hpp"
#include "dlock/asio.hpp"
#include "dlock/distributed_lock.hpp"

namespace dlock {

namespace details {
struct SemaphoreAccess {
  static Client& client(DatabaseDistributedLock* lock) { return *lock->client_; }
};
}  // namespace details

using details::SemaphoreAccess;

Semaphore DatabaseDistributedLock::get_semaphore(std::string name, std::uint32_t permits) {
  details::validate_name(name);
  client_->validate_semaphore(permits);
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
  if (const auto row = SemaphoreAccess::client(client_).permit_row(id_)) {
    slot_ = row->slot;
    fence_ = row->fence;
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

Permit::~Permit() { release(); }

void Permit::release() noexcept {
  if (id_ == 0 || client_ == nullptr) return;
  const std::uint64_t id = std::exchange(id_, 0);
  slot_ = 0;
  fence_ = 0;
  SemaphoreAccess::client(client_).release_permit(name_, id);
}

std::optional<Permit> Semaphore::acquire_for(std::optional<Millis> lease, std::optional<Millis> wait) {
  details::Client& client = SemaphoreAccess::client(client_);
  const details::AcquireStep step = client.drive(client.make_permit_request(name_, permits_, lease, wait));
  if (step.next != details::AcquireStep::Next::kAcquired) return std::nullopt;
  return Permit(client_, name_, step.permit);
}

Permit Semaphore::acquire() { return std::move(*acquire_for(std::nullopt, std::nullopt)); }
Permit Semaphore::acquire(Millis lease) { return std::move(*acquire_for(lease, std::nullopt)); }
std::optional<Permit> Semaphore::try_acquire() { return acquire_for(std::nullopt, Millis::zero()); }
std::optional<Permit> Semaphore::try_acquire(Millis wait) { return acquire_for(std::nullopt, wait); }
std::optional<Permit> Semaphore::try_acquire(Millis wait, Millis lease) { return acquire_for(lease, wait); }

std::uint32_t Semaphore::available_permits() {
  const std::uint32_t live = SemaphoreAccess::client(client_).live_permits(name_);
  return live >= permits_ ? 0 : permits_ - live;
}

namespace asio_impl {
Permit PermitAccess::adopt(const Semaphore& semaphore, std::uint64_t id) noexcept {
  return Permit(semaphore.client_, semaphore.name_, id);
}
}  // namespace asio_impl

}  // namespace dlock
