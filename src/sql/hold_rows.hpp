// The statements every kind of hold shares, over the lock table's rows
// (sql/schema.hpp): one list of hold columns, one way to read a row, to
// re-enter, release, free, renew and mark a hold. What differs between
// kinds (how a hold is taken, handed over, polled for) is in
// src/primitives/,
// built from the fragments below.
//
// A hold is live while its row's expire_time is ahead of the server's
// clock (NOW(6)). Every statement of a hold matches its random hold id
// (base/identity.hpp) and its live lease, so a statement of a hold that
// was lost never touches the next holder's row. A release moves the lease
// into the past and leaves the other columns as they are, so it updates
// the record in place (no column changes its length); reads show no holder
// for a row that is not live. Hold counts are written as absolute values
// ("state = 3"), so re-running a statement whose outcome was unknown
// cannot make the count drift.
//
// Each method runs one statement (IN-list methods one per chunk of up to
// kInListChunk rows) through run_statement's retry rule and throws
// BackendError, or OutcomeUnknown for a lost connection: the caller
// reconciles (engine/reconcile.hpp).
#pragma once

#include <cppconn/resultset.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "base/keys.hpp"
#include "sql/connection.hpp"

namespace spdlog {
class logger;
}

namespace dlock::details {

class Binder;

// Who writes a hold into a row.
struct Holder {
  std::string_view label;  // machine_id: the client's label, for operators
  std::uint64_t owner;     // owner_id: the owner within that client
  std::uint64_t hold_id;   // random, one per hold taken
  std::string_view host;   // holder_host (operators)
  std::uint32_t pid = 0;   // holder_pid (operators)
};

// A row as one read sees it.
struct HoldRow {
  RowKey key;
  bool exists = false;
  bool live = false;  // its lease runs, by the server's clock
  // The hold's columns; meaningful while live (a free row shows none).
  std::uint64_t hold_id = 0;
  std::uint64_t owner = 0;
  unsigned state = 0;  // 0 for a name held on after its release (unlock_at_least)
  bool watchdog = false;
  std::optional<std::int64_t> ttl_us;  // lease left, while live
  std::string bell;                    // empty: none
  bool marked = false;                 // a waiter elsewhere waits for its bell
  std::string machine;
  std::string host;
  std::uint32_t pid = 0;
  std::string acquired_at;  // "YYYY-MM-DDThh:mm:ss.ffffff", server time (UTC)
  std::optional<std::int64_t> held_for_us;
  // Always meaningful.
  std::uint64_t fence = 0;  // the current or last hold's token
  std::uint32_t bound = 0;  // a semaphore slot: the bound its permit was taken under
  std::uint64_t intent_id = 0;  // a client whose waiter goes next; 0: none live
  std::int64_t intent_ttl_us = 0;
  // intent_expire is in the future, whatever intent_id says: on a write
  // head, a writer of some client waits (its intent row keeps it so).
  bool intent_live = false;

  bool held_by(std::uint64_t id) const { return live && id != 0 && hold_id == id; }
};

// A hold of this client as the IN-list statements bind it (its key's slot
// may be kAnySlot: then the hold id finds its row among the name's).
struct HeldRow {
  RowKey key;
  std::uint64_t hold_id = 0;
};

// SQL fragments the kinds build their statements from. `a` is a table
// alias with its dot ("r."), or empty.
namespace fragments {
// The hold's lease runs.
std::string live(const std::string& a = "");
// The columns HoldRow reads, in its order: kRowColumns of them.
std::string row_columns(const std::string& a = "");
inline constexpr int kRowColumns = 20;
// A hold taken anew, its fence set to `fence` (an expression: "fence + 1");
// binds state, watchdog, owner, hold id, label, host, pid, lease (us), bell
// (bind_hold).
std::string take_assignments(const std::string& a, const std::string& fence);
// No intent of another client is live (binds the client's key once).
std::string no_foreign_intent(const std::string& a = "");
// Frees the hold: count 0, no renewal, no mark, lease moved to its grant
// plus a time bound as `at_least` (0: into the past).
std::string free_assignments(const std::string& a = "");
// A live hold handed to a new one (a direct handoff) under a fence grown by
// `fence_step`; a re-run that finds its own first run applied (the row
// already carries the new hold id) grows nothing. Binds what bind_hand_over
// binds.
std::string hand_over_assignments(const std::string& a, int fence_step);
}  // namespace fragments

// The lease a statement writes for a hold whose owner counts `lease_us`:
// that and a margin of a tenth of it, at most 100 ms. The owner counts the
// hold lost at its local deadline (the statement's send time + lease_us) on
// a thread that runs no I/O; the margin lets it be told before the server
// lets anyone else take the hold, also on a busy machine. Every statement
// that grants or extends a hold binds its lease through this.
inline std::int64_t written_lease_us(std::int64_t lease_us) {
  return lease_us + std::min<std::int64_t>(100'000, lease_us / 10);
}
// The other way: of a lease left on the server, what is left of the owner's
// (at the grant, exactly the owner's lease; never more). Where a server's
// count becomes a local deadline (a grant read back, a renewal read back)
// or is shown as time left (remaining_ttl, inspect); a waiter waits for the
// server's whole count.
inline std::int64_t owner_ttl_us(std::int64_t server_ttl_us) {
  return server_ttl_us - std::min<std::int64_t>(100'000, std::max<std::int64_t>(0, server_ttl_us) / 11);
}

// Binds what fragments::take_assignments takes.
void bind_hold(Binder& b, const Holder& holder, unsigned state, std::int64_t lease_us, bool watchdog,
               const std::string* bell);
// Binds what fragments::hand_over_assignments takes: the new hold id, its
// mode, owner and lease.
void bind_hand_over(Binder& b, std::uint64_t to, bool watchdog, std::uint64_t owner, std::int64_t lease_us);
// Reads a HoldRow from `rs`, whose columns from `first` on are
// fragments::row_columns.
HoldRow to_hold_row(sql::ResultSet& rs, int first = 1);

class HoldRows {
 public:
  HoldRows(std::string table, std::shared_ptr<spdlog::logger> logger);

  const std::string& table() const { return table_; }
  const std::string& quoted() const { return quoted_; }
  const std::shared_ptr<spdlog::logger>& logger() const { return logger_; }
  // Runs `body`, a statement that frees a hold (and with `ring`, rings the
  // session's bell: kRingTerm bound by bind_ring), with the retry rule of
  // run_statement. True if it changed a row. After a ring the session's
  // bell is settled (rang); after a failed one the connection is broken,
  // since which bell the session holds is unknown.
  template <class Body>
  bool run_free(Connection& c, const char* what, bool ring, Body&& body) const;
  // Runs `body` (one statement) with the retry rule of run_statement.
  template <class Body>
  auto run(Connection& c, const char* what, Body&& body) const;
  // Runs `sql`, its parameters bound by `bind(Binder&)`, as one update with
  // that rule; the rows it changed.
  template <class Bind>
  std::int64_t update(Connection& c, const char* what, const std::string& sql, Bind&& bind) const;
  // Runs `sql` as one query with that rule: `bind(Binder&)` binds its
  // parameters, `read(sql::ResultSet&)` reads its rows; what `read` returns.
  template <class Bind, class Read>
  auto query(Connection& c, const char* what, const std::string& sql, Bind&& bind, Read&& read) const;

  // ---- reads
  // The row (exists == false when there is none).
  HoldRow read(Connection& c, const RowKey& key) const;
  // The same, with only what a refused take asks (exists, live, hold_id,
  // ttl_us, intent_id, intent_ttl_us): the contended path, kept light.
  HoldRow read_state(Connection& c, const RowKey& key) const;
  // The live row of (kind, name) that carries `hold_id` (reconciliation:
  // whether a statement of that hold applied).
  std::optional<HoldRow> find(Connection& c, Kind kind, std::string_view name, std::uint64_t hold_id) const;
  // The rows of (kind, name): a semaphore's slots, a read-write lock's read holds.
  std::vector<HoldRow> read_name(Connection& c, Kind kind, std::string_view name) const;
  // The live rows of these holds.
  std::vector<HoldRow> read_holds(Connection& c, const std::vector<HeldRow>& holds) const;
  // How many rows of (kind, name) are live.
  std::size_t count_live(Connection& c, Kind kind, std::string_view name) const;
  // Every live row of `kinds` (all when empty), by kind and name (operator tools).
  std::vector<HoldRow> read_live(Connection& c, const std::vector<Kind>& kinds) const;

  // ---- one hold
  // Re-entry: count `state`, lease restarted in mode `watchdog`, while the
  // hold is live. False: it is not.
  bool retake(Connection& c, const RowKey& key, std::uint64_t hold_id, unsigned state, std::int64_t lease_us,
              bool watchdog) const;
  // The same statement run once, without the retry rule: for a statement
  // inside a transaction, which a deadlock rolls back as a whole.
  bool retake_once(Connection& c, const RowKey& key, std::uint64_t hold_id, unsigned state, std::int64_t lease_us,
                   bool watchdog) const;
  // Release down to `state` > 0 while the hold is live. False: it is not.
  bool release_to(Connection& c, const RowKey& key, std::uint64_t hold_id, unsigned state) const;
  enum class Marks { kAny, kUnmarked, kMarked };
  // Frees the live hold (fragments::free_assignments) where `marks` allows;
  // `ring`: ringing `c`'s bell in the same statement. False: nothing
  // changed (the hold was lost, or the marks did not match).
  bool free(Connection& c, const RowKey& key, std::uint64_t hold_id, std::int64_t at_least_us, Marks marks,
            bool ring) const;

  // ---- many holds (the watchdog, shutdown, bells)
  // Restarts the leases of these live watchdog-mode holds; how many rows.
  std::size_t renew(Connection& c, const std::vector<HeldRow>& holds, std::int64_t lease_us) const;
  // The same, skipping rows another transaction has locked (SELECT ... FOR
  // UPDATE SKIP LOCKED, then the UPDATE, in one transaction): the watchdog's
  // way around a row locked by a foreign transaction.
  std::size_t renew_skipping_locked(Connection& c, const std::vector<HeldRow>& holds, std::int64_t lease_us) const;
  // Frees these live holds (shutdown); how many.
  // With `ring`, the statement also rings `c`'s bell (see run_free); when
  // only some of the holds were live, `c` is marked broken instead (which
  // bell it holds is not known).
  std::size_t free_all(Connection& c, const std::vector<HeldRow>& holds, bool ring = false) const;
  // Live holds among `holds` that record bell `from` record `to` instead
  // (after their session's bell moved on).
  std::size_t restamp(Connection& c, const std::vector<HeldRow>& holds, const std::string& from,
                      const std::string* to) const;

  // ---- waiters elsewhere
  // A live hold's row as a waiter's watcher sees it.
  struct Watched {
    Kind kind = Kind::kLock;
    std::uint64_t slot = 0;
    std::uint64_t hold_id = 0;
    std::string bell;
    bool marked = false;
  };
  // The live rows of `kinds` of `name`, the soonest to expire first.
  std::vector<Watched> watched(Connection& c, const std::vector<Kind>& kinds, std::string_view name) const;
  // Marks the live rows of `kinds` of `name` that record a bell, and whose
  // hold ids do not carry `own_tag` (base/identity.hpp: the rows of the
  // marking client's own holds, whose releases wake its waiters locally),
  // as waited for, so their releases ring; how many changed.
  std::size_t mark(Connection& c, const std::vector<Kind>& kinds, std::string_view name, std::uint64_t own_tag) const;
  // This client's intent on these rows: its waiter goes next (takes by
  // other clients are refused while it is live), unless another client's
  // intent is live there. Returns the names it holds the intent on now.
  std::vector<std::string> set_intent(Connection& c, Kind kind, const std::vector<std::string>& names,
                                      std::uint64_t client_key, std::int64_t lease_us) const;
  void clear_intent(Connection& c, Kind kind, std::string_view name, std::uint64_t client_key) const;

  // ---- operator tools
  // Frees every live hold of (kind, name); how many. `slot_zero_only`: the
  // row at slot 0 alone (a read-write lock's head: its write hold, never a
  // waiting writer's intent row).
  std::size_t force(Connection& c, Kind kind, std::string_view name, bool slot_zero_only = false) const;

 private:
  // The rows (fragments::row_columns) that match `where`, whose parameters
  // `bind` binds.
  template <class Bind>
  std::vector<HoldRow> select(Connection& c, const char* what, const std::string& where, Bind&& bind) const;
  // Updates (SET `set`) those of `holds` that match `condition` and that no
  // other transaction has locked: a locking read that skips locked rows,
  // then an UPDATE of the rows it got, in one transaction. The binders add
  // the parameters of `set` and of `condition`. Returns the rows changed.
  template <class BindSet, class BindCondition>
  std::size_t update_skipping_locked(Connection& c, const std::vector<HeldRow>& holds, const char* what,
                                     const std::string& set, BindSet&& bind_set, const std::string& condition,
                                     BindCondition&& bind_condition) const;

  // free's statement, built once: by ring, marks and a key's slot (any or one).
  static constexpr std::size_t free_variant(bool ring, Marks marks, bool any_slot) {
    return (ring ? 6 : 0) + static_cast<std::size_t>(marks) * 2 + (any_slot ? 1 : 0);
  }

  std::string table_;
  std::shared_ptr<spdlog::logger> logger_;
  std::string quoted_;
  std::string free_sql_[12];
};

}  // namespace dlock::details

#include "sql/bells.hpp"
#include "sql/statement.hpp"

namespace dlock::details {

template <class Body>
bool HoldRows::run_free(Connection& c, const char* what, bool ring, Body&& body) const {
  bool changed = false;
  try {
    changed = run(c, what, std::forward<Body>(body)) > 0;
  } catch (const BackendError&) {
    if (ring) c.mark_broken();
    throw;
  }
  if (ring) rang(c, changed);
  return changed;
}

template <class Body>
auto HoldRows::run(Connection& c, const char* what, Body&& body) const {
  return run_statement(c, logger_, what, std::forward<Body>(body));
}

template <class Bind>
std::int64_t HoldRows::update(Connection& c, const char* what, const std::string& sql, Bind&& bind) const {
  return run(c, what, [&] {
    auto& ps = c.prepared(sql);
    Binder b(ps);
    bind(b);
    return execute_update(ps);
  });
}

template <class Bind, class Read>
auto HoldRows::query(Connection& c, const char* what, const std::string& sql, Bind&& bind, Read&& read) const {
  return run(c, what, [&] {
    auto& ps = c.prepared(sql);
    Binder b(ps);
    bind(b);
    std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
    if constexpr (std::is_void_v<decltype(read(*rs))>) {
      read(*rs);
      return 0;
    } else {
      return read(*rs);
    }
  });
}

}  // namespace dlock::details
