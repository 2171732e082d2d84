// MultiLock: a (client, sorted names[, owner]) forwarding to DatabaseDistributedLock.
#include "dlock/multi_lock.hpp"

#include <algorithm>

#include "dlock/distributed_lock.hpp"

namespace dlock {

void MultiLock::lock() { client_->acquire_set_for(names_, owner_, std::nullopt, std::nullopt); }
void MultiLock::lock(Millis lease) { client_->acquire_set_for(names_, owner_, lease, std::nullopt); }
bool MultiLock::try_lock() { return client_->acquire_set_for(names_, owner_, std::nullopt, Millis::zero()); }
bool MultiLock::try_lock(Millis wait, Millis lease) { return client_->acquire_set_for(names_, owner_, lease, wait); }
bool MultiLock::try_lock_waiting(Millis wait) { return client_->acquire_set_for(names_, owner_, std::nullopt, wait); }
void MultiLock::unlock() { client_->release_set_for(names_, owner_); }

std::string MultiLock::guard_sql() const { return client_->guard_sql_for(names_, owner_); }

std::uint64_t MultiLock::fencing_token(std::string_view name) const {
  if (!std::binary_search(names_.begin(), names_.end(), name, std::less<>())) return 0;
  return client_->fencing_token_for(name, owner_);
}

}  // namespace dlock
