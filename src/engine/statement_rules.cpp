#include "engine/statement_rules.hpp"

#include <spdlog/spdlog.h>

#include "base/printable.hpp"
#include "sql/bells.hpp"

namespace dlock::details {

namespace {
// False while a WarmestConnection exists on this thread.
thread_local bool t_thread_affinity = true;
}  // namespace

StatementRules::WarmestConnection::WarmestConnection() : previous_(t_thread_affinity) { t_thread_affinity = false; }
StatementRules::WarmestConnection::~WarmestConnection() { t_thread_affinity = previous_; }

PooledConnection StatementRules::pooled_connection() {
  // Each thread prefers the connection it used last: a hold's bell is the
  // session that took it, and the same thread usually releases, so the
  // release finds that session idle and can ring in its own statement.
  thread_local const ConnectionPool* last_pool = nullptr;
  thread_local std::uint64_t last_session = 0;
  const bool same_pool = last_pool == &pool_of_rules_;
  PooledConnection connection = pool_of_rules_.acquire(t_thread_affinity && same_pool ? last_session : 0);
  last_pool = &pool_of_rules_;
  last_session = connection->session_key();
  return connection;
}

bool StatementRules::run_reconciled(std::string_view name, const std::function<bool(Connection&)>& statement,
                                    const std::function<Verdict(Connection&)>& decide) {
  try {
    return with_connection(statement);
  } catch (const OutcomeUnknown& cause) {
    switch (reconcile(name, cause, decide)) {
      case Verdict::kApplied:
        return true;
      case Verdict::kNotApplied:
        return false;
      case Verdict::kRunAgain:
        break;
    }
    return with_connection(statement);
  }
}

StatementRules::Verdict StatementRules::reconcile(std::string_view name, const OutcomeUnknown& cause,
                                                  const std::function<Verdict(Connection&)>& decide) {
  logger_of_rules_->warn("dlock: connection lost mid-statement on {}; reading the row to learn the outcome: {}",
                printable(name), cause.what());
  try {
    // Not on a pooled connection the same fault may have killed too; and
    // only once the statement can no longer land behind the read's back.
    PooledConnection fresh = pool_of_rules_.acquire_fresh();
    settle_lost_session(*fresh, cause.session());
    const Verdict verdict = decide(*fresh);
    if (counters_of_rules_ != nullptr) counters_of_rules_->reconciled();
    return verdict;
  } catch (const BackendError& e) {
    throw BackendError(std::string("dlock: outcome unknown (") + cause.what() +
                           "), and the row could not be read: " + e.what(),
                       e.code() != 0 ? e.code() : cause.code(), e.code() != 0 ? e.sql_state() : cause.sql_state());
  }
}

}  // namespace dlock::details
