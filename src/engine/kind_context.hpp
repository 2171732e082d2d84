// What a kind of hold (hold_kind.hpp) may use of the engine it runs on:
// the client's identity, the rules for running statements (statement_rules.hpp),
// the table's rows, the waiters here, the io thread, and the few verbs
// below. Nothing else: a kind never reaches the engine's registry of holds,
// its drivers, its release, its watchdog or its bell watcher. The engine
// is the one implementation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/keys.hpp"
#include "dlock/options.hpp"
#include "engine/client_identity.hpp"
#include "engine/hold_kind.hpp"
#include "engine/statement_rules.hpp"
#include "runtime/io_thread.hpp"
#include "sql/hold_rows.hpp"
#include "wakeup/waiter_registry.hpp"

namespace spdlog {
class logger;
}

namespace dlock::details {

class KindContext : public ClientIdentity, public StatementRules {
 public:
  KindContext(const std::string& machine_id, ConnectionPool& pool, const std::shared_ptr<spdlog::logger>& logger,
              MetricCounters* counters)
      : ClientIdentity(machine_id), StatementRules(pool, logger, counters) {}
  KindContext(const KindContext&) = delete;
  KindContext& operator=(const KindContext&) = delete;

  virtual const Options& options() const = 0;
  virtual const std::shared_ptr<spdlog::logger>& logger() const = 0;
  virtual const HoldRows& rows() const = 0;
  // The waiters here, to wake (HoldKind::wake) or tell.
  virtual WaiterRegistry& waiters() = 0;
  // Another kind (the other side of a primitive).
  virtual HoldKind& kind(Kind k) const = 0;

  // Every kind's take, under run_reconciled: `statement` takes on a pooled
  // connection with its session's bell (null: none); `t` records the bell's
  // session. On an unknown outcome, a hold found by `hold_id` was taken
  // (kSlotAndFence: its row's slot and fence are the hold's, not so for a
  // read); none, the take runs again.
  enum class TakeLearns { kNothing, kSlotAndFence };
  virtual bool take_reconciled(HoldKind::Taken& t, NameKeyView key, std::uint64_t hold_id, TakeLearns learns,
                               const std::function<bool(Connection&, const std::string* bell)>& statement) = 0;

  // Runs `task` on the io thread (it may run statements there).
  virtual void post_io(std::string what, IoThread::Task task) = 0;
  // Renews every watchdog-mode hold now, on the io thread (a hold granted
  // with a lease shorter than watchdog_timeout).
  virtual void renew_now(const IoThread::ConnectionSource& connection) = 0;
  // The owner's live hold as this client knows it (no SQL).
  virtual std::optional<Hold> local_hold(NameKeyView key, std::uint64_t owner) const = 0;
  // `key`'s row was seen free while a local hold on it looks live: the
  // next attempt asks the database, not that hold.
  virtual void hint_free_if_held_here(NameKeyView key) = 0;
  // How long a waiting client's intent on a row lasts unless renewed.
  virtual Millis intent_lease() const = 0;
  // Whether this client's intent is on `key`'s row (no SQL): a take need
  // clear it only then (HoldKind::Taken::cleared_intent).
  virtual bool intends(NameKeyView key) const = 0;

 protected:
  ~KindContext() = default;
};

}  // namespace dlock::details
