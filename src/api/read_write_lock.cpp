// ReadWriteLock: a (client, name[, owner]) triple whose sides are Lock
// handles; the std::shared_mutex-shaped members forward to them.
#include "dlock/read_write_lock.hpp"

#include "dlock/distributed_lock.hpp"

namespace dlock {

Lock ReadWriteLock::read_lock() const { return Lock(client_, name_, owner_, details::LockSide::kRead); }
Lock ReadWriteLock::write_lock() const { return Lock(client_, name_, owner_, details::LockSide::kWrite); }

void ReadWriteLock::lock() { write_lock().lock(); }
bool ReadWriteLock::try_lock() { return write_lock().try_lock(); }
void ReadWriteLock::unlock() { write_lock().unlock(); }

void ReadWriteLock::lock_shared() { read_lock().lock(); }
bool ReadWriteLock::try_lock_shared() { return read_lock().try_lock(); }
void ReadWriteLock::unlock_shared() { read_lock().unlock(); }

}  // namespace dlock
