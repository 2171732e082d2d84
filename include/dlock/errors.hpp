// dlock/errors.hpp
//
// Exceptions thrown by dlock. Everything the library throws on its own
// account derives from `dlock::Error`, except `std::invalid_argument` for bad
// input (a bad name, lease or option), which is thrown before any SQL runs.
//
//   Error          base of every dlock exception
//   NotHeldError   unlock() by a thread that holds no hold on that name here
//   LockLostError  acquire by an owner whose earlier hold on the name was lost
//   Cancelled      a pending asynchronous wait was cancelled
//   BackendError   the database was unreachable, timed out or failed;
//                  carries the MySQL error number and SQLSTATE
#pragma once

#include <stdexcept>
#include <string>

#include "dlock/export.hpp"

namespace dlock {

class DLOCK_API Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Misuse: releasing a lock the calling thread does not hold in this client.
// Detected locally, before any SQL.
class DLOCK_API NotHeldError : public Error {
 public:
  using Error::Error;
};

// An owner whose hold on a name was lost (its lease ran out, it was taken
// over or force-unlocked) asked for that name again while it still owed
// unlock() calls for the lost hold. A lost hold is never silently replaced:
// the caller's critical section is no longer protected, and it must learn so.
// The owed unlock() calls return normally; once they are all made, acquiring
// works again and yields a new fencing token.
class DLOCK_API LockLostError : public Error {
 public:
  using Error::Error;
};

// A pending asynchronous wait ended without acquiring because it was
// cancelled: DatabaseDistributedLock::cancel(owner), a cancellation slot
// bound to its handler, or the client's destruction. The operation holds
// nothing.
class DLOCK_API Cancelled : public Error {
 public:
  using Error::Error;
};

// The database could not do what was asked: unreachable, timed out, lost the
// connection, or answered with an error. When a statement's outcome could not
// be established (the connection died mid-statement and the row could not be
// read back), the message says so.
class DLOCK_API BackendError : public Error {
 public:
  BackendError(const std::string& what, int code, std::string sql_state);

  // MySQL/MariaDB error number (server or client library), 0 if none.
  int code() const noexcept { return code_; }
  // Five-character SQLSTATE, or empty if the failure had none.
  const std::string& sql_state() const noexcept { return sql_state_; }

 private:
  int code_;
  std::string sql_state_;
};

}  // namespace dlock
