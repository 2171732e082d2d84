// What the benchmark compares dlock with, each behind one interface.
//
//   dlock-watchdog  DatabaseDistributedLock::lock(name) / unlock(name)
//   dlock-lease     the same with a fixed 30 s lease
//   dlock-async     async_lock / async_unlock (<dlock/asio.hpp>) waited on
//                   with use_future, an owner per session
//   dlock-semaphore a one-permit Semaphore: acquire() / Permit::release()
//   dlock-read      the read side of a ReadWriteLock: read_lock().lock() / unlock()
//   dlock-write     the write side: write_lock().lock() / unlock()
//   dlock-fair      a fair lock: get_fair_lock(name).lock() / unlock() (these
//                   three run in the uncontended and handoff scenarios, the
//                   read-write sides in starvation, the fair lock in fairlock)
//   floor           the least SQL a durable lease lock can issue: one
//                   conditional UPDATE to take a pre-created row, one to free it
//   seed            a minimal, faithful re-implementation of the seed design
//                   (../shared/seeds/001_*): SELECT the row, then INSERT or
//                   UPDATE; release by UPDATE; local semaphore plus a 1 s poll
//                   for remote waiters. It lives only here, as a baseline.
//   get_lock        MySQL's GET_LOCK / RELEASE_LOCK: session-bound and not
//                   durable; a reference, not a target
//
//   dlock-no-wakeup dlock-watchdog with fast_wakeup off: no session bell,
//                   the 1 s poll alone; shows what the bells cost
//
// Wake designs for a waiter in another client (issue 6), compared in the
// wakeup scenario; dlock-watchdog is the session-bell design (the
// default), and dlock-no-wakeup the design before issue 6:
//   poll-10ms       dlock with fast_wakeup off and a 10 ms poll
//   kill-wake       waiters sleep on a tagged connection; the releaser finds
//                   them in PROCESSLIST and KILL QUERYs them (a prototype)
//
// A contender hands out sessions; a session is used by one thread. dlock's
// sessions share one client (that is how dlock is used); the others own a
// connection each, as a hand-rolled lock would.
#pragma once

#include <dlock/dlock.hpp>

#include <memory>
#include <string>
#include <vector>

namespace dlock::bench {

class Session {
 public:
  virtual ~Session() = default;
  virtual void lock(const std::string& name) = 0;
  virtual void unlock(const std::string& name) = 0;
};

class Contender {
 public:
  virtual ~Contender() = default;
  virtual std::string name() const = 0;
  virtual std::unique_ptr<Session> session() = 0;
  // A session of the same client that takes and releases with the
  // synchronous lock (for dlock-async: a synchronous holder beside an
  // asynchronous waiter, which tells what the waiter's side adds apart from
  // what the holder's async_unlock adds). Default: session().
  virtual std::unique_ptr<Session> sync_session() { return session(); }
  // Creates whatever rows the contender needs for `names` up front (the
  // floor takes pre-created rows).
  virtual void prepare(const std::vector<std::string>& names) { (void)names; }
};

// The contender called `name`, against the private server at `url`.
std::unique_ptr<Contender> make_contender(const std::string& name, const std::string& url);
// Every contender name, in report order (not poll-10ms and kill-wake).
std::vector<std::string> contender_names();
// The read and write sides of a read-write lock and the fair lock (not in
// contender_names(): they run in the scenarios named above only).
std::vector<std::string> rw_contender_names();

}  // namespace dlock::bench
