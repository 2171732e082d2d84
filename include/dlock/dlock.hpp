// dlock/dlock.hpp
//
// Umbrella header for dlock, a reentrant distributed lock backed by a
// MySQL 8.0 / MariaDB 10.6+ table.
//
//   #include <dlock/dlock.hpp>
//
//   dlock::DatabaseDistributedLock client(
//       dlock::Options::from_url("mysql://app:secret@db:3306/app"));
//   client.lock("billing:customer:42");
//   ... critical section; client.fencing_token("billing:customer:42") ...
//   client.unlock("billing:customer:42");
//
//   dlock/options.hpp           Options, Options::from_url
//   dlock/errors.hpp            Error, NotHeldError, BackendError
//   dlock/distributed_lock.hpp  DatabaseDistributedLock
//   dlock/lock.hpp              Lock (Lockable / TimedLockable handle)
//   dlock/owner.hpp             Owner (who holds: a thread, or an owner of its own)
//   dlock/semaphore.hpp         Semaphore, Permit
//   dlock/read_write_lock.hpp   ReadWriteLock
//   dlock/multi_lock.hpp        MultiLock (several names, all or nothing)
//   dlock/election.hpp          Election, LeaderView
//   dlock/introspection.hpp     inspect, Activity, HoldInfo (who holds what)
//   dlock/version.hpp           DLOCK_VERSION_* macros
#pragma once

#include "dlock/distributed_lock.hpp"
#include "dlock/election.hpp"
#include "dlock/errors.hpp"
#include "dlock/introspection.hpp"
#include "dlock/lock.hpp"
#include "dlock/metrics.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/options.hpp"
#include "dlock/owner.hpp"
#include "dlock/read_write_lock.hpp"
#include "dlock/semaphore.hpp"
#include "dlock/version.hpp"
