// DatabaseDistributedLock: the public face of details::Client.
#include "dlock/distributed_lock.hpp"

#include "client.hpp"
#include "validation.hpp"

namespace dlock {

DatabaseDistributedLock::DatabaseDistributedLock(Options options)
    : client_(std::make_unique<details::Client>(std::move(options))) {}

DatabaseDistributedLock::~DatabaseDistributedLock() = default;

void DatabaseDistributedLock::lock(std::string_view name) { client_->acquire(name, std::nullopt, std::nullopt); }

void DatabaseDistributedLock::lock(std::string_view name, Millis lease) { client_->acquire(name, lease, std::nullopt); }

bool DatabaseDistributedLock::try_lock(std::string_view name) {
  return client_->acquire(name, std::nullopt, Millis::zero());
}

bool DatabaseDistributedLock::try_lock(std::string_view name, Millis wait) {
  return client_->acquire(name, std::nullopt, wait);
}

bool DatabaseDistributedLock::try_lock(std::string_view name, Millis wait, Millis lease) {
  return client_->acquire(name, lease, wait);
}

void DatabaseDistributedLock::unlock(std::string_view name) { client_->release(name); }

bool DatabaseDistributedLock::force_unlock(std::string_view name) { return client_->force_release(name); }

bool DatabaseDistributedLock::is_locked(std::string_view name) { return client_->is_locked(name); }

bool DatabaseDistributedLock::is_held_by_current_thread(std::string_view name) {
  return client_->is_held_by_current_thread(name);
}

int DatabaseDistributedLock::hold_count(std::string_view name) { return client_->hold_count(name); }

std::optional<Millis> DatabaseDistributedLock::remaining_ttl(std::string_view name) {
  return client_->remaining_ttl(name);
}

std::uint64_t DatabaseDistributedLock::fencing_token(std::string_view name) { return client_->fencing_token(name); }

Lock DatabaseDistributedLock::get_lock(std::string name) {
  details::validate_name(name);
  return Lock(this, std::move(name));
}

const std::string& DatabaseDistributedLock::machine_id() const noexcept { return client_->machine_id(); }

}  // namespace dlock
