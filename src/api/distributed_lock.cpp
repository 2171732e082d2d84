// DatabaseDistributedLock: the public face of details::Client. The calling
// thread's owner is resolved here, at the surface; everything below acts for
// an explicit owner id.
#include "dlock/distributed_lock.hpp"

#include "core/client.hpp"
#include "core/thread_identity.hpp"
#include "api/validation.hpp"

namespace dlock {

namespace {
// A handle's owner id; 0 means "the calling thread".
std::uint64_t resolve(std::uint64_t owner) { return owner != 0 ? owner : details::current_thread_id(); }
}  // namespace

Owner Owner::this_thread() noexcept { return Owner(details::current_thread_id()); }
Owner Owner::create() noexcept { return Owner(details::new_owner_id()); }

DatabaseDistributedLock::DatabaseDistributedLock(Options options)
    : client_(std::make_unique<details::Client>(std::move(options))) {}

DatabaseDistributedLock::~DatabaseDistributedLock() = default;

void DatabaseDistributedLock::lock(std::string_view name) { acquire_for(name, 0, std::nullopt, std::nullopt); }

void DatabaseDistributedLock::lock(std::string_view name, Millis lease) { acquire_for(name, 0, lease, std::nullopt); }

bool DatabaseDistributedLock::try_lock(std::string_view name) {
  return acquire_for(name, 0, std::nullopt, Millis::zero());
}

bool DatabaseDistributedLock::try_lock(std::string_view name, Millis wait) {
  return acquire_for(name, 0, std::nullopt, wait);
}

bool DatabaseDistributedLock::try_lock(std::string_view name, Millis wait, Millis lease) {
  return acquire_for(name, 0, lease, wait);
}

void DatabaseDistributedLock::unlock(std::string_view name) { release_for(name, 0); }

bool DatabaseDistributedLock::force_unlock(std::string_view name) { return force_unlock_side(name, Side::kMutex); }

bool DatabaseDistributedLock::is_locked(std::string_view name) { return is_locked_side(name, Side::kMutex); }

bool DatabaseDistributedLock::is_held_by_current_thread(std::string_view name) { return is_held_by(name, 0); }

int DatabaseDistributedLock::hold_count(std::string_view name) { return hold_count_for(name, 0); }

std::optional<Millis> DatabaseDistributedLock::remaining_ttl(std::string_view name) {
  return remaining_ttl_side(name, Side::kMutex);
}

std::uint64_t DatabaseDistributedLock::fencing_token(std::string_view name) { return fencing_token_for(name, 0); }

Lock DatabaseDistributedLock::get_lock(std::string name) {
  details::validate_name(name);
  return Lock(this, std::move(name), 0);
}

Lock DatabaseDistributedLock::get_lock(std::string name, Owner owner) {
  details::validate_name(name);
  return Lock(this, std::move(name), owner.id());
}

ReadWriteLock DatabaseDistributedLock::get_read_write_lock(std::string name) {
  details::validate_name(name);
  client_->validate_rw();
  return ReadWriteLock(this, std::move(name), 0);
}

ReadWriteLock DatabaseDistributedLock::get_read_write_lock(std::string name, Owner owner) {
  details::validate_name(name);
  client_->validate_rw();
  return ReadWriteLock(this, std::move(name), owner.id());
}

void DatabaseDistributedLock::cancel(Owner owner) { client_->async().cancel_owner(owner.id()); }

const std::string& DatabaseDistributedLock::machine_id() const noexcept { return client_->machine_id(); }

bool DatabaseDistributedLock::acquire_for(std::string_view name, std::uint64_t owner, std::optional<Millis> lease,
                                          std::optional<Millis> wait, Side side) {
  return client_->acquire(name, resolve(owner), lease, wait, nullptr, side);
}

void DatabaseDistributedLock::release_for(std::string_view name, std::uint64_t owner, Side side) {
  client_->release(name, resolve(owner), side);
}

bool DatabaseDistributedLock::is_held_by(std::string_view name, std::uint64_t owner, Side side) {
  return client_->is_held_by(name, resolve(owner), side);
}

int DatabaseDistributedLock::hold_count_for(std::string_view name, std::uint64_t owner, Side side) {
  return client_->hold_count(name, resolve(owner), side);
}

std::uint64_t DatabaseDistributedLock::fencing_token_for(std::string_view name, std::uint64_t owner, Side side) {
  return client_->fencing_token(name, resolve(owner), side);
}

bool DatabaseDistributedLock::force_unlock_side(std::string_view name, Side side) {
  return client_->force_release(name, side);
}

bool DatabaseDistributedLock::is_locked_side(std::string_view name, Side side) {
  return client_->is_locked(name, side);
}

std::optional<Millis> DatabaseDistributedLock::remaining_ttl_side(std::string_view name, Side side) {
  return client_->remaining_ttl(name, side);
}

}  // namespace dlock
