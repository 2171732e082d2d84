// How the engine runs a statement: on a pooled connection (the one the
// calling thread used last, whose session's bell its holds record), and,
// when the connection dies mid-statement, by one of two rules, never by
// running it blindly again:
//
// - run_reconciled, for a statement that changes rows: a read on a newly
//   opened connection decides whether it applied (reconcile);
// - run_idempotent, for a statement safe to run twice (a read, a renewal of
//   this client's own live holds, its intents, a queue join that
//   upserts one entry): run once more on another connection.
//
// The engine is one (engine.hpp); the kinds reach these through it.
#pragma once

#include <functional>
#include <memory>
#include <string_view>

#include "metrics/metric_counters.hpp"
#include "sql/connection_pool.hpp"

namespace spdlog {
class logger;
}

namespace dlock::details {

class StatementRules {
 public:
  // `pool`, `logger` and `counters` (may be null) outlive this; the pool
  // may be constructed after it, but before its first statement.
  StatementRules(ConnectionPool& pool, const std::shared_ptr<spdlog::logger>& logger, MetricCounters* counters)
      : pool_of_rules_(pool), logger_of_rules_(logger), counters_of_rules_(counters) {}

  // A pooled connection for the calling thread (see WarmestConnection).
  PooledConnection pooled_connection();
  template <class Fn>
  auto with_connection(Fn&& fn) {
    PooledConnection connection = pooled_connection();
    return fn(*connection);
  }
  // A read, run once more on a new connection if its connection died.
  template <class Fn>
  auto read(Fn&& fn) {
    try {
      return with_connection(fn);
    } catch (const OutcomeUnknown&) {
      PooledConnection fresh = pool_of_rules_.acquire_fresh();
      return fn(*fresh);
    }
  }
  // A statement safe to run twice: run once more on the connection
  // `connection` gives next (a new one, the old one being broken) if its
  // connection died mid-statement.
  template <class Fn>
  static auto run_idempotent(const std::function<Connection&()>& connection, Fn&& fn) {
    try {
      return fn(connection());
    } catch (const OutcomeUnknown&) {
      return fn(connection());
    }
  }
  // The same on the caller's connection `c`, once more on another pooled
  // connection.
  template <class Fn>
  auto run_idempotent(Connection& c, Fn&& fn) {
    try {
      return fn(c);
    } catch (const OutcomeUnknown&) {
      return with_connection(fn);
    }
  }
  // What reading on a new connection shows of a statement whose outcome is
  // unknown.
  enum class Verdict { kApplied, kNotApplied, kRunAgain };
  // The one rule for a statement that changes rows: runs `statement`
  // (Connection& -> bool, true when it applied); if its connection dies
  // mid-statement, `decide` reads on a newly opened connection whether it
  // applied, and only kRunAgain runs it once more there (statements are
  // written so that a late first run and the second apply once: absolute
  // counts, the hold's own id matched). Throws BackendError when even the
  // read fails.
  bool run_reconciled(std::string_view name, const std::function<bool(Connection&)>& statement,
                      const std::function<Verdict(Connection&)>& decide);
  // The reading half of that rule, for a statement that died with `cause`
  // on a connection of the caller's own: settles the lost session, then
  // `decide`s on a newly opened connection. Throws BackendError when the
  // read fails.
  Verdict reconcile(std::string_view name, const OutcomeUnknown& cause,
                    const std::function<Verdict(Connection&)>& decide);

  // While one exists on a thread, its statements take the warmest idle
  // pooled connection rather than the one the thread used last (for the
  // asynchronous workers, which run any owner's step).
  class WarmestConnection {
   public:
    WarmestConnection();
    ~WarmestConnection();
    WarmestConnection(const WarmestConnection&) = delete;
    WarmestConnection& operator=(const WarmestConnection&) = delete;

   private:
    bool previous_;
  };

 private:
  ConnectionPool& pool_of_rules_;
  const std::shared_ptr<spdlog::logger>& logger_of_rules_;
  MetricCounters* const counters_of_rules_;
};

}  // namespace dlock::details
