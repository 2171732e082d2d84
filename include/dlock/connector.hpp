// dlock/connector.hpp
//
// Guarded transactions with MySQL Connector/C++ (docs/guarded-transactions.md):
// the writes of a critical section to the same database as the lock table
// commit only while the hold that protects them is live.
//
//   std::unique_ptr<sql::Connection> db(...);        // the caller's own connection
//   dlock::Lock lock = client.get_lock("account:17");
//   std::lock_guard<dlock::Lock> held(lock);
//   db->setAutoCommit(false);
//   ... the transaction's reads and writes ...
//   dlock::guard(*db, lock);                         // last, right before the commit
//   db->commit();
//
// dlock::guard runs the hold's guard statement (Lock::guard_sql, ...) on
// `transaction`, a connection in a transaction the caller began. While the
// hold is live, it succeeds and no other owner can take the hold until the
// transaction ends (on Galera, a take on another node and this commit cannot
// both succeed): a commit right after it happens while the hold is live.
// When the hold is not live it throws LockLostError: roll back. Other
// database errors throw BackendError (code() and sql_state() of the
// server's error). The guard does not renew or release the hold; keep it
// the last statement, since the transaction keeps other owners out until it
// ends.
//
// The only dlock header that needs MySQL Connector/C++ (1.1, the JDBC-style
// API): a program that includes it links Connector/C++ itself
// (-lmysqlcppconn). Header-only.
#pragma once

#include <cppconn/connection.h>
#include <cppconn/exception.h>
#include <cppconn/statement.h>

#include <memory>
#include <string>

#include "dlock/election.hpp"
#include "dlock/errors.hpp"
#include "dlock/lock.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/semaphore.hpp"

namespace dlock {

namespace connector_details {

// MySQL's error for the guard's failure ("Subquery returns more than 1 row").
inline constexpr int kGuardFailed = 1242;

inline void run_guard(sql::Connection& transaction, const std::string& statement, const std::string& what) {
  try {
    std::unique_ptr<sql::Statement> st(transaction.createStatement());
    st->execute(statement);
  } catch (const sql::SQLException& e) {
    if (e.getErrorCode() == kGuardFailed) {
      throw LockLostError("dlock: the guard of " + what +
                          " failed: the hold is not live (its lease ran out, it was taken over, force-unlocked or "
                          "released); roll the transaction back");
    }
    throw BackendError("dlock: the guard of " + what + " failed: " + e.what(), e.getErrorCode(), e.getSQLState());
  }
}

}  // namespace connector_details

// Runs the guard statement of `lock`'s hold (any kind of Lock handle) in
// `transaction`. LockLostError when the hold is not live (also when it was
// counted lost, or NotHeldError when the owner holds nothing, before any
// SQL); BackendError for other database errors.
inline void guard(sql::Connection& transaction, const Lock& lock) {
  connector_details::run_guard(transaction, lock.guard_sql(), "lock \"" + lock.name() + "\"");
}

// The same for a permit.
inline void guard(sql::Connection& transaction, const Permit& permit) {
  connector_details::run_guard(transaction, permit.guard_sql(), "a permit of \"" + permit.name() + "\"");
}

// The same for every name of a multi-lock, in one statement.
inline void guard(sql::Connection& transaction, const MultiLock& set) {
  connector_details::run_guard(transaction, set.guard_sql(), "a multi-lock");
}

// The same for an election's leadership.
inline void guard(sql::Connection& transaction, const Election& election) {
  connector_details::run_guard(transaction, election.guard_sql(), "the leadership of \"" + election.name() + "\"");
}

}  // namespace dlock
