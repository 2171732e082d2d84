// Lock: a (client, name) pair forwarding to DatabaseDistributedLock.
#include "dlock/lock.hpp"

#include "dlock/distributed_lock.hpp"

namespace dlock {

void Lock::lock() { client_->lock(name_); }
void Lock::lock(Millis lease) { client_->lock(name_, lease); }
bool Lock::try_lock() { return client_->try_lock(name_); }
bool Lock::try_lock(Millis wait, Millis lease) { return client_->try_lock(name_, wait, lease); }
bool Lock::try_lock_waiting(Millis wait) { return client_->try_lock(name_, wait); }
void Lock::unlock() { client_->unlock(name_); }
bool Lock::force_unlock() { return client_->force_unlock(name_); }
bool Lock::is_locked() const { return client_->is_locked(name_); }
bool Lock::is_held_by_current_thread() const { return client_->is_held_by_current_thread(name_); }
int Lock::hold_count() const { return client_->hold_count(name_); }
std::optional<Millis> Lock::remaining_ttl() const { return client_->remaining_ttl(name_); }
std::uint64_t Lock::fencing_token() const { return client_->fencing_token(name_); }

}  // namespace dlock
