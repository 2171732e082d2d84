// For the library's own tools (the dlock command): the Client behind a
// DatabaseDistributedLock, for what the public API does not offer yet (an
// interruptible wait). Not installed; not for users.
#pragma once

#include "core/client.hpp"
#include "dlock/distributed_lock.hpp"

namespace dlock::details {

struct ClientAccess {
  static Client& of(DatabaseDistributedLock& lock) { return *lock.client_; }
};

}  // namespace dlock::details
