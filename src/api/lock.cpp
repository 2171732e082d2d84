// Lock: a (client, name[, owner], side) forwarding to DatabaseDistributedLock.
#include "dlock/lock.hpp"

#include "dlock/distributed_lock.hpp"

#include "base/validation.hpp"

namespace dlock {

void Lock::lock() { client_->acquire_for(name_, owner_, std::nullopt, std::nullopt, side_); }
void Lock::lock(Millis lease) { client_->acquire_for(name_, owner_, lease, std::nullopt, side_); }
bool Lock::try_lock() { return client_->acquire_for(name_, owner_, std::nullopt, Millis::zero(), side_); }
bool Lock::try_lock(Millis wait, Millis lease) { return client_->acquire_for(name_, owner_, lease, wait, side_); }
bool Lock::try_lock_waiting(Millis wait) { return client_->acquire_for(name_, owner_, std::nullopt, wait, side_); }
void Lock::unlock() { client_->release_for(name_, owner_, side_); }
void Lock::unlock_at_least(Millis held_for) {
  details::validate_held_for(held_for);
  client_->release_for(name_, owner_, side_, held_for);
}
bool Lock::force_unlock() { return client_->force_unlock_side(name_, side_); }
bool Lock::is_locked() const { return client_->is_locked_side(name_, side_); }
bool Lock::is_held_by_current_thread() const { return client_->is_held_by(name_, owner_, side_); }
int Lock::hold_count() const { return client_->hold_count_for(name_, owner_, side_); }
std::optional<Millis> Lock::remaining_ttl() const { return client_->remaining_ttl_side(name_, side_); }
std::uint64_t Lock::fencing_token() const { return client_->fencing_token_for(name_, owner_, side_); }

std::string Lock::guard_sql() const { return client_->guard_sql_for({name_}, owner_, side_); }

}  // namespace dlock
